//! The northbound rows of the objects an operation touched, rendered from the fabric model's
//! records (the render functions take the contract's request shapes; these build them from the
//! records, so what is rendered is what the model holds).

use std::net::IpAddr;

use ipnet::IpNet;
use osac_backends::fabric_model::{
    ExternalIpAttachmentRecord, FabricState, NetworkAttachmentRecord, SecurityGroupRecord,
    SubnetRecord, VirtualNetworkRecord,
};
use osac_backends::types::{
    ApplySecurityGroupRequest, CreateExternalIpAttachmentRequest, CreateNetworkAttachmentRequest,
    CreateSubnetRequest,
};

use crate::nb::Row;
use crate::render::external::ProviderNetwork;
use crate::render::{self, external, port, security};

/// The tenant owning VirtualNetwork `vn` (empty when the model does not know it).
pub fn tenant_of<'a>(state: &'a FabricState, vn: &str) -> &'a str {
    state.vn(vn).map_or("", |v| v.tenant.as_str())
}

/// A VirtualNetwork: its router, the port group of all its ports, its uplink on the provider
/// network (addresses `transit`; its guard lets those and the VN's `external` addresses
/// through) and its default egress (translated to the address of each
/// family in `egress`: the NAT gateway's while it has one, else the uplink's transit address).
pub fn virtual_network(
    vn: &VirtualNetworkRecord,
    provider: &ProviderNetwork,
    gateway_chassis: &[&str],
    transit: &[IpAddr],
    egress: &[IpAddr],
    external: &[IpAddr],
) -> Vec<Row> {
    let id = &vn.virtual_network_id;
    let prefixes = vn_prefixes(vn);
    let uplink = external::uplink(
        id,
        &vn.tenant,
        provider,
        transit,
        gateway_chassis,
        &prefixes,
        external,
    );
    vec![
        uplink.router,
        security::network_port_group(id, &vn.tenant),
        uplink.provider_port,
        uplink.guard,
        external::source_nat(id, &vn.tenant, &prefixes, egress),
    ]
}

/// A VirtualNetwork's prefixes.
pub fn vn_prefixes(vn: &VirtualNetworkRecord) -> Vec<IpNet> {
    vn.ipv4_cidr
        .map(IpNet::V4)
        .into_iter()
        .chain(vn.ipv6_cidr.map(IpNet::V6))
        .collect()
}

/// A subnet: the gateway port on its router, its switch, its DHCP options.
pub fn subnet(s: &SubnetRecord, tenant: &str) -> Vec<Row> {
    let request = CreateSubnetRequest {
        subnet_id: s.subnet_id.clone(),
        virtual_network_id: s.virtual_network_id.clone(),
        ipv4_cidr: s.ipv4_cidr,
        ipv6_cidr: s.ipv6_cidr,
        vip_cidr: s.vip_cidr,
    };
    render::subnet(&request, tenant, s.segment_id).all()
}

/// A security group's port group and ACLs.
pub fn security_group(g: &SecurityGroupRecord, tenant: &str) -> Row {
    let request = ApplySecurityGroupRequest {
        security_group_id: g.security_group_id.clone(),
        virtual_network_id: g.virtual_network_id.clone(),
        ingress: g.ingress.clone(),
        egress: g.egress.clone(),
    };
    security::security_group(&request, tenant)
}

/// A network attachment's logical switch port, bound on `chassis` (the chassis its host maps
/// to: [`crate::OvnSettings::chassis_for`]).
pub fn network_attachment(a: &NetworkAttachmentRecord, tenant: &str, chassis: &str) -> Row {
    let request = CreateNetworkAttachmentRequest {
        attachment_id: a.attachment_id.clone(),
        // The render binds the port on the request's host.
        host: chassis.to_string(),
        interface: a.interface.clone(),
        mac_address: a.mac_address.clone(),
        subnet_id: a.subnet_id.clone(),
        virtual_network_id: a.virtual_network_id.clone(),
        security_groups: a.security_groups.clone(),
        primary: a.primary,
        allowed_addresses: a.allowed_addresses.clone(),
    };
    port::port(&request, &a.addresses(), &a.allowed_addresses, tenant)
}

/// An ExternalIPAttachment's `dnat` row on its VN's router.
pub fn external_ip_attachment(d: &ExternalIpAttachmentRecord, tenant: &str) -> Row {
    let request = CreateExternalIpAttachmentRequest {
        attachment_id: d.attachment_id.clone(),
        virtual_network_id: d.virtual_network_id.clone(),
        external_address: d.external_address,
        target_ip: d.target_ip,
    };
    external::external_ip_attachment(&request, tenant)
}
