//! Output: tables with per-kind columns, YAML/JSON of the raw objects, names and ids.

use std::collections::HashMap;
use std::io::Write;

use serde_json::Value;

use super::kind::Kind;

mod cells;
mod kind_tables;
mod serialized;
mod table;
#[cfg(test)]
mod tests;

pub use cells::{add_external_ips, object_label};
pub use kind_tables::{managers_table, replicas_table, table, wide_table};
pub use serialized::{to_json, to_yaml};

pub use table::Table;

/// `-o` formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// Columns per kind.
    #[default]
    Table,
    /// The table with full ids, labels and creation time.
    Wide,
    /// The raw object(s) as YAML.
    Yaml,
    /// The raw object(s) as JSON.
    Json,
    /// `kind/name` per line.
    Name,
    /// The full id per line.
    Id,
}

/// Writes to stdout; a closed pipe (`osac get … | head`) is not an error.
pub fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Id → name of objects that other objects reference, for table columns.
pub type RefNames = HashMap<String, String>;

/// A list as `-o json|yaml` prints it: `{"items": [...], "size": N, "total": T}` (`total`: how
/// many objects matched on the server, `size` when unknown), so `jq '.items[]'` works.
pub fn list_object(items: Vec<Value>, total: Option<u64>) -> Value {
    let size = items.len() as u64;
    serde_json::json!({
        "items": items,
        "size": size,
        "total": total.unwrap_or(size),
    })
}

/// Renders objects in a non-table format. `single` prints one object rather than a list;
/// `total` is the server's count of a list.
pub fn render_raw(
    format: OutputFormat,
    kind: Kind,
    items: &[Value],
    single: bool,
    total: Option<u64>,
) -> anyhow::Result<String> {
    let value = match (single, items) {
        (true, [one]) => one.clone(),
        _ => list_object(items.to_vec(), total),
    };
    Ok(match format {
        OutputFormat::Json => to_json(&value)?,
        OutputFormat::Yaml => to_yaml(&value)?,
        OutputFormat::Name => items.iter().map(|v| object_label(kind, v) + "\n").collect(),
        OutputFormat::Id => items
            .iter()
            .filter_map(|v| v.get("id").and_then(Value::as_str))
            .map(|id| format!("{id}\n"))
            .collect(),
        OutputFormat::Table => table(kind, items, &RefNames::new()).render(),
        OutputFormat::Wide => wide_table(kind, items, &RefNames::new()).render(),
    })
}
