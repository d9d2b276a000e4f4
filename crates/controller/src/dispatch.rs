//! The dispatcher: which managers serve an object. A VirtualNetwork's NetworkClass names a
//! fabric manager and optionally a k8s manager; objects inside the VN use the same ones.
//! Provider objects without a VN (ExternalIPs) use the default class.
//!
//! Every manager handed out is metered: operation outcomes and durations go to Prometheus.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use osac_backends::{
    FabricLayer, FabricManager, FabricRequest, K8sLayer, K8sManager, K8sRequest, NatPathCounter,
    OpError, Operation, Registration, Registry,
};
use osac_model::{Kind, pb};
use osac_store::{Record, Store, StoreError};

use crate::metrics;

/// Resolves NetworkClasses to their managers.
#[derive(Clone)]
pub struct Dispatcher {
    registry: Arc<Registry>,
}

/// The managers serving one NetworkClass.
#[derive(Clone)]
pub struct Managers {
    /// The class id.
    pub class_id: String,
    /// The class as stored.
    pub class: pb::NetworkClass,
    /// Its fabric manager.
    pub fabric: Arc<dyn FabricManager>,
    /// Its k8s manager, when the class has one.
    pub k8s: Option<Arc<dyn K8sManager>>,
}

impl Managers {
    /// Hosting clusters the k8s manager programs overlays on (none without a k8s manager).
    pub fn hosting_clusters(&self) -> &[String] {
        self.k8s.as_ref().map_or(&[], |k| k.hosting_clusters())
    }

    /// IPv4 prefix length of the VIP block (`spec.vip_prefix_length`, 28 when unset).
    pub fn vip_prefix_length(&self) -> u8 {
        self.class
            .spec
            .as_ref()
            .map(|s| s.vip_prefix_length)
            .and_then(|p| u8::try_from(p).ok())
            .filter(|p| *p > 0)
            .unwrap_or(28)
    }
}

/// A store read failed while resolving: retry later.
fn store_failure(e: StoreError) -> OpError {
    OpError::transient(format!("store: {e}"))
}

impl Dispatcher {
    /// A dispatcher over the process's manager registry.
    pub fn new(registry: Arc<Registry>) -> Self {
        Dispatcher { registry }
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The managers of NetworkClass `class_id` (empty ⇒ the default class). A missing class or
    /// manager is a permanent failure: retrying cannot make it appear.
    pub async fn for_class(&self, store: &dyn Store, class_id: &str) -> Result<Managers, OpError> {
        if class_id.is_empty() {
            return self.for_default_class(store).await;
        }
        let record = store
            .get(class_id)
            .await
            .map_err(store_failure)?
            .filter(|r| r.kind == Kind::NetworkClass)
            .ok_or_else(|| {
                OpError::permanent(format!("NetworkClass '{class_id}' does not exist"))
            })?;
        self.managers(&record)
    }

    /// The managers of the default NetworkClass (`is_default`; the only class when there is
    /// one and none is marked).
    pub async fn for_default_class(&self, store: &dyn Store) -> Result<Managers, OpError> {
        let ids = store.ids(Kind::NetworkClass).await.map_err(store_failure)?;
        let mut classes = Vec::new();
        for id in ids {
            if let Some(r) = store.get(&id).await.map_err(store_failure)?
                && r.deleted_at.is_none()
            {
                classes.push(r);
            }
        }
        let mut default = None;
        for r in &classes {
            let class: pb::NetworkClass =
                r.decode().map_err(|e| OpError::permanent(e.to_string()))?;
            if class.is_default {
                default = Some(r);
                break;
            }
        }
        let record = match (default, classes.as_slice()) {
            (Some(r), _) => r,
            (None, [only]) => only,
            (None, _) => {
                return Err(OpError::permanent(
                    "no default NetworkClass is defined (ask the provider admin to create one)",
                ));
            }
        };
        self.managers(record)
    }

    /// The managers of the VirtualNetwork `vn_id`'s class, with the VN itself.
    pub async fn for_virtual_network(
        &self,
        store: &dyn Store,
        vn_id: &str,
    ) -> Result<(Record, Managers), OpError> {
        let vn = store
            .get(vn_id)
            .await
            .map_err(store_failure)?
            .filter(|r| r.kind == Kind::VirtualNetwork)
            .ok_or_else(|| {
                OpError::permanent(format!("VirtualNetwork '{vn_id}' does not exist"))
            })?;
        let class_id = network_class_of(&vn);
        let managers = self.for_class(store, &class_id).await?;
        Ok((vn, managers))
    }

    fn managers(&self, record: &Record) -> Result<Managers, OpError> {
        let class: pb::NetworkClass = record
            .decode()
            .map_err(|e| OpError::permanent(e.to_string()))?;
        let label = record.label().to_string();
        let fabric = self.registry.fabric(&class.fabric_manager).map_err(|e| {
            OpError::permanent(format!(
                "fabric manager of NetworkClass '{label}' is unusable: {e}"
            ))
        })?;
        let fabric: Arc<dyn FabricManager> = Arc::new(Metered(fabric));
        let k8s = if class.k8s_manager.is_empty() {
            None
        } else {
            let k8s = self.registry.k8s(&class.k8s_manager).map_err(|e| {
                OpError::permanent(format!(
                    "k8s manager of NetworkClass '{label}' is unusable: {e}"
                ))
            })?;
            Some(Arc::new(Metered(k8s)) as Arc<dyn K8sManager>)
        };
        Ok(Managers {
            class_id: record.id.clone(),
            class,
            fabric,
            k8s,
        })
    }
}

/// The class id a VirtualNetwork record names (`spec.network_class`).
pub(crate) fn network_class_of(vn: &Record) -> String {
    osac_model::refs::string_at(&vn.body, "spec.network_class")
        .unwrap_or_default()
        .to_string()
}

/// A manager that counts the outcome and duration of every call (of either role).
struct Metered<M: ?Sized>(Arc<M>);

#[async_trait]
impl FabricLayer for Metered<dyn FabricManager> {
    fn registration(&self) -> &Registration {
        self.0.registration()
    }

