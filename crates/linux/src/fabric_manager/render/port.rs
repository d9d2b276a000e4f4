//! Per-port renderers: security-group steering of a port's addresses (and of the VIPs it may
//! use), and the stateless anti-spoofing chain of its switch end.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use super::line;
use crate::names::{self, BRIDGE_TABLE};

/// A port's place in the security-group maps: its MAC (egress key), its mark (bridged-ingress
/// key, unique among the ports of its switch namespace, never 0) and its own addresses
/// (routed-ingress keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortKeys {
    /// Lowercase MAC of the machine end.
    pub mac: String,
    /// Packet mark the bridge table gives frames leaving through this port.
    pub mark: u32,
    /// The port's IPv4 address.
    pub v4: Option<Ipv4Addr>,
    /// The port's IPv6 address.
    pub v6: Option<Ipv6Addr>,
}

/// The security-group state of one port: its union chains (`jump` each group, then drop) and
/// the map elements steering its traffic there — everything it sends (by MAC), everything
/// bridged to it (by mark, set per output port in the bridge table) and everything routed to
/// its addresses. `sgs` empty = a closed port: both chains only drop, so nothing but the
/// control plane the base chains accept first (DHCP with its gateway, on-link neighbour
/// discovery; ARP never meets the `inet` hooks) passes. Group chains must exist (see
/// [`super::sg_chains`]); [`delete_port_sg`] removes it all.
pub fn port_sg(table: &str, switch_end: &str, sgs: &[String], keys: &PortKeys) -> String {
    let t = format!("inet {table}");
    let (mut s, e, i) = port_steering(table, switch_end, keys);
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

/// Declares and flushes a port's two chains and adds the map elements steering its traffic
/// there; returns the script and the egress and ingress chain names.
fn port_steering(table: &str, switch_end: &str, keys: &PortKeys) -> (String, String, String) {
    let t = format!("inet {table}");
    let b = format!("bridge {BRIDGE_TABLE}");
    let mut s = String::new();
    let e = names::port_chain("e", switch_end);
    let i = names::port_chain("i", switch_end);
    // Chains are declared first so a removal never trips over a missing chain.
    for chain in [&e, &i] {
        line(&mut s, format!("add chain {t} {chain}"));
        line(&mut s, format!("flush chain {t} {chain}"));
    }
    // Its new connections beyond the limit are dropped before any group is asked.
    line(
        &mut s,
        format!(
            "add rule {t} {e} ct state new add @{} {{ ether saddr ct count over {} }} drop",
            super::CONN_SET,
            super::PORT_CONNECTION_LIMIT
        ),
    );
    // Adding an element that exists with the same verdict is a no-op, so a removal declares
    // its elements first and never trips over a missing one either.
    for (map, key, chain) in port_elements(keys, &e, &i) {
        line(
            &mut s,
            format!("add element {t} {map} {{ {key} : jump {chain} }}"),
        );
    }
    line(
        &mut s,
        format!(
            "add element {b} portmark {{ \"{switch_end}\" : {:#010x} }}",
            keys.mark
        ),
    );
    (s, e, i)
}

/// The map elements of a port: (map, key, chain).
fn port_elements<'a>(
    keys: &PortKeys,
    e: &'a str,
    i: &'a str,
) -> Vec<(&'static str, String, &'a str)> {
    let mut elements = vec![
        ("egmac", keys.mac.clone(), e),
        ("inport", format!("{:#010x}", keys.mark), i),
    ];
    if let Some(a) = keys.v4 {
        elements.push(("in4", a.to_string(), i));
    }
    if let Some(a) = keys.v6 {
        elements.push(("in6", a.to_string(), i));
    }
    elements
}

/// Removes a port's security-group state (its chains, map elements and mark): the port is
/// being detached. Idempotent (everything is declared before it is deleted).
pub fn delete_port_sg(table: &str, switch_end: &str, keys: &PortKeys) -> String {
    let t = format!("inet {table}");
    let b = format!("bridge {BRIDGE_TABLE}");
    let (mut s, e, i) = port_steering(table, switch_end, keys);
    line(
        &mut s,
        format!("delete element {b} portmark {{ \"{switch_end}\" }}"),
    );
    for (map, key, _) in port_elements(keys, &e, &i) {
        line(&mut s, format!("delete element {t} {map} {{ {key} }}"));
    }
    line(&mut s, format!("delete chain {t} {e}"));
    line(&mut s, format!("delete chain {t} {i}"));
    s
}

