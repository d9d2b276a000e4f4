//! The connection layer of the server: one accept loop for REST and gRPC, plain or TLS, with
//! caps on concurrent connections (in all and per client address), deadlines that close
//! connections which do not use their slot, a bound on the time to a response head, and
//! graceful shutdown.
//!
//! Rules:
//! - At most `max_connections` connections are served at once. When the cap is reached the
//!   server stops accepting: further connections wait in the kernel's listen backlog (their
//!   TCP handshake may complete, but nothing is read) until a served connection closes; the
//!   operating system refuses them only when its backlog is full.
//! - At most `max_connections_per_address` of them come from one client address (an IPv4
//!   address or an IPv6 /64): a connection beyond that is closed as soon as it is accepted,
//!   so one address cannot take every slot.
//! - A connection must send a complete request head within `idle_timeout` of being accepted
//!   (the TLS handshake included), and again within `idle_timeout` of its last response
//!   ending; otherwise it is closed (HTTP/2: GOAWAY, then closed at most [`CLOSE_GRACE`]
//!   later). A silent socket, one that sent only the HTTP/2 preface, one trickling a request
//!   head and an idle keep-alive connection all give their slot back this way. A request is
//!   in flight until its response body ends, so an open watch stream keeps its connection
//!   however quiet it is; HTTP/2 connections are pinged every [`H2_PING_INTERVAL`] and closed
//!   when a ping is not answered within [`H2_PING_TIMEOUT`] (a vanished peer).
//! - A request gets its response head within `request_timeout` (reading the request body
//!   included), else REST answers 504 `DEADLINE_EXCEEDED` and gRPC `DEADLINE_EXCEEDED`.
//!   Streaming bodies after the head are not bounded: a REST `?watch=true` event stream or a
//!   gRPC `Watch` lasts as long as its client keeps it. HTTP/1 request headers must also arrive
//!   within `request_timeout`. A client speaking plain HTTP to the TLS port fails its handshake
//!   at once and is closed.

mod idle;
mod peers;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;

use crate::tls::{TlsConfig, TlsReloader};

/// Default of [`TransportConfig::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// Default of [`TransportConfig::max_connections_per_address`].
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 256;
/// Default of [`TransportConfig::request_timeout`].
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Default of [`TransportConfig::idle_timeout`].
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a connection closed for idleness may take to finish closing (an HTTP/2 GOAWAY
/// exchange) before it is dropped.
pub const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// How often an HTTP/2 connection is pinged.
pub const H2_PING_INTERVAL: Duration = Duration::from_secs(30);
/// How long an HTTP/2 ping may stay unanswered before the connection is closed.
pub const H2_PING_TIMEOUT: Duration = Duration::from_secs(20);
/// Connections the metrics and health listener serves at once (its clients are the
/// provider's probes and scrapers).
pub const OPS_MAX_CONNECTIONS: usize = 64;

/// TLS and connection limits of the listening socket, and where the operations endpoints
/// listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportConfig {
    /// Serve TLS with these files (None: plain HTTP).
    pub tls: Option<TlsConfig>,
    /// Connections served at once; further ones wait in the listen backlog.
    pub max_connections: usize,
    /// Connections served at once from one client address (IPv6: one /64); further ones are
    /// closed when accepted.
    pub max_connections_per_address: usize,
    /// Longest time from a request to its response head.
    pub request_timeout: Duration,
    /// Longest time a connection may go without a request in flight: from accept to its first
    /// request head (TLS handshake included), and from each response's end to the next head.
    pub idle_timeout: Duration,
    /// A second, plain-HTTP listener serving only `/healthz`, `/readyz` and `/metrics`, without
    /// a token and apart from the API's connection caps (None: no such listener).
    pub metrics_listen: Option<SocketAddr>,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            tls: None,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_address: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            metrics_listen: None,
        }
    }
}

impl TransportConfig {
    /// The limits of the metrics and health listener: plain HTTP, [`OPS_MAX_CONNECTIONS`], and
    /// this configuration's timeouts.
    pub fn for_metrics(&self) -> TransportConfig {
        TransportConfig {
            tls: None,
            max_connections: OPS_MAX_CONNECTIONS,
            max_connections_per_address: OPS_MAX_CONNECTIONS,
            metrics_listen: None,
            ..self.clone()
        }
    }
}

