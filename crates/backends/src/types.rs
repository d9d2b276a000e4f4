//! Typed requests and responses of every operation: the JSON shapes of the contract
//! (snake_case, `Option` fields omitted when unset). Ids are the UUID strings of our objects.

use std::net::IpAddr;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::{Deserialize, Serialize};

/// The empty response `{}` of operations that return nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

/// `create_virtual_network`: an isolated router for the tenant's VirtualNetwork.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateVirtualNetworkRequest {
    /// Our VirtualNetwork id.
    pub virtual_network_id: String,
    /// Owning tenant (backends may use it for naming/quotas).
    pub tenant: String,
    /// The VN's IPv4 range, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4_cidr: Option<Ipv4Net>,
    /// The VN's IPv6 range, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6_cidr: Option<Ipv6Net>,
}

/// `delete_virtual_network`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteVirtualNetworkRequest {
    /// Our VirtualNetwork id.
    pub virtual_network_id: String,
}

/// `create_subnet`: a segment inside a VirtualNetwork.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateSubnetRequest {
    /// Our Subnet id.
    pub subnet_id: String,
    /// The VirtualNetwork the subnet belongs to.
    pub virtual_network_id: String,
    /// IPv4 prefix of the subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4_cidr: Option<Ipv4Net>,
    /// IPv6 prefix of the subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6_cidr: Option<Ipv6Net>,
    /// Range reserved for cluster VIPs: never handed out to ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vip_cidr: Option<IpNet>,
}

/// Result of `create_subnet`: what the Subnet's status reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateSubnetResponse {
    /// Segment id (VNI); unique, stable for a subnet id.
    pub segment_id: i64,
    /// First usable IPv4 address of the prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4_gateway: Option<IpAddr>,
    /// `::1` of the IPv6 prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6_gateway: Option<IpAddr>,
}

/// `delete_subnet`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteSubnetRequest {
    /// Our Subnet id.
    pub subnet_id: String,
    /// Its VirtualNetwork.
    pub virtual_network_id: String,
}

/// Protocol of a security group rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// TCP (ports allowed).
    Tcp,
    /// UDP (ports allowed).
    Udp,
    /// ICMP / ICMPv6 (no ports).
    Icmp,
    /// Any protocol (no ports).
    All,
}

/// One allow rule; `cidr` is the peer (source for ingress, destination for egress).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityRule {
    /// Matched protocol.
    pub protocol: Protocol,
    /// First port (TCP/UDP only); both ports unset = every port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_from: Option<u16>,
    /// Last port, inclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_to: Option<u16>,
    /// Peer prefix.
    pub cidr: IpNet,
}

/// `apply_security_group`: the full desired rule set (replaces what was there).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplySecurityGroupRequest {
    /// Our SecurityGroup id.
    pub security_group_id: String,
    /// Its VirtualNetwork.
    pub virtual_network_id: String,
    /// Inbound allow rules.
    #[serde(default)]
    pub ingress: Vec<SecurityRule>,
    /// Outbound allow rules.
    #[serde(default)]
    pub egress: Vec<SecurityRule>,
}

/// `delete_security_group`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteSecurityGroupRequest {
    /// Our SecurityGroup id.
    pub security_group_id: String,
    /// Its VirtualNetwork.
    pub virtual_network_id: String,
}

/// `allocate_external_ip`: pick an address from the pool's prefixes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocateExternalIpRequest {
    /// Our ExternalIP id; the same id always gets the same address back.
    pub external_ip_id: String,
    /// Our ExternalIPPool id.
    pub pool_id: String,
    /// The pool's prefixes.
    pub cidrs: Vec<IpNet>,
}

/// Result of `allocate_external_ip`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocateExternalIpResponse {
    /// The allocated address.
    pub address: IpAddr,
}

/// `release_external_ip`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseExternalIpRequest {
    /// Our ExternalIP id.
    pub external_ip_id: String,
    /// Our ExternalIPPool id.
    pub pool_id: String,
}

/// `create_external_ip_attachment`: inbound DNAT external address → target IP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateExternalIpAttachmentRequest {
    /// Our ExternalIPAttachment id.
    pub attachment_id: String,
    /// The target's VirtualNetwork.
    pub virtual_network_id: String,
    /// An allocated external address.
    pub external_address: IpAddr,
    /// The workload IP (or cluster VIP) inside the VN.
    pub target_ip: IpAddr,
}

