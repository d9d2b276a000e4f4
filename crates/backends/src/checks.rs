//! The preconditions every driver of the manager contract (the sim and the linux drivers)
//! applies to a request before it changes anything, in one place so both refuse the same
//! requests with the same words. Each check is a pure function of the request and of what the
//! driver already holds (passed in as plain values); a refusal is [`OpError::Permanent`]:
//! retrying the same request cannot help.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use osac_model::MacAddress;
use osac_model::validate::DualCidrs;

use crate::contract::OpError;
use crate::net::{has_host_bits, ipv4_gateway, ipv6_gateway, lowest_free};
use crate::types::*;

/// Largest segment id a VXLAN overlay can carry (24-bit VNI).
pub const MAX_VNI: i64 = (1 << 24) - 1;

/// How many users a "still in use" refusal names before it says "…".
const USERS_NAMED: usize = 5;

// ---- fields ----

/// An id or name field must hold more than white space.
pub fn require_non_empty(field: &str, value: &str) -> Result<(), OpError> {
    if value.trim().is_empty() {
        Err(OpError::permanent(format!("{field} must not be empty")))
    } else {
        Ok(())
    }
}

/// A prefix must be a network address: no bits set past its length.
pub fn no_host_bits(field: &str, net: IpNet) -> Result<(), OpError> {
    if has_host_bits(net) {
        Err(OpError::permanent(format!(
            "{field} '{net}' has host bits set (did you mean '{}'?)",
            net.trunc()
        )))
    } else {
        Ok(())
    }
}

/// The `mac_address` of a request, read by the one MAC rule of [`MacAddress`].
pub fn mac_address(text: &str) -> Result<MacAddress, OpError> {
    text.parse()
        .map_err(|e| OpError::permanent(format!("mac_address {e}")))
}

// ---- references ----

/// Refusal of a request naming a VirtualNetwork the driver does not hold.
pub fn missing_virtual_network(id: &str) -> OpError {
    OpError::permanent(format!("virtual network '{id}' does not exist"))
}

/// Refusal of a request naming a subnet the driver does not hold.
pub fn missing_subnet(id: &str) -> OpError {
    OpError::permanent(format!("subnet '{id}' does not exist"))
}

/// A subnet named with a VirtualNetwork must belong to that VirtualNetwork.
pub fn subnet_in(subnet_id: &str, its_vn: &str, requested_vn: &str) -> Result<(), OpError> {
    if its_vn == requested_vn {
        Ok(())
    } else {
        Err(OpError::permanent(format!(
            "subnet '{subnet_id}' belongs to virtual network '{its_vn}', not '{requested_vn}'"
        )))
    }
}

/// A security group named with a VirtualNetwork must belong to that VirtualNetwork.
pub fn security_group_in(sg_id: &str, its_vn: &str, requested_vn: &str) -> Result<(), OpError> {
    if its_vn == requested_vn {
        Ok(())
    } else {
        Err(OpError::permanent(format!(
            "security group '{sg_id}' belongs to virtual network '{its_vn}', not '{requested_vn}'"
        )))
    }
}

/// An object created again must stay in its VirtualNetwork (`what` names it, e.g.
/// "NAT gateway 'n'").
pub fn stays_in(what: &str, its_vn: Option<&str>, requested_vn: &str) -> Result<(), OpError> {
    match its_vn {
        Some(vn) if vn != requested_vn => Err(OpError::permanent(format!(
            "{what} belongs to virtual network '{vn}'"
        ))),
        _ => Ok(()),
    }
}

/// An object in use cannot be deleted: names the first users and the count of more.
pub fn still_in_use<'a>(
    what: &str,
    users: impl ExactSizeIterator<Item = &'a str>,
) -> Result<(), OpError> {
    let total = users.len();
    if total == 0 {
        return Ok(());
    }
    let named: Vec<&str> = users.take(USERS_NAMED).collect();
    Err(OpError::permanent(format!(
        "{what} is still in use by {}{}",
        named.join(", "),
        if total > named.len() { ", …" } else { "" }
    )))
}

