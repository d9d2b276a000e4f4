//! Output: tables with per-kind columns, YAML/JSON of the raw objects, names and ids.

use std::collections::HashMap;
use std::io::Write;

use serde_json::Value;

use super::kind::{Kind, short_state};
use super::parse::rule_summary;

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

/// The [`RefNames`] key under which a workload's external addresses are carried (from the READY
/// ExternalIPAttachments that target it; see [`add_external_ips`]).
pub fn external_key(target_id: &str) -> String {
    format!("external-ip/{target_id}")
}

/// Records, per workload id, the addresses of the READY ExternalIPAttachments targeting it: the
/// address alone when there is one, `api=…,ingress=…` for several on a cluster. (Clusters carry
/// no address in their status; VMs and bare-metal servers fall back to this when theirs is
/// empty.)
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
fn external_ip(v: &Value, names: &RefNames) -> String {
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

/// String at a `/`-separated JSON pointer without the leading slash: `status/state`.
fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('/').try_fold(v, |cur, k| cur.get(k))
}

/// A scalar as text, `-` when missing or empty.
fn text(v: &Value, path: &str) -> String {
    match at(v, path) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        _ => "-".into(),
    }
}

/// `true`/`false` for a boolean that proto JSON omits when false.
fn flag(v: &Value, path: &str) -> String {
    at(v, path)
        .and_then(Value::as_bool)
        .unwrap_or(false)
        .to_string()
}

