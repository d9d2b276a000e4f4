//! The REST client: JSON in and out, bearer auth, TLS as [`TlsOptions`] says, and errors that
//! carry the server's `{"code","message"}`.
//!
//! Requests name their target three ways: an object path of one API ([`Api::get`],
//! [`Api::list`], … with a [`Scope`] and a collection), a server path with its query
//! ([`Api::get_path`], [`Api::post_path`], …), or a whole URL ([`Api::call`], and
//! [`Api::send`], which hands back any answer, refusals included, for callers that judge the
//! status themselves).

use std::time::Duration;

use osac_model::Scope;
use reqwest::header::{ACCEPT, CONTENT_TYPE, WARNING};
use reqwest::{Method, StatusCode, Url};
use serde_json::Value;

use crate::error::{ClientError, api_error, chain};
use crate::tls::TlsOptions;

/// A successful answer and the warnings that came with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Warned {
    /// The JSON body (`Null` when empty).
    pub body: Value,
    /// The text of each `Warning` header, in order.
    pub warnings: Vec<String>,
}

/// The text of a `Warning` header value: the quoted warn-text of `299 - "text"` (RFC 7234),
/// or the whole value when it is not in that form.
pub fn warning_text(value: &str) -> String {
    let quoted = value
        .split_once('"')
        .and_then(|(_, rest)| rest.rsplit_once('"'))
        .map(|(text, _)| text);
    quoted.unwrap_or(value).to_string()
}

/// Largest page the server hands out.
pub const MAX_PAGE: u64 = 1000;

/// Path segments of the root of the API that serves `scope`: the tenants' public API or the
/// provider's private API.
pub fn api_root(scope: Scope) -> [&'static str; 3] {
    match scope {
        Scope::Tenant => ["api", "fulfillment", "v1"],
        Scope::Provider => ["api", "private", "v1"],
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

/// How the client connects, besides the server's URL and the token.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// How the server's certificate is checked.
    pub tls: TlsOptions,
    /// Idle keep-alive connections kept per host (`None`: as many as were open). Clients that
    /// run many requests at once (the benchmark, the tests) keep them for the next round.
    pub max_idle_per_host: Option<usize>,
}

/// An answer of any status, as [`Api::send`] returns it.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    pub text: String,
}

impl Reply {
    /// The body as JSON (`None` when it is not JSON).
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.text).ok()
    }
}

