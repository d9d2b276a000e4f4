//! Request validation that needs nothing but the object itself (SPEC §3).
//!
//! Rules that need other objects (parent READY, sibling overlap, capacity) live in the API's
//! service layer, inside the write transaction; the pure parts of those rules are here too.

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use crate::Invalid;
use crate::labels::{check_labels, check_name};
use crate::net::{Family, overlaps, parse_any_cidr, parse_cidr, parse_optional_cidr};
use crate::pb;

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

/// Checks a NetworkClass apart from the manager registry: managers named, defaults valid.
pub fn network_class(nc: &pb::NetworkClass) -> Result<(), Invalid> {
    metadata(nc.metadata.as_ref())?;
    if nc.fabric_manager.is_empty() {
        return Err(Invalid::new("fabric_manager", "fabric_manager is required"));
    }
    let spec = nc.spec.clone().unwrap_or_default();
    if !(0..=32).contains(&spec.vip_prefix_length) {
        return Err(Invalid::new(
            "spec.vip_prefix_length",
            "must be between 1 and 32 (0 = default 28)",
        ));
    }
    let Some(d) = spec.defaults.as_ref() else {
        return Err(Invalid::new(
            "spec.defaults",
            "defaults are required (tenant default networking)",
        ));
    };
    let vn = DualCidrs::parse(
        "spec.defaults.virtual_network",
        &d.virtual_network_ipv4_cidr,
        &d.virtual_network_ipv6_cidr,
    )
    .map_err(|e| Invalid::new(e.field.replace("network.ipv", "network_ipv"), e.message))?;
    let sub = DualCidrs::parse_optional(
        "spec.defaults.subnet",
        &d.subnet_ipv4_cidr,
        &d.subnet_ipv6_cidr,
    )
    .map_err(|e| Invalid::new(e.field.replace("subnet.ipv", "subnet_ipv"), e.message))?;
    if sub.v4.is_none() && sub.v6.is_none() {
        return Err(Invalid::new(
            "spec.defaults.subnet_ipv4_cidr",
            "at least one default subnet CIDR is required",
        ));
    }
    subnet_within(
        &sub,
        &vn,
        "spec.defaults.subnet",
        "the default VirtualNetwork CIDR",
    )?;
    security_rules("spec.defaults.ingress_rules", &d.ingress_rules)?;
    security_rules("spec.defaults.egress_rules", &d.egress_rules)?;
    Ok(())
}

