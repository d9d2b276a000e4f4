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

/// The pools a host may serve.
pub const HOST_POOLS: [&str; 2] = ["baremetal", "caas"];

/// Interface roles of a HostType that tenants may never attach.
pub const LIFECYCLE_ROLE: &str = "lifecycle";

/// The first `fabric` interface of a host type (the default attachment and cluster interface).
pub fn first_fabric_interface(ht: &pb::HostType) -> Option<&str> {
    ht.interfaces
        .iter()
        .find(|i| i.role == "fabric")
        .map(|i| i.name.as_str())
}

/// Normalises a MAC address by the one rule of [`crate::MacAddress`]: six hex octets
/// separated by `:` or `-` → lowercase, `:`-separated; multicast and all-zero addresses are not
/// interface addresses.
pub fn mac_address(field: &str, mac: &str) -> Result<String, Invalid> {
    mac.parse::<crate::MacAddress>()
        .map(|m| m.to_string())
        .map_err(|e| Invalid::new(field, e.to_string()))
}

/// Checks a Host against its HostType and returns the spec to store: every interface of the
/// type exactly once (in the type's order) with a normalised MAC, no MAC twice, a known pool.
/// `host_type` is the resolved id to store.
pub fn host(
    h: &pb::Host,
    ht: &pb::HostType,
    type_label: &str,
    host_type: &str,
) -> Result<pb::HostSpec, Invalid> {
    metadata(h.metadata.as_ref())?;
    let spec = h.spec.clone().unwrap_or_default();
    if !HOST_POOLS.contains(&spec.pool.as_str()) {
        return Err(Invalid::new(
            "spec.pool",
            if spec.pool.is_empty() {
                "pool is required (baremetal or caas)".to_string()
            } else {
                format!("pool '{}' is not one of baremetal, caas", spec.pool)
            },
        ));
    }
    if ht.interfaces.is_empty() {
        return Err(Invalid::new(
            "spec.host_type",
            format!(
                "HostType '{type_label}' has no interfaces (a virtual-machine type); a host needs a bare-metal type"
            ),
        ));
    }
    let names: Vec<&str> = ht.interfaces.iter().map(|i| i.name.as_str()).collect();
    let mut given: std::collections::HashMap<&str, (usize, String)> =
        std::collections::HashMap::new();
    let mut macs: std::collections::HashMap<String, &str> = std::collections::HashMap::new();
    for (i, iface) in spec.interfaces.iter().enumerate() {
        let at = format!("spec.interfaces[{i}]");
        if !names.contains(&iface.name.as_str()) {
            return Err(Invalid::new(
                format!("{at}.name"),
                format!(
                    "HostType '{type_label}' has no interface '{}' (it has {})",
                    iface.name,
                    names.join(", ")
                ),
            ));
        }
        if given.contains_key(iface.name.as_str()) {
            return Err(Invalid::new(
                format!("{at}.name"),
                format!("interface '{}' is listed twice", iface.name),
            ));
        }
        let mac = mac_address(&format!("{at}.mac_address"), &iface.mac_address)?;
        if let Some(other) = macs.get(&mac) {
            return Err(Invalid::new(
                format!("{at}.mac_address"),
                format!("MAC {mac} is also given for interface '{other}'; MACs are unique"),
            ));
        }
        macs.insert(mac.clone(), iface.name.as_str());
        given.insert(iface.name.as_str(), (i, mac));
    }
    let missing: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !given.contains_key(n))
        .collect();
    if !missing.is_empty() {
        return Err(Invalid::new(
            "spec.interfaces",
            format!(
                "every interface of HostType '{type_label}' needs its MAC address; missing: {}",
                missing.join(", ")
            ),
        ));
    }
    Ok(pb::HostSpec {
        host_type: host_type.to_string(),
        interfaces: names
            .iter()
            .filter_map(|n| {
                given.get(n).map(|(_, mac)| pb::HostInterface {
                    name: (*n).to_string(),
                    mac_address: mac.clone(),
                })
            })
            .collect(),
        pool: spec.pool,
    })
}

/// Checks the security-group references of one attachment: no empty entry, none twice.
pub fn security_group_refs(field: &str, sgs: &[String]) -> Result<(), Invalid> {
    let mut seen = std::collections::HashSet::new();
    for (i, sg) in sgs.iter().enumerate() {
        if sg.is_empty() {
            return Err(Invalid::new(
                format!("{field}[{i}]"),
                "security group reference is empty",
            ));
        }
        if !seen.insert(sg.as_str()) {
            return Err(Invalid::new(
                format!("{field}[{i}]"),
                format!("security group '{sg}' is listed twice"),
            ));
        }
    }
    Ok(())
}

