//! Watch: REST `?watch=true` (text/event-stream) and gRPC server streaming, fed by the change
//! feed on both databases; same filter, tenant scope and visibility as List.

use std::time::Duration;

use osac_proto::v1 as pb;
use serde_json::{Value, json};
use tonic::Request;

use crate::both_backends;
use crate::common::*;

/// A REST watch being read event by event.
struct EventStream {
    response: reqwest::Response,
    buffer: String,
    /// "TYPE tenant/name" of every event received.
    log: Vec<String>,
}

impl EventStream {
    async fn open(api: &Api, collection: &str, filter: &str) -> Result<EventStream, Resp> {
        let url = reqwest::Url::parse_with_params(
            &format!("{}{PUB}/{collection}", api.base()),
            [("watch", "true"), ("filter", filter)],
        )
        .expect("url");
        let mut req = reqwest::Client::new().get(url);
        if let Some(t) = &api.token {
            req = req.bearer_auth(t);
        }
        let response = req.send().await.expect("watch request");
        let status = response.status().as_u16();
        if status != 200 {
            let text = response.text().await.unwrap_or_default();
            let body = serde_json::from_str(&text).unwrap_or(Value::Null);
            return Err(Resp { status, body, text });
        }
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        assert!(
            content_type.starts_with("text/event-stream"),
            "{content_type}"
        );
        Ok(EventStream {
            response,
            buffer: String::new(),
            log: Vec::new(),
        })
    }

    /// The next `data:` event as (type, object); None when nothing comes within `within`.
    async fn next_within(&mut self, within: Duration) -> Option<(String, Value)> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let data: String = block
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if data.is_empty() {
                    continue; // keep-alive comment
                }
                assert!(!block.contains("event: error"), "watch error: {block}");
                let event: Value = serde_json::from_str(&data).expect("event JSON");
                let kind = event["type"].as_str().expect("type").to_string();
                let object = event["object"].clone();
                self.log.push(format!(
                    "{kind} {}/{}",
                    object["metadata"]["tenant"].as_str().unwrap_or_default(),
                    object["metadata"]["name"].as_str().unwrap_or_default()
                ));
                return Some((kind, object));
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .ok()?
                .expect("stream read")?;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    async fn next(&mut self) -> (String, Value) {
        self.next_within(WAIT)
            .await
            .expect("an event within the wait")
    }

    /// Skips events until one of `name` has type `kind` (and, if given, `state`).
    async fn until(&mut self, kind: &str, name: &str, state: Option<&str>) -> Value {
        loop {
            let (k, obj) = self.next().await;
            if k == kind
                && obj["metadata"]["name"] == name
                && state.is_none_or(|s| obj["status"]["state"] == s)
            {
                return obj;
            }
        }
    }
}

both_backends!(rest_watch_reports_changes_in_scope);

