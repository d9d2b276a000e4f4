//! Pure renderers: nft scripts (applied atomically with `nft -f`) and dnsmasq files. No I/O,
//! so every rule the dataplane installs is unit-tested without root.

use std::net::IpAddr;

use ipnet::IpNet;
use osac_backends::{Protocol, SecurityRule};

use crate::names::{self, GUARD_TABLE, UNDERLAY_IF, UPLINK_IF, VXLAN_PORT};

/// Where a per-VN `inet` table lives: the router (NAT, uplink guard) or a hosting cluster
/// (security groups only, restricted to the VN's overlay bridges).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableSite {
    /// The VN's router namespace.
    Router,
    /// A hosting-cluster namespace shared by several VNs.
    Hosting,
}

fn line(out: &mut String, s: impl AsRef<str>) {
    out.push_str(s.as_ref());
    out.push('\n');
}

/// ICMPv6 neighbour discovery a port may always send and receive on its link (its subnet's
/// control plane): never filtered by security groups while its hop limit is 255 (RFC 4861:
/// never routed; a routed copy has its hop limit lowered before the forward hook). Router
/// advertisements only ever come from the gateway (anti-spoofing drops them from ports).
const ND_TYPES: &str =
    "{ nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, nd-router-advert }";

/// Every neighbour-discovery type (RS, RA, NS, NA, redirect): none is ever routed.
const ND_ALL_TYPES: &str =
    "{ nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, nd-redirect }";

/// The most connections (conntrack entries) a port may open in one namespace: beyond it its
/// new flows are dropped, so one workload cannot fill a router's or a hosting cluster's
/// connection-tracking table, shared by every workload there.
pub const PORT_CONNECTION_LIMIT: u32 = 8192;

/// The dynamic set counting each port's connections (keyed by its MAC).
pub(crate) const CONN_SET: &str = "ctport";

/// Declares (idempotently) the per-VN table with its maps and (re)writes its base chains.
/// Map contents (ports, DNAT) and group chains are left alone.
///
/// Security groups see every packet of a port whatever its addresses: egress is keyed by the
/// sender's MAC (`egmac`, pinned per port by anti-spoofing), bridged ingress by the receiving
/// port (`inport`: the mark the bridge table's `markout` chain gives each frame per output
/// port — so link-local, broadcast and multicast frames meet the receiver's groups too), and
/// routed ingress, which reaches a port only through the gateway, by destination address
/// (`in4`/`in6`). Only the control plane passes unfiltered: on-link ND/RS/RA (hop limit 255)
/// and DHCP between a port and its gateway ([`dhcp::exemptions`]). A port without groups is
/// closed: its chains only drop. Each port's new connections are counted in `ctport` (see
/// [`PORT_CONNECTION_LIMIT`]).
pub fn vn_table(table: &str, site: TableSite) -> String {
    let t = format!("inet {table}");
    let mut s = String::new();
    line(&mut s, format!("add table {t}"));
    line(&mut s, format!("add set {t} brs {{ type ifname; }}"));
    line(
        &mut s,
        format!("add set {t} {CONN_SET} {{ type ether_addr; flags dynamic; size 65536; }}"),
    );
    line(&mut s, dhcp::declare_servers(&t));
    for (name, ty) in [
        ("egmac", "ether_addr"),
        ("inport", "mark"),
        ("in4", "ipv4_addr"),
        ("in6", "ipv6_addr"),
    ] {
        line(
            &mut s,
            format!("add map {t} {name} {{ type {ty} : verdict; }}"),
        );
    }
    let bridged_only = site == TableSite::Hosting;
    if bridged_only {
        // VNs sharing a hosting cluster may use the same CIDRs: each VN's bridged flows get
        // their own conntrack zone (br_netfilter presents them with the bridge as iifname).
        let zone = names::ct_zone(table);
        line(
            &mut s,
            format!(
                "add chain {t} zone {{ type filter hook prerouting priority raw; policy accept; }}"
            ),
        );
        line(&mut s, format!("flush chain {t} zone"));
        line(
            &mut s,
            format!("add rule {t} zone iifname @brs ct zone set {zone}"),
        );
    }
    for (chain, prio, client, steering) in [
        ("sgout", 0, true, &["ether saddr vmap @egmac"][..]),
        (
            "sgin",
            1,
            false,
            &[
                "meta mark vmap @inport",
                "ip daddr vmap @in4",
                "ip6 daddr vmap @in6",
            ][..],
        ),
    ] {
        line(
            &mut s,
            format!(
                "add chain {t} {chain} {{ type filter hook forward priority {prio}; policy accept; }}"
            ),
        );
        line(&mut s, format!("flush chain {t} {chain}"));
        if bridged_only {
            line(
                &mut s,
                format!("add rule {t} {chain} iifname != @brs accept"),
            );
        }
        line(
            &mut s,
            format!("add rule {t} {chain} ct state established,related accept"),
        );
        line(
            &mut s,
            format!("add rule {t} {chain} ct state invalid drop"),
        );
        line(
            &mut s,
            format!(
                "add rule {t} {chain} meta l4proto ipv6-icmp ip6 hoplimit 255 icmpv6 type {ND_TYPES} accept"
            ),
        );
        dhcp::exemptions(&mut s, &t, chain, client, site);
        for steer in steering {
            line(&mut s, format!("add rule {t} {chain} {steer}"));
        }
    }
    if site == TableSite::Router {
        router_chains(&mut s, &t);
    }
    s
}

