//! Request validation that needs nothing but the object itself: the helpers several kinds
//! share (metadata, CIDR pairs, security rules). Each kind's own rules are in
//! `kinds/<kind>.rs`.
//!
//! Rules that need other objects (parent READY, sibling overlap, capacity) live in the API's
//! service layer, inside the write transaction; the pure parts of those rules are here too.

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use crate::Invalid;
use crate::labels::{check_labels, check_name};
use crate::net::{Family, overlaps, parse_any_cidr, parse_cidr, parse_optional_cidr};
use crate::pb;

// Kind rules, also under the names other crates call them by.
pub use crate::kinds::external_ip_pool::validate as external_ip_pool;
pub use crate::kinds::host::mac_address;

/// The CIDRs of an object with an optional IPv4 and an optional IPv6 prefix.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DualCidrs {
    pub v4: Option<Ipv4Net>,
    pub v6: Option<Ipv6Net>,
}

impl DualCidrs {
    /// Parses the two fields; at least one must be set.
    pub fn parse(prefix: &str, v4: &str, v6: &str) -> Result<Self, Invalid> {
        let cidrs = Self::parse_optional(prefix, v4, v6)?;
        if cidrs.v4.is_none() && cidrs.v6.is_none() {
            return Err(Invalid::new(
                format!("{prefix}.ipv4_cidr"),
                format!("at least one of {prefix}.ipv4_cidr and {prefix}.ipv6_cidr is required"),
            ));
        }
        Ok(cidrs)
    }

    /// Parses the two fields; both may be empty.
    pub fn parse_optional(prefix: &str, v4: &str, v6: &str) -> Result<Self, Invalid> {
        let v4 = parse_optional_cidr(&format!("{prefix}.ipv4_cidr"), v4, Family::V4)?;
        let v6 = parse_optional_cidr(&format!("{prefix}.ipv6_cidr"), v6, Family::V6)?;
        Ok(Self {
            v4: v4.and_then(|n| match n {
                IpNet::V4(n) => Some(n),
                IpNet::V6(_) => None,
            }),
            v6: v6.and_then(|n| match n {
                IpNet::V6(n) => Some(n),
                IpNet::V4(_) => None,
            }),
        })
    }

    /// Whether both families are present.
    pub fn is_dual_stack(&self) -> bool {
        self.v4.is_some() && self.v6.is_some()
    }

    /// The sibling rule of subnets: two subnets of one VirtualNetwork share no address, in
    /// either family. Returns the first overlapping pair (IPv4 first; this object's prefix,
    /// then `other`'s), or `None` when the two may stand side by side. The API and every fabric
    /// driver apply this one rule, each wording its own refusal.
    pub fn overlap(&self, other: &DualCidrs) -> Option<(IpNet, IpNet)> {
        let v4 = self
            .v4
            .zip(other.v4)
            .map(|(a, b)| (IpNet::V4(a), IpNet::V4(b)));
        let v6 = self
            .v6
            .zip(other.v6)
            .map(|(a, b)| (IpNet::V6(a), IpNet::V6(b)));
        [v4, v6]
            .into_iter()
            .flatten()
            .find(|(mine, theirs)| overlaps(mine, theirs))
    }
}

/// Checks that a field naming something is set; the message names the field's last path
/// segment (`spec.virtual_network` → "virtual_network is required").
pub fn required(field: impl Into<String>, value: &str) -> Result<(), Invalid> {
    if !value.is_empty() {
        return Ok(());
    }
    let field = field.into();
    let name = field.rsplit('.').next().unwrap_or(&field).to_string();
    Err(Invalid::new(field, format!("{name} is required")))
}

/// Checks the user-settable metadata: name and labels.
pub fn metadata(meta: Option<&pb::Metadata>) -> Result<(), Invalid> {
    if let Some(m) = meta {
        check_name("metadata.name", &m.name)?;
        check_labels("metadata.labels", &m.labels)?;
    }
    Ok(())
}

