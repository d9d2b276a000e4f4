//! Root test of our DHCP client against a real dnsmasq: a server namespace and a machine
//! namespace joined by a veth. Skips (with a reason) without root or tools, fails under CI.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use osac_linux::dhcp::{ClientConfig, DhcpClient, Status, Timing};

#[path = "dhcp/v6.rs"]
mod v6;

fn sh(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("spawn");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn can_run() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc_geteuid() } == 0;
    let tools = ["ip", "dnsmasq"].iter().all(|t| {
        Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if root && tools {
        return true;
    }
    let why = if root {
        "ip or dnsmasq missing"
    } else {
        "not root"
    };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("dataplane test cannot run under CI: {why}");
    }
    eprintln!("skipping: {why}");
    false
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// Two namespaces, a veth and dnsmasq; removed on drop.
struct Lab {
    srv: String,
    machine: String,
    dnsmasq: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.dnsmasq.kill();
        let _ = self.dnsmasq.wait();
        for ns in [&self.srv, &self.machine] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

const MAC: &str = "02:aa:00:00:00:07";

fn lab(tag: &str, extra: &[&str]) -> Lab {
    let pid = std::process::id();
    let srv = format!("h2t-{pid}-{tag}-s");
    let machine = format!("h2t-{pid}-{tag}-m");
    for ns in [&srv, &machine] {
        let _ = Command::new("ip").args(["netns", "del", ns]).output();
        sh(&["ip", "netns", "add", ns]);
    }
    sh(&[
        "ip", "-n", &srv, "link", "add", "s0", "type", "veth", "peer", "name", "eth0", "netns",
        &machine,
    ]);
    sh(&[
        "ip", "-n", &machine, "link", "set", "eth0", "address", MAC, "up",
    ]);
    sh(&["ip", "-n", &srv, "addr", "add", "10.99.0.1/24", "dev", "s0"]);
    sh(&["ip", "-n", &srv, "link", "set", "s0", "up"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let leases = dir.path().join("leases");
    let mut args: Vec<String> = [
        "netns",
        "exec",
        &srv,
        "dnsmasq",
        "--no-daemon",
        "--port=0",
        "--conf-file=/dev/null",
        "--interface=s0",
        "--bind-interfaces",
        "--no-ping",
        "--pid-file",
        "--dhcp-range=10.99.0.10,10.99.0.50,255.255.255.0,1h",
        "--dhcp-option=option:mtu,1400",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(format!("--dhcp-host={MAC},10.99.0.23"));
    args.push(format!("--dhcp-leasefile={}", leases.display()));
    args.extend(extra.iter().map(|s| s.to_string()));
    let dnsmasq = Command::new("ip")
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("dnsmasq");
    Lab {
        srv,
        machine,
        dnsmasq,
        _dir: dir,
    }
}

fn client(lab: &Lab) -> DhcpClient {
    DhcpClient::start(ClientConfig {
        netns: lab.machine.clone(),
        ifname: "eth0".into(),
        mac: osac_linux::dhcp::packet::parse_mac(MAC).expect("mac"),
        hostname: Some("vm1".into()),
        timing: Timing {
            renew_cap: Duration::from_secs(1),
            ..Timing::default()
        },
    })
    .expect("client")
}

fn wait_bound(c: &DhcpClient) -> osac_linux::dhcp::apply::Applied {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        match c.status() {
            Status::Bound(a) => return a,
            Status::Stopped(why) => panic!("client stopped: {why}"),
            Status::Searching if Instant::now() > until => panic!("no lease after 20 s"),
            Status::Searching => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// The machine's default route, as `ip route show default` lists it (empty: none).
fn default_route(lab: &Lab) -> String {
    sh(&["ip", "-n", &lab.machine, "route", "show", "default"])
}

/// The IPv4 addresses of the machine's eth0, as `ip addr show` lists them.
fn eth0_ipv4(lab: &Lab) -> String {
    sh(&[
        "ip",
        "-n",
        &lab.machine,
        "-4",
        "addr",
        "show",
        "dev",
        "eth0",
    ])
}

#[test]
fn client_gets_address_gateway_and_mtu_from_dnsmasq_and_flushes_on_stop() {
    if !can_run() {
        return;
    }
    let lab = lab("a", &["--dhcp-option=option:router,10.99.0.1"]);
    let c = client(&lab);
    let a = wait_bound(&c);
    assert_eq!(a.address.to_string(), "10.99.0.23");
    assert_eq!(a.prefix_len, 24);
    let addrs = eth0_ipv4(&lab);
    assert!(addrs.contains("10.99.0.23/24"), "{addrs}");
    assert!(addrs.contains("mtu 1400"), "{addrs}");
    let routes = default_route(&lab);
    assert!(routes.contains("via 10.99.0.1 dev eth0"), "{routes}");
    // Renewals keep the lease (renew_cap is 1 s).
    std::thread::sleep(Duration::from_secs(3));
    assert!(matches!(c.status(), Status::Bound(_)));
    sh(&[
        "ip",
        "netns",
        "exec",
        &lab.machine,
        "ping",
        "-c1",
        "-W2",
        "10.99.0.1",
    ]);
    c.stop(true);
    let addrs = eth0_ipv4(&lab);
    assert!(!addrs.contains("10.99.0.23"), "{addrs}");
    let routes = default_route(&lab);
    assert!(routes.trim().is_empty(), "{routes}");
}

#[test]
fn without_router_option_no_default_route_and_lost_server_drops_the_address() {
    if !can_run() {
        return;
    }
    // dnsmasq sends itself as router unless told to send none (what the fabric does for
    // non-primary ports).
    let mut lab = lab("b", &["--dhcp-option=3"]);
    let c = client(&lab);
    let a = wait_bound(&c);
    assert_eq!(a.address.to_string(), "10.99.0.23");
    let routes = default_route(&lab);
    assert!(
        routes.trim().is_empty(),
        "non-primary got a default route: {routes}"
    );
    // The server goes away (the port moved to a network without it): the address goes too.
    let _ = lab.dnsmasq.kill();
    let _ = lab.dnsmasq.wait();
    let until = Instant::now() + Duration::from_secs(20);
    while matches!(c.status(), Status::Bound(_)) {
        assert!(Instant::now() < until, "address kept without a server");
        std::thread::sleep(Duration::from_millis(200));
    }
    let addrs = eth0_ipv4(&lab);
    assert!(!addrs.contains("10.99.0.23"), "{addrs}");
}

/// The transaction id of a DHCPv4 request in `frame` (Ethernet, IPv4, UDP to port 67).
fn request_xid(frame: &[u8]) -> Option<u32> {
    let ip = frame.get(14..)?;
    if frame.get(12..14)? != [0x08, 0x00] || *ip.get(9)? != 17 {
        return None;
    }
    let udp = ip.get(usize::from(ip[0] & 0x0f) * 4..)?;
    if udp.get(2..4)? != [0, 67] {
        return None;
    }
    let b = udp.get(8..12 + 8)?;
    (b[0] == 1).then(|| u32::from_be_bytes([b[4], b[5], b[6], b[7]]))
}

/// A rogue server on the link answers every request it sees — the renewals' transaction ids
/// are broadcast — with an ACK naming itself as server and router, once the real server is
/// gone. The client, which took the real server's OFFER, never takes the rogue's ACK.
///
/// Stopped by: `dhcp::client` hearing only the server whose OFFER it took (`answers`).
/// Mutation-checked: with any server's reply accepted, the machine's default route went
/// through the rogue (10.99.0.66) at the first renewal.
#[test]
fn a_rogue_server_is_never_heard_after_the_real_ones_offer() {
    use osac_linux::probe::capture::Capture;
    use osac_linux::probe::forge::Ipv4Frame;
    use osac_linux::probe::raw::BROADCAST_MAC;
    use osac_linux::probe::spoof::{DHCPACK, Dhcp4Reply};
    use std::net::Ipv4Addr;

    if !can_run() {
        return;
    }
    let mut lab = lab("r", &["--dhcp-option=option:router,10.99.0.1"]);
    let c = client(&lab);
    let a = wait_bound(&c);
    assert_eq!(a.address.to_string(), "10.99.0.23");
    let _ = lab.dnsmasq.kill();
    let _ = lab.dnsmasq.wait();
    let cap = Capture::start(&lab.srv, "s0").expect("capture");
    let rogue = Ipv4Addr::new(10, 99, 0, 66);
    let mac = osac_linux::dhcp::packet::parse_mac(MAC).expect("mac");
    let (mut seen, mut answered) = (0, 0);
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        let frames = cap.frames();
        for f in &frames[seen..] {
            if let Some(xid) = request_xid(f) {
                let ack =
                    Dhcp4Reply::new(DHCPACK, xid, mac, a.address, rogue).frame(&Ipv4Frame::new(
                        [2, 0, 0, 0, 0, 0x66],
                        BROADCAST_MAC,
                        rogue,
                        Ipv4Addr::BROADCAST,
                    ));
                osac_linux::probe::send_frame(&lab.srv, "s0", ack).expect("send");
                answered += 1;
            }
        }
        seen = frames.len();
        let routes = default_route(&lab);
        assert!(
            !routes.contains("10.99.0.66"),
            "the rogue became the gateway: {routes}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(answered > 0, "the rogue saw no request to answer");
}
