//! Isolation between ports and VNs, with real packets: allowed addresses (cluster VIPs only
//! for the agents claiming them), security groups on traffic to a VIP (also through a DNAT,
//! also after a claimant left), neighbour advertisements only for a port's own addresses, and
//! conntrack zones of VNs with identical CIDRs sharing a hosting cluster.

use std::net::IpAddr;
use std::sync::Arc;

use osac_backends::*;
use osac_linux::{cmd, names};

use super::common::{
    self, Env, Session, configure, echo_server, na_targets_seen, ping, send_na, sh, sh_out, tcp_ok,
    tcp_server,
};
use super::{env_with_subnet, plug_open, plug_req, port_req, rule, subnet_req, vn_req};

/// ICMP echo from a given source address (3 tries).
async fn ping_from(ns: &str, src: &str, dst: &str) -> bool {
    for _ in 0..3 {
        if sh(ns, &["ping", "-c1", "-W1", "-I", src, dst]).await {
            return true;
        }
    }
    false
}

fn detach(env: &Env, att: &str, host: &str, mac: &str) -> DeleteNetworkAttachmentRequest {
    DeleteNetworkAttachmentRequest {
        attachment_id: env.id(att),
        host: host.into(),
        interface: "data-0".into(),
        mac_address: mac.into(),
        subnet_id: env.id("s1"),
        park: false,
    }
}

#[tokio::test]
async fn only_agents_allowed_a_vip_send_from_it_and_its_traffic_is_filtered() {
    let Some(env) = env_with_subnet(9).await else {
        return;
    };
    let c = &env.client;
    let web = env.id("web");
    c.apply_security_group(&ApplySecurityGroupRequest {
        security_group_id: web.clone(),
        virtual_network_id: env.id("vn"),
        ingress: vec![rule(Protocol::Tcp, Some((80, 80)), "0.0.0.0/0")],
        egress: vec![rule(Protocol::All, None, "0.0.0.0/0")],
    })
    .await
    .unwrap();
    let vip = "10.0.1.241";
    let agent = |att: &str, host: &str, mac: &str| {
        let mut r = port_req(
            &env,
            att,
            host,
            "data-0",
            mac,
            "s1",
            std::slice::from_ref(&web),
        );
        r.allowed_addresses = vec![vip.parse().unwrap()];
        r
    };
    let (h1, h2, hb) = (env.id("agent1"), env.id("agent2"), env.id("bm"));
    let (mac1, mac2) = ("02:09:00:00:00:01", "02:09:00:00:00:02");
    let mut outside = agent("a0", &env.id("agent0"), "02:09:00:00:00:09");
    outside.allowed_addresses = vec!["10.0.1.7".parse().unwrap()];
    assert!(
        matches!(
            c.create_network_attachment(&outside).await,
            Err(OpError::Permanent(m)) if m.contains("VIP block")
        ),
        "only addresses of the VIP block can be allowed"
    );
    let (m1, _) = plug_req(&env, &agent("a1", &h1, mac1)).await;
    let (m2, _) = plug_req(&env, &agent("a2", &h2, mac2)).await;
    let (mb, _) = plug_open(&env, "pb", &hb, "data-0", "02:09:00:00:00:03", "s1").await;
    assert!(ping(&mb, "10.0.1.1").await);

    // A port without allowed addresses cannot use a VIP, neither the agents' one nor another
    // of the block (before, the whole block was allowed to every port).
    for forged in [vip, "10.0.1.250"] {
        configure(&mb, "data-0", &format!("{forged}/24"), None).await;
        assert!(
            !ping_from(&mb, forged, "10.0.1.1").await,
            "a BM port sends from VIP {forged}"
        );
        sh_out(
            &mb,
            &[
                "ip",
                "addr",
                "del",
                &format!("{forged}/24"),
                "dev",
                "data-0",
            ],
        )
        .await;
    }
    // The agent holding the VIP can.
    configure(&m1, "data-0", &format!("{vip}/24"), None).await;
    assert!(
        ping_from(&m1, vip, "10.0.1.1").await,
        "the agent uses its VIP"
    );

    // Traffic to the VIP is filtered by the agents' groups, directly and through a DNAT.
    let _a80 = tcp_server(&m1, "0.0.0.0", 80).await;
    let _a22 = tcp_server(&m1, "0.0.0.0", 22).await;
    assert!(tcp_ok(&mb, vip, 80).await, "the group allows 80 to the VIP");
    assert!(!tcp_ok(&mb, vip, 22).await, "and nothing else");
    let e1 = env.external_ip("e1").await;
    let dnat = CreateExternalIpAttachmentRequest {
        attachment_id: env.id("dnat"),
        virtual_network_id: env.id("vn"),
        external_address: e1,
        target_ip: vip.parse().unwrap(),
    };
    c.create_external_ip_attachment(&dnat).await.unwrap();
    let e1s = e1.to_string();
    assert!(tcp_ok(names::EXT_NS, &e1s, 80).await, "DNAT to the VIP");
    assert!(
        !tcp_ok(names::EXT_NS, &e1s, 22).await,
        "the DNAT'ed VIP is filtered by the cluster's group"
    );

    // The first claimant goes: the VIP stays filtered, now by the remaining one's groups.
    let router = names::router_ns(&env.id("vn"));
    c.delete_network_attachment(&detach(&env, "a1", &h1, mac1))
        .await
        .unwrap();
    configure(&m2, "data-0", &format!("{vip}/24"), None).await;
    let _b80 = tcp_server(&m2, "0.0.0.0", 80).await;
    let _b22 = tcp_server(&m2, "0.0.0.0", 22).await;
    sh_out(&router, &["ip", "neigh", "flush", "all"]).await;
    assert!(
        tcp_ok(names::EXT_NS, &e1s, 80).await,
        "the other agent took over"
    );
    assert!(
        !tcp_ok(names::EXT_NS, &e1s, 22).await,
        "still filtered after a claimant left"
    );

    // A restarted fabric remembers who may use the VIP.
    let again = osac_linux::LinuxFabric::new(
        common::registration("f2", Role::Fabric, &[]),
        env.settings.clone(),
    )
    .await
    .unwrap();
    let vip_addr: IpAddr = vip.parse().unwrap();
    assert_eq!(
        again.port(&env.id("a2")).await.unwrap().allowed_addresses,
        vec![vip_addr]
    );

    // The last claimant gives the VIP up: it can no longer send from it, and the VIP is no
    // longer steered anywhere.
    let mut plain = agent("a2", &h2, mac2);
    plain.allowed_addresses.clear();
    c.create_network_attachment(&plain).await.unwrap();
    assert!(!ping_from(&m2, vip, "10.0.1.1").await, "VIP withdrawn");
    assert!(ping(&m2, "10.0.1.1").await, "its own address still works");
    let table = names::vn_table(&env.id("vn"));
    let in4 = sh_out(&router, &["nft", "list", "map", "inet", &table, "in4"]).await;
    assert!(!in4.contains(vip), "no claimant left, VIP unsteered: {in4}");
    let rules = sh_out(&router, &["nft", "list", "table", "inet", &table]).await;
    assert!(
        !rules.contains(&names::vip_chain(&vip_addr, true)),
        "the VIP's chains are gone: {rules}"
    );
    c.delete_external_ip_attachment(&DeleteExternalIpAttachmentRequest {
        attachment_id: env.id("dnat"),
        virtual_network_id: env.id("vn"),
    })
    .await
    .unwrap();
    env.teardown().await;
}

