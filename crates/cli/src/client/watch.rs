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
    let mut widths = Vec::new();
    let mut header_printed = false;
    while let Some(event) = stream.next().await? {
        let text = render_event(&event, kind, format, names, !header_printed, &mut widths)?;
        header_printed = true;
        emit(&text)?;
    }
    Ok(())
}

/// One event in `format`. Tables get the kind's columns behind an EVENT column; the header
/// only with the first event. `widths` carries the column widths from one event to the next:
/// a row's columns are as wide as the widest cell seen so far, so rows line up with the header
/// and each other unless a wider value arrives.
pub fn render_event(
    event: &WatchEvent,
    kind: Kind,
    format: OutputFormat,
    names: &RefNames,
    with_header: bool,
    widths: &mut Vec<usize>,
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
                wide_table(kind, one, names).render_at_least(widths)
            } else {
                table(kind, one, names).render_at_least(widths)
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
            &mut Vec::new(),
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
            &mut Vec::new(),
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
            &mut Vec::new(),
        )
        .expect("table");
        assert_eq!(row_only.lines().count(), 1);
        let name = render_event(
            &event,
            Kind::VirtualNetwork,
            OutputFormat::Name,
            &names,
            true,
            &mut Vec::new(),
        )
        .expect("name");
        assert_eq!(name, "ADDED virtualnetwork/web\n");
    }

    #[test]
    fn watch_rows_line_up_across_events() {
        let event = |name: &str| WatchEvent {
            kind: "MODIFIED".into(),
            object: json!({"id": "0193-1", "metadata": {"name": name},
                           "spec": {"ipv4_cidr": "10.0.0.0/16"},
                           "status": {"state": "VIRTUAL_NETWORK_STATE_READY"}}),
        };
        let names = RefNames::new();
        let mut widths = Vec::new();
        let mut out = String::new();
        for (i, name) in ["a-rather-long-network-name", "x", "mid-name"]
            .iter()
            .enumerate()
        {
            out.push_str(
                &render_event(
                    &event(name),
                    Kind::VirtualNetwork,
                    OutputFormat::Table,
                    &names,
                    i == 0,
                    &mut widths,
                )
                .expect("table"),
            );
        }
        // The column after NAME starts at the same place on every line.
        let second_column: Vec<usize> = out
            .lines()
            .map(|l| {
                let after_event = &l[10..];
                let name_end = after_event.find(' ').expect("a second column");
                10 + name_end + after_event[name_end..].find(|c| c != ' ').expect("cell")
            })
            .collect();
        assert!(
            second_column.windows(2).all(|w| w[0] == w[1]),
            "{out}\n{second_column:?}"
        );
    }
}
