//! Prometheus metrics of the API: request counts and latencies by method, route and code.
//!
//! Labels are bounded: a REST route is its template with the collection filled in when it is
//! one the server serves (`/api/fulfillment/v1/subnets/{id}`; `{collection}` otherwise), a
//! gRPC route one of the methods the server serves (read from the service descriptors at
//! start), `unknown` for any other gRPC-looking path and `unmatched` for any other path. No
//! label ever carries a value the client chose.
//!
//! At each scrape the object gauges are computed from the store: `osac_objects{kind,state}`
//! with one grouped query (kinds and states are fixed sets), and
//! `osac_external_ip_pool_addresses{pool,state="allocated|available"}` from the pools'
//! counters (pools are few and provider-defined). These describe the whole provider, so the
//! API port serves them to provider admins only ([`render_for_provider`]); the metrics
//! listener serves them without a token to whoever can reach its address. On Linux the standard process metrics
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_open_fds`,
//! `process_start_time_seconds`, …) are exported too.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use axum::extract::{MatchedPath, Request};
use axum::response::{IntoResponse, Response};
use osac_model::Kind;
use osac_store::{ListQuery, Store};
use prometheus::{
    Encoder, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, TextEncoder,
    register_histogram_vec, register_int_counter, register_int_counter_vec, register_int_gauge_vec,
};
use prost::Message;

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

static OBJECTS: LazyLock<Option<IntGaugeVec>> = LazyLock::new(|| {
    register_int_gauge_vec!(
        "osac_objects",
        "Stored objects by kind and status.state (\"\" when an object has none yet)",
        &["kind", "state"]
    )
    .ok()
});

static POOL_ADDRESSES: LazyLock<Option<IntGaugeVec>> = LazyLock::new(|| {
    register_int_gauge_vec!(
        "osac_external_ip_pool_addresses",
        "Addresses of each ExternalIPPool (by name, else id) held by ExternalIPs (allocated) or free (available)",
        &["pool", "state"]
    )
    .ok()
});

/// Counters kept by the store (process-wide atomics), brought up to the store's count at each
/// scrape.
static WRITE_TRANSACTIONS: LazyLock<Option<IntCounter>> = LazyLock::new(|| {
    register_int_counter!(
        "osac_store_write_transactions_total",
        "Write transactions this process committed (objects and driver records)"
    )
    .ok()
});

/// Group commits and the write sets they carried (brought up to the store's count at each
/// scrape).
static GROUP_COMMITS: LazyLock<Option<IntCounter>> = LazyLock::new(|| {
    register_int_counter!(
        "osac_store_group_commits_total",
        "Group commits this process made (transactions shared by concurrent write sets)"
    )
    .ok()
});
static GROUP_COMMIT_SETS: LazyLock<Option<IntCounter>> = LazyLock::new(|| {
    register_int_counter!(
        "osac_store_group_commit_sets_total",
        "Write sets (status writes with their events, driver records) committed by group commits"
    )
    .ok()
});

/// Serialises the store counters' catch-up, which adds the difference since the last scrape.
static STORE_COUNTERS_SYNC: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Brings a counter up to `count` (a store count only grows).
fn catch_up(counter: &Option<IntCounter>, count: u64) {
    if let Some(c) = counter.as_ref() {
        c.inc_by(count.saturating_sub(c.get()));
    }
}

/// Registers the process metrics (Linux) once per process: CPU seconds (fractional), memory,
/// file descriptors, threads and start time.
pub fn register_process_metrics() {
    #[cfg(target_os = "linux")]
    crate::process_metrics::register();
}

/// gRPC methods served besides the osac-net services: reflection and health.
const INFRA_METHODS: &[&str] = &[
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
    "/grpc.health.v1.Health/Check",
    "/grpc.health.v1.Health/Watch",
];

/// Every gRPC method path the server serves (`/package.Service/Method`).
static GRPC_METHODS: LazyLock<HashSet<String>> =
    LazyLock::new(|| grpc_methods(osac_proto::FILE_DESCRIPTOR_SET));

/// The method paths of every service of an encoded descriptor set, plus [`INFRA_METHODS`].
fn grpc_methods(descriptor_set: &[u8]) -> HashSet<String> {
    let mut out: HashSet<String> = INFRA_METHODS.iter().map(|m| m.to_string()).collect();
    let Ok(set) = prost_types::FileDescriptorSet::decode(descriptor_set) else {
        return out;
    };
    for file in &set.file {
        let package = file.package();
        for service in &file.service {
            for method in &service.method {
                out.insert(format!("/{package}.{}/{}", service.name(), method.name()));
            }
        }
    }
    out
}

/// The fully qualified names of the osac-net gRPC services (`osacnet.v1.Subnets`, …).
pub fn grpc_service_names() -> Vec<String> {
    let mut names: Vec<String> = GRPC_METHODS
        .iter()
        .filter(|m| m.starts_with("/osacnet."))
        .filter_map(|m| m.trim_start_matches('/').split_once('/'))
        .map(|(service, _)| service.to_string())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// How a request is labelled: `method` is the HTTP method or `GRPC`, `route` a bounded value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteLabel {
    pub method: String,
    pub route: String,
    pub grpc: bool,
}

/// Labels a request (before it is served: the matched route is known by then).
pub fn classify(req: &Request) -> RouteLabel {
    let path = req.uri().path();
    if GRPC_METHODS.contains(path) {
        return RouteLabel {
            method: "GRPC".into(),
            route: path.to_string(),
            grpc: true,
        };
    }
    let grpc_content = req
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/grpc"));
    if grpc_content || path.starts_with("/osacnet.") || path.starts_with("/grpc.") {
        return RouteLabel {
            method: "GRPC".into(),
            route: "unknown".into(),
            grpc: true,
        };
    }
    let method = req.method();
    // Only the standard methods: an extension method is a client-chosen string.
    let method = if [
        "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE", "CONNECT",
    ]
    .contains(&method.as_str())
    {
        method.as_str().to_string()
    } else {
        "OTHER".to_string()
    };
    RouteLabel {
        method,
        route: req
            .extensions()
            .get::<MatchedPath>()
            .map(|m| with_collection(m.as_str(), path))
            .unwrap_or_else(|| "unmatched".into()),
        grpc: false,
    }
}

/// A route template with its `{collection}` segment replaced by the collection the request
/// named, when that is one of the served collections (a fixed set); any other value keeps the
/// template.
fn with_collection(template: &str, path: &str) -> String {
    let Some(at) = template
        .split('/')
        .position(|segment| segment == "{collection}")
    else {
        return template.to_string();
    };
    let Some(named) = path.split('/').nth(at) else {
        return template.to_string();
    };
    if !Kind::ALL.into_iter().any(|k| k.collection() == named) {
        return template.to_string();
    }
    template
        .split('/')
        .enumerate()
        .map(|(i, segment)| if i == at { named } else { segment })
        .collect::<Vec<_>>()
        .join("/")
}

/// The status of a response as a label: `grpc-<code>` when it carries a gRPC status in its
/// headers, else the HTTP status.
pub fn code_of(resp: &Response) -> String {
    match resp
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
    {
        Some(c) if c.len() <= 2 && c.bytes().all(|b| b.is_ascii_digit()) => format!("grpc-{c}"),
        _ => resp.status().as_u16().to_string(),
    }
}

/// Records one request.
pub fn record(label: &RouteLabel, code: &str, elapsed: Duration) {
    if let Some(c) = REQUESTS.as_ref() {
        c.with_label_values(&[label.method.as_str(), label.route.as_str(), code])
            .inc();
    }
    if let Some(h) = LATENCY.as_ref() {
        h.with_label_values(&[label.method.as_str(), label.route.as_str()])
            .observe(elapsed.as_secs_f64());
    }
}

/// `/metrics`: refreshes the object gauges from the store, then encodes everything. A store
/// that does not answer leaves the gauges as they were (the scrape still succeeds: the
/// request and process metrics matter most then).
pub async fn render(store: Arc<dyn Store>) -> Response {
    if let Err(e) = refresh_gauges(store.as_ref()).await {
        tracing::warn!(error = %e, "cannot refresh the object gauges");
    }
    encode()
}

/// `/metrics` on the API port: the same text, for provider-admin credentials only (it shows
/// every pool's allocation and how many objects of each kind exist, all tenants together).
/// Scrapers without a token use the metrics listener (`--metrics-listen`).
pub async fn render_for_provider(
    service: Arc<crate::Service>,
    headers: axum::http::HeaderMap,
) -> Response {
    match crate::rest::caller(&service, &headers).await {
        Ok(caller) if caller.is_provider() => render(service.store.clone()).await,
        Ok(_) => crate::ApiError::denied(
            "GET /metrics on the API port needs a provider-admin token; scrape the metrics listener (--metrics-listen) instead",
        )
        .into_response(),
        Err(e) => e.into_response(),
    }
}

async fn refresh_gauges(store: &dyn Store) -> Result<(), osac_store::StoreError> {
    {
        let _one_at_a_time = STORE_COUNTERS_SYNC
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        catch_up(&WRITE_TRANSACTIONS, osac_store::write_transactions());
        let (commits, sets) = osac_store::group_commits();
        catch_up(&GROUP_COMMITS, commits);
        catch_up(&GROUP_COMMIT_SETS, sets);
    }
    let counts = store.count_by_state().await?;
    let mut pools = Vec::new();
    let mut query = ListQuery::all(Kind::ExternalIpPool);
    loop {
        let page = store.list(&query).await?;
        let n = page.items.len() as i64;
        pools.extend(page.items);
        if n < query.limit || n == 0 {
            break;
        }
        query.offset += n;
    }
    if let Some(g) = OBJECTS.as_ref() {
        // Gone (kind, state) pairs disappear instead of staying at their last value.
        g.reset();
        for c in &counts {
            g.with_label_values(&[c.kind.collection(), c.state.as_str()])
                .set(c.count);
        }
    }
    if let Some(g) = POOL_ADDRESSES.as_ref() {
        g.reset();
        for pool in &pools {
            let status = &pool.body["status"];
            // proto-JSON writes int64 as a string.
            let counter = |field: &str| match &status[field] {
                serde_json::Value::String(s) => s.parse().unwrap_or(0),
                v => v.as_i64().unwrap_or(0),
            };
            for state in ["allocated", "available"] {
                g.with_label_values(&[pool.label(), state])
                    .set(counter(state));
            }
        }
    }
    Ok(())
}

/// The metrics registry in the Prometheus text format.
pub fn encode() -> Response {
    let mut buf = Vec::new();
    let families = prometheus::gather();
    match TextEncoder::new().encode(&families, &mut buf) {
        Ok(()) => ([("content-type", "text/plain; version=0.0.4")], buf).into_response(),
        Err(e) => (axum::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_come_from_the_descriptors() {
        let m = grpc_methods(osac_proto::FILE_DESCRIPTOR_SET);
        assert!(m.contains("/osacnet.v1.Subnets/Create"));
        assert!(m.contains("/osacnet.admin.v1.Tenants/List"));
        assert!(m.contains("/grpc.health.v1.Health/Check"));
        assert!(!m.contains("/osacnet.v1.Subnets/Nope"));
        assert!(grpc_service_names().contains(&"osacnet.v1.Subnets".to_string()));
    }

    #[test]
    fn client_chosen_paths_get_fixed_labels() {
        let req = |path: &str, grpc: bool| {
            let mut b = axum::http::Request::builder().uri(path);
            if grpc {
                b = b.header("content-type", "application/grpc");
            }
            b.body(axum::body::Body::empty()).unwrap()
        };
        assert_eq!(
            classify(&req("/osacnet.v1.Subnets/Get", true)).route,
            "/osacnet.v1.Subnets/Get"
        );
        assert_eq!(classify(&req("/osacnet.x1234/Foo", true)).route, "unknown");
        assert_eq!(classify(&req("/osacnet.x1234/Foo", false)).route, "unknown");
        assert_eq!(classify(&req("/a/b/c", true)).route, "unknown");
        assert_eq!(classify(&req("/no/such/route", false)).route, "unmatched");
    }

    #[test]
    fn rest_routes_are_labelled_per_collection() {
        assert_eq!(
            with_collection(
                "/api/fulfillment/v1/{collection}/{id}",
                "/api/fulfillment/v1/subnets/abc"
            ),
            "/api/fulfillment/v1/subnets/{id}"
        );
        assert_eq!(
            with_collection(
                "/api/private/v1/{collection}",
                "/api/private/v1/external_ip_pools"
            ),
            "/api/private/v1/external_ip_pools"
        );
        // A collection the client made up keeps the template.
        assert_eq!(
            with_collection(
                "/api/fulfillment/v1/{collection}",
                "/api/fulfillment/v1/x1234"
            ),
            "/api/fulfillment/v1/{collection}"
        );
        assert_eq!(with_collection("/healthz", "/healthz"), "/healthz");
    }
}
