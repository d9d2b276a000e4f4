//! The tables of `osac get`: per-kind columns (plus the `-o wide` extras), and the admin
//! tables of replicas and managers.

use serde_json::Value;

use super::RefNames;
use super::cells::{
    at, bm_ips, capabilities, cluster_external_ips, cluster_nodes, eipa_target, external_ip, flag,
    joined, message, reference, rules, short_id, state, text, vm_internal_ip, vm_subnets,
};
use super::table::Table;
use crate::client::kind::Kind;

/// The kind-specific cells of a row (between STATE and MESSAGE).
type RowFn = fn(&Value, &RefNames) -> Vec<String>;

/// The table of objects of one kind.
pub fn table(kind: Kind, items: &[Value], names: &RefNames) -> Table {
    let (headers, row): (&[&str], RowFn) = match kind {
        Kind::VirtualNetwork => (
            &["NAME", "ID", "STATE", "CIDRS", "CLASS", "MESSAGE"],
            |v, n| {
                vec![
                    joined(v, &["spec/ipv4_cidr", "spec/ipv6_cidr"]),
                    reference(v, "spec/network_class", n),
                ]
            },
        ),
        Kind::Subnet => (
            &[
                "NAME", "ID", "STATE", "NETWORK", "CIDRS", "SEGMENT", "GATEWAYS", "MESSAGE",
            ],
            |v, n| {
                vec![
                    reference(v, "spec/virtual_network", n),
                    joined(v, &["spec/ipv4_cidr", "spec/ipv6_cidr"]),
                    text(v, "status/segment_id"),
                    joined(v, &["status/ipv4_gateway", "status/ipv6_gateway"]),
                ]
            },
        ),
        Kind::SecurityGroup => (
            &[
                "NAME", "ID", "STATE", "NETWORK", "INGRESS", "EGRESS", "MESSAGE",
            ],
            |v, n| {
                vec![
                    reference(v, "spec/virtual_network", n),
                    rules(v, "spec/ingress"),
                    rules(v, "spec/egress"),
                ]
            },
        ),
        Kind::ExternalIp => (
            &[
                "NAME", "ID", "STATE", "ADDRESS", "POOL", "ATTACHED", "MESSAGE",
            ],
            |v, n| {
                let pool = match reference(v, "status/pool", n).as_str() {
                    "-" => reference(v, "spec/pool", n),
                    p => p.to_string(),
                };
                vec![text(v, "status/address"), pool, flag(v, "status/attached")]
            },
        ),
        Kind::ExternalIpAttachment => (
            &[
                "NAME",
                "ID",
                "STATE",
                "EXTERNAL-IP",
                "ADDRESS",
                "TARGET",
                "TARGET-IP",
                "MESSAGE",
            ],
            |v, n| {
                vec![
                    reference(v, "spec/external_ip", n),
                    text(v, "status/external_ip_address"),
                    eipa_target(v, n),
                    text(v, "status/target_ip"),
                ]
            },
        ),
        Kind::NatGateway => (
            &[
                "NAME",
                "ID",
                "STATE",
                "NETWORK",
                "EXTERNAL-IP",
                "ADDRESS",
                "MESSAGE",
            ],
            |v, n| {
                vec![
                    reference(v, "spec/virtual_network", n),
                    reference(v, "spec/external_ip", n),
                    text(v, "status/address"),
                ]
            },
        ),
        Kind::ExternalIpPool => (
            &[
                "NAME",
                "ID",
                "STATE",
                "FAMILY",
                "CIDRS",
                "TOTAL",
                "ALLOCATED",
                "AVAILABLE",
                "MESSAGE",
            ],
            |v, _| {
                let family = match at(v, "spec/ip_family").and_then(Value::as_str) {
                    Some(f) => f.trim_start_matches("IP_FAMILY_").to_string(),
                    None => "-".into(),
                };
                // Proto JSON omits zero counters: show 0 when the pool reports a total.
                let count = |path: &str| match text(v, path) {
                    c if c == "-" && at(v, "status/total").is_some() => "0".to_string(),
                    c => c,
                };
                vec![
                    family,
                    joined(v, &["spec/cidrs"]),
                    text(v, "status/total"),
                    count("status/allocated"),
                    count("status/available"),
                ]
            },
        ),
        Kind::NetworkClass => (
            &[
                "NAME",
                "ID",
                "STATE",
                "DEFAULT",
                "FABRIC",
                "K8S",
                "CAPABILITIES",
                "MESSAGE",
            ],
            |v, _| {
                vec![
                    flag(v, "is_default"),
                    text(v, "fabric_manager"),
                    text(v, "k8s_manager"),
                    capabilities(v),
                ]
            },
        ),
        Kind::HostType => {
            return host_type_table(items);
        }
        Kind::BareMetalTemplate => {
            return baremetal_template_table(items, names);
        }
        Kind::BareMetalInstanceType => {
            return baremetal_instance_type_table(items, names);
        }
        Kind::Tenant => (&["NAME", "ID", "STATE", "DOMAINS", "MESSAGE"], |v, _| {
            vec![joined(v, &["spec/domains"])]
        }),
        Kind::Host => (
            &[
                "NAME",
                "ID",
                "STATE",
                "TYPE",
                "POOL",
                "ASSIGNED-TO",
                "MESSAGE",
            ],
            |v, n| {
                vec![
                    reference(v, "spec/host_type", n),
                    text(v, "spec/pool"),
                    reference(v, "status/assigned_to", n),
                ]
            },
        ),
        Kind::ComputeInstance => (
            &[
                "NAME",
                "ID",
                "STATE",
                "INTERNAL-IP",
                "EXTERNAL-IP",
                "SUBNETS",
                "MESSAGE",
            ],
            |v, n| vec![vm_internal_ip(v), external_ip(v, n), vm_subnets(v, n)],
        ),
        Kind::BareMetalInstance => (
            &[
                "NAME",
                "ID",
                "STATE",
                "HOST",
                "IPS",
                "EXTERNAL-IP",
                "MESSAGE",
            ],
            |v, n| vec![reference(v, "status/host", n), bm_ips(v), external_ip(v, n)],
        ),
        Kind::Cluster => (
            &[
                "NAME",
                "ID",
                "STATE",
                "API",
                "INGRESS",
                "NODES",
                "EXTERNAL-IP",
                "MESSAGE",
            ],
            |v, n| {
                vec![
                    text(v, "status/api_endpoint"),
                    text(v, "status/ingress_endpoint"),
                    cluster_nodes(v),
                    cluster_external_ips(v, n),
                ]
            },
        ),
        // Not a kind `osac get` accepts: events are listed by `osac events`.
        Kind::Event => (&["NAME", "ID", "STATE", "MESSAGE"], |_, _| Vec::new()),
    };
    let mut t = Table::new(headers);
    for v in items {
        let mut cells = vec![
            at(v, "metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("-")
                .to_string(),
            v.get("id")
                .and_then(Value::as_str)
                .map(short_id)
                .unwrap_or_else(|| "-".into()),
            state(v),
        ];
        cells.extend(row(v, names));
        cells.push(message(v));
        t.push(cells);
    }
    t
}

fn host_type_table(items: &[Value]) -> Table {
    let mut t = Table::new(&["NAME", "ID", "TITLE", "INTERFACES"]);
    for v in items {
        let ifaces = v
            .get("interfaces")
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty())
            .map(|a| {
                a.iter()
                    .map(|i| format!("{}:{}", text(i, "name"), text(i, "role")))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_else(|| "-".into());
        t.push(vec![
            text(v, "metadata/name"),
            v.get("id")
                .and_then(Value::as_str)
                .map(short_id)
                .unwrap_or_else(|| "-".into()),
            text(v, "title"),
            ifaces,
        ]);
    }
    t
}

/// BareMetalTemplates: what a tenant picks from (no lifecycle worth a column).
fn baremetal_template_table(items: &[Value], names: &RefNames) -> Table {
    let mut t = Table::new(&["NAME", "HOST-TYPE", "TITLE"]);
    for v in items {
        t.push(vec![
            text(v, "metadata/name"),
            reference(v, "spec/host_type", names),
            text(v, "spec/title"),
        ]);
    }
    t
}

/// BareMetalInstanceTypes: the flavors a tenant picks from, their ports and serving HostTypes.
fn baremetal_instance_type_table(items: &[Value], names: &RefNames) -> Table {
    let mut t = Table::new(&["NAME", "TITLE", "PORTS", "HOST-TYPES"]);
    for v in items {
        let ports = at(v, "spec/hardware/network_ports")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|p| {
                        let speed = p.get("speed_gbps").and_then(Value::as_u64).unwrap_or(0);
                        format!(
                            "{}:{}:{}:{speed}G",
                            text(p, "name"),
                            text(p, "role"),
                            text(p, "type")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_else(|| "-".into());
        let host_types = at(v, "spec/host_types")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(|id| names.get(id).cloned().unwrap_or_else(|| id.to_string()))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_else(|| "-".into());
        t.push(vec![
            text(v, "metadata/name"),
            text(v, "spec/title"),
            ports,
            host_types,
        ]);
    }
    t
}

/// The table of `GET /api/private/v1/replicas` (`osac admin get replicas`).
pub fn replicas_table(items: &[Value]) -> Table {
    let mut t = Table::new(&[
        "NAME",
        "ADDRESS",
        "LIVE",
        "DATAPLANE",
        "SHARDS",
        "STARTED",
        "ID",
    ]);
    for v in items {
        let flag = |k: &str| {
            if v[k] == Value::Bool(true) {
                "yes"
            } else {
                "no"
            }
            .to_string()
        };
        t.push(vec![
            text(v, "name"),
            text(v, "address"),
            flag("live"),
            flag("dataplane"),
            v["shard_count"].as_u64().unwrap_or(0).to_string(),
            text(v, "started_at"),
            text(v, "id"),
        ]);
    }
    t
}

/// The table of `GET /api/private/v1/managers`.
pub fn managers_table(items: &[Value]) -> Table {
    let mut t = Table::new(&["NAME", "ROLE", "DRIVER", "CAPABILITIES", "DESCRIPTION"]);
    for v in items {
        let caps = match v.get("capabilities") {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(","),
            Some(Value::Object(o)) => o
                .iter()
                .filter(|(_, b)| b.as_bool() == Some(true))
                .map(|(k, _)| k.trim_start_matches("supports_").replace('_', "-"))
                .collect::<Vec<_>>()
                .join(","),
            _ => String::new(),
        };
        t.push(vec![
            text(v, "name"),
            text(v, "role"),
            text(v, "driver"),
            if caps.is_empty() { "-".into() } else { caps },
            at(v, "description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        ]);
    }
    t
}

/// The table of `kind` in `-o wide` form: the full id instead of its short form, then LABELS
/// (`k=v,…`) and CREATED.
pub fn wide_table(kind: Kind, items: &[Value], names: &RefNames) -> Table {
    let mut t = table(kind, items, names);
    let id_column = t.headers.iter().position(|h| h == "ID");
    t.headers.push("LABELS".into());
    t.headers.push("CREATED".into());
    let width = t.headers.len() - 2;
    for (row, v) in t.rows.iter_mut().zip(items) {
        if let (Some(i), Some(id)) = (id_column, v.get("id").and_then(Value::as_str)) {
            row[i] = id.to_string();
        }
        row.resize(width, String::new());
        let labels = at(v, "metadata/labels")
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty())
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_else(|| "-".into());
        row.push(labels);
        row.push(
            at(v, "metadata/creation_timestamp")
                .and_then(Value::as_str)
                .unwrap_or("-")
                .to_string(),
        );
    }
    t
}
