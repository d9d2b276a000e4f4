//! Operational endpoints on the API port: health, readiness, Prometheus metrics (for provider
//! admins only; the metrics listener is tested in `connections.rs`).

use serde_json::json;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_metrics() {
    let s = TestServer::sqlite().await;
    let anon = s.anonymous();
    let h = anon.get("/healthz").await;
    assert_eq!((h.status, h.text.as_str()), (200, "ok"));
    let r = anon.get("/readyz").await;
    assert_eq!((r.status, r.text.as_str()), (200, "ready"));

    // Some traffic: a create that reconciles, an error, an unknown route.
    let t = s.tenant("acme").await;
    t.ready_vn("net", "10.0.0.0/16").await;
    t.post(&format!("{PUB}/virtual_networks"), json!({"spec": {}}))
        .await
        .err(400, "INVALID_ARGUMENT", &[]);
    assert_eq!(anon.get("/no/such/route").await.status, 404);

    // The metrics describe the whole provider (every pool's allocation, how many objects of
    // each kind): on the API port an outsider and a tenant are refused (the rule in
    // `metrics::render_for_provider`; with the route serving `metrics::render` again, both
    // read them), the provider admin reads them.
    anon.get("/metrics")
        .await
        .err(401, "UNAUTHENTICATED", &["bearer token"]);
    t.get("/metrics").await.err(
        403,
        "PERMISSION_DENIED",
        &["provider-admin", "--metrics-listen"],
    );
    let m = s.admin.get("/metrics").await;
    assert_eq!(m.status, 200);
    let text = m.text;
    for needle in [
        "osac_api_requests_total{",
        "osac_api_request_duration_seconds_bucket{",
        "osac_reconcile_total{",
        "osac_reconcile_duration_seconds_bucket{",
        "osac_reconcile_queue_depth",
        "osac_manager_operations_total{",
        r#"route="/api/fulfillment/v1/virtual_networks""#,
        r#"code="400""#,
        r#"kind="virtual_networks""#,
        r#"operation="create_virtual_network""#,
    ] {
        assert!(text.contains(needle), "/metrics lacks {needle}");
    }
    // Labels stay low-cardinality: no ids, names or raw unknown paths.
    let vn = t.get(&format!("{PUB}/virtual_networks/net")).await.ok();
    let vn_id = vn["id"].as_str().unwrap();
    for line in text.lines().filter(|l| l.starts_with("osac_")) {
        assert!(
            !line.contains(vn_id) && !line.contains("/no/such/route") && !line.contains("acme"),
            "high-cardinality label: {line}"
        );
    }
    s.finish().await;
}