/// Checks security rules: protocol required, ports only for TCP/UDP (1–65535, from ≤ to), a peer.
pub fn security_rules(field: &str, rules: &[pb::SecurityRule]) -> Result<(), Invalid> {
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let protocol = pb::Protocol::try_from(rule.protocol).unwrap_or(pb::Protocol::Unspecified);
        let ported = matches!(protocol, pb::Protocol::Tcp | pb::Protocol::Udp);
        if protocol == pb::Protocol::Unspecified {
            return Err(Invalid::new(
                format!("{at}.protocol"),
                "protocol is required (PROTOCOL_TCP, PROTOCOL_UDP, PROTOCOL_ICMP or PROTOCOL_ALL)",
            ));
        }
        if !ported && (rule.port_from != 0 || rule.port_to != 0) {
            return Err(Invalid::new(
                format!("{at}.port_from"),
                format!(
                    "ports are only allowed for TCP and UDP, not {}",
                    protocol.as_str_name()
                ),
            ));
        }
        for (name, port) in [("port_from", rule.port_from), ("port_to", rule.port_to)] {
            if port != 0 && !(1..=65535).contains(&port) {
                return Err(Invalid::new(
                    format!("{at}.{name}"),
                    format!("port {port} is outside 1–65535"),
                ));
            }
        }
        if rule.port_to != 0 && rule.port_from > rule.port_to {
            return Err(Invalid::new(
                format!("{at}.port_from"),
                format!(
                    "port_from {} is greater than port_to {}",
                    rule.port_from, rule.port_to
                ),
            ));
        }
        if rule.port_to != 0 && rule.port_from == 0 {
            return Err(Invalid::new(
                format!("{at}.port_from"),
                "port_from is required when port_to is set",
            ));
        }
        match (rule.ipv4_cidr.is_empty(), rule.ipv6_cidr.is_empty()) {
            (true, true) => {
                return Err(Invalid::new(
                    format!("{at}.ipv4_cidr"),
                    "a peer CIDR is required (ipv4_cidr or ipv6_cidr; 0.0.0.0/0 or ::/0 for any)",
                ));
            }
            (false, false) => {
                return Err(Invalid::new(
                    format!("{at}.ipv4_cidr"),
                    "set only one of ipv4_cidr and ipv6_cidr per rule",
                ));
            }
            (false, true) => {
                parse_cidr(&format!("{at}.ipv4_cidr"), &rule.ipv4_cidr, Family::V4)?;
            }
            (true, false) => {
                parse_cidr(&format!("{at}.ipv6_cidr"), &rule.ipv6_cidr, Family::V6)?;
            }
        }
    }
    Ok(())
}

/// Checks that each family of a subnet is present in the VN and inside its CIDR.
pub fn subnet_within(
    sub: &DualCidrs,
    vn: &DualCidrs,
    field: &str,
    vn_label: &str,
) -> Result<(), Invalid> {
    family_within(
        4,
        sub.v4.map(IpNet::V4),
        vn.v4.map(IpNet::V4),
        field,
        vn_label,
    )?;
    family_within(
        6,
        sub.v6.map(IpNet::V6),
        vn.v6.map(IpNet::V6),
        field,
        vn_label,
    )
}

/// One IP family `v` of [`subnet_within`]: a subnet CIDR of that family needs the VN's CIDR of
/// the same family, and must lie inside it.
fn family_within(
    v: u8,
    sub: Option<IpNet>,
    vn: Option<IpNet>,
    field: &str,
    vn_label: &str,
) -> Result<(), Invalid> {
    let Some(s) = sub else {
        return Ok(());
    };
    match vn {
        None => Err(Invalid::new(
            ipv_field(field, v),
            format!("IPv{v} CIDR '{s}' given but {vn_label} has no IPv{v} CIDR"),
        )),
        Some(n) if !n.contains(&s) => Err(Invalid::new(
            ipv_field(field, v),
            format!("IPv{v} CIDR '{s}' is not inside {vn_label} '{n}'"),
        )),
        _ => Ok(()),
    }
}

fn ipv_field(prefix: &str, v: u8) -> String {
    if prefix.ends_with(".subnet") {
        format!("{prefix}_ipv{v}_cidr")
    } else {
        format!("{prefix}.ipv{v}_cidr")
    }
}

