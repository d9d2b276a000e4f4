//! The northbound rows of osac objects: what each is in OVN (the full table is in
//! `docs/ovn.md`).
//!
//! | osac | OVN northbound |
//! |---|---|
//! | VirtualNetwork `V` | `Logical_Router` `osac-vn-V` (key `vn:V`) and the `Port_Group` of all its ports with the default drop and the control plane ([`security`]) |
//! | Subnet `S` of `V` | `Logical_Switch` `osac-sn-S` (key `subnet:S`, `other_config:requested-tnl-key` = its segment id) with a port of type `router` (`osac-rp-S`) peered with the `Logical_Router_Port` `osac-lrp-S` of `V`'s router (key `gateway:S`: the gateway addresses, a MAC stable for `S`, router advertisements for IPv6) |
//! | Subnet `S`'s DHCP | `DHCP_Options` `dhcp4:S` (with the router: primary ports), `dhcp4-secondary:S` (without), `dhcp6:S` |
//! | network attachment | [`port`] |
//! | SecurityGroup | [`security`] |
//! | provider network, NATGateway, ExternalIPAttachment | [`external`] |
//!
//! Rows are pure values ([`Row`]); [`crate::nb::converge`] writes them.

pub mod external;
pub mod port;
pub mod security;

use std::net::IpAddr;

use ipnet::IpNet;
use osac_backends::types::{CreateSubnetRequest, CreateVirtualNetworkRequest};
use osac_model::net::{ipv4_gateway, ipv6_gateway};
use osac_ovsdb::{datum, op};
use serde_json::json;

use crate::nb::Row;

/// `external_ids` key naming the owning tenant.
pub const TENANT_KEY: &str = "osac-tenant";
/// How long a DHCP lease lasts (seconds).
pub const LEASE_SECONDS: u32 = 3600;

/// The logical router of VirtualNetwork `vn`.
pub fn router_name(vn: &str) -> String {
    format!("osac-vn-{vn}")
}

/// The logical switch of subnet `subnet`.
pub fn switch_name(subnet: &str) -> String {
    format!("osac-sn-{subnet}")
}

/// The router's port on subnet `subnet` (its gateway).
pub fn gateway_port_name(subnet: &str) -> String {
    format!("osac-lrp-{subnet}")
}

/// The switch's port peered with [`gateway_port_name`].
pub fn switch_router_port_name(subnet: &str) -> String {
    format!("osac-rp-{subnet}")
}

/// The router row's key.
pub fn router_key(vn: &str) -> String {
    format!("vn:{vn}")
}

/// The switch row's key.
pub fn switch_key(subnet: &str) -> String {
    format!("subnet:{subnet}")
}

/// The gateway port row's key.
pub fn gateway_key(subnet: &str) -> String {
    format!("gateway:{subnet}")
}

/// The IPv4 DHCP options row's key (primary ports: with the router).
pub fn dhcp4_key(subnet: &str) -> String {
    format!("dhcp4:{subnet}")
}

/// The IPv4 DHCP options of secondary ports (no router) row's key.
pub fn dhcp4_secondary_key(subnet: &str) -> String {
    format!("dhcp4-secondary:{subnet}")
}

/// The DHCPv6 options row's key.
pub fn dhcp6_key(subnet: &str) -> String {
    format!("dhcp6:{subnet}")
}

/// A short stable hexadecimal digest of `id`, for names that only allow some characters.
pub(crate) fn digest(id: &str) -> String {
    format!("{:016x}", osac_model::hash::fnv1a64(id.bytes()))
}

/// The gateway's MAC on subnet `subnet`: locally administered, stable for the subnet id.
pub fn gateway_mac(subnet: &str) -> String {
    let h = osac_model::hash::fnv1a64(subnet.bytes()).to_be_bytes();
    format!(
        "0a:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        h[0], h[1], h[2], h[3], h[4]
    )
}

/// The rows of a VirtualNetwork.
#[derive(Debug, Clone, PartialEq)]
pub struct VirtualNetworkRows {
    /// Its router, without ports (subnets and the external gateway add theirs).
    pub router: Row,
    /// The port group of all its ports: the default drop and the control plane.
    pub ports: Row,
}

