//! External access: the provider network the ExternalIP pools' addresses live on, each
//! VirtualNetwork router's uplink to it, and NAT.
//!
//! - The provider network is a `Logical_Switch` with a `localnet` port: the hypervisors map
//!   its `network_name` to a bridge of theirs (`ovn-bridge-mappings`).
//! - A VN's router gets a gateway `Logical_Router_Port` on it (its transit address) bound to
//!   gateway chassis (`Gateway_Chassis`, first = highest priority): NAT and the uplink run
//!   there. A default route points at the provider's gateway.
//! - Egress: a `snat` NAT row per source prefix of the VN ([`source_nat`]) to the uplink's
//!   transit address, or to the NATGateway's address while there is one;
//!   ExternalIPAttachment: a `dnat` NAT row (external → target), whose replies leave with the
//!   external address (conntrack) while the target's own new connections leave by the VN's
//!   egress like every other port's (inbound only, as in every driver).

use std::net::IpAddr;

use ipnet::IpNet;
use osac_backends::types::{CreateExternalIpAttachmentRequest, CreateNatGatewayRequest};
use osac_ovsdb::{datum, op};
use serde_json::json;

use super::security::{PRIORITY_GUARD, acl};
use super::{TENANT_KEY, digest, gateway_mac, router};
use crate::nb::Row;

/// A provider network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderNetwork {
    /// The physical network's name, which hypervisors map to a bridge.
    pub network_name: String,
    /// The transit prefix of the routers' uplinks on it.
    pub transit_cidr: IpNet,
    /// The next hop toward the outside on it.
    pub gateway: IpAddr,
}

/// The provider network's switch.
pub fn provider_switch_name(network: &str) -> String {
    format!("osac-pn-{network}")
}

/// The provider switch row's key.
pub fn provider_switch_key(network: &str) -> String {
    format!("provider:{network}")
}

/// VN `vn`'s uplink router port.
pub fn uplink_port_name(vn: &str) -> String {
    format!("osac-lrp-up-{vn}")
}

/// The uplink router port's row key.
pub fn uplink_key(vn: &str) -> String {
    format!("uplink:{vn}")
}

/// The `snat` row key of VN `vn`'s source prefix `cidr`: one row per prefix, whose external
/// address is the NAT gateway's or, without one, the uplink's transit address.
pub fn source_nat_key(vn: &str, cidr: &IpNet) -> String {
    format!("snat:{vn}:{}", cidr.trunc())
}

/// The NAT row key of ExternalIPAttachment `id`.
pub fn external_ip_attachment_key(id: &str) -> String {
    format!("eipa:{id}")
}

/// The provider network's switch with its `localnet` port.
pub fn provider_switch(p: &ProviderNetwork) -> Row {
    let net = &p.network_name;
    let localnet = Row::new(
        "Logical_Switch_Port",
        format!("localnet:{net}"),
        op::row([
            ("name", json!(format!("osac-ln-{net}"))),
            ("type", json!("localnet")),
            ("addresses", datum::string_set(["unknown"])),
            (
                "options",
                datum::string_map([("network_name", net.as_str())]),
            ),
        ]),
    );
    Row::new(
        "Logical_Switch",
        provider_switch_key(net),
        op::row([("name", json!(provider_switch_name(net)))]),
    )
    .with_child("ports", localnet)
    .keeping_other_children()
}

/// The port group of VN `vn`'s port on the provider switch (letters, digits and `_` only).
pub fn uplink_guard_name(vn: &str) -> String {
    format!("osac_up_{}", digest(vn))
}

/// The uplink guard's port group row key.
pub fn uplink_guard_key(vn: &str) -> String {
    format!("uplink-guard:{vn}")
}

/// The rows of a VN's uplink.
#[derive(Debug, Clone, PartialEq)]
pub struct UplinkRows {
    /// The port group of the provider switch's port toward the router, whose ACLs drop what
    /// comes from the provider network to the VN's own prefixes: only the router's NAT lets
    /// the outside in (an ExternalIP's DNAT, the replies of translated connections), as the
    /// linux driver's uplink guard does. Without it OVN routes a packet sent to the router's
    /// MAC for a private address straight to the port.
    pub guard: Row,
    /// The router with its uplink port (on `chassis`) and default route.
    pub router: Row,
    /// The provider switch's port peered with the uplink.
    pub provider_port: Row,
}

