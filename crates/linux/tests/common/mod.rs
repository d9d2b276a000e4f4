//! Harness of the root dataplane tests: skip (with a reason) when the machine cannot run them,
//! fail instead under `CI=true`; per-test ranges and ids so tests run in parallel; probes run
//! inside namespaces with `ip netns exec`.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use osac_backends::{Capability, DriverConfig, FabricManager, Registration, Role};
use osac_linux::{LinuxFabric, LinuxK8s, LinuxSettings};
use tokio::process::{Child, Command};

/// Whether the dataplane can run here; panics under `CI=true` when it cannot.
pub async fn ready() -> bool {
    match osac_linux::preflight().await {
        Ok(()) => true,
        Err(e) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("dataplane tests must run in CI: {e}");
            }
            eprintln!("skipping dataplane test: {e}");
            false
        }
    }
}

/// A registration for programmatic setups.
pub fn registration(name: &str, role: Role, clusters: &[String]) -> Registration {
    Registration {
        name: name.into(),
        role,
        description: "test".into(),
        capabilities: [Capability::Ipv4, Capability::Ipv6, Capability::DualStack]
            .into_iter()
            .collect(),
        driver: DriverConfig::Sim,
        hosting_clusters: clusters.to_vec(),
    }
}

/// One test's world: its own state dir, transit ranges, pool and ids.
pub struct Env {
    /// Short unique tag for ids.
    pub tag: String,
    /// Settings used by both managers.
    pub settings: LinuxSettings,
    /// The fabric.
    pub fabric: Arc<LinuxFabric>,
    /// The same fabric as the controllers call it.
    pub client: Arc<dyn FabricManager>,
    /// Pool prefix for external IPs.
    pub pool: ipnet::IpNet,
    /// Port of TCP probes in shared namespaces.
    pub tcp_port: u16,
    _dir: tempfile::TempDir,
    ids: std::sync::Mutex<BTreeSet<String>>,
}

impl Env {
    /// A fresh world for test number `n` (distinct per test function, < 32).
    pub async fn new(n: u8) -> Env {
        assert!(n < 32, "test numbers are below 32");
        let pid = std::process::id();
        let dir = tempfile::tempdir().unwrap();
        let settings = LinuxSettings {
            state_dir: dir.path().to_path_buf(),
            transit_ipv4_cidr: format!("100.{}.{}.0/24", 64 + n, pid % 250)
                .parse()
                .unwrap(),
            transit_ipv6_cidr: format!("fd00:6f73:{n:x}:{:x}::/64", pid % 65000)
                .parse()
                .unwrap(),
            ..LinuxSettings::default()
        };
        let fabric = Arc::new(
            LinuxFabric::new(
                registration("linux-fabric", Role::Fabric, &[]),
                settings.clone(),
            )
            .await
            .unwrap(),
        );
        let client: Arc<dyn FabricManager> = fabric.clone();
        Env {
            tag: format!("t{n}-{pid}"),
            // 198.18.0.0/15 (benchmarking range): 16 pools of /28 per third octet.
            pool: format!(
                "198.{}.{}.{}/28",
                19 - n / 16,
                pid % 200,
                u16::from(n % 16) * 16
            )
            .parse()
            .unwrap(),
            tcp_port: 20000 + u16::from(n),
            settings,
            fabric,
            client,
            _dir: dir,
            ids: std::sync::Mutex::new(BTreeSet::new()),
        }
    }

    /// A k8s manager over this world's settings with two hosting clusters of its own.
    pub async fn k8s(&mut self) -> LinuxK8s {
        let clusters = vec![self.id("hc-a"), self.id("hc-b")];
        LinuxK8s::new(
            registration("linux-k8s", Role::K8s, &clusters),
            self.settings.clone(),
        )
        .await
        .unwrap()
    }

