//! The real runtime against an in-memory SQLite store and the sim managers.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use osac_backends::{FailureKind, Operation, Registry, SimFabric, SimK8s};
use osac_controller::{
    ControllerConfig, Controllers, Dispatcher, NoWorkloads, Target, TargetResolver,
};
use osac_model::{FABRIC_FINALIZER, Kind, pb};
use osac_store::{Record, Store, StoreError};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;

mod support;
use support::{Objects, SimWorld, message, state_of, status};

const TIMEOUT: Duration = Duration::from_secs(15);

struct Env {
    store: Arc<dyn Store>,
    registry: Arc<Registry>,
    sim: Arc<SimFabric>,
    k8s: Arc<SimK8s>,
    class: String,
    stop: Option<(watch::Sender<bool>, JoinHandle<()>)>,
}

fn config() -> ControllerConfig {
    ControllerConfig {
        workers: 3,
        resync_interval: Duration::from_secs(3600),
        backoff_base: Duration::from_millis(20),
        backoff_cap: Duration::from_millis(300),
        ..ControllerConfig::default()
    }
}

impl Objects for Env {
    fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    fn timeout(&self) -> Duration {
        TIMEOUT
    }
}

impl Env {
    /// A store with a default NetworkClass (sim fabric + sim k8s), controllers not started.
    async fn new() -> Env {
        let SimWorld {
            store,
            sim,
            k8s,
            registry,
            ..
        } = SimWorld::new().await;
        let mut env = Env {
            store,
            registry,
            sim,
            k8s,
            class: String::new(),
            stop: None,
        };
        env.class = env.default_class().await;
        env
    }

    fn controllers(&self) -> Controllers {
        Controllers::new(
            self.store.clone(),
            Dispatcher::new(self.registry.clone()),
            config(),
        )
    }

    fn start_with(&mut self, c: Controllers) {
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(c.run(rx));
        self.stop = Some((tx, task));
    }

    fn start(&mut self) {
        let c = self.controllers();
        self.start_with(c);
    }

    async fn stop(&mut self) {
        if let Some((tx, task)) = self.stop.take() {
            tx.send(true).unwrap();
            tokio::time::timeout(TIMEOUT, task).await.unwrap().unwrap();
        }
    }

    async fn vn(&self, name: &str) -> String {
        self.insert(
            Kind::VirtualNetwork,
            "t1",
            name,
            json!({
                "spec": {"network_class": self.class, "ipv4_cidr": "10.0.0.0/16"},
                "status": {"state": "VIRTUAL_NETWORK_STATE_PENDING"}
            }),
        )
        .await
    }

    async fn pool(&self, cidr: &str) -> String {
        self.insert(
            Kind::ExternalIpPool,
            "",
            "pool",
            json!({
                "spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": [cidr]},
                "status": {"state": "EXTERNAL_IP_POOL_STATE_PENDING"}
            }),
        )
        .await
    }

    /// Waits until the ExternalIP no longer shows as attached.
    async fn wait_detached(&self, eip: &str) {
        self.wait(eip, "detached", |r| {
            r.is_some_and(|r| status(r, "attached") != true)
        })
        .await;
    }

    fn eip_record(&self, pool: &str, name: &str) -> Record {
        let mut rec = Record::new(
            Kind::ExternalIp,
            "t1",
            json!({
                "spec": {"pool": pool},
                "status": {"state": "EXTERNAL_IP_STATE_PENDING"}
            }),
        );
        rec.name = Some(name.to_string());
        rec
    }
}

