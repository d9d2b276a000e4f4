//! Default networking and single-call creation (docs/defaults.md): tenant onboarding creates
//! labelled, READY defaults in one transaction; workloads without attachments get them stored
//! in their spec; `auto_external_ip_attachment` creates ExternalIPs and attachments in the
//! workload's transaction (nothing persisted on exhaustion, also under concurrency); deleting a
//! workload cleans them up in order, orphaning leftovers after the retry limit; deleting a
//! tenant removes what it owns.

use std::collections::HashSet;

use osac_backends::{FailureKind, Operation};
use serde_json::{Value, json};

use crate::both_backends;
use crate::common::*;

const EXHAUSTED: &str =
    "ExternalIPPool exhaustion: no available capacity in any READY pool for IPv4";
const NO_DEFAULTS: &str =
    "No default networking resources available. Please contact your administrator.";

/// Waits until the tenant `name` is READY and returns it.
async fn ready_tenant(s: &TestServer, name: &str) -> Value {
    s.admin
        .wait_for_state(PRIV, "tenants", name, "TENANT_STATE_READY")
        .await
}

/// Objects of `collection` carrying `label` = `value`, as `api` sees them.
async fn labelled(api: &Api, collection: &str, label: &str, value: &str) -> Vec<Value> {
    let filter = format!("this.metadata.labels[\"{label}\"] == \"{value}\"");
    let r = api
        .list(
            collection,
            &[("filter", filter.as_str()), ("limit", "1000")],
        )
        .await
        .ok();
    r["items"].as_array().cloned().unwrap_or_default()
}

