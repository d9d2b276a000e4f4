//! The scenarios of the dataplane suite, one tenant each.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use osac_linux::probe::raw::UdpFrame;
use osac_linux::probe::{self, Listener, TcpSession};

use crate::harness::{
    self, Dp, EXT_GATEWAY, EXT_NS, IN_GROUP_OPEN, IN_GROUP_WEB, IN_NO_GROUP, blocking, items,
};
use crate::probes::{WAIT, any, connects, listen_tcp, ping, ping_once, reaches, sock, wait_until};
use crate::{Scenario, scenario};

/// Every scenario, in order.
pub static ALL: &[(&str, Scenario)] = &[
    (
        "same_subnet_l2_and_hosting_clusters",
        scenario!(same_subnet_l2),
    ),
    (
        "two_subnets_route_through_the_gateway",
        scenario!(two_subnets_route),
    ),
    (
        "tenants_with_identical_cidrs_are_isolated",
        scenario!(isolation),
    ),
    ("vm_and_bare_metal_share_a_subnet", scenario!(vm_and_bm)),
    (
        "security_groups_allow_deny_reply_update",
        scenario!(security_groups),
    ),
    (
        "vm_ports_cannot_forge_source_or_answer_dhcp",
        scenario!(anti_spoofing),
    ),
    ("external_ip_attachment_dnat_and_removal", scenario!(dnat)),
    ("nat_gateway_source_address", scenario!(nat_gateway)),
    ("garbage_collection_removes_only_leaks", scenario!(gc)),
    (
        "bandwidth_metering_dnat_and_snat",
        scenario!(crate::scenarios_metering::bandwidth),
    ),
    (
        "cluster_vips_dnat_from_external",
        scenario!(crate::scenarios_cluster::cluster_vips_dnat_from_external),
    ),
    (
        "security_groups_bm_and_cluster_agent",
        scenario!(crate::scenarios_cluster::security_groups_bm_and_cluster_agent),
    ),
    (
        "removed_rule_and_established_flows",
        scenario!(crate::scenarios_cluster::removed_rule_and_established_flows),
    ),
    (
        "vms_on_two_hosting_clusters",
        scenario!(crate::scenarios_lifecycle::two_hosting_clusters),
    ),
    (
        "multi_homed_bare_metal_one_default_route",
        scenario!(crate::scenarios_lifecycle::multi_homed_bare_metal),
    ),
    (
        "gc_removes_leaked_nft_table",
        scenario!(crate::scenarios_lifecycle::gc_leaked_nft_table),
    ),
    (
        "ipv6_dual_stack_vms_dhcpv6_ra_sg_spoofing",
        scenario!(crate::scenarios_ipv6::dual_stack_vms),
    ),
    ("differential", scenario!(crate::differential::differential)),
    // Last: it restarts the shared server.
    (
        "server_restart_mid_create_converges",
        scenario!(crate::scenarios_lifecycle::restart_mid_create),
    ),
];

