//! Cell text read from API objects (JSON): names, short ids, references, states, addresses.

use serde_json::Value;

use super::RefNames;
use crate::client::kind::{Kind, short_state};
use crate::client::parse::rule_summary;

/// The [`RefNames`] key under which a workload's external addresses are carried (from the READY
/// ExternalIPAttachments that target it; see [`add_external_ips`]).
fn external_key(target_id: &str) -> String {
    format!("external-ip/{target_id}")
}

/// Records, per workload id, the addresses of the READY ExternalIPAttachments targeting it: the
/// address alone when there is one, `api=…,ingress=…` for several on a cluster. (Workloads
/// fall back to this when their status carries no address yet.)
pub fn add_external_ips(names: &mut RefNames, attachments: &[Value]) {
    let mut per_target: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for a in attachments {
        if at(a, "status/state").and_then(Value::as_str)
            != Some("EXTERNAL_IP_ATTACHMENT_STATE_READY")
        {
            continue;
        }
        let Some(address) = at(a, "status/external_ip_address")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        else {
            continue;
        };
        let Some(target) = ["compute_instance", "cluster", "baremetal_instance"]
            .iter()
            .find_map(|f| {
                at(a, &format!("spec/{f}"))
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
            })
        else {
            continue;
        };
        let endpoint = match at(a, "spec/target_endpoint").and_then(Value::as_str) {
            Some(e) if !e.ends_with("UNSPECIFIED") => {
                e.rsplit('_').next().unwrap_or(e).to_ascii_lowercase()
            }
            _ => String::new(),
        };
        let entry = (endpoint, address.to_string());
        match per_target.iter_mut().find(|(t, _)| t == target) {
            Some((_, list)) => list.push(entry),
            None => per_target.push((target.to_string(), vec![entry])),
        }
    }
    for (target, mut list) in per_target {
        list.sort();
        let text = if list.len() == 1 {
            list.remove(0).1
        } else {
            list.into_iter()
                .map(|(e, a)| if e.is_empty() { a } else { format!("{e}={a}") })
                .collect::<Vec<_>>()
                .join(",")
        };
        names.insert(external_key(&target), text);
    }
}

/// A workload's external address: `status.external_ip_address`, else what its attachments say.
pub(super) fn external_ip(v: &Value, names: &RefNames) -> String {
    let own = text(v, "status/external_ip_address");
    if own != "-" {
        return own;
    }
    v.get("id")
        .and_then(Value::as_str)
        .and_then(|id| names.get(&external_key(id)))
        .cloned()
        .unwrap_or(own)
}

/// A cluster's external addresses from its status, `api=…,ingress=…` (the endpoints that have
/// one), else what its attachments say.
pub(super) fn cluster_external_ips(v: &Value, names: &RefNames) -> String {
    let labelled: Vec<String> = [
        ("api", "status/external_ip_address"),
        ("ingress", "status/ingress_external_ip_address"),
    ]
    .iter()
    .filter_map(|(endpoint, path)| {
        at(v, path)
            .and_then(Value::as_str)
            .filter(|a| !a.is_empty())
            .map(|a| format!("{endpoint}={a}"))
    })
    .collect();
    if labelled.is_empty() {
        external_ip(v, names)
    } else {
        labelled.join(",")
    }
}

/// String at a `/`-separated JSON pointer without the leading slash: `status/state`.
pub(super) fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('/').try_fold(v, |cur, k| cur.get(k))
}

/// A scalar as text, `-` when missing or empty.
pub(super) fn text(v: &Value, path: &str) -> String {
    match at(v, path) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        _ => "-".into(),
    }
}

/// `true`/`false` for a boolean that proto JSON omits when false.
pub(super) fn flag(v: &Value, path: &str) -> String {
    at(v, path)
        .and_then(Value::as_bool)
        .unwrap_or(false)
        .to_string()
}