    /// An id unique to this test (remembered: every namespace derived from it is removed when
    /// the test ends, also when it fails).
    pub fn id(&self, s: &str) -> String {
        let id = format!("{}-{s}", self.tag);
        self.ids.lock().unwrap().insert(id.clone());
        id
    }

    /// The address of ExternalIP `name` (this test's id), allocated from the test's pool.
    pub async fn external_ip(&self, name: &str) -> std::net::IpAddr {
        self.client
            .allocate_external_ip(&osac_backends::AllocateExternalIpRequest {
                external_ip_id: self.id(name),
                pool_id: self.id("pool"),
                cidrs: vec![self.pool],
            })
            .await
            .unwrap()
            .address
    }

    /// Ends the test (cleanup runs in `Drop`, so a failing test cleans up too).
    pub async fn teardown(self) {}
}

impl Drop for Env {
    fn drop(&mut self) {
        use std::process::Command as Sync;
        // dnsmasq's host entries live outside the (temporary) state directory.
        let _ = std::fs::remove_dir_all(self.settings.dhcp_hosts_root());
        let ids = self.ids.lock().map(|i| i.clone()).unwrap_or_default();
        let mut namespaces = BTreeSet::new();
        for id in &ids {
            namespaces.insert(osac_linux::names::router_ns(id));
            namespaces.insert(osac_linux::names::machine_ns(id));
            namespaces.insert(osac_linux::names::hosting_ns(id));
        }
        for ns in &namespaces {
            if !std::path::Path::new("/run/netns").join(ns).exists() {
                continue;
            }
            if let Ok(out) = Sync::new("ip").args(["netns", "pids", ns]).output() {
                for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                    let _ = Sync::new("kill").args(["-9", pid]).status();
                }
            }
            let _ = Sync::new("ip").args(["netns", "del", ns]).status();
        }
        // Our transit gateway and the routes through our routers in the shared external namespace.
        let t4 = self.settings.transit_ipv4_cidr;
        let t6 = self.settings.transit_ipv6_cidr;
        let ext = osac_linux::names::EXT_NS;
        if let Ok(out) = Sync::new("ip").args(["-n", ext, "route", "show"]).output() {
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let mut f = line.split_whitespace();
                let dst = f.next().unwrap_or("");
                let via = line
                    .split("via ")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next());
                if via
                    .and_then(|v| v.parse::<std::net::Ipv4Addr>().ok())
                    .is_some_and(|v| t4.contains(&v))
                {
                    let _ = Sync::new("ip")
                        .args(["-n", ext, "route", "del", dst])
                        .status();
                }
            }
        }
        let gw4 = format!(
            "{}/{}",
            osac_backends::net::ipv4_gateway(t4),
            t4.prefix_len()
        );
        let gw6 = format!(
            "{}/{}",
            osac_backends::net::ipv6_gateway(t6),
            t6.prefix_len()
        );
        for a in [gw4, gw6] {
            let _ = Sync::new("ip")
                .args(["-n", ext, "addr", "del", &a, "dev", "ext0"])
                .status();
        }
    }
}

/// Runs a command inside a namespace; true on exit status 0.
pub async fn sh(ns: &str, args: &[&str]) -> bool {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .await
        .unwrap();
    out.status.success()
}

/// Runs a command inside a namespace and returns stdout (panics on failure).
pub async fn sh_out(ns: &str, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?} in {ns}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One ICMP echo (1 s timeout; up to 3 tries for first-packet ARP/ND).
pub async fn ping(ns: &str, dst: &str) -> bool {
    for _ in 0..3 {
        if sh(ns, &["ping", "-c1", "-W1", dst]).await {
            return true;
        }
    }
    false
}

/// One ICMP echo attempt that is expected to fail (single try).
pub async fn ping_once(ns: &str, dst: &str) -> bool {
    sh(ns, &["ping", "-c1", "-W1", dst]).await
}

