//! Root tests of the linux fabric and k8s managers, calling operations directly and checking
//! kernel state and packets. They skip (printing why) without root/tools, and fail under
//! `CI=true`.

mod attacks;
mod common;
mod dnsmasq_failures;
mod fixture;
mod isolation;
mod nat6;

use std::net::IpAddr;

use common::{
    Env, Session, configure, echo_server, next_peer, ping, ping_once, sh, sh_out, tcp_ok,
    tcp_server,
};
use osac_backends::*;
use osac_linux::cmd;
use osac_linux::names;

use fixture::{
    detaching_cuts_open_connections, env_with_subnet, plug, plug_open, plug_req, port_req, rule,
    subnet_req, vn_req, wide_open,
};

#[tokio::test]
async fn subnets_ports_routing_and_rebuild() {
    if !common::ready().await {
        return;
    }
    let env = Env::new(1).await;
    let c = &env.client;
    c.create_virtual_network(&vn_req(&env, "vn")).await.unwrap();
    c.create_virtual_network(&vn_req(&env, "vn")).await.unwrap();
    let s1 = c
        .create_subnet(&subnet_req(&env, "vn", "s1", 1))
        .await
        .unwrap();
    assert_eq!(
        s1,
        c.create_subnet(&subnet_req(&env, "vn", "s1", 1))
            .await
            .unwrap(),
        "idempotent"
    );
    assert_eq!(s1.ipv4_gateway, Some("10.0.1.1".parse().unwrap()));
    assert_eq!(s1.ipv6_gateway, Some("fd10:0:0:1::1".parse().unwrap()));
    c.create_subnet(&subnet_req(&env, "vn", "s2", 2))
        .await
        .unwrap();

    let router = names::router_ns(&env.id("vn"));
    let br1 = names::subnet_bridge(&env.id("s1"));
    let addrs = sh_out(&router, &["ip", "-br", "addr", "show", "dev", &br1]).await;
    assert!(
        addrs.contains("10.0.1.1/24") && addrs.contains("fd10:0:0:1::1/64"),
        "{addrs}"
    );
    let files = osac_linux::fabric_manager::dnsmasq::DnsmasqFiles::of(&env.settings, &env.id("s1"));
    assert!(
        osac_linux::fabric_manager::dnsmasq::running_pid(&files)
            .await
            .is_some(),
        "dnsmasq runs"
    );

    let (h1, h2, h3) = (env.id("bm1"), env.id("bm2"), env.id("bm3"));
    let (m1, a1) = plug_open(&env, "p1", &h1, "data-0", "02:01:00:00:00:01", "s1").await;
    let (m2, a2) = plug_open(&env, "p2", &h2, "data-0", "02:01:00:00:00:02", "s1").await;
    let (m3, a3) = plug_open(&env, "p3", &h3, "data-0", "02:01:00:00:00:03", "s2").await;
    assert_eq!(a1, "10.0.1.2");
    assert_ne!(a1, a2);
    // Reservations reach dnsmasq, router option only for primary ports.
    let hosts = files.host_entries();
    assert!(
        hosts.contains("02:01:00:00:00:01,set:primary,10.0.1.2,[fd10:0:0:1::2]"),
        "{hosts}"
    );
    let lease = c
        .query_dhcp_lease(&QueryDhcpLeaseRequest {
            subnet_id: env.id("s1"),
            mac_address: "02:01:00:00:00:01".into(),
        })
        .await
        .unwrap();
    assert!(
        lease.is_empty(),
        "no DHCP client ran, so no lease: {lease:?}"
    );

    assert!(ping(&m1, &a2).await, "same subnet");
    let p1 = env.fabric.port(&env.id("p1")).await.unwrap();
    let p2 = env.fabric.port(&env.id("p2")).await.unwrap();
    configure(
        &m1,
        "data-0",
        &format!("{}/64", p1.ipv6_address.unwrap()),
        Some("fd10:0:0:1::1"),
    )
    .await;
    configure(
        &m2,
        "data-0",
        &format!("{}/64", p2.ipv6_address.unwrap()),
        None,
    )
    .await;
    assert!(
        ping(&m1, &p2.ipv6_address.unwrap().to_string()).await,
        "IPv6 on the same subnet"
    );
    assert!(ping(&m1, "fd10:0:0:1::1").await, "IPv6 gateway");
    assert!(ping(&m1, &a3).await, "other subnet through the gateway");
    assert!(ping(&m3, &a1).await);

    // Someone deletes the bridge: re-running the operations rebuilds it and re-plugs ports.
    cmd::ip(Some(&router), &["link", "del", &br1])
        .await
        .unwrap();
    assert!(!ping_once(&m1, &a2).await);
    c.create_subnet(&subnet_req(&env, "vn", "s1", 1))
        .await
        .unwrap();
    assert!(cmd::link(&router, &br1).await.unwrap().is_some());
    assert!(
        osac_linux::fabric_manager::dnsmasq::running_pid(&files)
            .await
            .is_some(),
        "dnsmasq restarted"
    );
    for (att, host, mac) in [
        ("p1", &h1, "02:01:00:00:00:01"),
        ("p2", &h2, "02:01:00:00:00:02"),
    ] {
        let again = c
            .create_network_attachment(&port_req(
                &env,
                att,
                host,
                "data-0",
                mac,
                "s1",
                &wide_open(&env).await,
            ))
            .await
            .unwrap();
        assert!(again.ipv4_address.is_some());
    }
    let sw = names::port_switch_end(&h1, "data-0");
    assert_eq!(
        cmd::link(&router, &sw)
            .await
            .unwrap()
            .unwrap()
            .master
            .as_deref(),
        Some(br1.as_str())
    );
    assert!(ping(&m1, &a2).await, "rebuilt");

    // Detach: the switch end goes, the machine keeps its namespace.
    let del = DeleteNetworkAttachmentRequest {
        attachment_id: env.id("p2"),
        host: h2.clone(),
        interface: "data-0".into(),
        mac_address: "02:01:00:00:00:02".into(),
        subnet_id: env.id("s1"),
        park: false,
    };
    c.delete_network_attachment(&del).await.unwrap();
    c.delete_network_attachment(&del).await.unwrap();
    assert!(
        cmd::link(&router, &names::port_switch_end(&h2, "data-0"))
            .await
            .unwrap()
            .is_none()
    );
    assert!(cmd::netns_exists(&m2).await.unwrap());
    assert!(!files.host_entries().contains("02:01:00:00:00:02"));
    env.teardown().await;
}

