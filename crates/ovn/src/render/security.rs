//! Security groups as port groups and ACLs, with the semantics every driver gives them: a port
//! with groups passes what one of its groups allows (stateful: replies pass) and nothing else;
//! a port without groups passes only its control plane.
//!
//! Every port of a VirtualNetwork is in the network's port group ([`network_port_group`]),
//! whose ACLs drop everything at [`PRIORITY_DROP`], let the control plane through at
//! [`PRIORITY_CONTROL`] — ARP (not IP; anti-spoofing governs it), DHCP and DHCPv6 requests —
//! and drop DHCP server traffic from ports at [`PRIORITY_GUARD`], above what any group allows.
//! OVN itself passes neighbour discovery, and the replies of its native DHCP server, above
//! every ACL. A SecurityGroup is a port group of its own ([`security_group`]) with one
//! `allow-related` ACL per rule at [`PRIORITY_ALLOW`], between the two: a port in several
//! groups passes the union. `allow-related` commits the connection, and OVN passes the replies
//! of committed connections before any ACL.
//!
//! OVN evaluates every request-direction packet of a connection against the ACLs of the
//! moment and blocks the connection when none allows it any more (Neutron's semantics). The
//! network group passes those packets at [`PRIORITY_CONTROL`] instead ([`ESTABLISHED`]), so
//! removing a rule stops new connections only, as the linux driver does (AWS's semantics).

use ipnet::IpNet;
use osac_backends::types::{ApplySecurityGroupRequest, Protocol, SecurityRule};
use osac_ovsdb::op;
use serde_json::json;

use super::{TENANT_KEY, digest};
use crate::nb::Row;

/// Priority of the network port group's guards: what no port may send whatever its groups
/// allow (DHCP server traffic).
pub const PRIORITY_GUARD: i64 = 2100;
/// Priority of the control-plane ACLs of a network's port group.
pub const PRIORITY_CONTROL: i64 = 2000;
/// Priority of the ACLs of security-group rules.
pub const PRIORITY_ALLOW: i64 = 1500;
/// Priority of the network port group's drop ACLs (above OVN's defaults, which allow).
pub const PRIORITY_DROP: i64 = 1000;

/// Packets a DHCP or DHCPv6 server sends (OVN's own replies do not cross the ACL stage of the
/// port they leave through as `from-lport`).
pub const DHCP_SERVER: &str =
    "udp && ((ip4 && udp.src == 67 && udp.dst == 68) || (ip6 && udp.src == 547 && udp.dst == 546))";

/// A DHCPv4 client's request (to a broadcast address here; to its subnet's server, the
/// gateway, by an ACL of the subnet's switch: [`dhcp4_unicast`]).
pub const DHCP4_REQUEST: &str = "udp && udp.src == 68 && udp.dst == 67";

/// The ACL of subnet `subnet`'s switch letting the ports of network `vn` renew their DHCPv4
/// leases by unicast to the subnet's server `server` (the gateway), and nowhere else.
pub fn dhcp4_unicast(vn: &str, subnet: &str, tenant: &str, server: std::net::IpAddr) -> Row {
    acl(
        format!("dhcp4-unicast:{subnet}"),
        tenant,
        PRIORITY_CONTROL,
        "from-lport",
        &format!(
            "inport == @{} && ip4.dst == {server} && {DHCP4_REQUEST}",
            network_port_group_name(vn)
        ),
        "allow",
    )
}

/// Packets in the request direction of a connection committed by an `allow-related` ACL and
/// not blocked since: only an ACL that allowed the connection's first packet commits it.
pub const ESTABLISHED: &str = "ct.est && !ct.rel && !ct.rpl && ct_mark.blocked == 0";

/// The port group of every port of VirtualNetwork `vn` (letters, digits and `_` only: OVN
/// names address sets after it).
pub fn network_port_group_name(vn: &str) -> String {
    format!("osac_vn_{}", digest(vn))
}

/// The network port group's row key.
pub fn network_port_group_key(vn: &str) -> String {
    format!("vn-ports:{vn}")
}

/// The port group of SecurityGroup `sg`.
pub fn security_group_name(sg: &str) -> String {
    format!("osac_sg_{}", digest(sg))
}

/// The security group's port group row key.
pub fn security_group_key(sg: &str) -> String {
    format!("sg:{sg}")
}

