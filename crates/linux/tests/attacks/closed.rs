//! A port without security groups is closed: it receives nothing and sends nothing but its
//! subnet's control plane (DHCP with its gateway, ARP, on-link neighbour discovery). A hostile
//! tenant-user empties its VM's groups hoping to open it (the old rule: "ports without groups
//! are unfiltered"); neighbours and the internet then try it on every kind of address, and it
//! tries them. Controls: the same probes reach and leave a wide-open neighbour, and the closed
//! ports still resolve their gateway (ARP, ND) and take their DHCP lease.
//!
//! Stopped by: `render::port_sg` with no groups still steering the port (`egmac`, `inport`,
//! `in4`/`in6` elements) to chains that only drop. Mutation-checked: with the old rendering
//! (no groups = no map elements), every probe below reached the closed ports and every one
//! they sent arrived at the neighbour and in `osac-ext`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use osac_linux::dhcp::{ClientConfig, DhcpClient, Status};
use osac_linux::names;
use osac_linux::probe::{self, Capture};

use super::{Machine, World, leaked, marker, tcp_answered};

/// Whether `m` resolves `ip` (ARP or ND) after sending it a datagram that may itself be
/// dropped (resolution comes first).
fn resolves(m: &Machine, ip: IpAddr) -> bool {
    for _ in 0..10 {
        let _ = probe::udp_send(&m.ns, SocketAddr::new(ip, 9), b"resolve");
        std::thread::sleep(Duration::from_millis(300));
        if probe::neighbour_mac(&m.ns, ip).is_some() {
            return true;
        }
    }
    false
}

#[tokio::test]
async fn a_port_without_groups_passes_nothing_but_the_control_plane() {
    if !super::common::ready().await {
        return;
    }
    let w = World::new(29).await;
    let open = w.open("a1").await;
    let (closed, closed_bm) = w.vm_and_bm("closed", "closedbm", "a1", &[]).await;
    let (peer, peer_bm) = w.vm_and_bm("peer", "peerbm", "a1", &open).await;
    let ext_gw = IpAddr::V4(osac_backends::net::ipv4_gateway(
        w.env.settings.transit_ipv4_cidr,
    ));
    let mut problems = Vec::new();

    // Ingress: the neighbours try the closed ports on every address; the wide-open
    // neighbour answers the same probes (control).
    let caps = [
        ("the closed VM", closed.capture()),
        ("the closed bare metal", closed_bm.capture()),
    ];
    let control = peer_bm.capture();
    let mut attacks = Vec::new();
    for (who, a) in [("vm", &peer), ("bm", &peer_bm)] {
        for (vname, v) in [("vm", &closed), ("bm", &closed_bm), ("open", &peer_bm)] {
            if a.ns == v.ns {
                continue;
            }
            let targets = [
                ("v4", SocketAddr::new(IpAddr::V4(v.v4), 8081)),
                ("v6", SocketAddr::new(IpAddr::V6(v.v6), 8081)),
                ("link-local", a.scoped(v.link_local, 8081)),
            ];
            for (name, to) in targets {
                let closed_target = vname != "open";
                let mut tcp = to;
                tcp.set_port(22);
                let answered = tcp_answered(&a.ns, tcp);
                if answered && closed_target {
                    problems.push(format!("{who}→{vname}: tcp/22 on {tcp} answered"));
                }
                if !answered && !closed_target {
                    problems.push(format!(
                        "control: {who}→{vname}: tcp/22 on {tcp} unanswered"
                    ));
                }
                let attack = format!("{who}-to-{vname}-udp-{name}");
                probe::udp_send(&a.ns, to, &marker(&attack)).unwrap();
                attacks.push(attack);
            }
        }
        let attack = format!("{who}-broadcast");
        probe::udp_send(
            &a.ns,
            SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 255)), 8081),
            &marker(&attack),
        )
        .unwrap();
        attacks.push(attack);
    }
    let refs: Vec<_> = caps.iter().map(|(n, c)| (*n, c)).collect();
    problems.extend(leaked(&refs, &attacks));
    if !control.contains(&marker("vm-to-open-udp-v4")) || !control.contains(&marker("vm-broadcast"))
    {
        problems.push("control: the wide-open neighbour got nothing".into());
    }

    // Egress: the closed ports send to the neighbour on every address and to the internet.
    let neighbour = peer.capture();
    let internet = Capture::start(names::EXT_NS, names::EXT_BRIDGE).unwrap();
    let mut sent = Vec::new();
    for (who, a) in [("vm", &closed), ("bm", &closed_bm), ("open", &peer_bm)] {
        let targets: Vec<(&str, SocketAddr)> = vec![
            ("v4", SocketAddr::new(IpAddr::V4(peer.v4), 8081)),
            ("v6", SocketAddr::new(IpAddr::V6(peer.v6), 8081)),
            ("link-local", a.scoped(peer.link_local, 8081)),
            (
                "broadcast",
                SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 255)), 8081),
            ),
            (
                "all-nodes",
                a.scoped("ff02::1".parse::<Ipv6Addr>().unwrap(), 8081),
            ),
            ("internet", SocketAddr::new(ext_gw, 8081)),
        ];
        for (name, to) in targets {
            let attack = format!("{who}-egress-{name}");
            let _ = probe::udp_send(&a.ns, to, &marker(&attack));
            if who != "open" {
                sent.push(attack);
            }
        }
    }
    problems.extend(leaked(
        &[("the neighbour", &neighbour), ("osac-ext", &internet)],
        &sent,
    ));
    for control in ["open-egress-v4", "open-egress-internet"] {
        if !neighbour.contains(&marker(control)) && !internet.contains(&marker(control)) {
            problems.push(format!("control: {control} arrived nowhere"));
        }
    }

    // The control plane still passes: ARP and ND resolve the gateway, DHCP hands out the
    // reservation.
    let subnet = w.env.fabric.subnet(&w.id("a1")).await.unwrap();
    let (gw4, gw6) = (subnet.gw4().unwrap(), subnet.gw6().unwrap());
    for (who, m) in [("vm", &closed), ("bm", &closed_bm)] {
        if !resolves(m, IpAddr::V4(gw4)) {
            problems.push(format!("{who}: ARP for the gateway went unanswered"));
        }
        if !resolves(m, IpAddr::V6(gw6)) {
            problems.push(format!("{who}: ND for the gateway went unanswered"));
        }
        let client = DhcpClient::start(ClientConfig {
            netns: m.ns.clone(),
            ifname: m.ifname.clone(),
            mac: m.mac,
            hostname: None,
            timing: Default::default(),
        })
        .unwrap();
        let mut bound = None;
        for _ in 0..150 {
            if let Status::Bound(a) = client.status() {
                bound = Some(a.address);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        client.stop(false);
        if bound != Some(m.v4) {
            problems.push(format!("{who}: DHCP gave {bound:?}, not {}", m.v4));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    w.env.teardown().await;
}
