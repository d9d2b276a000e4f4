//! IPv6 NAT with real packets: an IPv6 external address attached to a machine's IPv6 address
//! is reachable from the external namespace (also hairpinned from inside the VN), replies
//! come back from it, and deleting the attachment stops it, open sessions included; outbound
//! flows leave from the IPv6 NAT gateway's address, or from the router's IPv6 transit address
//! without one.

use std::net::IpAddr;

use osac_backends::*;
use osac_linux::names;

use super::common::{self, Env, echo_server, next_peer, ping, ping_once, tcp_ok, tcp_server};
use super::{detaching_cuts_open_connections, plug_open, subnet_req, vn_req};

/// Removes this test's IPv6 routes from the external namespace when the test ends, also when
/// it fails (the shared harness only sweeps IPv4 ones).
struct V6Routes(ipnet::Ipv6Net);

impl Drop for V6Routes {
    fn drop(&mut self) {
        use std::process::Command;
        let Ok(out) = Command::new("ip")
            .args(["-n", names::EXT_NS, "-6", "route", "show"])
            .output()
        else {
            return;
        };
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let via = line
                .split("via ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .and_then(|v| v.parse::<std::net::Ipv6Addr>().ok());
            if via.is_some_and(|v| self.0.contains(&v))
                && let Some(dst) = line.split_whitespace().next()
            {
                let _ = Command::new("ip")
                    .args(["-n", names::EXT_NS, "-6", "route", "del", dst])
                    .status();
            }
        }
    }
}

/// Configures the machine's reserved IPv6 address (/64) and its default route via the
/// subnet's IPv6 gateway, as the DHCPv6 client and RAs do in the product.
async fn plug6(env: &Env, att: &str, ns: &str) -> String {
    let p = env.fabric.port(&env.id(att)).await.expect("port");
    let v6 = p
        .ipv6_address
        .expect("an IPv6 reservation on a dual-stack subnet");
    let gw = env
        .fabric
        .subnet(&p.subnet_id)
        .await
        .expect("subnet")
        .gw6()
        .expect("IPv6 gateway")
        .to_string();
    common::configure(ns, "data-0", &format!("{v6}/64"), Some(&gw)).await;
    v6.to_string()
}

/// The address a TCP server printed, parsed (Python and Rust may render IPv6 differently).
fn peer_ip(peer: Option<String>) -> Option<IpAddr> {
    peer.and_then(|p| p.parse().ok())
}

#[tokio::test]
async fn ipv6_dnat_nat_gateway_and_masquerade() {
    if !common::ready().await {
        return;
    }
    let env = Env::new(13).await;
    let _routes = V6Routes(env.settings.transit_ipv6_cidr);
    let c = &env.client;
    c.create_virtual_network(&vn_req(&env, "vn")).await.unwrap();
    c.create_subnet(&subnet_req(&env, "vn", "s1", 1))
        .await
        .unwrap();
    let (ha, hb) = (env.id("a"), env.id("b"));
    let (ma, _) = plug_open(&env, "pa", &ha, "data-0", "02:0d:00:00:00:01", "s1").await;
    let (mb, _) = plug_open(&env, "pb", &hb, "data-0", "02:0d:00:00:00:02", "s1").await;
    let a6 = plug6(&env, "pa", &ma).await;
    let _b6 = plug6(&env, "pb", &mb).await;
    assert!(ping(&mb, &a6).await, "control: IPv6 inside the subnet");

    let pool6: ipnet::IpNet = format!("fd00:6f74:d:{:x}::/124", std::process::id() % 65000)
        .parse()
        .unwrap();
    let alloc = |id: &str| AllocateExternalIpRequest {
        external_ip_id: env.id(id),
        pool_id: env.id("pool6"),
        cidrs: vec![pool6],
    };
    let e1 = c.allocate_external_ip(&alloc("e1")).await.unwrap().address;
    let e2 = c.allocate_external_ip(&alloc("e2")).await.unwrap().address;
    assert!(e1.is_ipv6() && e2.is_ipv6() && e1 != e2, "{e1} {e2}");
    let ext_gw = osac_backends::net::ipv6_gateway(env.settings.transit_ipv6_cidr).to_string();
    let transit: IpAddr = env.fabric.transit(&env.id("vn")).await.unwrap().v6.into();

    // Without a NAT gateway, IPv6 egress is masqueraded to the router's transit address.
    let port = env.tcp_port;
    let server = tcp_server(names::EXT_NS, &ext_gw, port).await;
    assert!(
        tcp_ok(&ma, &ext_gw, port).await,
        "IPv6 egress to [{ext_gw}]"
    );
    assert_eq!(
        peer_ip(next_peer(&server).await),
        Some(transit),
        "masqueraded to the router's IPv6 transit address"
    );
    // With an IPv6 NAT gateway, new outbound flows come from its address.
    let nat = CreateNatGatewayRequest {
        nat_gateway_id: env.id("nat6"),
        virtual_network_id: env.id("vn"),
        external_address: e2,
        source_cidrs: vec!["fd10::/48".parse().unwrap()],
    };
    c.create_nat_gateway(&nat).await.unwrap();
    c.create_nat_gateway(&nat).await.unwrap();
    assert!(
        tcp_ok(&ma, &ext_gw, port).await,
        "egress via the NAT gateway"
    );
    assert_eq!(
        peer_ip(next_peer(&server).await),
        Some(e2),
        "source seen by the external host"
    );

    // Inbound by attachment only.
    let e1s = e1.to_string();
    assert!(!ping_once(names::EXT_NS, &e1s).await, "not attached yet");
    let dnat = CreateExternalIpAttachmentRequest {
        attachment_id: env.id("dnat6"),
        virtual_network_id: env.id("vn"),
        external_address: e1,
        target_ip: a6.parse::<IpAddr>().unwrap(),
    };
    c.create_external_ip_attachment(&dnat).await.unwrap();
    c.create_external_ip_attachment(&dnat).await.unwrap();
    assert!(
        ping(names::EXT_NS, &e1s).await,
        "IPv6 DNAT reaches the target"
    );
    let _srv_a = tcp_server(&ma, "::", 8080).await;
    assert!(
        tcp_ok(names::EXT_NS, &e1s, 8080).await,
        "TCP from osac-ext to [{e1s}]:8080"
    );
    assert!(tcp_ok(&mb, &e1s, 8080).await, "hairpin from the same VN");
    assert!(
        !ping_once(names::EXT_NS, &a6).await,
        "the internal IPv6 address is not reachable from outside"
    );
    // The echo server answers through conntrack: the client's connected socket only accepts
    // replies from the external address, so an exchange proves their source.
    let _echo = echo_server(&ma, "::", 8081).await;
    detaching_cuts_open_connections(&env, "dnat6", &e1s, 8081).await;
    assert!(
        !tcp_ok(names::EXT_NS, &e1s, 8080).await,
        "no new connections after detaching"
    );

    c.delete_nat_gateway(&DeleteNatGatewayRequest {
        nat_gateway_id: env.id("nat6"),
        virtual_network_id: env.id("vn"),
    })
    .await
    .unwrap();
    assert!(tcp_ok(&ma, &ext_gw, port).await);
    assert_eq!(
        peer_ip(next_peer(&server).await),
        Some(transit),
        "back to masquerade"
    );
    for e in ["e1", "e2"] {
        c.release_external_ip(&ReleaseExternalIpRequest {
            external_ip_id: env.id(e),
            pool_id: env.id("pool6"),
        })
        .await
        .unwrap();
    }
    env.teardown().await;
}