#[tokio::test]
async fn agent_ports_move_between_parking_and_subnet() {
    let Some(env) = env_with_subnet(2).await else {
        return;
    };
    let c = &env.client;
    let agent = env.id("agent");
    let mac = "02:02:00:00:00:01";
    osac_linux::fabric_manager::ports::ensure_parked_port(&agent, "data-0", mac, 1450)
        .await
        .unwrap();
    let sw = names::port_switch_end(&agent, "data-0");
    let parked = cmd::link(names::PARK_NS, &sw).await.unwrap().unwrap();
    assert_eq!(parked.master.as_deref(), Some(names::PARK_BRIDGE));

    let (m, _) = plug_open(&env, "p1", &agent, "data-0", mac, "s1").await;
    assert!(
        cmd::link(names::PARK_NS, &sw).await.unwrap().is_none(),
        "moved off parking"
    );
    let mac_now = cmd::link(&m, "data-0").await.unwrap().unwrap().address;
    assert_eq!(
        mac_now.as_deref(),
        Some(mac),
        "the agent keeps its interface"
    );
    assert!(ping(&m, "10.0.1.1").await, "agent reaches its gateway");

    let del = DeleteNetworkAttachmentRequest {
        attachment_id: env.id("p1"),
        host: agent.clone(),
        interface: "data-0".into(),
        mac_address: mac.into(),
        subnet_id: env.id("s1"),
        park: true,
    };
    c.delete_network_attachment(&del).await.unwrap();
    c.delete_network_attachment(&del).await.unwrap();
    let back = cmd::link(names::PARK_NS, &sw).await.unwrap().unwrap();
    assert_eq!(back.master.as_deref(), Some(names::PARK_BRIDGE));
    assert!(!ping_once(&m, "10.0.1.1").await, "off the subnet");
    cmd::ip(Some(names::PARK_NS), &["link", "del", &sw])
        .await
        .unwrap();
    env.teardown().await;
}

