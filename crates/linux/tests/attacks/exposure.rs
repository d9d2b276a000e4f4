//! The exposure scan: every address and listening socket of every infrastructure namespace a
//! tenant's traffic touches (both routers, both hosting clusters, the parking network) and of
//! the server's host is enumerated, and a VM and a bare-metal server of a hostile tenant probe
//! all of them (ICMP echo, TCP, UDP). Only the contract's gateway services may answer: echo
//! from the attacker's own gateway addresses (DHCP never answers a stray datagram). The
//! listening sockets themselves are an inventory: DHCP (67, 547) in routers and VXLAN (4789)
//! in routers and hosting clusters; a new one fails this test until the contract covers it.
//! The other tenant, whose CIDRs are identical, is probed at an address only it uses.
//!
//! `osac-ext` is the provider's external network — in this lab also "the internet" the VNs
//! reach through NAT — and is deliberately not in the scan (docs/dataplane.md).
//!
//! Stopped by: the routers' `hostin` chain (gateway services only, `fib daddr . iif` for
//! echo), the guard table of hosting clusters and parking, and the uplink accepting only
//! replies. Mutation-checked: with `hostin`'s final `drop` removed, the router's transit and
//! underlay addresses and the other subnets' gateways answered ping from the bare-metal
//! attacker; with the guard's input policy set to accept, the hosting cluster's underlay
//! address answered the VM attacker.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use osac_linux::{kernel, names};

use super::{Kind, Machine, World, leaked, marker, pings, tcp_answered, udp_answered};

/// Addresses of every interface of a namespace (`None`: the host's own namespace).
async fn addresses(ns: Option<&str>) -> Vec<IpAddr> {
    let mut cmd = tokio::process::Command::new("ip");
    if let Some(ns) = ns {
        cmd.args(["-n", ns]);
    }
    let out = cmd.args(["-j", "addr", "show"]).output().await.unwrap();
    let links: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let mut found = Vec::new();
    for link in links.as_array().into_iter().flatten() {
        if link["ifname"] == "lo" {
            continue;
        }
        for a in link["addr_info"].as_array().into_iter().flatten() {
            if let Some(ip) = a["local"].as_str().and_then(|s| s.parse().ok()) {
                found.push(ip);
            }
        }
    }
    found
}

/// Listening sockets of a namespace as (protocol, port).
async fn listening(ns: &str) -> BTreeSet<(String, u16)> {
    let out = tokio::process::Command::new("ip")
        .args(["netns", "exec", ns, "ss", "-Hlntu"])
        .output()
        .await
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let port = f.get(4)?.rsplit(':').next()?.parse().ok()?;
            Some((f.first()?.to_string(), port))
        })
        .collect()
}

/// One probe: whether it got an answer.
type Probe = Box<dyn Fn() -> bool + Send + Sync>;

/// What `m` can reach of `targets` (a description per answer).
fn answers(m: &Machine, targets: &[IpAddr], tcp: &[u16], udp: &[u16]) -> Vec<(IpAddr, String)> {
    let sock = |ip: IpAddr, port: u16| match ip {
        IpAddr::V6(v6) if v6.is_unicast_link_local() => m.scoped(v6, port),
        _ => SocketAddr::new(ip, port),
    };
    let mut jobs: Vec<(IpAddr, String, Probe)> = Vec::new();
    for &ip in targets {
        let (ns, ifname) = (m.ns.clone(), m.ifname.clone());
        jobs.push((
            ip,
            "icmp echo".into(),
            Box::new(move || match ip {
                IpAddr::V6(v6) if v6.is_unicast_link_local() => pings_scoped(&ns, &ifname, v6),
                _ => pings(&ns, ip),
            }),
        ));
        for &p in tcp {
            let (ns, to) = (m.ns.clone(), sock(ip, p));
            jobs.push((
                ip,
                format!("tcp/{p}"),
                Box::new(move || tcp_answered(&ns, to)),
            ));
        }
        for &p in udp {
            let (ns, to) = (m.ns.clone(), sock(ip, p));
            jobs.push((
                ip,
                format!("udp/{p}"),
                Box::new(move || udp_answered(&ns, to)),
            ));
        }
    }
    let mut out = Vec::new();
    for chunk in jobs.chunks(48) {
        std::thread::scope(|s| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|(ip, what, job)| (ip, what, s.spawn(job)))
                .collect();
            for (ip, what, h) in handles {
                if h.join().unwrap_or(false) {
                    out.push((*ip, what.clone()));
                }
            }
        });
    }
    out
}

