//! Pure renderers: nft scripts (applied atomically with `nft -f`) and dnsmasq files. No I/O,
//! so every rule the dataplane installs is unit-tested without root.

use std::net::IpAddr;

use ipnet::IpNet;
use osac_fabric::{Protocol, SecurityRule};

use crate::names::{self, UNDERLAY_IF, UPLINK_IF, VXLAN_PORT};

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

/// Declares (idempotently) the per-VN table with its maps and (re)writes its base chains.
/// Map contents (ports, DNAT) and group chains are left alone.
pub fn vn_table(table: &str, site: TableSite) -> String {
    let t = format!("inet {table}");
    let mut s = String::new();
    line(&mut s, format!("add table {t}"));
    line(&mut s, format!("add set {t} brs {{ type ifname; }}"));
    for (name, ty) in [
        ("eg4", "ipv4_addr"),
        ("in4", "ipv4_addr"),
        ("eg6", "ipv6_addr"),
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
    for (chain, prio, dir, map4, map6) in [
        ("sgout", 0, "saddr", "eg4", "eg6"),
        ("sgin", 1, "daddr", "in4", "in6"),
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
                "add rule {t} {chain} icmpv6 type {{ nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, nd-router-advert }} accept"
            ),
        );
        line(
            &mut s,
            format!("add rule {t} {chain} ip {dir} vmap @{map4}"),
        );
        line(
            &mut s,
            format!("add rule {t} {chain} ip6 {dir} vmap @{map6}"),
        );
    }
    if site == TableSite::Router {
        line(
            &mut s,
            format!("add map {t} dnat4 {{ type ipv4_addr : ipv4_addr; }}"),
        );
        line(
            &mut s,
            format!("add map {t} dnat6 {{ type ipv6_addr : ipv6_addr; }}"),
        );
        // Nothing enters the VN from the uplink unless it is a reply or an attachment's DNAT;
        // the underlay never carries routed traffic.
        line(
            &mut s,
            format!(
                "add chain {t} guard {{ type filter hook forward priority -10; policy accept; }}"
            ),
        );
        line(&mut s, format!("flush chain {t} guard"));
        line(
            &mut s,
            format!("add rule {t} guard iifname \"{UNDERLAY_IF}\" drop"),
        );
        line(
            &mut s,
            format!("add rule {t} guard oifname \"{UNDERLAY_IF}\" drop"),
        );
        line(
            &mut s,
            format!(
                "add rule {t} guard iifname \"{UPLINK_IF}\" ct state established,related accept"
            ),
        );
        line(
            &mut s,
            format!("add rule {t} guard iifname \"{UPLINK_IF}\" ct status dnat accept"),
        );
        line(
            &mut s,
            format!("add rule {t} guard iifname \"{UPLINK_IF}\" drop"),
        );
        line(
            &mut s,
            format!("add chain {t} hostin {{ type filter hook input priority 0; policy accept; }}"),
        );
        line(&mut s, format!("flush chain {t} hostin"));
        line(
            &mut s,
            format!("add rule {t} hostin udp dport {VXLAN_PORT} iifname != \"{UNDERLAY_IF}\" drop"),
        );
        line(
            &mut s,
            format!(
                "add rule {t} hostin iifname \"{UPLINK_IF}\" ct state established,related accept"
            ),
        );
        line(
            &mut s,
            format!(
                "add rule {t} hostin iifname \"{UPLINK_IF}\" meta l4proto {{ icmp, ipv6-icmp }} accept"
            ),
        );
        line(
            &mut s,
            format!("add rule {t} hostin iifname \"{UPLINK_IF}\" drop"),
        );
        line(
            &mut s,
            format!(
                "add chain {t} dnatpre {{ type nat hook prerouting priority dstnat; policy accept; }}"
            ),
        );
        line(&mut s, format!("flush chain {t} dnatpre"));
        line(
            &mut s,
            format!("add rule {t} dnatpre dnat ip to ip daddr map @dnat4"),
        );
        line(
            &mut s,
            format!("add rule {t} dnatpre dnat ip6 to ip6 daddr map @dnat6"),
        );
        line(&mut s, format!("add chain {t} natgw"));
        line(
            &mut s,
            format!(
                "add chain {t} natpost {{ type nat hook postrouting priority srcnat; policy accept; }}"
            ),
        );
        line(&mut s, format!("flush chain {t} natpost"));
        // Hairpin: DNAT'ed traffic that did not come from the uplink returns through us.
        line(
            &mut s,
            format!(
                "add rule {t} natpost ct status dnat iifname != \"{UPLINK_IF}\" oifname != \"{UPLINK_IF}\" masquerade"
            ),
        );
        line(&mut s, format!("add rule {t} natpost jump natgw"));
        line(
            &mut s,
            format!("add rule {t} natpost oifname \"{UPLINK_IF}\" masquerade"),
        );
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
/// atomic update SPEC §8 asks for. Allowed packets are accepted (ending that direction's base
/// chain); anything else returns to the port chain, which tries the next group, then drops.
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
pub use dhcp::{DnsmasqConf, Lease, dnsmasq_conf, dnsmasq_host, parse_leases};
mod port;
pub use port::{PortIdentity, anti_spoof, bridge_table, delete_anti_spoof, port_sg, vip_sg};

#[cfg(test)]
mod tests;