/// One ACL row keyed `key`.
pub(crate) fn acl(
    key: String,
    tenant: &str,
    priority: i64,
    direction: &str,
    matches: &str,
    action: &str,
) -> Row {
    Row::new(
        "ACL",
        key,
        op::row([
            ("priority", json!(priority)),
            ("direction", json!(direction)),
            ("match", json!(matches)),
            ("action", json!(action)),
        ]),
    )
    .with_external_id(TENANT_KEY, tenant)
}

/// The port group of VirtualNetwork `vn`'s ports: drop by default, the control plane passes.
/// Its members are set by the ports ([`super::port`]), never by this row.
pub fn network_port_group(vn: &str, tenant: &str) -> Row {
    let pg = network_port_group_name(vn);
    let key = network_port_group_key(vn);
    let acls = [
        (
            PRIORITY_GUARD,
            "from-lport",
            format!("inport == @{pg} && {DHCP_SERVER}"),
            "drop",
        ),
        (
            PRIORITY_CONTROL,
            "from-lport",
            format!("inport == @{pg} && arp"),
            "allow",
        ),
        (
            PRIORITY_CONTROL,
            "to-lport",
            format!("outport == @{pg} && arp"),
            "allow",
        ),
        (
            PRIORITY_CONTROL,
            "from-lport",
            format!("inport == @{pg} && ip4.dst == 255.255.255.255 && {DHCP4_REQUEST}"),
            "allow",
        ),
        (
            PRIORITY_CONTROL,
            "from-lport",
            format!("inport == @{pg} && ip6.dst == ff02::1:2 && udp.src == 546 && udp.dst == 547"),
            "allow",
        ),
        // Connections the rules allowed when they started keep passing after a rule is
        // removed (as in the linux driver; OVN alone would cut them).
        (
            PRIORITY_CONTROL,
            "from-lport",
            format!("inport == @{pg} && {ESTABLISHED}"),
            "allow-related",
        ),
        (
            PRIORITY_CONTROL,
            "to-lport",
            format!("outport == @{pg} && {ESTABLISHED}"),
            "allow-related",
        ),
        (
            PRIORITY_DROP,
            "from-lport",
            format!("inport == @{pg}"),
            "drop",
        ),
        (
            PRIORITY_DROP,
            "to-lport",
            format!("outport == @{pg}"),
            "drop",
        ),
    ];
    let mut row = Row::new("Port_Group", key.clone(), op::row([("name", json!(pg))]))
        .with_external_id(TENANT_KEY, tenant);
    for (i, (priority, direction, matches, action)) in acls.into_iter().enumerate() {
        row = row.with_child(
            "acls",
            acl(
                format!("{key}:{i}"),
                tenant,
                priority,
                direction,
                &matches,
                action,
            ),
        );
    }
    row
}

/// The match of one rule: `port` is `inport`/`outport`, `peer` is `src` (ingress) or `dst`
/// (egress).
pub fn rule_match(pg: &str, port: &str, peer: &str, rule: &SecurityRule) -> String {
    let (l3, icmp) = match rule.cidr {
        IpNet::V4(_) => ("ip4", "icmp4"),
        IpNet::V6(_) => ("ip6", "icmp6"),
    };
    let mut m = format!("{port} == @{pg} && {l3}");
    if rule.cidr.prefix_len() > 0 {
        m.push_str(&format!(" && {l3}.{peer} == {}", rule.cidr.trunc()));
    }
    let l4 = match rule.protocol {
        Protocol::Tcp => Some("tcp"),
        Protocol::Udp => Some("udp"),
        Protocol::Icmp => {
            m.push_str(&format!(" && {icmp}"));
            None
        }
        Protocol::All => None,
    };
    if let Some(l4) = l4 {
        m.push_str(&format!(" && {l4}"));
        match (rule.port_from, rule.port_to) {
            (Some(a), Some(b)) if a != b => {
                m.push_str(&format!(" && {l4}.dst >= {a} && {l4}.dst <= {b}"));
            }
            (Some(a), _) | (None, Some(a)) => m.push_str(&format!(" && {l4}.dst == {a}")),
            (None, None) => {}
        }
    }
    m
}