/// VN `vn`'s uplink to provider network `p` with transit address `transit`, run on the gateway
/// chassis `chassis` (first preferred), guarding the VN's prefixes `private`. The provider
/// switch must exist; the guard is listed after the provider port, its member.
pub fn uplink(
    vn: &str,
    tenant: &str,
    p: &ProviderNetwork,
    transit: IpAddr,
    chassis: &[&str],
    private: &[IpNet],
) -> UplinkRows {
    let name = uplink_port_name(vn);
    let mut lrp = Row::new(
        "Logical_Router_Port",
        uplink_key(vn),
        op::row([
            ("name", json!(name)),
            ("mac", json!(gateway_mac(&uplink_key(vn)))),
            (
                "networks",
                datum::string_set([format!("{transit}/{}", p.transit_cidr.prefix_len())]),
            ),
        ]),
    )
    .with_external_id(TENANT_KEY, tenant);
    let count = chassis.len();
    for (i, c) in chassis.iter().enumerate() {
        let priority = i64::try_from(count - i).unwrap_or(1);
        lrp = lrp.with_child(
            "gateway_chassis",
            Row::new(
                "Gateway_Chassis",
                format!("gateway-chassis:{vn}:{c}"),
                op::row([
                    ("name", json!(format!("{name}-{c}"))),
                    ("chassis_name", json!(c)),
                    ("priority", json!(priority)),
                ]),
            ),
        );
    }
    let any = match p.gateway {
        IpAddr::V4(_) => "0.0.0.0/0",
        IpAddr::V6(_) => "::/0",
    };
    let route = Row::new(
        "Logical_Router_Static_Route",
        format!("default-route:{vn}:{any}"),
        op::row([
            ("ip_prefix", json!(any)),
            ("nexthop", json!(p.gateway.to_string())),
        ]),
    )
    .with_external_id(TENANT_KEY, tenant);
    let provider_port = Row::new(
        "Logical_Switch_Port",
        format!("uplink-port:{vn}"),
        op::row([
            ("name", json!(format!("osac-up-{vn}"))),
            ("type", json!("router")),
            ("addresses", datum::string_set(["router"])),
            (
                "options",
                datum::string_map([("router-port", name.as_str())]),
            ),
        ]),
    )
    .with_external_id(TENANT_KEY, tenant)
    .member_of(
        "Logical_Switch",
        "ports",
        [provider_switch_key(&p.network_name)],
    );
    UplinkRows {
        guard: uplink_guard(vn, tenant, private),
        router: router(vn, tenant)
            .with_child("ports", lrp)
            .with_child("static_routes", route),
        provider_port,
    }
}

/// The port group of VN `vn`'s provider port with one drop ACL per prefix of `private`, toward
/// the router (`to-lport` on the provider switch, before the router's DNAT: a DNAT'ed packet
/// is addressed to its ExternalIP here, a reply to a translated connection to the egress
/// address). Drop ACLs alone keep the provider switch stateless. Its member, the provider
/// port, must exist or be created before it.
fn uplink_guard(vn: &str, tenant: &str, private: &[IpNet]) -> Row {
    let (name, key) = (uplink_guard_name(vn), uplink_guard_key(vn));
    let mut row = Row::new("Port_Group", key.clone(), op::row([("name", json!(name))]))
        .with_external_id(TENANT_KEY, tenant)
        .with_reference("ports", "Logical_Switch_Port", &format!("uplink-port:{vn}"));
    for prefix in private {
        let family = if prefix.addr().is_ipv4() {
            "ip4"
        } else {
            "ip6"
        };
        row = row.with_child(
            "acls",
            acl(
                format!("{key}:{prefix}"),
                tenant,
                PRIORITY_GUARD,
                "to-lport",
                &format!("outport == @{name} && {family}.dst == {prefix}"),
                "drop",
            ),
        );
    }
    row
}

fn nat(key: String, tenant: &str, kind: &str, external: IpAddr, logical: String) -> Row {
    Row::new(
        "NAT",
        key,
        op::row([
            ("type", json!(kind)),
            ("external_ip", json!(external.to_string())),
            ("logical_ip", json!(logical)),
        ]),
    )
    .with_external_id(TENANT_KEY, tenant)
}

/// VN `vn`'s router translating its source prefixes `sources` of `address`'s family to
/// `address` on the way out (other NAT rows of the router kept; a prefix's row is updated in
/// place, never doubled). With the uplink's transit address it is the default egress of a VN
/// without a NAT gateway; a NAT gateway sets its own address, and its deletion sets the transit
/// address back.
pub fn source_nat(vn: &str, tenant: &str, sources: &[IpNet], address: IpAddr) -> Row {
    let mut row = router(vn, tenant);
    for cidr in sources {
        if cidr.addr().is_ipv4() != address.is_ipv4() {
            continue;
        }
        row = row.with_child(
            "nat",
            nat(
                source_nat_key(vn, cidr),
                tenant,
                "snat",
                address,
                cidr.trunc().to_string(),
            ),
        );
    }
    row
}

