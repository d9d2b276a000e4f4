//! IPv6 of the machines: a router namespace with one bridge per subnet, each served by a
//! dnsmasq whose configuration and host entries come from the fabric's renderer (as
//! `create_subnet` / `create_network_attachment` write them), and a machine namespace with
//! one veth per subnet running the provisioner's clients (DHCPv4 + DHCPv6) and RA settings.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use osac_backends::provision::{Nic, ProvisionBareMetalRequest, Provisioner};
use osac_linux::dhcp::packet::parse_mac;
use osac_linux::dhcp::{Applied6, Client6Config, Dhcp6Client, InterfaceStatus, Status, Timing, ra};
use osac_linux::fabric_manager::render::{DnsmasqConf, dnsmasq_conf, dnsmasq_host, parse_leases};
use osac_linux::provision::machines::Clients;
use osac_linux::provision::{LinuxProvisioner, MachineScope};
use std::sync::Arc;

use super::{can_run, sh};

/// The rendered MTU, advertised in the RAs.
const MTU: u32 = 1400;

/// One subnet of the lab: bridge `br<n>` in the router, `eth<n-1>` in the machine.
struct Subnet {
    n: u8,
    mac: &'static str,
    primary: bool,
}

impl Subnet {
    fn bridge(&self) -> String {
        format!("br{}", self.n)
    }
    fn ifname(&self) -> String {
        format!("eth{}", self.n - 1)
    }
    fn net4(&self) -> ipnet::Ipv4Net {
        format!("10.61.{}.0/24", self.n).parse().unwrap()
    }
    fn gw4(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 61, self.n, 1)
    }
    fn addr4(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 61, self.n, 20 + self.n)
    }
    fn net6(&self) -> ipnet::Ipv6Net {
        format!("fd00:61:{}::/64", self.n).parse().unwrap()
    }
    fn gw6(&self) -> Ipv6Addr {
        Ipv6Addr::new(0xfd00, 0x61, u16::from(self.n), 0, 0, 0, 0, 1)
    }
    fn addr6(&self) -> Ipv6Addr {
        Ipv6Addr::new(
            0xfd00,
            0x61,
            u16::from(self.n),
            0,
            0,
            0,
            0,
            0x20 + u16::from(self.n),
        )
    }
}

/// DNS server the renderer gives to primary ports only.
const DNS6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x53, 0, 0, 0, 0, 0, 0x53);

struct Lab6 {
    router: String,
    machine: String,
    dnsmasq: Vec<Child>,
    dir: tempfile::TempDir,
}

