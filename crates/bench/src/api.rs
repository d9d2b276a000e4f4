//! A small REST client for the benchmark (reqwest, HTTP/1.1 keep-alive).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// Calls the REST API with one bearer token. Cloning shares the connection pool.
#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    auth: String,
}

impl Api {
    /// A client for `base` (e.g. `http://127.0.0.1:1234`) keeping up to `pool` idle connections.
    pub fn new(base: &str, token: &str, pool: usize) -> Result<Self> {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(pool)
            .tcp_nodelay(true)
            .timeout(Duration::from_secs(60))
            .build()?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            auth: format!("Bearer {token}"),
        })
    }

    /// A client over a prepared reqwest client (e.g. one trusting a test CA).
    pub fn from_client(http: reqwest::Client, base: &str, token: &str) -> Self {
        Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            auth: format!("Bearer {token}"),
        }
    }

    /// The same connection pool with another token.
    pub fn with_token(&self, token: &str) -> Self {
        Self {
            http: self.http.clone(),
            base: self.base.clone(),
            auth: format!("Bearer {token}"),
        }
    }

    /// The server's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The bearer token this client sends.
    pub fn token(&self) -> &str {
        self.auth.trim_start_matches("Bearer ")
    }

    async fn reply(what: &str, resp: reqwest::Response) -> Result<Value> {
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .with_context(|| format!("{what}: reading the body"))?;
        if !status.is_success() {
            bail!("{what}: HTTP {status}: {}", String::from_utf8_lossy(&bytes));
        }
        serde_json::from_slice(&bytes).with_context(|| format!("{what}: body is not JSON"))
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Result<Value> {
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .header("authorization", &self.auth)
            .json(body)
            .send()
            .await
            .with_context(|| format!("POST {path}"))?;
        Self::reply(&format!("POST {path}"), resp).await
    }

    /// `PATCH path?update_mask=mask` with a JSON body.
    pub async fn patch(&self, path: &str, mask: &str, body: &Value) -> Result<Value> {
        let resp = self
            .http
            .patch(format!("{}{path}", self.base))
            .query(&[("update_mask", mask)])
            .header("authorization", &self.auth)
            .json(body)
            .send()
            .await
            .with_context(|| format!("PATCH {path}"))?;
        Self::reply(&format!("PATCH {path}"), resp).await
    }

    /// `DELETE path` (the body of the answer, e.g. the object marked for deletion).
    pub async fn delete(&self, path: &str) -> Result<Value> {
        let resp = self
            .http
            .delete(format!("{}{path}", self.base))
            .header("authorization", &self.auth)
            .send()
            .await
            .with_context(|| format!("DELETE {path}"))?;
        Self::reply(&format!("DELETE {path}"), resp).await
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Result<Value> {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .header("authorization", &self.auth)
            .send()
            .await
            .with_context(|| format!("GET {path}"))?;
        Self::reply(&format!("GET {path}"), resp).await
    }

    /// `GET path?filter=…&limit=…` → the list envelope.
    pub async fn list(&self, path: &str, filter: &str, limit: i64) -> Result<Value> {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .query(&[("filter", filter), ("limit", &limit.to_string())])
            .header("authorization", &self.auth)
            .send()
            .await
            .with_context(|| format!("GET {path}?filter={filter}"))?;
        Self::reply(&format!("GET {path}?filter={filter}"), resp).await
    }

    /// How many objects of the collection match `filter` (the list's `total`).
    pub async fn count(&self, path: &str, filter: &str) -> Result<i64> {
        let v = self.list(path, filter, 1).await?;
        total_of(&v).with_context(|| format!("list {path}: no 'total' in {v}"))
    }

    /// Waits until the default NetworkClass and the tenant `tenant` are READY (VirtualNetworks
    /// can be made only then).
    pub async fn wait_class_and_tenant_ready(&self, tenant: &str) -> Result<()> {
        for (path, name, state) in [
            (
                "/api/private/v1/network_classes",
                "default",
                "NETWORK_CLASS_STATE",
            ),
            ("/api/private/v1/tenants", tenant, "TENANT_STATE"),
        ] {
            let named = format!("this.metadata.name == \"{name}\" && this.status.state == ");
            self.wait_count(
                path,
                &format!("{named}\"{state}_READY\""),
                &format!("{named}\"{state}_FAILED\""),
                1,
                Duration::from_secs(60),
            )
            .await?;
        }
        Ok(())
    }

    /// Polls until `count(path, filter) >= target`; fails early when `failed` matches anything
    /// or after `timeout`. Returns how long it waited.
    pub async fn wait_count(
        &self,
        path: &str,
        filter: &str,
        failed: &str,
        target: i64,
        timeout: Duration,
    ) -> Result<Duration> {
        let start = Instant::now();
        let mut polls = 0u64;
        loop {
            let n = self.count(path, filter).await?;
            if n >= target {
                return Ok(start.elapsed());
            }
            polls += 1;
            if polls.is_multiple_of(10) {
                let bad = self.count(path, failed).await?;
                if bad > 0 {
                    let sample = self.list(path, failed, 1).await?;
                    bail!(
                        "{bad} objects FAILED while waiting for {target} ({n} ready); e.g. {sample}"
                    );
                }
            }
            if start.elapsed() > timeout {
                bail!("timed out after {timeout:?}: {n} of {target} match `{filter}`");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The `total` of a list envelope (a number, or an int64 rendered as a string).
pub fn total_of(v: &Value) -> Option<i64> {
    match v.get("total")? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// The `id` of an object.
pub fn id_of(v: &Value) -> Result<String> {
    v.get("id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .with_context(|| format!("no id in {v}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn total_accepts_numbers_and_strings() {
        assert_eq!(total_of(&json!({"total": 3})), Some(3));
        assert_eq!(total_of(&json!({"total": "7"})), Some(7));
        assert_eq!(total_of(&json!({})), None);
    }
}