#[tokio::test]
async fn anti_spoofing_drops_forged_addresses() {
    let Some(env) = env_with_subnet(3).await else {
        return;
    };
    let (h1, h2) = (env.id("bm1"), env.id("bm2"));
    let (m1, _a1) = plug_open(&env, "p1", &h1, "data-0", "02:03:00:00:00:01", "s1").await;
    let (m2, a2) = plug_open(&env, "p2", &h2, "data-0", "02:03:00:00:00:02", "s1").await;
    assert!(ping(&m1, &a2).await);
    // Forged source IP: the machine adds an address it was not given.
    configure(&m1, "data-0", "10.0.1.99/24", None).await;
    assert!(
        !sh(&m1, &["ping", "-c1", "-W1", "-I", "10.0.1.99", &a2]).await,
        "forged IP dropped"
    );
    sh_out(&m1, &["ip", "addr", "del", "10.0.1.99/24", "dev", "data-0"]).await;
    assert!(ping(&m1, &a2).await);
    // Forged MAC.
    sh_out(
        &m1,
        &[
            "ip",
            "link",
            "set",
            "data-0",
            "address",
            "02:03:00:00:00:99",
        ],
    )
    .await;
    sh_out(&m2, &["ip", "neigh", "flush", "all"]).await;
    assert!(!ping_once(&m1, &a2).await, "forged MAC dropped");
    env.teardown().await;
}

#[tokio::test]
async fn security_groups_are_stateful_unions_and_update_atomically() {
    let Some(env) = env_with_subnet(4).await else {
        return;
    };
    let c = &env.client;
    let (ssh, web) = (env.id("ssh"), env.id("web"));
    let sg = |id: &str, ingress: Vec<SecurityRule>| ApplySecurityGroupRequest {
        security_group_id: id.into(),
        virtual_network_id: env.id("vn"),
        ingress,
        egress: vec![rule(Protocol::All, None, "0.0.0.0/0")],
    };
    c.apply_security_group(&sg(
        &ssh,
        vec![rule(Protocol::Tcp, Some((22, 22)), "0.0.0.0/0")],
    ))
    .await
    .unwrap();
    c.apply_security_group(&sg(
        &web,
        vec![rule(Protocol::Tcp, Some((80, 80)), "0.0.0.0/0")],
    ))
    .await
    .unwrap();
    let (ha, hb) = (env.id("a"), env.id("b"));
    let (ma, aa) = plug(
        &env,
        "pa",
        &ha,
        "data-0",
        "02:04:00:00:00:01",
        "s1",
        std::slice::from_ref(&ssh),
    )
    .await;
    let (mb, ab) = plug_open(&env, "pb", &hb, "data-0", "02:04:00:00:00:02", "s1").await;
    let _s22 = tcp_server(&ma, "0.0.0.0", 22).await;
    let _s80 = tcp_server(&ma, "0.0.0.0", 80).await;
    assert!(tcp_ok(&mb, &aa, 22).await, "allowed port");
    assert!(!tcp_ok(&mb, &aa, 80).await, "other port dropped");
    assert!(!ping_once(&mb, &aa).await, "other protocol dropped");
    assert!(
        ping(&ma, &ab).await,
        "egress allowed and the reply passes; b is wide open"
    );
    // Two groups = union.
    c.create_network_attachment(&port_req(
        &env,
        "pa",
        &ha,
        "data-0",
        "02:04:00:00:00:01",
        "s1",
        &[ssh.clone(), web.clone()],
    ))
    .await
    .unwrap();
    assert!(
        tcp_ok(&mb, &aa, 80).await && tcp_ok(&mb, &aa, 22).await,
        "union"
    );
    // Add a rule: takes effect; remove it: new flows stop.
    c.apply_security_group(&sg(
        &ssh,
        vec![
            rule(Protocol::Tcp, Some((22, 22)), "0.0.0.0/0"),
            rule(Protocol::Icmp, None, "0.0.0.0/0"),
        ],
    ))
    .await
    .unwrap();
    assert!(ping(&mb, &aa).await, "added rule");
    // An established flow survives the removal of the rule that allowed it (AWS semantics,
    // docs/dataplane.md); new flows are dropped.
    let _echo = echo_server(&ma, "0.0.0.0", 2222).await;
    c.apply_security_group(&sg(
        &ssh,
        vec![
            rule(Protocol::Tcp, Some((22, 22)), "0.0.0.0/0"),
            rule(Protocol::Tcp, Some((2222, 2222)), "0.0.0.0/0"),
        ],
    ))
    .await
    .unwrap();
    let mut open = Session::open(&mb, &aa, 2222)
        .await
        .expect("allowed connection opens");
    assert!(open.exchange().await);
    c.apply_security_group(&sg(&ssh, vec![])).await.unwrap();
    assert!(
        open.exchange().await,
        "established flow continues after the rule is removed"
    );
    open.close().await;
    assert!(
        Session::open(&mb, &aa, 2222).await.is_none(),
        "but a new one is refused"
    );
    assert!(!tcp_ok(&mb, &aa, 22).await, "removed rule stops new flows");
    assert!(!ping_once(&mb, &aa).await);
    assert!(tcp_ok(&mb, &aa, 80).await, "the other group still applies");
    // A port without groups is closed both ways (only DHCP and on-link neighbour discovery
    // pass; see attacks::closed for the hostile side).
    c.create_network_attachment(&port_req(
        &env,
        "pa",
        &ha,
        "data-0",
        "02:04:00:00:00:01",
        "s1",
        &[],
    ))
    .await
    .unwrap();
    assert!(
        !ping_once(&mb, &aa).await && !tcp_ok(&mb, &aa, 80).await,
        "no group = closed to ingress"
    );
    assert!(!ping_once(&ma, &ab).await, "no group = closed to egress");
    env.teardown().await;
}

