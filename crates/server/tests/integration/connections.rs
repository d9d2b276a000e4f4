//! An outsider (no credentials at all) holding connections to deny service to everyone else.
//!
//! Stopped by:
//! - the idle deadline (`osac_api::listen`: a connection must send a request head within the
//!   idle timeout of being accepted, TLS handshake included, and of its last response): silent
//!   sockets, sockets that sent only the HTTP/2 preface and TLS sockets that never finish or
//!   never use their handshake give their slot back within a few seconds. Mutation-checked:
//!   with the deadline removed (the idle branch of `serve_connection` never taken), a silent
//!   socket was still open 8 s after it connected, and so was the TLS one that had finished
//!   its handshake: both deadline tests failed;
//! - the per-address cap (`max_connections_per_address`): one address cannot take every slot.
//!   Mutation-checked: with no cap per address, all 20 connections of one address were
//!   served and none was closed at once;
//! - the metrics listener (`metrics_listen`): health, readiness and metrics answer at once
//!   while the API port is saturated, apart from its connection cap.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use osac_api::TransportConfig;
use osac_api::listen::{CLOSE_GRACE, DEFAULT_IDLE_TIMEOUT};
use osac_api::tls::TlsConfig;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;

use crate::common::pki::*;

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

async fn server(
    max_connections: usize,
    max_connections_per_address: usize,
    tls: bool,
) -> (LimitedServer, Option<Arc<rustls::ClientConfig>>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new("connections CA");
    let tls_config = tls.then(|| {
        let (cert, key) = LimitedServer::tls_files(dir.path(), &ca.server());
        TlsConfig {
            cert,
            key,
            client_ca: None,
        }
    });
    let transport = TransportConfig {
        tls: tls_config,
        max_connections,
        max_connections_per_address,
        metrics_listen: Some("127.0.0.1:0".parse().expect("addr")),
        ..TransportConfig::default()
    };
    let s = LimitedServer::start(dir, transport).await;
    (s, tls.then(|| rustls_client(&ca.pem())))
}

/// Whether the server closes `conn` before `deadline` (whatever it sends first, e.g. its
/// HTTP/2 SETTINGS and GOAWAY, is read and dropped).
async fn closed_by<C: AsyncRead + Unpin>(conn: &mut C, deadline: Instant) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