#[tokio::test]
async fn neighbour_advertisements_only_announce_the_ports_own_addresses() {
    let Some(env) = env_with_subnet(10).await else {
        return;
    };
    let (h1, h2) = (env.id("bm1"), env.id("bm2"));
    let (m1, _) = plug_open(&env, "p1", &h1, "data-0", "02:0a:00:00:00:01", "s1").await;
    plug_open(&env, "p2", &h2, "data-0", "02:0a:00:00:00:02", "s1").await;
    let own = env
        .fabric
        .port(&env.id("p1"))
        .await
        .unwrap()
        .ipv6_address
        .unwrap();
    let other = env
        .fabric
        .port(&env.id("p2"))
        .await
        .unwrap()
        .ipv6_address
        .unwrap();
    configure(&m1, "data-0", &format!("{own}/64"), None).await;
    assert!(ping(&m1, "fd10:0:0:1::1").await, "IPv6 and ND work");
    let (own, other, ll) = (own.to_string(), other.to_string(), "fe80::1234".to_string());
    let router = names::router_ns(&env.id("vn"));
    // The gateway's link-local (the machines' IPv6 next hop, learnt from RAs) is known in
    // advance from the bridge's fixed MAC; check the kernel really uses it.
    let gw_ll = osac_linux::kernel::gateway_link_local(&env.id("vn"), &env.id("s1"))
        .expect("gateway link-local")
        .to_string();
    let bridge_addrs = std::process::Command::new("ip")
        .args(["-n", &router, "-6", "addr", "show", "dev"])
        .arg(names::subnet_bridge(&env.id("s1")))
        .output()
        .expect("ip addr");
    let bridge_addrs = String::from_utf8_lossy(&bridge_addrs.stdout).to_string();
    assert!(
        bridge_addrs.contains(&format!("{gw_ll}/64")),
        "the gateway bridge has the predicted link-local {gw_ll}: {bridge_addrs}"
    );
    let seen = na_targets_seen(&router, async {
        for target in [&other, &gw_ll, &own, &ll] {
            assert!(send_na(&m1, "data-0", target).await, "NA for {target} sent");
        }
    })
    .await;
    assert!(
        !seen.contains(&other),
        "a forged NA for another port's address is dropped: {seen:?}"
    );
    assert!(
        !seen.contains(&gw_ll),
        "a forged NA for the gateway's link-local is dropped: {seen:?}"
    );
    assert!(seen.contains(&own), "its own address: {seen:?}");
    assert!(seen.contains(&ll), "a link-local one: {seen:?}");
    env.teardown().await;
}

