//! `osac describe KIND NAME`: one object for a human — its state and message, its spec, its
//! conditions, what it uses and what uses it (by kind and name), and its recent events.
//!
//! "Uses" are the ids in the object's spec that name an object the caller can read; "used by"
//! are the objects (of the kinds the caller can read) whose spec mentions the object's id.

use std::fmt::Write as _;

use anyhow::anyhow;
use osac_client::ListQuery;
use serde_json::Value;

use super::args::DescribeOpts;
use super::kind::{Access, CLI_KINDS, Kind, short_state};
use super::ops::ClientCtx;
use super::output::{emit, object_label, to_yaml};

/// Events shown at most.
const EVENT_LIMIT: u64 = 20;
/// Objects of one kind scanned for "used by".
const SCAN_LIMIT: u64 = 1000;

/// `osac describe`.
pub async fn run(ctx: &ClientCtx, o: &DescribeOpts) -> anyhow::Result<()> {
    let obj = ctx.api.get(ctx.scope, o.kind.collection(), &o.name).await?;
    let id = obj
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("the server returned an object without an id"))?
        .to_string();
    let mut readable: Vec<(Kind, Vec<Value>)> = Vec::new();
    for kind in CLI_KINDS {
        if kind.access(ctx.scope) == Access::None {
            continue;
        }
        let q = ListQuery {
            limit: Some(SCAN_LIMIT),
            ..ListQuery::default()
        };
        if let Ok(items) = ctx.api.list(ctx.scope, kind.collection(), &q).await {
            readable.push((kind, items));
        }
    }
    let events = ctx
        .api
        .list(
            super::kind::Scope::Tenant,
            "events",
            &ListQuery {
                filter: Some(format!(
                    "this.spec.object_id == {}",
                    serde_json::to_string(&id)?
                )),
                order: Some("metadata.creation_timestamp desc".into()),
                limit: Some(EVENT_LIMIT),
                offset: 0,
            },
        )
        .await
        .unwrap_or_default();
    emit(&render(o.kind, &obj, &readable, &events)?)
}

/// The description text (pure, for tests).
pub fn render(
    kind: Kind,
    obj: &Value,
    readable: &[(Kind, Vec<Value>)],
    events: &[Value],
) -> anyhow::Result<String> {
    let text = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let id = text("/id");
    let mut out = String::new();
    writeln!(out, "Name:      {}", or_dash(text("/metadata/name")))?;
    writeln!(out, "Kind:      {}", kind.singular())?;
    writeln!(out, "ID:        {id}")?;
    if !text("/metadata/tenant").is_empty() {
        writeln!(out, "Tenant:    {}", text("/metadata/tenant"))?;
    }
    writeln!(
        out,
        "Created:   {}",
        or_dash(text("/metadata/creation_timestamp"))
    )?;
    if !text("/status/state").is_empty() {
        writeln!(out, "State:     {}", short_state(text("/status/state")))?;
    }
    if !text("/status/message").is_empty() {
        writeln!(out, "Message:   {}", text("/status/message"))?;
    }
    if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
        writeln!(out, "Labels:")?;
        for (k, v) in labels {
            writeln!(out, "  {k}={}", v.as_str().unwrap_or_default())?;
        }
    }
    let body: serde_json::Map<String, Value> = obj
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "id" | "metadata" | "status"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    if !body.is_empty() {
        writeln!(out, "Spec:")?;
        indent(&mut out, &to_yaml(&Value::Object(body))?)?;
    }
    let status_rest: serde_json::Map<String, Value> = obj
        .pointer("/status")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "state" | "message" | "conditions"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    if !status_rest.is_empty() {
        writeln!(out, "Status:")?;
        indent(&mut out, &to_yaml(&Value::Object(status_rest))?)?;
    }
    if let Some(conditions) = obj.pointer("/status/conditions").and_then(Value::as_array) {
        writeln!(out, "Conditions:")?;
        for c in conditions {
            let f = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default();
            let status = short_state(f("status"));
            writeln!(
                out,
                "  {}={status}  {}  {}",
                f("type"),
                f("reason"),
                f("message")
            )?;
        }
    }
    let mut uses = Vec::new();
    collect_ids(obj, &mut uses, true);
    let mut used = Vec::new();
    let mut users = Vec::new();
    for (k, items) in readable {
        for item in items {
            let item_id = item.get("id").and_then(Value::as_str).unwrap_or_default();
            if item_id == id {
                continue;
            }
            if uses.iter().any(|u| u == item_id) {
                used.push(object_label(*k, item));
            }
            let mut mentioned = Vec::new();
            collect_ids(item, &mut mentioned, true);
            if mentioned.iter().any(|m| m == id) {
                users.push(object_label(*k, item));
            }
        }
    }
    writeln!(out, "Uses:      {}", list_or_none(&used))?;
    writeln!(out, "Used by:   {}", list_or_none(&users))?;
    writeln!(out, "Events:")?;
    if events.is_empty() {
        writeln!(out, "  <none>")?;
    }
    for e in events.iter().rev() {
        let f = |p: &str| e.pointer(p).and_then(Value::as_str).unwrap_or_default();
        let kind = f("/spec/type").trim_start_matches("EVENT_TYPE_");
        writeln!(
            out,
            "  {}  {kind}  {}  {}",
            f("/metadata/creation_timestamp"),
            f("/spec/reason"),
            f("/spec/message")
        )?;
    }
    Ok(out)
}

/// Every string in the object's spec (and other non-metadata, non-status fields), i.e. the
/// candidates for references; the caller matches them against object ids.
fn collect_ids(v: &Value, out: &mut Vec<String>, top: bool) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| collect_ids(x, out, false)),
        Value::Object(m) => {
            for (k, x) in m {
                if top && matches!(k.as_str(), "id" | "metadata" | "status") {
                    continue;
                }
                collect_ids(x, out, false);
            }
        }
        _ => {}
    }
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "<none>".into()
    } else {
        items.join(", ")
    }
}

fn indent(out: &mut String, text: &str) -> std::fmt::Result {
    for line in text.lines() {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn describe_shows_state_conditions_references_and_events() {
        let subnet = json!({
            "id": "sub-1",
            "metadata": {"name": "web", "tenant": "acme", "creation_timestamp": "2026-01-01T00:00:00Z"},
            "spec": {"virtual_network": "vn-1", "ipv4_cidr": "10.0.1.0/24"},
            "status": {"state": "SUBNET_STATE_READY", "segment_id": "7"}
        });
        let vn = json!({"id": "vn-1", "metadata": {"name": "net"}, "spec": {"ipv4_cidr": "10.0.0.0/16"}});
        let vm = json!({"id": "vm-1", "metadata": {"name": "vm1"},
                        "spec": {"compute_network_attachments": [{"subnet": "sub-1"}]}});
        let readable = vec![
            (Kind::VirtualNetwork, vec![vn]),
            (Kind::Subnet, vec![subnet.clone()]),
            (Kind::ComputeInstance, vec![vm]),
        ];
        let events = vec![json!({"metadata": {"creation_timestamp": "t1"},
            "spec": {"type": "EVENT_TYPE_NORMAL", "reason": "Ready", "message": "subnet is ready"}})];
        let text = render(Kind::Subnet, &subnet, &readable, &events).expect("render");
        assert!(text.contains("State:     READY"), "{text}");
        assert!(text.contains("Uses:      virtualnetwork/net"), "{text}");
        assert!(text.contains("Used by:   computeinstance/vm1"), "{text}");
        assert!(text.contains("Ready  subnet is ready"), "{text}");
        assert!(text.contains("segment_id"), "{text}");
    }
}
