//! A small REST client for the osac API: JSON in and out, bearer auth, and errors that carry
//! the server's `{"code","message"}`.

use std::time::Duration;

use reqwest::header::ACCEPT;
use reqwest::{Method, StatusCode, Url};
use serde_json::Value;

use super::kind::{Scope, api_root};
use super::tls::TlsOptions;

/// Largest page the server hands out.
pub const MAX_PAGE: u64 = 1000;

/// A failed API call. `Display` is what the user sees after `error: `.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error status.
    #[error("{message} ({code})")]
    Api {
        status: u16,
        code: String,
        message: String,
    },
    /// Nothing listens at the URL (or the name does not resolve).
    #[error("cannot reach osac at {url}: is `osac server --dev` running?")]
    Unreachable { url: String },
    /// The TLS handshake failed (e.g. the server's certificate is not trusted).
    #[error(
        "TLS handshake with osac at {url} failed: {detail} (an https server signed by a private CA needs --ca-file, or `osac login --ca-file`)"
    )]
    Handshake { url: String, detail: String },
    /// The server did not answer in time.
    #[error("timed out waiting for osac at {url}")]
    Timeout { url: String },
    /// Any other transport problem.
    #[error("talking to osac at {url}: {detail}")]
    Transport { url: String, detail: String },
    /// The TLS settings (CA file) cannot be used.
    #[error("{0}")]
    Tls(#[from] super::tls::TlsSetupError),
    /// The server answered something that is not the API's JSON.
    #[error("unexpected response from osac at {url}: {detail}")]
    BadResponse { url: String, detail: String },
}

impl ClientError {
    /// The gRPC code name of an API error.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether the object does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some("NOT_FOUND")
    }

    /// Whether retrying the same call later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self.code(), Some("UNAVAILABLE")) || matches!(self, ClientError::Timeout { .. })
    }
}

/// One page of a list.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub items: Vec<Value>,
    pub total: Option<u64>,
}

/// List parameters.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub filter: Option<String>,
    pub order: Option<String>,
    /// At most this many items in all (`None`: every item, fetched page by page).
    pub limit: Option<u64>,
    pub offset: u64,
}

/// The REST client.
#[derive(Debug, Clone)]
pub struct Api {
    http: reqwest::Client,
    /// The same TLS settings without an overall timeout, for event streams.
    streaming: reqwest::Client,
    base: Url,
    display: String,
    token: String,
}

impl Api {
    /// A client for the server at `url` (e.g. `http://127.0.0.1:8000`) using `token`.
    pub fn new(url: &str, token: &str) -> Result<Api, ClientError> {
        Api::with_tls(url, token, &TlsOptions::default())
    }

    /// A client for the server at `url` checking its certificate as `tls` says.
    pub fn with_tls(url: &str, token: &str, tls: &TlsOptions) -> Result<Api, ClientError> {
        let bad = |detail: String| ClientError::BadResponse {
            url: url.to_string(),
            detail,
        };
        let base = Url::parse(url).map_err(|e| bad(format!("invalid URL: {e}")))?;
        if base.cannot_be_a_base() || !matches!(base.scheme(), "http" | "https") {
            return Err(bad("invalid URL: expected http://HOST:PORT".into()));
        }
        let built = |e: reqwest::Error| ClientError::Transport {
            url: url.to_string(),
            detail: chain(&e),
        };
        let http = tls
            .client_builder()?
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(built)?;
        // No overall timeout: a watch lasts as long as the user wants it.
        let streaming = tls
            .client_builder()?
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(built)?;
        Ok(Api {
            http,
            streaming,
            base,
            display: url.trim_end_matches('/').to_string(),
            token: token.to_string(),
        })
    }

    /// The server URL as given.
    pub fn url(&self) -> &str {
        &self.display
    }

    /// `{base}/api/<scope>/v1/<parts…>`, each part percent-encoded as one segment.
    pub fn endpoint(&self, scope: Scope, parts: &[&str]) -> Url {
        let mut u = self.base.clone();
        if let Ok(mut segs) = u.path_segments_mut() {
            segs.pop_if_empty();
            segs.extend(api_root(scope));
            segs.extend(parts);
        }
        u
    }