#[tokio::test]
async fn vns_with_identical_cidrs_on_one_hosting_cluster_keep_their_flows_apart() {
    if !common::ready().await {
        return;
    }
    let mut env = Env::new(11).await;
    let k8s = Arc::new(env.k8s().await);
    let kc: Arc<dyn K8sManager> = k8s.clone();
    let hc = k8s.hosting_clusters()[0].clone();
    let c = &env.client;
    // Per VN: a client VM (egress anything, no ingress) and a server VM (ingress 2222 only, no
    // egress), so each reply passes only as part of its VN's tracked flow.
    let mut clients = Vec::new();
    let mut servers = Vec::new();
    for (n, vn, s) in [(1u8, "vn", "s1"), (2, "vn2", "s2")] {
        c.create_virtual_network(&vn_req(&env, vn)).await.unwrap();
        let sreq = subnet_req(&env, vn, s, 1);
        let created = c.create_subnet(&sreq).await.unwrap();
        kc.create_subnet_overlay(&CreateSubnetOverlayRequest {
            subnet_id: env.id(s),
            segment_id: created.segment_id,
            hosting_cluster: hc.clone(),
            ipv4_cidr: sreq.ipv4_cidr,
            ipv6_cidr: sreq.ipv6_cidr,
            vip_cidr: sreq.vip_cidr,
        })
        .await
        .unwrap();
        let (cli, srv) = (env.id(&format!("{vn}-cli")), env.id(&format!("{vn}-srv")));
        let server_ingress = if n == 1 {
            vec![rule(Protocol::Tcp, Some((2222, 2222)), "0.0.0.0/0")]
        } else {
            vec![]
        };
        for (sg, ingress, egress) in [
            (&cli, vec![], vec![rule(Protocol::All, None, "0.0.0.0/0")]),
            (&srv, server_ingress, vec![]),
        ] {
            c.apply_security_group(&ApplySecurityGroupRequest {
                security_group_id: sg.clone(),
                virtual_network_id: env.id(vn),
                ingress,
                egress,
            })
            .await
            .unwrap();
        }
        for (role, sg, list) in [("c", &cli, &mut clients), ("s", &srv, &mut servers)] {
            let vm = env.id(&format!("{vn}-vm{role}"));
            let mac = format!("02:0b:00:00:0{n}:0{}", if role == "c" { 1 } else { 2 });
            let mut req = port_req(
                &env,
                &format!("{vn}-p{role}"),
                &hc,
                &format!("{vm}/eth0"),
                &mac,
                s,
                std::slice::from_ref(sg),
            );
            req.virtual_network_id = env.id(vn);
            list.push(plug_req(&env, &req).await);
        }
    }
    assert_eq!(
        clients[0].1, clients[1].1,
        "identical addresses in both VNs"
    );
    assert_eq!(servers[0].1, servers[1].1);
    let target = servers[0].1.clone();
    let _e1 = echo_server(&servers[0].0, "0.0.0.0", 2222).await;
    let _e2 = echo_server(&servers[1].0, "0.0.0.0", 2222).await;

    let mut s1 = Session::open_from(&clients[0].0, &target, 2222, Some(40_000))
        .await
        .expect("VN 1: allowed flow opens");
    assert!(s1.exchange().await, "VN 1: replies pass as tracked");
    // The same 5-tuple in VN 2, whose server group allows nothing: not VN 1's flow.
    assert!(
        Session::open_from(&clients[1].0, &target, 2222, Some(40_000))
            .await
            .is_none(),
        "VN 2's packets are not taken for VN 1's established flow"
    );
    c.apply_security_group(&ApplySecurityGroupRequest {
        security_group_id: env.id("vn2-srv"),
        virtual_network_id: env.id("vn2"),
        ingress: vec![rule(Protocol::Tcp, Some((2222, 2222)), "0.0.0.0/0")],
        egress: vec![],
    })
    .await
    .unwrap();
    let mut s2 = Session::open_from(&clients[1].0, &target, 2222, Some(40_000))
        .await
        .expect("VN 2: the same 5-tuple opens once allowed");
    assert!(s2.exchange().await, "VN 2: replies pass as tracked");
    assert!(s1.exchange().await, "VN 1's flow is untouched");
    assert!(s2.exchange().await);
    if cmd::on_path("conntrack") {
        let ns = names::hosting_ns(&hc);
        for vn in ["vn", "vn2"] {
            let zone = names::ct_zone(&names::vn_table(&env.id(vn)));
            let flows = sh_out(&ns, &["conntrack", "-L", "-w", &zone.to_string()]).await;
            assert!(
                flows.contains("sport=40000 dport=2222") && flows.contains(&format!("zone={zone}")),
                "{vn}'s flow in zone {zone}: {flows}"
            );
        }
    } else {
        eprintln!("conntrack not installed: zone listing not checked");
    }
    s1.close().await;
    s2.close().await;
    env.teardown().await;
}
