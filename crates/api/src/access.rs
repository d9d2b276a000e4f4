//! Per-request observability: a request id, a tracing span that every log line of the request
//! carries, the request metrics and one access-log line.
//!
//! The request id is the client's `x-request-id` when it is sane (1 to
//! [`MAX_REQUEST_ID_LEN`] visible ASCII characters), else a fresh UUID; it is returned in the
//! `x-request-id` response header of REST and gRPC answers alike. The caller's subject is
//! resolved inside the handlers (authentication is part of the service call): they report it
//! with [`note_subject`], which records it on the request span and in the access-log line.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Body as HttpBody, Frame};
use tracing::Instrument;

use crate::metrics;

/// The request-id header, read from requests and set on responses.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Longest client-supplied request id that is kept.
pub const MAX_REQUEST_ID_LEN: usize = 128;

tokio::task_local! {
    /// The subject of the request being served, filled by [`note_subject`].
    static SUBJECT: Arc<Mutex<Option<String>>>;
}

/// The client's request id if it is sane, else a new one.
pub fn request_id(header: Option<&HeaderValue>) -> String {
    header
        .map(HeaderValue::as_bytes)
        .filter(|b| !b.is_empty() && b.len() <= MAX_REQUEST_ID_LEN)
        .filter(|b| b.iter().all(|c| (0x21..=0x7e).contains(c)))
        .and_then(|b| std::str::from_utf8(b).ok())
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string())
}

/// Reports the authenticated subject of the current request: recorded on the request span
/// (so the log lines that follow carry it) and in the access-log line. Outside a request
/// (controllers, tests) it does nothing.
pub fn note_subject(subject: &str) {
    tracing::Span::current().record("subject", subject);
    let _ = SUBJECT.try_with(|slot| {
        if let Ok(mut s) = slot.lock() {
            *s = Some(subject.to_string());
        }
    });
}

/// The middleware: request id, span, metrics, access log.
///
/// A gRPC answer carries its status in the trailers, after the body (and a watch streams for
/// as long as the client stays): its metrics and access-log line are written when the body
/// ends, with the `grpc-status` of the trailers (`grpc-1`, CANCELLED, when the client leaves
/// first). Other answers are logged when their head is ready.
pub async fn observe(req: Request, next: Next) -> Response {
    let start = Instant::now();
    let id = request_id(req.headers().get(REQUEST_ID_HEADER));
    let label = metrics::classify(&req);
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        subject = tracing::field::Empty,
    );
    let slot = Arc::new(Mutex::new(None));
    let mut resp = SUBJECT
        .scope(slot.clone(), next.run(req).instrument(span.clone()))
        .await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert(REQUEST_ID_HEADER, v);
    }
    let mut done = Done {
        label,
        id,
        slot,
        start,
        span,
        status: resp.status().as_u16(),
    };
    if done.label.grpc && resp.headers().get("grpc-status").is_none() {
        return resp.map(|inner| {
            Body::new(Observed {
                inner,
                done: Some(done),
            })
        });
    }
    let code = metrics::code_of(&resp);
    done.finish(&code);
    resp
}

/// What the access-log line and the metrics of one request need once it is over.
struct Done {
    label: metrics::RouteLabel,
    id: String,
    slot: Arc<Mutex<Option<String>>>,
    start: Instant,
    span: tracing::Span,
    status: u16,
}

impl Done {
    fn finish(&mut self, code: &str) {
        let elapsed = self.start.elapsed();
        metrics::record(&self.label, code, elapsed);
        let subject = self
            .slot
            .lock()
            .ok()
            .and_then(|s| s.clone())
            .unwrap_or_default();
        let _enter = self.span.enter();
        tracing::info!(
            target: "osac_api::access",
            method = %self.label.method,
            route = %self.label.route,
            status = self.status,
            code = %code,
            duration_ms = elapsed.as_secs_f64() * 1000.0,
            request_id = %self.id,
            subject = %subject,
            "request served"
        );
    }
}

