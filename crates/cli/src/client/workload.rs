//! Flag values of the workload commands (`osac create computeinstance|baremetalinstance|
//! cluster`): network attachments, node sets and template parameters, and what `--wait`
//! shows while a workload is being provisioned.
//!
//! Every parser returns a message that names the offending text and shows the expected form;
//! callers add the flag name.

use serde_json::{Map, Value, json};

/// Which workload an attachment is for: decides which keys it may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachmentFor {
    /// ComputeInstance: `subnet`, `security-groups`, `primary`.
    Vm,
    /// BareMetalInstance: also `interface`.
    BareMetal,
    /// Cluster: `subnet`, `security-groups` only (one per cluster, no primary).
    Cluster,
}

impl AttachmentFor {
    fn example(self) -> &'static str {
        match self {
            AttachmentFor::Vm => "subnet=my-subnet,security-groups=a;b,primary",
            AttachmentFor::BareMetal => {
                "interface=data-0,subnet=my-subnet,security-groups=a;b,primary"
            }
            AttachmentFor::Cluster => "subnet=my-subnet,security-groups=a;b",
        }
    }

    fn keys(self) -> &'static str {
        match self {
            AttachmentFor::Vm => "subnet, security-groups, primary",
            AttachmentFor::BareMetal => "subnet, security-groups, interface, primary",
            AttachmentFor::Cluster => "subnet, security-groups",
        }
    }
}

/// One `--network-attachment` value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetworkAttachment {
    pub subnet: String,
    /// `None`: not given (the server applies its default); `Some([])`: explicitly none.
    pub security_groups: Option<Vec<String>>,
    pub interface: Option<String>,
    /// `None`: not given (a single attachment is primary anyway).
    pub primary: Option<bool>,
}

impl NetworkAttachment {
    /// The attachment as the API takes it (fields given only).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("subnet".into(), json!(self.subnet));
        if let Some(sgs) = &self.security_groups {
            m.insert("security_groups".into(), json!(sgs));
        }
        if let Some(i) = &self.interface {
            m.insert("interface".into(), json!(i));
        }
        if let Some(p) = self.primary {
            m.insert("primary".into(), json!(p));
        }
        Value::Object(m)
    }
}

/// Normalises a key: lower case, `_` → `-`.
fn norm_key(k: &str) -> String {
    k.trim().to_ascii_lowercase().replace('_', "-")
}

fn parse_bool(key: &str, v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" => Ok(true),
        "false" | "no" | "0" => Ok(false),
        other => Err(format!("'{key}' takes true or false, not '{other}'")),
    }
}

/// Parses `--network-attachment`: a comma-separated list of `KEY=VALUE` items and the bare
/// flag `primary`, e.g. `interface=data-0,subnet=a,security-groups=web;ssh,primary`.
///
/// Keys: `subnet` (required; name or id), `security-groups` (alias `sg`; `;`-separated names
/// or ids, empty for none), `interface` (bare-metal only), `primary` (bare, or `primary=true|
/// false`; not for clusters).
pub fn parse_network_attachment(s: &str, kind: AttachmentFor) -> Result<NetworkAttachment, String> {
    parse_attachment_inner(s, kind).map_err(|e| {
        format!(
            "invalid network attachment '{s}': {e} (expected e.g. \"{}\")",
            kind.example()
        )
    })
}