#[tokio::test]
async fn dnat_snat_and_masquerade() {
    let Some(env) = env_with_subnet(5).await else {
        return;
    };
    let c = &env.client;
    let (ha, hb) = (env.id("a"), env.id("b"));
    let (ma, aa) = plug_open(&env, "pa", &ha, "data-0", "02:05:00:00:00:01", "s1").await;
    let (mb, _ab) = plug_open(&env, "pb", &hb, "data-0", "02:05:00:00:00:02", "s1").await;
    let alloc = |id: &str| AllocateExternalIpRequest {
        external_ip_id: env.id(id),
        pool_id: env.id("pool"),
        cidrs: vec![env.pool],
    };
    let e1 = c.allocate_external_ip(&alloc("e1")).await.unwrap().address;
    let e2 = c.allocate_external_ip(&alloc("e2")).await.unwrap().address;
    assert_ne!(e1, e2);
    assert_eq!(
        e1,
        c.allocate_external_ip(&alloc("e1")).await.unwrap().address
    );
    let ext_gw = osac_backends::net::ipv4_gateway(env.settings.transit_ipv4_cidr).to_string();
    let transit = env
        .fabric
        .transit(&env.id("vn"))
        .await
        .unwrap()
        .v4
        .to_string();

    // Without a NAT gateway, egress is masqueraded to the router's transit address.
    let port = env.tcp_port;
    let server = tcp_server(names::EXT_NS, &ext_gw, port).await;
    assert!(tcp_ok(&ma, &ext_gw, port).await);
    assert_eq!(next_peer(&server).await.as_deref(), Some(transit.as_str()));
    // With one, new outbound flows come from its address.
    let nat = CreateNatGatewayRequest {
        nat_gateway_id: env.id("nat"),
        virtual_network_id: env.id("vn"),
        external_address: e2,
        source_cidrs: vec!["10.0.0.0/16".parse().unwrap()],
    };
    c.create_nat_gateway(&nat).await.unwrap();
    c.create_nat_gateway(&nat).await.unwrap();
    assert!(tcp_ok(&ma, &ext_gw, port).await);
    assert_eq!(next_peer(&server).await, Some(e2.to_string()));

    // Inbound by attachment only.
    let e1s = e1.to_string();
    assert!(!ping_once(names::EXT_NS, &e1s).await, "not attached yet");
    let dnat = CreateExternalIpAttachmentRequest {
        attachment_id: env.id("dnat"),
        virtual_network_id: env.id("vn"),
        external_address: e1,
        target_ip: aa.parse::<IpAddr>().unwrap(),
    };
    c.create_external_ip_attachment(&dnat).await.unwrap();
    c.create_external_ip_attachment(&dnat).await.unwrap();
    assert!(ping(names::EXT_NS, &e1s).await, "DNAT reaches the target");
    let _srv_a = tcp_server(&ma, "0.0.0.0", 8080).await;
    assert!(tcp_ok(names::EXT_NS, &e1s, 8080).await);
    assert!(tcp_ok(&mb, &e1s, 8080).await, "hairpin from the same VN");
    assert!(
        !ping_once(names::EXT_NS, &aa).await,
        "the internal address is not reachable from outside"
    );

    let _echo = echo_server(&ma, "0.0.0.0", 8081).await;
    detaching_cuts_open_connections(&env, "dnat", &e1s, 8081).await;
    c.delete_nat_gateway(&DeleteNatGatewayRequest {
        nat_gateway_id: env.id("nat"),
        virtual_network_id: env.id("vn"),
    })
    .await
    .unwrap();
    assert!(tcp_ok(&ma, &ext_gw, port).await);
    assert_eq!(
        next_peer(&server).await.as_deref(),
        Some(transit.as_str()),
        "back to masquerade"
    );
    // A restarted fabric (same state dir) remembers its allocations.
    let again = osac_linux::LinuxFabric::new(
        common::registration("f2", Role::Fabric, &[]),
        env.settings.clone(),
    )
    .await
    .unwrap();
    let again: std::sync::Arc<dyn FabricManager> = std::sync::Arc::new(again);
    assert_eq!(
        again
            .allocate_external_ip(&alloc("e1"))
            .await
            .unwrap()
            .address,
        e1
    );
    let e3 = again
        .allocate_external_ip(&alloc("e3"))
        .await
        .unwrap()
        .address;
    assert!(
        e3 != e1 && e3 != e2,
        "a used address is never handed out again"
    );
    for e in ["e1", "e2", "e3"] {
        c.release_external_ip(&ReleaseExternalIpRequest {
            external_ip_id: env.id(e),
            pool_id: env.id("pool"),
        })
        .await
        .unwrap();
    }
    env.teardown().await;
}

