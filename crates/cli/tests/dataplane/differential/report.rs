//! What a disagreement prints: the question, both answers, and the smallest topology that
//! shows it — the objects the question involves, read back from the API.

use serde_json::{Map, Value, json};

use super::build::Built;
use super::explain::Explained;
use super::listeners::Answer;
use super::questions::{End, Probe, Question};
use super::topology::WorkloadKind;
use crate::harness::{Dp, items};

/// The report of one disagreement, as YAML.
pub async fn disagreement(
    dp: &Dp,
    built: &Built,
    seed: u64,
    q: &Question,
    explained: &Explained,
    probe: &Probe,
    answer: &Answer,
) -> String {
    let mut topology = Map::new();
    let mut ends = Vec::new();
    for end in [q.source, q.destination] {
        if let End::Workload(t, w) | End::ExternalIp(t, w) = end
            && !ends.contains(&(t, w))
        {
            ends.push((t, w));
        }
    }
    for (t, w) in ends {
        let bt = &built.tenants[t];
        let wl = &bt.workloads[w];
        let token = bt.token.as_str();
        let entry = topology
            .entry(format!("tenant {}", bt.plan.name))
            .or_insert_with(|| json!({}));
        let kind = match wl.plan.kind {
            WorkloadKind::Vm => "computeinstance",
            WorkloadKind::BareMetal => "baremetalinstance",
        };
        push(
            entry,
            "workloads",
            trim(dp.json(token, &["get", kind, &wl.plan.name]).await),
        );
        push(
            entry,
            "subnets",
            trim(dp.json(token, &["get", "subnet", &wl.plan.subnet]).await),
        );
        let vn = trim(
            dp.json(token, &["get", "virtualnetwork", &wl.plan.vn])
                .await,
        );
        let vn_id = vn["id"].as_str().unwrap_or_default().to_string();
        push(entry, "virtual_networks", vn);
        for g in &wl.plan.groups {
            push(
                entry,
                "security_groups",
                trim(dp.json(token, &["get", "securitygroup", g]).await),
            );
        }
        if wl.external_ip.is_some() {
            let name = format!("eip-{}", wl.plan.name);
            push(
                entry,
                "external_ip_attachments",
                trim(
                    dp.json(token, &["get", "externalipattachment", &name])
                        .await,
                ),
            );
        }
        for g in items(&dp.json(token, &["get", "natgateways"]).await) {
            let on = g["spec"]["virtual_network"].as_str().unwrap_or_default();
            if on == wl.plan.vn || on == vn_id {
                push(entry, "nat_gateways", trim(g));
            }
        }
    }
    let report = json!({
        "seed": seed,
        "replay": format!("OSAC_DIFFERENTIAL_SEED={seed} OSAC_DATAPLANE_ONLY=differential cargo test -p osac-cli --test dataplane -- --nocapture"),
        "question": super::questions::describe(built, q),
        "request": super::questions::request(built, q),
        "explainer": explained.body,
        "probe": {
            "from_namespace": probe.ns,
            "to": format!("{}:{}", probe.dst, probe.port),
            "intended": probe.intended,
            "answer": format!("{answer:?}"),
        },
        "topology": topology,
    });
    serde_yaml_ng::to_string(&report).unwrap_or_else(|e| format!("{report} ({e})"))
}

/// Adds `v` to list `key` of `entry` (once).
fn push(entry: &mut Value, key: &str, v: Value) {
    if let Some(list) = entry
        .as_object_mut()
        .map(|o| o.entry(key).or_insert_with(|| json!([])))
        .and_then(Value::as_array_mut)
        && !list.contains(&v)
    {
        list.push(v);
    }
}

/// An object without its bookkeeping metadata (its name kept).
fn trim(mut v: Value) -> Value {
    let name = v["metadata"]["name"].clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("metadata");
        o.insert("name".into(), name);
    }
    v
}
