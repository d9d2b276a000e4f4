//! ExternalIPAttachments that name a workload before it exists (forward references): accepted,
//! PENDING naming the awaited kind and name, bound when a workload of that name is created in
//! the same tenant (never another tenant's), back to PENDING for the same name when it is
//! deleted, bound again when it comes back. Only names may be forward references.

use serde_json::{Value, json};

use crate::both_backends;
use crate::common::*;

const ATTACHMENTS: &str = "external_ip_attachments";

fn att_path(name: &str) -> String {
    format!("{PUB}/{ATTACHMENTS}/{name}")
}

/// Waits until the attachment is PENDING with a message containing `what`.
async fn pending_for(t: &Api, name: &str, what: &str) -> Value {
    t.wait_until(&att_path(name), what, |o| {
        o["status"]["state"] == "EXTERNAL_IP_ATTACHMENT_STATE_PENDING"
            && o["status"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(what))
    })
    .await
}

/// A tenant with a READY network `net` and subnet `a`.
async fn networked(s: &TestServer, tenant: &str) -> Api {
    let t = s.tenant(tenant).await;
    t.ready_vn("net", "10.0.0.0/16").await;
    t.ready_subnet("a", "net", "10.0.1.0/24").await;
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attachment_waits_for_its_target_by_name_and_follows_its_lifecycle() {
    let s = TestServer::sqlite().await;
    let t = networked(&s, "acme").await;
    let eip = t.allocated_eip("web-ip", "").await;

    // The target does not exist yet: accepted, the name kept, PENDING naming kind and name.
    let att = t
        .create(
            ATTACHMENTS,
            json!({"metadata": {"name": "to-web"},
                "spec": {"external_ip": "web-ip", "compute_instance": "web"}}),
        )
        .await;
    assert_eq!(att["spec"]["compute_instance"], "web", "{att}");
    assert_eq!(att["spec"]["external_ip"], eip["id"], "{att}");
    let waiting = pending_for(&t, "to-web", "ComputeInstance 'web' to be created").await;
    assert_eq!(waiting["status"]["target_name"], "web", "{waiting}");

    // The design's cluster example: a cluster that does not exist yet is no longer NOT_FOUND.
    t.allocated_eip("api-ip", "").await;
    t.create(
        ATTACHMENTS,
        json!({"metadata": {"name": "to-future"}, "spec": {"external_ip": "api-ip",
            "cluster": "future-cluster", "target_endpoint": "EXTERNAL_IP_ATTACHMENT_ENDPOINT_API"}}),
    )
    .await;
    pending_for(&t, "to-future", "Cluster 'future-cluster' to be created").await;

    // The VM appears: the attachment binds to its id and programs the DNAT.
    let vm = t
        .create(
            "compute_instances",
            vm_body("web", json!([{"subnet": "a"}])),
        )
        .await;
    let vm = t
        .wait(
            "compute_instances",
            &id(&vm),
            "COMPUTE_INSTANCE_STATE_RUNNING",
        )
        .await;
    let ready = t
        .wait(ATTACHMENTS, "to-web", "EXTERNAL_IP_ATTACHMENT_STATE_READY")
        .await;
    assert_eq!(ready["spec"]["compute_instance"], vm["id"], "{ready}");
    assert_eq!(
        ready["status"]["target_ip"], vm["status"]["internal_ip_address"],
        "{ready}"
    );
    assert_eq!(
        ready["status"]["external_ip_address"],
        eip["status"]["address"]
    );

    // The VM is deleted: the attachment keeps its ExternalIP and waits for the name again.
    t.delete(&format!("{PUB}/compute_instances/web")).await.ok();
    t.wait_gone(PUB, "compute_instances", &id(&vm)).await;
    let back = pending_for(&t, "to-web", "ComputeInstance 'web' to be created").await;
    assert_eq!(back["spec"]["compute_instance"], "web", "{back}");
    assert_eq!(back["spec"]["external_ip"], eip["id"], "{back}");
    assert_eq!(back["status"]["target_ip"], Value::Null, "{back}");
    let kept = t.get(&format!("{PUB}/external_ips/web-ip")).await.ok();
    assert_eq!(
        kept["status"]["state"], "EXTERNAL_IP_STATE_ALLOCATED",
        "{kept}"
    );

    // A new VM of that name: bound again.
    let again = t
        .create(
            "compute_instances",
            vm_body("web", json!([{"subnet": "a"}])),
        )
        .await;
    let again = t
        .wait(
            "compute_instances",
            &id(&again),
            "COMPUTE_INSTANCE_STATE_RUNNING",
        )
        .await;
    let rebound = t
        .wait(ATTACHMENTS, "to-web", "EXTERNAL_IP_ATTACHMENT_STATE_READY")
        .await;
    assert_eq!(
        rebound["spec"]["compute_instance"], again["id"],
        "{rebound}"
    );
    assert_eq!(
        rebound["status"]["target_ip"],
        again["status"]["internal_ip_address"]
    );
    s.finish().await;
}

both_backends!(another_tenants_workload_of_that_name_never_binds);
async fn another_tenants_workload_of_that_name_never_binds(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let acme = networked(&s, "acme").await;
    let evil = networked(&s, "evil").await;
    acme.allocated_eip("ip-1", "").await;
    acme.allocated_eip("ip-2", "").await;
    acme.create(
        ATTACHMENTS,
        json!({"metadata": {"name": "first"},
            "spec": {"external_ip": "ip-1", "compute_instance": "web"}}),
    )
    .await;
    pending_for(&acme, "first", "ComputeInstance 'web' to be created").await;

    // Another tenant creates a VM of the awaited name.
    let theirs = evil
        .create(
            "compute_instances",
            vm_body("web", json!([{"subnet": "a"}])),
        )
        .await;
    evil.wait(
        "compute_instances",
        &id(&theirs),
        "COMPUTE_INSTANCE_STATE_RUNNING",
    )
    .await;
    // An attachment created after it is reconciled after it: it waits too, as does the first.
    acme.create(
        ATTACHMENTS,
        json!({"metadata": {"name": "second"},
            "spec": {"external_ip": "ip-2", "compute_instance": "web"}}),
    )
    .await;
    for name in ["second", "first"] {
        let o = pending_for(&acme, name, "ComputeInstance 'web' to be created").await;
        assert_eq!(o["spec"]["compute_instance"], "web", "{o}");
        assert_eq!(o["status"]["target_ip"], Value::Null, "{o}");
    }
    assert!(s.sim_fabric().dnat_rules().await.is_empty());
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_valid_names_may_be_forward_references() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    t.allocated_eip("ip", "").await;
    let path = format!("{PUB}/{ATTACHMENTS}");
    // An id names an object that must exist.
    t.post(
        &path,
        json!({"spec": {"external_ip": "ip",
            "cluster": "0190c0de-7a3b-7cc1-8f00-0123456789ab",
            "target_endpoint": "EXTERNAL_IP_ATTACHMENT_ENDPOINT_API"}}),
    )
    .await
    .err(
        404,
        "NOT_FOUND",
        &[
            "spec.cluster",
            "'0190c0de-7a3b-7cc1-8f00-0123456789ab' does not exist",
        ],
    );
    // A name must be one a workload could have.
    t.post(
        &path,
        json!({"spec": {"external_ip": "ip", "baremetal_instance": "Not_A_Label"}}),
    )
    .await
    .err(
        400,
        "INVALID_ARGUMENT",
        &["spec.baremetal_instance", "not a DNS label"],
    );
    assert_eq!(t.count(ATTACHMENTS).await, 0);
    s.finish().await;
}
