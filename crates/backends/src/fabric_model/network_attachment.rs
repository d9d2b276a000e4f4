//! Network attachments: a host port placed on a subnet with its DHCP
//! reservation (the lowest free address of each family), its security groups and the VIPs it
//! may answer for; and where each host port is plugged (a subnet, the parking network, or
//! nothing).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use super::tables::{Change, FabricState, Record, att_key};
use super::{Plan, put};
use crate::checks;
use crate::types::{
    CreateNetworkAttachmentRequest, DeleteNetworkAttachmentRequest, PortAddresses,
    QueryDhcpLeaseRequest,
};

/// A host port placed on a subnet, with its DHCP reservation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkAttachmentRecord {
    /// Attachment id.
    #[serde(alias = "id")]
    pub attachment_id: String,
    /// Host of the port.
    pub host: String,
    /// Interface on the host.
    pub interface: String,
    /// Normalised (lowercase, colon-separated) MAC.
    #[serde(alias = "mac")]
    pub mac_address: String,
    /// Subnet.
    #[serde(alias = "subnet")]
    pub subnet_id: String,
    /// VirtualNetwork of the subnet.
    #[serde(alias = "vn")]
    pub virtual_network_id: String,
    /// Applied security groups (sorted, unique).
    #[serde(alias = "sgs")]
    pub security_groups: Vec<String>,
    /// Gets default route and DNS.
    pub primary: bool,
    /// Reserved IPv4 address.
    #[serde(alias = "v4")]
    pub ipv4_address: Option<Ipv4Addr>,
    /// Reserved IPv6 address.
    #[serde(alias = "v6")]
    pub ipv6_address: Option<Ipv6Addr>,
    /// Extra source addresses (VIPs) the port may use (sorted, unique).
    #[serde(default, alias = "allowed")]
    pub allowed_addresses: Vec<IpAddr>,
}

impl NetworkAttachmentRecord {
    /// The addresses reserved for the port.
    pub fn addresses(&self) -> PortAddresses {
        PortAddresses {
            ipv4_address: self.ipv4_address.map(IpAddr::V4),
            ipv6_address: self.ipv6_address.map(IpAddr::V6),
        }
    }

    /// Every source address the port may send from (its anti-spoofing set): its reserved
    /// addresses and its allowed ones (cluster VIPs), never its subnet's whole VIP block.
    pub fn source_addresses(&self) -> Vec<IpAddr> {
        self.addrs()
            .chain(self.allowed_addresses.iter().copied())
            .collect()
    }

    /// The addresses reserved for the port, IPv4 first.
    pub fn addrs(&self) -> impl Iterator<Item = IpAddr> + use<> {
        self.ipv4_address
            .map(IpAddr::V4)
            .into_iter()
            .chain(self.ipv6_address.map(IpAddr::V6))
    }
}

/// Where a host port is plugged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum PortLocation {
    /// On the provider parking network (idle cluster agents).
    Parked,
    /// On a subnet through an attachment.
    Attached {
        /// The attachment.
        attachment_id: String,
        /// The subnet.
        subnet_id: String,
    },
    /// On no network.
    Detached,
}

/// A host port the fabric has touched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRecord {
    /// Host.
    pub host: String,
    /// Interface.
    pub interface: String,
    /// Where it is plugged.
    pub location: PortLocation,
}

fn attached_port(r: &CreateNetworkAttachmentRequest) -> Change {
    put(Record::Port(PortRecord {
        host: r.host.clone(),
        interface: r.interface.clone(),
        location: PortLocation::Attached {
            attachment_id: r.attachment_id.clone(),
            subnet_id: r.subnet_id.clone(),
        },
    }))
}