/// Two VMs on one subnet (hosting clusters chosen by id, so often A and B): they resolve each
/// other by ARP, ping, and a broadcast from one reaches the other, whose group allows it; a
/// third VM on the default group (no UDP allowed in) does not get the broadcast: security
/// groups filter broadcasts like unicast.
async fn same_subnet_l2(dp: Arc<Dp>) {
    let t = dp.tenant("l2").await;
    dp.ok(
        &t,
        &[
            "create",
            "security-group",
            "--virtual-network",
            "default",
            "--name",
            "l2",
            "--ingress",
            "protocol:icmp,source:0.0.0.0/0",
            "--ingress",
            "protocol:udp,port:7777,source:10.0.1.0/24",
            "--egress",
            "protocol:all,destination:0.0.0.0/0",
            "--wait",
        ],
    )
    .await;
    let att = [
        "--network-attachment",
        "subnet=default-ipv4,security-groups=l2",
    ];
    let a = dp.vm(&t, "a", &att).await;
    let b = dp.vm(&t, "b", &att).await;
    let c = dp.vm(&t, "c", &[]).await;
    assert!(
        ping(&a.ns, b.ip).await,
        "a cannot ping b on the same subnet"
    );
    assert!(ping(&b.ns, a.ip).await, "b cannot ping a");
    let learned = blocking({
        let (ns, ip) = (a.ns.clone(), b.ip);
        move || probe::neighbour_mac(&ns, ip)
    })
    .await;
    assert_eq!(
        learned.as_deref(),
        Some(b.mac.as_str()),
        "a's ARP entry for b"
    );
    let l = blocking({
        let ns = b.ns.clone();
        move || Listener::udp(&ns, "0.0.0.0:7777".parse().expect("addr"))
    })
    .await
    .expect("udp listener");
    let filtered = blocking({
        let ns = c.ns.clone();
        move || Listener::udp(&ns, "0.0.0.0:7777".parse().expect("addr"))
    })
    .await
    .expect("udp listener");
    let bcast: IpAddr = "10.0.1.255".parse().expect("ip");
    blocking({
        let ns = a.ns.clone();
        move || probe::udp_send(&ns, sock(bcast, 7777), b"hello-l2")
    })
    .await
    .expect("broadcast");
    assert!(
        blocking(move || l.wait_for(WAIT, |p| p.iter().any(|x| x == b"hello-l2"))).await,
        "a's broadcast did not reach b"
    );
    assert!(
        !blocking(
            move || filtered.wait_for(std::time::Duration::from_secs(1), |p| p
                .iter()
                .any(|x| x == b"hello-l2"))
        )
        .await,
        "a's broadcast reached c, whose default group allows no UDP in"
    );
}

/// A second subnet in the tenant's VirtualNetwork: VMs on the two subnets reach each other.
async fn two_subnets_route(dp: Arc<Dp>) {
    let t = dp.tenant("route").await;
    dp.subnet(&t, "default", "second", &["10.0.2.0/24"]).await;
    let a = dp.vm(&t, "a", &[]).await;
    let c = dp
        .vm(
            &t,
            "c",
            &[
                "--network-attachment",
                "subnet=second,security-groups=default",
            ],
        )
        .await;
    assert!(c.ip.to_string().starts_with("10.0.2."), "c got {}", c.ip);
    assert!(
        ping(&a.ns, c.ip).await,
        "10.0.1.x cannot reach 10.0.2.x through the router"
    );
    assert!(ping(&c.ns, a.ip).await, "10.0.2.x cannot reach 10.0.1.x");
}

/// Two tenants with identical CIDRs, and two VNs of one tenant: no path between them.
async fn isolation(dp: Arc<Dp>) {
    let t1 = dp.tenant("iso-one").await;
    let t2 = dp.tenant("iso-two").await;
    let x = dp.vm(&t1, "x", &[]).await;
    let y1 = dp.vm(&t2, "y1", &[]).await;
    let y2 = dp.vm(&t2, "y2", &[]).await;
    assert_eq!(
        x.ip, y1.ip,
        "identical CIDRs give identical first addresses"
    );
    assert!(
        ping(&y1.ns, y2.ip).await,
        "control: y1 reaches y2 in its own VN"
    );
    // y2's address exists only in tenant two's network.
    assert!(
        !ping_once(&x.ns, y2.ip).await,
        "tenant one reached tenant two's {}",
        y2.ip
    );
    let _l = listen_tcp(&y2.ns, any(y2.ip), 22).await;
    assert!(
        !connects(&x.ns, y2.ip, 22).await,
        "tenant one opened TCP to tenant two"
    );
    // A second VN of tenant one.
    let z = dp
        .vm_in_new_network(&t1, "other", "10.9.0.0/16", "10.9.1.0/24", "z")
        .await;
    assert!(!ping_once(&x.ns, z.ip).await, "VN default reached VN other");
    assert!(!ping_once(&z.ns, x.ip).await, "VN other reached VN default");
}

/// A VM and a bare-metal server on one subnet reach each other at their subnet addresses.
async fn vm_and_bm(dp: Arc<Dp>) {
    let t = dp.tenant("vmbm").await;
    let v = dp.vm(&t, "v", &[]).await;
    let b = dp.bm(&t, "b", &[]).await;
    assert_eq!(b.ifname, "data-0");
    assert!(
        ping(&v.ns, b.ip).await,
        "VM cannot reach the bare-metal server"
    );
    assert!(
        ping(&b.ns, v.ip).await,
        "bare-metal server cannot reach the VM"
    );
    let routes = blocking({
        let ns = b.ns.clone();
        move || probe::default_routes(&ns)
    })
    .await;
    assert_eq!(routes.len(), 1, "exactly one default route: {routes:?}");
    assert!(routes[0].contains("dev data-0"), "{routes:?}");
}

