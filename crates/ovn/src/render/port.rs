//! A network attachment as a `Logical_Switch_Port` on its subnet's switch.
//!
//! - `addresses` = "MAC IPv4 IPv6" (the addresses the fabric chose), so OVN answers ARP/ND
//!   for them and its DHCP server hands them out;
//! - `port_security` = the same plus the allowed extra addresses (cluster VIPs): the port may
//!   send only with its MAC and these source addresses (OVN adds DHCP discover from 0.0.0.0
//!   and the link-local address of the MAC), and receives only for them;
//! - `dhcpv4_options` = the subnet's options with the router for a primary port, without it
//!   for a secondary one (no default route through a secondary interface); `dhcpv6_options`;
//! - `options:requested-chassis` = the host (chassis) the port is bound on;
//! - membership: its switch's `ports`, the network port group and its security groups'
//!   (exactly: a port leaving a group is removed from it).

use std::net::IpAddr;

use osac_backends::types::{CreateNetworkAttachmentRequest, PortAddresses};
use osac_ovsdb::{datum, op};
use serde_json::json;

use super::security::{network_port_group_key, security_group_key};
use super::{TENANT_KEY, dhcp4_key, dhcp4_secondary_key, dhcp6_key, switch_key};
use crate::nb::Row;

/// The logical switch port of attachment `attachment` (the `iface-id` a hypervisor binds).
pub fn port_name(attachment: &str) -> String {
    format!("osac-p-{attachment}")
}

/// The port row's key.
pub fn port_key(attachment: &str) -> String {
    format!("port:{attachment}")
}

/// The port of attachment `r` with addresses `addresses` and allowed extra addresses `allowed`
/// (already checked: [`CreateNetworkAttachmentRequest::checked_allowed_addresses`]), bound on
/// chassis `r.host`, in a network owned by `tenant`. The subnet's switch, DHCP options, the
/// network's port group and the security groups must exist (a converge says which is missing).
pub fn port(
    r: &CreateNetworkAttachmentRequest,
    addresses: &PortAddresses,
    allowed: &[IpAddr],
    tenant: &str,
) -> Row {
    let own: Vec<String> = [addresses.ipv4_address, addresses.ipv6_address]
        .into_iter()
        .flatten()
        .map(|a| a.to_string())
        .collect();
    let mac = r.mac_address.to_ascii_lowercase();
    let address = std::iter::once(mac.clone())
        .chain(own.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let security = std::iter::once(mac)
        .chain(own)
        .chain(allowed.iter().map(IpAddr::to_string))
        .collect::<Vec<_>>()
        .join(" ");
    let mut row = Row::new(
        "Logical_Switch_Port",
        port_key(&r.attachment_id),
        op::row([
            ("name", json!(port_name(&r.attachment_id))),
            ("addresses", datum::string_set([address])),
            ("port_security", datum::string_set([security])),
            (
                "options",
                datum::string_map([("requested-chassis", r.host.as_str())]),
            ),
        ]),
    )
    .with_external_id(TENANT_KEY, tenant)
    .with_external_id("osac-subnet", &r.subnet_id)
    .member_of("Logical_Switch", "ports", [switch_key(&r.subnet_id)])
    .member_of(
        "Port_Group",
        "ports",
        std::iter::once(network_port_group_key(&r.virtual_network_id))
            .chain(r.security_groups.iter().map(|sg| security_group_key(sg))),
    );
    if addresses.ipv4_address.is_some() {
        let dhcp = if r.primary {
            dhcp4_key(&r.subnet_id)
        } else {
            dhcp4_secondary_key(&r.subnet_id)
        };
        row = row.with_reference("dhcpv4_options", "DHCP_Options", &dhcp);
    }
    if addresses.ipv6_address.is_some() {
        row = row.with_reference("dhcpv6_options", "DHCP_Options", &dhcp6_key(&r.subnet_id));
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(primary: bool, groups: &[&str]) -> CreateNetworkAttachmentRequest {
        CreateNetworkAttachmentRequest {
            attachment_id: "a1".into(),
            host: "hv2".into(),
            interface: "eth0".into(),
            mac_address: "0A:00:00:00:00:01".into(),
            subnet_id: "s1".into(),
            virtual_network_id: "v1".into(),
            security_groups: groups.iter().map(|g| g.to_string()).collect(),
            primary,
            allowed_addresses: vec![],
        }
    }

    #[test]
    fn a_port_pins_its_mac_addresses_and_vips_and_is_bound_to_its_host() {
        let addresses = PortAddresses {
            ipv4_address: Some("10.0.1.5".parse().unwrap()),
            ipv6_address: Some("fd00:1::5".parse().unwrap()),
        };
        let vip: IpAddr = "10.0.1.250".parse().unwrap();
        let p = port(&req(true, &["web"]), &addresses, &[vip], "t1");
        assert_eq!(
            datum::string_set_items(&p.columns["addresses"]),
            ["0a:00:00:00:00:01 10.0.1.5 fd00:1::5"]
        );
        assert_eq!(
            datum::string_set_items(&p.columns["port_security"]),
            ["0a:00:00:00:00:01 10.0.1.5 fd00:1::5 10.0.1.250"]
        );
        assert_eq!(
            datum::string_map_items(&p.columns["options"])["requested-chassis"],
            "hv2"
        );
        assert!(
            p.references
                .contains(&("dhcpv4_options", "DHCP_Options", dhcp4_key("s1")))
        );
        assert!(
            p.references
                .contains(&("dhcpv6_options", "DHCP_Options", dhcp6_key("s1")))
        );
        let groups = &p.memberships[1].keys;
        assert!(groups.contains(&network_port_group_key("v1")));
        assert!(groups.contains(&security_group_key("web")));
    }

    #[test]
    fn a_secondary_port_gets_dhcp_without_the_router_and_no_address_means_no_dhcp() {
        let v4 = PortAddresses {
            ipv4_address: Some("10.0.1.5".parse().unwrap()),
            ipv6_address: None,
        };
        let p = port(&req(false, &[]), &v4, &[], "t1");
        assert_eq!(
            p.references,
            [("dhcpv4_options", "DHCP_Options", dhcp4_secondary_key("s1"))]
        );
        assert_eq!(p.memberships[1].keys.len(), 1, "only the network group");
        let none = port(&req(true, &[]), &PortAddresses::default(), &[], "t1");
        assert!(none.references.is_empty());
        assert_eq!(
            datum::string_set_items(&none.columns["port_security"]),
            ["0a:00:00:00:00:01"]
        );
    }
}
