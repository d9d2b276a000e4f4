//! What clients cannot reach: labels and annotations reserved for the server (and the cleanup
//! that trusts them), and, for tenants, filters and orders on fields of provider objects that
//! the public view hides.

use serde_json::json;

use crate::common::*;

const RESERVED: &str = "keys under osac.openshift.io/ are reserved for the server";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_keys_cannot_be_set_on_create() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    for meta in [
        // (The default label is the one a tenant-admin may set on its own network:
        // self_defaults.rs.)
        json!({"name": "x", "labels": {"osac.openshift.io/auto-provisioned": "true"}}),
        json!({"name": "x", "annotations": {"osac.openshift.io/delete-failures": "0"}}),
    ] {
        let field = if meta.get("labels").is_some() {
            "metadata.labels[\"osac.openshift.io/auto-provisioned\"]"
        } else {
            "metadata.annotations[\"osac.openshift.io/delete-failures\"]"
        };
        t.post(
            &format!("{PUB}/virtual_networks"),
            json!({"metadata": meta, "spec": {"ipv4_cidr": "10.9.0.0/16"}}),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &[field, RESERVED]);
    }
    // The provider admin is held to the same rule.
    s.admin
        .post(
            &format!("{PRIV}/host_types"),
            json!({"metadata": {"name": "t", "labels": {"osac.openshift.io/orphaned": "true"}}}),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &[RESERVED]);
    assert_eq!(t.count("virtual_networks").await, 0);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_keys_survive_updates_and_cannot_be_changed() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    let path = format!("{PUB}/virtual_networks/default");
    // Replacing the labels keeps the server's label.
    let vn = t
        .patch(&path, json!({"metadata": {"labels": {"app": "web"}}}))
        .await
        .ok();
    assert_eq!(vn["metadata"]["labels"]["app"], "web");
    assert_eq!(
        vn["metadata"]["labels"]["osac.openshift.io/default"],
        "true"
    );
    // Sending it unchanged is fine; changing or adding a reserved key is not.
    t.patch(
        &path,
        json!({"metadata": {"labels": {"app": "web", "osac.openshift.io/default": "true"}}}),
    )
    .await
    .ok();
    t.patch(
        &path,
        json!({"metadata": {"labels": {"osac.openshift.io/default": "false"}}}),
    )
    .await
    .err(
        400,
        "INVALID_ARGUMENT",
        &[
            "metadata.labels[\"osac.openshift.io/default\"]",
            "the only value is \"true\"",
        ],
    );
    t.patch(
        &path,
        json!({"metadata": {"annotations": {"osac.openshift.io/delete-failures": "99"}}}),
    )
    .await
    .err(
        400,
        "INVALID_ARGUMENT",
        &["osac.openshift.io/delete-failures", "cannot be set"],
    );
    let after = t.get(&path).await.ok();
    assert_eq!(
        after["metadata"]["labels"]["osac.openshift.io/default"],
        "true"
    );
    assert!(after["metadata"].get("annotations").is_none(), "{after}");
    s.finish().await;
}

/// The attack: a tenant labels its own, manual ExternalIP as auto-provisioned for a workload,
/// so that the workload's cleanup would delete it (or count it as the workload's). Refused on
/// create and on update; the cleanup of the workload leaves the manual address alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_auto_provisioned_label_cannot_steer_the_cleanup() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    t.wait("subnets", "default-ipv4", "SUBNET_STATE_READY")
        .await;
    let mut vm = vm_body(
        "victim",
        json!([{"subnet": "default-ipv4", "security_groups": ["default"]}]),
    );
    vm["spec"]["auto_external_ip_attachment"] = json!(true);
    let vm = t.post(&format!("{PUB}/compute_instances"), vm).await.ok();
    let forged = json!({
        "osac.openshift.io/auto-provisioned": "true",
        "osac.openshift.io/auto-provisioned-for": id(&vm),
    });
    t.post(
        &format!("{PUB}/external_ips"),
        json!({"metadata": {"name": "mine", "labels": forged}}),
    )
    .await
    .err(
        400,
        "INVALID_ARGUMENT",
        &["osac.openshift.io/auto-provisioned", RESERVED],
    );
    let mine = t.allocated_eip("mine", "").await;
    t.patch(
        &format!("{PUB}/external_ips/mine"),
        json!({"metadata": {"labels": forged}}),
    )
    .await
    .err(
        400,
        "INVALID_ARGUMENT",
        &["osac.openshift.io/auto-provisioned", RESERVED],
    );
    t.delete(&format!("{PUB}/compute_instances/victim"))
        .await
        .ok();
    t.wait_gone(PUB, "compute_instances", "victim").await;
    let still = t.get(&format!("{PUB}/external_ips/mine")).await.ok();
    assert_eq!(id(&still), id(&mine));
    assert!(
        still["metadata"].get("deletion_timestamp").is_none(),
        "{still}"
    );
    s.finish().await;
}

