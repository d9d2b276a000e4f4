//! Size limits of client input: one test per bound, through the public API; each refusal is
//! INVALID_ARGUMENT naming the field, the limit and the size, and stores nothing.

use osac_model::bounds::*;
use serde_json::{Value, json};

use crate::common::*;

fn map(n: usize, value: Value) -> Value {
    Value::Object((0..n).map(|i| (format!("k{i}"), value.clone())).collect())
}

fn rules(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| json!({"protocol": "PROTOCOL_TCP", "port_from": i + 1, "port_to": i + 1, "ipv4_cidr": "0.0.0.0/0"}))
            .collect(),
    )
}

/// POSTs `body` to `collection`, expects 400 naming every fragment, and that the collection
/// did not grow.
async fn refused(t: &Api, collection: &str, body: Value, fragments: &[&str]) {
    let before = t.count_all(collection).await;
    t.post(&format!("{PUB}/{collection}"), body)
        .await
        .err(400, "INVALID_ARGUMENT", fragments);
    assert_eq!(t.count_all(collection).await, before, "{collection} grew");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_per_object() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    let body = |n| json!({"metadata": {"name": "x", "labels": map(n, json!("v"))}, "spec": {"ipv4_cidr": "10.9.0.0/16"}});
    refused(
        &t,
        "virtual_networks",
        body(MAX_LABELS + 1),
        &["metadata.labels", "65 labels", "at most 64"],
    )
    .await;
    t.post(&format!("{PUB}/virtual_networks"), body(MAX_LABELS))
        .await
        .ok();
    // An update that would go over is refused too.
    t.patch(
        &format!("{PUB}/virtual_networks/x"),
        json!({"metadata": {"labels": map(MAX_LABELS + 1, json!("v"))}}),
    )
    .await
    .err(400, "INVALID_ARGUMENT", &["metadata.labels", "65 labels"]);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotations_count_key_and_value() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    let body = |a: Value| json!({"metadata": {"name": "x", "annotations": a}, "spec": {"ipv4_cidr": "10.9.0.0/16"}});
    refused(
        &t,
        "virtual_networks",
        body(map(MAX_ANNOTATIONS + 1, json!("v"))),
        &["metadata.annotations", "65 annotations", "at most 64"],
    )
    .await;
    refused(
        &t,
        "virtual_networks",
        body(json!({"not a key!": "v"})),
        &["metadata.annotations[\"not a key!\"]", "annotation key"],
    )
    .await;
    refused(
        &t,
        "virtual_networks",
        body(json!({"example.com/big": "x".repeat(MAX_ANNOTATION_VALUE_BYTES + 1)})),
        &["example.com/big", "4097 bytes", "at most 4096 bytes"],
    )
    .await;
    let ok = body(json!({"example.com/big": "x".repeat(MAX_ANNOTATION_VALUE_BYTES)}));
    let vn = t.post(&format!("{PUB}/virtual_networks"), ok).await.ok();
    assert_eq!(
        vn["metadata"]["annotations"]["example.com/big"]
            .as_str()
            .map(str::len),
        Some(MAX_ANNOTATION_VALUE_BYTES)
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_per_direction() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    refused(
        &t,
        "security_groups",
        json!({"metadata": {"name": "big"}, "spec": {"virtual_network": "default", "ingress": rules(MAX_RULES_PER_DIRECTION + 1)}}),
        &["spec.ingress", "201 ingress rules", "at most 200"],
    )
    .await;
    t.post(
        &format!("{PUB}/security_groups"),
        json!({"metadata": {"name": "big"}, "spec": {"virtual_network": "default", "egress": rules(MAX_RULES_PER_DIRECTION)}}),
    )
    .await
    .ok();
    t.patch(
        &format!("{PUB}/security_groups/big"),
        json!({"spec": {"egress": rules(MAX_RULES_PER_DIRECTION + 1)}}),
    )
    .await
    .err(
        400,
        "INVALID_ARGUMENT",
        &["spec.egress", "201 egress rules", "at most 200"],
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_and_their_security_groups() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    let att = json!({"subnet": "default-ipv4", "security_groups": ["default"]});
    refused(
        &t,
        "compute_instances",
        vm_body("vm", Value::Array(vec![att; MAX_ATTACHMENTS + 1])),
        &[
            "spec.compute_network_attachments",
            "17 network attachments",
            "at most 16",
        ],
    )
    .await;
    let sgs: Vec<String> = (0..=MAX_SECURITY_GROUPS_PER_ATTACHMENT)
        .map(|i| format!("sg-{i}"))
        .collect();
    refused(
        &t,
        "baremetal_instances",
        bm_body(
            "bm",
            json!([{"subnet": "default-ipv4", "security_groups": sgs}]),
        ),
        &[
            "spec.network_attachments[0].security_groups",
            "17 security groups",
            "at most 16",
        ],
    )
    .await;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sets_and_template_parameters() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    let mut c = cluster_body("c", "default-ipv4", json!(["default"]), 1);
    c["spec"]["node_sets"] = map(
        MAX_NODE_SETS + 1,
        json!({"host_type": "bm-standard", "size": 1}),
    );
    refused(
        &t,
        "clusters",
        c,
        &["spec.node_sets", "33 node sets", "at most 32"],
    )
    .await;
    let mut vm = vm_body("vm", json!([{"subnet": "default-ipv4"}]));
    vm["spec"]["template_parameters"] = map(MAX_TEMPLATE_PARAMETERS + 1, json!(1));
    refused(
        &t,
        "compute_instances",
        vm.clone(),
        &[
            "spec.template_parameters",
            "65 template parameters",
            "at most 64",
        ],
    )
    .await;
    vm["spec"]["template_parameters"] = json!({"blob": "x".repeat(MAX_TEMPLATE_PARAMETERS_BYTES)});
    refused(
        &t,
        "compute_instances",
        vm,
        &["spec.template_parameters", "at most 16384 bytes"],
    )
    .await;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_domains_and_any_long_string_or_list() {
    let s = TestServer::sqlite().await;
    let domains: Vec<String> = (0..=MAX_TENANT_DOMAINS)
        .map(|i| format!("d{i}.example"))
        .collect();
    s.admin
        .post(
            &format!("{PRIV}/tenants"),
            json!({"metadata": {"name": "acme"}, "spec": {"domains": domains}}),
        )
        .await
        .err(
            400,
            "INVALID_ARGUMENT",
            &["spec.domains", "33 domains", "at most 32"],
        );
    let t = s.tenant("acme").await;
    // A reference of 5000 bytes is refused before it is looked up.
    refused(
        &t,
        "subnets",
        json!({"metadata": {"name": "x"}, "spec": {"virtual_network": "v".repeat(5000), "ipv4_cidr": "10.0.9.0/24"}}),
        &["spec.virtual_network", "5000 bytes", "at most 4096 bytes"],
    )
    .await;
    // Any list without a limit of its own: at most 256 entries (here a provider's pool CIDRs).
    let cidrs: Vec<String> = (0..=MAX_LIST_ITEMS)
        .map(|i| format!("198.18.{}.{}/32", i / 256, i % 256))
        .collect();
    s.admin
        .post(
            &format!("{PRIV}/external_ip_pools"),
            json!({"metadata": {"name": "wide"}, "spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": cidrs}}),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.cidrs", "257 entries", "at most 256"]);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_and_order_length() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    let long = format!("this.metadata.name == \"{}\"", "x".repeat(MAX_QUERY_BYTES));
    t.list("subnets", &[("filter", &long)]).await.err(
        400,
        "INVALID_ARGUMENT",
        &["filter", "at most 4096 bytes"],
    );
    let order = vec!["metadata.name"; 400].join(",");
    t.list("subnets", &[("order", &order)]).await.err(
        400,
        "INVALID_ARGUMENT",
        &["order", "at most 4096 bytes"],
    );
    t.list(
        "subnets",
        &[("filter", "this.metadata.name == \"default-ipv4\"")],
    )
    .await
    .ok();
    s.finish().await;
}
