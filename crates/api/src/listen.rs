//! The connection layer of the server: one accept loop for REST and gRPC, plain or TLS, with a
//! cap on concurrent connections, a bound on the time to a response head, and graceful
//! shutdown.
//!
//! Rules:
//! - At most `max_connections` connections are served at once. When the cap is reached the
//!   server stops accepting: further connections wait in the kernel's listen backlog (their
//!   TCP handshake may complete, but nothing is read) until a served connection closes; the
//!   operating system refuses them only when its backlog is full.
//! - A request gets its response head within `request_timeout` (reading the request body
//!   included), else REST answers 504 `DEADLINE_EXCEEDED` and gRPC `DEADLINE_EXCEEDED`.
//!   Streaming bodies after the head are not bounded: a REST `?watch=true` event stream or a
//!   gRPC `Watch` lasts as long as its client keeps it.
//! - HTTP/1 request headers must arrive within `request_timeout` (a connection silent for
//!   longer may be closed); a TLS handshake must finish within [`HANDSHAKE_TIMEOUT`]. A client speaking plain HTTP to the
//!   TLS port fails its handshake at once and is closed.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::tls::{TlsConfig, TlsReloader};

/// Default of [`TransportConfig::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// Default of [`TransportConfig::request_timeout`].
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a client may take to finish its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// TLS and connection limits of the listening socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportConfig {
    /// Serve TLS with these files (None: plain HTTP).
    pub tls: Option<TlsConfig>,
    /// Connections served at once; further ones wait in the listen backlog.
    pub max_connections: usize,
    /// Longest time from a request to its response head.
    pub request_timeout: Duration,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            tls: None,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
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
    let permits = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(config.request_timeout);
    let builder = Arc::new(builder);
    // Handshakes still running at shutdown are abandoned (they would hold the shutdown up).
    let (halt, halted) = tokio::sync::watch::channel(false);
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
        let _ = tcp.set_nodelay(true);
        let watcher = graceful.watcher();
        let builder = builder.clone();
        let app = app.clone();
        let tls = tls.clone();
        let mut halted = halted.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tls {
                None => serve_connection(&builder, watcher, tcp, app).await,
                Some(tls) => {
                    let acceptor = tokio_rustls::TlsAcceptor::from(tls.current());
                    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp));
                    let outcome = tokio::select! {
                        r = handshake => r,
                        _ = halted.wait_for(|h| *h) => return,
                    };
                    match outcome {
                        Ok(Ok(stream)) => serve_connection(&builder, watcher, stream, app).await,
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
        });
    }
    drop(listener);
    let _ = halt.send(true);
    on_stop();
    graceful.shutdown().await;
}

async fn serve_connection<I>(
    builder: &auto::Builder<TokioExecutor>,
    watcher: hyper_util::server::graceful::Watcher,
    io: I,
    app: Router,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = TowerToHyperService::new(app);
    let conn = builder
        .serve_connection_with_upgrades(TokioIo::new(io), service)
        .into_owned();
    if let Err(e) = watcher.watch(conn).await {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}
