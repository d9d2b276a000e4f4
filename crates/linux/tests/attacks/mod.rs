//! The adversarial suite: a hostile tenant's workloads attack the dataplane with crafted
//! frames and probes, victims capture what reaches them (nothing may), and the attacker may
//! get no answer from infrastructure. One file per family of attacks; every world has two
//! tenants whose VirtualNetworks use identical CIDRs, sharing one hosting cluster.
//!
//! Each attack has a positive control (the same frame sent along a legitimate path does
//! arrive), so a test never passes because a probe is broken. Each was mutation-checked once
//! by removing the rule that stops it (the file's header says which rule and what happened).

mod closed;
mod dhcp;
mod encap;
mod exposure;
mod flood;
mod infra;
mod nat;
mod neighbours;
mod sg;
mod spoof;
mod vlan;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use osac_backends::*;
use osac_linux::probe::capture::{link_local_of, parse_mac, scoped};
use osac_linux::probe::{self, Capture};
use osac_linux::{LinuxK8s, names};

use super::common::{self, Env, sh};
use super::{port_req, rule, subnet_req, vn_req};

/// How long a victim listens after the last attack frame.
pub const SETTLE: Duration = Duration::from_millis(700);

/// A workload under our control: its namespace, interface and addresses.
#[derive(Debug, Clone)]
pub struct Machine {
    /// Machine namespace.
    pub ns: String,
    /// Interface inside it.
    pub ifname: String,
    /// Its MAC.
    pub mac: [u8; 6],
    /// Reserved IPv4 address (configured statically).
    pub v4: Ipv4Addr,
    /// Reserved IPv6 address (configured statically).
    pub v6: Ipv6Addr,
    /// Its kernel-chosen link-local address.
    pub link_local: Ipv6Addr,
}

impl Machine {
    /// `[ip%ifname]:port` for a link-scope destination from this machine.
    pub fn scoped(&self, ip: Ipv6Addr, port: u16) -> SocketAddr {
        scoped(&self.ns, &self.ifname, ip, port).expect("interface index")
    }

    /// Starts capturing what arrives on its interface.
    pub fn capture(&self) -> Capture {
        Capture::start(&self.ns, &self.ifname).expect("capture")
    }

    /// Sends a raw frame out of its interface.
    pub fn send(&self, frame: Vec<u8>) {
        probe::send_frame(&self.ns, &self.ifname, frame).expect("send frame");
    }
}

/// Where a machine is plugged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A VM: its port is on the hosting cluster's overlay bridge.
    Vm,
    /// A bare-metal server: its port is on the subnet bridge in the router.
    BareMetal,
}

/// Two tenants (VNs `va` and `vb`, identical CIDRs); `va` has subnets `a1` (10.0.1.0/24) and
/// `a2` (10.0.2.0/24), `vb` has `b1` (10.0.1.0/24); every subnet is bridged to one hosting
/// cluster.
pub struct World {
    /// The test's environment.
    pub env: Env,
    /// The k8s manager (kept alive for the world's lifetime).
    pub k8s: Arc<LinuxK8s>,
    /// The hosting cluster holding every VM.
    pub hc: String,
    /// Segment (VNI) of each subnet, by short name.
    pub segments: Vec<(String, i64)>,
    mac_prefix: u8,
    macs: std::sync::atomic::AtomicU8,
}

/// The VN of a subnet short name.
pub fn vn_of(subnet: &str) -> &'static str {
    if subnet.starts_with('b') { "vb" } else { "va" }
}