/// `delete_external_ip_attachment`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteExternalIpAttachmentRequest {
    /// Our ExternalIPAttachment id.
    pub attachment_id: String,
    /// The target's VirtualNetwork.
    pub virtual_network_id: String,
}

/// `create_nat_gateway`: outbound SNAT of the VN's sources to one external address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateNatGatewayRequest {
    /// Our NATGateway id.
    pub nat_gateway_id: String,
    /// The VirtualNetwork whose egress is translated.
    pub virtual_network_id: String,
    /// An allocated external address.
    pub external_address: IpAddr,
    /// Source prefixes to translate (the VN's CIDRs).
    #[serde(default)]
    pub source_cidrs: Vec<IpNet>,
}

/// `delete_nat_gateway`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteNatGatewayRequest {
    /// Our NATGateway id.
    pub nat_gateway_id: String,
    /// Its VirtualNetwork.
    pub virtual_network_id: String,
}

/// `create_network_attachment`: put a host port on a subnet; the fabric picks its addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateNetworkAttachmentRequest {
    /// Id of this attachment (stable across retries).
    pub attachment_id: String,
    /// Host (BM server, agent or hypervisor) the port belongs to.
    pub host: String,
    /// Interface name on the host (e.g. `data-0`).
    pub interface: String,
    /// MAC address of the interface.
    pub mac_address: String,
    /// Target subnet.
    pub subnet_id: String,
    /// The subnet's VirtualNetwork.
    pub virtual_network_id: String,
    /// SecurityGroup ids applied to the port (empty = closed: only DHCP, ARP and on-link
    /// neighbour discovery pass).
    #[serde(default)]
    pub security_groups: Vec<String>,
    /// Whether the port gets the default route and DNS.
    #[serde(default)]
    pub primary: bool,
    /// Extra source addresses the port may use besides its own (Neutron's "allowed address
    /// pairs"), e.g. a cluster's API and ingress VIPs, which its agents answer for. They must
    /// lie in the subnet's VIP block (never handed out to ports); traffic to them is filtered
    /// by the port's security groups. The full desired list: a later call replaces it.
    #[serde(default)]
    pub allowed_addresses: Vec<IpAddr>,
}

impl CreateNetworkAttachmentRequest {
    /// The allowed addresses, sorted and unique, each checked to lie in the subnet's VIP block
    /// (the only range never handed out to ports, so no port can be allowed another's
    /// address); one rule for every fabric driver.
    pub fn checked_allowed_addresses(
        &self,
        vip_cidr: Option<IpNet>,
    ) -> Result<Vec<IpAddr>, crate::OpError> {
        let mut out = self.allowed_addresses.clone();
        out.sort();
        out.dedup();
        for a in &out {
            if !vip_cidr.is_some_and(|v| v.contains(a)) {
                return Err(crate::OpError::permanent(format!(
                    "allowed address {a} is not inside the VIP block of subnet '{}'{}",
                    self.subnet_id,
                    vip_cidr.map(|v| format!(" ({v})")).unwrap_or_default()
                )));
            }
        }
        Ok(out)
    }
}

/// Addresses of a port: the result of `create_network_attachment` and `query_dhcp_lease`
/// (both unset = no lease yet).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortAddresses {
    /// IPv4 address of the port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4_address: Option<IpAddr>,
    /// IPv6 address of the port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6_address: Option<IpAddr>,
}

impl PortAddresses {
    /// True when there is no address yet.
    pub fn is_empty(&self) -> bool {
        self.ipv4_address.is_none() && self.ipv6_address.is_none()
    }
}

/// `delete_network_attachment`: take a port off its subnet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteNetworkAttachmentRequest {
    /// Id of the attachment.
    pub attachment_id: String,
    /// Host of the port.
    pub host: String,
    /// Interface name on the host.
    pub interface: String,
    /// MAC address of the interface.
    pub mac_address: String,
    /// Subnet the port was on.
    pub subnet_id: String,
    /// Move the port back to the parking network (cluster agents) instead of nowhere.
    #[serde(default)]
    pub park: bool,
}