/// SecurityGroup `r` of a network owned by `tenant`: its port group with one `allow-related`
/// ACL per rule (the rule set replaces the previous one). Its members are set by the ports.
pub fn security_group(r: &ApplySecurityGroupRequest, tenant: &str) -> Row {
    let pg = security_group_name(&r.security_group_id);
    let key = security_group_key(&r.security_group_id);
    let mut row = Row::new("Port_Group", key.clone(), op::row([("name", json!(pg))]))
        .with_external_id(TENANT_KEY, tenant)
        .with_external_id("osac-vn", &r.virtual_network_id);
    let ingress = r
        .ingress
        .iter()
        .map(|rule| ("in", "to-lport", "outport", "src", rule));
    let egress = r
        .egress
        .iter()
        .map(|rule| ("out", "from-lport", "inport", "dst", rule));
    let mut n = 0usize;
    for (tag, direction, port, peer, rule) in ingress.chain(egress) {
        n += 1;
        let matches = rule_match(&pg, port, peer, rule);
        row = row.with_child(
            "acls",
            acl(
                format!("{key}:{tag}:{n}"),
                tenant,
                PRIORITY_ALLOW,
                direction,
                &matches,
                "allow-related",
            ),
        );
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(protocol: Protocol, ports: (Option<u16>, Option<u16>), cidr: &str) -> SecurityRule {
        SecurityRule {
            protocol,
            port_from: ports.0,
            port_to: ports.1,
            cidr: cidr.parse().unwrap(),
        }
    }

    #[test]
    fn rules_become_matches_on_the_peer_protocol_and_ports() {
        let tcp = rule(Protocol::Tcp, (Some(80), Some(80)), "10.0.0.0/16");
        assert_eq!(
            rule_match("pg", "outport", "src", &tcp),
            "outport == @pg && ip4 && ip4.src == 10.0.0.0/16 && tcp && tcp.dst == 80"
        );
        let range = rule(Protocol::Udp, (Some(1000), Some(2000)), "fd00::/8");
        assert_eq!(
            rule_match("pg", "inport", "dst", &range),
            "inport == @pg && ip6 && ip6.dst == fd00::/8 && udp && udp.dst >= 1000 && udp.dst <= 2000"
        );
        let icmp_anywhere = rule(Protocol::Icmp, (None, None), "0.0.0.0/0");
        assert_eq!(
            rule_match("pg", "outport", "src", &icmp_anywhere),
            "outport == @pg && ip4 && icmp4"
        );
        let all = rule(Protocol::All, (None, None), "10.1.2.3/32");
        assert_eq!(
            rule_match("pg", "outport", "src", &all),
            "outport == @pg && ip4 && ip4.src == 10.1.2.3/32"
        );
    }

    #[test]
    fn a_group_allows_related_traffic_per_rule_and_the_network_drops_the_rest() {
        let sg = security_group(
            &ApplySecurityGroupRequest {
                security_group_id: "web-1".into(),
                virtual_network_id: "v1".into(),
                ingress: vec![rule(Protocol::Tcp, (Some(80), Some(80)), "0.0.0.0/0")],
                egress: vec![rule(Protocol::All, (None, None), "0.0.0.0/0")],
            },
            "t1",
        );
        let name = sg.columns["name"].as_str().unwrap().to_string();
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{name}"
        );
        let acls: Vec<_> = sg.children.iter().map(|(_, a)| &a.columns).collect();
        assert_eq!(acls.len(), 2);
        assert_eq!(acls[0]["direction"], "to-lport");
        assert_eq!(acls[1]["direction"], "from-lport");
        assert!(acls.iter().all(|a| a["action"] == "allow-related"));

        let net = network_port_group("v1", "t1");
        let drops: Vec<_> = net
            .children
            .iter()
            .filter(|(_, a)| a.columns["action"] == "drop")
            .map(|(_, a)| a.columns["priority"].as_i64().unwrap())
            .collect();
        assert_eq!(drops, [PRIORITY_GUARD, PRIORITY_DROP, PRIORITY_DROP]);
        const {
            assert!(
                PRIORITY_DROP < PRIORITY_ALLOW
                    && PRIORITY_ALLOW < PRIORITY_CONTROL
                    && PRIORITY_CONTROL < PRIORITY_GUARD
            )
        };
    }
}