fn parse_attachment_inner(s: &str, kind: AttachmentFor) -> Result<NetworkAttachment, String> {
    let (mut subnet, mut sgs, mut interface, mut primary) = (None, None, None, None);
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (key, value) = match item.split_once('=') {
            Some((k, v)) => (norm_key(k), Some(v.trim())),
            None => (norm_key(item), None),
        };
        let dup = |k: &str| format!("'{k}' given twice");
        match key.as_str() {
            "primary" => {
                if kind == AttachmentFor::Cluster {
                    return Err("a cluster has one network attachment and no 'primary' flag".into());
                }
                let p = match value {
                    None => true,
                    Some(v) => parse_bool("primary", v)?,
                };
                if primary.replace(p).is_some() {
                    return Err(dup("primary"));
                }
            }
            "subnet" | "security-groups" | "security-group" | "sg" | "sgs" | "interface"
            | "iface" => {
                let Some(value) = value else {
                    return Err(format!("'{key}' needs a value: {key}=…"));
                };
                match key.as_str() {
                    "subnet" => {
                        if value.is_empty() {
                            return Err("'subnet' has no value".into());
                        }
                        if subnet.replace(value.to_string()).is_some() {
                            return Err(dup("subnet"));
                        }
                    }
                    "interface" | "iface" => {
                        if kind != AttachmentFor::BareMetal {
                            return Err(format!(
                                "'interface' applies to bare-metal instances only (keys: {})",
                                kind.keys()
                            ));
                        }
                        if value.is_empty() {
                            return Err("'interface' has no value".into());
                        }
                        if interface.replace(value.to_string()).is_some() {
                            return Err(dup("interface"));
                        }
                    }
                    _ => {
                        let list: Vec<String> = value
                            .split(';')
                            .map(str::trim)
                            .filter(|g| !g.is_empty())
                            .map(str::to_string)
                            .collect();
                        if sgs.replace(list).is_some() {
                            return Err(dup("security-groups"));
                        }
                    }
                }
            }
            other => {
                return Err(format!("unknown key '{other}' (keys: {})", kind.keys()));
            }
        }
    }
    let subnet = subnet.ok_or("missing subnet=NAME")?;
    Ok(NetworkAttachment {
        subnet,
        security_groups: sgs,
        interface,
        primary,
    })
}

/// Parses every `--network-attachment` value, without the rules between them.
pub fn parse_attachment_list(
    specs: &[String],
    kind: AttachmentFor,
) -> Result<Vec<NetworkAttachment>, String> {
    specs
        .iter()
        .map(|s| parse_network_attachment(s, kind))
        .collect()
}

/// `--primary SUBNET`: makes the attachment to `subnet` (as typed: name or id) the primary one.
/// It must name the subnet of exactly one attachment, and may not contradict a `primary` key
/// given on an attachment (`,primary` on another one, or `primary=false` on this one).
pub fn mark_primary(list: &mut [NetworkAttachment], subnet: &str) -> Result<(), String> {
    let matching: Vec<usize> = (0..list.len())
        .filter(|&i| list[i].subnet == subnet)
        .collect();
    let chosen = match matching.as_slice() {
        [] => {
            let subnets: Vec<&str> = list.iter().map(|a| a.subnet.as_str()).collect();
            return Err(format!(
                "'{subnet}' is not the subnet of any --network-attachment (they attach: {})",
                subnets.join(", ")
            ));
        }
        [one] => *one,
        several => {
            // Two NICs on one subnet: only a `,primary` on one of them tells which.
            let flagged: Vec<usize> = several
                .iter()
                .copied()
                .filter(|&i| list[i].primary == Some(true))
                .collect();
            match flagged.as_slice() {
                [one] => *one,
                _ => {
                    return Err(format!(
                        "'{subnet}' is the subnet of {} attachments; mark the primary one with ',primary' instead",
                        several.len()
                    ));
                }
            }
        }
    };
    if list[chosen].primary == Some(false) {
        return Err(format!(
            "'{subnet}' disagrees with 'primary=false' on its attachment"
        ));
    }
    if let Some(other) = list
        .iter()
        .enumerate()
        .find(|(i, a)| *i != chosen && a.primary == Some(true))
    {
        return Err(format!(
            "'{subnet}' disagrees with ',primary' on the attachment to subnet '{}'",
            other.1.subnet
        ));
    }
    list[chosen].primary = Some(true);
    Ok(())
}

