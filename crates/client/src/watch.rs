//! Watches: the server's event stream of a collection (`GET …?watch=true`,
//! `text/event-stream`). The first events are the objects that exist (ADDED); the stream runs
//! until the caller drops it or the server ends it.

use osac_model::Scope;
use reqwest::header::ACCEPT;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::api::Api;
use crate::error::{ClientError, api_error};

/// One change: `ADDED`, `MODIFIED` or `DELETED` and the object.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    pub kind: String,
    pub object: Value,
}

/// An open watch.
pub struct EventStream {
    response: reqwest::Response,
    buffer: String,
    url: String,
}

impl Api {
    /// Opens a watch of `collection` with an optional filter. Errors of the request (a bad
    /// filter, no permission) come back here, as for a list.
    pub async fn watch(
        &self,
        scope: Scope,
        collection: &str,
        filter: Option<&str>,
    ) -> Result<EventStream, ClientError> {
        let mut url = self.endpoint(scope, &[collection]);
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("watch", "true");
            if let Some(f) = filter.filter(|f| !f.is_empty()) {
                q.append_pair("filter", f);
            }
        }
        // No overall timeout: a watch lasts as long as the user wants it.
        let response = self
            .streaming_client()
            .request(Method::GET, url.clone())
            .bearer_auth(self.token())
            .header(ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|e| self.transport(&e))?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            return Err(api_error(status, &text, &format!("GET {}", url.path())));
        }
        Ok(EventStream {
            response,
            buffer: String::new(),
            url: self.url().to_string(),
        })
    }
}

impl EventStream {
    /// The next event; `None` when the server closed the stream. An `error` event (the store
    /// failed, or the stream's credential ended: UNAUTHENTICATED) is returned as the API error
    /// it carries.
    pub async fn next(&mut self) -> Result<Option<WatchEvent>, ClientError> {
        loop {
            if let Some(event) = self.take_event()? {
                return Ok(Some(event));
            }
            let chunk = self
                .response
                .chunk()
                .await
                .map_err(|e| ClientError::Transport {
                    url: self.url.clone(),
                    detail: e.to_string(),
                })?;
            match chunk {
                Some(bytes) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                None => return Ok(None),
            }
        }
    }

    /// Parses one complete `text/event-stream` block from the buffer, skipping comments.
    fn take_event(&mut self) -> Result<Option<WatchEvent>, ClientError> {
        while let Some(end) = self.buffer.find("\n\n") {
            let block: String = self.buffer.drain(..end + 2).collect();
            let mut name = "message";
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    name = if v.trim() == "error" {
                        "error"
                    } else {
                        "message"
                    };
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                }
            }
            if data.is_empty() {
                continue;
            }
            if name == "error" {
                return Err(api_error(StatusCode::INTERNAL_SERVER_ERROR, &data, "watch"));
            }
            let bad = |detail: String| ClientError::BadResponse {
                url: self.url.clone(),
                detail,
            };
            let mut event: Value =
                serde_json::from_str(&data).map_err(|e| bad(format!("watch event: {e}")))?;
            let kind = event
                .get("type")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("watch event without a type".into()))?
                .to_string();
            let object = event.get_mut("object").map(Value::take).unwrap_or_default();
            return Ok(Some(WatchEvent { kind, object }));
        }
        Ok(None)
    }
}
