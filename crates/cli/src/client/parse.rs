//! Parsers for flag values: CIDRs, security rules, labels, interfaces, durations.
//!
//! Every parser returns a message that names the offending text and shows the expected form;
//! callers add the flag name.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

pub use osac_model::net::Family;
use serde::Serialize;
use serde_json::{Value, json};

/// Checks a CIDR (`10.0.0.0/16`, `fd00::/48`) and returns its family. Host bits are left to
/// the server, which names the rule.
pub fn cidr_family(s: &str) -> Result<Family, String> {
    let (addr, len) = s
        .split_once('/')
        .ok_or_else(|| format!("'{s}' is not a CIDR: expected ADDRESS/PREFIX, e.g. 10.0.0.0/16"))?;
    let len: u8 = len
        .parse()
        .map_err(|_| format!("'{s}' is not a CIDR: prefix length '{len}' is not a number"))?;
    let (family, max) = if addr.parse::<Ipv4Addr>().is_ok() {
        (Family::V4, 32)
    } else if addr.parse::<Ipv6Addr>().is_ok() {
        (Family::V6, 128)
    } else {
        return Err(format!(
            "'{s}' is not a CIDR: '{addr}' is not an IPv4 or IPv6 address"
        ));
    };
    if len > max {
        return Err(format!(
            "'{s}' is not a CIDR: prefix length {len} is larger than {max}"
        ));
    }
    Ok(family)
}

/// Splits `--cidr` values into (IPv4, IPv6); at most one of each family.
pub fn split_cidrs(cidrs: &[String]) -> Result<(Option<String>, Option<String>), String> {
    let (mut v4, mut v6) = (None, None);
    for c in cidrs {
        let c = c.trim();
        let slot = match cidr_family(c)? {
            Family::V4 => &mut v4,
            Family::V6 => &mut v6,
        };
        if let Some(prev) = slot.replace(c.to_string()) {
            return Err(format!(
                "two CIDRs of the same family ('{prev}' and '{c}'): give at most one IPv4 and one IPv6 CIDR"
            ));
        }
    }
    Ok((v4, v6))
}

/// Which list a security rule goes to; decides whether its peer is a source or a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Ingress,
    Egress,
}

/// A SecurityRule as the API takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecurityRule {
    pub protocol: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_from: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_to: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4_cidr: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6_cidr: Option<String>,
}

const RULE_EXAMPLE_IN: &str = "protocol:tcp,port:443,source:0.0.0.0/0";
const RULE_EXAMPLE_OUT: &str = "protocol:all,destination:0.0.0.0/0";

/// Parses a rule spec such as `protocol:tcp,port:443,source:0.0.0.0/0`.
///
/// Keys (`:` or `=` between key and value): `protocol` tcp|udp|icmp|all (required); `port` N,
/// N-M or `any` (TCP/UDP only; omitted means every port, sent as 1-65535); the peer —
/// `source` (ingress), `destination` (egress) or `cidr` (either) — a CIDR of either family,
/// or `any` for both 0.0.0.0/0 and ::/0 (which yields two rules).
pub fn parse_rule(spec: &str, dir: Direction) -> Result<Vec<SecurityRule>, String> {
    let example = match dir {
        Direction::Ingress => RULE_EXAMPLE_IN,
        Direction::Egress => RULE_EXAMPLE_OUT,
    };
    parse_rule_inner(spec, dir)
        .map_err(|e| format!("invalid rule '{spec}': {e} (expected e.g. \"{example}\")"))
}