#[tokio::test]
async fn network_class_tenant_and_virtual_network_become_ready() {
    let mut env = Env::new().await;
    let tenant = env
        .insert(
            Kind::Tenant,
            "",
            "t1",
            json!({"spec": {}, "status": {"state": "TENANT_STATE_PENDING"}}),
        )
        .await;
    let vn = env.vn("net").await;
    env.start();
    env.wait_state(&env.class, "NETWORK_CLASS_STATE_READY")
        .await;
    let t = env.wait_state(&tenant, "TENANT_STATE_READY").await;
    let cond = &status(&t, "conditions")[0];
    assert_eq!(
        cond["type"],
        "TENANT_CONDITION_TYPE_DEFAULT_NETWORKING_READY"
    );
    assert_eq!(cond["status"], "CONDITION_STATUS_TRUE");
    // Inserted without default networking (no API onboarding): nothing to wait for.
    assert_eq!(cond["reason"], "NoDefaults");
    let v = env.wait_state(&vn, "VIRTUAL_NETWORK_STATE_READY").await;
    assert!(
        v.annotations
            .contains_key(osac_controller::APPLIED_SPEC_ANNOTATION)
    );
    let sim_vn = env.sim.virtual_network(&vn).await.unwrap();
    assert_eq!(sim_vn.tenant, "t1");

    // A resync of a converged network does not call the manager again.
    let calls = env.sim.call_count(Operation::CreateVirtualNetwork);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(env.sim.call_count(Operation::CreateVirtualNetwork), calls);

    let families = prometheus::gather();
    assert!(families.iter().any(|f| f.name() == "osac_reconcile_total"));
    assert!(
        families
            .iter()
            .any(|f| f.name() == "osac_manager_operations_total")
    );
    env.stop().await;
}

#[tokio::test]
async fn subnet_waits_for_its_virtual_network_then_is_ready() {
    let mut env = Env::new().await;
    let vn_rec = Record::new(
        Kind::VirtualNetwork,
        "t1",
        json!({
            "spec": {"network_class": env.class, "ipv4_cidr": "10.0.0.0/16"},
            "status": {"state": "VIRTUAL_NETWORK_STATE_PENDING"}
        }),
    );
    env.sim.inject_failure(
        Operation::CreateVirtualNetwork,
        &vn_rec.id,
        u32::MAX,
        FailureKind::Transient,
    );
    let vn = env.insert_record(vn_rec).await;
    let subnet = env
        .insert(
            Kind::Subnet,
            "t1",
            "sub",
            json!({
                "spec": {"virtual_network": vn, "ipv4_cidr": "10.0.1.0/24"},
                "status": {"state": "SUBNET_STATE_PENDING"}
            }),
        )
        .await;
    env.start();
    let s = env
        .wait(&subnet, "subnet waiting message", |r| {
            r.is_some_and(|r| message(r).contains("waiting for VirtualNetwork"))
        })
        .await
        .unwrap();
    assert_eq!(state_of(&s), "SUBNET_STATE_PENDING");
    let v = env
        .wait(&vn, "VN transient message", |r| {
            r.is_some_and(|r| message(r).contains("injected transient"))
        })
        .await
        .unwrap();
    assert_eq!(state_of(&v), "VIRTUAL_NETWORK_STATE_PENDING");

    env.sim.clear_failures();
    env.wait_state(&vn, "VIRTUAL_NETWORK_STATE_READY").await;
    let s = env.wait_state(&subnet, "SUBNET_STATE_READY").await;
    assert!(
        status(&s, "segment_id")
            .as_str()
            .unwrap()
            .parse::<i64>()
            .unwrap()
            > 0
    );
    assert_eq!(status(&s, "ipv4_gateway"), "10.0.1.1");
    assert_eq!(status(&s, "vip_cidr"), "10.0.1.240/28");
    assert_eq!(message(&s), "");
    for cluster in ["hosting-a", "hosting-b"] {
        let o = env.k8s.overlay(&subnet, cluster).await.unwrap();
        assert_eq!(o.vip_cidr.unwrap().to_string(), "10.0.1.240/28");
    }

    // Delete: overlays first, then the segment; the row goes only after both.
    env.k8s.inject_failure(
        Operation::DeleteSubnetOverlay,
        &subnet,
        2,
        FailureKind::Transient,
    );
    env.delete_until_gone(&subnet, "SUBNET_STATE_DELETING")
        .await;
    assert!(env.sim.subnet(&subnet).await.is_none());
    assert!(env.k8s.overlays().await.is_empty());
    env.stop().await;
}