/// A subnet with network attachments cannot be deleted.
pub fn subnet_unused(subnet_id: &str, attachments: usize, example: &str) -> Result<(), OpError> {
    if attachments == 0 {
        return Ok(());
    }
    Err(OpError::permanent(format!(
        "subnet '{subnet_id}' still has {attachments} network attachment(s), e.g. '{example}'"
    )))
}

/// A security group applied to network attachments cannot be deleted.
pub fn security_group_unused(sg_id: &str, users: usize, example: &str) -> Result<(), OpError> {
    if users == 0 {
        return Ok(());
    }
    Err(OpError::permanent(format!(
        "security group '{sg_id}' is still applied to {users} network attachment(s), e.g. '{example}'"
    )))
}

// ---- virtual networks ----

/// A VirtualNetwork's prefixes are network addresses.
pub fn virtual_network(r: &CreateVirtualNetworkRequest) -> Result<(), OpError> {
    require_non_empty("virtual_network_id", &r.virtual_network_id)?;
    if let Some(n) = r.ipv4_cidr {
        no_host_bits("ipv4_cidr", IpNet::V4(n))?;
    }
    if let Some(n) = r.ipv6_cidr {
        no_host_bits("ipv6_cidr", IpNet::V6(n))?;
    }
    Ok(())
}

/// A VirtualNetwork created again keeps its tenant and prefixes.
pub fn same_virtual_network(
    r: &CreateVirtualNetworkRequest,
    tenant: &str,
    ipv4_cidr: Option<Ipv4Net>,
    ipv6_cidr: Option<Ipv6Net>,
) -> Result<(), OpError> {
    unchanged_on_create(
        tenant == r.tenant && (ipv4_cidr, ipv6_cidr) == (r.ipv4_cidr, r.ipv6_cidr),
        || format!("virtual network '{}'", r.virtual_network_id),
        "tenant or CIDRs",
    )
}

/// Refuses a create of an existing object (`object`, e.g. "subnet 'x'") whose stored
/// settings differ from the request's in what `settings` names.
fn unchanged_on_create(
    unchanged: bool,
    object: impl FnOnce() -> String,
    settings: &str,
) -> Result<(), OpError> {
    if unchanged {
        Ok(())
    } else {
        Err(OpError::permanent(format!(
            "{} already exists with a different {settings}",
            object()
        )))
    }
}

// ---- subnets ----

/// A subnet has at least one family; its prefixes are network addresses inside the
/// VirtualNetwork's prefix of the same family (`vn_ipv4`, `vn_ipv6`); its VIP range is a
/// network address inside the subnet's prefix of its family.
pub fn subnet(
    r: &CreateSubnetRequest,
    vn_ipv4: Option<Ipv4Net>,
    vn_ipv6: Option<Ipv6Net>,
) -> Result<(), OpError> {
    if r.ipv4_cidr.is_none() && r.ipv6_cidr.is_none() {
        return Err(OpError::permanent(
            "a subnet needs ipv4_cidr, ipv6_cidr or both",
        ));
    }
    if let Some(n) = r.ipv4_cidr {
        no_host_bits("ipv4_cidr", IpNet::V4(n))?;
        inside_vn(
            &r.virtual_network_id,
            "IPv4",
            IpNet::V4(n),
            vn_ipv4.map(IpNet::V4),
        )?;
    }
    if let Some(n) = r.ipv6_cidr {
        no_host_bits("ipv6_cidr", IpNet::V6(n))?;
        inside_vn(
            &r.virtual_network_id,
            "IPv6",
            IpNet::V6(n),
            vn_ipv6.map(IpNet::V6),
        )?;
    }
    if let Some(vip) = r.vip_cidr {
        no_host_bits("vip_cidr", vip)?;
        if !inside_family(vip, r.ipv4_cidr, r.ipv6_cidr) {
            return Err(OpError::permanent(format!(
                "vip_cidr '{vip}' is not inside the subnet's CIDR of its family"
            )));
        }
    }
    Ok(())
}

fn inside_vn(vn_id: &str, family: &str, net: IpNet, vn: Option<IpNet>) -> Result<(), OpError> {
    match vn {
        Some(v) if v.contains(&net) => Ok(()),
        Some(v) => Err(OpError::permanent(format!(
            "subnet {family} CIDR '{net}' is not inside virtual network CIDR '{v}'"
        ))),
        None => Err(OpError::permanent(format!(
            "virtual network '{vn_id}' has no {family} CIDR"
        ))),
    }
}

