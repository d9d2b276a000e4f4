//! Pure renderers: nft scripts (applied atomically with `nft -f`) and dnsmasq files. No I/O,
//! so every rule the dataplane installs is unit-tested without root.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use osac_fabric::{Protocol, SecurityRule};

use crate::names::{self, BRIDGE_TABLE, UNDERLAY_IF, UPLINK_IF, VXLAN_PORT};

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

/// The security-group state of one port: its union chains (`jump` each group, then drop) and
/// the map elements steering its addresses there. `sgs` empty = unfiltered (everything
/// removed). Group chains must exist (see [`sg_chains`]).
pub fn port_sg(
    table: &str,
    switch_end: &str,
    sgs: &[String],
    v4: Option<Ipv4Addr>,
    v6: Option<Ipv6Addr>,
) -> String {
    let t = format!("inet {table}");
    let mut s = String::new();
    let e = names::port_chain("e", switch_end);
    let i = names::port_chain("i", switch_end);
    // Chains are declared first so a removal never trips over a missing chain; missing
    // elements are skipped by `cmd::nft_converge`.
    for chain in [&e, &i] {
        line(&mut s, format!("add chain {t} {chain}"));
        line(&mut s, format!("flush chain {t} {chain}"));
    }
    let mut elements: Vec<(&str, String, &str)> = Vec::new();
    if let Some(a) = v4 {
        elements.push(("eg4", a.to_string(), &e));
        elements.push(("in4", a.to_string(), &i));
    }
    if let Some(a) = v6 {
        elements.push(("eg6", a.to_string(), &e));
        elements.push(("in6", a.to_string(), &i));
    }
    if sgs.is_empty() {
        for (map, key, _) in &elements {
            line(&mut s, format!("delete element {t} {map} {{ {key} }}"));
        }
        line(&mut s, format!("delete chain {t} {e}"));
        line(&mut s, format!("delete chain {t} {i}"));
        return s;
    }
    for (map, key, chain) in &elements {
        line(
            &mut s,
            format!("add element {t} {map} {{ {key} : jump {chain} }}"),
        );
    }
    for sg in sgs {
        line(
            &mut s,
            format!("add rule {t} {e} jump {}", names::sg_chain(sg, false)),
        );
        line(
            &mut s,
            format!("add rule {t} {i} jump {}", names::sg_chain(sg, true)),
        );
    }
    line(&mut s, format!("add rule {t} {e} drop"));
    line(&mut s, format!("add rule {t} {i} drop"));
    s
}

/// Declares the stateless anti-spoofing table (family `bridge`) of a namespace.
pub fn bridge_table() -> String {
    let t = format!("bridge {BRIDGE_TABLE}");
    let mut s = String::new();
    line(&mut s, format!("add table {t}"));
    line(
        &mut s,
        format!("add map {t} ports {{ type ifname : verdict; }}"),
    );
    line(
        &mut s,
        format!("add chain {t} pre {{ type filter hook prerouting priority 0; policy accept; }}"),
    );
    line(&mut s, format!("flush chain {t} pre"));
    line(&mut s, format!("add rule {t} pre iifname vmap @ports"));
    s
}

/// What a port may send: its MAC, its addresses and the subnet's VIP block (cluster agents
/// answer for VIPs), DHCP discover from 0.0.0.0, link-local/unspecified IPv6 (ND, DHCPv6
/// solicit); never DHCP/DHCPv6 server replies nor router advertisements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortIdentity {
    /// Lowercase MAC.
    pub mac: String,
    /// Allowed IPv4 sources.
    pub ipv4: Vec<IpNet>,
    /// Allowed IPv6 sources.
    pub ipv6: Vec<IpNet>,
}

fn set_of(items: &[IpNet], extra: &[&str]) -> String {
    let mut all: Vec<String> = items.iter().map(|n| n.trunc().to_string()).collect();
    all.extend(extra.iter().map(|s| s.to_string()));
    format!("{{ {} }}", all.join(", "))
}

/// The anti-spoofing chain of one port plus its map element (replaces an older version).
pub fn anti_spoof(switch_end: &str, id: &PortIdentity) -> String {
    let t = format!("bridge {BRIDGE_TABLE}");
    let c = names::port_chain("as", switch_end);
    let mac = &id.mac;
    let mut s = String::new();
    line(&mut s, format!("add chain {t} {c}"));
    line(&mut s, format!("flush chain {t} {c}"));
    line(
        &mut s,
        format!("add rule {t} {c} ether saddr != {mac} drop"),
    );
    line(
        &mut s,
        format!("add rule {t} {c} ether type arp arp saddr ether != {mac} drop"),
    );
    line(
        &mut s,
        format!(
            "add rule {t} {c} ether type arp arp saddr ip != {} drop",
            set_of(&id.ipv4, &["0.0.0.0"])
        ),
    );
    line(&mut s, format!("add rule {t} {c} ether type arp accept"));
    line(
        &mut s,
        format!("add rule {t} {c} ip protocol udp udp sport 67 drop"),
    );
    line(
        &mut s,
        format!("add rule {t} {c} ip6 nexthdr udp udp sport 547 drop"),
    );
    line(
        &mut s,
        format!("add rule {t} {c} icmpv6 type {{ nd-router-advert, nd-redirect }} drop"),
    );
    line(
        &mut s,
        format!(
            "add rule {t} {c} ip saddr 0.0.0.0 ip daddr 255.255.255.255 udp sport 68 udp dport 67 accept"
        ),
    );
    if !id.ipv4.is_empty() {
        line(
            &mut s,
            format!("add rule {t} {c} ip saddr {} accept", set_of(&id.ipv4, &[])),
        );
    }
    line(
        &mut s,
        format!(
            "add rule {t} {c} ip6 saddr {} accept",
            set_of(&id.ipv6, &["fe80::/10", "::/128"])
        ),
    );
    line(&mut s, format!("add rule {t} {c} drop"));
    line(
        &mut s,
        format!("add element {t} ports {{ \"{switch_end}\" : jump {c} }}"),
    );
    s
}

/// Removes a port's anti-spoofing chain and map element (apply with `cmd::nft_converge`).
pub fn delete_anti_spoof(switch_end: &str) -> String {
    let t = format!("bridge {BRIDGE_TABLE}");
    let c = names::port_chain("as", switch_end);
    let mut s = String::new();
    line(
        &mut s,
        format!("delete element {t} ports {{ \"{switch_end}\" }}"),
    );
    line(&mut s, format!("add chain {t} {c}"));
    line(&mut s, format!("delete chain {t} {c}"));
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

#[cfg(test)]
mod tests;
