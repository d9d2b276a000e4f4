//! The simulated k8s manager: overlays per hosting cluster, bridged to fabric segments.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;

use super::engine::{Engine, Tables};
use super::{FailureKind, Faults, SimError, SimManager, SimStateStore, load_records};
use crate::checks;
use crate::contract::{K8sManager, OpError, Operation};
use crate::registration::Registration;
use crate::types::{CreateSubnetOverlayRequest, DeleteSubnetOverlayRequest};

/// Namespace [`SimK8s::open`] uses.
pub const DEFAULT_K8S_NAMESPACE: &str = "sim-k8s";

/// A subnet's overlay on one hosting cluster: the request that programmed it.
pub type SimOverlay = CreateSubnetOverlayRequest;

fn overlay_key(cluster: &str, subnet: &str) -> String {
    format!("overlay/{cluster}/{subnet}")
}

#[derive(Default, Clone)]
struct State {
    overlays: BTreeMap<String, SimOverlay>,
    /// (cluster, segment) → subnet: one VNI carries one subnet per cluster.
    segments: HashMap<(String, i64), String>,
}

impl State {
    fn apply(&mut self, key: String, record: Option<SimOverlay>) {
        if let Some(old) = self.overlays.remove(&key) {
            self.segments
                .remove(&(old.hosting_cluster.clone(), old.segment_id));
        }
        if let Some(new) = record {
            self.segments.insert(
                (new.hosting_cluster.clone(), new.segment_id),
                new.subnet_id.clone(),
            );
            self.overlays.insert(key, new);
        }
    }
}

impl Tables for State {
    type Record = SimOverlay;

    fn record(&self, key: &str) -> Option<&SimOverlay> {
        self.overlays.get(key)
    }

    fn keys(&self) -> Vec<String> {
        self.overlays.keys().cloned().collect()
    }

    fn apply(&mut self, key: String, record: Option<SimOverlay>) {
        State::apply(self, key, record);
    }
}

/// The simulated k8s engine; bind it to a registration with [`super::SimManager::k8s`].
/// Operations run through an [`Engine`] like the sim fabric's.
pub struct SimK8s {
    engine: Engine<State>,
    faults: Faults,
}

impl SimK8s {
    /// Opens the engine over `store` in the default namespace.
    pub async fn open(store: Arc<dyn SimStateStore>) -> Result<Arc<SimK8s>, SimError> {
        Self::open_namespaced(store, DEFAULT_K8S_NAMESPACE).await
    }

    /// Opens the engine in `namespace`.
    pub async fn open_namespaced(
        store: Arc<dyn SimStateStore>,
        namespace: &str,
    ) -> Result<Arc<SimK8s>, SimError> {
        let mut state = State::default();
        for (key, overlay) in load_records::<SimOverlay>(&store, namespace).await? {
            state.apply(key, Some(overlay));
        }
        Ok(Arc::new(SimK8s {
            engine: Engine::start(store, namespace, state),
            faults: Faults::default(),
        }))
    }

    /// See [`super::SimFabric::inject_failure`]; the primary id of overlay operations is
    /// `subnet_id`.
    pub fn inject_failure(&self, op: Operation, object_id: &str, times: u32, kind: FailureKind) {
        self.faults.inject(op, object_id, times, kind);
    }

    /// Removes every injected failure.
    pub fn clear_failures(&self) {
        self.faults.clear();
    }

    /// How many times `op` was called.
    pub fn call_count(&self, op: Operation) -> u64 {
        self.faults.count(op)
    }

    /// A subnet's overlay on a hosting cluster.
    pub async fn overlay(&self, subnet_id: &str, hosting_cluster: &str) -> Option<SimOverlay> {
        let state = self.engine.read();
        state
            .overlays
            .get(&overlay_key(hosting_cluster, subnet_id))
            .cloned()
    }

    /// Every overlay, sorted by cluster then subnet.
    pub async fn overlays(&self) -> Vec<SimOverlay> {
        self.engine.read().overlays.values().cloned().collect()
    }

    /// Creates (or re-creates) an overlay; `hosting_clusters` are the clusters the calling
    /// registration serves (others are refused).
    async fn create_overlay(
        &self,
        req: &CreateSubnetOverlayRequest,
        hosting_clusters: &[String],
    ) -> Result<(), OpError> {
        self.faults.enter(req)?;
        checks::subnet_overlay(req, hosting_clusters)?;
        let r = req.clone();
        self.engine
            .run(move |state: &State| {
                let other = state
                    .segments
                    .get(&(r.hosting_cluster.clone(), r.segment_id));
                checks::segment_free(&r, other.map(String::as_str))?;
                let key = overlay_key(&r.hosting_cluster, &r.subnet_id);
                Ok((vec![(key, Some(r.clone()))], ()))
            })
            .await
    }

    /// Removes an overlay (removing what is gone succeeds).
    async fn delete_overlay(
        &self,
        req: &DeleteSubnetOverlayRequest,
        hosting_clusters: &[String],
    ) -> Result<(), OpError> {
        self.faults.enter(req)?;
        checks::hosting_cluster(&req.hosting_cluster, hosting_clusters)?;
        let key = overlay_key(&req.hosting_cluster, &req.subnet_id);
        self.engine
            .run(move |_: &State| Ok((vec![(key.clone(), None)], ())))
            .await
    }
}

#[async_trait]
impl K8sManager for SimManager<SimK8s> {
    fn registration(&self) -> &Registration {
        &self.registration
    }

    async fn create_subnet_overlay(&self, req: &CreateSubnetOverlayRequest) -> Result<(), OpError> {
        self.delay().await;
        let clusters = &self.registration.hosting_clusters;
        self.engine.create_overlay(req, clusters).await
    }

    async fn delete_subnet_overlay(&self, req: &DeleteSubnetOverlayRequest) -> Result<(), OpError> {
        self.delay().await;
        let clusters = &self.registration.hosting_clusters;
        self.engine.delete_overlay(req, clusters).await
    }
}