impl World {
    /// Builds the two tenants' networks for test number `n`.
    pub async fn new(n: u8) -> World {
        let mut env = Env::new(n).await;
        let k8s = Arc::new(env.k8s().await);
        let kc: Arc<dyn K8sManager> = k8s.clone();
        let hc = k8s.hosting_clusters()[0].clone();
        let mut segments = Vec::new();
        for vn in ["va", "vb"] {
            env.client
                .create_virtual_network(&vn_req(&env, vn))
                .await
                .unwrap();
        }
        for (s, third) in [("a1", 1u8), ("a2", 2), ("b1", 1)] {
            let req = subnet_req(&env, vn_of(s), s, third);
            let created = env.client.create_subnet(&req).await.unwrap();
            kc.create_subnet_overlay(&CreateSubnetOverlayRequest {
                subnet_id: env.id(s),
                segment_id: created.segment_id,
                hosting_cluster: hc.clone(),
                ipv4_cidr: req.ipv4_cidr,
                ipv6_cidr: req.ipv6_cidr,
                vip_cidr: req.vip_cidr,
            })
            .await
            .unwrap();
            segments.push((s.to_string(), created.segment_id));
        }
        World {
            env,
            k8s,
            hc,
            segments,
            mac_prefix: n,
            macs: std::sync::atomic::AtomicU8::new(1),
        }
    }

    /// The id of a short name.
    pub fn id(&self, s: &str) -> String {
        self.env.id(s)
    }

    /// A security group of VN `vn` with the given rules.
    pub async fn security_group(
        &self,
        name: &str,
        vn: &str,
        ingress: Vec<SecurityRule>,
        egress: Vec<SecurityRule>,
    ) -> String {
        let id = self.id(name);
        self.env
            .client
            .apply_security_group(&ApplySecurityGroupRequest {
                security_group_id: id.clone(),
                virtual_network_id: self.id(vn),
                ingress,
                egress,
            })
            .await
            .unwrap();
        id
    }

    /// The wide-open group of the VN of `subnet` (everything in and out, both families; applied
    /// idempotently), as a port's group list: a port without groups is closed, so attackers
    /// and controls that must send and receive freely carry this one.
    pub async fn open(&self, subnet: &str) -> Vec<String> {
        let vn = vn_of(subnet);
        let all = super::fixture::wide_open_rules;
        vec![
            self.security_group(&format!("open-{vn}"), vn, all(), all())
                .await,
        ]
    }