/// The router-only chains of a VN table: NAT, the uplink guard, and the router's own input
/// (the gateway's services toward its subnets, VXLAN only from the underlay).
fn router_chains(s: &mut String, t: &str) {
    line(
        s,
        format!("add map {t} dnat4 {{ type ipv4_addr : ipv4_addr; }}"),
    );
    line(
        s,
        format!("add map {t} dnat6 {{ type ipv6_addr : ipv6_addr; }}"),
    );
    // Nothing enters the VN from the uplink unless it is a reply or an attachment's DNAT;
    // the underlay never carries routed traffic.
    line(
        s,
        format!("add chain {t} guard {{ type filter hook forward priority -10; policy accept; }}"),
    );
    line(s, format!("flush chain {t} guard"));
    line(
        s,
        format!("add rule {t} guard iifname \"{UNDERLAY_IF}\" drop"),
    );
    line(
        s,
        format!("add rule {t} guard oifname \"{UNDERLAY_IF}\" drop"),
    );
    // Neighbour discovery never leaves its link: a routed copy (its hop limit already
    // lowered; bridged ND keeps 255) is dropped, whatever it carries. Nothing untracked
    // (ND, MLD: conntrack does not track them, so NAT cannot translate them) and nothing
    // link-local leaves by the uplink with an internal source.
    line(
        s,
        format!(
            "add rule {t} guard meta l4proto ipv6-icmp icmpv6 type {ND_ALL_TYPES} ip6 hoplimit != 255 drop"
        ),
    );
    line(
        s,
        format!("add rule {t} guard oifname \"{UPLINK_IF}\" ct state untracked drop"),
    );
    for scoped in [
        "ip saddr 169.254.0.0/16",
        "ip daddr 169.254.0.0/16",
        "ip6 saddr fe80::/10",
        "ip6 daddr fe80::/10",
    ] {
        line(
            s,
            format!("add rule {t} guard oifname \"{UPLINK_IF}\" {scoped} drop"),
        );
    }
    line(
        s,
        format!("add rule {t} guard iifname \"{UPLINK_IF}\" ct state established,related accept"),
    );
    line(
        s,
        format!("add rule {t} guard iifname \"{UPLINK_IF}\" ct status dnat accept"),
    );
    line(
        s,
        format!("add rule {t} guard iifname \"{UPLINK_IF}\" drop"),
    );
    router_input(s, t);
    line(
        s,
        format!(
            "add chain {t} dnatpre {{ type nat hook prerouting priority dstnat; policy accept; }}"
        ),
    );
    line(s, format!("flush chain {t} dnatpre"));
    line(
        s,
        format!("add rule {t} dnatpre dnat ip to ip daddr map @dnat4"),
    );
    line(
        s,
        format!("add rule {t} dnatpre dnat ip6 to ip6 daddr map @dnat6"),
    );
    hairpin::mark_dnat_flows(s, t);
    line(s, format!("add chain {t} natgw"));
    line(
        s,
        format!(
            "add chain {t} natpost {{ type nat hook postrouting priority srcnat; policy accept; }}"
        ),
    );
    line(s, format!("flush chain {t} natpost"));
    // Hairpin: DNAT'ed traffic that did not come from the uplink returns through us.
    line(
        s,
        format!(
            "add rule {t} natpost ct status dnat iifname != \"{UPLINK_IF}\" oifname != \"{UPLINK_IF}\" masquerade"
        ),
    );
    line(s, format!("add rule {t} natpost jump natgw"));
    line(
        s,
        format!("add rule {t} natpost oifname \"{UPLINK_IF}\" masquerade"),
    );
    meter::chains(s, t);
}