impl Drop for Lab6 {
    fn drop(&mut self) {
        for d in &mut self.dnsmasq {
            let _ = d.kill();
            let _ = d.wait();
        }
        for ns in [&self.router, &self.machine] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

impl Lab6 {
    fn new(tag: &str) -> Lab6 {
        Lab6::with_machine(tag, &format!("h2t-{}-{tag}-m", std::process::id()))
    }

    /// A lab whose machine namespace is `machine` (the provisioner's names).
    fn with_machine(tag: &str, machine: &str) -> Lab6 {
        let router = format!("h2t-{}-{tag}-r", std::process::id());
        let machine = machine.to_string();
        for ns in [&router, &machine] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
            sh(&["ip", "netns", "add", ns]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        // A router forwards, as the fabric's router namespaces do: a neighbour advertisement
        // without the Router flag (sent by a non-forwarding host) makes the machine drop its
        // default route through it (RFC 4861 §7.2.5) once neighbour unreachability detection
        // probes the gateway.
        sh(&[
            "ip",
            "netns",
            "exec",
            &router,
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.forwarding=1",
        ]);
        let dir = tempfile::tempdir().expect("tempdir");
        Lab6 {
            router,
            machine,
            dnsmasq: Vec::new(),
            dir,
        }
    }

    fn add_subnet(&mut self, s: &Subnet) {
        let (r, m) = (self.router.clone(), self.machine.clone());
        let (br, ifname, peer) = (s.bridge(), s.ifname(), format!("p{}", s.n));
        sh(&["ip", "-n", &r, "link", "add", &br, "type", "bridge"]);
        sh(&[
            "ip", "-n", &r, "link", "add", &peer, "type", "veth", "peer", "name", &ifname, "netns",
            &m,
        ]);
        sh(&["ip", "-n", &r, "link", "set", &peer, "master", &br, "up"]);
        sh(&["ip", "-n", &r, "link", "set", &br, "up"]);
        let gw4 = format!("{}/24", s.gw4());
        sh(&["ip", "-n", &r, "addr", "add", &gw4, "dev", &br]);
        let gw6 = format!("{}/64", s.gw6());
        sh(&["ip", "-n", &r, "addr", "add", &gw6, "dev", &br, "nodad"]);
        sh(&[
            "ip", "-n", &m, "link", "set", &ifname, "address", s.mac, "up",
        ]);
        // The fabric's files for this subnet.
        let d = self.dir.path().join(&br);
        let hosts = d.join("hosts.d");
        std::fs::create_dir_all(&hosts).unwrap();
        std::fs::write(
            hosts.join("port"),
            dnsmasq_host(s.mac, Some(s.addr4()), Some(s.addr6()), s.primary),
        )
        .unwrap();
        let path = |f: &str| d.join(f).display().to_string();
        let (hosts_dir, leases, pid, log) = (
            hosts.display().to_string(),
            path("leases"),
            path("pid"),
            path("log"),
        );
        let conf = dnsmasq_conf(&DnsmasqConf {
            bridge: &br,
            ipv4: Some((s.net4(), s.gw4())),
            ipv6: Some((s.net6(), s.gw6())),
            mtu: MTU,
            lease_seconds: 3600,
            dns_servers: &[IpAddr::V6(DNS6)],
            hosts_dir: &hosts_dir,
            lease_file: &leases,
            pid_file: &pid,
            log_file: &log,
        });
        std::fs::write(d.join("conf"), conf).unwrap();
        std::fs::write(d.join("leases"), "").unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &r, "dnsmasq", "--keep-in-foreground"])
            .arg(format!("--conf-file={}", path("conf")))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("dnsmasq");
        self.dnsmasq.push(child);
    }

    fn leases(&self, s: &Subnet) -> String {
        std::fs::read_to_string(self.dir.path().join(s.bridge()).join("leases")).unwrap_or_default()
    }

    fn log(&self, s: &Subnet) -> String {
        std::fs::read_to_string(self.dir.path().join(s.bridge()).join("log")).unwrap_or_default()
    }

    fn run(&self, args: &[&str]) -> String {
        let mut full = vec!["ip", "netns", "exec", &self.machine];
        full.extend_from_slice(args);
        sh(&full)
    }

    fn ping(&self, to: &str) -> bool {
        Command::new("ip")
            .args(["netns", "exec", &self.machine, "ping", "-c1", "-w5", to])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    fn default6(&self) -> String {
        sh(&["ip", "-n", &self.machine, "-6", "route", "show", "default"])
    }
}

fn timing() -> Timing {
    Timing {
        renew_cap: Duration::from_secs(1),
        ..Timing::default()
    }
}

fn wait_for<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < until, "{what}: not within {secs} s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn bound6(status: Option<InterfaceStatus>) -> Option<Applied6> {
    match status?.v6 {
        Status::Bound(a) => Some(a),
        Status::Stopped(why) => panic!("DHCPv6 client stopped: {why}"),
        Status::Searching => None,
    }
}

/// `valid_lft` of `addr` in `ip -6 addr show` output.
fn valid_lft(addrs: &str, addr: &str) -> u64 {
    let line = addrs
        .lines()
        .skip_while(|l| !l.contains(addr))
        .nth(1)
        .unwrap_or_else(|| panic!("{addr} not in {addrs}"));
    line.split_whitespace()
        .nth(1)
        .and_then(|v| v.trim_end_matches("sec").parse().ok())
        .unwrap_or_else(|| panic!("no valid_lft in '{line}'"))
}

#[test]
fn multi_homed_machine_gets_reserved_ipv6_addresses_and_one_default_route_from_the_primary() {
    if !can_run() {
        return;
    }
    let s1 = Subnet {
        n: 1,
        mac: "02:61:00:00:00:01",
        primary: true,
    };
    let s2 = Subnet {
        n: 2,
        mac: "02:61:00:00:00:02",
        primary: false,
    };
    let mut lab = Lab6::new("v6a");
    lab.add_subnet(&s1);
    lab.add_subnet(&s2);
    let ns = lab.machine.clone();
    // Like the fabric: links up and served before the provisioner boots the machine, so the
    // kernel may already have learnt a default route on both (its defaults accept RAs).
    std::thread::sleep(Duration::from_secs(2));
    let primary: BTreeMap<String, bool> = [(s1.ifname(), true), (s2.ifname(), false)].into();
    let accepts = ra::configure(&ns, primary).expect("RA settings");
    assert_eq!(
        accepts,
        [(s1.ifname(), true), (s2.ifname(), false)].into(),
        "default router accepted only on the primary"
    );
    let clients = Clients::new(timing());
    for s in [&s1, &s2] {
        clients.ensure(&ns, &s.ifname(), s.mac).expect("clients");
    }
    let a1 = wait_for("DHCPv6 on eth0", 20, || bound6(clients.status(&ns, "eth0")));
    let a2 = wait_for("DHCPv6 on eth1", 20, || bound6(clients.status(&ns, "eth1")));
    assert_eq!(a1.address, s1.addr6(), "dnsmasq's reservation for the MAC");
    assert_eq!(a2.address, s2.addr6());
    assert_eq!((a1.prefix_len, a1.valid), (128, 3600));
    assert_eq!(a1.dns, vec![DNS6], "DNS for the primary port");
    assert!(a2.dns.is_empty(), "no DNS for a secondary port");
    let addrs = lab.run(&["ip", "-6", "addr", "show", "dev", "eth0"]);
    assert!(addrs.contains(&format!("{}/128", s1.addr6())), "{addrs}");
    assert!(
        !addrs.contains("scope global dynamic mngtmpaddr"),
        "no SLAAC: {addrs}"
    );
    // The IPv4 side runs beside it, with its default route on the primary only too.
    let v4 = wait_for("DHCPv4 on eth1", 20, || {
        match clients.status(&ns, "eth1")?.v4 {
            Status::Bound(a) => Some(a),
            _ => None,
        }
    });
    assert_eq!(v4.address, s2.addr4());

    // Exactly one IPv6 default route, learnt from the primary subnet's RA.
    let routes = wait_for("an IPv6 default route on eth0", 20, || {
        let r = lab.default6();
        r.contains("dev eth0").then_some(r)
    });
    assert_eq!(routes.lines().count(), 1, "one default route: {routes}");
    assert!(routes.contains("dev eth0 proto ra"), "{routes}");
    // The secondary subnet stays on-link through its RA prefix information.
    // (Its RA may come a moment after the primary's.)
    wait_for("the secondary prefix on-link from its RA", 20, || {
        let on_link = sh(&["ip", "-n", &ns, "-6", "route", "show", "dev", "eth1"]);
        on_link.contains(&s2.net6().to_string()).then_some(())
    });
    let mtu = lab.run(&["sysctl", "-n", "net.ipv6.conf.eth0.mtu"]);
    assert_eq!(mtu.trim(), MTU.to_string(), "MTU from the RA");
    assert!(lab.ping(&s1.gw6().to_string()), "ping6 the primary gateway");
    assert!(
        lab.ping(&s2.gw6().to_string()),
        "ping6 the secondary gateway"
    );
    assert!(
        parse_leases(&lab.leases(&s1))
            .iter()
            .any(|l| l.address == IpAddr::V6(s1.addr6())),
        "lease file: {}",
        lab.leases(&s1)
    );

    // Renewals (every second here) keep refreshing the lifetimes.
    std::thread::sleep(Duration::from_secs(5));
    let addrs = lab.run(&["ip", "-6", "addr", "show", "dev", "eth0"]);
    assert!(
        valid_lft(&addrs, &s1.addr6().to_string()) >= 3597,
        "lifetimes refreshed by Renew: {addrs}\n{}",
        lab.log(&s1)
    );
    let routes = lab.default6();
    assert_eq!(
        routes.lines().count(),
        1,
        "still one default route: {routes}\nclient: {:?}\n{}",
        clients.status(&ns, "eth0"),
        lab.log(&s1)
    );

    // The secondary subnet's server goes away (the port moved): its address goes too.
    let mut d2 = lab.dnsmasq.pop().expect("dnsmasq 2");
    let _ = d2.kill();
    let _ = d2.wait();
    wait_for("eth1 address dropped", 30, || {
        bound6(clients.status(&ns, "eth1")).is_none().then_some(())
    });
    let addrs = lab.run(&["ip", "-6", "addr", "show", "dev", "eth1"]);
    assert!(!addrs.contains(&s2.addr6().to_string()), "{addrs}");
    assert!(bound6(clients.status(&ns, "eth0")).is_some());
    assert!(lab.default6().contains("dev eth0"));

    // The primary's server goes too: its address and the default route of its RAs go.
    let mut d1 = lab.dnsmasq.pop().expect("dnsmasq 1");
    let _ = d1.kill();
    let _ = d1.wait();
    wait_for("eth0 address dropped", 30, || {
        bound6(clients.status(&ns, "eth0")).is_none().then_some(())
    });
    let addrs = lab.run(&["ip", "-6", "addr", "show", "dev", "eth0"]);
    assert!(!addrs.contains(&s1.addr6().to_string()), "{addrs}");
    let routes = lab.default6();
    assert!(routes.trim().is_empty(), "old router forgotten: {routes}");
    clients.stop_ns(&ns, false);
}

#[test]
fn single_interface_is_primary_without_being_told_and_dnsmasq_matches_the_mac() {
    if !can_run() {
        return;
    }
    let s = Subnet {
        n: 3,
        mac: "02:61:00:00:00:03",
        primary: true,
    };
    let mut lab = Lab6::new("v6b");
    lab.add_subnet(&s);
    let ns = lab.machine.clone();
    // The supervisor's path: nobody says which interface is primary.
    let accepts = ra::configure(&ns, BTreeMap::new()).expect("RA settings");
    assert_eq!(accepts, [(s.ifname(), true)].into());
    // A client whose DUID carries another MAC: dnsmasq still finds the reservation, by the
    // MAC of the link-local source (neighbour table), i.e. the interface's own MAC.
    let c = Dhcp6Client::start(Client6Config {
        netns: ns.clone(),
        ifname: s.ifname(),
        mac: parse_mac("02:61:00:00:00:99").unwrap(),
        timing: timing(),
    })
    .expect("client");
    let a = wait_for("DHCPv6", 20, || match c.status() {
        Status::Bound(a) => Some(a),
        Status::Stopped(why) => panic!("stopped: {why}"),
        Status::Searching => None,
    });
    assert_eq!(a.address, s.addr6());
    let routes = wait_for("an IPv6 default route", 20, || {
        let r = lab.default6();
        (!r.trim().is_empty()).then_some(r)
    });
    assert!(routes.contains("dev eth2 proto ra"), "{routes}");
    assert!(lab.ping(&s.gw6().to_string()));
    // Stopping with flush removes what DHCPv6 applied; powering off stops RA handling.
    c.stop(true);
    let addrs = lab.run(&["ip", "-6", "addr", "show", "dev", "eth2"]);
    assert!(!addrs.contains(&s.addr6().to_string()), "{addrs}");
    ra::disable(&ns).expect("RA off");
    assert!(lab.default6().trim().is_empty(), "{}", lab.default6());
    let accept = lab.run(&["sysctl", "-n", "net.ipv6.conf.eth2.accept_ra"]);
    assert_eq!(accept.trim(), "0");
}

/// Serves one machine key only: the supervisor must not touch other suites' machines.
struct OnlyKey(String);

#[async_trait::async_trait]
impl MachineScope for OnlyKey {
    async fn machine_keys(&self) -> Option<std::collections::BTreeSet<String>> {
        Some([self.0.clone()].into())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provisioned_bare_metal_takes_its_ipv6_default_route_from_the_primary_nic_only() {
    if !can_run() {
        return;
    }
    let key = format!("h2t-{}-bm6", std::process::id());
    let ns = osac_linux::names::machine_ns(&key);
    // The primary is the *second* NIC: no "first interface wins" by accident.
    let s4 = Subnet {
        n: 4,
        mac: "02:61:00:00:00:04",
        primary: false,
    };
    let s5 = Subnet {
        n: 5,
        mac: "02:61:00:00:00:05",
        primary: true,
    };
    let lab = tokio::task::spawn_blocking({
        let ns = ns.clone();
        move || {
            let mut lab = Lab6::with_machine("bm6", &ns);
            lab.add_subnet(&s4);
            lab.add_subnet(&s5);
            (lab, s4, s5)
        }
    })
    .await
    .unwrap();
    let (lab, s4, s5) = lab;
    let p = LinuxProvisioner::start(timing(), Some(Arc::new(OnlyKey(key.clone()))));
    let nic = |s: &Subnet| Nic {
        name: s.ifname(),
        mac_address: s.mac.into(),
        subnet_id: s.bridge(),
        primary: s.primary,
    };
    let req = ProvisionBareMetalRequest {
        instance_id: "bmi".into(),
        host_id: key.clone(),
        nics: vec![nic(&s4), nic(&s5)],
        ..Default::default()
    };
    p.provision_baremetal(&req).await.expect("provision");
    let bound = |ifname: &str| bound6(p.client_status(&key, ifname));
    let until = Instant::now() + Duration::from_secs(20);
    while bound("eth3").is_none() || bound("eth4").is_none() || !lab.default6().contains("dev eth4")
    {
        assert!(
            Instant::now() < until,
            "eth3 {:?}, eth4 {:?}, routes {}",
            p.client_status(&key, "eth3"),
            p.client_status(&key, "eth4"),
            lab.default6()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(bound("eth3").unwrap().address, s4.addr6());
    assert_eq!(bound("eth4").unwrap().address, s5.addr6());
    let status = p.client_status(&key, "eth4").unwrap();
    assert!(
        matches!(status.v4, Status::Bound(ref a) if a.address == s5.addr4()),
        "{status:?}"
    );
    let routes = lab.default6();
    assert_eq!(
        routes.lines().count(),
        1,
        "one IPv6 default route: {routes}"
    );
    assert!(routes.contains("dev eth4"), "{routes}");

    // Wiping the server removes its addresses and stops RA handling.
    p.deprovision_baremetal("bmi", &key)
        .await
        .expect("deprovision");
    let addrs = lab.run(&["ip", "-6", "addr", "show"]);
    assert!(!addrs.contains(&s5.addr6().to_string()), "{addrs}");
    assert!(lab.default6().trim().is_empty(), "{}", lab.default6());
    p.shutdown().await;
    drop(p);
    tokio::task::spawn_blocking(move || drop(lab))
        .await
        .unwrap();
}