/// Strings of an array joined with `,`, `-` when none.
pub(super) fn joined(v: &Value, paths: &[&str]) -> String {
    let mut parts = Vec::new();
    for p in paths {
        match at(v, p) {
            Some(Value::String(s)) if !s.is_empty() => parts.push(s.clone()),
            Some(Value::Array(a)) => {
                parts.extend(a.iter().filter_map(Value::as_str).map(str::to_string));
            }
            _ => {}
        }
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(",")
    }
}

/// The display name of an object: its name, else its id.
fn object_name(v: &Value) -> String {
    at(v, "metadata/name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .or_else(|| v.get("id").and_then(Value::as_str))
        .unwrap_or("-")
        .to_string()
}

/// `kind/name`.
pub fn object_label(kind: Kind, v: &Value) -> String {
    format!("{}/{}", kind.singular(), object_name(v))
}

/// The id column: the last 8 hex digits (ids are UUIDv7, whose leading digits are a
/// timestamp shared by objects created close together).
pub fn short_id(id: &str) -> String {
    let hex: String = id.chars().filter(char::is_ascii_hexdigit).collect();
    if hex.len() == 32 && id.len() == 36 {
        hex[24..].to_string()
    } else {
        id.to_string()
    }
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36 && s.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
}

/// A reference column: the referenced object's name when known.
pub(super) fn reference(v: &Value, path: &str, names: &RefNames) -> String {
    match at(v, path)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        None => "-".into(),
        Some(id) => match names.get(id) {
            Some(n) => n.clone(),
            None if is_uuid(id) => short_id(id),
            None => id.to_string(),
        },
    }
}

pub(super) fn state(v: &Value) -> String {
    match at(v, "status/state").and_then(Value::as_str) {
        Some(s) if !s.is_empty() => short_state(s).to_string(),
        _ => "-".into(),
    }
}

/// `status.message`, else the message of the first false condition.
pub(super) fn message(v: &Value) -> String {
    if let Some(m) = at(v, "status/message")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
    {
        return m.to_string();
    }
    at(v, "status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("status").and_then(Value::as_str) == Some("CONDITION_STATUS_FALSE"))
        .and_then(|c| c.get("message").and_then(Value::as_str))
        .unwrap_or_default()
        .to_string()
}

pub(super) fn rules(v: &Value, path: &str) -> String {
    match at(v, path).and_then(Value::as_array) {
        Some(a) if !a.is_empty() => a.iter().map(rule_summary).collect::<Vec<_>>().join(", "),
        _ => "-".into(),
    }
}

pub(super) fn capabilities(v: &Value) -> String {
    let caps = v
        .get("capabilities")
        .or_else(|| at(v, "status/capabilities"));
    let Some(caps) = caps else { return "-".into() };
    let names: Vec<&str> = [
        ("supports_ipv4", "ipv4"),
        ("supports_ipv6", "ipv6"),
        ("supports_dual_stack", "dual-stack"),
        ("dpu_support", "dpu"),
    ]
    .into_iter()
    .filter(|(k, _)| caps.get(*k).and_then(Value::as_bool) == Some(true))
    .map(|(_, n)| n)
    .collect();
    if names.is_empty() {
        "-".into()
    } else {
        names.join(",")
    }
}

pub(super) fn eipa_target(v: &Value, names: &RefNames) -> String {
    for (field, kind) in [
        ("compute_instance", Kind::ComputeInstance),
        ("cluster", Kind::Cluster),
        ("baremetal_instance", Kind::BareMetalInstance),
    ] {
        let r = reference(v, &format!("spec/{field}"), names);
        if r != "-" {
            let endpoint = match at(v, "spec/target_endpoint").and_then(Value::as_str) {
                Some(e) if !e.ends_with("UNSPECIFIED") => {
                    format!(
                        ":{}",
                        e.rsplit('_').next().unwrap_or(e).to_ascii_lowercase()
                    )
                }
                _ => String::new(),
            };
            return format!("{}/{r}{endpoint}", kind.singular());
        }
    }
    "-".into()
}

/// An attachment status's address: IPv4, else IPv6.
fn status_ip(s: &Value) -> Option<String> {
    ["ip_address", "ipv6_address"].iter().find_map(|k| {
        s.get(*k)
            .and_then(Value::as_str)
            .filter(|ip| !ip.is_empty())
            .map(str::to_string)
    })
}

/// A VM's primary IP: `status.internal_ip_address`, else the primary attachment status's.
pub(super) fn vm_internal_ip(v: &Value) -> String {
    let ip = text(v, "status/internal_ip_address");
    if ip != "-" {
        return ip;
    }
    at(v, "status/compute_network_attachment_statuses")
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .find(|s| s.get("primary").and_then(Value::as_bool) == Some(true))
                .or(if a.len() == 1 { a.first() } else { None })
        })
        .and_then(status_ip)
        .unwrap_or_else(|| "-".into())
}