fn parse_rule_inner(spec: &str, dir: Direction) -> Result<Vec<SecurityRule>, String> {
    let (mut protocol, mut ports, mut peer) = (None, None, None);
    for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let sep = item
            .find([':', '='])
            .ok_or_else(|| format!("'{item}' is not KEY:VALUE"))?;
        let (key, value) = (
            item[..sep].trim().to_ascii_lowercase(),
            item[sep + 1..].trim(),
        );
        if value.is_empty() {
            return Err(format!("'{key}' has no value"));
        }
        let slot = match key.as_str() {
            "protocol" | "proto" => &mut protocol,
            "port" | "ports" => &mut ports,
            "cidr" | "peer" => &mut peer,
            "source" | "src" | "from" => {
                if dir == Direction::Egress {
                    return Err(
                        "egress rules take 'destination:' (or 'cidr:'), not 'source:'".into(),
                    );
                }
                &mut peer
            }
            "destination" | "dest" | "dst" | "to" => {
                if dir == Direction::Ingress {
                    return Err(
                        "ingress rules take 'source:' (or 'cidr:'), not 'destination:'".into(),
                    );
                }
                &mut peer
            }
            other => {
                return Err(format!(
                    "unknown key '{other}' (keys: protocol, port, {}, cidr)",
                    match dir {
                        Direction::Ingress => "source",
                        Direction::Egress => "destination",
                    }
                ));
            }
        };
        if slot.replace(value).is_some() {
            return Err(format!("'{key}' given twice"));
        }
    }
    let protocol = match protocol.map(str::to_ascii_lowercase).as_deref() {
        Some("tcp") => "PROTOCOL_TCP",
        Some("udp") => "PROTOCOL_UDP",
        Some("icmp") => "PROTOCOL_ICMP",
        Some("all" | "any") => "PROTOCOL_ALL",
        Some(p) => return Err(format!("unknown protocol '{p}' (tcp, udp, icmp or all)")),
        None => return Err("missing protocol (tcp, udp, icmp or all)".into()),
    };
    let has_ports = matches!(protocol, "PROTOCOL_TCP" | "PROTOCOL_UDP");
    let (port_from, port_to) = match (ports, has_ports) {
        (Some(p), true) => {
            let (a, b) = parse_port_range(p)?;
            (Some(a), Some(b))
        }
        (None, true) => (Some(1), Some(65535)),
        (Some(_), false) => return Err("ports apply to tcp and udp only".into()),
        (None, false) => (None, None),
    };
    let peer_key = match dir {
        Direction::Ingress => "source",
        Direction::Egress => "destination",
    };
    let peer = peer.ok_or_else(|| {
        format!("missing {peer_key} (a CIDR such as 0.0.0.0/0, or 'any' for every IPv4 and IPv6 address)")
    })?;
    let rule = |v4: Option<&str>, v6: Option<&str>| SecurityRule {
        protocol,
        port_from,
        port_to,
        ipv4_cidr: v4.map(str::to_string),
        ipv6_cidr: v6.map(str::to_string),
    };
    if peer.eq_ignore_ascii_case("any") {
        return Ok(vec![
            rule(Some("0.0.0.0/0"), None),
            rule(None, Some("::/0")),
        ]);
    }
    Ok(match cidr_family(peer)? {
        Family::V4 => vec![rule(Some(peer), None)],
        Family::V6 => vec![rule(None, Some(peer))],
    })
}

fn parse_port_range(s: &str) -> Result<(u16, u16), String> {
    if s.eq_ignore_ascii_case("any") || s.eq_ignore_ascii_case("all") || s == "*" {
        return Ok((1, 65535));
    }
    let port = |p: &str| -> Result<u16, String> {
        match p.trim().parse::<u32>() {
            Ok(n @ 1..=65535) => Ok(n as u16),
            _ => Err(format!(
                "port '{}' is not a number between 1 and 65535",
                p.trim()
            )),
        }
    };
    match s.split_once('-') {
        Some((a, b)) => {
            let (a, b) = (port(a)?, port(b)?);
            if a > b {
                return Err(format!("port range '{s}' ends before it starts"));
            }
            Ok((a, b))
        }
        None => port(s).map(|p| (p, p)),
    }
}

/// Parses every rule spec of one direction into the API's JSON list.
pub fn parse_rules(specs: &[String], dir: Direction) -> Result<Value, String> {
    let mut out = Vec::new();
    for s in specs {
        out.extend(parse_rule(s, dir)?);
    }
    serde_json::to_value(out).map_err(|e| e.to_string())
}

