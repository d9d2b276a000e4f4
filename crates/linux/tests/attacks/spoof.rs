//! Spoofing on the attacker's own subnet, from a VM (anti-spoofing in the hosting cluster) and
//! from a bare-metal server (anti-spoofing in the router), at a VM and a bare-metal neighbour
//! without security groups (so only anti-spoofing stands in the way): ARP for the gateway and
//! for a neighbour, neighbour advertisements for the gateway's link-local and a neighbour's
//! address, rogue router advertisements and DHCPv4/DHCPv6 server messages — also behind IPv6
//! extension headers — and forged source IPv4/IPv6/MAC addresses.
//!
//! Stopped by: the per-port `bridge osac` chains (`render::anti_spoof`). Mutation-checked:
//! with the DHCPv6 server drop written as before (`ip6 nexthdr udp udp sport 547`), the
//! replies behind Hop-by-Hop and Destination Options headers reached both neighbours; with
//! the RA drop matching `ip6 nexthdr icmpv6`, so did the RAs behind extension headers.

use std::net::{Ipv4Addr, Ipv6Addr};

use osac_linux::kernel;
use osac_linux::probe::forge::{ExtHeader, Ipv4Frame, Ipv6Frame};
use osac_linux::probe::raw::{ARP_REPLY, BROADCAST_MAC, arp_frame, gratuitous_arp};
use osac_linux::probe::spoof::{
    DHCPOFFER, DHCPV6_REPLY, Dhcp4Reply, NeighbourAdvert, RouterAdvert, dhcpv6_server_frame,
};

use super::{Machine, World, assert_controls_only, marker};

fn with_marker(mut frame: Vec<u8>, attack: &str) -> Vec<u8> {
    frame.extend_from_slice(&marker(attack));
    frame
}

/// The extension-header variants every IPv6 control-plane forgery is sent with.
fn ext_variants() -> Vec<(&'static str, Vec<ExtHeader>)> {
    vec![
        ("plain", vec![]),
        ("hbh", vec![ExtHeader::hop_by_hop()]),
        ("dstopt", vec![ExtHeader::dest_opts()]),
        ("frag", vec![ExtHeader::atomic_fragment(7)]),
        (
            "chain",
            vec![ExtHeader::hop_by_hop(), ExtHeader::dest_opts()],
        ),
    ]
}

/// Every forged frame `a` sends at victim `v` (whose neighbour on the subnet is `other`),
/// as (attack name, frame).
fn forgeries(
    tag: &str,
    a: &Machine,
    v: &Machine,
    other: &Machine,
    gw_ll: Ipv6Addr,
) -> Vec<(String, Vec<u8>)> {
    let gw4 = Ipv4Addr::new(10, 0, 1, 1);
    let name = |n: &str| format!("{tag}-{n}");
    let mut out = vec![
        (
            name("arp-gateway"),
            with_marker(
                arp_frame(ARP_REPLY, a.mac, gw4, v.mac, v.v4),
                &name("arp-gateway"),
            ),
        ),
        (
            name("arp-neighbour"),
            with_marker(
                arp_frame(ARP_REPLY, a.mac, other.v4, v.mac, v.v4),
                &name("arp-neighbour"),
            ),
        ),
        (
            name("garp-gateway"),
            with_marker(gratuitous_arp(a.mac, gw4), &name("garp-gateway")),
        ),
        (
            name("dhcp4-offer"),
            Dhcp4Reply {
                marker: marker(&name("dhcp4-offer")),
                ..Dhcp4Reply::new(DHCPOFFER, 0x1234, v.mac, Ipv4Addr::new(10, 0, 1, 200), a.v4)
            }
            .frame(&Ipv4Frame::new(
                a.mac,
                BROADCAST_MAC,
                a.v4,
                Ipv4Addr::BROADCAST,
            )),
        ),
        (
            name("forged-ipv4"),
            Ipv4Frame::new(a.mac, v.mac, Ipv4Addr::new(10, 0, 1, 99), v.v4).udp(
                5000,
                5001,
                &marker(&name("forged-ipv4")),
            ),
        ),
        (
            name("forged-mac"),
            Ipv4Frame::new([2, 0x99, 0, 0, 0, 0x99], v.mac, a.v4, v.v4).udp(
                5000,
                5001,
                &marker(&name("forged-mac")),
            ),
        ),
        (
            name("forged-ipv6"),
            Ipv6Frame::new(a.mac, v.mac, "fd10:0:0:1::99".parse().unwrap(), v.v6).udp(
                5000,
                5001,
                &marker(&name("forged-ipv6")),
            ),
        ),
        (
            name("forged-gateway-link-local"),
            Ipv6Frame::new(a.mac, v.mac, gw_ll, v.link_local).udp(
                5000,
                5001,
                &marker(&name("forged-gateway-link-local")),
            ),
        ),
    ];
    for (target, t) in [("gateway", gw_ll), ("neighbour", other.v6)] {
        let n = name(&format!("na-{target}"));
        out.push((
            n.clone(),
            NeighbourAdvert {
                marker: marker(&n),
                ..NeighbourAdvert::unsolicited(a.mac, a.link_local, t)
            }
            .encode(),
        ));
    }
    for (variant, ext) in ext_variants() {
        let n = name(&format!("ra-{variant}"));
        out.push((
            n.clone(),
            RouterAdvert {
                ext: ext.clone(),
                marker: marker(&n),
                ..RouterAdvert::new(a.mac, a.link_local, "fd66::".parse().unwrap(), 64)
            }
            .encode(),
        ));
        let n = name(&format!("dhcp6-reply-{variant}"));
        let mut ip = Ipv6Frame::new(a.mac, v.mac, a.link_local, v.link_local);
        ip.ext = ext;
        out.push((
            n.clone(),
            dhcpv6_server_frame(&ip, DHCPV6_REPLY, 0x42, &marker(&n)),
        ));
    }
    out
}