/// Parses a peer CIDR of a rule (either family) for drivers and the CLI.
pub fn rule_peer(rule: &pb::SecurityRule) -> Result<IpNet, Invalid> {
    if rule.ipv4_cidr.is_empty() {
        parse_any_cidr("ipv6_cidr", &rule.ipv6_cidr)
    } else {
        parse_any_cidr("ipv4_cidr", &rule.ipv4_cidr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(protocol: pb::Protocol, from: i32, to: i32, v4: &str) -> pb::SecurityRule {
        pb::SecurityRule {
            protocol: protocol as i32,
            port_from: from,
            port_to: to,
            ipv4_cidr: v4.into(),
            ipv6_cidr: String::new(),
        }
    }

    #[test]
    fn security_rule_rules() {
        let ok = |r| security_rules("spec.ingress", &[r]).is_ok();
        assert!(ok(rule(pb::Protocol::Tcp, 443, 443, "0.0.0.0/0")));
        assert!(ok(rule(pb::Protocol::Tcp, 0, 0, "10.0.0.0/8")));
        assert!(ok(rule(pb::Protocol::Icmp, 0, 0, "0.0.0.0/0")));
        assert!(!ok(rule(pb::Protocol::Unspecified, 0, 0, "0.0.0.0/0")));
        assert!(!ok(rule(pb::Protocol::Icmp, 1, 2, "0.0.0.0/0")));
        assert!(!ok(rule(pb::Protocol::Tcp, 0, 70000, "0.0.0.0/0")));
        assert!(!ok(rule(pb::Protocol::Tcp, 90, 80, "0.0.0.0/0")));
        assert!(!ok(rule(pb::Protocol::Tcp, 80, 80, "")));
        assert!(!ok(rule(pb::Protocol::Tcp, 80, 80, "10.0.0.1/8")));
        let e = security_rules(
            "spec.ingress",
            &[rule(pb::Protocol::Tcp, 90, 80, "0.0.0.0/0")],
        )
        .unwrap_err();
        assert_eq!(e.field, "spec.ingress[0].port_from");
    }

    #[test]
    fn required_names_the_field() {
        assert!(required("spec.virtual_network", "vn").is_ok());
        let e = required("spec.virtual_network", "").unwrap_err();
        assert_eq!(e.field, "spec.virtual_network");
        assert_eq!(e.message, "virtual_network is required");
        let e = required("fabric_manager", "").unwrap_err();
        assert_eq!(e.message, "fabric_manager is required");
    }

    #[test]
    fn sibling_subnets_may_not_overlap_in_either_family() {
        let d = |v4: &str, v6: &str| DualCidrs::parse_optional("spec", v4, v6).unwrap();
        let a = d("10.0.1.0/24", "fd00:0:0:1::/64");
        // Inside, around, or equal in one family is an overlap; IPv4 is reported first.
        let (m, o) = a.overlap(&d("10.0.1.128/25", "")).unwrap();
        assert_eq!(
            (m.to_string(), o.to_string()),
            ("10.0.1.0/24".into(), "10.0.1.128/25".into())
        );
        assert!(d("10.0.0.0/16", "").overlap(&a).is_some());
        let (m, _) = a.overlap(&d("10.0.2.0/24", "fd00:0:0:1::/80")).unwrap();
        assert_eq!(m.to_string(), "fd00:0:0:1::/64");
        // Adjacent prefixes, or prefixes of different families, stand side by side.
        assert_eq!(a.overlap(&d("10.0.2.0/24", "fd00:0:0:2::/64")), None);
        assert_eq!(
            d("10.0.1.0/24", "").overlap(&d("", "fd00:0:0:1::/64")),
            None
        );
    }

    #[test]
    fn subnet_inside_vn() {
        let vn = DualCidrs::parse("spec", "10.0.0.0/16", "").unwrap();
        let inside = DualCidrs::parse("spec", "10.0.1.0/24", "").unwrap();
        let outside = DualCidrs::parse("spec", "10.1.1.0/24", "").unwrap();
        let v6 = DualCidrs::parse("spec", "", "fd00::/64").unwrap();
        assert!(subnet_within(&inside, &vn, "spec", "VirtualNetwork 'n'").is_ok());
        let e = subnet_within(&outside, &vn, "spec", "VirtualNetwork 'n'").unwrap_err();
        assert_eq!(e.field, "spec.ipv4_cidr");
        assert!(subnet_within(&v6, &vn, "spec", "VirtualNetwork 'n'").is_err());
    }
}