/// Configures a machine interface by hand (H2's DHCP client does this in the product).
pub async fn configure(machine_ns: &str, ifname: &str, cidr: &str, gw: Option<&str>) {
    sh_out(
        machine_ns,
        &["ip", "addr", "replace", cidr, "dev", ifname, "nodad"],
    )
    .await;
    if let Some(gw) = gw {
        let v6 = gw.contains(':');
        let fam = if v6 { "-6" } else { "-4" };
        sh_out(
            machine_ns,
            &[
                "ip", fam, "route", "replace", "default", "via", gw, "dev", ifname,
            ],
        )
        .await;
    }
}

/// The stdout lines of a process started by [`python_in`].
type Lines = tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>;

/// Starts `python3 -c SCRIPT ARGS…` in `ns` (stdin and stdout piped, stderr dropped, killed on
/// drop); returns the process and its stdout lines.
fn python_in(ns: &str, script: &str, args: &[&str]) -> (Child, Lines) {
    use tokio::io::AsyncBufReadExt;
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "python3", "-c", script])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

/// Whether the first line a script prints (within 10 s) is `expected` (its "I am up" line).
async fn first_line_is(lines: &mut Lines, expected: &str) -> bool {
    let first = tokio::time::timeout(Duration::from_secs(10), lines.next_line()).await;
    matches!(first, Ok(Ok(Some(ref l))) if l == expected)
}

const SERVER: &str = r#"
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
fam = socket.AF_INET6 if ":" in host else socket.AF_INET
s = socket.socket(fam, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((host, port)); s.listen(8); s.settimeout(20)
print("ready", flush=True)
while True:
    c, a = s.accept()
    print(a[0], flush=True)
    c.sendall(b"ok"); c.close()
"#;

/// A TCP server in `ns` on `host:port` printing each peer address; kill it when done.
pub async fn tcp_server(ns: &str, host: &str, port: u16) -> Child {
    let (child, mut lines) = python_in(ns, SERVER, &[host, &port.to_string()]);
    assert!(
        first_line_is(&mut lines, "ready").await,
        "server did not start"
    );
    // Keep the reader alive for peers.
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(l)) = lines.next_line().await {
            let _ = tx.send(l);
        }
    });
    PEERS.lock().unwrap().insert(child.id().unwrap_or(0), rx);
    child
}

type PeerRx = tokio::sync::mpsc::UnboundedReceiver<String>;
static PEERS: std::sync::Mutex<std::collections::BTreeMap<u32, PeerRx>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Next peer address the server saw.
pub async fn next_peer(server: &Child) -> Option<String> {
    let id = server.id().unwrap_or(0);
    let mut rx = PEERS.lock().unwrap().remove(&id)?;
    let peer = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .ok()
        .flatten();
    PEERS.lock().unwrap().insert(id, rx);
    peer
}

const CLIENT: &str = r#"
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)
assert s.recv(2) == b"ok"
"#;

/// Whether a TCP connection from `ns` to `host:port` completes.
pub async fn tcp_ok(ns: &str, host: &str, port: u16) -> bool {
    sh(ns, &["python3", "-c", CLIENT, host, &port.to_string()]).await
}

const ECHO_SERVER: &str = r#"
import socket, sys, threading
host, port = sys.argv[1], int(sys.argv[2])
fam = socket.AF_INET6 if ":" in host else socket.AF_INET
s = socket.socket(fam, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((host, port)); s.listen(8)
print("ready", flush=True)
def echo(c):
    while True:
        d = c.recv(64)
        if not d:
            break
        c.sendall(d)
while True:
    c, a = s.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()
"#;

/// A TCP echo server in `ns` keeping connections open; kill it when done.
pub async fn echo_server(ns: &str, host: &str, port: u16) -> Child {
    let (child, mut lines) = python_in(ns, ECHO_SERVER, &[host, &port.to_string()]);
    assert!(
        first_line_is(&mut lines, "ready").await,
        "echo server did not start"
    );
    child
}

const SESSION: &str = r#"
import socket, sys
src = ("", int(sys.argv[3])) if len(sys.argv) > 3 else None
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3, source_address=src)
print("connected", flush=True)
for _ in sys.stdin:
    try:
        s.sendall(b"x")
        print("ok" if s.recv(1) == b"x" else "closed", flush=True)
    except Exception:
        print("fail", flush=True)