/// A VM's subnets (names when known), primary first; secondary attachments that have an
/// address show it: `front,back=10.0.2.7`.
pub(super) fn vm_subnets(v: &Value, names: &RefNames) -> String {
    let spec = [
        "spec/compute_network_attachments",
        "spec/network_attachments",
    ]
    .iter()
    .find_map(|p| at(v, p).and_then(Value::as_array).filter(|a| !a.is_empty()));
    let statuses = at(v, "status/compute_network_attachment_statuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut parts: Vec<(bool, String)> = Vec::new();
    match spec {
        Some(atts) => {
            for (i, a) in atts.iter().enumerate() {
                let primary =
                    a.get("primary").and_then(Value::as_bool) == Some(true) || atts.len() == 1;
                let mut cell = reference(a, "subnet", names);
                let subnet = a.get("subnet").and_then(Value::as_str);
                let status = statuses
                    .iter()
                    .find(|s| {
                        subnet.is_some() && s.get("subnet_ref").and_then(Value::as_str) == subnet
                    })
                    .or_else(|| statuses.get(i));
                if !primary && let Some(ip) = status.and_then(status_ip) {
                    cell = format!("{cell}={ip}");
                }
                parts.push((primary, cell));
            }
        }
        None => {
            for s in &statuses {
                let primary = s.get("primary").and_then(Value::as_bool) == Some(true);
                parts.push((primary, reference(s, "subnet_ref", names)));
            }
        }
    }
    parts.sort_by_key(|(primary, _)| !primary);
    if parts.is_empty() {
        "-".into()
    } else {
        parts
            .into_iter()
            .map(|(_, c)| c)
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// A bare-metal instance's addresses per interface: `data-0=10.0.1.5,data-1=10.0.2.7`.
pub(super) fn bm_ips(v: &Value) -> String {
    let parts: Vec<String> = at(v, "status/network_attachment_statuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| {
            let ip = status_ip(s)?;
            Some(match s.get("interface").and_then(Value::as_str) {
                Some(i) if !i.is_empty() => format!("{i}={ip}"),
                _ => ip,
            })
        })
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(",")
    }
}

/// A cluster's nodes: agents that have an address / nodes requested (`3/3`).
pub(super) fn cluster_nodes(v: &Value) -> String {
    let size = |n: &Value| {
        n.get("size")
            .and_then(|s| s.as_u64().or_else(|| s.as_str()?.parse().ok()))
            .unwrap_or(0)
    };
    let requested: u64 = at(v, "spec/node_sets")
        .and_then(Value::as_object)
        .map(|m| m.values().map(size).sum())
        .unwrap_or(0);
    let with_ip = at(v, "status/node_sets")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|m| m.values())
        .filter_map(|ns| ns.get("agents").and_then(Value::as_array))
        .flatten()
        .filter(|a| status_ip(a).is_some())
        .count();
    if requested == 0 && with_ip == 0 {
        "-".into()
    } else {
        format!("{with_ip}/{requested}")
    }
}