/// Whether `net` lies inside the prefix of its own family.
fn inside_family(net: IpNet, ipv4: Option<Ipv4Net>, ipv6: Option<Ipv6Net>) -> bool {
    match net {
        IpNet::V4(v) => ipv4.is_some_and(|n| n.contains(&v)),
        IpNet::V6(v) => ipv6.is_some_and(|n| n.contains(&v)),
    }
}

/// Whether `address` lies inside the prefix of its own family.
pub fn address_inside(address: IpAddr, ipv4: Option<Ipv4Net>, ipv6: Option<Ipv6Net>) -> bool {
    match address {
        IpAddr::V4(a) => ipv4.is_some_and(|n| n.contains(&a)),
        IpAddr::V6(a) => ipv6.is_some_and(|n| n.contains(&a)),
    }
}

/// A subnet created again keeps its VirtualNetwork and prefixes.
pub fn same_subnet(
    r: &CreateSubnetRequest,
    vn: &str,
    ipv4_cidr: Option<Ipv4Net>,
    ipv6_cidr: Option<Ipv6Net>,
) -> Result<(), OpError> {
    unchanged_on_create(
        vn == r.virtual_network_id && (ipv4_cidr, ipv6_cidr) == (r.ipv4_cidr, r.ipv6_cidr),
        || format!("subnet '{}'", r.subnet_id),
        "virtual network or CIDRs",
    )
}

/// Refuses a new subnet whose prefixes overlap those of `sibling` (a subnet of the same
/// VirtualNetwork), by the one sibling rule [`DualCidrs::overlap`].
pub fn not_overlapping(
    r: &CreateSubnetRequest,
    sibling: &str,
    its_ipv4: Option<Ipv4Net>,
    its_ipv6: Option<Ipv6Net>,
) -> Result<(), OpError> {
    let mine = DualCidrs {
        v4: r.ipv4_cidr,
        v6: r.ipv6_cidr,
    };
    let theirs = DualCidrs {
        v4: its_ipv4,
        v6: its_ipv6,
    };
    match mine.overlap(&theirs) {
        None => Ok(()),
        Some(_) => Err(OpError::permanent(format!(
            "subnet '{}' overlaps subnet '{sibling}' in virtual network '{}'",
            r.subnet_id, r.virtual_network_id
        ))),
    }
}

// ---- security groups ----

/// One security rule: ports only for tcp and udp, given together as a range 1-65535 with
/// from <= to; the CIDR is a network address.
pub fn security_rule(rule: &SecurityRule) -> Result<(), String> {
    match rule.protocol {
        Protocol::Tcp | Protocol::Udp => match (rule.port_from, rule.port_to) {
            (None, None) => {}
            (Some(from), Some(to)) => {
                if from == 0 || from > to {
                    return Err(format!(
                        "port range {from}-{to} is invalid (1-65535, from <= to)"
                    ));
                }
            }
            _ => return Err("port_from and port_to must be given together".into()),
        },
        Protocol::Icmp | Protocol::All => {
            if rule.port_from.is_some() || rule.port_to.is_some() {
                return Err("ports are only valid for tcp and udp".into());
            }
        }
    }
    if has_host_bits(rule.cidr) {
        return Err(format!("cidr '{}' has host bits set", rule.cidr));
    }
    Ok(())
}

/// A security group stays in its VirtualNetwork (`its_vn`, when it exists) and
/// every rule passes [`security_rule`] (the refusal names the direction and rule index).
pub fn security_group(r: &ApplySecurityGroupRequest, its_vn: Option<&str>) -> Result<(), OpError> {
    stays_in(
        &format!("security group '{}'", r.security_group_id),
        its_vn,
        &r.virtual_network_id,
    )?;
    for (dir, rules) in [("ingress", &r.ingress), ("egress", &r.egress)] {
        for (i, rule) in rules.iter().enumerate() {
            security_rule(rule).map_err(|m| OpError::permanent(format!("{dir} rule {i}: {m}")))?;
        }
    }
    Ok(())
}

// ---- external addresses ----