/// The multi-NIC primary rule (SPEC §3.3): one attachment ⇒ it is primary; several ⇒ exactly
/// one `primary: true`. Returns the primary flags to store.
pub fn primary_flags(field: &str, flags: &[bool]) -> Result<Vec<bool>, Invalid> {
    if flags.len() == 1 {
        return Ok(vec![true]);
    }
    let n = flags.iter().filter(|p| **p).count();
    if flags.len() > 1 && n != 1 {
        return Err(Invalid::new(
            field,
            format!(
                "with several network attachments exactly one must be primary (got {n} of {} marked primary: true)",
                flags.len()
            ),
        ));
    }
    Ok(flags.to_vec())
}

/// The network attachments of a ComputeInstance as stored: the deprecated
/// `network_attachments` input converted, subnets named, SG references well-formed, the
/// primary rule applied. An empty list is returned as is (the caller decides).
pub fn compute_attachments(
    spec: &pb::ComputeInstanceSpec,
) -> Result<Vec<pb::ComputeNetworkAttachment>, Invalid> {
    let (field, atts): (&str, Vec<pb::ComputeNetworkAttachment>) = match (
        spec.compute_network_attachments.is_empty(),
        spec.network_attachments.is_empty(),
    ) {
        (false, false) => {
            return Err(Invalid::new(
                "spec.network_attachments",
                "set either compute_network_attachments or the deprecated network_attachments, not both",
            ));
        }
        (true, false) => (
            "spec.network_attachments",
            spec.network_attachments
                .iter()
                .map(|a| pb::ComputeNetworkAttachment {
                    subnet: a.subnet.clone(),
                    security_groups: a.security_groups.clone(),
                    primary: false,
                })
                .collect(),
        ),
        _ => (
            "spec.compute_network_attachments",
            spec.compute_network_attachments.clone(),
        ),
    };
    for (i, a) in atts.iter().enumerate() {
        if a.subnet.is_empty() {
            return Err(Invalid::new(
                format!("{field}[{i}].subnet"),
                "subnet is required",
            ));
        }
        security_group_refs(&format!("{field}[{i}].security_groups"), &a.security_groups)?;
    }
    let flags: Vec<bool> = if field == "spec.network_attachments" && atts.len() > 1 {
        // The deprecated form has no `primary`: its first attachment is the primary one.
        (0..atts.len()).map(|i| i == 0).collect()
    } else {
        atts.iter().map(|a| a.primary).collect()
    };
    let flags = primary_flags(field, &flags)?;
    Ok(atts
        .into_iter()
        .zip(flags)
        .map(|(mut a, p)| {
            a.primary = p;
            a
        })
        .collect())
}

