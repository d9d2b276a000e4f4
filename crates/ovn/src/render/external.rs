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

use std::net::{IpAddr, Ipv6Addr};

use ipnet::{IpNet, Ipv6Net};
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
    /// A second, IPv6 transit prefix and next hop, for a provider network whose `transit_cidr`
    /// is IPv4: IPv6 egress, NAT gateways and ExternalIP attachments then work too.
    pub ipv6: Option<Ipv6Transit>,
}

/// The IPv6 side of a dual-stack provider network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Transit {
    /// The transit prefix of the routers' uplinks.
    pub cidr: Ipv6Net,
    /// The next hop toward the outside.
    pub gateway: Ipv6Addr,
}

impl ProviderNetwork {
    /// The transit prefixes with their next hops: `transit_cidr` first, then the IPv6 one. A
    /// router's uplink has one address in each, in this order.
    pub fn transit_prefixes(&self) -> Vec<(IpNet, IpAddr)> {
        let mut all = vec![(self.transit_cidr, self.gateway)];
        if let Some(v6) = self.ipv6 {
            all.push((IpNet::V6(v6.cidr), IpAddr::V6(v6.gateway)));
        }
        all
    }
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

/// VN `vn`'s uplink to provider network `p` with transit addresses `transit` (one per
/// [`ProviderNetwork::transit_prefixes`], in order), run on the gateway chassis `chassis`
/// (first preferred), guarding the VN's prefixes `private` except the router's own addresses
/// on the provider network (`transit` and the VN's external addresses `external`: its NAT
/// gateway's and its ExternalIP attachments'). The provider switch must exist; the guard is
/// listed after the provider port, its member.
pub fn uplink(
    vn: &str,
    tenant: &str,
    p: &ProviderNetwork,
    transit: &[IpAddr],
    chassis: &[&str],
    private: &[IpNet],
    external: &[IpAddr],
) -> UplinkRows {
    let name = uplink_port_name(vn);
    let prefixes = p.transit_prefixes();
    let on_uplink: Vec<(IpAddr, IpNet, IpAddr)> = transit
        .iter()
        .zip(&prefixes)
        .map(|(a, (net, gateway))| (*a, *net, *gateway))
        .collect();
    let networks: Vec<String> = on_uplink
        .iter()
        .map(|(a, net, _)| format!("{a}/{}", net.prefix_len()))
        .collect();
    let mut lrp = Row::new(
        "Logical_Router_Port",
        uplink_key(vn),
        op::row([
            ("name", json!(name)),
            ("mac", json!(gateway_mac(&uplink_key(vn)))),
            ("networks", datum::string_set(&networks)),
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
    let mut router = router(vn, tenant).with_child("ports", lrp);
    for (_, _, gateway) in &on_uplink {
        let any = match gateway {
            IpAddr::V4(_) => "0.0.0.0/0",
            IpAddr::V6(_) => "::/0",
        };
        let route = Row::new(
            "Logical_Router_Static_Route",
            format!("default-route:{vn}:{any}"),
            op::row([
                ("ip_prefix", json!(any)),
                ("nexthop", json!(gateway.to_string())),
            ]),
        )
        .with_external_id(TENANT_KEY, tenant);
        router = router.with_child("static_routes", route);
    }
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
        guard: uplink_guard(vn, tenant, private, &[transit, external].concat()),
        router,
        provider_port,
    }
}

/// The port group of VN `vn`'s provider port with one drop ACL per prefix of `private`, toward
/// the router (`to-lport` on the provider switch, before the router's DNAT: a DNAT'ed packet
/// is addressed to its ExternalIP here, a reply to a translated connection to the egress
/// address). The router's own addresses `own` that fall inside a prefix (a tenant may pick a
/// prefix that covers the transit range or a pool) are excepted: they are how the outside
/// reaches the VN. Drop ACLs alone keep the provider switch stateless. Its member, the provider
/// port, must exist or be created before it.
pub fn uplink_guard(vn: &str, tenant: &str, private: &[IpNet], own: &[IpAddr]) -> Row {
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
        let mut inside: Vec<String> = own
            .iter()
            .filter(|a| prefix.contains(*a))
            .map(IpAddr::to_string)
            .collect();
        inside.sort();
        inside.dedup();
        let mut matched = format!("outport == @{name} && {family}.dst == {prefix}");
        if !inside.is_empty() {
            matched.push_str(&format!(" && {family}.dst != {{{}}}", inside.join(", ")));
        }
        row = row.with_child(
            "acls",
            acl(
                format!("{key}:{prefix}"),
                tenant,
                PRIORITY_GUARD,
                "to-lport",
                &matched,
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

/// VN `vn`'s router translating each of its source prefixes `sources` to the address of its
/// family in `egress` on the way out (a prefix without one is not translated; other NAT rows of
/// the router kept; a prefix's row is updated in place, never doubled). With the uplink's
/// transit addresses it is the default egress of a VN without a NAT gateway; a NAT gateway
/// sets its own address for its family, and its deletion sets the transit address back.
pub fn source_nat(vn: &str, tenant: &str, sources: &[IpNet], egress: &[IpAddr]) -> Row {
    let mut row = router(vn, tenant);
    for cidr in sources {
        let Some(address) = egress.iter().find(|a| a.is_ipv4() == cidr.addr().is_ipv4()) else {
            continue;
        };
        row = row.with_child(
            "nat",
            nat(
                source_nat_key(vn, cidr),
                tenant,
                "snat",
                *address,
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
        &[r.external_address],
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
            ipv6: None,
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
            &["172.31.0.2".parse().unwrap()],
            &["hv1", "hv2"],
            &["10.0.0.0/16".parse().unwrap()],
            &[],
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

    #[test]
    fn a_dual_stack_provider_network_gives_the_uplink_both_families_and_nat_of_both() {
        let p = ProviderNetwork {
            ipv6: Some(Ipv6Transit {
                cidr: "fd00:64::/64".parse().unwrap(),
                gateway: "fd00:64::1".parse().unwrap(),
            }),
            ..provider()
        };
        let up = uplink(
            "v1",
            "t1",
            &p,
            &["172.31.0.2".parse().unwrap(), "fd00:64::2".parse().unwrap()],
            &["hv1"],
            &["10.0.0.0/16".parse().unwrap(), "fd00::/16".parse().unwrap()],
            &[],
        );
        let lrp = &up.router.children[0].1;
        let mut networks = datum::string_set_items(&lrp.columns["networks"]);
        networks.sort();
        assert_eq!(networks, ["172.31.0.2/24", "fd00:64::2/64"]);
        let routes: Vec<_> = up.router.children[1..]
            .iter()
            .map(|(_, r)| (r.columns["ip_prefix"].clone(), r.columns["nexthop"].clone()))
            .collect();
        assert_eq!(
            routes,
            [
                (json!("0.0.0.0/0"), json!("172.31.0.1")),
                (json!("::/0"), json!("fd00:64::1"))
            ]
        );
        let out = source_nat(
            "v1",
            "t1",
            &["10.0.0.0/16".parse().unwrap(), "fd00::/48".parse().unwrap()],
            &[
                "203.0.113.10".parse().unwrap(),
                "2001:db8::10".parse().unwrap(),
            ],
        );
        let translated: Vec<_> = out
            .children
            .iter()
            .map(|(_, n)| {
                (
                    n.columns["logical_ip"].clone(),
                    n.columns["external_ip"].clone(),
                )
            })
            .collect();
        assert_eq!(
            translated,
            [
                (json!("10.0.0.0/16"), json!("203.0.113.10")),
                (json!("fd00::/48"), json!("2001:db8::10"))
            ]
        );
        let dnat = external_ip_attachment(
            &CreateExternalIpAttachmentRequest {
                attachment_id: "e6".into(),
                virtual_network_id: "v1".into(),
                external_address: "2001:db8::11".parse().unwrap(),
                target_ip: "fd00:0:0:1::5".parse().unwrap(),
            },
            "t1",
        );
        let c = &dnat.children[0].1.columns;
        assert_eq!(
            (
                c["type"].clone(),
                c["external_ip"].clone(),
                c["logical_ip"].clone()
            ),
            (json!("dnat"), json!("2001:db8::11"), json!("fd00:0:0:1::5"))
        );
    }

    #[test]
    fn the_guard_lets_the_routers_own_addresses_inside_a_private_prefix_through() {
        // The tenant's prefix covers the transit range and the pool of its ExternalIP.
        let guard = uplink_guard(
            "v1",
            "t1",
            &[
                "172.31.0.0/16".parse().unwrap(),
                "fd00::/16".parse().unwrap(),
            ],
            &[
                "172.31.0.2".parse().unwrap(),
                "172.31.9.9".parse().unwrap(),
                "203.0.113.5".parse().unwrap(),
            ],
        );
        let matches: Vec<String> = guard
            .children
            .iter()
            .map(|(_, acl)| {
                acl.columns["match"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        let name = uplink_guard_name("v1");
        assert_eq!(
            matches,
            [
                format!(
                    "outport == @{name} && ip4.dst == 172.31.0.0/16 && ip4.dst != {{172.31.0.2, 172.31.9.9}}"
                ),
                format!("outport == @{name} && ip6.dst == fd00::/16"),
            ]
        );
    }
}