"#;

/// An open TCP connection from a namespace: each [`Session::exchange`] sends one byte and
/// reports whether the echo came back (3 s timeout).
pub struct Session {
    child: Child,
    stdin: tokio::process::ChildStdin,
    lines: Lines,
}

impl Session {
    /// Connects from `ns` to `host:port`; None when the connection cannot be opened.
    pub async fn open(ns: &str, host: &str, port: u16) -> Option<Session> {
        Session::open_from(ns, host, port, None).await
    }

    /// [`Session::open`] from a fixed source port (identical 5-tuples in different VNs).
    pub async fn open_from(
        ns: &str,
        host: &str,
        port: u16,
        src_port: Option<u16>,
    ) -> Option<Session> {
        let (port, src_port) = (port.to_string(), src_port.map(|p| p.to_string()));
        let mut args = vec![host, port.as_str()];
        args.extend(src_port.as_deref());
        let (mut child, mut lines) = python_in(ns, SESSION, &args);
        let stdin = child.stdin.take().unwrap();
        first_line_is(&mut lines, "connected")
            .await
            .then_some(Session {
                child,
                stdin,
                lines,
            })
    }

    /// Sends a byte over the open connection; true when it was echoed.
    pub async fn exchange(&mut self) -> bool {
        use tokio::io::AsyncWriteExt;
        if self.stdin.write_all(b"\n").await.is_err() {
            return false;
        }
        let _ = self.stdin.flush().await;
        let reply = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line()).await;
        matches!(reply, Ok(Ok(Some(ref l))) if l == "ok")
    }

    /// Closes the connection.
    pub async fn close(mut self) {
        let _ = self.child.kill().await;
    }
}

const NA_SEND: &str = r#"
import socket, struct, sys
ifname, target = sys.argv[1], sys.argv[2]
mac = bytes.fromhex(open("/sys/class/net/%s/address" % ifname).read().strip().replace(":", ""))
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
na = struct.pack("!BBHI", 136, 0, 0, 0x20000000) + socket.inet_pton(socket.AF_INET6, target)
s.sendto(na + bytes([2, 1]) + mac, ("ff02::1", 0, 0, socket.if_nametoindex(ifname)))
"#;

/// Sends an unsolicited neighbour advertisement (override flag, our MAC as target link-layer
/// address) for `target` to all nodes out of `ifname` in `ns`; true when it was sent.
pub async fn send_na(ns: &str, ifname: &str, target: &str) -> bool {
    sh(ns, &["python3", "-c", NA_SEND, ifname, target]).await
}

const NA_LISTEN: &str = r#"
import select, socket, sys, time
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
print("ready", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    if select.select([s], [], [], max(0.0, end - time.time()))[0]:
        d, _ = s.recvfrom(2048)
        if len(d) >= 24 and d[0] == 136:
            print(socket.inet_ntop(socket.AF_INET6, d[8:24]), flush=True)
"#;

/// Listens in `ns` for neighbour advertisements while `send` runs (plus a second), and returns
/// the target addresses that arrived.
pub async fn na_targets_seen<F: std::future::Future>(ns: &str, send: F) -> Vec<String> {
    let (mut child, mut lines) = python_in(ns, NA_LISTEN, &["3"]);
    assert!(
        first_line_is(&mut lines, "ready").await,
        "listener did not start"
    );
    send.await;
    let mut seen = Vec::new();
    while let Ok(Ok(Some(l))) =
        tokio::time::timeout(Duration::from_secs(5), lines.next_line()).await
    {
        seen.push(l);
    }
    let _ = child.wait().await;
    seen
}