/// `query_dhcp_lease`: which address did this MAC get on this subnet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryDhcpLeaseRequest {
    /// Subnet of the port.
    pub subnet_id: String,
    /// MAC address of the port.
    pub mac_address: String,
}

/// k8s `create_subnet_overlay`: bridge a subnet's segment into a hosting cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateSubnetOverlayRequest {
    /// Our Subnet id.
    pub subnet_id: String,
    /// The fabric segment id (VNI) returned by `create_subnet`.
    pub segment_id: i64,
    /// Hosting cluster to program.
    pub hosting_cluster: String,
    /// IPv4 prefix of the subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4_cidr: Option<Ipv4Net>,
    /// IPv6 prefix of the subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6_cidr: Option<Ipv6Net>,
    /// VIP range the cluster load balancer (MetalLB) may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vip_cidr: Option<IpNet>,
}

/// k8s `delete_subnet_overlay`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteSubnetOverlayRequest {
    /// Our Subnet id.
    pub subnet_id: String,
    /// Hosting cluster to clean.
    pub hosting_cluster: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn options_are_omitted_and_cidrs_are_strings() {
        let req = CreateSubnetRequest {
            subnet_id: "s".into(),
            virtual_network_id: "v".into(),
            ipv4_cidr: Some("10.0.1.0/24".parse().unwrap()),
            ipv6_cidr: None,
            vip_cidr: None,
        };
        assert_eq!(
            serde_json::to_value(&req).unwrap(),
            json!({"subnet_id": "s", "virtual_network_id": "v", "ipv4_cidr": "10.0.1.0/24"})
        );
        let rule: SecurityRule = serde_json::from_value(
            json!({"protocol": "tcp", "port_from": 22, "port_to": 22, "cidr": "0.0.0.0/0"}),
        )
        .unwrap();
        assert_eq!(rule.protocol, Protocol::Tcp);
        assert_eq!(
            serde_json::to_value(PortAddresses::default()).unwrap(),
            json!({})
        );
    }
}

/// What a manager put back when it repaired drift (state changed behind its back): each entry
/// names one backend object, e.g. `ACL:sg:<id>:ingress:1`. Never shown to tenants.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftRepair {
    /// Objects that were missing and were created again.
    pub recreated: Vec<String>,
    /// Objects whose settings were set back.
    pub reset: Vec<String>,
    /// Objects of ours that nothing wants any more and were removed.
    pub removed: Vec<String>,
}

impl DriftRepair {
    /// Whether nothing had drifted.
    pub fn is_empty(&self) -> bool {
        self.recreated.is_empty() && self.reset.is_empty() && self.removed.is_empty()
    }

    /// How many objects were repaired.
    pub fn len(&self) -> usize {
        self.recreated.len() + self.reset.len() + self.removed.len()
    }
}

/// Which NAT path a [`NatPathCounter`] measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NatPathKind {
    /// The inbound DNAT of an ExternalIPAttachment: ingress is what reaches the workload
    /// through the external address, egress is its replies.
    ExternalIpAttachment,
    /// The outbound SNAT of a NATGateway: egress is what the workloads send out through the
    /// gateway's address, ingress is the replies.
    NatGateway,
}

impl NatPathKind {
    /// The stored spelling (`external_ip_attachment`, `nat_gateway`).
    pub fn as_str(self) -> &'static str {
        match self {
            NatPathKind::ExternalIpAttachment => "external_ip_attachment",
            NatPathKind::NatGateway => "nat_gateway",
        }
    }
}

/// The cumulative byte counters of one NAT path as the dataplane holds them now. Counters only
/// grow while the path exists; a reading below an earlier one means the dataplane recreated the
/// counter (a rebuild, a restart), and so does a new `epoch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NatPathCounter {
    /// Which path.
    pub kind: NatPathKind,
    /// Our id of the object the path belongs to (the attachment's, the gateway's).
    pub object_id: String,
    /// Bytes (IP packets, headers included) into the tenant's network on this path.
    pub ingress_bytes: u64,
    /// Bytes (IP packets, headers included) out of the tenant's network on this path.
    pub egress_bytes: u64,
    /// Identifies this incarnation of the counter when the dataplane can tell (e.g. the
    /// kernel's handle of the counter object): a different epoch for the same object means the
    /// counter was recreated and started again from zero. Empty when unknown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub epoch: String,
}
