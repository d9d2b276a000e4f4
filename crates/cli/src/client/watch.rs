//! `--watch`: the server's event stream of a collection (`GET …?watch=true`,
//! `text/event-stream`), printed as it arrives: a table row per event with an EVENT column,
//! one compact JSON object per line (`-o json`), or one YAML document per event (`-o yaml`).
//! The first events are the objects that exist (ADDED); the command runs until interrupted or
//! the server ends the stream.

use reqwest::header::ACCEPT;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::http::{Api, ClientError, api_error};
use super::kind::{Kind, Scope};
use super::output::{OutputFormat, RefNames, emit, object_label, table, to_yaml, wide_table};

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
            .map_err(|e| self.transport_error(e))?;
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

/// Prints every event of `stream` until it ends.
pub async fn print_events(
    mut stream: EventStream,
    kind: Kind,
    format: OutputFormat,
    names: &RefNames,
) -> anyhow::Result<()> {
    let mut header_printed = false;
    while let Some(event) = stream.next().await? {
        let text = render_event(&event, kind, format, names, !header_printed)?;
        header_printed = true;
        emit(&text)?;
    }
    Ok(())
}

/// One event in `format`. Tables get the kind's columns behind an EVENT column; the header
/// only with the first event, so rows line up as well as a stream allows.
pub fn render_event(
    event: &WatchEvent,
    kind: Kind,
    format: OutputFormat,
    names: &RefNames,
    with_header: bool,
) -> anyhow::Result<String> {
    Ok(match format {
        OutputFormat::Json => {
            serde_json::json!({"type": event.kind, "object": event.object}).to_string() + "\n"
        }
        OutputFormat::Yaml => format!(
            "---\n{}",
            to_yaml(&serde_json::json!({"type": event.kind, "object": event.object}))?
        ),
        OutputFormat::Name => format!("{} {}\n", event.kind, object_label(kind, &event.object)),
        OutputFormat::Id => format!(
            "{} {}\n",
            event.kind,
            event.object.get("id").and_then(Value::as_str).unwrap_or("")
        ),
        OutputFormat::Table | OutputFormat::Wide => {
            let one = std::slice::from_ref(&event.object);
            let rendered = if format == OutputFormat::Wide {
                wide_table(kind, one, names).render()
            } else {
                table(kind, one, names).render()
            };
            let mut lines = rendered.lines();
            let header = lines.next().unwrap_or_default();
            let row = lines.next().unwrap_or_default();
            let mut out = String::new();
            if with_header {
                out.push_str(&format!("{:<10}{header}\n", "EVENT"));
            }
            out.push_str(&format!("{:<10}{row}\n", event.kind));
            out
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_render_in_every_format() {
        let event = WatchEvent {
            kind: "ADDED".into(),
            object: json!({"id": "0193-1", "metadata": {"name": "web"},
                           "spec": {"ipv4_cidr": "10.0.0.0/16"},
                           "status": {"state": "VIRTUAL_NETWORK_STATE_READY"}}),
        };
        let names = RefNames::new();
        let json = render_event(
            &event,
            Kind::VirtualNetwork,
            OutputFormat::Json,
            &names,
            true,
        )
        .expect("json");
        let parsed: Value = serde_json::from_str(json.trim()).expect("one JSON line");
        assert_eq!(parsed["type"], "ADDED");
        assert_eq!(parsed["object"]["metadata"]["name"], "web");
        let table = render_event(
            &event,
            Kind::VirtualNetwork,
            OutputFormat::Table,
            &names,
            true,
        )
        .expect("table");
        let lines: Vec<&str> = table.lines().collect();
        assert!(
            lines[0].starts_with("EVENT") && lines[0].contains("NAME"),
            "{table}"
        );
        assert!(
            lines[1].starts_with("ADDED") && lines[1].contains("web"),
            "{table}"
        );
        let row_only = render_event(
            &event,
            Kind::VirtualNetwork,
            OutputFormat::Table,
            &names,
            false,
        )
        .expect("table");
        assert_eq!(row_only.lines().count(), 1);
        let name = render_event(
            &event,
            Kind::VirtualNetwork,
            OutputFormat::Name,
            &names,
            true,
        )
        .expect("name");
        assert_eq!(name, "ADDED virtualnetwork/web\n");
    }
}
