//! The NetworkClass `defaults` shape of the OSAC networking designs, accepted on input beside
//! ours and rewritten to ours before the object is parsed (replies always carry ours):
//!
//! | design | ours |
//! |---|---|
//! | `virtualNetworkCIDR` | `virtual_network_ipv4_cidr` or `virtual_network_ipv6_cidr` (by family) |
//! | `ipv4SubnetCIDR`, `ipv6SubnetCIDR` | `subnet_ipv4_cidr`, `subnet_ipv6_cidr` |
//! | `securityGroupRules: [{direction, protocol, port, source}]` | `ingress_rules` / `egress_rules`: `{protocol, port_from, port_to, ipv4_cidr \| ipv6_cidr}` |
//!
//! `direction` is `ingress` or `egress`; `protocol` `tcp`, `udp`, `icmp` or `all` (any case);
//! `port` a number or `"from-to"` (TCP/UDP, absent = every port); `source` the peer CIDR (for
//! an egress rule, the destination). A field given in both shapes is refused.

use serde_json::{Map, Value, json};

use crate::Invalid;

const FIELD: &str = "spec.defaults";

/// Rewrites the design's keys of `body.spec.defaults` (a NetworkClass body) to ours.
pub fn canonical(body: &mut Value) -> Result<(), Invalid> {
    let Some(defaults) = body
        .get_mut("spec")
        .and_then(|s| s.get_mut("defaults"))
        .and_then(Value::as_object_mut)
    else {
        return Ok(());
    };
    if let Some(cidr) = defaults.remove("virtualNetworkCIDR") {
        let text = string(&cidr, "virtualNetworkCIDR")?;
        let ours = if text.contains(':') {
            "virtual_network_ipv6_cidr"
        } else {
            "virtual_network_ipv4_cidr"
        };
        put(defaults, "virtualNetworkCIDR", ours, json!(text))?;
    }
    for (design, ours) in [
        ("ipv4SubnetCIDR", "subnet_ipv4_cidr"),
        ("ipv6SubnetCIDR", "subnet_ipv6_cidr"),
    ] {
        if let Some(v) = defaults.remove(design) {
            put(defaults, design, ours, json!(string(&v, design)?))?;
        }
    }
    if let Some(rules) = defaults.remove("securityGroupRules") {
        let list = rules.as_array().ok_or_else(|| {
            Invalid::new(
                format!("{FIELD}.securityGroupRules"),
                "must be a list of rules",
            )
        })?;
        let (mut ingress, mut egress) = (Vec::new(), Vec::new());
        for (i, rule) in list.iter().enumerate() {
            let (is_ingress, ours) = security_rule(rule, i)?;
            if is_ingress {
                ingress.push(ours);
            } else {
                egress.push(ours);
            }
        }
        for (ours, rules) in [("ingress_rules", ingress), ("egress_rules", egress)] {
            if !rules.is_empty() {
                put(defaults, "securityGroupRules", ours, Value::Array(rules))?;
            }
        }
    }
    Ok(())
}

fn put(
    defaults: &mut Map<String, Value>,
    design: &str,
    ours: &str,
    v: Value,
) -> Result<(), Invalid> {
    if defaults.contains_key(ours) {
        return Err(Invalid::new(
            format!("{FIELD}.{design}"),
            format!("is the design's name of '{ours}', which is also set: give one of them"),
        ));
    }
    defaults.insert(ours.to_string(), v);
    Ok(())
}

fn string<'a>(v: &'a Value, design: &str) -> Result<&'a str, Invalid> {
    v.as_str()
        .ok_or_else(|| Invalid::new(format!("{FIELD}.{design}"), "must be a string (a CIDR)"))
}