/// Allowed port passes (and its replies), other ports and protocols are dropped, an added rule
/// takes effect, a removed one stops new flows; two groups are a union; a wide-open group opens
/// every port; no group is closed.
async fn security_groups(dp: Arc<Dp>) {
    let t = dp.tenant("sg").await;
    dp.security_group(
        &t,
        "default",
        "web",
        &["protocol:tcp,port:8080,source:0.0.0.0/0"],
    )
    .await;
    dp.security_group(
        &t,
        "default",
        "db",
        &["protocol:tcp,port:5432,source:0.0.0.0/0"],
    )
    .await;
    let client = dp.vm(&t, "client", &[]).await;
    let server = dp.vm(&t, "server", IN_GROUP_WEB).await;
    let both = dp
        .vm(
            &t,
            "both",
            &[
                "--network-attachment",
                "subnet=default-ipv4,security-groups=web;db",
            ],
        )
        .await;
    dp.open_group(&t, "default", "open").await;
    let open = dp.vm(&t, "open", IN_GROUP_OPEN).await;
    let closed = dp.vm(&t, "closed", IN_NO_GROUP).await;
    let mut ls = Vec::new();
    for m in [&server, &both, &open, &closed] {
        for port in [8080, 5432, 9090] {
            ls.push(listen_tcp(&m.ns, any(m.ip), port).await);
        }
    }
    assert!(
        reaches(&client.ns, server.ip, 8080).await,
        "allowed tcp/8080 (with its replies) must pass"
    );
    assert!(
        !connects(&client.ns, server.ip, 9090).await,
        "tcp/9090 must be dropped"
    );
    assert!(
        !ping_once(&client.ns, server.ip).await,
        "icmp must be dropped by 'web'"
    );
    assert!(reaches(&client.ns, both.ip, 8080).await, "union: web");
    assert!(reaches(&client.ns, both.ip, 5432).await, "union: db");
    assert!(
        !connects(&client.ns, both.ip, 9090).await,
        "union: nothing else"
    );
    assert!(
        reaches(&client.ns, open.ip, 9090).await,
        "a wide-open group opens every port"
    );
    assert!(
        !connects(&client.ns, closed.ip, 8080).await && !ping_once(&client.ns, closed.ip).await,
        "a port without groups is closed"
    );
    assert!(
        !connects(&closed.ns, open.ip, 9090).await,
        "a port without groups sends nothing"
    );
    // An established session, then rule changes.
    let session = {
        let (ns, to) = (client.ns.clone(), sock(server.ip, 8080));
        blocking(move || TcpSession::open(&ns, to, WAIT))
            .await
            .expect("session")
    };
    dp.ok(
        &t,
        &[
            "update",
            "securitygroup",
            "web",
            "--ingress",
            "protocol:tcp,port:8080,source:0.0.0.0/0",
            "--ingress",
            "protocol:tcp,port:9090,source:0.0.0.0/0",
        ],
    )
    .await;
    let (cns, sip) = (client.ns.clone(), server.ip);
    wait_until(
        move || connects_sync(&cns, sip, 9090),
        "an added rule (tcp/9090) takes effect",
    )
    .await;
    dp.ok(
        &t,
        &[
            "update",
            "securitygroup",
            "web",
            "--ingress",
            "protocol:tcp,port:9090,source:0.0.0.0/0",
        ],
    )
    .await;
    let cns = client.ns.clone();
    wait_until(
        move || !connects_sync(&cns, sip, 8080),
        "a removed rule (tcp/8080) stops new flows",
    )
    .await;
    // Documented (docs/dataplane.md): established flows survive a rule removal (AWS
    // semantics; conntrack keeps them).
    let alive = blocking(move || session.alive()).await;
    eprintln!("    established tcp/8080 session after rule removal: alive = {alive}");
    drop(ls);
}