/// VirtualNetwork `r`'s router and port group.
pub fn virtual_network(r: &CreateVirtualNetworkRequest) -> VirtualNetworkRows {
    VirtualNetworkRows {
        router: router(&r.virtual_network_id, &r.tenant),
        ports: security::network_port_group(&r.virtual_network_id, &r.tenant),
    }
}

pub(crate) fn router(vn: &str, tenant: &str) -> Row {
    Row::new(
        "Logical_Router",
        router_key(vn),
        op::row([("name", json!(router_name(vn)))]),
    )
    .with_external_id(TENANT_KEY, tenant)
    .keeping_other_children()
}

/// The rows of a subnet.
#[derive(Debug, Clone, PartialEq)]
pub struct SubnetRows {
    /// The VN's router with the subnet's gateway port (other subnets' ports kept).
    pub router: Row,
    /// The subnet's switch with its router-type port.
    pub switch: Row,
    /// The IPv4 DHCP options of primary ports (with the router), for a subnet with IPv4.
    pub dhcp4: Option<Row>,
    /// The IPv4 DHCP options of secondary ports (without the router).
    pub dhcp4_secondary: Option<Row>,
    /// The DHCPv6 options, for a subnet with IPv6.
    pub dhcp6: Option<Row>,
}

impl SubnetRows {
    /// Every row, in an order [`crate::nb::converge`] accepts.
    pub fn all(self) -> Vec<Row> {
        let mut rows = vec![self.router, self.switch];
        rows.extend(self.dhcp4);
        rows.extend(self.dhcp4_secondary);
        rows.extend(self.dhcp6);
        rows
    }
}