/// The router's own input. From the underlay: VXLAN and neighbour discovery only. From the
/// uplink: replies and neighbour discovery only (the transit address answers nothing, not
/// even ping). From a subnet (anything else: the subnet bridges): the gateway's services —
/// neighbour discovery and router solicitations, DHCPv4/DHCPv6 requests, and ICMP echo to the
/// gateway address of the subnet the request arrived on (`fib daddr . iif`: never the
/// router's other addresses) — and nothing else.
fn router_input(s: &mut String, t: &str) {
    line(
        s,
        format!("add chain {t} hostin {{ type filter hook input priority 0; policy accept; }}"),
    );
    line(s, format!("flush chain {t} hostin"));
    let nd = "meta l4proto ipv6-icmp icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert }";
    for rule in [
        "iifname \"lo\" accept".to_string(),
        format!("iifname \"{UNDERLAY_IF}\" udp dport {VXLAN_PORT} accept"),
        format!("iifname \"{UNDERLAY_IF}\" {nd} accept"),
        format!(
            "iifname \"{UNDERLAY_IF}\" meta l4proto ipv6-icmp icmpv6 type {{ mld-listener-query, mld-listener-report, mld2-listener-report }} accept"
        ),
        format!("iifname \"{UNDERLAY_IF}\" drop"),
        format!("iifname \"{UPLINK_IF}\" ct state established,related accept"),
        format!("iifname \"{UPLINK_IF}\" {nd} accept"),
        format!("iifname \"{UPLINK_IF}\" drop"),
        "ct state established,related accept".to_string(),
        format!("meta l4proto ipv6-icmp icmpv6 type {ND_TYPES} accept"),
        "meta nfproto ipv4 udp dport 67 accept".to_string(),
        "meta nfproto ipv6 udp dport 547 accept".to_string(),
        "meta l4proto icmp icmp type echo-request fib daddr . iif type local accept".to_string(),
        "meta l4proto ipv6-icmp icmpv6 type echo-request fib daddr . iif type local accept"
            .to_string(),
        "drop".to_string(),
    ] {
        line(s, format!("add rule {t} hostin {rule}"));
    }
}

/// The guard table of an infrastructure namespace that serves workloads at layer 2 only (a
/// hosting cluster, the parking network): it has no address or socket a workload may reach,
/// so its own input and output are the underlay's (VXLAN, neighbour discovery) and loopback,
/// nothing else. Bridged frames do not pass these hooks.
pub fn l2_guard_table() -> String {
    let t = format!("inet {GUARD_TABLE}");
    let mut s = String::new();
    line(&mut s, format!("add table {t}"));
    for (chain, hook, dir) in [
        ("hostin", "input", "iifname"),
        ("hostout", "output", "oifname"),
    ] {
        line(
            &mut s,
            format!("add chain {t} {chain} {{ type filter hook {hook} priority 0; policy drop; }}"),
        );
        line(&mut s, format!("flush chain {t} {chain}"));
        line(
            &mut s,
            format!("add rule {t} {chain} {dir} {{ \"lo\", \"{UNDERLAY_IF}\" }} accept"),
        );
    }
    s
}

/// Removes the address-keyed egress maps (`eg4`, `eg6`) of tables written by earlier versions,
/// whose elements would keep port chains from being deleted. Run once per table on upgrade
/// (it holds deletions, which make nft 1.0.6 load the namespace's whole cache); harmless on a
/// table that never had them.
pub fn retire_address_egress_maps(table: &str) -> String {
    let t = format!("inet {table}");
    let mut s = String::new();
    for (old, ty) in [("eg4", "ipv4_addr"), ("eg6", "ipv6_addr")] {
        line(
            &mut s,
            format!("add map {t} {old} {{ type {ty} : verdict; }}"),
        );
        line(&mut s, format!("delete map {t} {old}"));
    }
    s
}

/// Adds a bridge to a table's `brs` set (idempotent).
pub fn add_bridge(table: &str, bridge: &str) -> String {
    format!("add element inet {table} brs {{ \"{bridge}\" }}\n")
}

fn peer_match(rule: &SecurityRule, ingress: bool) -> String {
    let dir = if ingress { "saddr" } else { "daddr" };
    match rule.cidr {
        IpNet::V4(n) => format!("ip {dir} {n}"),
        IpNet::V6(n) => format!("ip6 {dir} {n}"),
    }
}