/// A VM's port only sends with its own MAC and address, and never as a DHCP server: frames
/// with a forged source IP or MAC, or from UDP port 67, never reach the neighbour that
/// receives the genuine one.
async fn anti_spoofing(dp: Arc<Dp>) {
    let t = dp.tenant("spoof").await;
    dp.open_group(&t, "default", "open").await;
    let a = dp.vm(&t, "a", IN_GROUP_OPEN).await;
    let b = dp.vm(&t, "b", IN_GROUP_OPEN).await;
    let l = blocking({
        let ns = b.ns.clone();
        move || Listener::udp(&ns, "0.0.0.0:7878".parse().expect("addr"))
    })
    .await
    .map(Arc::new)
    .expect("udp listener");
    let (IpAddr::V4(a_ip), IpAddr::V4(b_ip)) = (a.ip, b.ip) else {
        panic!("IPv4 addresses expected: {} {}", a.ip, b.ip);
    };
    let mac =
        |m: &str| osac_linux::dhcp::packet::parse_mac(m).unwrap_or_else(|| panic!("bad MAC '{m}'"));
    let genuine = UdpFrame {
        src_mac: mac(&a.mac),
        dst_mac: mac(&b.mac),
        src_ip: a_ip,
        dst_ip: b_ip,
        src_port: 40000,
        dst_port: 7878,
    };
    // Ports may send from the subnet's VIP block (cluster agents answer VIPs): forge an
    // unassigned address outside it.
    let subnet = dp.json(&t, &["get", "subnet", "default-ipv4"]).await;
    let vips = subnet["status"]["vip_cidr"].as_str().unwrap_or_default();
    let forged = (100u8..230)
        .map(|i| std::net::Ipv4Addr::new(10, 0, 1, i))
        .find(|ip| *ip != a_ip && *ip != b_ip && !in_cidr(*ip, vips))
        .unwrap_or_else(|| panic!("no address to forge outside the VIP block {vips}"));
    let forged_ip = UdpFrame {
        src_ip: forged,
        ..genuine
    };
    let forged_mac = UdpFrame {
        src_mac: [0x02, 0xde, 0xad, 0xbe, 0xef, 0x01],
        ..genuine
    };
    // A port never answers as a DHCP server (source port 67), even from its own addresses.
    let dhcp_server = UdpFrame {
        src_port: 67,
        ..genuine
    };
    let send = |f: UdpFrame, payload: &'static [u8]| {
        let (ns, ifname) = (a.ns.clone(), a.ifname.clone());
        blocking(move || probe::send_frame(&ns, &ifname, f.encode(payload)))
    };
    let received = |what: &'static [u8]| {
        let l = l.clone();
        blocking(move || l.wait_for(Duration::from_secs(1), |p| p.iter().any(|x| x == what)))
    };
    // Control first: the genuine frame arrives (retried while neighbours settle).
    let mut arrived = false;
    for _ in 0..5 {
        send(genuine, b"genuine").await.expect("send genuine");
        if received(b"genuine").await {
            arrived = true;
            break;
        }
    }
    assert!(arrived, "control: a's genuine frame did not reach b");
    send(forged_ip, b"forged-ip").await.expect("send forged ip");
    send(forged_mac, b"forged-mac")
        .await
        .expect("send forged mac");
    send(dhcp_server, b"forged-dhcp-server")
        .await
        .expect("send dhcp server reply");
    send(genuine, b"after").await.expect("send genuine");
    assert!(
        received(b"after").await,
        "control: the frame after the forged ones"
    );
    let got: Vec<String> = l
        .payloads()
        .iter()
        .map(|p| String::from_utf8_lossy(p).to_string())
        .collect();
    assert!(
        !got.iter().any(|p| p.starts_with("forged")),
        "a frame with a forged source reached b: {got:?}"
    );
}

/// Whether `ip` is inside the IPv4 CIDR `cidr` (false when `cidr` is not one).
fn in_cidr(ip: std::net::Ipv4Addr, cidr: &str) -> bool {
    let Some((net, len)) = cidr.split_once('/') else {
        return false;
    };
    let (Ok(net), Ok(len)) = (net.parse::<std::net::Ipv4Addr>(), len.parse::<u32>()) else {
        return false;
    };
    let mask = u32::MAX.checked_shl(32 - len.min(32)).unwrap_or(0);
    u32::from(ip) & mask == u32::from(net) & mask
}

