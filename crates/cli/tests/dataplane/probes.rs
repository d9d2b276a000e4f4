//! Async wrappers around `osac_linux::probe` shared by every scenario: each probe runs on a
//! blocking thread (probes enter namespaces), never on the runtime's workers.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use osac_linux::probe::{self, Listener, TcpSession};

use crate::diagnose;
use crate::harness::blocking;

/// How long a probe that must fail waits before it counts as dropped.
pub const WAIT: Duration = Duration::from_secs(3);

pub fn sock(ip: IpAddr, port: u16) -> SocketAddr {
    SocketAddr::new(ip, port)
}

/// The unspecified address of `ip`'s family (listen on every address).
pub fn any(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
    }
}

/// A ping that must work. A fresh path usually answers within 5 s; when it does not, the
/// fabric's state is printed (see [`diagnose::fabric_report`]) and the ping is retried for 15 s
/// more, so a slow first packet under load is told apart from a path that never works.
pub async fn ping(from: &str, to: IpAddr) -> bool {
    let f = from.to_string();
    if blocking(move || probe::ping_until(&f, to, Duration::from_secs(5))).await {
        return true;
    }
    report_slow_path(from, to, "ping").await;
    let f = from.to_string();
    let started = Instant::now();
    let later = blocking(move || probe::ping_until(&f, to, Duration::from_secs(15))).await;
    eprintln!(
        "=== ping {from} -> {to}: {} after 5 s + {:.1} s ===",
        if later {
            "got through"
        } else {
            "still failing"
        },
        started.elapsed().as_secs_f64()
    );
    later
}

async fn report_slow_path(from: &str, to: IpAddr, what: &str) {
    let f = from.to_string();
    let report = blocking(move || diagnose::fabric_report(&f, to)).await;
    eprintln!("=== {what} {from} -> {to}: no answer within 5 s ===\n{report}");
}

/// One ping attempt (for pings that must fail).
pub async fn ping_once(from: &str, to: IpAddr) -> bool {
    let from = from.to_string();
    blocking(move || probe::ping(&from, to, Duration::from_secs(2))).await
}

pub async fn listen_tcp(ns: &str, ip: IpAddr, port: u16) -> Listener {
    let ns = ns.to_string();
    blocking(move || Listener::tcp(&ns, sock(ip, port)))
        .await
        .unwrap_or_else(|e| panic!("tcp listener on {ip}:{port}: {e}"))
}

/// Whether a TCP handshake from `from` completes (a refusal counts: the packet got there).
pub async fn connects(from: &str, to: IpAddr, port: u16) -> bool {
    let from = from.to_string();
    blocking(move || probe::tcp_connects(&from, sock(to, port), WAIT))
        .await
        .unwrap_or_else(|e| panic!("connect to {to}:{port}: {e}"))
}

/// A connection that must work: retried for a while (the first packets of a fresh machine may
/// race its DHCP client or the neighbour tables), unlike [`connects`] for ones that must not.
pub async fn reaches(from: &str, to: IpAddr, port: u16) -> bool {
    for _ in 0..5 {
        if connects(from, to, port).await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    report_slow_path(from, to, &format!("tcp/{port}")).await;
    false
}

/// A connection from `from` that must be accepted by the listener `l` (not merely refused
/// by whatever host the packets reached); returns the peers `l` accepted for it.
pub async fn accepted_by(from: &str, to: IpAddr, port: u16, l: &Arc<Listener>) -> Vec<IpAddr> {
    let before = l.peer_ips().len();
    if !reaches(from, to, port).await {
        return Vec::new();
    }
    let l = l.clone();
    // The handshake completes in the kernel before the listener's thread accepts it.
    blocking(move || {
        let until = Instant::now() + WAIT;
        loop {
            let seen = l.peer_ips();
            if seen.len() > before || Instant::now() > until {
                return seen.into_iter().skip(before).collect();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })
    .await
}

/// An open TCP session that must be established.
pub async fn session(from: &str, to: IpAddr, port: u16) -> TcpSession {
    let from = from.to_string();
    blocking(move || TcpSession::open(&from, sock(to, port), WAIT))
        .await
        .unwrap_or_else(|e| panic!("session to {to}:{port}: {e}"))
}

/// Whether the session still carries data (and the session back for further checks).
pub async fn alive(s: TcpSession) -> (bool, TcpSession) {
    blocking(move || (s.alive(), s)).await
}

/// Polls `f` (blocking) every half second for up to 30 s.
pub async fn wait_until(f: impl Fn() -> bool + Send + Sync + Clone + 'static, what: &str) {
    for _ in 0..60 {
        if blocking(f.clone()).await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("timed out: {what}");
}
