//! Prometheus metrics of the API: request counts and latencies by method, route and code.
//! Labels are bounded: REST routes are templates, gRPC methods a fixed set.

use std::sync::LazyLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus::{
    Encoder, HistogramVec, IntCounterVec, TextEncoder, register_histogram_vec,
    register_int_counter_vec,
};

static REQUESTS: LazyLock<Option<IntCounterVec>> = LazyLock::new(|| {
    register_int_counter_vec!(
        "osac_api_requests_total",
        "API requests by method, route and code",
        &["method", "route", "code"]
    )
    .ok()
});

static LATENCY: LazyLock<Option<HistogramVec>> = LazyLock::new(|| {
    register_histogram_vec!(
        "osac_api_request_duration_seconds",
        "API request latency by method and route",
        &["method", "route"],
        vec![
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5
        ]
    )
    .ok()
});

/// Records one request.
pub async fn track(req: Request, next: Next) -> Response {
    let start = Instant::now();
    let path = req.uri().path().to_string();
    let grpc = path.starts_with("/osacnet.") || path.starts_with("/grpc.reflection.");
    let route = if grpc {
        path
    } else {
        req.extensions()
            .get::<MatchedPath>()
            .map(|m| m.as_str().to_string())
            .unwrap_or_else(|| "unmatched".into())
    };
    let method = if grpc {
        "GRPC".to_string()
    } else {
        req.method().to_string()
    };
    let resp = next.run(req).await;
    let code = resp
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .map(|c| format!("grpc-{c}"))
        .unwrap_or_else(|| resp.status().as_u16().to_string());
    if let Some(c) = REQUESTS.as_ref() {
        c.with_label_values(&[method.as_str(), route.as_str(), code.as_str()])
            .inc();
    }
    if let Some(h) = LATENCY.as_ref() {
        h.with_label_values(&[method.as_str(), route.as_str()])
            .observe(start.elapsed().as_secs_f64());
    }
    resp
}

/// `/metrics` in the Prometheus text format.
pub async fn render() -> Response {
    let mut buf = Vec::new();
    let families = prometheus::gather();
    match TextEncoder::new().encode(&families, &mut buf) {
        Ok(()) => ([("content-type", "text/plain; version=0.0.4")], buf).into_response(),
        Err(e) => (axum::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
