//! Link-scoped traffic never leaves its link, and the router answers ARP only for the gateway
//! of the subnet asking.
//!
//! Neighbour discovery: wide-open VMs and bare-metal servers send NS, NA and RS carrying a
//! payload (hop limit 255, as on a link, and 64), and an MLD report (untracked, like ND), to
//! the external gateway beyond the uplink and to a machine of another subnet, through their
//! router's MAC; captures in `osac-ext` and on that machine must see none of it. UDP to
//! 169.254.169.254 (link-local IPv4, the metadata address other clouds use) must not leave
//! either. Controls: an ICMPv6 echo request and a UDP datagram sent the same ways arrive.
//! Stopped by: the router's `guard` chain dropping routed ND (`icmpv6 type {RS, RA, NS, NA,
//! redirect} ip6 hoplimit != 255`), anything untracked leaving by the uplink, and link-local
//! sources and destinations there. Mutation-checked, one rule at a time: without the ND rule,
//! NS/NA/RS (hop limit 255 and 64) reached the machine of the other subnet (the untracked
//! rule still kept them from the uplink); without the untracked rule, the MLD report reached
//! `osac-ext` with the VM's internal ULA source (the ND rule still stopped ND); without both,
//! NS/NA/RS reached `osac-ext` too (the reported leak); without the link-local rules the
//! datagram to 169.254.169.254 did.
//!
//! ARP: the attacker asks (who-has) for its router's transit address and for another subnet's
//! gateway: no reply; its own gateway does reply (control). Stopped by `arp_ignore=1` (and
//! `arp_announce=2`) in the router namespace (`router::ROUTER_SYSCTLS`). Mutation-checked:
//! with `arp_ignore=0` both the transit address and 10.0.2.1 were answered with the router's
//! bridge MAC.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use osac_linux::probe::raw::{ARP_REPLY, ARP_REQUEST, BROADCAST_MAC, arp_frame};
use osac_linux::probe::{self, Capture, forge};
use osac_linux::{kernel, names};

use super::{Kind, Machine, World, leaked, marker};

const ICMPV6_ECHO_REQUEST: u8 = 128;
const MLD_REPORT: u8 = 131;
const ND_ROUTER_SOLICIT: u8 = 133;
const ND_NEIGHBOUR_SOLICIT: u8 = 135;
const ND_NEIGHBOUR_ADVERT: u8 = 136;

/// The MAC of the gateway of `subnet` (its bridge in the router of `vn`).
fn gateway_mac(w: &World, vn: &str, subnet: &str) -> [u8; 6] {
    let mac = kernel::bridge_mac(
        &names::router_ns(&w.id(vn)),
        &names::subnet_bridge(&w.id(subnet)),
    );
    probe::capture::parse_mac(&mac).unwrap()
}

/// Whether `cap` holds an ARP reply announcing `ip`.
fn arp_reply_for(cap: &Capture, ip: Ipv4Addr) -> bool {
    cap.frames().iter().any(|f| {
        f.len() >= 42
            && f[12..14] == [0x08, 0x06]
            && f[20..22] == ARP_REPLY.to_be_bytes()
            && f[28..32] == ip.octets()
    })
}

/// One ND (or MLD, echo) message from `m` to `to` through the gateway, carrying `mark`.
fn routed_icmpv6(
    m: &Machine,
    gw_mac: [u8; 6],
    to: Ipv6Addr,
    ty: u8,
    hop: u8,
    mark: &[u8],
) -> Vec<u8> {
    let ip = forge::Ipv6Frame::new(m.mac, gw_mac, m.v6, to).with_hop_limit(hop);
    let mut body = vec![0u8; 4];
    match ty {
        // Target (NS: the destination; NA: its own address, which anti-spoofing allows).
        ND_NEIGHBOUR_SOLICIT => body.extend_from_slice(&to.octets()),
        ND_NEIGHBOUR_ADVERT => body.extend_from_slice(&m.v6.octets()),
        MLD_REPORT => body.extend_from_slice(&to.octets()),
        _ => {}
    }
    body.extend_from_slice(mark);
    ip.icmpv6(ty, 0, &body)
}