/// A tenant's filter or order on a hidden field of a NetworkClass or an ExternalIPPool is
/// refused exactly like one on a field that does not exist; visible fields still work, and the
/// provider still filters on everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_filters_cannot_probe_hidden_fields() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    let probes = [
        (
            "external_ip_pools",
            "this.spec.cidrs.contains(\"203.\")",
            "spec.cidrs",
        ),
        ("external_ip_pools", "has(this.spec.cidrs)", "spec.cidrs"),
        (
            "external_ip_pools",
            "this.status.total > 200",
            "status.total",
        ),
        (
            "external_ip_pools",
            "this.metadata.labels[\"tier\"] == \"gold\"",
            "metadata.labels.tier",
        ),
        (
            "network_classes",
            "this.fabric_manager == \"sim-fabric\"",
            "fabric_manager",
        ),
        (
            "network_classes",
            "this.k8s_manager.startsWith(\"sim\")",
            "k8s_manager",
        ),
        (
            "network_classes",
            "this.spec.defaults.subnet_ipv4_cidr == \"10.0.1.0/24\"",
            "spec.defaults.subnet_ipv4_cidr",
        ),
        (
            "network_classes",
            "this.metadata.creator == \"admin\"",
            "metadata.creator",
        ),
    ];
    for (collection, filter, field) in probes {
        let hidden = t.list(collection, &[("filter", filter)]).await;
        let msg = hidden.err(
            400,
            "INVALID_ARGUMENT",
            &[&format!("filter: field '{field}' is not available")],
        );
        // A field that does not exist at all gets the same answer.
        let unknown = t
            .list(collection, &[("filter", "this.no_such_field == \"x\"")])
            .await;
        let other = unknown.err(400, "INVALID_ARGUMENT", &["is not available"]);
        assert_eq!(
            msg.replace(field, "F"),
            other.replace("no_such_field", "F"),
            "{collection}: a hidden field must look like a missing one"
        );
        // The provider sees these fields and may filter on them.
        let url = reqwest::Url::parse_with_params(
            &format!("http://x{PRIV}/{collection}"),
            &[("filter", filter)],
        )
        .expect("url");
        let private = s
            .admin
            .get(&format!(
                "{}?{}",
                url.path(),
                url.query().unwrap_or_default()
            ))
            .await;
        assert_eq!(
            private.status, 200,
            "{collection}: {filter}: {}",
            private.text
        );
    }
    for (collection, order) in [
        ("external_ip_pools", "status.allocated desc"),
        ("network_classes", "fabric_manager"),
    ] {
        t.list(collection, &[("order", order)]).await.err(
            400,
            "INVALID_ARGUMENT",
            &["order: field", "is not available"],
        );
    }
    // What tenants see they can filter and order on.
    let pools = t
        .list(
            "external_ip_pools",
            &[
                (
                    "filter",
                    "this.spec.ip_family == \"IP_FAMILY_IPV4\" && this.status.available > 0",
                ),
                ("order", "metadata.name desc"),
            ],
        )
        .await
        .ok();
    assert_eq!(pools["total"], 1, "{pools}");
    let classes = t
        .list("network_classes", &[("filter", "this.is_default == true")])
        .await
        .ok();
    assert_eq!(classes["total"], 1, "{classes}");
    // Kinds tenants see whole are not restricted.
    t.list("host_types", &[("filter", "has(this.interfaces)")])
        .await
        .ok();
    s.finish().await;
}
