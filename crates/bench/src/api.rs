//! The benchmark's use of the REST client ([`osac_client::Api`], HTTP/1.1 keep-alive): how its
//! clients are built, and the polls it waits with.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
pub use osac_client::Api;
use osac_client::{Method, Options, TlsOptions};
use serde_json::Value;

/// A client for `base` (e.g. `http://127.0.0.1:1234`) keeping up to `pool` idle connections,
/// checking an https server's certificate as `tls` says.
pub fn client(base: &str, token: &str, pool: usize, tls: TlsOptions) -> Result<Api> {
    Ok(Api::with_options(
        base,
        token,
        &Options {
            tls,
            max_idle_per_host: Some(pool),
        },
    )?)
}

/// The polls and counts of the benchmark, on the REST client.
pub trait Polls {
    /// `GET path?filter=…&limit=…` → the list envelope.
    async fn list_where(&self, path: &str, filter: &str, limit: i64) -> Result<Value>;

    /// How many objects of the collection match `filter` (the list's `total`).
    async fn count(&self, path: &str, filter: &str) -> Result<i64>;

    /// Waits until the default NetworkClass and the tenant `tenant` are READY (VirtualNetworks
    /// can be made only then).
    async fn wait_class_and_tenant_ready(&self, tenant: &str) -> Result<()>;

    /// Polls until `count(path, filter) >= target`; fails early when `failed` matches anything
    /// or after `timeout`. Returns how long it waited.
    async fn wait_count(
        &self,
        path: &str,
        filter: &str,
        failed: &str,
        target: i64,
        timeout: Duration,
    ) -> Result<Duration>;
}

impl Polls for Api {
    async fn list_where(&self, path: &str, filter: &str, limit: i64) -> Result<Value> {
        let mut url = self.url_of(path)?;
        url.query_pairs_mut()
            .append_pair("filter", filter)
            .append_pair("limit", &limit.to_string());
        self.call(Method::GET, url, None)
            .await
            .with_context(|| format!("GET {path}?filter={filter}"))
    }

    async fn count(&self, path: &str, filter: &str) -> Result<i64> {
        let v = self.list_where(path, filter, 1).await?;
        total_of(&v).with_context(|| format!("list {path}: no 'total' in {v}"))
    }

    async fn wait_class_and_tenant_ready(&self, tenant: &str) -> Result<()> {
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

    async fn wait_count(
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
                    let sample = self.list_where(path, failed, 1).await?;
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
