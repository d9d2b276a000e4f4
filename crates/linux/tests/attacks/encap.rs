//! Encapsulation: a workload sends VXLAN (4789, and Linux's old 8472) and Geneve (6081)
//! datagrams carrying a broadcast frame into another tenant's subnet and into another subnet
//! of its own tenant, toward every address it can find — the link-local neighbours answering
//! `ff02::1`, the gateway (IPv4, IPv6, link-local), the hosting cluster's overlay bridge,
//! broadcast and multicast, its router's transit and underlay addresses, the hosting
//! cluster's underlay address — with every VNI in use. No victim may see the inner frame and
//! no infrastructure may answer.
//!
//! Stopped by: hosting-cluster and parking namespaces have no address on tenant-facing
//! devices (IPv6 off by default, `kernel::INFRA_SYSCTLS`) and drop their own input except
//! from the underlay (`render::l2_guard_table`); routers accept VXLAN only from the underlay
//! and nothing but the gateway's services from subnets (`hostin`). Mutation-checked: with
//! the guard's input policy set to accept and IPv6 left on for overlay bridges, VM attackers
//! reached tenant B's VM through the overlay bridge's link-local address (the reported
//! attack); with the router's `hostin` final `drop` and `iifname "ul" drop` removed, the
//! bare-metal attacker reached the other subnet of its tenant via the gateway's IPv6
//! address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use osac_linux::probe::forge::{self, Ipv4Frame};
use osac_linux::probe::raw::BROADCAST_MAC;
use osac_linux::probe::{self, send_udp_from};
use osac_linux::{kernel, names};

use super::{Machine, World, leaked, marker};

/// The inner frame every attack tries to deliver: a broadcast datagram from a made-up host.
pub(super) fn inner(attack: &str) -> Vec<u8> {
    Ipv4Frame::new(
        [0x02, 0x66, 0x66, 0x66, 0x66, 0x66],
        BROADCAST_MAC,
        Ipv4Addr::new(10, 0, 1, 66),
        Ipv4Addr::BROADCAST,
    )
    .udp(1234, 9, &marker(attack))
}

pub(super) fn tunnel(port: u16, vni: i64, inner: &[u8]) -> Vec<u8> {
    let vni = u32::try_from(vni).unwrap();
    if port == forge::GENEVE_PORT {
        forge::geneve_payload(vni, inner)
    } else {
        forge::vxlan_payload(vni, inner)
    }
}

/// Link-local addresses answering `ping ff02::1` on the attacker's link.
async fn discovered_neighbours(m: &Machine) -> Vec<Ipv6Addr> {
    let out = tokio::process::Command::new("ip")
        .args(["netns", "exec", &m.ns, "ping", "-6", "-c2", "-W1"])
        .arg(format!("ff02::1%{}", m.ifname))
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut found: Vec<Ipv6Addr> = text
        .lines()
        .filter_map(|l| l.split("from ").nth(1))
        .filter_map(|r| r.split('%').next())
        .filter_map(|a| a.parse().ok())
        .collect();
    found.sort();
    found.dedup();
    found
}

