//! Behaviours the networking designs promise and the docs state: the deprecated VM attachment
//! field answers with a warning on both transports, and events are published on the change
//! feed (gRPC `Events.Watch` streams them as they are recorded).

use std::time::Duration;

use osac_proto::v1 as pb;
use serde_json::{Value, json};

use crate::common::*;
use crate::grpc::{Bearer, channel};

const DEPRECATED: &str = "spec.network_attachments is deprecated";

/// `POST /compute_instances` as the tenant, with the raw `Warning` header of the answer.
async fn post_vm(s: &TestServer, token: &str, body: Value) -> (u16, Option<String>, Value) {
    post(s, token, "compute_instances", body).await
}

/// `POST /<collection>` as the tenant, with the raw `Warning` header of the answer.
async fn post(
    s: &TestServer,
    token: &str,
    collection: &str,
    body: Value,
) -> (u16, Option<String>, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}{PUB}/{collection}", s.url()))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("POST compute_instances");
    let status = response.status().as_u16();
    let warning = response
        .headers()
        .get("warning")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = response.json().await.unwrap_or(Value::Null);
    (status, warning, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deprecated_vm_attachments_answer_with_a_warning() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    t.ready_vn("net", "10.0.0.0/16").await;
    let subnet = t.ready_subnet("a", "net", "10.0.1.0/24").await;
    let token = t.token.clone().expect("tenant token");

    // REST: accepted, converted, and a 299 Warning header names the replacement field.
    let (status, warning, vm) = post_vm(
        &s,
        &token,
        json!({"metadata": {"name": "old"}, "spec": {"template": "small",
            "network_attachments": [{"subnet": "a"}]}}),
    )
    .await;
    assert_eq!(status, 200, "{vm}");
    let warning = warning.expect("a Warning header");
    assert!(
        warning.starts_with("299 - \"")
            && warning.ends_with('"')
            && warning.contains(DEPRECATED)
            && warning.contains("spec.compute_network_attachments"),
        "{warning}"
    );
    assert_eq!(
        vm["spec"]["compute_network_attachments"][0]["subnet"],
        subnet["id"]
    );
    // The current field, or a refused request, carries no warning.
    let (status, warning, vm) = post_vm(
        &s,
        &token,
        json!({"metadata": {"name": "new"}, "spec": {"template": "small",
            "compute_network_attachments": [{"subnet": "a"}]}}),
    )
    .await;
    assert_eq!((status, warning), (200, None), "{vm}");
    let (status, warning, refused) = post_vm(
        &s,
        &token,
        json!({"metadata": {"name": "both"}, "spec": {"template": "small",
            "network_attachments": [{"subnet": "a"}],
            "compute_network_attachments": [{"subnet": "a"}]}}),
    )
    .await;
    assert_eq!((status, warning), (400, None), "{refused}");

    // gRPC: the same text in the `warning` response metadata.
    let mut vms = pb::compute_instances_client::ComputeInstancesClient::with_interceptor(
        channel(&s).await,
        Bearer(Some(token)),
    );
    let old = |name: &str| pb::ComputeInstance {
        metadata: Some(pb::Metadata {
            name: name.into(),
            ..Default::default()
        }),
        spec: Some(pb::ComputeInstanceSpec {
            template: "small".into(),
            network_attachments: vec![pb::NetworkAttachment {
                subnet: "a".into(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let answer = vms.create(old("old-grpc")).await.expect("create over gRPC");
    let warning = answer
        .metadata()
        .get("warning")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(
        warning.starts_with("299 - \"") && warning.contains(DEPRECATED),
        "{warning:?}"
    );
    let converted = answer.into_inner();
    assert_eq!(
        converted.spec.expect("spec").compute_network_attachments[0].subnet,
        id(&subnet)
    );
    let mut new = old("new-grpc");
    if let Some(spec) = new.spec.as_mut() {
        spec.compute_network_attachments = vec![pb::ComputeNetworkAttachment {
            subnet: "a".into(),
            ..Default::default()
        }];
        spec.network_attachments.clear();
    }
    let answer = vms.create(new).await.expect("create over gRPC");
    assert!(answer.metadata().get("warning").is_none());
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deprecated_catalog_item_answers_with_a_warning() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    t.ready_vn("net", "10.0.0.0/16").await;
    t.ready_subnet("a", "net", "10.0.1.0/24").await;
    let token = t.token.clone().expect("tenant token");
    let bm = |name: &str, template_field: &str| {
        json!({"metadata": {"name": name}, "spec": {template_field: "bcm_h100",
            "network_attachments": [{"subnet": "a"}]}})
    };

    // REST: accepted, stored as spec.template, and the Warning names the replacement.
    let (status, warning, old) =
        post(&s, &token, "baremetal_instances", bm("old", "catalog_item")).await;
    assert_eq!(status, 200, "{old}");
    let warning = warning.expect("a Warning header");
    assert!(
        warning.starts_with("299 - \"")
            && warning.contains("spec.catalog_item is deprecated")
            && warning.contains("spec.template"),
        "{warning}"
    );
    assert!(
        old["spec"]["template"]
            .as_str()
            .is_some_and(|t| !t.is_empty()),
        "{old}"
    );
    let (status, warning, camel) = post(
        &s,
        &token,
        "baremetal_instances",
        bm("camel", "catalogItem"),
    )
    .await;
    assert_eq!(status, 200, "{camel}");
    assert!(warning.is_some_and(|w| w.contains("spec.catalog_item is deprecated")));
    // The current field carries none.
    let (status, warning, new) =
        post(&s, &token, "baremetal_instances", bm("new", "template")).await;
    assert_eq!((status, warning), (200, None), "{new}");

    // gRPC: the same text in the `warning` response metadata.
    let mut bms = pb::bare_metal_instances_client::BareMetalInstancesClient::with_interceptor(
        channel(&s).await,
        Bearer(Some(token)),
    );
    let grpc_bm = |name: &str, catalog_item: &str, template: &str| pb::BareMetalInstance {
        metadata: Some(pb::Metadata {
            name: name.into(),
            ..Default::default()
        }),
        spec: Some(pb::BareMetalInstanceSpec {
            catalog_item: catalog_item.into(),
            template: template.into(),
            network_attachments: vec![pb::BareMetalNetworkAttachment {
                subnet: "a".into(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let answer = bms
        .create(grpc_bm("old-grpc", "bcm_h100", ""))
        .await
        .expect("create over gRPC");
    let warning = answer
        .metadata()
        .get("warning")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(
        warning.starts_with("299 - \"") && warning.contains("spec.catalog_item is deprecated"),
        "{warning:?}"
    );
    let answer = bms
        .create(grpc_bm("new-grpc", "", "bcm_h100"))
        .await
        .expect("create over gRPC");
    assert!(answer.metadata().get("warning").is_none());
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_events_watch_streams_events_as_they_are_recorded() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    let mut events = pb::events_client::EventsClient::with_interceptor(
        channel(&s).await,
        Bearer(t.token.clone()),
    );
    let mut stream = events
        .watch(pb::WatchRequest {
            filter: "this.spec.object_kind == \"VirtualNetwork\"".into(),
        })
        .await
        .expect("Events.Watch")
        .into_inner();
    // Created after the watch started: only the feed can deliver its events.
    let vn = t
        .create(
            "virtual_networks",
            json!({"metadata": {"name": "late"}, "spec": {"ipv4_cidr": "10.9.0.0/16"}}),
        )
        .await;
    let vn_id = id(&vn);
    let created = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let event = stream
                .message()
                .await
                .expect("stream error")
                .expect("stream ended");
            let Some(e) = event.object else { continue };
            let spec = e.spec.unwrap_or_default();
            if spec.object_id == vn_id && spec.reason == "Created" {
                return event.r#type;
            }
        }
    })
    .await
    .expect("the VirtualNetwork's Created event within 20 s");
    assert_eq!(created, "ADDED");
    s.finish().await;
}

/// The events of one object: (reason, type) in creation order.
async fn events_of(api: &Api, object_id: &str) -> Vec<(String, String)> {
    let filter = format!("this.spec.object_id == \"{object_id}\"");
    let r = api
        .list("events", &[("filter", filter.as_str()), ("limit", "1000")])
        .await
        .ok();
    r["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| {
            let field = |f: &str| e["spec"][f].as_str().unwrap_or_default().to_string();
            (field("reason"), field("type"))
        })
        .collect()
}

/// How many events of `reason` the object has, all of type `kind`.
async fn count_of(api: &Api, object_id: &str, reason: &str, kind: &str) -> usize {
    let events = events_of(api, object_id).await;
    let matching: Vec<_> = events.iter().filter(|(r, _)| r == reason).collect();
    assert!(
        matching.iter().all(|(_, t)| t == kind),
        "{reason} is not {kind}: {events:?}"
    );
    matching.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_phases_record_the_designs_event_names() {
    let mut s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    t.ready_vn("net", "10.0.0.0/16").await;
    t.ready_subnet("a", "net", "10.0.1.0/24").await;
    let mut ctl = s.pause().await;
    let vm = t.create_vm("vm", "a").await;
    let broken = t.create_vm("broken", "a").await;
    let cluster = t
        .create("clusters", cluster_body("c", "a", json!([]), 1))
        .await;
    ctl.sim_fabric().inject_failure(
        osac_backends::Operation::CreateNetworkAttachment,
        &format!("{}/0", id(&broken)),
        1,
        osac_backends::FailureKind::Permanent,
    );
    ctl.run();
    t.wait("compute_instances", "vm", "COMPUTE_INSTANCE_STATE_RUNNING")
        .await;
    t.wait(
        "compute_instances",
        "broken",
        "COMPUTE_INSTANCE_STATE_FAILED",
    )
    .await;
    t.wait("clusters", "c", "CLUSTER_STATE_READY").await;
    const NORMAL: &str = "EVENT_TYPE_NORMAL";
    const WARNING: &str = "EVENT_TYPE_WARNING";
    let vm_id = id(&vm);
    assert_eq!(count_of(&t, &vm_id, "NetworkingResolved", NORMAL).await, 1);
    assert_eq!(
        count_of(&t, &vm_id, "NetworkingResolutionFailed", WARNING).await,
        0
    );
    let broken_id = id(&broken);
    assert_eq!(
        count_of(&t, &broken_id, "NetworkingResolutionFailed", WARNING).await,
        1
    );
    assert_eq!(
        count_of(&t, &broken_id, "NetworkingResolved", NORMAL).await,
        0
    );
    let cluster_id = id(&cluster);
    assert_eq!(count_of(&t, &cluster_id, "AgentsSelected", NORMAL).await, 1);
    assert_eq!(count_of(&t, &cluster_id, "VIPsDiscovered", NORMAL).await, 1);
    ctl.stop().await;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_class_takes_the_designs_defaults_and_answers_ours() {
    let s = TestServer::sqlite().await;
    let created = s
        .admin
        .post(
            &format!("{PRIV}/network_classes"),
            json!({
                "metadata": {"name": "design-class"}, "title": "design", "fabric_manager": "sim-fabric",
                "spec": {"defaults": {
                    "virtualNetworkCIDR": "10.20.0.0/16",
                    "ipv4SubnetCIDR": "10.20.1.0/24",
                    "securityGroupRules": [
                        {"direction": "ingress", "protocol": "tcp", "port": "22", "source": "10.0.0.0/8"},
                        {"direction": "egress", "protocol": "all", "source": "0.0.0.0/0"}
                    ]
                }}
            }),
        )
        .await
        .ok();
    let defaults = &created["spec"]["defaults"];
    assert_eq!(defaults["virtual_network_ipv4_cidr"], "10.20.0.0/16");
    assert_eq!(defaults["subnet_ipv4_cidr"], "10.20.1.0/24");
    assert_eq!(
        defaults["ingress_rules"],
        json!([{"protocol": "PROTOCOL_TCP", "port_from": 22, "port_to": 22, "ipv4_cidr": "10.0.0.0/8"}])
    );
    assert_eq!(
        defaults["egress_rules"],
        json!([{"protocol": "PROTOCOL_ALL", "ipv4_cidr": "0.0.0.0/0"}])
    );
    assert!(defaults.get("virtualNetworkCIDR").is_none());

    // Both shapes of one field: refused, naming it; nothing stored.
    let refused = s
        .admin
        .post(
            &format!("{PRIV}/network_classes"),
            json!({
                "metadata": {"name": "twice"}, "title": "twice", "fabric_manager": "sim-fabric",
                "spec": {"defaults": {"ipv4SubnetCIDR": "10.20.1.0/24", "subnet_ipv4_cidr": "10.20.2.0/24",
                    "virtual_network_ipv4_cidr": "10.20.0.0/16"}}
            }),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(
        refused.text.contains("spec.defaults.ipv4SubnetCIDR"),
        "{}",
        refused.text
    );
    assert_eq!(
        s.admin
            .get(&format!("{PRIV}/network_classes/twice"))
            .await
            .status,
        404
    );
}