/// A compact rendering of an API rule for tables: `tcp/443 0.0.0.0/0`, `all ::/0`.
pub fn rule_summary(rule: &Value) -> String {
    let proto = rule
        .get("protocol")
        .and_then(Value::as_str)
        .map(|p| p.trim_start_matches("PROTOCOL_").to_ascii_lowercase())
        .unwrap_or_else(|| "all".into());
    let num = |k: &str| {
        rule.get(k)
            .and_then(|v| v.as_u64().or_else(|| v.as_str()?.parse().ok()))
    };
    let ports = match (num("port_from"), num("port_to")) {
        (Some(1), Some(65535)) | (None, None) | (Some(0), _) => String::new(),
        (Some(a), Some(b)) if a == b => format!("/{a}"),
        (Some(a), Some(b)) => format!("/{a}-{b}"),
        (Some(a), None) => format!("/{a}"),
        (None, Some(b)) => format!("/{b}"),
    };
    let peer = ["ipv4_cidr", "ipv6_cidr"]
        .iter()
        .find_map(|k| {
            rule.get(*k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        })
        .unwrap_or("any");
    format!("{proto}{ports} {peer}")
}

/// A change to labels: `k=v` sets, `k-` removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelOp {
    Set(String, String),
    Remove(String),
}

/// Parses `k=v` (set; the value may be empty) or `k-` (remove).
pub fn parse_label_op(s: &str) -> Result<LabelOp, String> {
    if s.contains('=') {
        let (k, v) = parse_label(s)?;
        return Ok(LabelOp::Set(k, v));
    }
    match s.strip_suffix('-') {
        Some(k) if valid_label_key(k) => Ok(LabelOp::Remove(k.to_string())),
        _ => Err(format!(
            "invalid label change '{s}': expected KEY=VALUE to set or KEY- to remove"
        )),
    }
}

/// Parses `k=v` for `--label`.
pub fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if valid_label_key(k) && !v.chars().any(char::is_whitespace) => {
            Ok((k.to_string(), v.to_string()))
        }
        _ => Err(format!(
            "invalid label '{s}': expected KEY=VALUE, e.g. team=web"
        )),
    }
}

/// Whether `k` can be the key of a `KEY=VALUE` / `KEY-` flag value: where the key ends is all
/// the client decides. Whether it is a valid label key (a Kubernetes qualified name,
/// `osac_model::labels::is_qualified_key`) is the server's rule to judge and word, so `a-=b`
/// reaches the server and comes back with its refusal.
fn valid_label_key(k: &str) -> bool {
    !k.is_empty() && !k.chars().any(|c| c.is_whitespace() || c == '=')
}

/// Applies label changes to a label map.
pub fn apply_label_ops(labels: &mut serde_json::Map<String, Value>, ops: &[LabelOp]) {
    for op in ops {
        match op {
            LabelOp::Set(k, v) => {
                labels.insert(k.clone(), json!(v));
            }
            LabelOp::Remove(k) => {
                labels.remove(k);
            }
        }
    }
}

/// Parses a BareMetalInstanceType network port `NAME:ROLE:TYPE:GBPS`, e.g.
/// `data-0:fabric:ethernet:100` (the server checks the values).
pub fn parse_network_port(s: &str) -> Result<Value, String> {
    let parts: Vec<&str> = s.split(':').map(str::trim).collect();
    let usage = || {
        format!("invalid port '{s}': expected NAME:ROLE:TYPE:GBPS, e.g. data-0:fabric:ethernet:100")
    };
    let [name, role, kind, speed] = parts[..] else {
        return Err(usage());
    };
    let speed: u32 = speed.parse().map_err(|_| usage())?;
    if name.is_empty() || role.is_empty() || kind.is_empty() {
        return Err(usage());
    }
    Ok(json!({
        "name": name,
        "role": role.to_ascii_lowercase(),
        "type": kind.to_ascii_lowercase(),
        "speed_gbps": speed,
    }))
}