#[tokio::test]
async fn security_group_rule_change_is_reapplied() {
    let mut env = Env::new().await;
    let vn = env.vn("net").await;
    let rule = |port: i32| json!({"protocol": "PROTOCOL_TCP", "port_from": port, "port_to": port, "ipv4_cidr": "0.0.0.0/0"});
    let sg = env
        .insert(
            Kind::SecurityGroup,
            "t1",
            "sg",
            json!({
                "spec": {"virtual_network": vn, "ingress": [rule(22)]},
                "status": {"state": "SECURITY_GROUP_STATE_PENDING"}
            }),
        )
        .await;
    env.start();
    env.wait_state(&sg, "SECURITY_GROUP_STATE_READY").await;
    let programmed = env.sim.security_group(&sg).await.unwrap();
    assert_eq!(programmed.ingress.len(), 1);
    assert_eq!(programmed.ingress[0].port_from, Some(22));

    env.set_spec(
        &sg,
        json!({"virtual_network": vn, "ingress": [rule(22), rule(443)], "egress": [
            {"protocol": "PROTOCOL_ALL", "ipv4_cidr": "10.0.0.0/8"}
        ]}),
    )
    .await;
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let g = env.sim.security_group(&sg).await.unwrap();
        if g.ingress.len() == 2 && g.egress.len() == 1 {
            assert_eq!(g.ingress[1].port_to, Some(443));
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "rules not re-applied: {g:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    env.wait_state(&sg, "SECURITY_GROUP_STATE_READY").await;

    // A permanent undo failure shows DELETE_FAILED and is retried slowly until it works.
    env.sim.inject_failure(
        Operation::DeleteSecurityGroup,
        &sg,
        u32::MAX,
        FailureKind::Permanent,
    );
    env.delete(&sg, "SECURITY_GROUP_STATE_DELETING").await;
    let g = env
        .wait_state(&sg, "SECURITY_GROUP_STATE_DELETE_FAILED")
        .await;
    assert!(message(&g).contains("injected permanent"), "{g:?}");
    assert!(env.sim.security_group(&sg).await.is_some());
    env.sim.clear_failures();
    env.wait_gone(&sg).await;
    assert!(env.sim.security_group(&sg).await.is_none());
    env.stop().await;
}

#[tokio::test]
async fn nat_gateway_waits_for_external_ip_and_marks_it_attached() {
    let mut env = Env::new().await;
    let pool = env.pool("203.0.113.0/29").await;
    let vn = env.vn("net").await;
    let eip_rec = env.eip_record(&pool, "nat-ip");
    env.sim.inject_failure(
        Operation::AllocateExternalIp,
        &eip_rec.id,
        u32::MAX,
        FailureKind::Transient,
    );
    let eip = env.insert_record(eip_rec).await;
    env.start();
    env.wait_state(&vn, "VIRTUAL_NETWORK_STATE_READY").await;
    let e = env
        .wait(&eip, "eip transient", |r| {
            r.is_some_and(|r| message(r).contains("injected"))
        })
        .await
        .unwrap();
    assert_eq!(state_of(&e), "EXTERNAL_IP_STATE_PENDING");
    assert_eq!(status(&e, "attached"), &Value::Null, "not attached yet");

    let nat = env
        .insert(
            Kind::NatGateway,
            "t1",
            "nat",
            json!({
                "spec": {"virtual_network": vn, "external_ip": eip},
                "status": {"state": "NAT_GATEWAY_STATE_PENDING"}
            }),
        )
        .await;
    let n = env
        .wait(&nat, "NAT waiting message", |r| {
            r.is_some_and(|r| message(r).contains("to be ALLOCATED"))
        })
        .await
        .unwrap();
    assert_eq!(state_of(&n), "NAT_GATEWAY_STATE_PENDING");
    assert!(
        message(&n).contains("ExternalIP 'nat-ip'"),
        "{}",
        message(&n)
    );
    // The NAT gateway references the ExternalIP: attached flips even before allocation.
    env.wait(&eip, "attached", |r| {
        r.is_some_and(|r| status(r, "attached") == true)
    })
    .await;

    env.sim.clear_failures();
    let e = env.wait_state(&eip, "EXTERNAL_IP_STATE_ALLOCATED").await;
    let address = status(&e, "address").as_str().unwrap().to_string();
    assert_eq!(status(&e, "pool"), pool.as_str());
    let n = env.wait_state(&nat, "NAT_GATEWAY_STATE_READY").await;
    assert_eq!(status(&n, "address"), address.as_str());
    let snat = env.sim.snat_rules().await;
    assert_eq!(snat.len(), 1);
    assert_eq!(snat[0].external_address.to_string(), address);
    assert_eq!(snat[0].source_cidrs[0].to_string(), "10.0.0.0/16");

    // Deleting the gateway removes the SNAT and un-attaches the address.
    env.delete_until_gone(&nat, "NAT_GATEWAY_STATE_DELETING")
        .await;
    assert!(env.sim.snat_rules().await.is_empty());
    env.wait_detached(&eip).await;
    env.stop().await;
}

#[tokio::test]
async fn pool_counters_follow_external_ips() {
    let mut env = Env::new().await;
    let pool = env.pool("203.0.113.0/29").await;
    let a = env.insert_record(env.eip_record(&pool, "a")).await;
    let b = env.insert_record(env.eip_record(&pool, "b")).await;
    env.start();
    let counts = |r: &Record| {
        (
            status(r, "total").as_str().unwrap_or("0").to_string(),
            status(r, "allocated").as_str().unwrap_or("0").to_string(),
            status(r, "available").as_str().unwrap_or("0").to_string(),
        )
    };
    let p = env
        .wait(&pool, "pool READY with 2 allocated", |r| {
            r.is_some_and(|r| state_of(r) == "EXTERNAL_IP_POOL_STATE_READY" && counts(r).1 == "2")
        })
        .await
        .unwrap();
    assert_eq!(counts(&p), ("6".into(), "2".into(), "4".into()));
    env.wait_state(&a, "EXTERNAL_IP_STATE_ALLOCATED").await;
    env.wait_state(&b, "EXTERNAL_IP_STATE_ALLOCATED").await;
    assert_eq!(env.sim.external_addresses().await.len(), 2);

    // The release fails a few times: the row and the capacity stay until it succeeds.
    env.sim
        .inject_failure(Operation::ReleaseExternalIp, &a, 3, FailureKind::Transient);
    env.delete_until_gone(&a, "EXTERNAL_IP_STATE_DELETING")
        .await;
    assert!(env.sim.call_count(Operation::ReleaseExternalIp) >= 4);
    let p = env.get(&pool).await.unwrap();
    assert_eq!(
        counts(&p),
        ("6".into(), "1".into(), "5".into()),
        "recounted in the removing tx"
    );
    assert_eq!(env.sim.external_addresses().await.len(), 1);

    // The API's helper: a reservation recounts inside its own transaction.
    let mut tx = env.store.begin().await.unwrap();
    tx.insert(&env.eip_record(&pool, "c")).await.unwrap();
    let c = osac_store::pool::recount_pool(&mut *tx, &pool)
        .await
        .unwrap()
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!((c.total, c.allocated, c.available), (6, 2, 4));
    env.stop().await;
}

#[tokio::test]
async fn transient_failures_are_retried_and_permanent_ones_fail() {
    let mut env = Env::new().await;
    let flaky = Record::new(
        Kind::VirtualNetwork,
        "t1",
        json!({"spec": {"network_class": env.class, "ipv4_cidr": "10.1.0.0/16"}, "status": {"state": "VIRTUAL_NETWORK_STATE_PENDING"}}),
    );
    let broken = Record::new(
        Kind::VirtualNetwork,
        "t1",
        json!({"spec": {"network_class": env.class, "ipv4_cidr": "10.2.0.0/16"}, "status": {"state": "VIRTUAL_NETWORK_STATE_PENDING"}}),
    );
    env.sim.inject_failure(
        Operation::CreateVirtualNetwork,
        &flaky.id,
        2,
        FailureKind::Transient,
    );
    env.sim.inject_failure(
        Operation::CreateVirtualNetwork,
        &broken.id,
        1,
        FailureKind::Permanent,
    );
    let flaky = env.insert_record(flaky).await;
    let broken = env.insert_record(broken).await;
    let orphan = env
        .insert(
            Kind::VirtualNetwork,
            "t1",
            "no-class",
            json!({"spec": {"network_class": "missing", "ipv4_cidr": "10.3.0.0/16"}, "status": {"state": "VIRTUAL_NETWORK_STATE_PENDING"}}),
        )
        .await;
    env.start();
    let f = env.wait_state(&flaky, "VIRTUAL_NETWORK_STATE_READY").await;
    assert_eq!(message(&f), "");
    let b = env
        .wait_state(&broken, "VIRTUAL_NETWORK_STATE_FAILED")
        .await;
    assert!(
        message(&b).contains("injected permanent failure"),
        "{}",
        message(&b)
    );
    let o = env
        .wait_state(&orphan, "VIRTUAL_NETWORK_STATE_FAILED")
        .await;
    assert!(
        message(&o).contains("NetworkClass 'missing' does not exist"),
        "{}",
        message(&o)
    );

    // FAILED with an unchanged spec is final: no more manager calls on resync.
    let calls = env.sim.call_count(Operation::CreateVirtualNetwork);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(env.sim.call_count(Operation::CreateVirtualNetwork), calls);
    env.stop().await;
}

#[tokio::test]
async fn virtual_network_delete_waits_for_the_manager() {
    let mut env = Env::new().await;
    let vn = env.vn("net").await;
    env.start();
    env.wait_state(&vn, "VIRTUAL_NETWORK_STATE_READY").await;
    env.sim.inject_failure(
        Operation::DeleteVirtualNetwork,
        &vn,
        u32::MAX,
        FailureKind::Transient,
    );
    env.delete(&vn, "VIRTUAL_NETWORK_STATE_DELETING").await;
    let v = env
        .wait(&vn, "delete failure shown", |r| {
            r.is_some_and(|r| message(r).contains("injected"))
        })
        .await
        .unwrap();
    assert_eq!(state_of(&v), "VIRTUAL_NETWORK_STATE_DELETING");
    assert!(v.finalizers.contains(&FABRIC_FINALIZER.to_string()));
    assert!(env.sim.virtual_network(&vn).await.is_some());
    env.sim.clear_failures();
    env.wait_gone(&vn).await;
    assert!(env.sim.virtual_network(&vn).await.is_none());
    env.stop().await;
}

/// Resolves every target to one fixed IP in one VN (stands in for workloads).
struct FixedTarget {
    ip: IpAddr,
    vn: String,
}

#[async_trait]
impl TargetResolver for FixedTarget {
    async fn resolve(
        &self,
        _store: &dyn Store,
        _spec: &pb::ExternalIpAttachmentSpec,
    ) -> Result<Target, StoreError> {
        Ok(Target::Known {
            ip: self.ip,
            virtual_network: self.vn.clone(),
        })
    }
}

#[tokio::test]
async fn external_ip_attachment_pending_until_target_known() {
    let mut env = Env::new().await;
    let pool = env.pool("203.0.113.0/29").await;
    let vn = env.vn("net").await;
    let eip = env.insert_record(env.eip_record(&pool, "web-ip")).await;
    let att = env
        .insert(
            Kind::ExternalIpAttachment,
            "t1",
            "web",
            json!({
                "spec": {"external_ip": eip, "compute_instance": "vm-1"},
                "status": {"state": "EXTERNAL_IP_ATTACHMENT_STATE_PENDING"}
            }),
        )
        .await;
    // Before workloads exist: the no-workload resolver waits for every target.
    let c = env
        .controllers()
        .with_target_resolver(Arc::new(NoWorkloads));
    env.start_with(c);
    env.wait_state(&eip, "EXTERNAL_IP_STATE_ALLOCATED").await;
    let a = env
        .wait(&att, "waiting for target", |r| {
            r.is_some_and(|r| {
                message(r) == "waiting for compute instance vm-1 to have a primary IP"
            })
        })
        .await
        .unwrap();
    assert_eq!(state_of(&a), "EXTERNAL_IP_ATTACHMENT_STATE_PENDING");
    env.wait(&eip, "attached", |r| {
        r.is_some_and(|r| status(r, "attached") == true)
    })
    .await;
    env.stop().await;

    // Workloads arrive: the same store under controllers that can resolve the target.
    let c = env
        .controllers()
        .with_target_resolver(Arc::new(FixedTarget {
            ip: "10.0.3.7".parse().unwrap(),
            vn: vn.clone(),
        }));
    env.start_with(c);
    let a = env
        .wait_state(&att, "EXTERNAL_IP_ATTACHMENT_STATE_READY")
        .await;
    let e = env.get(&eip).await.unwrap();
    assert_eq!(status(&a, "external_ip_address"), status(&e, "address"));
    assert_eq!(status(&a, "target_ip"), "10.0.3.7");
    let dnat = env.sim.dnat_rules().await;
    assert_eq!(dnat.len(), 1);
    assert_eq!(dnat[0].target_ip.to_string(), "10.0.3.7");

    env.delete_until_gone(&att, "EXTERNAL_IP_ATTACHMENT_STATE_DELETING")
        .await;
    assert!(env.sim.dnat_rules().await.is_empty());
    env.wait_detached(&eip).await;
    env.stop().await;
}

#[tokio::test]
async fn restarted_controllers_converge() {
    let mut env = Env::new().await;
    let pool = env.pool("203.0.113.0/29").await;
    let vn = env.vn("net").await;
    let subnet = env
        .insert(
            Kind::Subnet,
            "t1",
            "sub",
            json!({"spec": {"virtual_network": vn, "ipv4_cidr": "10.0.1.0/24"}, "status": {"state": "SUBNET_STATE_PENDING"}}),
        )
        .await;
    let sg = env
        .insert(
            Kind::SecurityGroup,
            "t1",
            "sg",
            json!({"spec": {"virtual_network": vn}, "status": {"state": "SECURITY_GROUP_STATE_PENDING"}}),
        )
        .await;
    let eip = env.insert_record(env.eip_record(&pool, "nat-ip")).await;
    let nat = env
        .insert(
            Kind::NatGateway,
            "t1",
            "nat",
            json!({"spec": {"virtual_network": vn, "external_ip": eip}, "status": {"state": "NAT_GATEWAY_STATE_PENDING"}}),
        )
        .await;
    // The subnet cannot finish under the first controllers.
    env.sim.inject_failure(
        Operation::CreateSubnet,
        &subnet,
        u32::MAX,
        FailureKind::Transient,
    );
    env.start();
    env.wait_state(&vn, "VIRTUAL_NETWORK_STATE_READY").await;
    // Drop the first controllers abruptly, mid-way.
    if let Some((_tx, task)) = env.stop.take() {
        task.abort();
        let _ = task.await;
    }
    env.sim.clear_failures();
    env.start();
    env.wait_state(&subnet, "SUBNET_STATE_READY").await;
    env.wait_state(&sg, "SECURITY_GROUP_STATE_READY").await;
    env.wait_state(&eip, "EXTERNAL_IP_STATE_ALLOCATED").await;
    env.wait_state(&nat, "NAT_GATEWAY_STATE_READY").await;
    env.wait_state(&pool, "EXTERNAL_IP_POOL_STATE_READY").await;
    assert_eq!(env.sim.subnet_count().await, 1);
    env.stop().await;
}