/// The attachments as the API's list, after the rules between them: several attachments of a
/// bare-metal instance each name their interface, no interface twice, exactly one primary (the
/// server checks the rest and names the rule).
pub fn attachments_json(list: &[NetworkAttachment], kind: AttachmentFor) -> Result<Value, String> {
    if list.len() > 1 {
        if kind == AttachmentFor::BareMetal && list.iter().any(|a| a.interface.is_none()) {
            return Err(
                "with several attachments, every attachment names its interface (interface=NAME)"
                    .into(),
            );
        }
        let primaries = list.iter().filter(|a| a.primary == Some(true)).count();
        if primaries != 1 {
            return Err(format!(
                "with several attachments exactly one is primary (add ',primary' to one of them or give --primary SUBNET; {primaries} are)"
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for i in list.iter().filter_map(|a| a.interface.as_deref()) {
            if !seen.insert(i) {
                return Err(format!("interface '{i}' is attached twice"));
            }
        }
    }
    Ok(Value::Array(
        list.iter().map(NetworkAttachment::to_json).collect(),
    ))
}

/// One `--node-set`: `NAME=HOST_TYPE,size=N`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSet {
    pub name: String,
    pub host_type: String,
    pub size: u32,
}

const NODE_SET_EXAMPLE: &str = "workers=h100,size=3";

/// Parses `--node-set NAME=HOST_TYPE,size=N` (also `NAME,host-type=T,size=N`).
pub fn parse_node_set(s: &str) -> Result<NodeSet, String> {
    parse_node_set_inner(s).map_err(|e| {
        format!("invalid node set '{s}': {e} (expected NAME=HOST_TYPE,size=N, e.g. \"{NODE_SET_EXAMPLE}\")")
    })
}

fn parse_node_set_inner(s: &str) -> Result<NodeSet, String> {
    let mut items = s.split(',').map(str::trim).filter(|i| !i.is_empty());
    let first = items.next().ok_or("empty")?;
    let (name, mut host_type) = match first.split_once('=') {
        Some((n, t)) => (n.trim(), Some(t.trim().to_string())),
        None => (first, None),
    };
    if name.is_empty() {
        return Err("missing the node set name".into());
    }
    let mut size = None;
    for item in items {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| format!("'{item}' is not KEY=VALUE"))?;
        let v = v.trim();
        match norm_key(k).as_str() {
            "size" | "count" | "replicas" => {
                let n = match v.parse::<u32>() {
                    Ok(n) if n >= 1 => n,
                    _ => return Err(format!("size '{v}' is not a whole number ≥ 1")),
                };
                if size.replace(n).is_some() {
                    return Err("'size' given twice".into());
                }
            }
            "host-type" | "hosttype" | "type" => {
                if host_type.replace(v.to_string()).is_some() {
                    return Err("the host type is given twice".into());
                }
            }
            other => return Err(format!("unknown key '{other}' (keys: size, host-type)")),
        }
    }
    let host_type = host_type
        .filter(|t| !t.is_empty())
        .ok_or("missing the host type")?;
    let size = size.ok_or("missing size=N")?;
    Ok(NodeSet {
        name: name.to_string(),
        host_type,
        size,
    })
}

/// Parses every `--node-set` into the API's `node_sets` map (names unique).
pub fn parse_node_sets(specs: &[String]) -> Result<Value, String> {
    let mut out = Map::new();
    for s in specs {
        let ns = parse_node_set(s)?;
        if out.contains_key(&ns.name) {
            return Err(format!("node set '{}' is given twice", ns.name));
        }
        out.insert(ns.name, json!({"host_type": ns.host_type, "size": ns.size}));
    }
    Ok(Value::Object(out))
}

/// Parses `--param KEY=VALUE` into template parameters: a value that reads as JSON (number,
/// boolean, null, quoted string, array, object) is sent as that JSON value, anything else as a
/// string (`--param cpus=4 --param image=rhel9 --param tags='["a","b"]'`).
pub fn parse_params(specs: &[String]) -> Result<Value, String> {
    let mut out = Map::new();
    for s in specs {
        let (k, v) = s
            .split_once('=')
            .filter(|(k, _)| !k.trim().is_empty())
            .ok_or_else(|| format!("invalid parameter '{s}': expected KEY=VALUE, e.g. cpus=4"))?;
        let k = k.trim();
        let value = serde_json::from_str::<Value>(v.trim()).unwrap_or_else(|_| json!(v));
        if out.insert(k.to_string(), value).is_some() {
            return Err(format!("parameter '{k}' is given twice"));
        }
    }
    Ok(Value::Object(out))
}

/// What `--wait` shows for an object: its state and, for objects with conditions, the
/// condition the object is waiting on (`PROVISIONING — InventoryAssigned: waiting for a free
/// host`); otherwise `status.message` (`PENDING: waiting for …`).
pub fn progress_text(state: &str, status: Option<&Value>) -> String {
    if let Some((kind, msg)) = status.and_then(pending_condition) {
        return if msg.is_empty() {
            format!("{state} — {kind}")
        } else {
            format!("{state} — {kind}: {msg}")
        };
    }
    let message = status
        .and_then(|s| s.get("message"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if message.is_empty() {
        state.to_string()
    } else {
        format!("{state}: {message}")
    }
}

/// The condition an object is waiting on: the first one (in phase order) that is not true,
/// preferring a phase over the summary `Ready` condition. Returns (type, message or reason).
pub fn pending_condition(status: &Value) -> Option<(String, String)> {
    let conds = status.get("conditions")?.as_array()?;
    let not_true: Vec<&Value> = conds
        .iter()
        .filter(|c| c.get("status").and_then(Value::as_str) != Some("CONDITION_STATUS_TRUE"))
        .collect();
    let is_ready = |c: &&Value| {
        c.get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.eq_ignore_ascii_case("ready") || t.ends_with("_READY"))
    };
    let c = not_true
        .iter()
        .find(|c| !is_ready(c))
        .or_else(|| not_true.first())?;
    let kind = c.get("type").and_then(Value::as_str).unwrap_or("?");
    // Enum-style types read better without their prefix:
    // TENANT_CONDITION_TYPE_DEFAULT_NETWORKING_READY → DEFAULT_NETWORKING_READY.
    let kind = kind
        .find("_CONDITION_TYPE_")
        .map_or(kind, |i| &kind[i + "_CONDITION_TYPE_".len()..]);
    let text = |k: &str| {
        c.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let msg = text("message")
        .or_else(|| text("reason"))
        .unwrap_or_default();
    Some((kind.to_string(), msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn att(s: &str, k: AttachmentFor) -> Value {
        parse_network_attachment(s, k).unwrap().to_json()
    }

    fn att_err(s: &str, k: AttachmentFor) -> String {
        parse_network_attachment(s, k).unwrap_err()
    }

    #[test]
    fn attachment_keys_sgs_and_primary() {
        assert_eq!(
            att(
                "subnet=my-subnet,security-groups=a;b,primary",
                AttachmentFor::Vm
            ),
            json!({"subnet": "my-subnet", "security_groups": ["a", "b"], "primary": true})
        );
        assert_eq!(
            att("subnet=my-subnet", AttachmentFor::Vm),
            json!({"subnet": "my-subnet"})
        );
        assert_eq!(
            att(
                "interface=data-0, subnet=a, primary",
                AttachmentFor::BareMetal
            ),
            json!({"subnet": "a", "interface": "data-0", "primary": true})
        );
        assert_eq!(
            att("Subnet=a,SG=web,primary=false", AttachmentFor::BareMetal),
            json!({"subnet": "a", "security_groups": ["web"], "primary": false})
        );
        assert_eq!(
            att("subnet=a,security_groups=", AttachmentFor::Cluster),
            json!({"subnet": "a", "security_groups": []})
        );
        assert_eq!(
            att("subnet=a,security-groups=x;;y;", AttachmentFor::Cluster),
            json!({"subnet": "a", "security_groups": ["x", "y"]})
        );
    }

    #[test]
    fn attachment_errors_name_the_problem() {
        let e = att_err("security-groups=a", AttachmentFor::Vm);
        assert!(e.contains("missing subnet=NAME"), "{e}");
        assert!(
            e.starts_with("invalid network attachment 'security-groups=a'"),
            "{e}"
        );
        let e = att_err("subnet=a,interface=data-0", AttachmentFor::Vm);
        assert!(e.contains("bare-metal instances only"), "{e}");
        let e = att_err("subnet=a,primary", AttachmentFor::Cluster);
        assert!(e.contains("no 'primary'"), "{e}");
        let e = att_err("subnet=a,subnet=b", AttachmentFor::Vm);
        assert!(e.contains("'subnet' given twice"), "{e}");
        let e = att_err("subnet=a,colour=red", AttachmentFor::BareMetal);
        assert!(
            e.contains("unknown key 'colour' (keys: subnet, security-groups, interface, primary)"),
            "{e}"
        );
        let e = att_err("subnet", AttachmentFor::Vm);
        assert!(e.contains("'subnet' needs a value"), "{e}");
        let e = att_err("subnet=a,primary=maybe", AttachmentFor::Vm);
        assert!(e.contains("true or false"), "{e}");
    }

    /// Every `--network-attachment` of a VM or bare-metal instance as the API's list.
    fn parse_network_attachments(specs: &[String], kind: AttachmentFor) -> Result<Value, String> {
        attachments_json(&parse_attachment_list(specs, kind)?, kind)
    }

    #[test]
    fn several_attachments_follow_the_multi_nic_rules() {
        let specs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let v = parse_network_attachments(
            &specs(&[
                "interface=data-0,subnet=a,primary",
                "interface=data-1,subnet=b",
            ]),
            AttachmentFor::BareMetal,
        )
        .unwrap();
        assert_eq!(
            v,
            json!([
                {"subnet": "a", "interface": "data-0", "primary": true},
                {"subnet": "b", "interface": "data-1"}
            ])
        );
        let e = parse_network_attachments(
            &specs(&["interface=data-0,subnet=a,primary", "subnet=b"]),
            AttachmentFor::BareMetal,
        )
        .unwrap_err();
        assert!(e.contains("every attachment names its interface"), "{e}");
        let e = parse_network_attachments(&specs(&["subnet=a", "subnet=b"]), AttachmentFor::Vm)
            .unwrap_err();
        assert!(e.contains("exactly one is primary"), "{e}");
        let e = parse_network_attachments(
            &specs(&["subnet=a,primary", "subnet=b,primary"]),
            AttachmentFor::Vm,
        )
        .unwrap_err();
        assert!(e.contains("2 are"), "{e}");
        let e = parse_network_attachments(
            &specs(&[
                "interface=data-0,subnet=a,primary",
                "interface=data-0,subnet=b",
            ]),
            AttachmentFor::BareMetal,
        )
        .unwrap_err();
        assert!(e.contains("'data-0' is attached twice"), "{e}");
        // One attachment needs no primary flag (the server marks it primary).
        assert_eq!(
            parse_network_attachments(&specs(&["subnet=a"]), AttachmentFor::Vm).unwrap(),
            json!([{"subnet": "a"}])
        );
    }

    #[test]
    fn primary_flag_marks_the_attachment_to_its_subnet() {
        let list = |v: &[&str]| {
            let specs: Vec<String> = v.iter().map(|s| s.to_string()).collect();
            parse_attachment_list(&specs, AttachmentFor::Vm).unwrap()
        };
        let mut atts = list(&["subnet=a", "subnet=b"]);
        mark_primary(&mut atts, "b").unwrap();
        assert_eq!(
            attachments_json(&atts, AttachmentFor::Vm).unwrap(),
            json!([{"subnet": "a"}, {"subnet": "b", "primary": true}])
        );
        // Agreeing with a `,primary` on the same attachment is fine.
        let mut atts = list(&["subnet=a", "subnet=b,primary"]);
        mark_primary(&mut atts, "b").unwrap();
        assert_eq!(atts[1].primary, Some(true));
        // A subnet no attachment has.
        let e = mark_primary(&mut list(&["subnet=a", "subnet=b"]), "c").unwrap_err();
        assert!(e.contains("'c' is not the subnet of any"), "{e}");
        assert!(e.contains("a, b"), "{e}");
        // Disagreeing with `,primary` elsewhere, or `primary=false` on its own attachment.
        let e = mark_primary(&mut list(&["subnet=a,primary", "subnet=b"]), "b").unwrap_err();
        assert!(e.contains("disagrees with ',primary'"), "{e}");
        assert!(e.contains("subnet 'a'"), "{e}");
        let e = mark_primary(&mut list(&["subnet=a", "subnet=b,primary=false"]), "b").unwrap_err();
        assert!(e.contains("disagrees with 'primary=false'"), "{e}");
        // Two NICs on the named subnet: ambiguous unless one carries `,primary`.
        let e = mark_primary(&mut list(&["subnet=a", "subnet=a"]), "a").unwrap_err();
        assert!(e.contains("subnet of 2 attachments"), "{e}");
        let mut atts = list(&["subnet=a", "subnet=a,primary"]);
        mark_primary(&mut atts, "a").unwrap();
        assert_eq!((atts[0].primary, atts[1].primary), (None, Some(true)));
    }

    #[test]
    fn node_sets() {
        assert_eq!(
            parse_node_set("workers=h100,size=3").unwrap(),
            NodeSet {
                name: "workers".into(),
                host_type: "h100".into(),
                size: 3
            }
        );
        assert_eq!(
            parse_node_set("gpu, host-type=h100, size=2")
                .unwrap()
                .host_type,
            "h100"
        );
        let specs = vec!["workers=h100,size=3".to_string(), "infra=bm,size=1".into()];
        assert_eq!(
            parse_node_sets(&specs).unwrap(),
            json!({"workers": {"host_type": "h100", "size": 3}, "infra": {"host_type": "bm", "size": 1}})
        );
        for (bad, want) in [
            ("workers=h100", "missing size=N"),
            ("workers,size=3", "missing the host type"),
            ("workers=h100,size=0", "not a whole number"),
            ("workers=h100,size=x", "not a whole number"),
            ("=h100,size=1", "missing the node set name"),
            ("workers=h100,size=1,colour=red", "unknown key 'colour'"),
            ("workers=h100,3", "'3' is not KEY=VALUE"),
        ] {
            let e = parse_node_set(bad).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
            assert!(e.contains("NAME=HOST_TYPE,size=N"), "{e}");
        }
        let e = parse_node_sets(&["w=a,size=1".into(), "w=b,size=2".into()]).unwrap_err();
        assert!(e.contains("node set 'w' is given twice"), "{e}");
    }

    #[test]
    fn params_are_json_or_strings() {
        let specs: Vec<String> = [
            "cpus=4",
            "image=rhel9",
            "gpu=true",
            "tags=[\"a\",\"b\"]",
            "ver=\"4\"",
            "s=a=b",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            parse_params(&specs).unwrap(),
            json!({"cpus": 4, "image": "rhel9", "gpu": true, "tags": ["a", "b"], "ver": "4", "s": "a=b"})
        );
        assert!(
            parse_params(&["=1".into()])
                .unwrap_err()
                .contains("KEY=VALUE")
        );
        assert!(parse_params(&["x".into()]).is_err());
        assert!(
            parse_params(&["a=1".into(), "a=2".into()])
                .unwrap_err()
                .contains("given twice")
        );
    }

    #[test]
    fn progress_shows_the_pending_condition() {
        let status = json!({
            "state": "BARE_METAL_INSTANCE_STATE_PROVISIONING",
            "conditions": [
                {"type": "InventoryAssigned", "status": "CONDITION_STATUS_FALSE",
                 "reason": "NoFreeHost", "message": "waiting for a free host"},
                {"type": "NetworkingConfigured", "status": "CONDITION_STATUS_FALSE"},
                {"type": "Ready", "status": "CONDITION_STATUS_FALSE"}
            ]
        });
        assert_eq!(
            progress_text("PROVISIONING", Some(&status)),
            "PROVISIONING — InventoryAssigned: waiting for a free host"
        );
        let status = json!({
            "conditions": [
                {"type": "Ready", "status": "CONDITION_STATUS_FALSE", "reason": "Provisioning"},
                {"type": "InventoryAssigned", "status": "CONDITION_STATUS_TRUE"},
                {"type": "IPDiscoveryComplete", "status": "CONDITION_STATUS_FALSE", "reason": "LeasePending"}
            ]
        });
        assert_eq!(
            progress_text("PROVISIONING", Some(&status)),
            "PROVISIONING — IPDiscoveryComplete: LeasePending"
        );
        let status = json!({"conditions": [
            {"type": "InventoryAssigned", "status": "CONDITION_STATUS_TRUE"},
            {"type": "Ready", "status": "CONDITION_STATUS_UNKNOWN"}
        ]});
        assert_eq!(progress_text("STARTING", Some(&status)), "STARTING — Ready");
        let status = json!({"conditions": [{"type": "Ready", "status": "CONDITION_STATUS_TRUE"}]});
        assert_eq!(progress_text("RUNNING", Some(&status)), "RUNNING");
        let status = json!({"message": "waiting for the VIPs"});
        assert_eq!(
            progress_text("PENDING", Some(&status)),
            "PENDING: waiting for the VIPs"
        );
        assert_eq!(progress_text("PENDING", None), "PENDING");
        let status = json!({"conditions": [
            {"type": "TENANT_CONDITION_TYPE_DEFAULT_NETWORKING_READY",
             "status": "CONDITION_STATUS_FALSE", "message": "creating the default subnet"}
        ]});
        assert_eq!(
            progress_text("PENDING", Some(&status)),
            "PENDING — DEFAULT_NETWORKING_READY: creating the default subnet"
        );
    }
}