    /// Sends one request; returns the JSON body (`Null` when empty).
    pub async fn call(
        &self,
        method: Method,
        url: Url,
        body: Option<&Value>,
    ) -> Result<Value, ClientError> {
        let mut req = self
            .http
            .request(method.clone(), url.clone())
            .header(ACCEPT, "application/json");
        if !self.token.is_empty() {
            req = req.bearer_auth(&self.token);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|e| self.transport(e))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| self.transport(e))?;
        if status.is_success() {
            if text.trim().is_empty() {
                return Ok(Value::Null);
            }
            return serde_json::from_str(&text).map_err(|e| ClientError::BadResponse {
                url: self.display.clone(),
                detail: format!("{method} {}: invalid JSON: {e}", url.path()),
            });
        }
        Err(api_error(
            status,
            &text,
            &format!("{method} {}", url.path()),
        ))
    }

    /// The client for event streams (no overall timeout).
    pub fn streaming_client(&self) -> &reqwest::Client {
        &self.streaming
    }

    /// `GET /version` (no token needed): the server's release.
    pub async fn server_version(&self) -> Result<String, ClientError> {
        let mut url = self.base.clone();
        if let Ok(mut segs) = url.path_segments_mut() {
            segs.pop_if_empty();
            segs.push("version");
        }
        let v = self.call(Method::GET, url, None).await?;
        v.get("version")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| ClientError::BadResponse {
                url: self.display.clone(),
                detail: "GET /version: no 'version' in the answer".into(),
            })
    }

    /// The bearer token calls send.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The error of a request that got no answer.
    pub fn transport_error(&self, e: reqwest::Error) -> ClientError {
        self.transport(e)
    }

    fn transport(&self, e: reqwest::Error) -> ClientError {
        let url = self.display.clone();
        let detail = chain(&e);
        let tls = ["certificate", "handshake", "tls", "alert"]
            .iter()
            .any(|w| detail.to_ascii_lowercase().contains(w));
        if e.is_connect() && tls {
            ClientError::Handshake { url, detail }
        } else if e.is_connect() {
            ClientError::Unreachable { url }
        } else if e.is_timeout() {
            ClientError::Timeout { url }
        } else {
            ClientError::Transport { url, detail }
        }
    }

    /// `GET /x?offset&limit&filter&order` — one page.
    pub async fn list_page(
        &self,
        scope: Scope,
        collection: &str,
        filter: Option<&str>,
        order: Option<&str>,
        offset: u64,
        limit: u64,
    ) -> Result<Page, ClientError> {
        let mut url = self.endpoint(scope, &[collection]);
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("offset", &offset.to_string());
            q.append_pair("limit", &limit.to_string());
            if let Some(f) = filter.filter(|f| !f.is_empty()) {
                q.append_pair("filter", f);
            }
            if let Some(o) = order.filter(|o| !o.is_empty()) {
                q.append_pair("order", o);
            }
        }
        let v = self.call(Method::GET, url, None).await?;
        let items = match v.get("items") {
            Some(Value::Array(a)) => a.clone(),
            None | Some(Value::Null) => Vec::new(),
            Some(_) => {
                return Err(ClientError::BadResponse {
                    url: self.display.clone(),
                    detail: format!("list of {collection}: 'items' is not an array"),
                });
            }
        };
        Ok(Page {
            items,
            total: v.get("total").and_then(as_u64),
        })
    }

    /// Lists items, page by page, up to `q.limit` (all when `None`).
    pub async fn list(
        &self,
        scope: Scope,
        collection: &str,
        q: &ListQuery,
    ) -> Result<Vec<Value>, ClientError> {
        let mut out = Vec::new();
        let mut offset = q.offset;
        loop {
            let want = match q.limit {
                Some(l) => l.saturating_sub(out.len() as u64).min(MAX_PAGE),
                None => MAX_PAGE,
            };
            if want == 0 {
                break;
            }
            let page = self
                .list_page(
                    scope,
                    collection,
                    q.filter.as_deref(),
                    q.order.as_deref(),
                    offset,
                    want,
                )
                .await?;
            let n = page.items.len() as u64;
            out.extend(page.items);
            offset += n;
            let done = n == 0
                || page.total.is_some_and(|t| offset >= t)
                || (page.total.is_none() && n < want);
            if done {
                break;
            }
        }
        Ok(out)
    }

    /// `GET /x/{id}` (a name works too).
    pub async fn get(
        &self,
        scope: Scope,
        collection: &str,
        id: &str,
    ) -> Result<Value, ClientError> {
        self.call(Method::GET, self.endpoint(scope, &[collection, id]), None)
            .await
    }

    /// `POST /x`.
    pub async fn create(
        &self,
        scope: Scope,
        collection: &str,
        body: &Value,
    ) -> Result<Value, ClientError> {
        self.call(
            Method::POST,
            self.endpoint(scope, &[collection]),
            Some(body),
        )
        .await
    }

    /// `PATCH /x/{id}?update_mask=…[&lock=true]`.
    pub async fn patch(
        &self,
        scope: Scope,
        collection: &str,
        id: &str,
        body: &Value,
        update_mask: &[String],
        lock: bool,
    ) -> Result<Value, ClientError> {
        let mut url = self.endpoint(scope, &[collection, id]);
        {
            let mut q = url.query_pairs_mut();
            if !update_mask.is_empty() {
                q.append_pair("update_mask", &update_mask.join(","));
            }
            if lock {
                q.append_pair("lock", "true");
            }
        }
        if url.query() == Some("") {
            url.set_query(None);
        }
        self.call(Method::PATCH, url, Some(body)).await
    }

    /// `DELETE /x/{id}`.
    pub async fn delete(
        &self,
        scope: Scope,
        collection: &str,
        id: &str,
    ) -> Result<(), ClientError> {
        self.call(
            Method::DELETE,
            self.endpoint(scope, &[collection, id]),
            None,
        )
        .await
        .map(drop)
    }
}

