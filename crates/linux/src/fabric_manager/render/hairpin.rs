//! Hairpin through a router's overlay link.
//!
//! A router DNATs an ExternalIP to its target. When the sender and the target sit behind the
//! same bridge port of the router — two VMs of one subnet, on one hosting cluster or on two
//! (the router has a single VXLAN port per subnet for every hosting cluster), or a VM reaching
//! its own ExternalIP — br_netfilter does not route the translated packet: it sees the new
//! destination on the bridge the packet came from and *bridges* it ("bridged DNAT"), and a
//! bridge never sends a frame back out of the port it arrived by. So the router's VXLAN ports
//! are in hairpin mode, and this chain keeps that safe:
//!
//! - only frames of DNAT'ed flows (both directions) may go back out of the VXLAN port they
//!   came in by: the router marks them ([`HAIRPIN_MARK`], set after its DNAT in prerouting);
//!   every other frame that would be reflected — floods (ARP, neighbour discovery, unknown
//!   unicast) — is dropped, so the hosting clusters never see their own frames again;
//! - those frames leave with the gateway's MAC as source (the sender's MAC, which br_netfilter
//!   keeps, would teach the hosting clusters' overlays that the sender lives behind the
//!   router, cutting it off from its neighbours).
//!
//! A port of its own (bare metal, cluster agents) is not in hairpin mode: such a workload
//! cannot reach its own ExternalIP (the reachability explainer says so).

use super::line;
use crate::names::BRIDGE_TABLE;

/// The bit a router sets on every packet of a flow it DNAT'ed, read by its bridge table's
/// `hairpin` chain. Port marks (`portmark`) are allocated below it.
pub const HAIRPIN_MARK: u32 = 0x8000_0000;

/// The set of a router's VXLAN ports (one per subnet bridge, so a frame from one to one is
/// a frame sent back out of the port it came by).
const LINKS: &str = "hairpin_links";
/// VXLAN port → the MAC of its subnet bridge (the gateway).
const GATEWAY_MAC: &str = "hairpin_gateway_mac";

fn declarations(t: &str) -> String {
    let mut s = String::new();
    line(&mut s, format!("add table {t}"));
    line(&mut s, format!("add set {t} {LINKS} {{ type ifname; }}"));
    line(
        &mut s,
        format!("add map {t} {GATEWAY_MAC} {{ type ifname : ether_addr; }}"),
    );
    s
}

/// The router namespace's `hairpin` chain in its bridge table (idempotent; the set of links
/// is left alone).
pub fn router_hairpin() -> String {
    let t = format!("bridge {BRIDGE_TABLE}");
    let mut s = declarations(&t);
    line(
        &mut s,
        format!(
            "add chain {t} hairpin {{ type filter hook forward priority 100; policy accept; }}"
        ),
    );
    line(&mut s, format!("flush chain {t} hairpin"));
    let back = format!("add rule {t} hairpin iifname @{LINKS} oifname @{LINKS}");
    line(
        &mut s,
        format!("{back} meta mark and {HAIRPIN_MARK:#x} == 0 drop"),
    );
    line(
        &mut s,
        format!("{back} ether saddr set oifname map @{GATEWAY_MAC}"),
    );
    s
}

/// Registers a subnet's VXLAN port as a hairpin link, with its gateway's MAC. Applied before
/// the port is put in hairpin mode.
pub fn hairpin_link(vxlan_dev: &str, gateway_mac: &str) -> String {
    let t = format!("bridge {BRIDGE_TABLE}");
    let mut s = declarations(&t);
    line(
        &mut s,
        format!("add element {t} {LINKS} {{ \"{vxlan_dev}\" }}"),
    );
    line(
        &mut s,
        format!("add element {t} {GATEWAY_MAC} {{ \"{vxlan_dev}\" : {gateway_mac} }}"),
    );
    s
}

/// Forgets a subnet's VXLAN port (its subnet is being deleted).
pub fn delete_hairpin_link(vxlan_dev: &str) -> String {
    let t = format!("bridge {BRIDGE_TABLE}");
    let mut s = String::new();
    line(
        &mut s,
        format!("delete element {t} {LINKS} {{ \"{vxlan_dev}\" }}"),
    );
    line(
        &mut s,
        format!("delete element {t} {GATEWAY_MAC} {{ \"{vxlan_dev}\" }}"),
    );
    s
}

/// The router's mark on DNAT'ed flows, in its VN table: after the DNAT (`dstnat`), for both
/// directions of the flow (conntrack keeps the status).
pub(super) fn mark_dnat_flows(s: &mut String, t: &str) {
    line(
        s,
        format!(
            "add chain {t} hairpinmark {{ type filter hook prerouting priority dstnat + 1; policy accept; }}"
        ),
    );
    line(s, format!("flush chain {t} hairpinmark"));
    line(
        s,
        format!(
            "add rule {t} hairpinmark ct status dnat meta mark set meta mark or {HAIRPIN_MARK:#x}"
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_marked_frames_go_back_out_of_a_link_and_with_the_gateway_mac() {
        let s = router_hairpin();
        let drop = s
            .find("hairpin iifname @hairpin_links oifname @hairpin_links meta mark and 0x80000000 == 0 drop")
            .expect("unmarked reflections are dropped");
        let rewrite = s
            .find("oifname @hairpin_links ether saddr set oifname map @hairpin_gateway_mac")
            .expect("source MAC rewritten");
        assert!(drop < rewrite);
        assert!(s.contains("type filter hook forward priority 100;"));
    }

    #[test]
    fn links_are_registered_with_their_gateway_mac_and_forgotten() {
        let s = hairpin_link("vx123", "02:aa:bb:cc:dd:ee");
        assert!(s.contains("add element bridge osac hairpin_links { \"vx123\" }"));
        assert!(s.contains("hairpin_gateway_mac { \"vx123\" : 02:aa:bb:cc:dd:ee }"));
        let d = delete_hairpin_link("vx123");
        assert!(d.contains("delete element bridge osac hairpin_links { \"vx123\" }"));
        assert!(d.contains("delete element bridge osac hairpin_gateway_mac { \"vx123\" }"));
    }

    #[test]
    fn dnat_flows_are_marked_after_the_dnat() {
        let mut s = String::new();
        mark_dnat_flows(&mut s, "inet t");
        assert!(s.contains("prerouting priority dstnat + 1;"));
        assert!(s.contains("ct status dnat meta mark set meta mark or 0x80000000"));
    }
}