fn is_grpc(req: &Request) -> bool {
    req.headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/grpc"))
}

/// Middleware: the response head must be ready within the limit (the body may stream on).
pub async fn request_timeout(State(limit): State<Duration>, req: Request, next: Next) -> Response {
    let grpc = is_grpc(&req);
    let what = format!("{} {}", req.method(), req.uri().path());
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => {
            let message = format!(
                "{what}: no response within the request timeout of {} s",
                limit.as_secs_f64()
            );
            if grpc {
                tonic::Status::deadline_exceeded(message).into_http()
            } else {
                (
                    axum::http::StatusCode::GATEWAY_TIMEOUT,
                    axum::Json(serde_json::json!({
                        "code": "DEADLINE_EXCEEDED",
                        "message": message,
                        "details": [],
                    })),
                )
                    .into_response()
            }
        }
    }
}

/// Serves `app` on `listener` until `stop` resolves, then stops accepting, waits for open
/// connections to finish their requests (`on_stop` runs first, e.g. to end event streams) and
/// returns.
pub async fn serve<S, F>(
    listener: TcpListener,
    app: Router,
    config: &TransportConfig,
    tls: Option<Arc<TlsReloader>>,
    stop: S,
    on_stop: F,
) where
    S: Future<Output = ()>,
    F: FnOnce(),
{
    // Every connection holds a permit until it ends; shutdown waits for all of them.
    let slots = config.max_connections.clamp(1, u32::MAX as usize);
    let permits = Arc::new(Semaphore::new(slots));
    let peers = peers::Peers::new(config.max_connections_per_address);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(config.request_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(H2_PING_INTERVAL)
        .keep_alive_timeout(H2_PING_TIMEOUT);
    let builder = Arc::new(builder);
    let idle = config.idle_timeout;
    let (halt, halted) = watch::channel(false);
    tokio::pin!(stop);
    loop {
        let permit = tokio::select! {
            _ = &mut stop => break,
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (tcp, peer) = tokio::select! {
            _ = &mut stop => break,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors and the like: try again shortly.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let deadline = Instant::now() + idle;
        let Some(slot) = peers.admit(peer.ip()) else {
            tracing::debug!(%peer, "connection closed: its address holds the most connections allowed per address");
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let builder = builder.clone();
        let app = app.clone();
        let tls = tls.clone();
        let mut halted = halted.clone();
        tokio::spawn(async move {
            let _held = (permit, slot);
            let io: Box<dyn Io> = match tls {
                None => Box::new(tcp),
                Some(tls) => {
                    let acceptor = tokio_rustls::TlsAcceptor::from(tls.current());
                    let handshake = tokio::time::timeout_at(deadline, acceptor.accept(tcp));
                    let outcome = tokio::select! {
                        r = handshake => r,
                        // Handshakes still running at shutdown are abandoned (they would hold
                        // the shutdown up).
                        _ = halted.wait_for(|h| *h) => return,
                    };
                    match outcome {
                        Ok(Ok(stream)) => Box::new(stream),
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "TLS handshake not done within the idle timeout");
                            return;
                        }
                    }
                }
            };
            serve_connection(&builder, io, app, deadline, idle, halted, peer).await;
        });
    }
    drop(listener);
    let _ = halt.send(true);
    on_stop();
    let _ = permits.acquire_many(slots as u32).await;
}

/// A plain or TLS stream.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Serves one connection until it ends, stays idle past its deadline (see the module rules),
/// or the server halts (then it finishes the requests in flight).
async fn serve_connection(
    builder: &auto::Builder<TokioExecutor>,
    io: Box<dyn Io>,
    app: Router,
    deadline: Instant,
    idle: Duration,
    mut halted: watch::Receiver<bool>,
    peer: SocketAddr,
) {
    let activity = idle::Activity::new();
    let service = TowerToHyperService::new(idle::Tracked {
        app,
        activity: activity.clone(),
    });
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    tokio::pin!(conn);
    let halting = tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
            return;
        }
        _ = activity.expired(deadline, idle) => false,
        _ = halted.wait_for(|h| *h) => true,
    };
    conn.as_mut().graceful_shutdown();
    if halting {
        let _ = conn.await;
    } else {
        tracing::debug!(%peer, "connection closed: no request within the idle timeout");
        let _ = tokio::time::timeout(CLOSE_GRACE, conn).await;
    }
}