/// `GET path` over HTTP/1.1 on a new connection from `from`; returns the response text.
async fn get_from(from: &str, to: SocketAddr, path: &str) -> String {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{from}:0").parse().expect("addr"))
        .expect("bind");
    let mut conn = socket.connect(to).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    conn.read_to_end(&mut out).await.expect("read");
    String::from_utf8_lossy(&out).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_preface_only_sockets_cannot_hold_the_server() {
    let (s, _) = server(20, 64, false).await;
    let addr = s.server.addr;
    let metrics = s.server.metrics_addr.expect("metrics listener");
    let start = Instant::now();
    // 20 silent sockets take every slot of the API port; 20 more wait in the backlog having
    // sent the HTTP/2 preface and nothing else.
    let mut silent = Vec::new();
    for _ in 0..20 {
        silent.push(TcpStream::connect(addr).await.expect("connect"));
    }
    let mut preface = Vec::new();
    for _ in 0..20 {
        let mut c = TcpStream::connect(addr).await.expect("connect");
        c.write_all(H2_PREFACE).await.expect("preface");
        preface.push(c);
    }

    // Health, readiness and metrics answer at once on the metrics listener, without a token.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("client");
    for (path, body) in [
        ("/healthz", "ok"),
        ("/readyz", "ready"),
        ("/metrics", "process_start_time_seconds"),
    ] {
        let asked = Instant::now();
        let r = http
            .get(format!("http://{metrics}{path}"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{path} on the metrics listener: {e}"));
        assert_eq!(r.status(), 200, "{path}");
        assert!(r.text().await.expect("body").contains(body), "{path}");
        assert!(asked.elapsed() < Duration::from_secs(2), "{path} was slow");
    }
    // Nothing else is served there.
    let api = http
        .get(format!("http://{metrics}/api/private/v1/tenants"))
        .send()
        .await
        .expect("metrics listener");
    assert_eq!(api.status(), 404);
    // The API port answers a probe once the deadlines have given the slots back.
    let probe = tokio::spawn(async move {
        let asked = Instant::now();
        let text = get_from("127.0.0.1", addr, "/healthz").await;
        (text, asked.elapsed())
    });

    // Served at once, the silent sockets are closed one idle timeout later.
    let margin = CLOSE_GRACE + Duration::from_secs(2);
    for (i, c) in silent.iter_mut().enumerate() {
        assert!(
            closed_by(c, start + DEFAULT_IDLE_TIMEOUT + margin).await,
            "silent socket {i} still open {:?} after it connected",
            start.elapsed()
        );
    }
    // The preface-only ones, served once those slots were free, one idle timeout after that.
    for (i, c) in preface.iter_mut().enumerate() {
        assert!(
            closed_by(c, start + 2 * DEFAULT_IDLE_TIMEOUT + 2 * margin).await,
            "preface-only socket {i} still open {:?} after it connected",
            start.elapsed()
        );
    }
    let (text, took) = tokio::time::timeout(Duration::from_secs(10), probe)
        .await
        .expect("the API port answers again")
        .expect("probe");
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        took < 2 * DEFAULT_IDLE_TIMEOUT + 2 * margin,
        "the probe took {took:?}"
    );
    s.finish().await;
}

/// A TLS socket that never sends its ClientHello, and one that completes the handshake and
/// then sends nothing, are closed like plain silent sockets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_tls_sockets_are_closed() {
    let (s, client) = server(20, 64, true).await;
    let addr = s.server.addr;
    let start = Instant::now();
    let mut silent = TcpStream::connect(addr).await.expect("connect");
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
    let mut idle = tokio_rustls::TlsConnector::from(client.expect("TLS client"))
        .connect(name, tcp)
        .await
        .expect("handshake");
    let by = start + DEFAULT_IDLE_TIMEOUT + CLOSE_GRACE + Duration::from_secs(2);
    assert!(
        closed_by(&mut silent, by).await,
        "no ClientHello: still open"
    );
    assert!(
        closed_by(&mut idle, by).await,
        "handshake, no request: still open"
    );
    s.finish().await;
}

/// A connection that keeps requesting is not idle, however long it lives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_keep_alive_connection_stays_open() {
    let (s, _) = server(20, 64, false).await;
    let mut conn: Box<dyn Io> = Box::new(TcpStream::connect(s.server.addr).await.expect("c"));
    let until = Instant::now() + DEFAULT_IDLE_TIMEOUT + Duration::from_secs(2);
    while Instant::now() < until {
        conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await
            .expect("the connection is still open");
        let head = read_response(&mut conn).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    s.finish().await;
}

trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// One HTTP/1.1 response with a Content-Length body.
async fn read_response(conn: &mut Box<dyn Io>) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let n = conn.read(&mut chunk).await.expect("read");
        assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&buf));
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .and_then(|v| v.trim().parse::<usize>().ok())
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                return text;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_cannot_take_more_than_its_cap() {
    let (s, _) = server(20, 4, false).await;
    let addr = s.server.addr;
    // 127.0.0.1 tries to take all 20 slots: 4 are served, every further one is closed at once.
    let mut held = Vec::new();
    for _ in 0..20 {
        held.push(TcpStream::connect(addr).await.expect("connect"));
    }
    // "At once": well before the idle timeout (5 s) would close them.
    let soon = Instant::now() + Duration::from_millis(2500);
    let mut closed = 0;
    for c in held.iter_mut() {
        if closed_by(c, soon).await {
            closed += 1;
        }
    }
    assert_eq!(
        closed, 16,
        "connections beyond the per-address cap of 4 closed at once"
    );
    // Another address is served at once.
    let asked = Instant::now();
    let text = tokio::time::timeout(
        Duration::from_secs(3),
        get_from("127.0.0.2", addr, "/healthz"),
    )
    .await
    .expect("another address is served while 127.0.0.1 is at its cap");
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(asked.elapsed() < Duration::from_secs(3));
    s.finish().await;
}