/// NATGateway `r`: [`source_nat`] of `r.source_cidrs` to its external address.
pub fn nat_gateway(r: &CreateNatGatewayRequest, tenant: &str) -> Row {
    source_nat(
        &r.virtual_network_id,
        tenant,
        &r.source_cidrs,
        r.external_address,
    )
}

/// ExternalIPAttachment `r`: the VN's router translating the external address to the target,
/// and the replies back (other NAT rows kept). `dnat`, not `dnat_and_snat`: the latter would
/// also give the target's own new connections the external address, where an attachment is
/// inbound only and new outbound connections use the NAT gateway's address. Removed with [`crate::nb::detach`] of
/// [`external_ip_attachment_key`].
pub fn external_ip_attachment(r: &CreateExternalIpAttachmentRequest, tenant: &str) -> Row {
    router(&r.virtual_network_id, tenant).with_child(
        "nat",
        nat(
            external_ip_attachment_key(&r.attachment_id),
            tenant,
            "dnat",
            r.external_address,
            r.target_ip.to_string(),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> ProviderNetwork {
        ProviderNetwork {
            network_name: "physnet".into(),
            transit_cidr: "172.31.0.0/24".parse().unwrap(),
            gateway: "172.31.0.1".parse().unwrap(),
        }
    }

    #[test]
    fn the_uplink_is_a_gateway_port_on_the_provider_network_with_a_default_route() {
        let sw = provider_switch(&provider());
        let ln = &sw.children[0].1;
        assert_eq!(ln.columns["type"], "localnet");
        assert_eq!(
            datum::string_map_items(&ln.columns["options"])["network_name"],
            "physnet"
        );
        let up = uplink(
            "v1",
            "t1",
            &provider(),
            "172.31.0.2".parse().unwrap(),
            &["hv1", "hv2"],
            &["10.0.0.0/16".parse().unwrap()],
        );
        let lrp = &up.router.children[0].1;
        assert_eq!(
            datum::string_set_items(&lrp.columns["networks"]),
            ["172.31.0.2/24"]
        );
        let chassis: Vec<_> = lrp
            .children
            .iter()
            .map(|(_, g)| {
                (
                    g.columns["chassis_name"].clone(),
                    g.columns["priority"].clone(),
                )
            })
            .collect();
        assert_eq!(
            chassis,
            [(json!("hv1"), json!(2)), (json!("hv2"), json!(1))]
        );
        let route = &up.router.children[1].1;
        assert_eq!(route.columns["nexthop"], "172.31.0.1");
        assert!(up.router.keeps_other_children);
        assert_eq!(
            up.provider_port.memberships[0].keys.iter().next(),
            Some(&provider_switch_key("physnet"))
        );
        // The provider port is in the guard, which drops what the outside sends to the VN's
        // own prefix (only NAT lets the outside in).
        assert_eq!(
            up.guard.references,
            [("ports", "Logical_Switch_Port", "uplink-port:v1".to_string())]
        );
        let guard = &up.guard.children[0].1;
        assert_eq!(
            guard.columns["match"],
            format!(
                "outport == @{} && ip4.dst == 10.0.0.0/16",
                uplink_guard_name("v1")
            )
        );
        assert_eq!(guard.columns["action"], "drop");
        assert_eq!(guard.columns["direction"], "to-lport");
    }

    #[test]
    fn nat_rows_translate_the_vn_out_and_one_address_in() {
        let gw = nat_gateway(
            &CreateNatGatewayRequest {
                nat_gateway_id: "n1".into(),
                virtual_network_id: "v1".into(),
                external_address: "203.0.113.10".parse().unwrap(),
                source_cidrs: vec!["10.0.0.0/16".parse().unwrap(), "fd00::/48".parse().unwrap()],
            },
            "t1",
        );
        assert_eq!(
            gw.children.len(),
            1,
            "the IPv6 prefix is not translated to IPv4"
        );
        let snat = &gw.children[0].1.columns;
        assert_eq!(
            (snat["type"].clone(), snat["logical_ip"].clone()),
            (json!("snat"), json!("10.0.0.0/16"))
        );
        let dnat = external_ip_attachment(
            &CreateExternalIpAttachmentRequest {
                attachment_id: "e1".into(),
                virtual_network_id: "v1".into(),
                external_address: "203.0.113.11".parse().unwrap(),
                target_ip: "10.0.1.5".parse().unwrap(),
            },
            "t1",
        );
        let c = &dnat.children[0].1.columns;
        assert_eq!(c["type"], "dnat");
        assert_eq!(
            (c["external_ip"].clone(), c["logical_ip"].clone()),
            (json!("203.0.113.11"), json!("10.0.1.5"))
        );
    }
}