/// nft match of one rule (without verdict).
pub fn rule_match(rule: &SecurityRule, ingress: bool) -> String {
    let peer = peer_match(rule, ingress);
    let proto = match (rule.protocol, rule.port_from, rule.port_to) {
        (Protocol::Tcp | Protocol::Udp, Some(from), Some(to)) => {
            let p = if rule.protocol == Protocol::Tcp {
                "tcp"
            } else {
                "udp"
            };
            if from == to {
                format!(" {p} dport {from}")
            } else {
                format!(" {p} dport {from}-{to}")
            }
        }
        (Protocol::Tcp, _, _) => " meta l4proto tcp".into(),
        (Protocol::Udp, _, _) => " meta l4proto udp".into(),
        (Protocol::Icmp, _, _) => match rule.cidr {
            IpNet::V4(_) => " meta l4proto icmp".into(),
            IpNet::V6(_) => " meta l4proto ipv6-icmp".into(),
        },
        (Protocol::All, _, _) => String::new(),
    };
    format!("{peer}{proto}")
}

/// Replaces a security group's two chains in one transaction (declare, flush, refill): the
/// rules of a group change atomically, never half applied. Allowed packets are accepted
/// (ending that direction's base chain); anything else returns to the port chain, which tries
/// the next group, then drops.
pub fn sg_chains(
    table: &str,
    sg_id: &str,
    ingress: &[SecurityRule],
    egress: &[SecurityRule],
) -> String {
    let t = format!("inet {table}");
    let mut s = String::new();
    for (is_in, rules) in [(true, ingress), (false, egress)] {
        let chain = names::sg_chain(sg_id, is_in);
        line(&mut s, format!("add chain {t} {chain}"));
        line(&mut s, format!("flush chain {t} {chain}"));
        for rule in rules {
            line(
                &mut s,
                format!("add rule {t} {chain} {} accept", rule_match(rule, is_in)),
            );
        }
    }
    s
}

/// Removes a security group's chains (idempotent: declared first, then deleted).
pub fn delete_sg_chains(table: &str, sg_id: &str) -> String {
    let t = format!("inet {table}");
    let mut s = String::new();
    for is_in in [true, false] {
        let chain = names::sg_chain(sg_id, is_in);
        line(&mut s, format!("add chain {t} {chain}"));
        line(&mut s, format!("delete chain {t} {chain}"));
    }
    s
}

/// Adds (`Some(target)`) or removes (`None`) one DNAT mapping (apply with
/// `cmd::nft_converge`, which replaces an element that maps elsewhere).
pub fn dnat(table: &str, external: IpAddr, target: Option<IpAddr>) -> String {
    let t = format!("inet {table}");
    let map = if external.is_ipv4() { "dnat4" } else { "dnat6" };
    match target {
        Some(target) => format!("add element {t} {map} {{ {external} : {target} }}\n"),
        None => format!("delete element {t} {map} {{ {external} }}\n"),
    }
}

/// Rewrites the VN's SNAT chain: with a NAT gateway, sources of its family leaving by the
/// uplink take its address; without one the chain is empty (postrouting masquerades).
pub fn snat(table: &str, gateway: Option<(IpAddr, &[IpNet])>) -> String {
    let t = format!("inet {table}");
    let mut s = String::new();
    line(&mut s, format!("add chain {t} natgw"));
    line(&mut s, format!("flush chain {t} natgw"));
    if let Some((addr, sources)) = gateway {
        let fam: Vec<&IpNet> = sources
            .iter()
            .filter(|n| n.addr().is_ipv4() == addr.is_ipv4())
            .collect();
        let (kw, fam_kw) = if addr.is_ipv4() {
            ("ip", "ip")
        } else {
            ("ip6", "ip6")
        };
        if !fam.is_empty() {
            let set: Vec<String> = fam.iter().map(|n| n.to_string()).collect();
            line(
                &mut s,
                format!(
                    "add rule {t} natgw oifname \"{UPLINK_IF}\" {kw} saddr {{ {} }} snat {fam_kw} to {addr}",
                    set.join(", ")
                ),
            );
        }
    }
    s
}

mod dhcp;
pub use dhcp::{DnsmasqConf, Lease, add_dhcp_server, dnsmasq_conf, dnsmasq_host, parse_leases};
mod hairpin;
pub mod meter;
pub use hairpin::{HAIRPIN_MARK, delete_hairpin_link, hairpin_link, router_hairpin};
mod port;
pub use port::{
    PortIdentity, PortKeys, anti_spoof, bridge_table, delete_anti_spoof, delete_port_sg, port_sg,
    vip_sg,
};

#[cfg(test)]
mod tests;