/// One design rule: whether it is an ingress rule, and the rule in our shape.
fn security_rule(rule: &Value, i: usize) -> Result<(bool, Value), Invalid> {
    let field = |name: &str| format!("{FIELD}.securityGroupRules[{i}].{name}");
    let text = |name: &str| -> Result<Option<String>, Invalid> {
        match rule.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim().to_ascii_lowercase())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(_) => Err(Invalid::new(field(name), "must be a string")),
        }
    };
    if let Some(other) = rule.as_object().and_then(|o| {
        o.keys()
            .find(|k| !["direction", "protocol", "port", "source"].contains(&k.as_str()))
    }) {
        return Err(Invalid::new(
            field(other),
            "is not a field of a rule (direction, protocol, port, source)",
        ));
    }
    let is_ingress = match text("direction")?.as_deref() {
        Some("ingress") => true,
        Some("egress") => false,
        _ => {
            return Err(Invalid::new(
                field("direction"),
                "must be 'ingress' or 'egress'",
            ));
        }
    };
    let protocol = match text("protocol")?.as_deref() {
        Some("tcp") => "PROTOCOL_TCP",
        Some("udp") => "PROTOCOL_UDP",
        Some("icmp") => "PROTOCOL_ICMP",
        Some("all") | Some("any") | Some("-1") => "PROTOCOL_ALL",
        _ => {
            return Err(Invalid::new(
                field("protocol"),
                "must be one of tcp, udp, icmp, all",
            ));
        }
    };
    let mut ours = json!({ "protocol": protocol });
    if let Some(port) = text("port")? {
        let parse = |p: &str| {
            p.trim()
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| {
                    Invalid::new(
                        field("port"),
                        format!("'{port}' is not a port or a range 'from-to' of ports 1-65535"),
                    )
                })
        };
        let (from, to) = match port.split_once('-') {
            Some((a, b)) => (parse(a)?, parse(b)?),
            None => {
                let p = parse(&port)?;
                (p, p)
            }
        };
        ours["port_from"] = json!(from);
        ours["port_to"] = json!(to);
    }
    let Some(source) = text("source")? else {
        return Err(Invalid::new(field("source"), "is required (the peer CIDR)"));
    };
    let family = if source.contains(':') {
        "ipv6_cidr"
    } else {
        "ipv4_cidr"
    };
    ours[family] = json!(source);
    Ok((is_ingress, ours))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_designs_defaults_become_ours() {
        let mut body = json!({"spec": {"defaults": {
            "virtualNetworkCIDR": "10.0.0.0/16",
            "ipv4SubnetCIDR": "10.0.1.0/24",
            "ipv6SubnetCIDR": "fd00:1::/64",
            "securityGroupRules": [
                {"direction": "Ingress", "protocol": "TCP", "port": 443, "source": "0.0.0.0/0"},
                {"direction": "ingress", "protocol": "tcp", "port": "8000-8080", "source": "::/0"},
                {"direction": "egress", "protocol": "all", "source": "0.0.0.0/0"}
            ],
            "enable_nat_gateway": true
        }}});
        canonical(&mut body).unwrap();
        assert_eq!(
            body["spec"]["defaults"],
            json!({
                "virtual_network_ipv4_cidr": "10.0.0.0/16",
                "subnet_ipv4_cidr": "10.0.1.0/24",
                "subnet_ipv6_cidr": "fd00:1::/64",
                "ingress_rules": [
                    {"protocol": "PROTOCOL_TCP", "port_from": 443, "port_to": 443, "ipv4_cidr": "0.0.0.0/0"},
                    {"protocol": "PROTOCOL_TCP", "port_from": 8000, "port_to": 8080, "ipv6_cidr": "::/0"}
                ],
                "egress_rules": [{"protocol": "PROTOCOL_ALL", "ipv4_cidr": "0.0.0.0/0"}],
                "enable_nat_gateway": true
            })
        );
    }

    #[test]
    fn both_shapes_for_one_field_or_a_bad_rule_are_refused_naming_the_field() {
        let mut both = json!({"spec": {"defaults": {
            "virtualNetworkCIDR": "10.0.0.0/16", "virtual_network_ipv4_cidr": "10.1.0.0/16"}}});
        let e = canonical(&mut both).unwrap_err();
        assert_eq!(e.field, "spec.defaults.virtualNetworkCIDR");
        for (rule, field) in [
            (
                json!({"direction": "up", "protocol": "tcp", "source": "0.0.0.0/0"}),
                "direction",
            ),
            (
                json!({"direction": "ingress", "protocol": "gre", "source": "0.0.0.0/0"}),
                "protocol",
            ),
            (
                json!({"direction": "ingress", "protocol": "tcp", "port": "0", "source": "0.0.0.0/0"}),
                "port",
            ),
            (json!({"direction": "ingress", "protocol": "tcp"}), "source"),
            (
                json!({"direction": "ingress", "protocol": "tcp", "source": "0.0.0.0/0", "cidr": "x"}),
                "cidr",
            ),
        ] {
            let mut body = json!({"spec": {"defaults": {"securityGroupRules": [rule]}}});
            let e = canonical(&mut body).unwrap_err();
            assert_eq!(
                e.field,
                format!("spec.defaults.securityGroupRules[0].{field}")
            );
        }
        // Our shape alone is left as it is.
        let mut ours = json!({"spec": {"defaults": {"subnet_ipv4_cidr": "10.0.1.0/24"}}});
        let before = ours.clone();
        canonical(&mut ours).unwrap();
        assert_eq!(ours, before);
    }
}