#[tokio::test]
async fn hosting_cluster_overlays_join_vms_to_the_subnet() {
    if !common::ready().await {
        return;
    }
    let mut env = Env::new(6).await;
    let k8s = std::sync::Arc::new(env.k8s().await);
    let kc: std::sync::Arc<dyn K8sManager> = k8s.clone();
    let c = &env.client;
    c.create_virtual_network(&vn_req(&env, "vn")).await.unwrap();
    let s = c
        .create_subnet(&subnet_req(&env, "vn", "s1", 1))
        .await
        .unwrap();
    let clusters = k8s.hosting_clusters().to_vec();
    for cl in &clusters {
        let req = CreateSubnetOverlayRequest {
            subnet_id: env.id("s1"),
            segment_id: s.segment_id,
            hosting_cluster: cl.clone(),
            ipv4_cidr: Some("10.0.1.0/24".parse().unwrap()),
            ipv6_cidr: Some("fd10:0:0:1::/64".parse().unwrap()),
            vip_cidr: Some("10.0.1.240/28".parse().unwrap()),
        };
        kc.create_subnet_overlay(&req).await.unwrap();
        kc.create_subnet_overlay(&req).await.unwrap();
        let ns = names::hosting_ns(cl);
        assert!(
            cmd::link(&ns, &names::vxlan_dev(s.segment_id))
                .await
                .unwrap()
                .is_some()
        );
    }
    let (vm1, vm2) = (env.id("vm1"), env.id("vm2"));
    let (m1, a1) = plug_open(
        &env,
        "p1",
        &clusters[0],
        &format!("{vm1}/eth0"),
        "02:06:00:00:00:01",
        "s1",
    )
    .await;
    let (m2, a2) = plug_open(
        &env,
        "p2",
        &clusters[1],
        &format!("{vm2}/eth0"),
        "02:06:00:00:00:02",
        "s1",
    )
    .await;
    let (m3, a3) = plug_open(
        &env,
        "p3",
        &env.id("bm"),
        "data-0",
        "02:06:00:00:00:03",
        "s1",
    )
    .await;
    assert!(
        ping(&m1, &a2).await,
        "VM on cluster A reaches VM on cluster B"
    );
    assert!(ping(&m1, &a3).await, "VM reaches a bare-metal server");
    assert!(ping(&m3, &a1).await && ping(&m2, "10.0.1.1").await);

    // Security groups apply to VM ports in the hosting cluster too.
    let sg = ApplySecurityGroupRequest {
        security_group_id: env.id("sg"),
        virtual_network_id: env.id("vn"),
        ingress: vec![rule(Protocol::Tcp, Some((22, 22)), "0.0.0.0/0")],
        egress: vec![rule(Protocol::All, None, "0.0.0.0/0")],
    };
    c.apply_security_group(&sg).await.unwrap();
    c.create_network_attachment(&port_req(
        &env,
        "p1",
        &clusters[0],
        &format!("{vm1}/eth0"),
        "02:06:00:00:00:01",
        "s1",
        &[env.id("sg")],
    ))
    .await
    .unwrap();
    assert!(
        !ping_once(&m2, &a1).await,
        "VM ingress filtered in its hosting cluster"
    );
    let _srv = tcp_server(&m1, "0.0.0.0", 22).await;
    assert!(tcp_ok(&m2, &a1, 22).await && tcp_ok(&m3, &a1, 22).await);

    // Hairpin through the router's overlay port: vm1 at its ExternalIP from a VM of another
    // hosting cluster, from one of its own hosting cluster, and from itself.
    let vm3 = env.id("vm3");
    let (m4, _a4) = plug_open(
        &env,
        "p4",
        &clusters[0],
        &format!("{vm3}/eth0"),
        "02:06:00:00:00:04",
        "s1",
    )
    .await;
    let e1 = env.external_ip("e1").await;
    c.create_external_ip_attachment(&CreateExternalIpAttachmentRequest {
        attachment_id: env.id("dnat"),
        virtual_network_id: env.id("vn"),
        external_address: e1,
        target_ip: a1.parse().unwrap(),
    })
    .await
    .unwrap();
    let e1s = e1.to_string();
    assert!(
        tcp_ok(&m2, &e1s, 22).await,
        "hairpin across hosting clusters"
    );
    assert!(
        tcp_ok(&m4, &e1s, 22).await,
        "hairpin within a hosting cluster"
    );
    assert!(
        tcp_ok(&m1, &e1s, 22).await,
        "a VM reaches its own ExternalIP"
    );
    // The overlay port reflects nothing else, and what it reflects carries the gateway's MAC:
    // after vm1 broadcast (ARP for an unused address) and hairpinned to itself, its hosting
    // cluster still knows vm1 behind vm1's own port, not behind the overlay link.
    assert!(!ping_once(&m1, "10.0.1.200").await);
    let hc = names::hosting_ns(&clusters[0]);
    let fdb = sh_out(
        &hc,
        &[
            "bridge",
            "fdb",
            "show",
            "br",
            &names::subnet_bridge(&env.id("s1")),
        ],
    )
    .await;
    let vm1_port = fdb
        .lines()
        .find(|l| l.starts_with("02:06:00:00:00:01 ") && l.contains(" master "))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap_or_else(|| panic!("vm1's MAC not learnt in its hosting cluster:\n{fdb}"));
    assert_ne!(
        vm1_port,
        names::vxlan_dev(s.segment_id),
        "vm1's own frames came back through the overlay link:\n{fdb}"
    );
    assert!(tcp_ok(&m4, &a1, 22).await, "vm3 still reaches vm1 directly");
    // A flood (here a UDP broadcast of vm3, which has no group to filter what it receives)
    // never comes back to its sender through the router.
    let own = osac_linux::probe::capture::Capture::start(&m4, "eth0").expect("capture");
    let to = "10.0.1.255:9".parse().unwrap();
    osac_linux::probe::udp_send(&m4, to, b"reflected?").expect("broadcast");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        own.frames_with(b"reflected").is_empty(),
        "vm3's broadcast was reflected back to it"
    );
    env.teardown().await;
}