    async fn call<R: FabricRequest>(&self, request: &R) -> Result<R::Response, OpError> {
        metered(
            self.0.registration(),
            R::OPERATION,
            request.call_on(&*self.0),
        )
        .await
    }

    async fn nat_counters(&self) -> Result<Option<Vec<NatPathCounter>>, OpError> {
        self.0.nat_counters().await
    }
}

#[async_trait]
impl K8sLayer for Metered<dyn K8sManager> {
    fn registration(&self) -> &Registration {
        self.0.registration()
    }

    async fn call<R: K8sRequest>(&self, request: &R) -> Result<R::Response, OpError> {
        metered(
            self.0.registration(),
            R::OPERATION,
            request.call_on(&*self.0),
        )
        .await
    }
}

/// Runs one manager call: refused when the reconcile's shard lease is lost, otherwise timed
/// and counted by outcome.
async fn metered<T>(
    registration: &Registration,
    op: Operation,
    call: impl Future<Output = Result<T, OpError>>,
) -> Result<T, OpError> {
    // A reconcile whose shard lease is lost asks nothing of managers.
    osac_backends::fence::check()?;
    let start = Instant::now();
    let result = call.await.map_err(|e| e.in_operation(op.as_str()));
    let outcome = match &result {
        Ok(_) => "ok",
        Err(e) if e.is_transient() => "transient",
        Err(_) => "permanent",
    };
    let name = &registration.name;
    metrics::manager_op(name, op.as_str(), outcome, start.elapsed());
    match &result {
        Ok(_) => tracing::debug!(manager = %name, %op, "manager operation succeeded"),
        Err(e) => {
            tracing::info!(manager = %name, %op, outcome, error = %e, "manager operation failed")
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use osac_backends::{MemorySimState, Role, SimFabric, SimManager};

    /// The metering wrapper hands out the wrapped manager's NAT counters, not the contract's
    /// "no counters" default.
    #[tokio::test]
    async fn metered_managers_pass_nat_counters_through() {
        let fabric = SimFabric::open(Arc::new(MemorySimState::new()))
            .await
            .unwrap();
        let sim: Arc<dyn FabricManager> =
            Arc::new(SimManager::fabric(Registration::sim("sim", Role::Fabric), fabric).unwrap());
        let metered: Arc<dyn FabricManager> = Arc::new(Metered(sim));
        assert_eq!(metered.nat_counters().await.unwrap(), Some(Vec::new()));
    }
}