fn connects_sync(ns: &str, ip: IpAddr, port: u16) -> bool {
    probe::tcp_connects(ns, sock(ip, port), WAIT).unwrap_or(false)
}

/// An ExternalIPAttachment makes a VM and a bare-metal server reachable from the external
/// namespace on what their groups allow; deleting it stops that, including an open connection.
async fn dnat(dp: Arc<Dp>) {
    let t = dp.tenant("dnat").await;
    let v = dp.vm(&t, "web", &["--external-ip-attachment"]).await;
    let b = dp.bm(&t, "bm-web", &["--external-ip-attachment"]).await;
    for m in [&v, &b] {
        // The single call's attachment is reconciled on its own: wait until it is programmed.
        let (id, ext) = ready_attachment(&dp, &t, &m.id).await;
        dnat_reaches_only_allowed_then_stops(&dp, &t, m, &id, ext).await;
    }
}

async fn dnat_reaches_only_allowed_then_stops(
    dp: &Dp,
    t: &str,
    m: &harness::Machine,
    attachment: &str,
    ext: IpAddr,
) {
    let name = &m.name;
    let _l22 = listen_tcp(&m.ns, any(m.ip), 22).await;
    let _l80 = listen_tcp(&m.ns, any(m.ip), 8080).await;
    assert!(
        ping(EXT_NS, ext).await,
        "{name}: ping the external address from osac-ext"
    );
    assert!(
        reaches(EXT_NS, ext, 22).await,
        "{name}: tcp/22 (allowed by default) via DNAT"
    );
    assert!(
        !connects(EXT_NS, ext, 8080).await,
        "{name}: tcp/8080 is not allowed by the default group"
    );
    let session = blocking(move || TcpSession::open(EXT_NS, sock(ext, 22), WAIT))
        .await
        .expect("session");
    dp.ok(t, &["delete", "externalipattachment", attachment, "--wait"])
        .await;
    assert!(
        !ping_once(EXT_NS, ext).await,
        "{name}: the external address still answers after deletion"
    );
    assert!(
        !connects(EXT_NS, ext, 22).await,
        "{name}: new connections still pass after deletion"
    );
    assert!(
        !blocking(move || session.alive()).await,
        "{name}: an open connection survived the deletion"
    );
}

