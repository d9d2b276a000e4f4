//! `--watch`: the server's event stream of a collection (`GET …?watch=true`,
//! `text/event-stream`), printed as it arrives: a table row per event with an EVENT column,
//! one compact JSON object per line (`-o json`), or one YAML document per event (`-o yaml`).
//! The first events are the objects that exist (ADDED); the command runs until interrupted or
//! the server ends the stream.

use osac_client::{EventStream, WatchEvent};
use serde_json::Value;

use super::kind::Kind;
use super::output::{OutputFormat, RefNames, emit, object_label, table, to_yaml, wide_table};

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