/// The reasons of the events about object `oid`, oldest first.
async fn reasons(api: &Api, oid: &str) -> Vec<String> {
    let filter = format!("this.spec.object_id == \"{oid}\"");
    let r = api
        .list("events", &[("filter", filter.as_str()), ("limit", "1000")])
        .await
        .ok();
    r["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| e["spec"]["reason"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[track_caller]
fn has_all(got: &[String], want: &[&str]) {
    for w in want {
        assert!(got.iter().any(|g| g == w), "no {w} event in {got:?}");
    }
}

async fn pool_available(s: &TestServer, pool: &str) -> i64 {
    let p = s
        .admin
        .get(&format!("{PRIV}/external_ip_pools/{pool}"))
        .await
        .ok();
    counter(&p, "available")
}

/// Replaces the dev pool by `cidr` (nothing is allocated yet) and returns its total.
async fn replace_pool(s: &TestServer, cidr: &str) -> i64 {
    s.admin
        .delete(&format!("{PRIV}/external_ip_pools/external-pool-1"))
        .await
        .ok();
    s.admin
        .wait_gone(PRIV, "external_ip_pools", "external-pool-1")
        .await;
    s.admin
        .post(
            &format!("{PRIV}/external_ip_pools"),
            json!({"metadata": {"name": "small"}, "spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": [cidr]}}),
        )
        .await
        .ok();
    let p = s
        .admin
        .wait_for_state(
            PRIV,
            "external_ip_pools",
            "small",
            "EXTERNAL_IP_POOL_STATE_READY",
        )
        .await;
    counter(&p, "total")
}

both_backends!(onboarding_creates_ready_labelled_defaults);
async fn onboarding_creates_ready_labelled_defaults(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let before = pool_available(&s, "external-pool-1").await;
    let t = s.tenant("acme").await;
    let tenant = ready_tenant(&s, "acme").await;
    let cond = condition(&tenant, "TENANT_CONDITION_TYPE_DEFAULT_NETWORKING_READY")
        .unwrap_or_else(|| panic!("no condition: {tenant}"));
    assert_eq!(cond["status"], "CONDITION_STATUS_TRUE", "{tenant}");

    let label = "osac.openshift.io/default";
    let names = |v: Vec<Value>| -> HashSet<String> {
        v.iter()
            .map(|o| {
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    };
    for (collection, expected, state) in [
        (
            "virtual_networks",
            vec!["default"],
            "VIRTUAL_NETWORK_STATE_READY",
        ),
        (
            "subnets",
            vec!["default-ipv4", "default-ipv6"],
            "SUBNET_STATE_READY",
        ),
        (
            "security_groups",
            vec!["default"],
            "SECURITY_GROUP_STATE_READY",
        ),
        (
            "external_ips",
            vec!["default-nat"],
            "EXTERNAL_IP_STATE_ALLOCATED",
        ),
        ("nat_gateways", vec!["default"], "NAT_GATEWAY_STATE_READY"),
    ] {
        let objs = labelled(&t, collection, label, "true").await;
        assert_eq!(
            names(objs.clone()),
            expected.iter().map(|s| s.to_string()).collect(),
            "{collection}"
        );
        for o in &objs {
            assert_eq!(o["status"]["state"], state, "{o}");
            assert_eq!(o["metadata"]["tenant"], "acme");
        }
    }
    // The class's default rules are in the default SG; the VN carries the class's CIDRs.
    let sg = t.get(&format!("{PUB}/security_groups/default")).await.ok();
    assert!(
        !sg["spec"]["ingress"].as_array().unwrap().is_empty(),
        "{sg}"
    );
    let vn = t.get(&format!("{PUB}/virtual_networks/default")).await.ok();
    assert_eq!(vn["spec"]["ipv4_cidr"], "10.0.0.0/16");
    // The NAT address came out of the pool.
    assert_eq!(pool_available(&s, "external-pool-1").await, before - 1);
    // The tenant sees what happened to it.
    has_all(
        &reasons(&t, &id(&tenant)).await,
        &["CreatingDefaultNetworking", "DefaultNetworkingReady"],
    );
    s.finish().await;
}

/// The default NAT gateway is on unless the class says `enable_nat_gateway: false` (the dev
/// class leaves it unset).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_turns_the_default_nat_gateway_off_explicitly() {
    let s = TestServer::sqlite().await;
    let path = format!("{PRIV}/network_classes/default");
    let class = s.admin.get(&path).await.ok();
    assert!(
        class["spec"]["defaults"]
            .get("enable_nat_gateway")
            .is_none(),
        "{class}"
    );
    let on = s.tenant("on").await;
    on.get(&format!("{PUB}/nat_gateways/default")).await.ok();
    on.get(&format!("{PUB}/external_ips/default-nat"))
        .await
        .ok();

    let mut defaults = class["spec"]["defaults"].clone();
    defaults["enable_nat_gateway"] = json!(false);
    let off = s
        .admin
        .patch(&path, json!({"spec": {"defaults": defaults}}))
        .await
        .ok();
    assert_eq!(
        off["spec"]["defaults"]["enable_nat_gateway"], false,
        "{off}"
    );
    let before = pool_available(&s, "external-pool-1").await;
    let quiet = s.tenant("quiet").await;
    quiet
        .get(&format!("{PUB}/nat_gateways/default"))
        .await
        .err(404, "NOT_FOUND", &["default"]);
    quiet
        .get(&format!("{PUB}/external_ips/default-nat"))
        .await
        .err(404, "NOT_FOUND", &["default-nat"]);
    quiet.get(&format!("{PUB}/subnets/default-ipv4")).await.ok();
    assert_eq!(pool_available(&s, "external-pool-1").await, before);
    s.finish().await;
}

both_backends!(onboarding_without_pool_capacity_creates_nothing);
async fn onboarding_without_pool_capacity_creates_nothing(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let total = replace_pool(&s, "198.51.100.0/30").await;
    for i in 0..total {
        s.tenant(&format!("t{i}")).await;
    }
    let msg = s
        .admin
        .post(
            &format!("{PRIV}/tenants"),
            json!({"metadata": {"name": "late"}}),
        )
        .await
        .err(429, "RESOURCE_EXHAUSTED", &["default-nat", EXHAUSTED]);
    assert!(msg.contains("tenant default networking"), "{msg}");
    s.admin
        .get(&format!("{PRIV}/tenants/late"))
        .await
        .err(404, "NOT_FOUND", &["late"]);
    // Nothing of the failed tenant exists: no VN, subnet, SG or address was left behind.
    let filter = "this.metadata.tenant == \"late\"";
    for collection in [
        "virtual_networks",
        "subnets",
        "security_groups",
        "external_ips",
    ] {
        let r = s.admin.list(collection, &[("filter", filter)]).await.ok();
        assert_eq!(r["total"], 0, "{collection}: {r}");
    }
    assert_eq!(pool_available(&s, "small").await, 0);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_default_subnet_fails_the_tenant_and_recreating_it_works() {
    let mut s = TestServer::sqlite().await;
    let mut ctl = s.pause().await;
    s.admin
        .post(
            &format!("{PRIV}/tenants"),
            json!({"metadata": {"name": "acme"}}),
        )
        .await
        .ok();
    let t = s.client_for("acme", "tenant-admin").await;
    let subnet = t.get(&format!("{PUB}/subnets/default-ipv4")).await.ok();
    ctl.sim_fabric().inject_failure(
        Operation::CreateSubnet,
        &id(&subnet),
        u32::MAX,
        FailureKind::Permanent,
    );
    ctl.run();
    let tenant = s
        .admin
        .wait_for_state(PRIV, "tenants", "acme", "TENANT_STATE_FAILED")
        .await;
    let cond = condition(&tenant, "TENANT_CONDITION_TYPE_DEFAULT_NETWORKING_READY").unwrap();
    assert_eq!(cond["status"], "CONDITION_STATUS_FALSE", "{tenant}");
    assert_eq!(cond["reason"], "SubnetProvisioningFailed", "{tenant}");
    assert!(
        cond["message"].as_str().unwrap().contains("'default-ipv4'"),
        "{tenant}"
    );
    // Retry = delete and re-create the tenant.
    ctl.sim_fabric().clear_failures();
    s.admin.delete(&format!("{PRIV}/tenants/acme")).await.ok();
    s.admin.wait_gone(PRIV, "tenants", "acme").await;
    let left = s
        .admin
        .list("subnets", &[("filter", "this.metadata.tenant == \"acme\"")])
        .await
        .ok();
    assert_eq!(left["total"], 0, "{left}");
    s.admin
        .post(
            &format!("{PRIV}/tenants"),
            json!({"metadata": {"name": "acme"}}),
        )
        .await
        .ok();
    ready_tenant(&s, "acme").await;
    ctl.stop().await;
    s.finish().await;
}

both_backends!(workloads_without_attachments_get_the_defaults_stored);
async fn workloads_without_attachments_get_the_defaults_stored(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let t = s.tenant("acme").await;
    ready_tenant(&s, "acme").await;
    let subnet = id(&t.get(&format!("{PUB}/subnets/default-ipv4")).await.ok());
    let sg = id(&t.get(&format!("{PUB}/security_groups/default")).await.ok());

    let vm = t
        .create(
            "compute_instances",
            json!({"metadata": {"name": "vm1"}, "spec": {"template": "small"}}),
        )
        .await;
    assert_eq!(
        vm["spec"]["compute_network_attachments"],
        json!([{"subnet": subnet, "security_groups": [sg], "primary": true}]),
        "{vm}"
    );
    let got = t.get(&format!("{PUB}/compute_instances/vm1")).await.ok();
    assert_eq!(
        got["spec"]["compute_network_attachments"],
        vm["spec"]["compute_network_attachments"]
    );
    let running = t
        .wait("compute_instances", "vm1", "COMPUTE_INSTANCE_STATE_RUNNING")
        .await;
    has_all(
        &reasons(&t, &id(&vm)).await,
        &["Created", "PopulatedNetworkAttachmentsDefaults", "Running"],
    );
    let ip = running["status"]["internal_ip_address"].as_str().unwrap();
    assert!(ip.starts_with("10.0.1."), "{running}");

    let bm = t
        .create(
            "baremetal_instances",
            json!({"metadata": {"name": "bm1"}, "spec": {"host_type": "bm-standard"}}),
        )
        .await;
    let att = &bm["spec"]["network_attachments"][0];
    assert_eq!(att["interface"], "data-0", "{bm}");
    assert_eq!(att["subnet"], json!(subnet));
    assert_eq!(att["security_groups"], json!([sg]));

    let c = t
        .create(
            "clusters",
            json!({"metadata": {"name": "c1"}, "spec": {"template": "ocp",
                "node_sets": {"workers": {"host_type": "bm-standard", "size": 1}}}}),
        )
        .await;
    assert_eq!(
        c["spec"]["network_attachment"],
        json!({"subnet": subnet, "security_groups": [sg]}),
        "{c}"
    );

    // Explicit attachments are kept as given (the defaults are not touched).
    t.ready_subnet("mine", "default", "10.0.9.0/24").await;
    let explicit = t.create_vm("vm2", "mine").await;
    let mine = id(&t.get(&format!("{PUB}/subnets/mine")).await.ok());
    assert_eq!(
        explicit["spec"]["compute_network_attachments"],
        json!([{"subnet": mine, "primary": true}])
    );

    // Defaults are protected while used and editable (the fabric is re-programmed).
    t.delete(&format!("{PUB}/subnets/default-ipv4")).await.err(
        412,
        "FAILED_PRECONDITION",
        &["'default-ipv4'", "is used by"],
    );
    t.delete(&format!("{PUB}/security_groups/default"))
        .await
        .err(412, "FAILED_PRECONDITION", &["'default'", "is used by"]);
    let rule = json!({"protocol": "PROTOCOL_TCP", "port_from": 8443, "port_to": 8443, "ipv4_cidr": "0.0.0.0/0"});
    let mut ingress =
        t.get(&format!("{PUB}/security_groups/default")).await.ok()["spec"]["ingress"]
            .as_array()
            .cloned()
            .unwrap();
    ingress.push(rule);
    t.patch(
        &format!("{PUB}/security_groups/default"),
        json!({"spec": {"ingress": ingress}}),
    )
    .await
    .ok();
    let sim = s.sim_fabric();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let acl = sim.security_group(&sg).await.expect("sg in the fabric");
        if acl.ingress.iter().any(|r| r.port_from == Some(8443)) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fabric never got the new rule: {acl:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_defaults_is_a_failed_precondition() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    ready_tenant(&s, "acme").await;
    t.delete(&format!("{PUB}/security_groups/default"))
        .await
        .ok();
    t.wait_gone(PUB, "security_groups", "default").await;
    for (collection, body) in [
        ("compute_instances", json!({"spec": {"template": "small"}})),
        (
            "baremetal_instances",
            json!({"spec": {"host_type": "bm-standard"}}),
        ),
        (
            "clusters",
            json!({"spec": {"template": "ocp", "node_sets": {"workers": {"host_type": "bm-standard", "size": 1}}}}),
        ),
    ] {
        let msg =
            t.post(&format!("{PUB}/{collection}"), body)
                .await
                .err(412, "FAILED_PRECONDITION", &[]);
        assert_eq!(msg, NO_DEFAULTS, "{collection}");
        assert_eq!(t.count(collection).await, 0);
    }
    s.finish().await;
}

both_backends!(single_call_vm_bm_and_cluster_get_external_addresses);
async fn single_call_vm_bm_and_cluster_get_external_addresses(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let t = s.tenant("acme").await;
    ready_tenant(&s, "acme").await;
    let before = pool_available(&s, "external-pool-1").await;
    let auto = "osac.openshift.io/auto-provisioned-for";

    let vm = t
        .create(
            "compute_instances",
            json!({"metadata": {"name": "vm1"}, "spec": {"template": "small", "auto_external_ip_attachment": true}}),
        )
        .await;
    let bm = t
        .create(
            "baremetal_instances",
            json!({"metadata": {"name": "bm1"}, "spec": {"host_type": "bm-standard", "auto_external_ip_attachment": true}}),
        )
        .await;
    let c = t
        .create(
            "clusters",
            json!({"metadata": {"name": "c1"}, "spec": {"template": "ocp", "auto_external_ip_attachment": true,
                "node_sets": {"workers": {"host_type": "bm-standard", "size": 1}}}}),
        )
        .await;
    // Created in the workload's transaction, PENDING or further, labelled.
    for (w, n) in [(&vm, 1), (&bm, 1), (&c, 2)] {
        let eips = labelled(&t, "external_ips", auto, &id(w)).await;
        let atts = labelled(&t, "external_ip_attachments", auto, &id(w)).await;
        assert_eq!((eips.len(), atts.len()), (n, n), "{w}");
        for o in eips.iter().chain(&atts) {
            assert_eq!(
                o["metadata"]["labels"]["osac.openshift.io/auto-provisioned"],
                "true"
            );
        }
    }
    let endpoints: HashSet<String> = labelled(&t, "external_ip_attachments", auto, &id(&c))
        .await
        .iter()
        .map(|a| {
            a["spec"]["target_endpoint"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(
        endpoints,
        HashSet::from([
            "EXTERNAL_IP_ATTACHMENT_ENDPOINT_API".to_string(),
            "EXTERNAL_IP_ATTACHMENT_ENDPOINT_INGRESS".to_string()
        ])
    );
    assert_eq!(pool_available(&s, "external-pool-1").await, before - 4);
    has_all(&reasons(&t, &id(&vm)).await, &["AutoProvisionedExternalIP"]);

    // They activate: every workload ends up with an external address.
    for (collection, name, state) in [
        ("compute_instances", "vm1", "COMPUTE_INSTANCE_STATE_RUNNING"),
        (
            "baremetal_instances",
            "bm1",
            "BARE_METAL_INSTANCE_STATE_RUNNING",
        ),
    ] {
        t.wait(collection, name, state).await;
        let w = t
            .wait_until(
                &format!("{PUB}/{collection}/{name}"),
                "an external address",
                |o| {
                    o["status"]["external_ip_address"]
                        .as_str()
                        .is_some_and(|a| a.starts_with("203.0.113."))
                },
            )
            .await;
        assert!(w["status"]["external_ip_address"].is_string());
    }
    t.wait("clusters", "c1", "CLUSTER_STATE_READY").await;
    for a in labelled(&t, "external_ip_attachments", auto, &id(&c)).await {
        t.wait(
            "external_ip_attachments",
            &id(&a),
            "EXTERNAL_IP_ATTACHMENT_STATE_READY",
        )
        .await;
    }

    // Deleting each returns the pool to where it was; the defaults stay.
    for (collection, name) in [
        ("compute_instances", "vm1"),
        ("baremetal_instances", "bm1"),
        ("clusters", "c1"),
    ] {
        t.delete(&format!("{PUB}/{collection}/{name}")).await.ok();
    }
    for (collection, name) in [
        ("compute_instances", "vm1"),
        ("baremetal_instances", "bm1"),
        ("clusters", "c1"),
    ] {
        t.wait_gone(PUB, collection, name).await;
    }
    for w in [&vm, &bm, &c] {
        assert!(labelled(&t, "external_ips", auto, &id(w)).await.is_empty());
        assert!(
            labelled(&t, "external_ip_attachments", auto, &id(w))
                .await
                .is_empty()
        );
    }
    assert_eq!(pool_available(&s, "external-pool-1").await, before);
    t.get(&format!("{PUB}/subnets/default-ipv4")).await.ok();
    t.get(&format!("{PUB}/external_ips/default-nat")).await.ok();
    s.finish().await;
}

both_backends!(concurrent_single_call_creates_never_over_allocate);
async fn concurrent_single_call_creates_never_over_allocate(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let total = replace_pool(&s, "198.51.100.0/27").await;
    let t = s.tenant("acme").await;
    ready_tenant(&s, "acme").await;
    // Leave exactly 20 free addresses (the tenant's NAT address is one of the used ones).
    for i in 0..(total - 1 - 20) {
        t.create(
            "external_ips",
            json!({"metadata": {"name": format!("fill-{i}")}, "spec": {}}),
        )
        .await;
    }
    assert_eq!(pool_available(&s, "small").await, 20);
    let mut tasks = Vec::new();
    for i in 0..50 {
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            t.post(
                &format!("{PUB}/compute_instances"),
                json!({"metadata": {"name": format!("vm-{i}")}, "spec": {"template": "small", "auto_external_ip_attachment": true}}),
            )
            .await
        }));
    }
    let (mut created, mut exhausted) = (0, 0);
    for task in tasks {
        let r = task.await.expect("task");
        match r.status {
            200 => created += 1,
            429 => {
                assert_eq!(r.body["message"], EXHAUSTED, "{:?}", r.body);
                exhausted += 1;
            }
            other => panic!("unexpected {other}: {:?}", r.body),
        }
    }
    assert_eq!((created, exhausted), (20, 30));
    let r = t
        .list(
            "events",
            &[
                ("filter", "this.spec.reason == \"ExternalIPPoolExhausted\""),
                ("limit", "1000"),
            ],
        )
        .await
        .ok();
    // Refusals are coalesced: one warning per tenant and reason per interval (docs/limits.md).
    assert_eq!(r["total"], 1, "one warning for the 30 refusals: {r}");
    assert_eq!(r["items"][0]["spec"]["type"], "EVENT_TYPE_WARNING");
    assert_eq!(t.count("compute_instances").await, 20);
    let auto = labelled(
        &t,
        "external_ips",
        "osac.openshift.io/auto-provisioned",
        "true",
    )
    .await;
    assert_eq!(auto.len(), 20, "no orphan ExternalIP");
    assert_eq!(pool_available(&s, "small").await, 0);
    // Each VM gets its own address.
    let mut addresses = HashSet::new();
    for e in &auto {
        let e = t
            .wait("external_ips", &id(e), "EXTERNAL_IP_STATE_ALLOCATED")
            .await;
        addresses.insert(e["status"]["address"].as_str().unwrap().to_string());
    }
    assert_eq!(addresses.len(), 20);
    s.finish().await;
}

/// A VM with an auto-provisioned address, RUNNING with its attachment READY; returns the VM
/// and its attachment.
async fn vm_with_auto_address(t: &Api, name: &str) -> (Value, Value) {
    let vm = t
        .create(
            "compute_instances",
            json!({"metadata": {"name": name}, "spec": {"template": "small", "auto_external_ip_attachment": true}}),
        )
        .await;
    let att = labelled(
        t,
        "external_ip_attachments",
        "osac.openshift.io/auto-provisioned-for",
        &id(&vm),
    )
    .await
    .remove(0);
    t.wait(
        "external_ip_attachments",
        &id(&att),
        "EXTERNAL_IP_ATTACHMENT_STATE_READY",
    )
    .await;
    (vm, att)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_retries_a_failing_dnat_removal_then_completes_in_order() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    ready_tenant(&s, "acme").await;
    let before = pool_available(&s, "external-pool-1").await;
    let (vm, att) = vm_with_auto_address(&t, "vm1").await;
    let eip = id(&labelled(
        &t,
        "external_ips",
        "osac.openshift.io/auto-provisioned-for",
        &id(&vm),
    )
    .await[0]);
    // A manual address attached to the same VM is never deleted by the cleanup.
    t.allocated_eip("manual", "external-pool-1").await;
    t.create(
        "external_ip_attachments",
        json!({"metadata": {"name": "manual"}, "spec": {"external_ip": "manual", "compute_instance": "vm1"}}),
    )
    .await;
    t.wait(
        "external_ip_attachments",
        "manual",
        "EXTERNAL_IP_ATTACHMENT_STATE_READY",
    )
    .await;
    let sim = s.sim_fabric();
    sim.inject_failure(
        Operation::DeleteExternalIpAttachment,
        &id(&att),
        3,
        FailureKind::Transient,
    );
    let removals = sim.call_count(Operation::DeleteExternalIpAttachment);
    t.delete(&format!("{PUB}/compute_instances/vm1")).await.ok();
    t.wait_gone(PUB, "compute_instances", "vm1").await;
    t.get(&format!("{PUB}/external_ip_attachments/{}", id(&att)))
        .await
        .err(404, "NOT_FOUND", &[]);
    t.get(&format!("{PUB}/external_ips/{eip}"))
        .await
        .err(404, "NOT_FOUND", &[]);
    // The DNAT removal was retried past its three failures...
    assert!(sim.call_count(Operation::DeleteExternalIpAttachment) >= removals + 4);
    // ...and the ExternalIP's deletion started only after the attachment was gone.
    let at = |events: &Value, reason: &str| -> String {
        events["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["spec"]["reason"] == reason)
            .map(|e| {
                e["metadata"]["creation_timestamp"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .unwrap_or_else(|| panic!("no {reason} event: {events}"))
    };
    let for_object = |oid: String| format!("this.spec.object_id == \"{oid}\"");
    let att_events = t
        .list(
            "events",
            &[("filter", for_object(id(&att)).as_str()), ("limit", "1000")],
        )
        .await
        .ok();
    let eip_events = t
        .list(
            "events",
            &[
                ("filter", for_object(eip.clone()).as_str()),
                ("limit", "1000"),
            ],
        )
        .await
        .ok();
    assert!(
        at(&att_events, "Deleted") <= at(&eip_events, "Deleting"),
        "attachment gone before its address is released: {att_events} {eip_events}"
    );
    // The manual ones stay; the attachment waits for a target again.
    t.get(&format!("{PUB}/external_ips/manual")).await.ok();
    let manual = t
        .wait(
            "external_ip_attachments",
            "manual",
            "EXTERNAL_IP_ATTACHMENT_STATE_PENDING",
        )
        .await;
    assert!(
        !manual["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "{manual}"
    );
    assert_eq!(pool_available(&s, "external-pool-1").await, before - 1);
    has_all(
        &reasons(&t, &id(&vm)).await,
        &[
            "CleanupExternalIPAttachments",
            "CleanupExternalIPs",
            "CleanupCompleted",
        ],
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_that_never_succeeds_orphans_the_leftovers() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    ready_tenant(&s, "acme").await;
    let (vm, att) = vm_with_auto_address(&t, "vm1").await;
    s.sim_fabric().inject_failure(
        Operation::DeleteExternalIpAttachment,
        &id(&att),
        u32::MAX,
        FailureKind::Transient,
    );
    t.delete(&format!("{PUB}/compute_instances/vm1")).await.ok();
    t.wait_gone(PUB, "compute_instances", "vm1").await;
    let orphaned = "osac.openshift.io/orphaned";
    let atts = labelled(&t, "external_ip_attachments", orphaned, "true").await;
    let eips = labelled(&t, "external_ips", orphaned, "true").await;
    assert_eq!(atts.len(), 1, "{atts:?}");
    assert_eq!(id(&atts[0]), id(&att));
    assert_eq!(eips.len(), 1, "{eips:?}");
    assert_eq!(
        eips[0]["metadata"]["labels"]["osac.openshift.io/auto-provisioned-for"],
        json!(id(&vm))
    );
    has_all(&reasons(&t, &id(&vm)).await, &["CleanupOrphaned"]);
    s.finish().await;
}

both_backends!(tenant_deletion_waits_for_workloads_then_removes_everything);
async fn tenant_deletion_waits_for_workloads_then_removes_everything(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let before = pool_available(&s, "external-pool-1").await;
    let t = s.tenant("acme").await;
    ready_tenant(&s, "acme").await;
    t.ready_subnet("extra", "default", "10.0.7.0/24").await;
    t.create(
        "compute_instances",
        json!({"metadata": {"name": "vm1"}, "spec": {"template": "small"}}),
    )
    .await;
    s.admin.delete(&format!("{PRIV}/tenants/acme")).await.err(
        412,
        "FAILED_PRECONDITION",
        &["'acme'", "compute_instances", "'vm1'"],
    );
    t.delete(&format!("{PUB}/compute_instances/vm1")).await.ok();
    t.wait_gone(PUB, "compute_instances", "vm1").await;
    s.admin.delete(&format!("{PRIV}/tenants/acme")).await.ok();
    s.admin.wait_gone(PRIV, "tenants", "acme").await;
    let filter = "this.metadata.tenant == \"acme\"";
    for collection in [
        "virtual_networks",
        "subnets",
        "security_groups",
        "external_ips",
        "nat_gateways",
    ] {
        let r = s.admin.list(collection, &[("filter", filter)]).await.ok();
        assert_eq!(r["total"], 0, "{collection}: {r}");
    }
    assert_eq!(pool_available(&s, "external-pool-1").await, before);
    s.finish().await;
}