/// The network attachments of a BareMetalInstance checked against its HostType (SPEC §3.3):
/// interfaces exist, never `lifecycle`, none twice, named when there are several, no more than
/// the attachable interfaces; a single attachment without interface gets the first `fabric`
/// one; the primary rule. Returns the attachments to store.
pub fn baremetal_attachments(
    atts: &[pb::BareMetalNetworkAttachment],
    ht: &pb::HostType,
    type_label: &str,
) -> Result<Vec<pb::BareMetalNetworkAttachment>, Invalid> {
    let field = "spec.network_attachments";
    if ht.interfaces.is_empty() {
        return Err(Invalid::new(
            "spec.host_type",
            format!(
                "HostType '{type_label}' has no interfaces (a virtual-machine type); a bare-metal instance needs a bare-metal type"
            ),
        ));
    }
    let attachable: Vec<&str> = ht
        .interfaces
        .iter()
        .filter(|i| i.role != LIFECYCLE_ROLE)
        .map(|i| i.name.as_str())
        .collect();
    if atts.len() > attachable.len() {
        return Err(Invalid::new(
            field,
            format!(
                "{} network attachments but HostType '{type_label}' has only {} tenant-attachable interfaces ({})",
                atts.len(),
                attachable.len(),
                attachable.join(", ")
            ),
        ));
    }
    let mut out = Vec::with_capacity(atts.len());
    let mut used = std::collections::HashSet::new();
    for (i, a) in atts.iter().enumerate() {
        let at = format!("{field}[{i}]");
        if a.subnet.is_empty() {
            return Err(Invalid::new(format!("{at}.subnet"), "subnet is required"));
        }
        security_group_refs(&format!("{at}.security_groups"), &a.security_groups)?;
        let mut a = a.clone();
        if a.interface.is_empty() {
            if atts.len() > 1 {
                return Err(Invalid::new(
                    format!("{at}.interface"),
                    "with several network attachments every attachment must name its interface",
                ));
            }
            a.interface = first_fabric_interface(ht)
                .ok_or_else(|| {
                    Invalid::new(
                        format!("{at}.interface"),
                        format!(
                            "HostType '{type_label}' has no fabric interface to default to; name the interface"
                        ),
                    )
                })?
                .to_string();
        }
        let Some(iface) = ht.interfaces.iter().find(|x| x.name == a.interface) else {
            return Err(Invalid::new(
                format!("{at}.interface"),
                format!(
                    "HostType '{type_label}' has no interface '{}' (attachable: {})",
                    a.interface,
                    attachable.join(", ")
                ),
            ));
        };
        if iface.role == LIFECYCLE_ROLE {
            return Err(Invalid::new(
                format!("{at}.interface"),
                format!(
                    "interface '{}' is a lifecycle interface and is never tenant-attachable",
                    a.interface
                ),
            ));
        }
        if !used.insert(a.interface.clone()) {
            return Err(Invalid::new(
                format!("{at}.interface"),
                format!("interface '{}' is attached twice", a.interface),
            ));
        }
        out.push(a);
    }
    let flags = primary_flags(field, &out.iter().map(|a| a.primary).collect::<Vec<_>>())?;
    for (a, p) in out.iter_mut().zip(flags) {
        a.primary = p;
    }
    Ok(out)
}

/// Checks the shape of a Cluster: node sets named (DNS labels), each with a host type and a
/// size ≥ 1; the attachment's SG references well-formed. Host types are checked with
/// [`cluster_node_set`] once resolved.
pub fn cluster(c: &pb::Cluster) -> Result<(), Invalid> {
    metadata(c.metadata.as_ref())?;
    let spec = c.spec.clone().unwrap_or_default();
    if spec.node_sets.is_empty() {
        return Err(Invalid::new(
            "spec.node_sets",
            "at least one node set is required",
        ));
    }
    let mut names: Vec<&String> = spec.node_sets.keys().collect();
    names.sort();
    for name in names {
        let at = format!("spec.node_sets.{name}");
        if name.is_empty() {
            return Err(Invalid::new("spec.node_sets", "a node set needs a name"));
        }
        check_name(&at, name)?;
        let ns = &spec.node_sets[name];
        if ns.host_type.is_empty() {
            return Err(Invalid::new(
                format!("{at}.host_type"),
                "host_type is required",
            ));
        }
        if ns.size < 1 {
            return Err(Invalid::new(
                format!("{at}.size"),
                format!("size must be at least 1 (got {})", ns.size),
            ));
        }
    }
    if let Some(a) = &spec.network_attachment {
        security_group_refs(
            "spec.network_attachment.security_groups",
            &a.security_groups,
        )?;
    }
    Ok(())
}