/// Subnet `r` of a VN owned by `tenant`, as segment `segment` (the switch's tunnel key).
pub fn subnet(r: &CreateSubnetRequest, tenant: &str, segment: i64) -> SubnetRows {
    let s = &r.subnet_id;
    let mac = gateway_mac(s);
    let gw4 = r
        .ipv4_cidr
        .map(|n| (IpAddr::V4(ipv4_gateway(n)), IpNet::V4(n)));
    let gw6 = r
        .ipv6_cidr
        .map(|n| (IpAddr::V6(ipv6_gateway(n)), IpNet::V6(n)));
    let networks: Vec<String> = [gw4, gw6]
        .into_iter()
        .flatten()
        .map(|(gw, net)| format!("{gw}/{}", net.prefix_len()))
        .collect();
    let mut gateway_columns = op::row([
        ("name", json!(gateway_port_name(s))),
        ("mac", json!(mac)),
        ("networks", datum::string_set(&networks)),
    ]);
    if gw6.is_some() {
        // Router advertisements: addresses and everything else by stateful DHCPv6.
        gateway_columns.insert(
            "ipv6_ra_configs".into(),
            datum::string_map([
                ("address_mode", "dhcpv6_stateful"),
                ("send_periodic", "true"),
            ]),
        );
    }
    let gateway = Row::new("Logical_Router_Port", gateway_key(s), gateway_columns)
        .with_external_id(TENANT_KEY, tenant);
    let peer = Row::new(
        "Logical_Switch_Port",
        format!("router-port:{s}"),
        op::row([
            ("name", json!(switch_router_port_name(s))),
            ("type", json!("router")),
            ("addresses", datum::string_set(["router"])),
            (
                "options",
                datum::string_map([("router-port", gateway_port_name(s))]),
            ),
        ]),
    )
    .with_external_id(TENANT_KEY, tenant);
    let switch = Row::new(
        "Logical_Switch",
        switch_key(s),
        op::row([
            ("name", json!(switch_name(s))),
            (
                "other_config",
                datum::string_map([("requested-tnl-key", segment.to_string())]),
            ),
        ]),
    )
    .with_external_id(TENANT_KEY, tenant)
    .with_child("ports", peer)
    .keeping_other_children();
    let switch = match gw4 {
        Some((gw, _)) => switch.with_child(
            "acls",
            security::dhcp4_unicast(&r.virtual_network_id, s, tenant, gw),
        ),
        None => switch,
    };
    let dhcp4_row = |key: String, with_router: bool| {
        gw4.map(|(gw, net)| {
            let mut options = vec![
                ("server_id", gw.to_string()),
                ("server_mac", mac.clone()),
                ("lease_time", LEASE_SECONDS.to_string()),
            ];
            if with_router {
                options.push(("router", gw.to_string()));
            }
            Row::new(
                "DHCP_Options",
                key,
                op::row([
                    ("cidr", json!(net.to_string())),
                    ("options", datum::string_map(options)),
                ]),
            )
            .with_external_id(TENANT_KEY, tenant)
        })
    };
    let dhcp6 = gw6.map(|(_, net)| {
        Row::new(
            "DHCP_Options",
            dhcp6_key(s),
            op::row([
                ("cidr", json!(net.to_string())),
                ("options", datum::string_map([("server_id", mac.clone())])),
            ]),
        )
        .with_external_id(TENANT_KEY, tenant)
    });
    SubnetRows {
        router: router(&r.virtual_network_id, tenant).with_child("ports", gateway),
        switch,
        dhcp4: dhcp4_row(dhcp4_key(s), true),
        dhcp4_secondary: dhcp4_row(dhcp4_secondary_key(s), false),
        dhcp6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(v4: Option<&str>, v6: Option<&str>) -> CreateSubnetRequest {
        CreateSubnetRequest {
            subnet_id: "s1".into(),
            virtual_network_id: "v1".into(),
            ipv4_cidr: v4.map(|c| c.parse().unwrap()),
            ipv6_cidr: v6.map(|c| c.parse().unwrap()),
            vip_cidr: None,
        }
    }

    #[test]
    fn a_dual_stack_subnet_is_a_switch_peered_with_a_gateway_port_and_ipv4_dhcp() {
        let rows = subnet(&req(Some("10.0.1.0/24"), Some("fd00:1::/64")), "t1", 4242);
        let (column, gw) = &rows.router.children[0];
        assert_eq!(*column, "ports");
        assert_eq!(
            datum::string_set_items(&gw.columns["networks"]),
            ["10.0.1.1/24", "fd00:1::1/64"]
        );
        assert_eq!(gw.columns["mac"], json!(gateway_mac("s1")));
        assert!(rows.router.keeps_other_children);
        let (column, renewals) = &rows.switch.children[1];
        assert_eq!(*column, "acls");
        assert!(
            renewals.columns["match"]
                .as_str()
                .is_some_and(|m| m.contains("ip4.dst == 10.0.1.1 && udp")),
            "{:?}",
            renewals.columns
        );
        let peer = &rows.switch.children[0].1;
        assert_eq!(peer.columns["type"], "router");
        assert_eq!(
            datum::string_map_items(&peer.columns["options"])["router-port"],
            "osac-lrp-s1"
        );
        assert_eq!(
            datum::string_map_items(&rows.switch.columns["other_config"])["requested-tnl-key"],
            "4242"
        );
        let dhcp = rows.dhcp4.expect("ipv4 dhcp");
        let o = datum::string_map_items(&dhcp.columns["options"]);
        assert_eq!(
            (o["router"].as_str(), o["server_id"].as_str()),
            ("10.0.1.1", "10.0.1.1")
        );
        assert_eq!(dhcp.external_ids[TENANT_KEY], "t1");
        let secondary = rows.dhcp4_secondary.expect("secondary dhcp");
        let o = datum::string_map_items(&secondary.columns["options"]);
        assert!(!o.contains_key("router"), "{o:?}");
        assert_eq!(o["server_id"], "10.0.1.1");
        let ra = datum::string_map_items(&gw.columns["ipv6_ra_configs"]);
        assert_eq!(ra["address_mode"], "dhcpv6_stateful");
        assert_eq!(rows.dhcp6.expect("dhcpv6").columns["cidr"], "fd00:1::/64");
    }

    #[test]
    fn an_ipv6_only_subnet_has_no_ipv4_dhcp_and_macs_are_stable_and_local() {
        let rows = subnet(&req(None, Some("fd00:1::/64")), "t1", 1);
        assert!(rows.dhcp4.is_none() && rows.dhcp4_secondary.is_none());
        assert_eq!(gateway_mac("s1"), gateway_mac("s1"));
        assert_ne!(gateway_mac("s1"), gateway_mac("s2"));
        assert!(gateway_mac("s1").starts_with("0a:"));
    }
}