    /// Plugs a machine named `name` of `kind` into `subnet` with `sgs`, configured statically
    /// from the fabric's reservation (v4 with the gateway as default route, v6 /64).
    pub async fn machine(&self, name: &str, kind: Kind, subnet: &str, sgs: &[String]) -> Machine {
        let seq = self.macs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mac_s = format!("02:{:02x}:0a:00:00:{seq:02x}", self.mac_prefix);
        let (host, iface) = match kind {
            Kind::Vm => (self.hc.clone(), format!("{}/eth0", self.id(name))),
            Kind::BareMetal => (self.id(name), "data-0".to_string()),
        };
        let mut req = port_req(
            &self.env,
            &format!("{name}-p"),
            &host,
            &iface,
            &mac_s,
            subnet,
            sgs,
        );
        req.virtual_network_id = self.id(vn_of(subnet));
        let p = self
            .env
            .client
            .create_network_attachment(&req)
            .await
            .unwrap();
        let (key, ifname, _) = names::machine_of(&req.host, &req.interface);
        let ns = names::machine_ns(&key);
        let (Some(IpAddr::V4(v4)), Some(IpAddr::V6(v6))) = (p.ipv4_address, p.ipv6_address) else {
            panic!("dual-stack reservation expected: {p:?}");
        };
        let gw = self
            .env
            .fabric
            .subnet(&req.subnet_id)
            .await
            .unwrap()
            .gw4()
            .unwrap();
        common::configure(&ns, &ifname, &format!("{v4}/24"), Some(&gw.to_string())).await;
        assert!(
            sh(
                &ns,
                &[
                    "ip",
                    "-6",
                    "addr",
                    "add",
                    &format!("{v6}/64"),
                    "dev",
                    &ifname,
                    "nodad"
                ]
            )
            .await
        );
        let mut link_local = None;
        for _ in 0..50 {
            link_local = link_local_of(&ns, &ifname);
            if link_local.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Machine {
            ns,
            ifname,
            mac: parse_mac(&mac_s).unwrap(),
            v4,
            v6,
            link_local: link_local.expect("link-local address"),
        }
    }

    /// A VM named `vm` and a bare-metal server named `bm`, both plugged into `subnet` with
    /// `sgs` (the VM first).
    pub async fn vm_and_bm(
        &self,
        vm: &str,
        bm: &str,
        subnet: &str,
        sgs: &[String],
    ) -> (Machine, Machine) {
        let v = self.machine(vm, Kind::Vm, subnet, sgs).await;
        let b = self.machine(bm, Kind::BareMetal, subnet, sgs).await;
        (v, b)
    }

    /// The segment (VNI) of a subnet short name.
    pub fn segment(&self, subnet: &str) -> i64 {
        self.segments
            .iter()
            .find(|(s, _)| s == subnet)
            .map(|(_, v)| *v)
            .unwrap()
    }
}

/// A unique marker for one attack (found anywhere in a captured frame).
pub fn marker(attack: &str) -> Vec<u8> {
    format!("osac-attack:{attack}:{}", std::process::id()).into_bytes()
}

/// The attacks (by name) whose marker reached one of the captures.
pub fn leaked(captures: &[(&str, &Capture)], attacks: &[String]) -> Vec<String> {
    std::thread::sleep(SETTLE);
    let mut out = Vec::new();
    for a in attacks {
        for (who, c) in captures {
            if c.contains(&marker(a)) {
                out.push(format!("{a} reached {who}"));
            }
        }
    }
    out
}

/// Asserts that every control reached one of `captures` and no attack did: what is missing
/// fails as "`controls_are` must arrive", what leaked as "`attacks_leaked`".
pub fn assert_controls_only(
    captures: &[(&str, Capture)],
    controls: &[String],
    attacks: &[String],
    controls_are: &str,
    attacks_leaked: &str,
) {
    let refs: Vec<(&str, &Capture)> = captures.iter().map(|(n, c)| (*n, c)).collect();
    let seen = leaked(&refs, controls);
    let missing: Vec<&String> = controls
        .iter()
        .filter(|c| !seen.iter().any(|s| s.starts_with(&format!("{c} "))))
        .collect();
    assert!(
        missing.is_empty(),
        "{controls_are} must arrive: {missing:?}"
    );
    let seen = leaked(&refs, attacks);
    assert!(seen.is_empty(), "{attacks_leaked}: {seen:?}");
}

/// A default-like group: TCP 22 and ICMP in from anywhere (both families), everything out.
pub fn ssh_only() -> (Vec<SecurityRule>, Vec<SecurityRule>) {
    (
        vec![
            rule(Protocol::Tcp, Some((22, 22)), "0.0.0.0/0"),
            rule(Protocol::Tcp, Some((22, 22)), "::/0"),
            rule(Protocol::Icmp, None, "0.0.0.0/0"),
            rule(Protocol::Icmp, None, "::/0"),
        ],
        vec![
            rule(Protocol::All, None, "0.0.0.0/0"),
            rule(Protocol::All, None, "::/0"),
        ],
    )
}

/// Whether a UDP datagram to `to` gets any answer (data, or an ICMP error surfacing as
/// "connection refused") within half a second.
pub fn udp_answered(ns: &str, to: SocketAddr) -> bool {
    osac_linux::dhcp::netns::run_in(ns, move || {
        let bind: SocketAddr = if to.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let s = std::net::UdpSocket::bind(bind)?;
        s.connect(to)?;
        s.set_read_timeout(Some(Duration::from_millis(500)))?;
        let _ = s.send(b"osac-exposure-probe");
        let mut buf = [0u8; 1500];
        Ok(match s.recv(&mut buf) {
            Ok(_) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionRefused,
        })
    })
    .unwrap_or(false)
}

/// Whether `ns` gets an ICMP echo reply from `ip` (two tries).
pub fn pings(ns: &str, ip: IpAddr) -> bool {
    probe::ping(ns, ip, Duration::from_secs(1)) || probe::ping(ns, ip, Duration::from_secs(1))
}

/// Whether a TCP connection to `to` gets any answer (accepted or refused).
pub fn tcp_answered(ns: &str, to: SocketAddr) -> bool {
    probe::tcp_connects(ns, to, Duration::from_millis(700)).unwrap_or(false)
}