/// Echo to a link-local address through `ifname` (`ping` needs the interface).
fn pings_scoped(ns: &str, ifname: &str, ip: Ipv6Addr) -> bool {
    (0..2).any(|_| {
        std::process::Command::new("ip")
            .args(["netns", "exec", ns, "ping", "-c1", "-W1", "-I", ifname])
            .arg(ip.to_string())
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

#[tokio::test]
async fn workloads_reach_no_infrastructure_address_or_socket_and_no_other_tenant() {
    if !super::common::ready().await {
        return;
    }
    let w = World::new(19).await;
    kernel::ensure_park().await.unwrap();
    // Tenant B first, so its third machine has an address tenant A does not use.
    let mut other = Vec::new();
    for n in ["vb1", "vb2", "vb3"] {
        other.push(w.machine(n, Kind::Vm, "b1", &w.open("b1").await).await);
    }
    let (evil, evil_bm) = w
        .vm_and_bm("evil", "evilbm", "a1", &w.open("a1").await)
        .await;
    let only_b = other.pop().unwrap();
    assert!(![evil.v4, evil_bm.v4].contains(&only_b.v4));

    let router_a = names::router_ns(&w.id("va"));
    let infra = [
        router_a.clone(),
        names::router_ns(&w.id("vb")),
        names::hosting_ns(&w.k8s.hosting_clusters()[0]),
        names::hosting_ns(&w.k8s.hosting_clusters()[1]),
        names::PARK_NS.to_string(),
    ];
    let mut problems = Vec::new();
    let mut targets: Vec<IpAddr> = Vec::new();
    let mut udp: BTreeSet<u16> = [53, 123, 6081, 8472].into();
    let mut tcp: BTreeSet<u16> = [22, 53, 80, 179, 443, 8080].into();
    for ns in &infra {
        targets.extend(addresses(Some(ns)).await);
        let allowed: &[(&str, u16)] = if ns.starts_with(names::ROUTER_NS_PREFIX) {
            &[("udp", 67), ("udp", 547), ("udp", 4789)]
        } else if ns.starts_with(names::HOSTING_NS_PREFIX) {
            &[("udp", 4789)]
        } else {
            &[]
        };
        for (proto, port) in listening(ns).await {
            if !allowed.contains(&(proto.as_str(), port)) {
                problems.push(format!("{ns} listens on {proto}/{port}"));
            }
            if proto == "udp" {
                udp.insert(port);
            } else {
                tcp.insert(port);
            }
        }
    }
    let hosts = addresses(None).await;
    targets.extend(hosts.iter().filter(|ip| !ip.is_loopback()));
    targets.extend([IpAddr::V4(only_b.v4), IpAddr::V6(only_b.v6)]);
    targets.sort();
    targets.dedup();
    let gateway: Vec<IpAddr> = vec![
        "10.0.1.1".parse().unwrap(),
        "fd10:0:0:1::1".parse().unwrap(),
        IpAddr::V6(kernel::gateway_link_local(&w.id("va"), &w.id("a1")).unwrap()),
    ];
    assert!(
        gateway.iter().all(|g| targets.contains(g)),
        "the scan sees the gateway: {targets:?}"
    );
    let tcp: Vec<u16> = tcp.into_iter().collect();
    let udp: Vec<u16> = udp.into_iter().collect();
    let victim = only_b.capture();
    for (who, m) in [("vm", &evil), ("bm", &evil_bm)] {
        let got = answers(m, &targets, &tcp, &udp);
        for g in &gateway {
            if !got.iter().any(|(ip, what)| ip == g && what == "icmp echo") {
                problems.push(format!("{who}: its gateway {g} does not answer echo"));
            }
        }
        for (ip, what) in got {
            if !(gateway.contains(&ip) && what == "icmp echo") {
                problems.push(format!("{who}: {ip} answered {what}"));
            }
        }
        let attack = format!("{who}-other-tenant");
        let _ = osac_linux::probe::udp_send(
            &m.ns,
            SocketAddr::new(IpAddr::V4(only_b.v4), 9),
            &marker(&attack),
        );
        let _ = osac_linux::probe::udp_send(
            &m.ns,
            SocketAddr::new(IpAddr::V6(only_b.v6), 9),
            &marker(&attack),
        );
        problems.extend(leaked(&[("tenant B's VM", &victim)], &[attack]));
    }
    assert!(
        problems.is_empty(),
        "exposed: {problems:#?}\nscanned: {targets:?}"
    );
    w.env.teardown().await;
}
