//! A deleted NAT gateway's address is released (and may go to another tenant): flows that
//! were translated to it must stop using it at once, not at their conntrack timeout. A
//! workload keeps one UDP flow (same source port) to an external host while its NAT gateway
//! is deleted; the flow's next datagram must not arrive from the released address.
//!
//! Stopped by: `delete_nat_gateway` deleting the conntrack entries SNAT'ed to the address
//! (`conntrack -D --reply-dst`). Mutation-checked: without the flush, the datagram after
//! the deletion still arrived from the NAT gateway's address.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use osac_backends::*;
use osac_linux::names;
use osac_linux::probe::{Listener, send_udp_from};

use super::{Kind, World};

#[tokio::test]
async fn deleting_a_nat_gateway_stops_its_flows_using_the_released_address() {
    if !super::common::ready().await {
        return;
    }
    let w = World::new(20).await;
    let client = w
        .machine("client", Kind::BareMetal, "a1", &w.open("a1").await)
        .await;
    let c = &w.env.client;
    let nat_addr = w.env.external_ip("nat-ip").await;
    let nat = CreateNatGatewayRequest {
        nat_gateway_id: w.id("nat"),
        virtual_network_id: w.id("va"),
        external_address: nat_addr,
        source_cidrs: vec![],
    };
    c.create_nat_gateway(&nat).await.unwrap();
    let ext_gw = osac_backends::net::ipv4_gateway(w.env.settings.transit_ipv4_cidr);
    let server = SocketAddr::new(IpAddr::V4(ext_gw), w.env.tcp_port);
    let listener = Listener::udp(names::EXT_NS, server).unwrap();
    let from = SocketAddr::new(IpAddr::V4(client.v4), 40_123);
    let send = |n: usize| {
        send_udp_from(&client.ns, from, server, format!("datagram-{n}").as_bytes()).unwrap();
        assert!(
            listener.wait_for(Duration::from_secs(5), |p| p.len() > n),
            "datagram {n} arrives"
        );
        listener.peer_ips()[n]
    };
    assert_eq!(
        send(0),
        nat_addr,
        "the flow leaves with the NAT gateway's address"
    );
    assert_eq!(send(1), nat_addr);
    c.delete_nat_gateway(&DeleteNatGatewayRequest {
        nat_gateway_id: w.id("nat"),
        virtual_network_id: w.id("va"),
    })
    .await
    .unwrap();
    let transit = w.env.fabric.transit(&w.id("va")).await.unwrap().v4;
    assert_eq!(
        send(2),
        IpAddr::V4(transit),
        "the same flow now leaves masqueraded, not with the released address"
    );
    c.release_external_ip(&ReleaseExternalIpRequest {
        external_ip_id: w.id("nat-ip"),
        pool_id: w.id("pool"),
    })
    .await
    .unwrap();
    w.env.teardown().await;
}