/// The `fabric_interface` of a cluster node set: the first `fabric` interface of its HostType.
/// v1 builds clusters from bare-metal agents only.
pub fn cluster_node_set(
    name: &str,
    ht: &pb::HostType,
    type_label: &str,
) -> Result<String, Invalid> {
    let at = format!("spec.node_sets.{name}.host_type");
    if ht.interfaces.is_empty() {
        return Err(Invalid::new(
            at,
            format!(
                "HostType '{type_label}' has no interfaces (a virtual-machine type); v1 supports bare-metal node sets only"
            ),
        ));
    }
    first_fabric_interface(ht)
        .map(str::to_string)
        .ok_or_else(|| {
            Invalid::new(
                at,
                format!(
                    "HostType '{type_label}' has no fabric interface; cluster agents join the subnet through one"
                ),
            )
        })
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
                ..Default::default()
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

    fn bm_type() -> pb::HostType {
        let iface = |name: &str, role: &str| pb::HostTypeInterface {
            name: name.into(),
            role: role.into(),
            description: String::new(),
        };
        pb::HostType {
            interfaces: vec![
                iface("mgmt-0", "management"),
                iface("data-0", "fabric"),
                iface("data-1", "fabric"),
                iface("bmc-0", "lifecycle"),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn macs_normalise_and_reject_non_unicast() {
        assert_eq!(
            mac_address("m", "0E-AA-bb-00-01-FF").unwrap(),
            "0e:aa:bb:00:01:ff"
        );
        assert!(mac_address("m", "0e:aa:bb:00:01").is_err());
        assert!(mac_address("m", "0e:aa:bb:00:01:zz").is_err());
        assert!(mac_address("m", "0e:aa-bb:00:01:ff").is_err());
        assert!(
            mac_address("m", "01:00:5e:00:00:01")
                .unwrap_err()
                .message
                .contains("multicast")
        );
        assert!(mac_address("m", "00:00:00:00:00:00").is_err());
    }

    #[test]
    fn host_interfaces_match_the_type() {
        let ht = bm_type();
        let ifaces = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(n, m)| pb::HostInterface {
                    name: (*n).into(),
                    mac_address: (*m).into(),
                })
                .collect::<Vec<_>>()
        };
        let all = [
            ("data-1", "0E:00:00:00:00:02"),
            ("data-0", "0e:00:00:00:00:01"),
            ("mgmt-0", "0e:00:00:00:00:03"),
            ("bmc-0", "0e:00:00:00:00:04"),
        ];
        let mut h = pb::Host {
            spec: Some(pb::HostSpec {
                host_type: "bm".into(),
                interfaces: ifaces(&all),
                pool: "caas".into(),
            }),
            ..Default::default()
        };
        let spec = host(&h, &ht, "bm", "id-1").unwrap();
        assert_eq!(spec.host_type, "id-1");
        let order: Vec<_> = spec.interfaces.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(order, ["mgmt-0", "data-0", "data-1", "bmc-0"]);
        assert_eq!(spec.interfaces[2].mac_address, "0e:00:00:00:00:02");

        h.spec.as_mut().unwrap().pool = "vm".into();
        assert_eq!(host(&h, &ht, "bm", "i").unwrap_err().field, "spec.pool");
        h.spec.as_mut().unwrap().pool = "baremetal".into();
        h.spec.as_mut().unwrap().interfaces = ifaces(&all[..3]);
        assert!(
            host(&h, &ht, "bm", "i")
                .unwrap_err()
                .message
                .contains("missing: bmc-0")
        );
        let mut extra = ifaces(&all);
        extra.push(pb::HostInterface {
            name: "eth9".into(),
            mac_address: "0e:00:00:00:00:09".into(),
        });
        h.spec.as_mut().unwrap().interfaces = extra;
        assert_eq!(
            host(&h, &ht, "bm", "i").unwrap_err().field,
            "spec.interfaces[4].name"
        );
        let mut dup = ifaces(&all);
        dup[1].mac_address = "0e:00:00:00:00:02".into();
        h.spec.as_mut().unwrap().interfaces = dup;
        assert_eq!(
            host(&h, &ht, "bm", "i").unwrap_err().field,
            "spec.interfaces[1].mac_address"
        );
        assert!(host(&h, &pb::HostType::default(), "vm", "i").is_err());
    }

    #[test]
    fn compute_attachment_rules() {
        let att = |subnet: &str, primary: bool| pb::ComputeNetworkAttachment {
            subnet: subnet.into(),
            security_groups: vec![],
            primary,
        };
        let mut spec = pb::ComputeInstanceSpec {
            compute_network_attachments: vec![att("a", false)],
            ..Default::default()
        };
        assert!(compute_attachments(&spec).unwrap()[0].primary);
        spec.compute_network_attachments = vec![att("a", false), att("b", false)];
        let e = compute_attachments(&spec).unwrap_err();
        assert!(e.message.contains("exactly one must be primary"), "{e}");
        spec.compute_network_attachments = vec![att("a", true), att("b", true)];
        assert!(compute_attachments(&spec).is_err());
        spec.compute_network_attachments = vec![att("a", false), att("b", true)];
        let out = compute_attachments(&spec).unwrap();
        assert_eq!(
            out.iter().map(|a| a.primary).collect::<Vec<_>>(),
            [false, true]
        );
        spec.network_attachments = vec![pb::NetworkAttachment {
            subnet: "c".into(),
            security_groups: vec![],
        }];
        assert_eq!(
            compute_attachments(&spec).unwrap_err().field,
            "spec.network_attachments"
        );
        spec.compute_network_attachments.clear();
        spec.network_attachments.push(pb::NetworkAttachment {
            subnet: "d".into(),
            security_groups: vec!["x".into(), "x".into()],
        });
        assert_eq!(
            compute_attachments(&spec).unwrap_err().field,
            "spec.network_attachments[1].security_groups[1]"
        );
        spec.network_attachments[1].security_groups.pop();
        let out = compute_attachments(&spec).unwrap();
        assert_eq!(
            out.iter()
                .map(|a| (a.subnet.as_str(), a.primary))
                .collect::<Vec<_>>(),
            [("c", true), ("d", false)]
        );
        spec.network_attachments.clear();
        assert!(compute_attachments(&spec).unwrap().is_empty());
        spec.compute_network_attachments = vec![att("", true)];
        assert_eq!(
            compute_attachments(&spec).unwrap_err().field,
            "spec.compute_network_attachments[0].subnet"
        );
    }

    #[test]
    fn baremetal_attachment_rules() {
        let ht = bm_type();
        let att = |iface: &str, primary: bool| pb::BareMetalNetworkAttachment {
            subnet: "s".into(),
            security_groups: vec![],
            interface: iface.into(),
            primary,
        };
        let check =
            |atts: &[pb::BareMetalNetworkAttachment]| baremetal_attachments(atts, &ht, "bm");
        // A single attachment defaults to the first fabric interface and is primary.
        let out = check(&[att("", false)]).unwrap();
        assert_eq!(
            (out[0].interface.as_str(), out[0].primary),
            ("data-0", true)
        );
        let e = check(&[att("eth7", false)]).unwrap_err();
        assert_eq!(e.field, "spec.network_attachments[0].interface");
        assert!(e.message.contains("no interface 'eth7'"));
        assert!(
            check(&[att("bmc-0", false)])
                .unwrap_err()
                .message
                .contains("lifecycle")
        );
        assert!(
            check(&[att("data-0", true), att("data-0", false)])
                .unwrap_err()
                .message
                .contains("attached twice")
        );
        assert!(
            check(&[att("data-0", true), att("", false)])
                .unwrap_err()
                .message
                .contains("must name its interface")
        );
        assert!(
            check(&[att("data-0", false), att("data-1", false)])
                .unwrap_err()
                .message
                .contains("exactly one must be primary")
        );
        let out = check(&[att("data-0", false), att("data-1", true)]).unwrap();
        assert!(!out[0].primary && out[1].primary);
        let four = [
            att("data-0", true),
            att("data-1", false),
            att("mgmt-0", false),
            att("bmc-0", false),
        ];
        assert!(
            check(&four)
                .unwrap_err()
                .message
                .contains("only 3 tenant-attachable")
        );
        let no_fabric = pb::HostType {
            interfaces: vec![ht.interfaces[0].clone()],
            ..Default::default()
        };
        assert!(
            baremetal_attachments(&[att("", false)], &no_fabric, "x")
                .unwrap_err()
                .message
                .contains("no fabric interface")
        );
        assert_eq!(
            baremetal_attachments(&[att("", false)], &pb::HostType::default(), "vm")
                .unwrap_err()
                .field,
            "spec.host_type"
        );
    }

    #[test]
    fn cluster_rules() {
        let mut c = pb::Cluster {
            spec: Some(pb::ClusterSpec::default()),
            ..Default::default()
        };
        assert_eq!(cluster(&c).unwrap_err().field, "spec.node_sets");
        let ns = |ht: &str, size: i32| pb::ClusterNodeSet {
            host_type: ht.into(),
            size,
            fabric_interface: String::new(),
        };
        let spec = c.spec.as_mut().unwrap();
        spec.node_sets.insert("workers".into(), ns("bm", 0));
        assert_eq!(
            cluster(&c).unwrap_err().field,
            "spec.node_sets.workers.size"
        );
        let spec = c.spec.as_mut().unwrap();
        spec.node_sets.insert("workers".into(), ns("", 3));
        assert_eq!(
            cluster(&c).unwrap_err().field,
            "spec.node_sets.workers.host_type"
        );
        let spec = c.spec.as_mut().unwrap();
        spec.node_sets.clear();
        spec.node_sets.insert("Bad_Name".into(), ns("bm", 3));
        assert!(cluster(&c).is_err());
        let spec = c.spec.as_mut().unwrap();
        spec.node_sets.clear();
        spec.node_sets.insert("workers".into(), ns("bm", 3));
        assert!(cluster(&c).is_ok());
        assert_eq!(
            cluster_node_set("workers", &bm_type(), "bm").unwrap(),
            "data-0"
        );
        assert!(
            cluster_node_set("workers", &pb::HostType::default(), "vm")
                .unwrap_err()
                .message
                .contains("bare-metal node sets only")
        );
    }
}
