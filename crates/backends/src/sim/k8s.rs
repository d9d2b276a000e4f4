//! The simulated k8s manager: overlays per hosting cluster, bridged to fabric segments.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::{Deserialize, Serialize};

use super::engine::{Engine, Planned, Tables};
use super::{FailureKind, Faults, SimError, SimStateStore, parse_request, require_non_empty};
use crate::contract::{OpError, Operation};
use crate::net::has_host_bits;
use crate::types::{CreateSubnetOverlayRequest, DeleteSubnetOverlayRequest};

/// Largest segment id a VXLAN overlay can carry (24-bit VNI).
const MAX_VNI: i64 = (1 << 24) - 1;

/// Namespace [`SimK8s::open`] uses.
pub const DEFAULT_K8S_NAMESPACE: &str = "sim-k8s";

/// A subnet's overlay on one hosting cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimOverlay {
    /// Our Subnet id.
    pub subnet_id: String,
    /// Hosting cluster.
    pub hosting_cluster: String,
    /// Fabric segment (VNI) the overlay is joined to.
    pub segment_id: i64,
    /// IPv4 prefix.
    pub ipv4_cidr: Option<Ipv4Net>,
    /// IPv6 prefix.
    pub ipv6_cidr: Option<Ipv6Net>,
    /// MetalLB VIP range.
    pub vip_cidr: Option<IpNet>,
}

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
        let rows = store
            .load_all(namespace)
            .await
            .map_err(|message| SimError::Store {
                namespace: namespace.to_string(),
                message,
            })?;
        let mut state = State::default();
        for (key, value) in rows {
            let overlay: SimOverlay =
                serde_json::from_str(&value).map_err(|e| SimError::Corrupt {
                    namespace: namespace.to_string(),
                    key: key.clone(),
                    message: e.to_string(),
                })?;
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

    /// Runs one k8s operation; `hosting_clusters` are the clusters the calling registration
    /// serves (others are rejected).
    pub async fn call(
        &self,
        op: Operation,
        request: serde_json::Value,
        hosting_clusters: &[String],
    ) -> Result<serde_json::Value, OpError> {
        self.faults.enter(op, &request)?;
        let hosting_clusters = hosting_clusters.to_vec();
        self.engine
            .run(move |state: &State| plan(state, op, request.clone(), &hosting_clusters))
            .await
    }
}

/// Validates a k8s request against the overlays and computes the record to write.
fn plan(
    state: &State,
    op: Operation,
    request: serde_json::Value,
    hosting_clusters: &[String],
) -> Result<Planned<SimOverlay>, OpError> {
    let (key, record) = match op {
        Operation::CreateSubnetOverlay => {
            let r: CreateSubnetOverlayRequest = parse_request(op, request)?;
            require_non_empty("subnet_id", &r.subnet_id)?;
            check_cluster(&r.hosting_cluster, hosting_clusters)?;
            if !(1..=MAX_VNI).contains(&r.segment_id) {
                return Err(OpError::permanent(format!(
                    "segment_id {} is outside the VXLAN range 1-{MAX_VNI}",
                    r.segment_id
                )));
            }
            if r.ipv4_cidr.is_none() && r.ipv6_cidr.is_none() {
                return Err(OpError::permanent(
                    "an overlay needs ipv4_cidr, ipv6_cidr or both",
                ));
            }
            if let Some(vip) = r.vip_cidr {
                let inside = match vip {
                    IpNet::V4(v) => r.ipv4_cidr.is_some_and(|n| n.contains(&v)),
                    IpNet::V6(v) => r.ipv6_cidr.is_some_and(|n| n.contains(&v)),
                };
                if !inside || has_host_bits(vip) {
                    return Err(OpError::permanent(format!(
                        "vip_cidr '{vip}' is not a prefix inside the subnet's CIDR"
                    )));
                }
            }
            if let Some(other) = state
                .segments
                .get(&(r.hosting_cluster.clone(), r.segment_id))
                && *other != r.subnet_id
            {
                return Err(OpError::permanent(format!(
                    "segment {} is already bridged for subnet '{other}' on hosting cluster '{}'",
                    r.segment_id, r.hosting_cluster
                )));
            }
            let key = overlay_key(&r.hosting_cluster, &r.subnet_id);
            let overlay = SimOverlay {
                subnet_id: r.subnet_id,
                hosting_cluster: r.hosting_cluster,
                segment_id: r.segment_id,
                ipv4_cidr: r.ipv4_cidr,
                ipv6_cidr: r.ipv6_cidr,
                vip_cidr: r.vip_cidr,
            };
            (key, Some(overlay))
        }
        Operation::DeleteSubnetOverlay => {
            let r: DeleteSubnetOverlayRequest = parse_request(op, request)?;
            check_cluster(&r.hosting_cluster, hosting_clusters)?;
            (overlay_key(&r.hosting_cluster, &r.subnet_id), None)
        }
        _ => {
            return Err(OpError::permanent(format!(
                "operation {op} is not a k8s operation"
            )));
        }
    };
    Ok((vec![(key, record)], serde_json::json!({})))
}

fn check_cluster(cluster: &str, allowed: &[String]) -> Result<(), OpError> {
    if allowed.iter().any(|c| c == cluster) {
        Ok(())
    } else {
        Err(OpError::permanent(format!(
            "unknown hosting cluster '{cluster}' (this manager serves: {})",
            allowed.join(", ")
        )))
    }
}