/// The id and external address of the READY ExternalIPAttachment targeting `instance` (a VM
/// or a bare-metal server).
pub(crate) async fn ready_attachment(dp: &Dp, token: &str, instance: &str) -> (String, IpAddr) {
    let mut last = serde_json::Value::Null;
    for _ in 0..300 {
        last = dp.json(token, &["get", "externalipattachments"]).await;
        let ready = items(&last).into_iter().find(|a| {
            (a["spec"]["compute_instance"].as_str() == Some(instance)
                || a["spec"]["baremetal_instance"].as_str() == Some(instance))
                && a["status"]["state"] == "EXTERNAL_IP_ATTACHMENT_STATE_READY"
        });
        if let Some(a) = ready {
            let id = a["id"].as_str().unwrap_or_default().to_string();
            let ip = a["status"]["external_ip_address"]
                .as_str()
                .and_then(|s| s.parse().ok());
            if let Some(ip) = ip {
                return (id, ip);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no READY external IP attachment for {instance}: {last}");
}

/// New outbound connections leave from the NAT gateway's address; in a VN without a NAT
/// gateway, from the router's own (transit) address.
async fn nat_gateway(dp: Arc<Dp>) {
    let t = dp.tenant("nat").await;
    let v = dp.vm(&t, "out", &[]).await;
    let gws = dp.json(&t, &["get", "natgateways"]).await;
    let nat_ip: IpAddr = items(&gws)
        .first()
        .and_then(|g| {
            g["status"]["address"]
                .as_str()
                .or(g["status"]["external_ip_address"].as_str())
        })
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no NAT gateway address in {gws}"));
    let gw: IpAddr = EXT_GATEWAY.parse().expect("ip");
    let port = 7100;
    let l = listen_tcp(EXT_NS, gw, port).await;
    assert!(
        reaches(&v.ns, gw, port).await,
        "outbound connection to the external host"
    );
    let seen = blocking(move || accepted_peers(&l)).await;
    assert_eq!(seen, vec![nat_ip], "source seen by the external host");
    // A VN without a NAT gateway.
    let w = dp
        .vm_in_new_network(&t, "plain", "10.8.0.0/16", "10.8.1.0/24", "plain-vm")
        .await;
    let l = listen_tcp(EXT_NS, gw, port + 1).await;
    assert!(
        reaches(&w.ns, gw, port + 1).await,
        "outbound without NAT gateway"
    );
    let seen = blocking(move || accepted_peers(&l)).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    let in_transit = seen[0]
        .to_string()
        .starts_with(harness::TRANSIT.trim_end_matches("0.0/16"));
    assert!(
        in_transit && seen[0] != nat_ip,
        "masqueraded to the router's transit address, got {}",
        seen[0]
    );
}

/// The peers `l` accepted, waiting (up to [`WAIT`]) for the first: a client's connect returns
/// once the kernel completed the handshake, before the listener's thread accepted it.
fn accepted_peers(l: &Listener) -> Vec<IpAddr> {
    let until = std::time::Instant::now() + WAIT;
    loop {
        let seen = l.peer_ips();
        if !seen.is_empty() || std::time::Instant::now() > until {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A leaked namespace with our prefix goes; ours and foreign ones stay.
async fn gc(dp: Arc<Dp>) {
    let t = dp.tenant("gc").await;
    let keep = dp.vm(&t, "keep", &[]).await;
    let leaked = "osac-m-0000deadbeef".to_string();
    let foreign = format!("dp-foreign-{}", std::process::id());
    for ns in [&leaked, &foreign] {
        let _ = std::process::Command::new("ip")
            .args(["netns", "add", ns])
            .output();
    }
    let out = dp
        .ok(
            &dp.admin,
            &[
                "admin",
                "dataplane",
                "gc",
                "--scope",
                &leaked,
                "--scope",
                &keep.ns,
                "--scope",
                &foreign,
            ],
        )
        .await;
    let exists = |ns: &str| std::path::Path::new("/run/netns").join(ns).exists();
    let (leaked_gone, keep_there, foreign_there) =
        (!exists(&leaked), exists(&keep.ns), exists(&foreign));
    let _ = std::process::Command::new("ip")
        .args(["netns", "del", &foreign])
        .output();
    assert!(leaked_gone, "leaked namespace not collected: {out}");
    assert!(keep_there, "gc removed a namespace the store owns: {out}");
    assert!(
        foreign_there,
        "gc touched a namespace without our prefix: {out}"
    );
    assert!(
        ping(&keep.ns, "10.0.1.1".parse().expect("ip")).await,
        "the kept VM still works"
    );
}

/// Deletes what the scenarios made, through the API, so the machine is left clean.
pub async fn cleanup(dp: Arc<Dp>) {
    let tenants = dp.json(&dp.admin, &["admin", "get", "tenants"]).await;
    for t in items(&tenants) {
        let name = t["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let Ok(token) = String::from_utf8(
            dp.osac(
                &dp.admin,
                &[
                    "admin",
                    "create",
                    "token",
                    "--tenant",
                    &name,
                    "--role",
                    "tenant-admin",
                ],
            )
            .await
            .stdout,
        ) else {
            continue;
        };
        let token = token.trim().to_string();
        for kind in ["computeinstances", "baremetalinstances", "clusters"] {
            let list = dp.json(&token, &["get", kind]).await;
            let names: Vec<String> = items(&list)
                .iter()
                .filter_map(|o| o["metadata"]["name"].as_str().map(String::from))
                .collect();
            if !names.is_empty() {
                let mut args = vec!["delete", &kind[..kind.len() - 1]];
                args.extend(names.iter().map(String::as_str));
                args.push("--wait");
                let _ = dp.osac(&token, &args).await;
            }
        }
        let _ = dp
            .osac(&dp.admin, &["admin", "delete", "tenant", &name, "--wait"])
            .await;
    }
}