/// Checks that each family of a subnet is present in the VN and inside its CIDR.
pub fn subnet_within(
    sub: &DualCidrs,
    vn: &DualCidrs,
    field: &str,
    vn_label: &str,
) -> Result<(), Invalid> {
    if let Some(s) = sub.v4 {
        match vn.v4 {
            None => {
                return Err(Invalid::new(
                    ipv_field(field, 4),
                    format!("IPv4 CIDR '{s}' given but {vn_label} has no IPv4 CIDR"),
                ));
            }
            Some(v) if !v.contains(&s) => {
                return Err(Invalid::new(
                    ipv_field(field, 4),
                    format!("IPv4 CIDR '{s}' is not inside {vn_label} '{v}'"),
                ));
            }
            _ => {}
        }
    }
    if let Some(s) = sub.v6 {
        match vn.v6 {
            None => {
                return Err(Invalid::new(
                    ipv_field(field, 6),
                    format!("IPv6 CIDR '{s}' given but {vn_label} has no IPv6 CIDR"),
                ));
            }
            Some(v) if !v.contains(&s) => {
                return Err(Invalid::new(
                    ipv_field(field, 6),
                    format!("IPv6 CIDR '{s}' is not inside {vn_label} '{v}'"),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

fn ipv_field(prefix: &str, v: u8) -> String {
    if prefix.ends_with(".subnet") {
        format!("{prefix}_ipv{v}_cidr")
    } else {
        format!("{prefix}.ipv{v}_cidr")
    }
}

/// Checks an ExternalIPPool: family set, ≥1 CIDR, all valid, same family, no overlap inside.
pub fn external_ip_pool(pool: &pb::ExternalIpPool) -> Result<Vec<IpNet>, Invalid> {
    metadata(pool.metadata.as_ref())?;
    let spec = pool.spec.clone().unwrap_or_default();
    let family = match pb::IpFamily::try_from(spec.ip_family) {
        Ok(pb::IpFamily::Ipv4) => Family::V4,
        Ok(pb::IpFamily::Ipv6) => Family::V6,
        _ => {
            return Err(Invalid::new(
                "spec.ip_family",
                "ip_family is required (IP_FAMILY_IPV4 or IP_FAMILY_IPV6)",
            ));
        }
    };
    if spec.cidrs.is_empty() {
        return Err(Invalid::new("spec.cidrs", "at least one CIDR is required"));
    }
    let mut nets: Vec<IpNet> = Vec::new();
    for (i, c) in spec.cidrs.iter().enumerate() {
        let net = parse_cidr(&format!("spec.cidrs[{i}]"), c, family)?;
        if let Some(other) = nets.iter().find(|o| overlaps(o, &net)) {
            return Err(Invalid::new(
                format!("spec.cidrs[{i}]"),
                format!("CIDR '{net}' overlaps with '{other}' of the same pool"),
            ));
        }
        nets.push(net);
    }
    Ok(nets)
}

/// Checks a HostType: interface names unique and DNS-like, roles known.
pub fn host_type(ht: &pb::HostType) -> Result<(), Invalid> {
    metadata(ht.metadata.as_ref())?;
    let mut seen = std::collections::HashSet::new();
    for (i, iface) in ht.interfaces.iter().enumerate() {
        check_name(&format!("interfaces[{i}].name"), &iface.name)?;
        if iface.name.is_empty() {
            return Err(Invalid::new(
                format!("interfaces[{i}].name"),
                "interface name is required",
            ));
        }
        if !seen.insert(iface.name.as_str()) {
            return Err(Invalid::new(
                format!("interfaces[{i}].name"),
                format!(
                    "interface '{}' appears twice; names are unique in a host type",
                    iface.name
                ),
            ));
        }
        if !["fabric", "management", "storage", "lifecycle"].contains(&iface.role.as_str()) {
            return Err(Invalid::new(
                format!("interfaces[{i}].role"),
                format!(
                    "role '{}' is not one of fabric, management, storage, lifecycle",
                    iface.role
                ),
            ));
        }
    }
    Ok(())
}

/// Checks a Tenant: a name is required (it is the tenant's identity in tokens and objects).
pub fn tenant(t: &pb::Tenant) -> Result<(), Invalid> {
    metadata(t.metadata.as_ref())?;
    if t.metadata.as_ref().is_none_or(|m| m.name.is_empty()) {
        return Err(Invalid::new("metadata.name", "a tenant needs a name"));
    }
    for (i, d) in t
        .spec
        .as_ref()
        .map(|s| s.domains.as_slice())
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        if d.is_empty()
            || d.split('.')
                .any(|p| check_name("", p).is_err() || p.is_empty())
        {
            return Err(Invalid::new(
                format!("spec.domains[{i}]"),
                format!("'{d}' is not a DNS domain"),
            ));
        }
    }
    Ok(())
}

/// Checks a VirtualNetwork's CIDRs; capability checks need the class.
pub fn virtual_network(vn: &pb::VirtualNetwork) -> Result<DualCidrs, Invalid> {
    metadata(vn.metadata.as_ref())?;
    let spec = vn.spec.clone().unwrap_or_default();
    DualCidrs::parse("spec", &spec.ipv4_cidr, &spec.ipv6_cidr)
}

/// Checks a Subnet on its own: VN named, CIDRs valid.
pub fn subnet(s: &pb::Subnet) -> Result<DualCidrs, Invalid> {
    metadata(s.metadata.as_ref())?;
    let spec = s.spec.clone().unwrap_or_default();
    if spec.virtual_network.is_empty() {
        return Err(Invalid::new(
            "spec.virtual_network",
            "virtual_network is required",
        ));
    }
    DualCidrs::parse("spec", &spec.ipv4_cidr, &spec.ipv6_cidr)
}

/// Checks a SecurityGroup: VN named, rules valid.
pub fn security_group(sg: &pb::SecurityGroup) -> Result<(), Invalid> {
    metadata(sg.metadata.as_ref())?;
    let spec = sg.spec.clone().unwrap_or_default();
    if spec.virtual_network.is_empty() {
        return Err(Invalid::new(
            "spec.virtual_network",
            "virtual_network is required",
        ));
    }
    security_rules("spec.ingress", &spec.ingress)?;
    security_rules("spec.egress", &spec.egress)
}

/// The family an ExternalIP asks for when no pool is named (default IPv4).
pub fn external_ip_family(e: &pb::ExternalIp) -> Result<Family, Invalid> {
    metadata(e.metadata.as_ref())?;
    match e.spec.as_ref().map(|s| s.ip_family).unwrap_or_default() {
        0 | 1 => Ok(Family::V4),
        2 => Ok(Family::V6),
        n => Err(Invalid::new(
            "spec.ip_family",
            format!("{n} is not a valid IpFamily"),
        )),
    }
}

/// The target of an ExternalIPAttachment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttachmentTarget {
    ComputeInstance(String),
    Cluster(String, pb::ExternalIpAttachmentEndpoint),
    BaremetalInstance(String),
}

/// Checks an ExternalIPAttachment: external IP named, exactly one target, endpoint rules.
pub fn external_ip_attachment(a: &pb::ExternalIpAttachment) -> Result<AttachmentTarget, Invalid> {
    use pb::ExternalIpAttachmentEndpoint as Ep;
    metadata(a.metadata.as_ref())?;
    let spec = a.spec.clone().unwrap_or_default();
    if spec.external_ip.is_empty() {
        return Err(Invalid::new("spec.external_ip", "external_ip is required"));
    }
    let set: Vec<&str> = [
        ("compute_instance", &spec.compute_instance),
        ("cluster", &spec.cluster),
        ("baremetal_instance", &spec.baremetal_instance),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(n, _)| n)
    .collect();
    if set.len() != 1 {
        return Err(Invalid::new(
            "spec",
            format!(
                "exactly one target of compute_instance, cluster, baremetal_instance is required (got {})",
                if set.is_empty() {
                    "none".to_string()
                } else {
                    set.join(", ")
                }
            ),
        ));
    }
    let endpoint = Ep::try_from(spec.target_endpoint).map_err(|_| {
        Invalid::new(
            "spec.target_endpoint",
            format!("{} is not a valid endpoint", spec.target_endpoint),
        )
    })?;
    match set[0] {
        "cluster" if endpoint == Ep::Unspecified => Err(Invalid::new(
            "spec.target_endpoint",
            "target_endpoint (API or INGRESS) is required when the target is a cluster",
        )),
        "cluster" => Ok(AttachmentTarget::Cluster(spec.cluster, endpoint)),
        other if endpoint != Ep::Unspecified => Err(Invalid::new(
            "spec.target_endpoint",
            format!("target_endpoint must be unset when the target is a {other}"),
        )),
        "compute_instance" => Ok(AttachmentTarget::ComputeInstance(spec.compute_instance)),
        _ => Ok(AttachmentTarget::BaremetalInstance(spec.baremetal_instance)),
    }
}

/// Checks a NATGateway: VN and external IP named.
pub fn nat_gateway(n: &pb::NatGateway) -> Result<(), Invalid> {
    metadata(n.metadata.as_ref())?;
    let spec = n.spec.clone().unwrap_or_default();
    if spec.virtual_network.is_empty() {
        return Err(Invalid::new(
            "spec.virtual_network",
            "virtual_network is required",
        ));
    }
    if spec.external_ip.is_empty() {
        return Err(Invalid::new("spec.external_ip", "external_ip is required"));
    }
    Ok(())
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

    #[test]
    fn attachment_targets() {
        let mut a = pb::ExternalIpAttachment::default();
        assert!(external_ip_attachment(&a).is_err());
        a.spec = Some(pb::ExternalIpAttachmentSpec {
            external_ip: "e".into(),
            ..Default::default()
        });
        assert!(
            external_ip_attachment(&a)
                .unwrap_err()
                .message
                .contains("exactly one")
        );
        a.spec.as_mut().unwrap().cluster = "c".into();
        assert_eq!(
            external_ip_attachment(&a).unwrap_err().field,
            "spec.target_endpoint"
        );
        a.spec.as_mut().unwrap().target_endpoint = 1;
        assert!(external_ip_attachment(&a).is_ok());
        a.spec.as_mut().unwrap().cluster.clear();
        a.spec.as_mut().unwrap().compute_instance = "vm".into();
        assert_eq!(
            external_ip_attachment(&a).unwrap_err().field,
            "spec.target_endpoint"
        );
    }

    #[test]
    fn pools() {
        let mut p = pb::ExternalIpPool {
            spec: Some(pb::ExternalIpPoolSpec {
                ip_family: 1,
                cidrs: vec!["203.0.113.0/24".into(), "203.0.113.128/25".into()],
            }),
            ..Default::default()
        };
        assert!(
            external_ip_pool(&p)
                .unwrap_err()
                .message
                .contains("overlaps")
        );
        p.spec.as_mut().unwrap().cidrs = vec!["2001:db8::/64".into()];
        assert!(external_ip_pool(&p).unwrap_err().message.contains("IPv6"));
    }
}