/// The routed-ingress state of an allowed address (a cluster VIP): its own chain jumping to
/// `groups` — the union of the ingress groups of the ports claiming it in this namespace —
/// then dropping, and the map element steering the address there, so a DNAT to the VIP is
/// filtered like traffic to the agents' own addresses. (What the agents send from the VIP is
/// filtered by their own egress chains, keyed by MAC; what is bridged to them by their own
/// ingress chains, keyed by port.) The element always points at the address's own chain,
/// whichever claimant remains. `groups` `Some(&[])` (claimants, none with groups) leaves
/// only the drop, like a port without groups; `None` (no claimant left) removes everything.
/// Group chains must exist.
pub fn vip_sg(table: &str, vip: IpAddr, groups: Option<&[String]>) -> String {
    let t = format!("inet {table}");
    let i = names::vip_chain(&vip, true);
    let in_map = if vip.is_ipv4() { "in4" } else { "in6" };
    let mut s = String::new();
    line(&mut s, format!("add chain {t} {i}"));
    line(&mut s, format!("flush chain {t} {i}"));
    line(
        &mut s,
        format!("add element {t} {in_map} {{ {vip} : jump {i} }}"),
    );
    let Some(groups) = groups else {
        line(&mut s, format!("delete element {t} {in_map} {{ {vip} }}"));
        line(&mut s, format!("delete chain {t} {i}"));
        return s;
    };
    for g in groups {
        line(
            &mut s,
            format!("add rule {t} {i} jump {}", names::sg_chain(g, true)),
        );
    }
    line(&mut s, format!("add rule {t} {i} drop"));
    s
}

/// Declares the namespace's `bridge` table: stateless anti-spoofing per input port (`pre`,
/// through the `ports` map), and the mark of the output port (`markout`, from `portmark`),
/// which the VN tables' ingress chains read — br_netfilter shows them only the bridge, not
/// the port. `markout` runs before br_netfilter's own forward hook (priority 0), once per
/// copy of a flooded frame.
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
        format!("add map {t} portmark {{ type ifname : mark; }}"),
    );
    line(
        &mut s,
        format!("add chain {t} pre {{ type filter hook prerouting priority 0; policy accept; }}"),
    );
    line(&mut s, format!("flush chain {t} pre"));
    line(&mut s, format!("add rule {t} pre iifname vmap @ports"));
    line(
        &mut s,
        format!(
            "add chain {t} markout {{ type filter hook forward priority -200; policy accept; }}"
        ),
    );
    line(&mut s, format!("flush chain {t} markout"));
    line(
        &mut s,
        format!("add rule {t} markout meta mark set oifname map @portmark"),
    );
    s
}

/// What a port may send: untagged frames with its MAC, its own addresses plus its allowed
/// addresses (a cluster's VIPs for its agents — never the subnet's whole VIP block), DHCP
/// discover from 0.0.0.0, link-local/unspecified IPv6 (ND, DHCPv6 solicit); DHCP only as a
/// client about itself (never a server's or relay's message, nor one for another MAC); never
/// router advertisements, and neighbour advertisements only for its own IPv6 addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortIdentity {
    /// Lowercase MAC.
    pub mac: String,
    /// Allowed IPv4 sources.
    pub ipv4: Vec<IpNet>,
    /// Allowed IPv6 sources (also the targets its neighbour advertisements may announce).
    pub ipv6: Vec<IpNet>,
    /// The subnet gateway's link-local address: inside fe80::/10, which ports may use, but
    /// never as a source or an advertised target (that would take over the IPv6 next hop).
    pub gateway_link_local: Option<std::net::Ipv6Addr>,
}

fn set_of(items: &[IpNet], extra: &[&str]) -> String {
    let mut all: Vec<String> = items.iter().map(|n| n.trunc().to_string()).collect();
    all.extend(extra.iter().map(|s| s.to_string()));
    format!("{{ {} }}", all.join(", "))
}

