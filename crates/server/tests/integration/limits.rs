//! Connection-layer limits, plain and TLS: at most `max_connections` connections are served
//! (the next one waits until one closes), and neither the request timeout (time to a response
//! head) nor the idle timeout (time without a request in flight) cuts watch streams.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use osac_api::TransportConfig;
use osac_api::tls::TlsConfig;
use osac_proto::admin::v1 as admin;
use osac_proto::v1 as pb;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::common::PRIV;
use crate::common::pki::*;

trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}
type Conn = Pin<Box<dyn Io>>;

/// Connects (and completes the TLS handshake when `tls` is set).
async fn connect(addr: SocketAddr, tls: Option<Arc<rustls::ClientConfig>>) -> Conn {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    match tls {
        None => Box::pin(tcp),
        Some(config) => {
            let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
            let stream = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await
                .expect("handshake");
            Box::pin(stream)
        }
    }
}

/// Reads an HTTP/1.1 response head (and a short body when one follows at once).
async fn read_head(conn: &mut Conn) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = conn.read(&mut chunk).await.expect("read");
        assert!(
            n > 0,
            "connection closed after {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                return text;
            }
        }
    }
}

/// One keep-alive `GET /healthz` on a new connection; returns the open connection and the
/// response.
async fn healthz(addr: SocketAddr, tls: Option<Arc<rustls::ClientConfig>>) -> (Conn, String) {
    let mut conn = connect(addr, tls).await;
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .expect("write");
    let head = read_head(&mut conn).await;
    (conn, head)
}

async fn limited_server(
    tls: bool,
    max_connections: usize,
    idle_timeout: Duration,
) -> (LimitedServer, Option<Arc<rustls::ClientConfig>>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new("limits CA");
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
        request_timeout: Duration::from_secs(1),
        idle_timeout,
        ..TransportConfig::default()
    };
    let s = LimitedServer::start(dir, transport).await;
    (s, tls.then(|| rustls_client(&ca.pem())))
}

async fn connection_cap(tls: bool) {
    let (s, client) = limited_server(tls, 2, osac_api::listen::DEFAULT_IDLE_TIMEOUT).await;
    let addr = s.server.addr;
    let mut held = Vec::new();
    for _ in 0..2 {
        let (conn, head) = healthz(addr, client.clone()).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        held.push(conn);
    }
    // The cap is reached: the third connection is not served while both stay open.
    let third = tokio::spawn(healthz(addr, client.clone()));
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(
        !third.is_finished(),
        "a third connection was served beyond max_connections = 2"
    );
    // One closes: the waiting connection is served.
    drop(held.pop());
    let (_conn, head) = tokio::time::timeout(Duration::from_secs(5), third)
        .await
        .expect("served once a connection closed")
        .expect("task");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    drop(held);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_cap_plain() {
    connection_cap(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_cap_tls() {
    connection_cap(true).await;
}

/// A request whose body never completes gets its answer when the timeout (1 s) expires.
async fn slow_body(
    addr: SocketAddr,
    client: Option<Arc<rustls::ClientConfig>>,
    path: &str,
    content_type: &str,
    token: &str,
) -> String {
    let mut conn = connect(addr, client).await;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nContent-Type: {content_type}\r\nContent-Length: 100\r\n\r\n{{"
    );
    conn.write_all(head.as_bytes()).await.expect("write");
    let start = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(10), read_head(&mut conn))
        .await
        .expect("an answer after the request timeout");
    assert!(
        start.elapsed() >= Duration::from_millis(900),
        "answered too early: {answer}"
    );
    answer
}

async fn request_timeout(tls: bool) {
    let (s, client) = limited_server(tls, 64, osac_api::listen::DEFAULT_IDLE_TIMEOUT).await;
    let addr = s.server.addr;
    let rest = slow_body(
        addr,
        client.clone(),
        &format!("{PRIV}/tenants"),
        "application/json",
        &s.admin_token,
    )
    .await;
    assert!(rest.starts_with("HTTP/1.1 504"), "{rest}");
    assert!(rest.contains("\"code\":\"DEADLINE_EXCEEDED\""), "{rest}");
    assert!(rest.contains("request timeout"), "{rest}");
    let grpc = slow_body(
        addr,
        client,
        "/osacnet.admin.v1.Tenants/Create",
        "application/grpc",
        &s.admin_token,
    )
    .await;
    assert!(
        grpc.to_ascii_lowercase().contains("grpc-status: 4"),
        "{grpc}"
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_timeout_plain() {
    request_timeout(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_timeout_tls() {
    request_timeout(true).await;
}

#[derive(Clone)]
struct Bearer(String);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        req.metadata_mut().insert(
            "authorization",
            format!("Bearer {}", self.0).parse().expect("header"),
        );
        Ok(req)
    }
}

/// Watches outlive the request timeout (1 s) and, quiet, the idle timeout (1 s): REST event
/// stream and gRPC server stream (a request in flight keeps its connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_timeout_does_not_cut_watches() {
    let (s, _) = limited_server(false, 64, Duration::from_secs(1)).await;
    let url = s.url();
    let http = reqwest::Client::new();
    let mut rest = http
        .get(format!("{url}{PRIV}/tenants?watch=true"))
        .bearer_auth(&s.admin_token)
        .send()
        .await
        .expect("REST watch");
    assert_eq!(rest.status(), 200);
    let channel = tonic::transport::Channel::from_shared(url.clone())
        .expect("uri")
        .connect()
        .await
        .expect("gRPC connect");
    let mut tenants = admin::tenants_client::TenantsClient::with_interceptor(
        channel,
        Bearer(s.admin_token.clone()),
    );
    let mut grpc = tenants
        .watch(pb::WatchRequest::default())
        .await
        .expect("gRPC watch")
        .into_inner();

    tokio::time::sleep(Duration::from_millis(2500)).await;
    let created = http
        .post(format!("{url}{PRIV}/tenants"))
        .bearer_auth(&s.admin_token)
        .json(&json!({"metadata": {"name": "late"}}))
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), 200);

    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = String::new();
    while !seen.contains("\"late\"") {
        let left = deadline.saturating_duration_since(Instant::now());
        let chunk = tokio::time::timeout(left, rest.chunk())
            .await
            .expect("REST event within 10 s")
            .expect("REST stream still open")
            .expect("REST stream not ended");
        seen.push_str(&String::from_utf8_lossy(&chunk));
        assert!(!seen.contains("DEADLINE_EXCEEDED"), "{seen}");
    }
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = tokio::time::timeout(left, grpc.message())
            .await
            .expect("gRPC event within 10 s")
            .expect("gRPC stream not cut")
            .expect("gRPC stream open");
        let name = event.object.and_then(|t| t.metadata).map(|m| m.name);
        if name.as_deref() == Some("late") {
            break;
        }
    }
    s.finish().await;
}