/// Parses a HostType interface `NAME:ROLE[:DESCRIPTION]`, e.g. `data-0:fabric`.
pub fn parse_host_type_interface(s: &str) -> Result<Value, String> {
    let mut parts = s.splitn(3, ':');
    let name = parts.next().unwrap_or_default().trim();
    let role = parts.next().map(str::trim).unwrap_or_default();
    if name.is_empty() || role.is_empty() {
        return Err(format!(
            "invalid interface '{s}': expected NAME:ROLE[:DESCRIPTION], e.g. data-0:fabric (roles: fabric, management, storage, lifecycle)"
        ));
    }
    let mut v = json!({"name": name, "role": role.to_ascii_lowercase()});
    if let Some(d) = parts.next().map(str::trim).filter(|d| !d.is_empty()) {
        v["description"] = json!(d);
    }
    Ok(v)
}

/// Parses a Host interface `NAME=MAC`, e.g. `data-0=52:54:00:12:34:56`.
pub fn parse_host_interface(s: &str) -> Result<Value, String> {
    match s.split_once('=') {
        Some((n, m)) if !n.trim().is_empty() && !m.trim().is_empty() => {
            Ok(json!({"name": n.trim(), "mac_address": m.trim()}))
        }
        _ => Err(format!(
            "invalid interface '{s}': expected NAME=MAC, e.g. data-0=52:54:00:12:34:56"
        )),
    }
}

/// Parses one `--interface` value of a Host: `NAME=MAC`, or several separated by commas
/// (`data-0=02:00:00:00:00:01,data-1=02:00:00:00:00:02`).
pub fn parse_host_interfaces(s: &str) -> Result<Vec<Value>, String> {
    let items: Vec<&str> = s
        .split(',')
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .collect();
    if items.is_empty() {
        return Err(format!(
            "invalid interface '{s}': expected NAME=MAC, e.g. data-0=52:54:00:12:34:56"
        ));
    }
    items.into_iter().map(parse_host_interface).collect()
}

/// Maps a capability name (`ipv4`, `ipv6`, `dual-stack`, `dpu`) to its JSON field.
pub fn capability_field(s: &str) -> Result<&'static str, String> {
    match s.to_ascii_lowercase().replace('_', "-").as_str() {
        "ipv4" | "supports-ipv4" => Ok("supports_ipv4"),
        "ipv6" | "supports-ipv6" => Ok("supports_ipv6"),
        "dual-stack" | "dualstack" | "supports-dual-stack" => Ok("supports_dual_stack"),
        "dpu" | "dpu-support" => Ok("dpu_support"),
        _ => Err(format!(
            "unknown capability '{s}' (ipv4, ipv6, dual-stack, dpu)"
        )),
    }
}

