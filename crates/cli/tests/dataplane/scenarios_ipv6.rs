//! IPv6 on the real dataplane through the API: a dual-stack subnet, two VMs on it (on both
//! hosting clusters when placement allows) configured by our DHCPv6 client and the kernel's
//! RA handling, IPv6 between them and to the gateway, an IPv6 security-group rule, and
//! anti-spoofing of IPv6 sources.

use std::net::{IpAddr, Ipv6Addr, SocketAddr, UdpSocket};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use osac_linux::dhcp::netns;
use osac_linux::fabric_manager::dnsmasq::DnsmasqFiles;
use osac_linux::names;
use osac_linux::probe::Listener;

use crate::harness::{Dp, Machine, blocking};
use crate::probes::{any, connects, listen_tcp, ping, reaches};
use crate::scenarios_lifecycle::hosting_cluster;

/// A VM and the IPv6 address the API reports for its attachment.
struct Vm6 {
    m: Machine,
    v6: Ipv6Addr,
}

/// `ip -n ns -6 -o <args>` output.
fn ip6(ns: &str, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["-n", ns, "-6", "-o"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("ip -n {ns} -6 {args:?}: {e}"));
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The `/64` number `n` of the VN's IPv6 range (prefix length at most 60).
fn sub64(vn: &str, n: u16) -> String {
    let (net, len) = vn
        .split_once('/')
        .unwrap_or_else(|| panic!("not a CIDR: {vn}"));
    let (net, len): (Ipv6Addr, u32) = (
        net.parse().expect("IPv6 network"),
        len.parse().expect("prefix length"),
    );
    assert!(
        len <= 60,
        "VN IPv6 range {vn} too small for a /64 number {n}"
    );
    let a = u128::from(net) | (u128::from(n) << 64);
    format!("{}/64", Ipv6Addr::from(a))
}

/// The IPv6 address the API reports for the VM's (only) attachment, which must be the
/// fabric's reservation in the subnet's dnsmasq host entries (discovery waits for every
/// family of a dual-stack subnet before the VM is RUNNING).
async fn vm6(
    dp: &Dp,
    token: &str,
    m: Machine,
    settings: &osac_linux::LinuxSettings,
    subnet_id: &str,
) -> Vm6 {
    let v = dp.json(token, &["get", "computeinstance", &m.name]).await;
    let st = &v["status"]["compute_network_attachment_statuses"][0];
    let reported = st["ipv6_address"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<Ipv6Addr>().expect("ipv6_address"));
    let hosts = DnsmasqFiles::of(settings, subnet_id).host_entries();
    let reserved = hosts
        .lines()
        .find(|l| l.starts_with(&m.mac))
        .and_then(|l| {
            l.split_once('[')?
                .1
                .split_once(']')
                .map(|(a, _)| a.to_string())
        })
        .and_then(|a| a.parse::<Ipv6Addr>().ok());
    let v6 = reported.unwrap_or_else(|| {
        panic!(
            "{}: the API reports no IPv6 address for a dual-stack attachment: {v}",
            m.name
        )
    });
    assert_eq!(
        Some(v6),
        reserved,
        "{}: reported IPv6 differs from the fabric's reservation\n{hosts}",
        m.name
    );
    Vm6 { m, v6 }
}

/// Waits (up to 20 s) until the VM has its address by DHCPv6 and one IPv6 default route from
/// an RA; returns that route's gateway (a link-local address).
async fn configured6(vm: &Vm6) -> Ipv6Addr {
    let (ns, ifname, v6, name) = (
        vm.m.ns.clone(),
        vm.m.ifname.clone(),
        vm.v6,
        vm.m.name.clone(),
    );
    blocking(move || {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let addrs = ip6(&ns, &["addr", "show", "dev", &ifname, "scope", "global"]);
            let routes = ip6(&ns, &["route", "show", "default"]);
            let has_addr = addrs.contains(&format!(" {v6}/"));
            let defaults: Vec<&str> = routes.lines().filter(|l| !l.trim().is_empty()).collect();
            let via = defaults.first().and_then(|r| {
                let mut w = r.split_whitespace();
                w.find(|x| *x == "via").and_then(|_| w.next()?.parse::<Ipv6Addr>().ok())
            });
            if has_addr && defaults.len() == 1 {
                let r = defaults[0];
                assert!(
                    r.contains("proto ra") && r.contains(&format!("dev {ifname}")),
                    "{name}: the IPv6 default route is not from an RA on {ifname}: {r}"
                );
                if let Some(gw) = via {
                    return gw;
                }
            }
            assert!(
                Instant::now() < until,
                "{name}: no DHCPv6 address {v6} or single RA default route in {ns}:\n{addrs}\n{routes}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    })
    .await
}

/// Sends one UDP datagram from `ns`, bound to source `src`, to `to`.
async fn udp_from(ns: &str, src: Ipv6Addr, to: SocketAddr, payload: &'static [u8]) {
    let ns = ns.to_string();
    blocking(move || {
        netns::run_in(&ns, move || {
            let s = UdpSocket::bind(SocketAddr::new(IpAddr::V6(src), 0))?;
            s.send_to(payload, to).map(|_| ())
        })
    })
    .await
    .unwrap_or_else(|e| panic!("udp from [{src}] to {to}: {e}"));
}

/// A tenant's dual-stack subnet with two VMs: DHCPv6 addresses, one RA default route via the
/// subnet's gateway, ping6 between them and to the gateway `::1`, an IPv6-only SG rule
/// enforced over IPv6 (and not over IPv4), and a forged IPv6 source dropped.
pub async fn dual_stack_vms(dp: Arc<Dp>) {
    let t = dp.tenant("v6").await;
    let vn = dp.json(&t, &["get", "virtualnetwork", "default"]).await;
    let vn_v6 = vn["spec"]["ipv6_cidr"]
        .as_str()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| panic!("the default VN has no IPv6 range: {vn}"))
        .to_string();
    let cidr6 = sub64(&vn_v6, 5);
    dp.subnet(&t, "default", "dual", &["10.0.5.0/24", &cidr6])
        .await;
    let subnet = dp.json(&t, &["get", "subnet", "dual"]).await;
    let gw6: Ipv6Addr = subnet["status"]["ipv6_gateway"]
        .as_str()
        .and_then(|g| g.parse().ok())
        .unwrap_or_else(|| panic!("subnet dual: no ipv6_gateway in {subnet}"));
    assert_eq!(
        u128::from(gw6),
        u128::from(
            cidr6
                .split('/')
                .next()
                .expect("net")
                .parse::<Ipv6Addr>()
                .expect("ip")
        ) | 1,
        "the gateway is ::1 of {cidr6}"
    );
    let subnet_id = subnet["id"].as_str().expect("subnet id").to_string();
    dp.security_group(
        &t,
        "default",
        "web6",
        &["protocol:tcp,port:8080,source:::/0"],
    )
    .await;
    // b: default (ICMP, 22, 443) + web6 (tcp/8080 over IPv6 only); a: wide open.
    let b = dp
        .vm(
            &t,
            "b",
            &[
                "--network-attachment",
                "subnet=dual,security-groups=default;web6",
            ],
        )
        .await;
    let b_cluster = hosting_cluster(&dp, &b.id).await;
    dp.open_group(&t, "default", "open").await;
    let open = ["--network-attachment", "subnet=dual,security-groups=open"];
    let mut a = dp.vm(&t, "a", &open).await;
    for i in 1..4 {
        if hosting_cluster(&dp, &a.id).await != b_cluster {
            break;
        }
        a = dp.vm(&t, &format!("a{i}"), &open).await;
    }
    let a_cluster = hosting_cluster(&dp, &a.id).await;
    eprintln!("    a on {a_cluster}, b on {b_cluster}");
    assert!(a.ip.to_string().starts_with("10.0.5."), "a got {}", a.ip);
    let a = vm6(&dp, &t, a, &dp.settings, &subnet_id).await;
    let b = vm6(&dp, &t, b, &dp.settings, &subnet_id).await;
    let net6: Ipv6Addr = cidr6.split('/').next().expect("net").parse().expect("ip");
    for vm in [&a, &b] {
        assert_eq!(
            u128::from(vm.v6) >> 64,
            u128::from(net6) >> 64,
            "{}: {} is not in {cidr6}",
            vm.m.name,
            vm.v6
        );
    }
    assert_ne!(a.v6, b.v6);
    // The RA default route goes via the gateway: the router's link-local on the subnet bridge.
    let vn_id = vn["id"].as_str().expect("vn id");
    let bridge_ll = ip6(
        &names::router_ns(vn_id),
        &[
            "addr",
            "show",
            "dev",
            &names::subnet_bridge(&subnet_id),
            "scope",
            "link",
        ],
    );
    for vm in [&a, &b] {
        let gw = configured6(vm).await;
        assert!(
            bridge_ll.contains(&format!(" {gw}/")),
            "{}: default route via {gw}, not the subnet gateway's link-local: {bridge_ll}",
            vm.m.name
        );
    }
    let (a6, b6) = (IpAddr::V6(a.v6), IpAddr::V6(b.v6));
    assert!(ping(&a.m.ns, b6).await, "a cannot ping6 b");
    assert!(ping(&b.m.ns, a6).await, "b cannot ping6 a");
    for vm in [&a, &b] {
        assert!(
            ping(&vm.m.ns, IpAddr::V6(gw6)).await,
            "{} cannot ping6 the gateway {gw6}",
            vm.m.name
        );
    }
    // IPv6 security group: tcp/8080 from ::/0 passes over IPv6; 9090 does not; 8080 over
    // IPv4 does not either (the rule is IPv6-only and `default` does not allow it).
    let mut ls = Vec::new();
    for (ip, port) in [(b6, 8080), (b6, 9090), (b.m.ip, 8080)] {
        ls.push(listen_tcp(&b.m.ns, any(ip), port).await);
    }
    assert!(
        reaches(&a.m.ns, b6, 8080).await,
        "tcp/8080 over IPv6 is allowed by web6"
    );
    assert!(
        !connects(&a.m.ns, b6, 9090).await,
        "tcp/9090 over IPv6 must be dropped"
    );
    assert!(
        !connects(&a.m.ns, b.m.ip, 8080).await,
        "tcp/8080 over IPv4 must be dropped (web6 allows ::/0 only)"
    );
    drop(ls);
    forged_source_dropped(&a, &b, net6).await;
}

/// b sends UDP to a (open port) from its own IPv6 address, then from an address it was not
/// given (configured on its interface by hand, deprecated so the kernel never picks it by
/// itself), then from its own again: a receives the genuine datagrams only. Real sockets, so
/// the kernel builds the IPv6 frames (`probe::raw` builds IPv4 frames only).
async fn forged_source_dropped(a: &Vm6, b: &Vm6, net6: Ipv6Addr) {
    let l = blocking({
        let ns = a.m.ns.clone();
        move || Listener::udp(&ns, "[::]:7878".parse().expect("addr"))
    })
    .await
    .map(Arc::new)
    .expect("udp listener");
    let to = SocketAddr::new(IpAddr::V6(a.v6), 7878);
    let received = |what: &'static [u8]| {
        let l = l.clone();
        blocking(move || l.wait_for(Duration::from_secs(1), |p| p.iter().any(|x| x == what)))
    };
    let mut arrived = false;
    for _ in 0..5 {
        udp_from(&b.m.ns, b.v6, to, b"genuine").await;
        if received(b"genuine").await {
            arrived = true;
            break;
        }
    }
    assert!(
        arrived,
        "control: b's genuine IPv6 datagram did not reach a"
    );
    let forged = Ipv6Addr::from(u128::from(net6) | 0xdead);
    assert!(forged != a.v6 && forged != b.v6);
    let (ns, ifname) = (b.m.ns.clone(), b.m.ifname.clone());
    let cidr = format!("{forged}/128");
    let out = Command::new("ip")
        .args(["-n", &ns, "-6", "addr", "add", &cidr, "dev", &ifname])
        .args(["nodad", "preferred_lft", "0"])
        .output()
        .expect("ip addr add");
    assert!(
        out.status.success(),
        "add the forged address: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    udp_from(&b.m.ns, forged, to, b"forged-ipv6").await;
    udp_from(&b.m.ns, b.v6, to, b"after").await;
    let after = received(b"after").await;
    let _ = Command::new("ip")
        .args(["-n", &ns, "-6", "addr", "del", &cidr, "dev", &ifname])
        .output();
    assert!(after, "control: the datagram after the forged one");
    let got: Vec<String> = l
        .payloads()
        .iter()
        .map(|p| String::from_utf8_lossy(p).to_string())
        .collect();
    assert!(
        !got.iter().any(|p| p.starts_with("forged")),
        "a datagram with a forged IPv6 source reached a: {got:?}"
    );
}
