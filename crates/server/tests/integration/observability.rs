//! Observability: bounded metric labels, request ids on REST and gRPC, gRPC health, process
//! metrics and the gauges computed at scrape time.

use std::collections::BTreeSet;

use osac_proto::v1 as pb;
use tonic::Request;
use tonic::transport::Channel;

use crate::common::*;

/// The distinct `route` label values of `osac_api_requests_total` in a /metrics text.
fn routes(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| l.starts_with("osac_api_requests_total{"))
        .filter_map(|l| l.split("route=\"").nth(1))
        .filter_map(|r| r.split('"').next())
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_grpc_paths_add_no_label_values() {
    let s = TestServer::sqlite().await;
    let anon = s.anonymous();
    // Some traffic first, so the known labels exist.
    anon.get("/no/such/route").await;
    let http = reqwest::Client::new();
    let probe = |path: String| {
        http.post(format!("{}{path}", s.url()))
            .header("content-type", "application/grpc")
            .body(Vec::<u8>::new())
            .send()
    };
    probe("/osacnet.warmup/Foo".into()).await.unwrap();
    s.admin.get("/metrics").await; // the scrape itself is counted from the second one on
    let before = routes(&s.admin.get("/metrics").await.text);

    for i in 0..1000 {
        let path = match i % 4 {
            0 => format!("/osacnet.rand{i}.Svc/Method{i}"),
            1 => format!("/osacnet.v1.Subnets/Nope{i}"),
            2 => format!("/grpc.x{i}/Y"),
            _ => format!("/pkg{i}.Service/Call"),
        };
        let r = probe(path).await.unwrap();
        assert_eq!(r.headers()["grpc-status"], "12", "UNIMPLEMENTED");
    }
    let after_text = s.admin.get("/metrics").await.text;
    let after = routes(&after_text);
    assert_eq!(
        after.difference(&before).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "new route label values"
    );
    assert!(after.contains("unknown") && after.contains("unmatched"));
    for line in after_text.lines().filter(|l| l.starts_with("osac_api_")) {
        assert!(
            !line.contains("rand") && !line.contains("Nope") && !line.contains("pkg"),
            "client-chosen label value: {line}"
        );
    }
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_ids_round_trip_on_rest_and_grpc() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    let http = reqwest::Client::new();
    let get = |id: &str| {
        http.get(format!("{}{PUB}/virtual_networks", s.url()))
            .bearer_auth(t.token.clone().unwrap())
            .header("x-request-id", id)
            .send()
    };
    let r = get("rest-id-1").await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-request-id"], "rest-id-1");
    // An insane id (too long, or with spaces) is replaced by a generated one.
    for bad in ["x".repeat(200), "two words".to_string()] {
        let r = get(&bad).await.unwrap();
        let got = r.headers()["x-request-id"].to_str().unwrap().to_string();
        assert_ne!(got, bad);
        assert_eq!(got.len(), 32, "{got}");
    }
    // Without one, every answer (also errors and unknown routes) gets one.
    let r = http
        .get(format!("{}/no/such/route", s.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.headers()["x-request-id"].len(), 32);

    // gRPC: the id comes back in the response metadata, on success and on error.
    let ch = Channel::from_shared(s.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut vns = pb::virtual_networks_client::VirtualNetworksClient::new(ch);
    let mut req = Request::new(pb::ListRequest::default());
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {}", t.token.clone().unwrap())
            .parse()
            .unwrap(),
    );
    req.metadata_mut()
        .insert("x-request-id", "grpc-id-7".parse().unwrap());
    let resp = vns.list(req).await.unwrap();
    assert_eq!(resp.metadata().get("x-request-id").unwrap(), "grpc-id-7");
    let mut req = Request::new(pb::ListRequest::default());
    req.metadata_mut()
        .insert("x-request-id", "grpc-id-8".parse().unwrap());
    let status = vns.list(req).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    assert_eq!(status.metadata().get("x-request-id").unwrap(), "grpc-id-8");
    s.finish().await;
}

/// The value of the sample `name{labels}` in a /metrics text (labels as written there).
fn sample(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.trim().parse().ok())
}

/// The `osac_objects` gauge of `kind` objects in `state` in a /metrics text.
fn object_gauge(text: &str, kind: &str, state: &str) -> Option<f64> {
    sample(
        text,
        &format!("osac_objects{{kind=\"{kind}\",state=\"{state}\"}}"),
    )
}

/// How many objects of a public `collection` the API lists in `state`.
async fn listed_in_state(api: &Api, collection: &str, state: &str) -> i64 {
    let filter = format!("this.status.state == \"{state}\"");
    api.list(collection, &[("filter", &filter)]).await.ok()["total"]
        .as_i64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_health_answers_serving() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let s = TestServer::sqlite().await;
    let ch = Channel::from_shared(s.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(ch);
    for service in ["", "osacnet.v1.Subnets", "osacnet.admin.v1.Tenants"] {
        let r = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap_or_else(|e| panic!("check {service:?}: {e}"))
            .into_inner();
        assert_eq!(r.status(), ServingStatus::Serving, "{service:?}");
    }
    let unknown = health
        .check(HealthCheckRequest {
            service: "no.such.Service".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_process_and_object_gauges() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    t.ready_vn("net-a", "10.0.0.0/16").await;
    t.ready_vn("net-b", "10.1.0.0/16").await;
    t.allocated_eip("ip-1", "external-pool-1").await;
    t.allocated_eip("ip-2", "external-pool-1").await;

    let text = s.admin.get("/metrics").await.text;
    for name in [
        "process_cpu_seconds_total ",
        "process_resident_memory_bytes ",
        "process_open_fds ",
        "process_start_time_seconds ",
    ] {
        let v = sample(&text, name).unwrap_or_else(|| panic!("/metrics lacks {name}"));
        // CPU time is counted in fractional seconds: any process that has run shows some.
        assert!(v > 0.0, "{name} = {v}");
    }

    // Object gauges equal what the API lists.
    let ready_vns =
        listed_in_state(&s.admin, "virtual_networks", "VIRTUAL_NETWORK_STATE_READY").await;
    assert!(ready_vns >= 2);
    assert_eq!(
        object_gauge(&text, "virtual_networks", "VIRTUAL_NETWORK_STATE_READY"),
        Some(ready_vns as f64)
    );
    assert_eq!(
        object_gauge(&text, "tenants", "TENANT_STATE_READY"),
        Some(1.0)
    );
    let allocated_eips =
        listed_in_state(&s.admin, "external_ips", "EXTERNAL_IP_STATE_ALLOCATED").await;
    assert!(allocated_eips >= 2);
    assert_eq!(
        object_gauge(&text, "external_ips", "EXTERNAL_IP_STATE_ALLOCATED"),
        Some(allocated_eips as f64)
    );

    // Pool gauges equal the pool's counters, and the allocated ones the addresses held.
    let pool = s
        .admin
        .get(&format!("{PRIV}/external_ip_pools/external-pool-1"))
        .await
        .ok();
    let (total, allocated) = (counter(&pool, "total"), counter(&pool, "allocated"));
    assert_eq!(allocated, allocated_eips);
    assert_eq!(
        sample(
            &text,
            r#"osac_external_ip_pool_addresses{pool="external-pool-1",state="allocated"}"#
        ),
        Some(allocated as f64)
    );
    assert_eq!(
        sample(
            &text,
            r#"osac_external_ip_pool_addresses{pool="external-pool-1",state="available"}"#
        ),
        Some((total - allocated) as f64)
    );
    s.finish().await;
}