/// An external IP allocated again must come from the same pool (then it keeps its address).
pub fn same_pool(
    external_ip_id: &str,
    its_pool: &str,
    requested_pool: &str,
) -> Result<(), OpError> {
    if its_pool == requested_pool {
        Ok(())
    } else {
        Err(OpError::permanent(format!(
            "external IP '{external_ip_id}' is already allocated from pool '{its_pool}'"
        )))
    }
}

/// The lowest free address of the pool's CIDRs (in CIDR order); `used` says which addresses
/// are taken. A pool has CIDRs, each a network address.
pub fn pick_external_address(
    r: &AllocateExternalIpRequest,
    used: &dyn Fn(&IpAddr) -> bool,
) -> Result<IpAddr, OpError> {
    if r.cidrs.is_empty() {
        return Err(OpError::permanent(format!(
            "pool '{}' has no CIDRs",
            r.pool_id
        )));
    }
    let mut cidrs = r.cidrs.clone();
    for c in &cidrs {
        no_host_bits("cidrs", *c)?;
    }
    cidrs.sort();
    cidrs
        .iter()
        .find_map(|c| lowest_free(*c, used, &[]))
        .ok_or_else(|| {
            OpError::permanent(format!(
                "pool exhausted: no free address left in external IP pool '{}'",
                r.pool_id
            ))
        })
}

/// An external IP is released from its own pool, and only when nothing uses its address.
pub fn releasable(
    r: &ReleaseExternalIpRequest,
    its_pool: &str,
    address: IpAddr,
    used_by: Option<&str>,
) -> Result<(), OpError> {
    if its_pool != r.pool_id {
        return Err(OpError::permanent(format!(
            "external IP '{}' belongs to pool '{its_pool}', not '{}'",
            r.external_ip_id, r.pool_id
        )));
    }
    match used_by {
        Some(user) => Err(OpError::permanent(format!(
            "external address {address} is still used by {user}"
        ))),
        None => Ok(()),
    }
}

/// How an external address consumer is named in refusals.
pub fn external_ip_attachment_user(attachment_id: &str) -> String {
    format!("external IP attachment '{attachment_id}'")
}

/// How an external address consumer is named in refusals.
pub fn nat_gateway_user(nat_gateway_id: &str) -> String {
    format!("NAT gateway '{nat_gateway_id}'")
}

/// An external address must be allocated (`allocated`) and used by nobody but `me`
/// (`used_by` names its current user).
pub fn external_address_free(
    address: IpAddr,
    allocated: bool,
    used_by: Option<&str>,
    me: &str,
) -> Result<(), OpError> {
    if !allocated {
        return Err(OpError::permanent(format!(
            "external address {address} is not allocated"
        )));
    }
    match used_by {
        Some(user) if user != me => Err(OpError::permanent(format!(
            "external address {address} is already used by {user}"
        ))),
        _ => Ok(()),
    }
}

/// An inbound DNAT rewrites to an address of the same family inside the VirtualNetwork
/// (`vn_ipv4`, `vn_ipv6`) and stays in its VirtualNetwork (`its_vn`, when it exists).
pub fn external_ip_attachment(
    r: &CreateExternalIpAttachmentRequest,
    vn_ipv4: Option<Ipv4Net>,
    vn_ipv6: Option<Ipv6Net>,
    its_vn: Option<&str>,
) -> Result<(), OpError> {
    if r.external_address.is_ipv4() != r.target_ip.is_ipv4() {
        return Err(OpError::permanent(format!(
            "external address {} and target {} are of different IP families",
            r.external_address, r.target_ip
        )));
    }
    if !address_inside(r.target_ip, vn_ipv4, vn_ipv6) {
        return Err(OpError::permanent(format!(
            "target {} is not inside virtual network '{}'",
            r.target_ip, r.virtual_network_id
        )));
    }
    stays_in(
        &external_ip_attachment_user(&r.attachment_id),
        its_vn,
        &r.virtual_network_id,
    )
}