/// Parses a duration: `120` (seconds), `90s`, `2m`, `500ms`, `1h`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration '{s}': expected e.g. 120, 90s, 2m"))?;
    let secs = match unit.trim() {
        "" | "s" | "sec" | "secs" => n,
        "ms" => n / 1000.0,
        "m" | "min" | "mins" => n * 60.0,
        "h" => n * 3600.0,
        u => {
            return Err(format!(
                "invalid duration '{s}': unknown unit '{u}' (ms, s, m, h)"
            ));
        }
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("invalid duration '{s}'"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(spec: &str, dir: Direction) -> SecurityRule {
        let mut r = parse_rule(spec, dir).unwrap();
        assert_eq!(r.len(), 1);
        r.remove(0)
    }

    #[test]
    fn rule_tcp_port_source() {
        let r = one("protocol:tcp,port:443,source:0.0.0.0/0", Direction::Ingress);
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"protocol":"PROTOCOL_TCP","port_from":443,"port_to":443,"ipv4_cidr":"0.0.0.0/0"})
        );
    }

    #[test]
    fn rule_range_ipv6_and_equals() {
        let r = one(
            "protocol=UDP, port=8000-8080, cidr=fd00::/8",
            Direction::Ingress,
        );
        assert_eq!(r.protocol, "PROTOCOL_UDP");
        assert_eq!((r.port_from, r.port_to), (Some(8000), Some(8080)));
        assert_eq!(r.ipv6_cidr.as_deref(), Some("fd00::/8"));
        assert_eq!(r.ipv4_cidr, None);
    }

    #[test]
    fn rule_all_egress() {
        let r = one("protocol:all,destination:0.0.0.0/0", Direction::Egress);
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"protocol":"PROTOCOL_ALL","ipv4_cidr":"0.0.0.0/0"})
        );
        let r = one("protocol:icmp,destination:10.0.0.0/8", Direction::Egress);
        assert_eq!(r.port_from, None);
    }

    #[test]
    fn rule_tcp_without_port_is_every_port() {
        let r = one("protocol:tcp,source:10.0.0.0/8", Direction::Ingress);
        assert_eq!((r.port_from, r.port_to), (Some(1), Some(65535)));
    }

    #[test]
    fn rule_any_peer_gives_both_families() {
        let r = parse_rule("protocol:tcp,port:22,source:any", Direction::Ingress).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].ipv4_cidr.as_deref(), Some("0.0.0.0/0"));
        assert_eq!(r[1].ipv6_cidr.as_deref(), Some("::/0"));
    }

    #[test]
    fn rule_errors_are_clear() {
        let cases = [
            (
                "protocol:tcp,port:443",
                Direction::Ingress,
                "missing source",
            ),
            (
                "port:443,source:0.0.0.0/0",
                Direction::Ingress,
                "missing protocol",
            ),
            (
                "protocol:sctp,source:0.0.0.0/0",
                Direction::Ingress,
                "unknown protocol 'sctp'",
            ),
            (
                "protocol:tcp,port:0,source:0.0.0.0/0",
                Direction::Ingress,
                "between 1 and 65535",
            ),
            (
                "protocol:tcp,port:70000,source:0.0.0.0/0",
                Direction::Ingress,
                "between 1 and 65535",
            ),
            (
                "protocol:tcp,port:90-80,source:0.0.0.0/0",
                Direction::Ingress,
                "ends before it starts",
            ),
            (
                "protocol:icmp,port:1,source:0.0.0.0/0",
                Direction::Ingress,
                "tcp and udp only",
            ),
            (
                "protocol:tcp,source:10.0.0.0/33",
                Direction::Ingress,
                "larger than 32",
            ),
            (
                "protocol:tcp,source:bogus/8",
                Direction::Ingress,
                "not an IPv4 or IPv6",
            ),
            (
                "protocol:tcp,source:10.0.0.0",
                Direction::Ingress,
                "is not a CIDR",
            ),
            (
                "protocol:tcp,destination:0.0.0.0/0",
                Direction::Ingress,
                "ingress rules take 'source:'",
            ),
            (
                "protocol:all,source:0.0.0.0/0",
                Direction::Egress,
                "egress rules take 'destination:'",
            ),
            (
                "protocol:tcp,protocol:udp,source:0.0.0.0/0",
                Direction::Ingress,
                "given twice",
            ),
            (
                "tcp,source:0.0.0.0/0",
                Direction::Ingress,
                "'tcp' is not KEY:VALUE",
            ),
            (
                "protocol:tcp,colour:red",
                Direction::Ingress,
                "unknown key 'colour'",
            ),
            (
                "protocol:,source:0.0.0.0/0",
                Direction::Ingress,
                "'protocol' has no value",
            ),
        ];
        for (spec, dir, want) in cases {
            let err = parse_rule(spec, dir).unwrap_err();
            assert!(err.contains(want), "{spec}: {err}");
            assert!(err.contains(&format!("invalid rule '{spec}'")), "{err}");
            assert!(err.contains("expected e.g."), "{err}");
        }
    }

    #[test]
    fn rules_to_json_and_summary() {
        let v = parse_rules(
            &[
                "protocol:tcp,port:443,source:0.0.0.0/0".into(),
                "protocol:all,source:::/0".into(),
            ],
            Direction::Ingress,
        )
        .unwrap();
        let arr = v.as_array().unwrap();
        assert_eq!(arr.len(), 2);
        assert_eq!(rule_summary(&arr[0]), "tcp/443 0.0.0.0/0");
        assert_eq!(rule_summary(&arr[1]), "all ::/0");
        assert_eq!(
            rule_summary(
                &json!({"protocol":"PROTOCOL_UDP","port_from":53,"port_to":54,"ipv6_cidr":"fd00::/8"})
            ),
            "udp/53-54 fd00::/8"
        );
        assert_eq!(
            rule_summary(
                &json!({"protocol":"PROTOCOL_TCP","port_from":1,"port_to":65535,"ipv4_cidr":"10.0.0.0/8"})
            ),
            "tcp 10.0.0.0/8"
        );
    }

    #[test]
    fn cidrs() {
        assert_eq!(cidr_family("10.0.0.0/16"), Ok(Family::V4));
        assert_eq!(cidr_family("fd00::/48"), Ok(Family::V6));
        assert!(cidr_family("fd00::/129").is_err());
        assert_eq!(
            split_cidrs(&["10.0.0.0/16".into(), "fd00::/48".into()]),
            Ok((Some("10.0.0.0/16".into()), Some("fd00::/48".into())))
        );
        let err = split_cidrs(&["10.0.0.0/16".into(), "10.1.0.0/16".into()]).unwrap_err();
        assert!(err.contains("same family"), "{err}");
    }

    #[test]
    fn labels() {
        assert_eq!(
            parse_label_op("team=web"),
            Ok(LabelOp::Set("team".into(), "web".into()))
        );
        assert_eq!(
            parse_label_op("team="),
            Ok(LabelOp::Set("team".into(), String::new()))
        );
        assert_eq!(parse_label_op("team-"), Ok(LabelOp::Remove("team".into())));
        assert_eq!(
            parse_label_op("osac.openshift.io/default=true"),
            Ok(LabelOp::Set(
                "osac.openshift.io/default".into(),
                "true".into()
            ))
        );
        assert_eq!(
            parse_label_op("my-key-"),
            Ok(LabelOp::Remove("my-key".into()))
        );
        assert_eq!(
            parse_label_op("a-=b"),
            Ok(LabelOp::Set("a-".into(), "b".into()))
        );
        for bad in ["team", "-", "=v", "a b=c", ""] {
            assert!(parse_label_op(bad).is_err(), "{bad}");
        }
        assert!(parse_label("team-").is_err());
        let mut m = serde_json::Map::new();
        m.insert("old".into(), json!("x"));
        apply_label_ops(
            &mut m,
            &[
                LabelOp::Set("a".into(), "1".into()),
                LabelOp::Remove("old".into()),
            ],
        );
        assert_eq!(Value::Object(m), json!({"a":"1"}));
    }

    #[test]
    fn interfaces_and_capabilities() {
        assert_eq!(
            parse_host_type_interface("data-0:fabric").unwrap(),
            json!({"name":"data-0","role":"fabric"})
        );
        assert_eq!(
            parse_host_type_interface("bmc-0:lifecycle:the BMC").unwrap(),
            json!({"name":"bmc-0","role":"lifecycle","description":"the BMC"})
        );
        assert!(parse_host_type_interface("data-0").is_err());
        assert_eq!(
            parse_network_port("ib-0:Fabric:InfiniBand:400").unwrap(),
            json!({"name": "ib-0", "role": "fabric", "type": "infiniband", "speed_gbps": 400})
        );
        assert!(parse_network_port("ib-0:fabric:infiniband").is_err());
        assert!(parse_network_port("ib-0:fabric:infiniband:fast").is_err());
        assert_eq!(
            parse_host_interface("data-0=52:54:00:00:00:01").unwrap(),
            json!({"name":"data-0","mac_address":"52:54:00:00:00:01"})
        );
        assert!(parse_host_interface("data-0").is_err());
        assert_eq!(
            parse_host_interfaces("data-0=02:00:00:00:00:01, data-1=02:00:00:00:00:02").unwrap(),
            vec![
                json!({"name": "data-0", "mac_address": "02:00:00:00:00:01"}),
                json!({"name": "data-1", "mac_address": "02:00:00:00:00:02"})
            ]
        );
        let e = parse_host_interfaces("data-0=02:00:00:00:00:01,data-1").unwrap_err();
        assert!(e.contains("invalid interface 'data-1'"), "{e}");
        assert!(parse_host_interfaces(",").is_err());
        assert_eq!(capability_field("dual-stack"), Ok("supports_dual_stack"));
        assert!(capability_field("wifi").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("120"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5y").is_err());
    }
}
