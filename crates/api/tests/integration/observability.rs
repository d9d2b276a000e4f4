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
    anon.get("/metrics").await; // the scrape itself is counted from the second one on
    let before = routes(&anon.get("/metrics").await.text);

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
    let after_text = anon.get("/metrics").await.text;
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
    let ch = Channel::from_shared(s.url()).unwrap().connect().await.unwrap();
    let mut vns = pb::virtual_networks_client::VirtualNetworksClient::new(ch);
    let mut req = Request::new(pb::ListRequest::default());
    req.metadata_mut()
        .insert("authorization", format!("Bearer {}", t.token.clone().unwrap()).parse().unwrap());
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