async fn rest_watch_reports_changes_in_scope(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let acme = s.tenant("acme").await;
    acme.drop_defaults().await;
    let vn = acme.ready_vn("net", "10.0.0.0/16").await;
    let vn_id = vn["id"].as_str().expect("id").to_string();
    acme.ready_subnet("before", &vn_id, "10.0.1.0/24").await;
    let mut watch = EventStream::open(&acme, "subnets", NOT_DEFAULT)
        .await
        .expect("watch opens");

    // First batch: what exists.
    let (kind, first) = watch.next().await;
    assert_eq!(
        (kind.as_str(), &first["metadata"]["name"]),
        ("ADDED", &json!("before"))
    );

    // A create is ADDED, its way to READY MODIFIED — unless the controller was quicker than
    // the watch and the object is READY when the watch first reads it (one ADDED, no MODIFIED).
    acme.create(
        "subnets",
        json!({"metadata": {"name": "web", "labels": {"tier": "web"}},
               "spec": {"virtual_network": vn_id, "ipv4_cidr": "10.0.2.0/24"}}),
    )
    .await;
    let added = watch.until("ADDED", "web", None).await;
    if added["status"]["state"] != "SUBNET_STATE_READY" {
        watch
            .until("MODIFIED", "web", Some("SUBNET_STATE_READY"))
            .await;
    }

    // Another tenant's changes never reach acme's watch, however it names things.
    let other = s.tenant("other").await;
    let other_vn = other.ready_vn("net", "10.0.0.0/16").await;
    other
        .ready_subnet("spy", other_vn["id"].as_str().expect("id"), "10.0.9.0/24")
        .await;

    // A delete ends in DELETED with the last state seen.
    let web = acme.get(&format!("{PUB}/subnets/web")).await.ok();
    acme.delete(&format!(
        "{PUB}/subnets/{}",
        web["id"].as_str().expect("id")
    ))
    .await
    .ok();
    let gone = watch.until("DELETED", "web", None).await;
    assert_eq!(gone["id"], web["id"]);
    // Nothing of the other tenant arrived in between, and nothing arrives later.
    while watch
        .next_within(Duration::from_millis(500))
        .await
        .is_some()
    {}
    assert!(
        watch.log.iter().all(|e| e.contains(" acme/")),
        "another tenant's subnet leaked into the watch: {:?}",
        watch.log
    );

    // A filtered watch: an object that stops matching is DELETED for it, one that starts is
    // ADDED.
    let mut web_only = EventStream::open(&acme, "subnets", "this.metadata.labels.tier == \"web\"")
        .await
        .expect("watch opens");
    let before = acme.get(&format!("{PUB}/subnets/before")).await.ok();
    let before_path = format!("{PUB}/subnets/{}", before["id"].as_str().expect("id"));
    acme.patch(
        &format!("{before_path}?update_mask=metadata.labels"),
        json!({"metadata": {"labels": {"tier": "web"}}}),
    )
    .await
    .ok();
    web_only.until("ADDED", "before", None).await;
    acme.patch(
        &format!("{before_path}?update_mask=metadata.labels"),
        json!({"metadata": {"labels": {"tier": "db"}}}),
    )
    .await
    .ok();
    web_only.until("DELETED", "before", None).await;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_refuses_what_list_refuses() {
    let s = TestServer::sqlite().await;
    let acme = s.tenant("acme").await;
    let bad = EventStream::open(&acme, "subnets", "this.spec ==")
        .await
        .err()
        .expect("a bad filter is refused before streaming");
    bad.err(400, "INVALID_ARGUMENT", &["filter"]);
    let anonymous = EventStream::open(&s.anonymous(), "subnets", "")
        .await
        .err()
        .expect("no token, no watch");
    assert_eq!(anonymous.status, 401, "{}", anonymous.text);
    // Tenants never watch the inventory.
    let hosts = EventStream::open(&acme, "hosts", "")
        .await
        .err()
        .expect("hosts are private");
    assert_eq!(hosts.status, 404, "{}", hosts.text);
    s.finish().await;
}

#[derive(Clone)]
struct Bearer(String);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, tonic::Status> {
        req.metadata_mut().insert(
            "authorization",
            format!("Bearer {}", self.0).parse().expect("header"),
        );
        Ok(req)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_watch_streams_events() {
    let s = TestServer::sqlite().await;
    let acme = s.tenant("acme").await;
    acme.drop_defaults().await;
    let vn = acme.ready_vn("net", "10.0.0.0/16").await;
    let channel = tonic::transport::Channel::from_shared(s.url())
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let token = acme.token.clone().expect("token");
    let mut vns = pb::virtual_networks_client::VirtualNetworksClient::with_interceptor(
        channel,
        Bearer(token),
    );
    let mut stream = vns
        .watch(pb::WatchRequest {
            filter: NOT_DEFAULT.into(),
        })
        .await
        .expect("watch")
        .into_inner();
    let first = stream.message().await.expect("read").expect("an event");
    assert_eq!(first.r#type, "ADDED");
    assert_eq!(
        first.object.expect("object").id,
        vn["id"].as_str().expect("id")
    );
    acme.create(
        "virtual_networks",
        json!({"metadata": {"name": "second"}, "spec": {"ipv4_cidr": "10.1.0.0/16"}}),
    )
    .await;
    loop {
        let event = tokio::time::timeout(WAIT, stream.message())
            .await
            .expect("an event within the wait")
            .expect("read")
            .expect("stream open");
        let object = event.object.expect("object");
        if event.r#type == "ADDED" {
            assert_eq!(object.metadata.expect("metadata").name, "second");
            break;
        }
    }
    // A bad filter is the call's status, not a broken stream.
    let err = vns
        .watch(pb::WatchRequest {
            filter: "this.spec ==".into(),
        })
        .await
        .expect_err("refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_filters_a_reference_by_name() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    t.ready_vn("gen-net", "10.0.0.0/16").await;
    t.ready_vn("other-net", "10.1.0.0/16").await;
    let mut events = EventStream::open(&t, "subnets", r#"this.spec.virtual_network == "gen-net""#)
        .await
        .unwrap_or_else(|r| panic!("watch refused: {}", r.text));
    t.create(
        "subnets",
        subnet_body("other-sub", "other-net", "10.1.1.0/24"),
    )
    .await;
    t.create("subnets", subnet_body("gen-sub", "gen-net", "10.0.1.0/24"))
        .await;
    // The first event is the subnet in gen-net: the one in other-net never matches.
    let (kind, object) = events.next().await;
    assert_eq!(kind, "ADDED");
    assert_eq!(object["metadata"]["name"], "gen-sub");
    s.finish().await;
}