/// Strings of an array joined with `,`, `-` when none.
fn joined(v: &Value, paths: &[&str]) -> String {
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
pub fn object_name(v: &Value) -> String {
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
fn reference(v: &Value, path: &str, names: &RefNames) -> String {
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

fn state(v: &Value) -> String {
    match at(v, "status/state").and_then(Value::as_str) {
        Some(s) if !s.is_empty() => short_state(s).to_string(),
        _ => "-".into(),
    }
}

/// `status.message`, else the message of the first false condition.
fn message(v: &Value) -> String {
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

fn rules(v: &Value, path: &str) -> String {
    match at(v, path).and_then(Value::as_array) {
        Some(a) if !a.is_empty() => a.iter().map(rule_summary).collect::<Vec<_>>().join(", "),
        _ => "-".into(),
    }
}

fn capabilities(v: &Value) -> String {
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

fn eipa_target(v: &Value, names: &RefNames) -> String {
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
fn vm_internal_ip(v: &Value) -> String {
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
fn vm_subnets(v: &Value, names: &RefNames) -> String {
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
fn bm_ips(v: &Value) -> String {
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
fn cluster_nodes(v: &Value) -> String {
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

/// A plain text table.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (missing cells are blank).
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Columns padded to their widest cell, three spaces apart, no trailing blanks.
    pub fn render(&self) -> String {
        let n = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(n) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = String::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = row.get(i).map(String::as_str).unwrap_or("");
                line.push_str(cell);
                if i + 1 < n {
                    let pad = width - cell.chars().count() + 3;
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

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
                    external_ip(v, n),
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

/// Serialises a JSON value with object keys in reading order (id, name, metadata, …, spec,
/// status) rather than alphabetically.
struct Ordered<'a>(&'a Value);

fn key_rank(k: &str) -> u8 {
    match k {
        "id" => 0,
        "name" => 1,
        "metadata" => 2,
        "state" => 3,
        "message" => 4,
        "title" => 5,
        "description" => 6,
        "spec" => 100,
        "status" => 101,
        _ => 50,
    }
}

impl serde::Serialize for Ordered<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort_by_key(|k| (key_rank(k), k.as_str()));
                let mut map = ser.serialize_map(Some(keys.len()))?;
                for k in keys {
                    map.serialize_entry(k, &Ordered(&m[k.as_str()]))?;
                }
                map.end()
            }
            Value::Array(a) => {
                let mut seq = ser.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(&Ordered(v))?;
                }
                seq.end()
            }
            other => other.serialize(ser),
        }
    }
}

/// Pretty JSON with keys in reading order, newline-terminated.
pub fn to_json(v: &Value) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(&Ordered(v))? + "\n")
}

/// YAML with keys in reading order.
pub fn to_yaml(v: &Value) -> anyhow::Result<String> {
    Ok(serde_yaml_ng::to_string(&Ordered(v))?)
}

/// Renders objects in a non-table format. `single` prints one object rather than a list.
pub fn render_raw(
    format: OutputFormat,
    kind: Kind,
    items: &[Value],
    single: bool,
) -> anyhow::Result<String> {
    let value = match (single, items) {
        (true, [one]) => one.clone(),
        _ => Value::Array(items.to_vec()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const VN_ID: &str = "01939a6e-1111-7000-8000-00000000aaaa";

    fn names() -> RefNames {
        RefNames::from([(VN_ID.to_string(), "my-net".to_string())])
    }

    #[test]
    fn table_alignment() {
        let mut t = Table::new(&["A", "LONGER", "C"]);
        t.push(vec!["xxxx".into(), "y".into(), "".into()]);
        t.push(vec!["z".into(), "-".into(), "last col".into()]);
        assert_eq!(
            t.render(),
            "A      LONGER   C\nxxxx   y\nz      -        last col\n"
        );
    }

    #[test]
    fn subnet_table() {
        let items = [
            json!({
                "id": "01939a6e-2222-7000-8000-0000deadbeef",
                "metadata": {"name": "my-subnet"},
                "spec": {"virtual_network": VN_ID, "ipv4_cidr": "10.0.1.0/24", "ipv6_cidr": "fd00:0:0:1::/64"},
                "status": {"state": "SUBNET_STATE_READY", "segment_id": "seg-7",
                           "ipv4_gateway": "10.0.1.1", "ipv6_gateway": "fd00:0:0:1::1"}
            }),
            json!({
                "id": "01939a6e-3333-7000-8000-000000000001",
                "metadata": {"name": "b"},
                "spec": {"virtual_network": "01939a6e-9999-7000-8000-00000000ffff", "ipv4_cidr": "10.0.2.0/24"},
                "status": {"state": "SUBNET_STATE_FAILED", "message": "fabric said no"}
            }),
        ];
        let out = table(Kind::Subnet, &items, &names()).render();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            [
                "NAME", "ID", "STATE", "NETWORK", "CIDRS", "SEGMENT", "GATEWAYS", "MESSAGE"
            ]
        );
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            [
                "my-subnet",
                "deadbeef",
                "READY",
                "my-net",
                "10.0.1.0/24,fd00:0:0:1::/64",
                "seg-7",
                "10.0.1.1,fd00:0:0:1::1"
            ]
        );
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            [
                "b",
                "00000001",
                "FAILED",
                "0000ffff",
                "10.0.2.0/24",
                "-",
                "-",
                "fabric",
                "said",
                "no"
            ]
        );
    }

    #[test]
    fn security_group_and_eip_tables() {
        let sg = json!({
            "id": "x1", "metadata": {"name": "web"},
            "spec": {"virtual_network": VN_ID,
                     "ingress": [{"protocol": "PROTOCOL_TCP", "port_from": 443, "port_to": 443, "ipv4_cidr": "0.0.0.0/0"}]},
            "status": {"state": "SECURITY_GROUP_STATE_PENDING"}
        });
        let out = table(Kind::SecurityGroup, &[sg], &names()).render();
        assert!(out.lines().nth(1).unwrap().starts_with("web "), "{out}");
        assert!(out.contains("my-net    tcp/443 0.0.0.0/0   -\n"), "{out}");
        assert!(out.contains("PENDING"), "{out}");

        let eip = json!({
            "id": "e1", "metadata": {"name": "my-ip"}, "spec": {},
            "status": {"state": "EXTERNAL_IP_STATE_ALLOCATED", "address": "203.0.113.5", "pool": "p1"}
        });
        let out = table(Kind::ExternalIp, &[eip], &RefNames::new()).render();
        let row: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(
            row,
            ["my-ip", "e1", "ALLOCATED", "203.0.113.5", "p1", "false"]
        );
    }

    #[test]
    fn pool_class_hosttype_tables() {
        let pool = json!({
            "id": "p", "metadata": {"name": "ext"},
            "spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": ["203.0.113.0/24"]},
            "status": {"state": "EXTERNAL_IP_POOL_STATE_READY", "total": "256", "allocated": "2", "available": "254"}
        });
        let out = table(Kind::ExternalIpPool, &[pool], &RefNames::new()).render();
        let row: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(
            row,
            [
                "ext",
                "p",
                "READY",
                "IPV4",
                "203.0.113.0/24",
                "256",
                "2",
                "254"
            ]
        );

        let nc = json!({
            "id": "c", "metadata": {"name": "default"}, "is_default": true,
            "fabric_manager": "sim-fabric",
            "capabilities": {"supports_ipv4": true, "supports_ipv6": true, "supports_dual_stack": true},
            "status": {"state": "NETWORK_CLASS_STATE_READY"}
        });
        let out = table(Kind::NetworkClass, &[nc], &RefNames::new()).render();
        let row: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(
            row,
            [
                "default",
                "c",
                "READY",
                "true",
                "sim-fabric",
                "-",
                "ipv4,ipv6,dual-stack"
            ]
        );

        let ht = json!({"id": "h", "metadata": {"name": "h100"}, "title": "H100",
                        "interfaces": [{"name": "data-0", "role": "fabric"}, {"name": "bmc-0", "role": "lifecycle"}]});
        let out = table(Kind::HostType, &[ht], &RefNames::new()).render();
        assert_eq!(
            out,
            "NAME   ID   TITLE   INTERFACES\nh100   h    H100    data-0:fabric,bmc-0:lifecycle\n"
        );
    }

    #[test]
    fn attachment_and_tenant_tables() {
        let a = json!({
            "id": "a", "metadata": {"name": "att"},
            "spec": {"external_ip": "eip-id", "cluster": "c-id", "target_endpoint": "EXTERNAL_IP_ATTACHMENT_ENDPOINT_API"},
            "status": {"state": "EXTERNAL_IP_ATTACHMENT_STATE_PENDING", "external_ip_address": "203.0.113.9"}
        });
        let refs = RefNames::from([
            ("eip-id".to_string(), "my-ip".to_string()),
            ("c-id".to_string(), "c1".to_string()),
        ]);
        let out = table(Kind::ExternalIpAttachment, &[a], &refs).render();
        let row: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(
            row,
            [
                "att",
                "a",
                "PENDING",
                "my-ip",
                "203.0.113.9",
                "cluster/c1:api",
                "-"
            ]
        );

        let t = json!({
            "id": "t", "metadata": {"name": "acme"},
            "status": {"state": "TENANT_STATE_FAILED", "conditions": [
                {"type": "TENANT_CONDITION_TYPE_DEFAULT_NETWORKING_READY", "status": "CONDITION_STATUS_FALSE",
                 "message": "pool exhausted"}]}
        });
        let out = table(Kind::Tenant, &[t], &RefNames::new()).render();
        assert!(
            out.ends_with("acme   t    FAILED   -         pool exhausted\n"),
            "{out}"
        );
    }

    #[test]
    fn managers_and_raw() {
        let m = json!({"name": "sim-fabric", "role": "fabric", "driver": "sim",
                       "capabilities": ["ipv4", "ipv6", "dual_stack"], "description": "simulated fabric"});
        let out = managers_table(&[m]).render();
        assert!(
            out.contains("sim-fabric   fabric   sim      ipv4,ipv6,dual_stack   simulated fabric"),
            "{out}"
        );

        let v = json!({"id": "i1", "metadata": {"name": "n1"}});
        assert_eq!(
            render_raw(
                OutputFormat::Json,
                Kind::Subnet,
                std::slice::from_ref(&v),
                true
            )
            .unwrap(),
            serde_json::to_string_pretty(&v).unwrap() + "\n"
        );
        let yaml = render_raw(
            OutputFormat::Yaml,
            Kind::Subnet,
            std::slice::from_ref(&v),
            false,
        )
        .unwrap();
        assert!(yaml.starts_with("- id: i1"), "{yaml}");
        assert_eq!(
            render_raw(
                OutputFormat::Name,
                Kind::Subnet,
                std::slice::from_ref(&v),
                false
            )
            .unwrap(),
            "subnet/n1\n"
        );
        assert_eq!(
            render_raw(OutputFormat::Id, Kind::Subnet, &[v], false).unwrap(),
            "i1\n"
        );
    }

    fn row(kind: Kind, v: Value, refs: &RefNames) -> (Vec<String>, Vec<String>) {
        let out = table(kind, &[v], refs).render();
        let mut lines = out.lines();
        let words = |l: &str| l.split_whitespace().map(str::to_string).collect();
        (words(lines.next().unwrap()), words(lines.next().unwrap()))
    }

    #[test]
    fn compute_instance_table_shows_ips_and_subnets() {
        let refs = RefNames::from([
            ("sub-a".to_string(), "front".to_string()),
            ("sub-b".to_string(), "back".to_string()),
        ]);
        let vm = json!({
            "id": "01939a6e-2222-7000-8000-0000000000c1", "metadata": {"name": "vm1"},
            "spec": {"template": "ocp_virt_vm", "compute_network_attachments": [
                {"subnet": "sub-b", "security_groups": ["sg"]},
                {"subnet": "sub-a", "primary": true}
            ]},
            "status": {"state": "COMPUTE_INSTANCE_STATE_RUNNING",
                "conditions": [{"type": "Ready", "status": "CONDITION_STATUS_TRUE"}],
                "compute_network_attachment_statuses": [
                    {"subnet_ref": "sub-b", "ip_address": "10.0.2.7"},
                    {"subnet_ref": "sub-a", "ip_address": "10.0.1.5", "primary": true}
                ],
                "internal_ip_address": "10.0.1.5", "external_ip_address": "203.0.113.7"}
        });
        let (head, row) = row(Kind::ComputeInstance, vm, &refs);
        assert_eq!(
            head,
            [
                "NAME",
                "ID",
                "STATE",
                "INTERNAL-IP",
                "EXTERNAL-IP",
                "SUBNETS",
                "MESSAGE"
            ]
        );
        assert_eq!(
            row,
            [
                "vm1",
                "000000c1",
                "RUNNING",
                "10.0.1.5",
                "203.0.113.7",
                "front,back=10.0.2.7"
            ]
        );
        // Still starting: no addresses yet, the pending condition's message.
        let vm = json!({
            "id": "v2", "metadata": {"name": "vm2"},
            "spec": {"compute_network_attachments": [{"subnet": "sub-a", "primary": true}]},
            "status": {"state": "COMPUTE_INSTANCE_STATE_STARTING", "conditions": [
                {"type": "IPDiscoveryComplete", "status": "CONDITION_STATUS_FALSE", "message": "no lease yet"}]}
        });
        let (_, row) = super::tests::row(Kind::ComputeInstance, vm, &refs);
        assert_eq!(
            row,
            [
                "vm2", "v2", "STARTING", "-", "-", "front", "no", "lease", "yet"
            ]
        );
    }

    #[test]
    fn baremetal_table_shows_ips_per_interface() {
        let bm = json!({
            "id": "b1", "metadata": {"name": "s1"},
            "spec": {"host_type": "ht", "network_attachments": [
                {"interface": "data-0", "subnet": "a", "primary": true},
                {"interface": "data-1", "subnet": "b"}]},
            "status": {"state": "BARE_METAL_INSTANCE_STATE_RUNNING",
                "host": "01939a6e-2222-7000-8000-00000000h0st",
                "network_attachment_statuses": [
                    {"interface": "data-0", "subnet_ref": "a", "ip_address": "10.0.1.5", "primary": true},
                    {"interface": "data-1", "subnet_ref": "b", "ip_address": "10.0.2.9"}],
                "external_ip_address": "203.0.113.8"}
        });
        let refs = RefNames::from([(
            "01939a6e-2222-7000-8000-00000000h0st".to_string(),
            "bm-1".to_string(),
        )]);
        let (head, row) = row(Kind::BareMetalInstance, bm, &refs);
        assert_eq!(
            head,
            [
                "NAME",
                "ID",
                "STATE",
                "HOST",
                "IPS",
                "EXTERNAL-IP",
                "MESSAGE"
            ]
        );
        assert_eq!(
            row,
            [
                "s1",
                "b1",
                "RUNNING",
                "bm-1",
                "data-0=10.0.1.5,data-1=10.0.2.9",
                "203.0.113.8"
            ]
        );
        let bm = json!({"id": "b2", "metadata": {"name": "s2"},
            "status": {"state": "BARE_METAL_INSTANCE_STATE_PROVISIONING", "conditions": [
                {"type": "InventoryAssigned", "status": "CONDITION_STATUS_FALSE",
                 "reason": "NoFreeHost", "message": "waiting for a free host"}]}});
        let (_, row) = super::tests::row(Kind::BareMetalInstance, bm, &RefNames::new());
        assert_eq!(
            row.join(" "),
            "s2 b2 PROVISIONING - - - waiting for a free host"
        );
    }

    #[test]
    fn cluster_table_counts_nodes_with_ips() {
        let c = json!({
            "id": "c1", "metadata": {"name": "c1"},
            "spec": {"template": "ocp_4_17_small", "node_sets": {
                "workers": {"host_type": "h", "size": 3, "fabric_interface": "data-0"},
                "infra": {"host_type": "h", "size": 1}}},
            "status": {"state": "CLUSTER_STATE_PROGRESSING",
                "api_endpoint": "10.0.1.240", "ingress_endpoint": "10.0.1.241",
                "node_sets": {"workers": {"agents": [
                    {"host": "h1", "ip_address": "10.0.1.10"},
                    {"host": "h2", "ip_address": "10.0.1.11"},
                    {"host": "h3"}]}}}
        });
        let (head, row) = row(Kind::Cluster, c, &RefNames::new());
        assert_eq!(
            head,
            [
                "NAME",
                "ID",
                "STATE",
                "API",
                "INGRESS",
                "NODES",
                "EXTERNAL-IP",
                "MESSAGE"
            ]
        );
        assert_eq!(
            row,
            [
                "c1",
                "c1",
                "PROGRESSING",
                "10.0.1.240",
                "10.0.1.241",
                "2/4",
                "-"
            ]
        );
        let c = json!({"id": "c2", "metadata": {"name": "c2"},
                       "status": {"state": "CLUSTER_STATE_READY", "external_ip_address": "203.0.113.9"}});
        let (_, row) = super::tests::row(Kind::Cluster, c, &RefNames::new());
        assert_eq!(row, ["c2", "c2", "READY", "-", "-", "-", "203.0.113.9"]);
    }

    #[test]
    fn external_addresses_come_from_ready_attachments() {
        let att = |target: &str, id: &str, endpoint: Option<&str>, state: &str, addr: &str| {
            let mut spec = json!({"external_ip": "e"});
            spec[target] = json!(id);
            if let Some(e) = endpoint {
                spec["target_endpoint"] = json!(e);
            }
            json!({"spec": spec, "status": {"state": state, "external_ip_address": addr}})
        };
        const READY: &str = "EXTERNAL_IP_ATTACHMENT_STATE_READY";
        let mut names = RefNames::new();
        add_external_ips(
            &mut names,
            &[
                att(
                    "cluster",
                    "c1",
                    Some("EXTERNAL_IP_ATTACHMENT_ENDPOINT_API"),
                    READY,
                    "203.0.113.5",
                ),
                att(
                    "cluster",
                    "c2",
                    Some("EXTERNAL_IP_ATTACHMENT_ENDPOINT_INGRESS"),
                    READY,
                    "203.0.113.7",
                ),
                att(
                    "cluster",
                    "c2",
                    Some("EXTERNAL_IP_ATTACHMENT_ENDPOINT_API"),
                    READY,
                    "203.0.113.6",
                ),
                att(
                    "compute_instance",
                    "v1",
                    None,
                    "EXTERNAL_IP_ATTACHMENT_STATE_PENDING",
                    "203.0.113.8",
                ),
                att("baremetal_instance", "b1", None, READY, "203.0.113.9"),
            ],
        );
        let cluster = |id: &str| json!({"id": id, "metadata": {"name": id}, "status": {"state": "CLUSTER_STATE_READY"}});
        let out = table(
            Kind::Cluster,
            &[cluster("c1"), cluster("c2"), cluster("c3")],
            &names,
        )
        .render();
        let col: Vec<&str> = out
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().nth(6).unwrap())
            .collect();
        assert_eq!(
            col,
            ["203.0.113.5", "api=203.0.113.6,ingress=203.0.113.7", "-"]
        );
        // A pending attachment is not an address yet; a VM's own status field wins.
        let vm = json!({"id": "v1", "metadata": {"name": "v1"}, "status": {"state": "COMPUTE_INSTANCE_STATE_RUNNING"}});
        let (_, row) = super::tests::row(Kind::ComputeInstance, vm, &names);
        assert_eq!(row[4], "-");
        let bm = json!({"id": "b1", "metadata": {"name": "b1"}, "status": {"state": "BARE_METAL_INSTANCE_STATE_RUNNING"}});
        let (_, row) = super::tests::row(Kind::BareMetalInstance, bm, &names);
        assert_eq!(row[5], "203.0.113.9");
        let bm = json!({"id": "b1", "metadata": {"name": "b1"},
                        "status": {"state": "BARE_METAL_INSTANCE_STATE_RUNNING", "external_ip_address": "198.51.100.1"}});
        let (_, row) = super::tests::row(Kind::BareMetalInstance, bm, &names);
        assert_eq!(row[5], "198.51.100.1");
    }

    #[test]
    fn host_table() {
        let h = json!({
            "id": "01939a6e-2222-7000-8000-0000000000a1", "metadata": {"name": "bm-1"},
            "spec": {"host_type": "ht-id", "pool": "baremetal",
                     "interfaces": [{"name": "data-0", "mac_address": "02:00:00:00:00:01"}]},
            "status": {"state": "HOST_STATE_ASSIGNED",
                       "assigned_to": "01939a6e-2222-7000-8000-0000000000b1"}
        });
        let refs = RefNames::from([("ht-id".to_string(), "bm-standard".to_string())]);
        let (head, row) = row(Kind::Host, h, &refs);
        assert_eq!(
            head,
            [
                "NAME",
                "ID",
                "STATE",
                "TYPE",
                "POOL",
                "ASSIGNED-TO",
                "MESSAGE"
            ]
        );
        assert_eq!(
            row,
            [
                "bm-1",
                "000000a1",
                "ASSIGNED",
                "bm-standard",
                "baremetal",
                "000000b1"
            ]
        );
    }

    #[test]
    fn short_ids() {
        assert_eq!(short_id("01939a6e-2222-7000-8000-0000deadbeef"), "deadbeef");
        assert_eq!(short_id("custom"), "custom");
    }
}