#[tokio::test]
async fn neighbour_discovery_and_link_local_traffic_never_leave_and_arp_answers_only_the_own_gateway()
 {
    if !super::common::ready().await {
        return;
    }
    let w = World::new(30).await;
    let open = w.open("a1").await;
    let (evil, evil_bm) = w.vm_and_bm("evil", "evilbm", "a1", &open).await;
    let far = w.machine("far", Kind::BareMetal, "a2", &open).await;
    let gw_mac = gateway_mac(&w, "va", "a1");
    let ext4 = osac_backends::net::ipv4_gateway(w.env.settings.transit_ipv4_cidr);
    let ext6 = osac_backends::net::ipv6_gateway(w.env.settings.transit_ipv6_cidr);
    let internet = Capture::start(names::EXT_NS, names::EXT_BRIDGE).unwrap();
    let other_subnet = far.capture();
    let mut problems = Vec::new();
    let mut attacks = Vec::new();
    let mut controls = Vec::new();
    for (who, m) in [("vm", &evil), ("bm", &evil_bm)] {
        // Sends `m` a routed ICMPv6 message of type `ty` to `to`, marked with `name`.
        let send = |name: String, to: Ipv6Addr, ty: u8, hop: u8| {
            m.send(routed_icmpv6(m, gw_mac, to, ty, hop, &marker(&name)));
            name
        };
        for (name, ty) in [
            ("ns", ND_NEIGHBOUR_SOLICIT),
            ("na", ND_NEIGHBOUR_ADVERT),
            ("rs", ND_ROUTER_SOLICIT),
        ] {
            for hop in [255u8, 64] {
                attacks.push(send(format!("{who}-{name}-hop{hop}"), ext6, ty, hop));
                let to_a2 = format!("{who}-{name}-hop{hop}-to-a2");
                attacks.push(send(to_a2, far.v6, ty, hop));
            }
        }
        attacks.push(send(format!("{who}-mld-report"), ext6, MLD_REPORT, 64));
        let attack = format!("{who}-udp-169.254.169.254");
        let _ = probe::udp_send(
            &m.ns,
            SocketAddr::new(IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)), 80),
            &marker(&attack),
        );
        attacks.push(attack);
        controls.push(send(format!("{who}-echo"), ext6, ICMPV6_ECHO_REQUEST, 64));
        let to_a2 = format!("{who}-echo-to-a2");
        controls.push(send(to_a2, far.v6, ICMPV6_ECHO_REQUEST, 64));
        let control = format!("{who}-udp");
        probe::udp_send(
            &m.ns,
            SocketAddr::new(IpAddr::V4(ext4), 8081),
            &marker(&control),
        )
        .unwrap();
        controls.push(control);
    }
    problems.extend(leaked(
        &[("osac-ext", &internet), ("the other subnet", &other_subnet)],
        &attacks,
    ));
    for c in &controls {
        let cap = if c.ends_with("-to-a2") {
            &other_subnet
        } else {
            &internet
        };
        if !cap.contains(&marker(c)) {
            problems.push(format!("control: {c} did not arrive"));
        }
    }

    // ARP: the transit address and another subnet's gateway are not this subnet's to learn.
    let transit = w.env.fabric.transit(&w.id("va")).await.unwrap().v4;
    let other_gateway = Ipv4Addr::new(10, 0, 2, 1);
    let own_gateway = Ipv4Addr::new(10, 0, 1, 1);
    for (who, m) in [("vm", &evil), ("bm", &evil_bm)] {
        let cap = m.capture();
        for target in [transit, other_gateway, own_gateway] {
            m.send(arp_frame(ARP_REQUEST, m.mac, m.v4, BROADCAST_MAC, target));
        }
        std::thread::sleep(super::SETTLE);
        for target in [transit, other_gateway] {
            if arp_reply_for(&cap, target) {
                problems.push(format!("{who}: the router answered ARP for {target}"));
            }
        }
        if !arp_reply_for(&cap, own_gateway) {
            problems.push(format!("control: {who} got no ARP reply for its gateway"));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    w.env.teardown().await;
}