/// Frames the same attacker may send (controls: they must arrive).
fn legitimate(tag: &str, a: &Machine, v: &Machine) -> Vec<(String, Vec<u8>)> {
    let name = |n: &str| format!("{tag}-{n}");
    vec![
        (
            name("ok-arp"),
            with_marker(
                arp_frame(ARP_REPLY, a.mac, a.v4, v.mac, v.v4),
                &name("ok-arp"),
            ),
        ),
        (
            name("ok-udp4"),
            Ipv4Frame::new(a.mac, v.mac, a.v4, v.v4).udp(5000, 5001, &marker(&name("ok-udp4"))),
        ),
        (
            name("ok-udp6-hbh"),
            Ipv6Frame::new(a.mac, v.mac, a.v6, v.v6)
                .with_ext(ExtHeader::hop_by_hop())
                .udp(5000, 5001, &marker(&name("ok-udp6-hbh"))),
        ),
        (
            name("ok-na-own"),
            NeighbourAdvert {
                marker: marker(&name("ok-na-own")),
                ..NeighbourAdvert::unsolicited(a.mac, a.link_local, a.v6)
            }
            .encode(),
        ),
    ]
}

#[tokio::test]
async fn forged_control_plane_and_source_addresses_never_reach_a_neighbour() {
    if !super::common::ready().await {
        return;
    }
    let w = World::new(17).await;
    let (evil, evil_bm) = w
        .vm_and_bm("evil", "evilbm", "a1", &w.open("a1").await)
        .await;
    let (plain, plain_bm) = w
        .vm_and_bm("plain", "plainbm", "a1", &w.open("a1").await)
        .await;
    let gw_ll = kernel::gateway_link_local(&w.id("va"), &w.id("a1")).unwrap();
    let caps = [
        ("the VM neighbour", plain.capture()),
        ("the bare-metal neighbour", plain_bm.capture()),
    ];
    let mut attacks = Vec::new();
    let mut controls = Vec::new();
    for (who, a) in [("vm", &evil), ("bm", &evil_bm)] {
        for (vname, v, other) in [("vm", &plain, &plain_bm), ("bm", &plain_bm, &plain)] {
            let tag = format!("{who}-at-{vname}");
            for (n, f) in forgeries(&tag, a, v, other, gw_ll) {
                a.send(f);
                attacks.push(n);
            }
            for (n, f) in legitimate(&tag, a, v) {
                a.send(f);
                controls.push(n);
            }
        }
    }
    // Unicast controls reach their own victim; broadcast/multicast ones (the NA) both.
    assert_controls_only(
        &caps,
        &controls,
        &attacks,
        "legitimate frames",
        "forged frames reached a neighbour",
    );
    w.env.teardown().await;
}