/// A VirtualNetwork has one NAT gateway (`other` is another one it has); a gateway stays in
/// its VirtualNetwork (`its_vn`, when it exists); its source prefixes are network addresses.
pub fn nat_gateway(
    r: &CreateNatGatewayRequest,
    other: Option<&str>,
    its_vn: Option<&str>,
) -> Result<(), OpError> {
    if let Some(other) = other {
        return Err(OpError::permanent(format!(
            "virtual network '{}' already has NAT gateway '{other}'",
            r.virtual_network_id
        )));
    }
    stays_in(
        &nat_gateway_user(&r.nat_gateway_id),
        its_vn,
        &r.virtual_network_id,
    )?;
    for c in &r.source_cidrs {
        no_host_bits("source_cidrs", *c)?;
    }
    Ok(())
}

// ---- network attachments ----

/// A network attachment names its port (host, interface).
pub fn attachment_port(attachment_id: &str, host: &str, interface: &str) -> Result<(), OpError> {
    require_non_empty("attachment_id", attachment_id)?;
    require_non_empty("host", host)?;
    require_non_empty("interface", interface)
}

/// The attachment's security groups exist in its VirtualNetwork (`vn_of` gives a group's
/// VirtualNetwork, None when it does not exist); returns them sorted, without repeats.
pub fn attachment_security_groups<'a>(
    r: &CreateNetworkAttachmentRequest,
    vn_of: impl Fn(&str) -> Option<&'a str>,
) -> Result<Vec<String>, OpError> {
    for sg in &r.security_groups {
        match vn_of(sg) {
            None => {
                return Err(OpError::permanent(format!(
                    "security group '{sg}' does not exist"
                )));
            }
            Some(vn) => security_group_in(sg, vn, &r.virtual_network_id)?,
        }
    }
    let mut groups = r.security_groups.clone();
    groups.sort();
    groups.dedup();
    Ok(groups)
}

/// Refusal of a new attachment for a port another attachment holds.
pub fn port_taken(host: &str, interface: &str, other: &str) -> OpError {
    OpError::permanent(format!(
        "port {host}/{interface} is already attached by network attachment '{other}'"
    ))
}

/// Refusal of a new attachment for a MAC that already has one on the subnet.
pub fn mac_taken(mac: &str, other: &str, subnet_id: &str) -> OpError {
    OpError::permanent(format!(
        "MAC {mac} already has network attachment '{other}' on subnet '{subnet_id}'"
    ))
}

/// The addresses a new port on a subnet gets: the lowest free address of each of the
/// subnet's families, never the gateway or an address of the VIP range; `used` says which
/// addresses other ports hold.
pub fn pick_port_addresses(
    subnet_id: &str,
    ipv4_cidr: Option<Ipv4Net>,
    ipv6_cidr: Option<Ipv6Net>,
    vip_cidr: Option<IpNet>,
    used: &dyn Fn(&IpAddr) -> bool,
) -> Result<(Option<Ipv4Addr>, Option<Ipv6Addr>), OpError> {
    let mut blocked: Vec<IpNet> = vip_cidr.into_iter().collect();
    blocked.extend(ipv4_cidr.map(|n| IpNet::V4(Ipv4Net::from(ipv4_gateway(n)))));
    blocked.extend(ipv6_cidr.map(|n| IpNet::V6(Ipv6Net::from(ipv6_gateway(n)))));
    let pick = |net: IpNet, family: &str| {
        lowest_free(net, used, &blocked).ok_or_else(|| {
            OpError::permanent(format!(
                "subnet '{subnet_id}' has no free {family} address left"
            ))
        })
    };
    let ipv4 = match ipv4_cidr.map(|n| pick(IpNet::V4(n), "IPv4")).transpose()? {
        Some(IpAddr::V4(a)) => Some(a),
        _ => None,
    };
    let ipv6 = match ipv6_cidr.map(|n| pick(IpNet::V6(n), "IPv6")).transpose()? {
        Some(IpAddr::V6(a)) => Some(a),
        _ => None,
    };
    Ok((ipv4, ipv6))
}

