//! `osac admin dataplane gc`: asks the server to remove the real dataplane's kernel state that
//! no object in its store owns (leaked namespaces, bridges, nft tables, dnsmasq processes). The server does
//! it because it holds the store and runs as root; the CLI only asks and prints the report.

use serde_json::{Value, json};

use super::args::{DataplaneArgs, DataplaneCommand};
use super::kind::Scope;
use super::ops::ClientCtx;
use super::output::{OutputFormat, emit, to_json, to_yaml};

/// Runs a dataplane subcommand.
pub async fn run(ctx: &ClientCtx, args: &DataplaneArgs) -> anyhow::Result<()> {
    match &args.command {
        DataplaneCommand::Gc(gc) => {
            let url = ctx.api.endpoint(Scope::Provider, &["dataplane:gc"]);
            let body = if gc.scope.is_empty() {
                json!({})
            } else {
                json!({"scope": gc.scope})
            };
            let report = ctx
                .api
                .call(osac_client::Method::POST, url, Some(&body))
                .await?;
            let text = match gc.output {
                OutputFormat::Json => to_json(&report)?,
                OutputFormat::Yaml => to_yaml(&report)?,
                _ => summary(&report),
            };
            emit(&text)
        }
    }
}

fn list(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|x| match x {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// "removed 2 namespace(s): …" lines, or "nothing to collect".
fn summary(report: &Value) -> String {
    let mut out = String::new();
    for (key, what) in [
        ("namespaces", "namespace(s)"),
        ("bridges", "bridge(s)"),
        ("processes", "dnsmasq process(es)"),
        ("tables", "nft table(s)"),
    ] {
        let items = list(report, key);
        if !items.is_empty() {
            out.push_str(&format!(
                "removed {} {what}: {}\n",
                items.len(),
                items.join(", ")
            ));
        }
    }
    if out.is_empty() {
        out.push_str("nothing to collect: every dataplane object is owned\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_lists_what_was_removed() {
        let r = json!({"namespaces": ["osac-r-1"], "bridges": [], "processes": [42]});
        let s = summary(&r);
        assert!(s.contains("removed 1 namespace(s): osac-r-1"), "{s}");
        assert!(s.contains("removed 1 dnsmasq process(es): 42"), "{s}");
        assert!(!s.contains("bridge"), "{s}");
        assert!(summary(&json!({})).contains("nothing to collect"));
    }
}