/// IPv6 prefixes as 128-bit integers / ranges: nft 1.0.6 has no `icmpv6 taddr`, so the target
/// of a neighbour advertisement is read as raw payload (`@th,64,128`), compared with integers.
fn targets_of(items: &[IpNet]) -> Option<String> {
    let all: Vec<String> = items
        .iter()
        .filter_map(|n| match n {
            IpNet::V6(n) => {
                let (lo, hi) = (u128::from(n.network()), u128::from(n.broadcast()));
                Some(if lo == hi {
                    format!("0x{lo:032x}")
                } else {
                    format!("0x{lo:032x}-0x{hi:032x}")
                })
            }
            IpNet::V4(_) => None,
        })
        .collect();
    (!all.is_empty()).then(|| format!("{{ {} }}", all.join(", ")))
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
    // Untagged IPv4, IPv6 and ARP only: `ether type` is the outermost type, so an 802.1Q or
    // 802.1ad tag (any VLAN id, 0 included) never carries a packet past the rules below,
    // whose IP matches would read the inner header of a tagged frame.
    line(
        &mut s,
        format!("add rule {t} {c} ether type != {{ arp, ip, ip6 }} drop"),
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
    dhcp_client_only(&mut s, &t, &c, mac);
    line(
        &mut s,
        format!(
            "add rule {t} {c} meta l4proto ipv6-icmp icmpv6 type {{ nd-router-advert, nd-redirect }} drop"
        ),
    );
    // Neighbour advertisements announce only the port's own IPv6 addresses or a link-local
    // one (fe80::/10 = the top 10 bits 0x3fa): the port's link-local address is chosen by its
    // OS (EUI-64 or RFC 7217 stable privacy), so the fabric cannot pin it.
    let own = targets_of(&id.ipv6)
        .map(|set| format!(" @th,64,128 != {set}"))
        .unwrap_or_default();
    line(
        &mut s,
        format!(
            "add rule {t} {c} meta l4proto ipv6-icmp icmpv6 type nd-neighbor-advert @th,64,10 != 0x3fa{own} drop"
        ),
    );
    if let Some(gw) = id.gateway_link_local {
        line(&mut s, format!("add rule {t} {c} ip6 saddr {gw} drop"));
        line(
            &mut s,
            format!(
                "add rule {t} {c} meta l4proto ipv6-icmp icmpv6 type nd-neighbor-advert @th,64,128 {:#x} drop",
                u128::from(gw)
            ),
        );
    }
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
    // `meta l4proto` only matches when the kernel could walk the packet's IPv6 extension
    // headers to its upper-layer header: a packet whose header chain cannot be parsed (e.g.
    // one hiding a DHCPv6 or RA header from the rules above) is dropped here.
    line(
        &mut s,
        format!(
            "add rule {t} {c} ip6 saddr {} meta l4proto != 255 accept",
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

/// DHCP from a port: only a client's messages, about the port itself. Nothing from or to the
/// server and client ports of a server or relay (`sport` 67/547, `dport` 68/546), whatever the
/// payload; to the server ports only whole client messages — DHCPv4: a BOOTREQUEST for
/// Ethernet with the port's MAC as `chaddr` and no relay (`giaddr` 0), the fixed BOOTP header
/// present and unfragmented, so every field below is read from this packet; DHCPv6: a client
/// message type (never a server's, nor a relay's), unfragmented. The offsets are bits from the
/// UDP header (`@th`): the BOOTP header starts at 64 (op, htype, hlen at 64..88, giaddr at 256,
/// chaddr at 288), the DHCPv6 message type at 64. At most 10 messages a second (burst 20).
fn dhcp_client_only(s: &mut String, t: &str, c: &str, mac: &str) {
    let chaddr: String = mac.chars().filter(char::is_ascii_hexdigit).collect();
    let udp = "meta l4proto udp udp";
    for rule in [
        format!("{udp} sport {{ 67, 547 }} drop"),
        format!("{udp} dport {{ 68, 546 }} drop"),
        format!("{udp} dport 67 udp length < 244 drop"),
        format!("{udp} dport 67 ip frag-off & 0x3fff != 0 drop"),
        format!("{udp} dport 67 @th,64,24 != 0x010106 drop"),
        format!("{udp} dport 67 @th,256,32 != 0 drop"),
        format!("{udp} dport 67 @th,288,48 != 0x{chaddr} drop"),
        format!("{udp} dport 547 udp length < 12 drop"),
        format!("{udp} dport 547 exthdr frag exists drop"),
        format!("{udp} dport 547 @th,64,8 != {{ 1, 3, 4, 5, 6, 8, 9, 11 }} drop"),
        // A client needs a handful of messages per lease: the server (and what it logs about
        // refusals) hears at most 10 a second from one port.
        format!("{udp} dport {{ 67, 547 }} limit rate over 10/second burst 20 packets drop"),
    ] {
        line(s, format!("add rule {t} {c} {rule}"));
    }
}

/// Removes a port's anti-spoofing chain and map element (declared first, so a second call
/// does not trip over missing objects).
pub fn delete_anti_spoof(switch_end: &str) -> String {
    let t = format!("bridge {BRIDGE_TABLE}");
    let c = names::port_chain("as", switch_end);
    let mut s = String::new();
    line(&mut s, format!("add chain {t} {c}"));
    line(
        &mut s,
        format!("add element {t} ports {{ \"{switch_end}\" : jump {c} }}"),
    );
    line(
        &mut s,
        format!("delete element {t} ports {{ \"{switch_end}\" }}"),
    );
    line(&mut s, format!("delete chain {t} {c}"));
    s
}