/// A network attachment created again keeps its port (`host`, `interface`), MAC (`old_mac`)
/// and subnet: what it has.
pub fn same_attachment(
    r: &CreateNetworkAttachmentRequest,
    mac: MacAddress,
    host: &str,
    interface: &str,
    old_mac: &str,
    subnet: &str,
) -> Result<(), OpError> {
    if host == r.host
        && interface == r.interface
        && old_mac == mac.to_string()
        && subnet == r.subnet_id
    {
        Ok(())
    } else {
        Err(OpError::permanent(format!(
            "network attachment '{}' already exists for port {host}/{interface} ({old_mac}) on subnet '{subnet}'",
            r.attachment_id
        )))
    }
}

// ---- overlays (k8s role) ----

/// A k8s manager programs only the hosting clusters it serves.
pub fn hosting_cluster(cluster: &str, served: &[String]) -> Result<(), OpError> {
    if served.iter().any(|c| c == cluster) {
        Ok(())
    } else {
        Err(OpError::permanent(format!(
            "unknown hosting cluster '{cluster}' (this manager serves: {})",
            served.join(", ")
        )))
    }
}

/// An overlay names its subnet and a served hosting cluster, carries a VXLAN segment id, has
/// at least one family, and its VIP range is a network address inside the prefix of its family.
pub fn subnet_overlay(r: &CreateSubnetOverlayRequest, served: &[String]) -> Result<(), OpError> {
    require_non_empty("subnet_id", &r.subnet_id)?;
    hosting_cluster(&r.hosting_cluster, served)?;
    if !(1..=MAX_VNI).contains(&r.segment_id) {
        return Err(OpError::permanent(format!(
            "segment_id {} is outside the VXLAN range 1-{MAX_VNI}",
            r.segment_id
        )));
    }
    if r.ipv4_cidr.is_none() && r.ipv6_cidr.is_none() {
        return Err(OpError::permanent(
            "an overlay needs ipv4_cidr, ipv6_cidr or both",
        ));
    }
    if let Some(vip) = r.vip_cidr
        && (!inside_family(vip, r.ipv4_cidr, r.ipv6_cidr) || has_host_bits(vip))
    {
        return Err(OpError::permanent(format!(
            "vip_cidr '{vip}' is not a prefix inside the subnet's CIDR"
        )));
    }
    Ok(())
}

/// One segment carries one subnet per hosting cluster (`other` is the subnet bridged to it).
pub fn segment_free(r: &CreateSubnetOverlayRequest, other: Option<&str>) -> Result<(), OpError> {
    match other {
        Some(other) if other != r.subnet_id => Err(OpError::permanent(format!(
            "segment {} is already bridged for subnet '{other}' on hosting cluster '{}'",
            r.segment_id, r.hosting_cluster
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_validate() {
        let rule = |p, f, t| SecurityRule {
            protocol: p,
            port_from: f,
            port_to: t,
            cidr: "0.0.0.0/0".parse().unwrap(),
        };
        assert!(security_rule(&rule(Protocol::Tcp, Some(22), Some(22))).is_ok());
        assert!(security_rule(&rule(Protocol::Tcp, None, None)).is_ok());
        assert!(security_rule(&rule(Protocol::Tcp, Some(23), Some(22))).is_err());
        assert!(security_rule(&rule(Protocol::Udp, Some(0), Some(22))).is_err());
        assert!(security_rule(&rule(Protocol::Udp, Some(1), None)).is_err());
        assert!(security_rule(&rule(Protocol::Icmp, Some(1), Some(2))).is_err());
    }

    #[test]
    fn macs_normalise() {
        assert_eq!(
            mac_address("AA-bb-CC-dd-EE-fe").unwrap().to_string(),
            "aa:bb:cc:dd:ee:fe"
        );
        assert!(mac_address("aa:bb").is_err());
        assert!(mac_address("zz:bb:cc:dd:ee:ff").is_err());
        let multicast = mac_address("01:00:5e:00:00:01").unwrap_err().to_string();
        assert!(multicast.contains("mac_address") && multicast.contains("multicast"));
    }

    #[test]
    fn users_are_named_up_to_five() {
        let users = ["a", "b", "c", "d", "e", "f"];
        let err = still_in_use("virtual network 'v'", users.iter().copied()).unwrap_err();
        assert_eq!(
            err.to_string(),
            OpError::permanent("virtual network 'v' is still in use by a, b, c, d, e, …")
                .to_string()
        );
        assert!(still_in_use("x", std::iter::empty()).is_ok());
    }
}
