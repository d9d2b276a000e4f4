//! `osac usage` (the caller's tenant) and `osac admin usage` (any tenant): the usage query of
//! docs/metering.md as a table, JSON, YAML or CSV.

use serde_json::Value;

use super::ops::ClientCtx;
use super::output::{Table, emit, to_json, to_yaml};

/// Output formats of the usage report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum UsageFormat {
    /// One row per group.
    #[default]
    Table,
    /// The server's answer.
    Json,
    /// The server's answer as YAML.
    Yaml,
    /// One line per group, a header line first.
    Csv,
}

/// What to ask.
#[derive(Debug, Clone, clap::Args)]
pub struct UsageOpts {
    /// Start of the period (RFC 3339, e.g. 2026-01-01T00:00:00Z) [default: a day before --to]
    #[arg(long)]
    pub from: Option<String>,
    /// End of the period, exclusive (RFC 3339) [default: now]
    #[arg(long)]
    pub to: Option<String>,
    /// Dimensions to group by, comma-separated: tenant, tenant_id, kind, object,
    /// network_class, ip_family, attached, parent_kind, parent
    #[arg(long = "group-by", value_name = "DIMS")]
    pub group_by: Option<String>,
    /// allocation or bandwidth [default: both]
    #[arg(long)]
    pub meter: Option<String>,
    /// Only this tenant, by name or id (provider: any tenant; a tenant may only name itself)
    #[arg(long)]
    pub tenant: Option<String>,
    /// Output format
    #[arg(long, short = 'o', value_enum, default_value = "table")]
    pub output: UsageFormat,
}

/// Runs the query on the context's surface and prints the answer.
pub async fn run(ctx: &ClientCtx, o: &UsageOpts) -> anyhow::Result<()> {
    let mut url = ctx.api.endpoint(ctx.scope, &["usage"]);
    {
        let mut q = url.query_pairs_mut();
        for (name, value) in [
            ("from", &o.from),
            ("to", &o.to),
            ("group_by", &o.group_by),
            ("meter", &o.meter),
            ("tenant", &o.tenant),
        ] {
            if let Some(v) = value {
                q.append_pair(name, v);
            }
        }
    }
    let resp = ctx.api.call(osac_client::Method::GET, url, None).await?;
    emit(&render(&resp, o.output)?)
}

/// The columns of a report: its `group_by` dimensions, then the meters.
fn columns(resp: &Value) -> Vec<String> {
    let mut cols: Vec<String> = resp["group_by"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    cols.extend(["resource_seconds", "ingress_bytes", "egress_bytes"].map(String::from));
    cols
}

/// The cells of each group, in [`columns`] order.
fn rows(resp: &Value, cols: &[String]) -> Vec<Vec<String>> {
    let groups = resp["groups"].as_array().cloned().unwrap_or_default();
    groups
        .iter()
        .map(|g| {
            cols.iter()
                .map(|c| {
                    let v = g["dimensions"].get(c).or_else(|| g.get(c));
                    v.and_then(Value::as_str).unwrap_or("").to_string()
                })
                .collect()
        })
        .collect()
}

/// A CSV field, quoted when it needs to be (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The report in `format`.
pub fn render(resp: &Value, format: UsageFormat) -> anyhow::Result<String> {
    let cols = columns(resp);
    Ok(match format {
        UsageFormat::Json => to_json(resp)?,
        UsageFormat::Yaml => to_yaml(resp)?,
        UsageFormat::Csv => {
            let mut out = String::new();
            for line in std::iter::once(cols.clone()).chain(rows(resp, &cols)) {
                let fields: Vec<String> = line.iter().map(|f| csv_field(f)).collect();
                out.push_str(&fields.join(","));
                out.push('\n');
            }
            out
        }
        UsageFormat::Table => {
            let headers: Vec<String> = cols
                .iter()
                .map(|c| c.to_uppercase().replace('_', "-"))
                .collect();
            let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
            let mut t = Table::new(&headers);
            for r in rows(resp, &cols) {
                t.push(r);
            }
            t.render()
        }
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn report() -> Value {
        json!({
            "from": "2026-01-01T00:00:00.000000Z", "to": "2026-01-02T00:00:00.000000Z",
            "meter": "all", "group_by": ["tenant", "kind"],
            "groups": [
                {"dimensions": {"tenant": "acme", "kind": "Subnet"}, "resource_seconds": "3600", "ingress_bytes": "0", "egress_bytes": "0"},
                {"dimensions": {"tenant": "a,b", "kind": "ExternalIP"}, "resource_seconds": "60", "ingress_bytes": "10", "egress_bytes": "20"}
            ]
        })
    }

    #[test]
    fn table_and_csv_have_a_column_per_dimension_and_meter() {
        let t = render(&report(), UsageFormat::Table).unwrap();
        let first = t.lines().next().unwrap();
        assert!(first.starts_with("TENANT"), "{t}");
        assert!(first.contains("RESOURCE-SECONDS") && first.contains("EGRESS-BYTES"));
        assert!(t.contains("3600"));
        let csv = render(&report(), UsageFormat::Csv).unwrap();
        assert_eq!(
            csv,
            "tenant,kind,resource_seconds,ingress_bytes,egress_bytes\nacme,Subnet,3600,0,0\n\"a,b\",ExternalIP,60,10,20\n"
        );
    }
}