#[tokio::test]
async fn gc_removes_only_unowned_state_with_our_prefix() {
    if !common::ready().await {
        return;
    }
    let env = Env::new(7).await;
    let leaked_router = names::router_ns(&env.id("leaked-vn"));
    let leaked_machine = names::machine_ns(&env.id("leaked-vm"));
    let kept_machine = names::machine_ns(&env.id("kept-vm"));
    let foreign = format!("xt-foreign-{}", std::process::id());
    let _ = env.id("kept-vm");
    for ns in [&leaked_router, &leaked_machine, &kept_machine, &foreign] {
        cmd::ensure_netns(ns).await.unwrap();
    }
    let owned = osac_linux::OwnedSet {
        machines: [env.id("kept-vm")].into(),
        ..Default::default()
    };
    let scope = vec![
        leaked_router.clone(),
        leaked_machine.clone(),
        kept_machine.clone(),
        foreign.clone(),
        names::EXT_NS.to_string(),
    ];
    let report = osac_linux::fabric_manager::gc_among(&owned, Some(&scope))
        .await
        .unwrap();
    let mut removed = report.namespaces.clone();
    removed.sort();
    let mut want = vec![leaked_router.clone(), leaked_machine.clone()];
    want.sort();
    assert_eq!(removed, want);
    assert!(cmd::netns_exists(&kept_machine).await.unwrap());
    assert!(
        cmd::netns_exists(&foreign).await.unwrap(),
        "never touches names without our prefix"
    );
    assert!(cmd::netns_exists(names::EXT_NS).await.unwrap());
    cmd::delete_netns(&foreign).await.unwrap();
    cmd::delete_netns(&kept_machine).await.unwrap();
    env.teardown().await;
}

