//! Probes for the dataplane tests: TCP/UDP listeners and connections, pings, broadcasts,
//! neighbour (ARP/ND) checks and forged frames, each run inside a namespace on its own OS
//! thread (`setns`) or through `ip netns exec`. Blocking by design: call from a blocking
//! context (`spawn_blocking`) or a plain thread.

pub mod bulk;
pub mod capture;
pub mod dissect;
pub mod forge;
pub mod raw;
pub mod spoof;

pub use capture::{Capture, send_udp_from};

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::dhcp::netns;

const POLL: Duration = Duration::from_millis(100);

/// What a listener saw: (peer, payload) in arrival order.
type Seen = Arc<Mutex<Vec<(SocketAddr, Vec<u8>)>>>;

/// A listener running in a namespace: records who connected (TCP) or sent (UDP), echoes TCP
/// data back, and keeps accepted connections open until stopped.
pub struct Listener {
    /// Where it listens.
    pub addr: SocketAddr,
    seen: Seen,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl Listener {
    /// A TCP listener on `addr` inside `ns` (echo server).
    pub fn tcp(ns: &str, addr: SocketAddr) -> io::Result<Listener> {
        Self::start(ns, addr, true)
    }

    /// A UDP listener on `addr` inside `ns` (broadcasts included).
    pub fn udp(ns: &str, addr: SocketAddr) -> io::Result<Listener> {
        Self::start(ns, addr, false)
    }

    fn start(ns: &str, addr: SocketAddr, tcp: bool) -> io::Result<Listener> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
        let (s2, st2) = (seen.clone(), stop.clone());
        let thread = netns::spawn_in(ns, format!("probe-{addr}"), move || {
            let bound = if tcp {
                bind_tcp(addr).map(Either::Tcp)
            } else {
                bind_udp(addr).map(Either::Udp)
            };
            let sock = match bound {
                Ok(s) => {
                    let _ = ready_tx.send(Ok(()));
                    s
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                    return Err(e);
                }
            };
            match sock {
                Either::Tcp(l) => serve_tcp(l, &s2, &st2),
                Either::Udp(u) => serve_udp(u, &s2, &st2),
            }
        })?;
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(io::Error::other("listener thread did not start")),
        }
        Ok(Listener {
            addr,
            seen,
            stop,
            thread: Some(thread),
        })
    }

    /// Source addresses seen so far.
    pub fn peers(&self) -> Vec<SocketAddr> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(a, _)| *a)
            .collect()
    }

    /// Source IPs seen so far.
    pub fn peer_ips(&self) -> Vec<IpAddr> {
        self.peers().iter().map(SocketAddr::ip).collect()
    }

    /// Payloads received (UDP) so far.
    pub fn payloads(&self) -> Vec<Vec<u8>> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(_, p)| p.clone())
            .collect()
    }

    /// Waits until `pred` holds for the payloads, up to `wait`.
    pub fn wait_for(&self, wait: Duration, pred: impl Fn(&[Vec<u8>]) -> bool) -> bool {
        let until = Instant::now() + wait;
        loop {
            if pred(&self.payloads()) {
                return true;
            }
            if Instant::now() > until {
                return false;
            }
            std::thread::sleep(POLL);
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

enum Either {
    Tcp(TcpListener),
    Udp(UdpSocket),
}

fn bind_tcp(addr: SocketAddr) -> io::Result<TcpListener> {
    let domain = socket2::Domain::for_address(addr);
    let s = socket2::Socket::new(domain, socket2::Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    // Cluster VIPs and DNAT targets may be bound before the address is configured.
    s.set_freebind_v4(true).ok();
    s.bind(&addr.into())?;
    s.listen(64)?;
    let l: TcpListener = s.into();
    l.set_nonblocking(true)?;
    Ok(l)
}

fn bind_udp(addr: SocketAddr) -> io::Result<UdpSocket> {
    let domain = socket2::Domain::for_address(addr);
    let s = socket2::Socket::new(domain, socket2::Type::DGRAM, None)?;
    s.set_reuse_address(true)?;
    s.set_broadcast(true)?;
    s.bind(&addr.into())?;
    let u: UdpSocket = s.into();
    u.set_read_timeout(Some(POLL))?;
    Ok(u)
}

fn serve_tcp(l: TcpListener, seen: &Seen, stop: &AtomicBool) -> io::Result<()> {
    let mut open: Vec<TcpStream> = Vec::new();
    let mut buf = [0u8; 1024];
    while !stop.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((s, peer)) => {
                s.set_nonblocking(true)?;
                seen.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((peer, Vec::new()));
                open.push(s);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        // Echo whatever the open connections sent; drop closed ones.
        open.retain_mut(|s| match s.read(&mut buf) {
            Ok(0) => false,
            Ok(n) => s.write_all(&buf[..n]).is_ok(),
            Err(e) => e.kind() == io::ErrorKind::WouldBlock,
        });
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn serve_udp(u: UdpSocket, seen: &Seen, stop: &AtomicBool) -> io::Result<()> {
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        match u.recv_from(&mut buf) {
            Ok((n, peer)) => seen
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((peer, buf[..n].to_vec())),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether a TCP connection from `ns` to `to` is established within `timeout` (a refused
/// connection counts as reached: the packet got there).
pub fn tcp_connects(ns: &str, to: SocketAddr, timeout: Duration) -> io::Result<bool> {
    netns::run_in(ns, move || match TcpStream::connect_timeout(&to, timeout) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::TimedOut => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(true),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EHOSTUNREACH | libc::ENETUNREACH)
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    })
}

/// An open TCP connection made from inside a namespace (kept on its own thread).
pub struct TcpSession {
    tx: mpsc::Sender<mpsc::Sender<bool>>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl TcpSession {
    /// Connects from `ns` to an echo [`Listener`] at `to`.
    pub fn open(ns: &str, to: SocketAddr, timeout: Duration) -> io::Result<TcpSession> {
        let (tx, rx) = mpsc::channel::<mpsc::Sender<bool>>();
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
        let thread = netns::spawn_in(ns, format!("session-{to}"), move || {
            let mut s = match TcpStream::connect_timeout(&to, timeout) {
                Ok(s) => {
                    let _ = ready_tx.send(Ok(()));
                    s
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                    return Err(e);
                }
            };
            s.set_read_timeout(Some(timeout))?;
            while let Ok(reply) = rx.recv() {
                let mut b = [0u8; 1];
                let ok = s.write_all(b"x").is_ok() && matches!(s.read(&mut b), Ok(1));
                let _ = reply.send(ok);
            }
            Ok(())
        })?;
        match ready_rx.recv_timeout(timeout + Duration::from_secs(5)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(io::Error::other("session thread did not start")),
        }
        Ok(TcpSession {
            tx,
            thread: Some(thread),
        })
    }

    /// Sends one byte and waits for its echo: whether the connection still carries data.
    pub fn alive(&self) -> bool {
        let (reply_tx, reply_rx) = mpsc::channel();
        if self.tx.send(reply_tx).is_err() {
            return false;
        }
        reply_rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or(false)
    }
}

impl Drop for TcpSession {
    fn drop(&mut self) {
        let (tx, _) = mpsc::channel();
        self.tx = tx;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sends one UDP datagram from `ns` to `to` (broadcast allowed).
pub fn udp_send(ns: &str, to: SocketAddr, payload: &[u8]) -> io::Result<()> {
    let payload = payload.to_vec();
    netns::run_in(ns, move || {
        let bind: SocketAddr = if to.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let s = UdpSocket::bind(bind)?;
        s.set_broadcast(true)?;
        s.send_to(&payload, to)?;
        Ok(())
    })
}

/// Whether `ip` answers one ping from `ns` (within about `wait`).
pub fn ping(ns: &str, ip: IpAddr, wait: Duration) -> bool {
    let secs = wait.as_secs().max(1).to_string();
    Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "ping",
            "-c1",
            "-W",
            &secs,
            &ip.to_string(),
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Pings until one succeeds or `wait` passes.
pub fn ping_until(ns: &str, ip: IpAddr, wait: Duration) -> bool {
    let until = Instant::now() + wait;
    loop {
        if ping(ns, ip, Duration::from_secs(1)) {
            return true;
        }
        if Instant::now() > until {
            return false;
        }
    }
}

/// The MAC `ns` has learned for `ip` (ARP or ND), if any.
pub fn neighbour_mac(ns: &str, ip: IpAddr) -> Option<String> {
    let out = Command::new("ip")
        .args(["-n", ns, "neigh", "show", "to", &ip.to_string()])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w == "lladdr" {
            return words.next().map(str::to_string);
        }
    }
    None
}

/// Sends a hand-built frame out of `ifname` inside `ns`.
pub fn send_frame(ns: &str, ifname: &str, frame: Vec<u8>) -> io::Result<()> {
    let ifname = ifname.to_string();
    netns::run_in(ns, move || raw::send_frame(&ifname, &frame))
}

/// The IPv4 addresses (`a.b.c.d/n`) on `ifname` in `ns`.
pub fn ipv4_addrs(ns: &str, ifname: &str) -> Vec<String> {
    let Ok(out) = Command::new("ip")
        .args(["-n", ns, "-4", "-o", "addr", "show", "dev", ifname])
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            w.find(|x| *x == "inet")
                .and_then(|_| w.next())
                .map(String::from)
        })
        .collect()
}

/// The IPv4 default routes of `ns` as `via <gw> dev <if>` lines.
pub fn default_routes(ns: &str) -> Vec<String> {
    let Ok(out) = Command::new("ip")
        .args(["-n", ns, "-4", "route", "show", "default"])
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}
