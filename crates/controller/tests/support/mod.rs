//! What the controller test suites share: an in-memory store with a default NetworkClass over
//! the sim drivers, inserting objects as the API stores them, and waiting for their states.
// Each suite uses part of it.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use osac_backends::{DriverContext, MemorySimState, Registry, SimFabric, SimK8s};
use osac_model::{FABRIC_FINALIZER, Kind};
use osac_store::{Record, SqliteStore, Store, StoreError};
use serde_json::{Value, json};

/// An in-memory store and the sim fabric and k8s managers of the dev registry.
pub struct SimWorld {
    pub store: Arc<dyn Store>,
    /// The sim drivers' state, for further sim drivers (a provisioner) beside them.
    pub state: Arc<MemorySimState>,
    pub sim: Arc<SimFabric>,
    pub k8s: Arc<SimK8s>,
    pub registry: Arc<Registry>,
}

impl SimWorld {
    pub async fn new() -> SimWorld {
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::connect("sqlite::memory:").await.unwrap());
        let state = Arc::new(MemorySimState::new());
        let sim = SimFabric::open(state.clone()).await.unwrap();
        let k8s = SimK8s::open(state.clone()).await.unwrap();
        let ctx = DriverContext::new(state.clone())
            .with_sim_fabric(sim.clone())
            .with_sim_k8s(k8s.clone());
        let registry = Arc::new(Registry::sim_dev(&ctx).await.unwrap());
        SimWorld {
            store,
            state,
            sim,
            k8s,
            registry,
        }
    }
}

/// Objects in a test's store: inserted as the API stores them, read, waited for.
pub trait Objects {
    fn store(&self) -> &Arc<dyn Store>;

    /// How long a wait may take before the test fails.
    fn timeout(&self) -> Duration;

    /// Inserts the default NetworkClass (sim fabric + sim k8s); returns its id.
    async fn default_class(&self) -> String {
        self.insert(
            Kind::NetworkClass,
            "",
            "default",
            json!({
                "fabric_manager": "sim-fabric",
                "k8s_manager": "sim-k8s",
                "is_default": true,
                "spec": {"vip_prefix_length": 28},
                "status": {"state": "NETWORK_CLASS_STATE_PENDING"}
            }),
        )
        .await
    }

    async fn insert(&self, kind: Kind, tenant: &str, name: &str, body: Value) -> String {
        let mut rec = Record::new(kind, tenant, body);
        rec.name = Some(name.to_string());
        self.insert_record(rec).await
    }

    /// Inserts with the fabric finalizer where the kind takes one (as the API does).
    async fn insert_record(&self, mut rec: Record) -> String {
        if rec.kind.needs_fabric_finalizer() {
            rec.finalizers.push(FABRIC_FINALIZER.to_string());
        }
        let mut tx = self.store().begin().await.unwrap();
        let rec = tx.insert(&rec).await.unwrap();
        tx.commit().await.unwrap();
        rec.id
    }

    async fn get(&self, id: &str) -> Option<Record> {
        self.store().get(id).await.unwrap()
    }

    /// Polls until `check` holds for the object (None = gone).
    async fn wait(
        &self,
        id: &str,
        what: &str,
        check: impl Fn(Option<&Record>) -> bool,
    ) -> Option<Record> {
        let deadline = tokio::time::Instant::now() + self.timeout();
        loop {
            let rec = self.get(id).await;
            if check(rec.as_ref()) {
                return rec;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("timed out waiting for {what}; last seen: {rec:#?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn wait_state(&self, id: &str, state: &str) -> Record {
        self.wait(id, state, |r| r.is_some_and(|r| state_of(r) == state))
            .await
            .unwrap()
    }

    /// Changes the object under optimistic locking, again on a conflict (as the API's update
    /// does).
    async fn modify(&self, id: &str, change: impl Fn(&mut Record)) {
        loop {
            let mut rec = self.get(id).await.unwrap();
            change(&mut rec);
            let mut tx = self.store().begin().await.unwrap();
            match tx.update(&rec).await {
                Ok(_) => {
                    tx.commit().await.unwrap();
                    return;
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// Marks the object deleted the way the API does (deletion timestamp + DELETING).
    async fn delete(&self, id: &str, deleting: &str) {
        self.modify(id, |rec| {
            rec.deleted_at = Some(chrono::Utc::now());
            rec.body["status"]["state"] = json!(deleting);
        })
        .await
    }

    /// Rewrites the spec.
    async fn set_spec(&self, id: &str, spec: Value) {
        self.modify(id, |rec| rec.body["spec"] = spec.clone()).await
    }

    async fn wait_gone(&self, id: &str) {
        self.wait(id, "row removed", |r| r.is_none()).await;
    }

    /// Marks the object deleted (see [`Objects::delete`]) and waits until its row is removed.
    async fn delete_until_gone(&self, id: &str, deleting: &str) {
        self.delete(id, deleting).await;
        self.wait_gone(id).await;
    }
}

pub fn state_of(r: &Record) -> String {
    r.body["status"]["state"].as_str().unwrap_or("").to_string()
}

pub fn status<'a>(r: &'a Record, field: &str) -> &'a Value {
    &r.body["status"][field]
}

pub fn message(r: &Record) -> String {
    status(r, "message").as_str().unwrap_or("").to_string()
}