/// A gRPC response body that reports the request when it ends; its frames are produced inside
/// the request span (a watch's log lines carry the request id too).
struct Observed {
    inner: Body,
    done: Option<Done>,
}

impl Observed {
    fn finish(&mut self, code: &str) {
        if let Some(mut d) = self.done.take() {
            d.finish(code);
        }
    }
}

impl HttpBody for Observed {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let span = self.done.as_ref().map(|d| d.span.clone());
        let _enter = span.as_ref().map(tracing::Span::enter);
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(trailers) = frame.trailers_ref() {
                    let code = trailers
                        .get("grpc-status")
                        .and_then(|v| v.to_str().ok())
                        .filter(|c| c.len() <= 2 && c.bytes().all(|b| b.is_ascii_digit()))
                        .map(|c| format!("grpc-{c}"))
                        .unwrap_or_else(|| "grpc-unknown".to_string());
                    self.finish(&code);
                }
            }
            Poll::Ready(Some(Err(_))) => self.finish("grpc-unknown"),
            Poll::Ready(None) => self.finish("grpc-unknown"),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Observed {
    fn drop(&mut self) {
        // The client left before the end.
        self.finish("grpc-1");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sane_ids_are_kept_others_replaced() {
        let v = |s: &str| HeaderValue::from_str(s).unwrap();
        assert_eq!(request_id(Some(&v("abc-123"))), "abc-123");
        for bad in ["", "has space", &"x".repeat(MAX_REQUEST_ID_LEN + 1)] {
            let got = request_id(Some(&v(bad)));
            assert_ne!(got, bad);
            assert_eq!(got.len(), 32);
        }
        let latin1 = HeaderValue::from_bytes(b"caf\xe9").unwrap();
        assert_eq!(request_id(Some(&latin1)).len(), 32);
        assert_eq!(request_id(None).len(), 32);
    }

    /// A log writer the test can read back.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    async fn serve_one(id: &str) -> Response {
        use tower::ServiceExt;
        let app = axum::Router::new()
            .route(
                "/thing",
                axum::routing::get(|| async {
                    note_subject("alice");
                    tracing::warn!("the service layer says something");
                    "ok"
                }),
            )
            .layer(axum::middleware::from_fn(observe));
        let req = axum::http::Request::builder()
            .uri("/thing")
            .header(REQUEST_ID_HEADER, id)
            .body(Body::empty())
            .unwrap();
        app.oneshot(req).await.unwrap()
    }

    #[tokio::test]
    async fn every_log_line_of_a_request_carries_its_id() {
        for json in [false, true] {
            let out = Captured::default();
            let builder = tracing_subscriber::fmt()
                .with_writer(out.clone())
                .with_ansi(false);
            let _guard = if json {
                tracing::subscriber::set_default(builder.json().finish())
            } else {
                tracing::subscriber::set_default(builder.finish())
            };
            let resp = serve_one("req-42").await;
            assert_eq!(resp.headers()[REQUEST_ID_HEADER], "req-42");
            drop(resp);
            let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            let service = lines
                .iter()
                .find(|l| l.contains("the service layer says something"))
                .unwrap_or_else(|| panic!("no service line in {text}"));
            assert!(service.contains("req-42"), "{service}");
            assert!(service.contains("alice"), "{service}");
            let access = lines
                .iter()
                .find(|l| l.contains("request served"))
                .unwrap_or_else(|| panic!("no access line in {text}"));
            for needle in ["req-42", "alice", "/thing", "200", "duration_ms", "GET"] {
                assert!(access.contains(needle), "{needle} missing: {access}");
            }
            if json {
                let v: serde_json::Value = serde_json::from_str(access).unwrap();
                assert_eq!(v["fields"]["request_id"], "req-42");
                assert_eq!(v["fields"]["subject"], "alice");
            }
        }
    }
}
