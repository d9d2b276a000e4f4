//! `osac admin orphans`: what a workload's cleanup left behind after its retry limit (objects
//! labelled `osac.openshift.io/orphaned: "true"`; docs/defaults.md), across every tenant, so the
//! provider can investigate and delete them.

use osac_client::ListQuery;
use serde_json::Value;

use super::kind::{Kind, Scope};
use super::ops::ClientCtx;
use super::output::{OutputFormat, Table, to_json, to_yaml};

/// The label the cleanup puts on its leftovers.
pub const ORPHANED_LABEL: &str = "osac.openshift.io/orphaned";

/// Kinds a cleanup can leave behind.
const KINDS: [Kind; 2] = [Kind::ExternalIpAttachment, Kind::ExternalIp];

fn text(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Lists orphaned objects of every tenant (the public API with a provider token sees all).
pub async fn run(ctx: &ClientCtx, format: OutputFormat) -> anyhow::Result<()> {
    let query = ListQuery {
        filter: Some(format!(
            "this.metadata.labels[\"{ORPHANED_LABEL}\"] == \"true\""
        )),
        ..ListQuery::default()
    };
    let mut rows: Vec<(Kind, Value)> = Vec::new();
    for kind in KINDS {
        for item in ctx
            .api
            .list(Scope::Tenant, kind.collection(), &query)
            .await?
        {
            rows.push((kind, item));
        }
    }
    let out = match format {
        OutputFormat::Json | OutputFormat::Yaml => {
            let items: Vec<Value> = rows.into_iter().map(|(_, v)| v).collect();
            let v = Value::Array(items);
            if matches!(format, OutputFormat::Json) {
                to_json(&v)?
            } else {
                to_yaml(&v)?
            }
        }
        OutputFormat::Name | OutputFormat::Id => rows
            .iter()
            .map(|(k, v)| format!("{}/{}\n", k.singular(), text(v, "/id")))
            .collect(),
        OutputFormat::Table | OutputFormat::Wide => {
            let mut t = Table::new(&["KIND", "ID", "TENANT", "STATE", "FOR WORKLOAD", "MESSAGE"]);
            for (k, v) in &rows {
                t.push(vec![
                    k.singular().to_string(),
                    text(v, "/id"),
                    text(v, "/metadata/tenant"),
                    text(v, "/status/state")
                        .rsplit("_STATE_")
                        .next()
                        .unwrap_or_default()
                        .to_string(),
                    text(
                        v,
                        "/metadata/labels/osac.openshift.io~1auto-provisioned-for",
                    ),
                    text(v, "/status/message"),
                ]);
            }
            if rows.is_empty() {
                "no orphaned objects\n".to_string()
            } else {
                t.render()
            }
        }
    };
    print!("{out}");
    Ok(())
}