/// The REST client. Cloning it (or [`Api::with_token`]) shares the connection pool.
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
    /// A client for the server at `url` (e.g. `http://127.0.0.1:8000`) using `token` (empty:
    /// no `Authorization` header).
    pub fn new(url: &str, token: &str) -> Result<Api, ClientError> {
        Api::with_options(url, token, &Options::default())
    }

    /// A client for the server at `url` checking its certificate as `tls` says.
    pub fn with_tls(url: &str, token: &str, tls: &TlsOptions) -> Result<Api, ClientError> {
        Api::with_options(
            url,
            token,
            &Options {
                tls: tls.clone(),
                ..Options::default()
            },
        )
    }

    /// A client for the server at `url` connecting as `options` says.
    pub fn with_options(url: &str, token: &str, options: &Options) -> Result<Api, ClientError> {
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
        let builder = || -> Result<reqwest::ClientBuilder, ClientError> {
            let mut b = options
                .tls
                .client_builder()?
                .connect_timeout(Duration::from_secs(5))
                // Small JSON requests: no waiting to fill a segment.
                .tcp_nodelay(true);
            if let Some(n) = options.max_idle_per_host {
                b = b.pool_max_idle_per_host(n);
            }
            Ok(b)
        };
        let http = builder()?
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(built)?;
        // No overall timeout: a watch lasts as long as the user wants it.
        let streaming = builder()?.build().map_err(built)?;
        Ok(Api {
            http,
            streaming,
            base,
            display: url.trim_end_matches('/').to_string(),
            token: token.to_string(),
        })
    }

    /// The same server and connection pool with another token.
    pub fn with_token(&self, token: &str) -> Api {
        Api {
            token: token.to_string(),
            ..self.clone()
        }
    }

    /// The server URL as given (without a trailing `/`).
    pub fn url(&self) -> &str {
        &self.display
    }

    /// The bearer token calls send.
    pub fn token(&self) -> &str {
        &self.token
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

    /// `{base}{path}` for a server path with an optional query, e.g.
    /// `/api/private/v1/tenants?limit=1`.
    pub fn url_of(&self, path: &str) -> Result<Url, ClientError> {
        let full = format!("{}{path}", self.display);
        Url::parse(&full).map_err(|e| ClientError::BadResponse {
            url: self.display.clone(),
            detail: format!("invalid URL {full}: {e}"),
        })
    }

    /// A request to `url` carrying the token.
    fn request(
        &self,
        client: &reqwest::Client,
        method: Method,
        url: Url,
    ) -> reqwest::RequestBuilder {
        let req = client.request(method, url);
        if self.token.is_empty() {
            req
        } else {
            req.bearer_auth(&self.token)
        }
    }

    /// Sends one request; returns the JSON body (`Null` when empty). A non-2xx answer is
    /// [`ClientError::Api`].
    pub async fn call(
        &self,
        method: Method,
        url: Url,
        body: Option<&Value>,
    ) -> Result<Value, ClientError> {
        Ok(self.call_warned(method, url, body).await?.body)
    }

    /// [`Api::call`], also returning the texts of the answer's `Warning` headers (e.g. a
    /// deprecated input the server still accepted).
    pub async fn call_warned(
        &self,
        method: Method,
        url: Url,
        body: Option<&Value>,
    ) -> Result<Warned, ClientError> {
        let mut req = self
            .request(&self.http, method.clone(), url.clone())
            .header(ACCEPT, "application/json");
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|e| self.transport(&e))?;
        let status = resp.status();
        let warnings = resp
            .headers()
            .get_all(WARNING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(warning_text)
            .collect();
        let text = resp.text().await.map_err(|e| self.transport(&e))?;
        if status.is_success() {
            if text.trim().is_empty() {
                return Ok(Warned {
                    body: Value::Null,
                    warnings,
                });
            }
            let body = serde_json::from_str(&text).map_err(|e| ClientError::BadResponse {
                url: self.display.clone(),
                detail: format!("{method} {}: invalid JSON: {e}", url.path()),
            })?;
            return Ok(Warned { body, warnings });
        }
        Err(api_error(
            status,
            &text,
            &format!("{method} {}", url.path()),
        ))
    }

    /// Sends `body` (JSON text, sent as given even when it is not valid JSON) to `url` and
    /// returns the answer whatever its status. Only a request that gets no answer is an error.
    pub async fn send(
        &self,
        method: Method,
        url: Url,
        body: Option<Vec<u8>>,
    ) -> Result<Reply, ClientError> {
        let mut req = self.request(&self.http, method, url);
        if let Some(b) = body {
            req = req.header(CONTENT_TYPE, "application/json").body(b);
        }
        let resp = req.send().await.map_err(|e| self.transport(&e))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| self.transport(&e))?;
        Ok(Reply { status, text })
    }

    /// The client without an overall timeout, for event streams.
    pub(crate) fn streaming_client(&self) -> &reqwest::Client {
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

    /// The error of a request that got no answer.
    pub(crate) fn transport(&self, e: &reqwest::Error) -> ClientError {
        ClientError::transport(&self.display, e)
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
        Ok(self.list_counted(scope, collection, q).await?.items)
    }

    /// [`Api::list`] with the number of matching objects the server reported (all of them,
    /// not only those fetched: more than the items with `limit`).
    pub async fn list_counted(
        &self,
        scope: Scope,
        collection: &str,
        q: &ListQuery,
    ) -> Result<Page, ClientError> {
        let mut out = Vec::new();
        let mut total = None;
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
            total = page.total.or(total);
            out.extend(page.items);
            offset += n;
            let done = n == 0
                || page.total.is_some_and(|t| offset >= t)
                || (page.total.is_none() && n < want);
            if done {
                break;
            }
        }
        Ok(Page { items: out, total })
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
        Ok(self.create_warned(scope, collection, body).await?.body)
    }

    /// `POST /x`, with the server's warnings about the request (see [`Api::call_warned`]).
    pub async fn create_warned(
        &self,
        scope: Scope,
        collection: &str,
        body: &Value,
    ) -> Result<Warned, ClientError> {
        self.call_warned(
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

    /// `GET path` (a server path with an optional query).
    pub async fn get_path(&self, path: &str) -> Result<Value, ClientError> {
        self.call(Method::GET, self.url_of(path)?, None).await
    }

    /// `POST path` with a JSON body.
    pub async fn post_path(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        self.call(Method::POST, self.url_of(path)?, Some(body))
            .await
    }

    /// `PATCH path?update_mask=mask` with a JSON body.
    pub async fn patch_path(
        &self,
        path: &str,
        update_mask: &str,
        body: &Value,
    ) -> Result<Value, ClientError> {
        let mut url = self.url_of(path)?;
        url.query_pairs_mut()
            .append_pair("update_mask", update_mask);
        self.call(Method::PATCH, url, Some(body)).await
    }

    /// `DELETE path`; returns the answer's body (e.g. the object marked for deletion).
    pub async fn delete_path(&self, path: &str) -> Result<Value, ClientError> {
        self.call(Method::DELETE, self.url_of(path)?, None).await
    }
}

fn as_u64(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn warning_headers_give_their_text() {
        assert_eq!(
            warning_text(r#"299 - "spec.network_attachments is deprecated""#),
            "spec.network_attachments is deprecated"
        );
        assert_eq!(warning_text("plain words"), "plain words");
    }

    #[test]
    fn paths_extend_the_base() {
        let api = Api::new("http://host/prefix/", "t").unwrap();
        assert_eq!(
            api.url_of("/api/private/v1/tenants?limit=1")
                .unwrap()
                .as_str(),
            "http://host/prefix/api/private/v1/tenants?limit=1"
        );
        assert_eq!(api.with_token("u").token(), "u");
        assert_eq!(api.with_token("u").url(), "http://host/prefix");
    }
}