#[tokio::test]
async fn encapsulated_frames_from_a_workload_never_reach_another_segment() {
    if !super::common::ready().await {
        return;
    }
    let w = World::new(16).await;
    let (evil, evil_bm) = w
        .vm_and_bm("evil", "evilbm", "a1", &w.open("a1").await)
        .await;
    let (vb, vb_bm) = w.vm_and_bm("vb", "vbbm", "b1", &w.open("b1").await).await;
    let (va2, va2_bm) = w.vm_and_bm("va2", "va2bm", "a2", &w.open("a2").await).await;
    let victims = [
        ("tenant B's VM", &vb),
        ("tenant B's bare metal", &vb_bm),
        ("the VM on A's other subnet", &va2),
        ("the bare metal on A's other subnet", &va2_bm),
    ];
    let caps: Vec<_> = victims.iter().map(|(n, m)| (*n, m.capture())).collect();

    // Positive control: the same datagrams from the underlay (where VTEPs live) do arrive.
    let underlay = w.env.settings.underlay_ipv6_cidr;
    let hosting_ns = names::hosting_ns(&w.hc);
    let ul = |ns: &str| kernel::underlay_addr(underlay, ns);
    let router_a = names::router_ns(&w.id("va"));
    let router_b = names::router_ns(&w.id("vb"));
    for (from, to, vni, attack) in [
        (&router_a, &hosting_ns, "a2", "control-a2-vm"),
        (&router_b, &hosting_ns, "b1", "control-b1-vm"),
        (&hosting_ns, &router_a, "a2", "control-a2-bm"),
        (&hosting_ns, &router_b, "b1", "control-b1-bm"),
    ] {
        send_udp_from(
            from,
            SocketAddr::new(IpAddr::V6(ul(from)), 0),
            SocketAddr::new(IpAddr::V6(ul(to)), forge::VXLAN_PORT),
            &tunnel(forge::VXLAN_PORT, w.segment(vni), &inner(attack)),
        )
        .unwrap();
    }
    let controls: Vec<String> = [
        "control-a2-vm",
        "control-b1-vm",
        "control-a2-bm",
        "control-b1-bm",
    ]
    .map(String::from)
    .into();
    let seen = leaked(
        &caps.iter().map(|(n, c)| (*n, c)).collect::<Vec<_>>(),
        &controls,
    );
    assert_eq!(seen.len(), 4, "every control reaches its victim: {seen:?}");
    for (_, c) in &caps {
        c.clear();
    }

    let vn_a = w.env.fabric.transit(&w.id("va")).await.unwrap();
    let vn_b = w.env.fabric.transit(&w.id("vb")).await.unwrap();
    let mut attacks = Vec::new();
    let mut answers = Vec::new();
    for (who, m) in [("vm", &evil), ("bm", &evil_bm)] {
        let mut targets: Vec<SocketAddr> = Vec::new();
        let mut scoped: Vec<Ipv6Addr> = discovered_neighbours(m).await;
        scoped.push("ff02::1".parse().unwrap());
        scoped.extend(kernel::gateway_link_local(&w.id("va"), &w.id("a1")));
        scoped.extend(kernel::eui64_link_local(&kernel::bridge_mac(
            &hosting_ns,
            &names::subnet_bridge(&w.id("a1")),
        )));
        let global: Vec<IpAddr> = vec![
            "10.0.1.1".parse().unwrap(),
            "10.0.1.255".parse().unwrap(),
            IpAddr::V4(Ipv4Addr::BROADCAST),
            "fd10:0:0:1::1".parse().unwrap(),
            IpAddr::V4(vn_a.v4),
            IpAddr::V6(vn_a.v6),
            IpAddr::V4(vn_b.v4),
            IpAddr::V6(vn_b.v6),
            IpAddr::V6(ul(&router_a)),
            IpAddr::V6(ul(&router_b)),
            IpAddr::V6(ul(&hosting_ns)),
        ];
        let capture = m.capture();
        for port in [
            forge::VXLAN_PORT,
            forge::VXLAN_LINUX_PORT,
            forge::GENEVE_PORT,
        ] {
            targets.clear();
            targets.extend(scoped.iter().map(|a| m.scoped(*a, port)));
            targets.extend(global.iter().map(|a| SocketAddr::new(*a, port)));
            for vni in ["a2", "b1"] {
                let attack = format!("{who}-{port}-{vni}");
                let payload = tunnel(port, w.segment(vni), &inner(&attack));
                for to in &targets {
                    // Unreachable destinations may refuse the send: that is the point.
                    let _ = probe::udp_send(&m.ns, *to, &payload);
                }
                attacks.push(attack);
            }
        }
        std::thread::sleep(super::SETTLE);
        // ICMP errors quoting the datagram are answers too; only workloads may send them.
        let workloads: Vec<IpAddr> = [&evil, &evil_bm]
            .iter()
            .flat_map(|x| [IpAddr::V4(x.v4), IpAddr::V6(x.v6), IpAddr::V6(x.link_local)])
            .collect();
        for a in &attacks {
            for f in capture.frames_with(&marker(a)) {
                let from = osac_linux::probe::dissect::dissect(&f).map(|d| d.src_ip);
                if !from.is_some_and(|ip| workloads.contains(&ip)) {
                    answers.push(format!("{a}: answered by {from:?}"));
                }
            }
        }
        assert!(
            targets.len() >= global.len() + 3,
            "the attacker found its link: {scoped:?}"
        );
    }
    let seen = leaked(
        &caps.iter().map(|(n, c)| (*n, c)).collect::<Vec<_>>(),
        &attacks,
    );
    assert!(
        seen.is_empty(),
        "encapsulated frames crossed segments: {seen:?}"
    );
    assert!(answers.is_empty(), "infrastructure answered: {answers:?}");
    w.env.teardown().await;
}