fn as_u64(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.parse().ok())
}

/// The error message with its causes: reqwest's own message is terse.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        src = c.source();
    }
    s
}

/// Builds the error of a non-2xx answer: the `{"code","message"}` body when there is one,
/// otherwise the HTTP status (with the request, to make a wrong route obvious).
pub fn api_error(status: StatusCode, body: &str, request: &str) -> ClientError {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let field = |k: &str| parsed.as_ref().and_then(|v| v.get(k));
    let code = match field("code") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::Number(n)) => n.as_u64().map(grpc_name).unwrap_or("UNKNOWN").to_string(),
        _ => http_code_name(status),
    };
    let message = match field("message")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
    {
        Some(m) => m.to_string(),
        None => {
            let reason = status.canonical_reason().unwrap_or("error").to_string();
            let text = body.trim();
            if text.is_empty() || parsed.is_some() || text.len() > 300 {
                format!("{request}: HTTP {} {reason}", status.as_u16())
            } else {
                format!("{request}: HTTP {} {reason}: {text}", status.as_u16())
            }
        }
    };
    ClientError::Api {
        status: status.as_u16(),
        code,
        message,
    }
}

fn http_code_name(status: StatusCode) -> String {
    match status.as_u16() {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        405 => "UNIMPLEMENTED",
        409 => "ALREADY_EXISTS",
        412 => "FAILED_PRECONDITION",
        429 => "RESOURCE_EXHAUSTED",
        501 => "UNIMPLEMENTED",
        502..=504 => "UNAVAILABLE",
        500..=599 => "INTERNAL",
        _ => return format!("HTTP_{}", status.as_u16()),
    }
    .to_string()
}

fn grpc_name(n: u64) -> &'static str {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    usize::try_from(n)
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or("UNKNOWN")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error_body(code: &str, message: &str) -> String {
        json!({"code": code, "message": message, "details": []}).to_string()
    }

    #[test]
    fn error_from_body() {
        let e = api_error(
            StatusCode::PRECONDITION_FAILED,
            &error_body("FAILED_PRECONDITION", "subnet 'a' is in use"),
            "DELETE /x",
        );
        assert_eq!(e.to_string(), "subnet 'a' is in use (FAILED_PRECONDITION)");
        assert_eq!(e.code(), Some("FAILED_PRECONDITION"));
    }

    #[test]
    fn error_without_body() {
        let e = api_error(StatusCode::NOT_FOUND, "", "GET /api/private/v1/managers");
        assert_eq!(
            e.to_string(),
            "GET /api/private/v1/managers: HTTP 404 Not Found (NOT_FOUND)"
        );
        assert!(e.is_not_found());
        let e = api_error(
            StatusCode::BAD_REQUEST,
            r#"{"code":5,"message":"gone"}"#,
            "GET /",
        );
        assert_eq!(e.to_string(), "gone (NOT_FOUND)");
        let e = api_error(StatusCode::BAD_GATEWAY, "upstream down", "GET /");
        assert_eq!(
            e.to_string(),
            "GET /: HTTP 502 Bad Gateway: upstream down (UNAVAILABLE)"
        );
        assert!(e.is_transient());
    }

    #[test]
    fn endpoints_encode_segments() {
        let api = Api::new("http://127.0.0.1:8000/", "t").unwrap();
        assert_eq!(
            api.endpoint(Scope::Tenant, &["subnets", "my subnet"])
                .as_str(),
            "http://127.0.0.1:8000/api/fulfillment/v1/subnets/my%20subnet"
        );
        let api = Api::new("http://host/prefix", "t").unwrap();
        assert_eq!(
            api.endpoint(Scope::Provider, &["tokens"]).as_str(),
            "http://host/prefix/api/private/v1/tokens"
        );
        assert!(Api::new("not a url", "t").is_err());
    }
}