/// `create_network_attachment`: reserves the lowest free address of each of the subnet's
/// families (never the gateway or the VIP range) for the port's MAC and plugs the port in;
/// creating it again keeps the addresses and updates groups, primary and allowed addresses.
pub fn create(state: &FabricState, r: CreateNetworkAttachmentRequest) -> Plan<PortAddresses> {
    checks::attachment_port(&r.attachment_id, &r.host, &r.interface)?;
    let mac = checks::mac_address(&r.mac_address)?;
    let subnet = state
        .subnet(&r.subnet_id)
        .ok_or_else(|| checks::missing_subnet(&r.subnet_id))?;
    checks::subnet_in(
        &r.subnet_id,
        &subnet.virtual_network_id,
        &r.virtual_network_id,
    )?;
    let security_groups = checks::attachment_security_groups(&r, |sg| {
        state.sg(sg).map(|g| g.virtual_network_id.as_str())
    })?;
    let allowed_addresses = r.checked_allowed_addresses(subnet.vip_cidr)?;

    if let Some(old) = state.attachment(&r.attachment_id) {
        checks::same_attachment(
            &r,
            mac,
            &old.host,
            &old.interface,
            &old.mac_address,
            &old.subnet_id,
        )?;
        let updated = NetworkAttachmentRecord {
            security_groups,
            primary: r.primary,
            allowed_addresses,
            ..old.clone()
        };
        let response = updated.addresses();
        let port = attached_port(&r);
        return Ok((vec![put(Record::Attachment(updated)), port], response));
    }

    if let Some(PortLocation::Attached { attachment_id, .. }) =
        state.port(&r.host, &r.interface).map(|p| &p.location)
    {
        return Err(checks::port_taken(&r.host, &r.interface, attachment_id));
    }
    let mac = mac.to_string();
    if let Some(other) = state.leases.get(&(r.subnet_id.clone(), mac.clone())) {
        return Err(checks::mac_taken(&mac, other, &r.subnet_id));
    }

    let empty_set = BTreeSet::new();
    let used_set = state.subnet_addrs.get(&r.subnet_id).unwrap_or(&empty_set);
    let (ipv4, ipv6) = checks::pick_port_addresses(
        &r.subnet_id,
        subnet.ipv4_cidr,
        subnet.ipv6_cidr,
        subnet.vip_cidr,
        &|a: &IpAddr| used_set.contains(a),
    )?;

    let port = attached_port(&r);
    let attachment = NetworkAttachmentRecord {
        attachment_id: r.attachment_id,
        host: r.host,
        interface: r.interface,
        mac_address: mac,
        subnet_id: r.subnet_id,
        virtual_network_id: r.virtual_network_id,
        security_groups,
        primary: r.primary,
        ipv4_address: ipv4,
        ipv6_address: ipv6,
        allowed_addresses,
    };
    let response = attachment.addresses();
    Ok((vec![put(Record::Attachment(attachment)), port], response))
}

/// `delete_network_attachment`: frees the reservation and parks or detaches the port,
/// unless another attachment holds the port by now.
pub fn delete(state: &FabricState, r: DeleteNetworkAttachmentRequest) -> Plan {
    checks::require_non_empty("host", &r.host)?;
    checks::require_non_empty("interface", &r.interface)?;
    let mut changes = Vec::new();
    if state.attachment(&r.attachment_id).is_some() {
        changes.push((att_key(&r.attachment_id), None));
    }
    let occupied_by_other = matches!(
        state.port(&r.host, &r.interface).map(|p| &p.location),
        Some(PortLocation::Attached { attachment_id, .. }) if *attachment_id != r.attachment_id
    );
    if !occupied_by_other {
        changes.push(put(Record::Port(PortRecord {
            host: r.host,
            interface: r.interface,
            location: if r.park {
                PortLocation::Parked
            } else {
                PortLocation::Detached
            },
        })));
    }
    Ok((changes, ()))
}

/// `query_dhcp_lease`: the reservation of the MAC on the subnet (none when it has none).
pub fn query_dhcp_lease(state: &FabricState, r: QueryDhcpLeaseRequest) -> Plan<PortAddresses> {
    if state.subnet(&r.subnet_id).is_none() {
        return Err(checks::missing_subnet(&r.subnet_id));
    }
    let mac = checks::mac_address(&r.mac_address)?.to_string();
    let lease = state
        .leases
        .get(&(r.subnet_id, mac))
        .and_then(|id| state.attachment(id))
        .map(NetworkAttachmentRecord::addresses)
        .unwrap_or_default();
    Ok((vec![], lease))
}
