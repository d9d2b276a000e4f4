//! What tenants share on a hosting cluster and on the underlay: flooding and connection
//! tracking.
//!
//! Broadcast: tenant A's VM floods 200 broadcasts; they cross the underlay to the VTEPs of its
//! segment (its router sees them — control) and must not reach tenant B's router at all.
//! Stopped by: one VXLAN multicast group per segment (`kernel::vxlan_group`) and MLD
//! snooping on the underlay bridge (the bridge is the querier). Mutation-checked: with every
//! segment flooding to the one group `ff05::4789`, all 200 broadcasts arrived on tenant B's
//! router's underlay interface (the reported leak).
//!
//! Conntrack: a VM opens `PORT_CONNECTION_LIMIT` + 1,000 UDP flows (one source port each) to a
//! listener beyond the uplink; at most the limit arrive, and a neighbour's new flow still
//! passes (the limit is per port). Stopped by: each port's egress chain counting its
//! connections (`ct count over` in the `ctport` set, keyed by the port's MAC). Mutation-checked:
//! without that rule all flows arrived.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use osac_linux::fabric_manager::render::PORT_CONNECTION_LIMIT;
use osac_linux::names;
use osac_linux::probe::{self, Capture, Listener};

use super::{Kind, World, marker};

#[tokio::test]
async fn one_tenants_floods_and_connections_stay_its_own() {
    if !super::common::ready().await {
        return;
    }
    let w = World::new(31).await;
    let open = w.open("a1").await;
    let flooder = w.machine("flooder", Kind::Vm, "a1", &open).await;
    let _b = w.machine("bvm", Kind::Vm, "b1", &w.open("b1").await).await;
    let mut problems = Vec::new();

    // Broadcast: seen by tenant A's router (control), never by tenant B's.
    let router_a = Capture::start(&names::router_ns(&w.id("va")), names::UNDERLAY_IF).unwrap();
    let router_b = Capture::start(&names::router_ns(&w.id("vb")), names::UNDERLAY_IF).unwrap();
    let flood = marker("broadcast-flood");
    for _ in 0..200 {
        probe::udp_send(
            &flooder.ns,
            SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 255)), 8081),
            &flood,
        )
        .unwrap();
    }
    std::thread::sleep(super::SETTLE);
    let seen_a = router_a.frames_with(&flood).len();
    let seen_b = router_b.frames_with(&flood).len();
    if seen_a == 0 {
        problems.push("control: tenant A's router saw none of its broadcasts".to_string());
    }
    if seen_b > 0 {
        problems.push(format!(
            "tenant B's router received {seen_b} of tenant A's 200 broadcasts"
        ));
    }

    // Conntrack: the flooder's flows beyond the limit are dropped.
    let ext = osac_backends::net::ipv4_gateway(w.env.settings.transit_ipv4_cidr);
    let to = SocketAddr::new(IpAddr::V4(ext), w.env.tcp_port);
    let listener = Listener::udp(names::EXT_NS, to).unwrap();
    let limit = PORT_CONNECTION_LIMIT as usize;
    let tries = limit + 1_000;
    let sent = osac_linux::dhcp::netns::run_in(&flooder.ns, move || {
        let mut sent = 0usize;
        // One source port per flow (ephemeral ports would repeat some 5-tuples).
        for i in 0..tries {
            let port = u16::try_from(30_000 + i).expect("a port");
            let s = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, port))?;
            if s.send_to(format!("flow-{i}").as_bytes(), to).is_ok() {
                sent += 1;
            }
        }
        Ok(sent)
    })
    .unwrap();
    assert_eq!(sent, tries, "every datagram left the VM");
    listener.wait_for(Duration::from_secs(5), |p| p.len() >= tries);
    let arrived = listener
        .payloads()
        .into_iter()
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    if arrived > limit {
        problems.push(format!(
            "{arrived} of {tries} new flows of one port passed (limit {limit})"
        ));
    }
    if arrived < limit / 2 {
        problems.push(format!(
            "control: only {arrived} flows arrived, far below the limit {limit}"
        ));
    }
    // Another port of the same hosting cluster and VN still opens new flows.
    let neighbour = w.machine("calm", Kind::Vm, "a1", &open).await;
    let before = listener.payloads().len();
    probe::udp_send(&neighbour.ns, to, b"calm-flow").unwrap();
    if !listener.wait_for(Duration::from_secs(2), |p| p.len() > before) {
        problems.push("control: a neighbour's new flow was dropped too".into());
    }
    assert!(problems.is_empty(), "{problems:#?}");
    w.env.teardown().await;
}