async fn wait_bound(c: &osac_linux::dhcp::DhcpClient) -> osac_linux::dhcp::apply::Applied {
    for _ in 0..200 {
        match c.status() {
            osac_linux::dhcp::Status::Bound(a) => return a,
            osac_linux::dhcp::Status::Stopped(why) => panic!("client stopped: {why}"),
            osac_linux::dhcp::Status::Searching => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await
            }
        }
    }
    panic!("no lease after 20 s");
}

#[tokio::test]
async fn dhcp_serves_reservations_with_the_router_only_to_primary_ports() {
    let Some(env) = env_with_subnet(8).await else {
        return;
    };
    let c = &env.client;
    c.create_subnet(&subnet_req(&env, "vn", "s2", 2))
        .await
        .unwrap();
    // A multi-homed bare-metal server: data-0 primary on s1, data-1 secondary on s2.
    let host = env.id("bm");
    let (mac0, mac1) = ("02:08:00:00:00:01", "02:08:00:00:00:02");
    let p0 = c
        .create_network_attachment(&port_req(
            &env,
            "p0",
            &host,
            "data-0",
            mac0,
            "s1",
            &wide_open(&env).await,
        ))
        .await
        .unwrap();
    let mut secondary = port_req(
        &env,
        "p1",
        &host,
        "data-1",
        mac1,
        "s2",
        &wide_open(&env).await,
    );
    secondary.primary = false;
    let p1 = c.create_network_attachment(&secondary).await.unwrap();
    let ns = names::machine_ns(&host);
    let lease = |s: &str, mac: &str| QueryDhcpLeaseRequest {
        subnet_id: env.id(s),
        mac_address: mac.into(),
    };
    assert!(
        c.query_dhcp_lease(&lease("s1", mac0))
            .await
            .unwrap()
            .is_empty(),
        "no lease before DHCP"
    );

    let start = |ifname: &str, mac: &str| {
        osac_linux::dhcp::DhcpClient::start(osac_linux::dhcp::ClientConfig {
            netns: ns.clone(),
            ifname: ifname.into(),
            mac: osac_linux::dhcp::packet::parse_mac(mac).expect("mac"),
            hostname: None,
            timing: Default::default(),
        })
        .unwrap()
    };
    let c0 = start("data-0", mac0);
    let c1 = start("data-1", mac1);
    let a0 = wait_bound(&c0).await;
    let a1 = wait_bound(&c1).await;
    assert_eq!(
        Some(IpAddr::V4(a0.address)),
        p0.ipv4_address,
        "the fabric's reservation"
    );
    assert_eq!(Some(IpAddr::V4(a1.address)), p1.ipv4_address);
    assert_eq!(a0.mtu, Some(1450));
    let routes = sh_out(&ns, &["ip", "-4", "route", "show", "default"]).await;
    assert_eq!(
        routes.lines().count(),
        1,
        "exactly one default route: {routes}"
    );
    assert!(routes.contains("via 10.0.1.1 dev data-0"), "{routes}");
    assert_eq!(
        c.query_dhcp_lease(&lease("s1", mac0))
            .await
            .unwrap()
            .ipv4_address,
        p0.ipv4_address
    );
    assert_eq!(
        c.query_dhcp_lease(&lease("s2", mac1))
            .await
            .unwrap()
            .ipv4_address,
        p1.ipv4_address
    );
    assert!(ping(&ns, "10.0.2.1").await && ping(&ns, "10.0.1.1").await);
    c0.stop(false);
    c1.stop(false);
    env.teardown().await;
}
