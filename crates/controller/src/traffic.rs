//! Bandwidth metering sweep: every [`ControllerConfig::traffic_interval`] each fabric manager
//! is asked for the cumulative byte counters of its NAT paths
//! ([`FabricManager::nat_counters`]); each counter is mapped to the tenant owning its object
//! and the ExternalIP whose address it uses, and the readings are recorded in the store
//! ([`osac_store::Store::record_traffic`], which keeps the last reading per counter and
//! accumulates only the growth, so a counter that restarted from zero loses and doubles
//! nothing). A manager without counters (`None`) is skipped. With several replicas the replica
//! holding the manager name's shard sweeps it, as for drift checks.
//!
//! [`ControllerConfig::traffic_interval`]: crate::ControllerConfig::traffic_interval

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use osac_backends::{FabricManager, NatPathCounter, RoleManager};
use osac_store::{Store, TrafficSample};
use tokio::sync::watch;

use crate::ownership::{Claim, Ownership};
use crate::reconcile::ReconcileCtx;

/// Whom a NAT path's counter is billed to: the owning tenant (its name and its Tenant
/// object's id, the identity usage is selected by) and the ExternalIP it uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    tenant: String,
    tenant_id: String,
    external_ip_id: String,
}

/// Runs until `shutdown`: one sweep per `interval` (the first one interval after start);
/// `interval` zero turns metering of bandwidth off.
pub(crate) async fn traffic_loop(
    ctx: Arc<ReconcileCtx>,
    ownership: Ownership,
    interval: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    if interval.is_zero() {
        return;
    }
    // Owners seen in earlier sweeps: the last bytes of an object being deleted are still
    // billed to it when its record is already gone.
    let mut known: HashMap<String, Owner> = HashMap::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    return;
                }
                continue;
            }
        }
        for (name, manager) in fabric_managers(&ctx) {
            if matches!(ownership.claim(&name), Claim::NotMine) {
                continue;
            }
            if let Err(e) = sweep(ctx.store.as_ref(), manager.as_ref(), &mut known).await {
                tracing::warn!(manager = %name, error = %e, "bandwidth metering sweep failed");
            }
        }
    }
}

/// Why one manager's sweep failed (it is tried again at the next interval).
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The manager could not read its counters.
    #[error("reading counters: {0}")]
    Counters(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] osac_store::StoreError),
}

/// Reads one manager's counters and records them; answers how many were recorded (None: the
/// manager has no counters). `known` keeps the owners seen, by object id, from one sweep to
/// the next.
pub async fn sweep(
    store: &dyn Store,
    manager: &dyn FabricManager,
    known: &mut HashMap<String, Owner>,
) -> Result<Option<usize>, SweepError> {
    let Some(counters) = manager
        .nat_counters()
        .await
        .map_err(|e| SweepError::Counters(e.message().to_string()))?
    else {
        return Ok(None);
    };
    let at = chrono::Utc::now();
    let mut samples = Vec::with_capacity(counters.len());
    let mut tenant_ids = HashMap::new();
    for counter in counters {
        let owner = match owner_of(store, &counter.object_id, &mut tenant_ids).await? {
            Some(owner) => {
                known.insert(counter.object_id.clone(), owner.clone());
                owner
            }
            None => match known.get(&counter.object_id) {
                Some(owner) => owner.clone(),
                None => {
                    tracing::debug!(object = %counter.object_id, "NAT path of no known object: not metered");
                    continue;
                }
            },
        };
        samples.push(sample(counter, owner));
    }
    store.record_traffic(at, &samples).await?;
    Ok(Some(samples.len()))
}

/// The tenant and ExternalIP of the object a counter belongs to (None: no such object). The
/// tenant's id is that of the tenant of the object's tenant name now: a tenant is removed only
/// after everything it owns, so a live object's tenant name names its own tenant.
/// `tenant_ids` keeps the ids looked up in this sweep, by name.
async fn owner_of(
    store: &dyn Store,
    object_id: &str,
    tenant_ids: &mut HashMap<String, String>,
) -> Result<Option<Owner>, SweepError> {
    let Some(rec) = store.get_cached(object_id).await? else {
        return Ok(None);
    };
    let external_ip_id = osac_model::refs::string_at(&rec.body, "spec.external_ip")
        .unwrap_or_default()
        .to_string();
    let tenant_id = match tenant_ids.get(&rec.tenant) {
        Some(id) => id.clone(),
        None => {
            let id = osac_store::metering::tenant_id(store, &rec.tenant)
                .await?
                .unwrap_or_default();
            tenant_ids.insert(rec.tenant.clone(), id.clone());
            id
        }
    };
    Ok(Some(Owner {
        tenant: rec.tenant,
        tenant_id,
        external_ip_id,
    }))
}

fn sample(c: NatPathCounter, owner: Owner) -> TrafficSample {
    TrafficSample {
        // The contract's spelling is the store's (`external_ip_attachment`, `nat_gateway`).
        kind: c.kind.as_str().to_string(),
        object_id: c.object_id,
        tenant: owner.tenant,
        tenant_id: owner.tenant_id,
        external_ip_id: owner.external_ip_id,
        epoch: c.epoch,
        ingress_bytes: c.ingress_bytes,
        egress_bytes: c.egress_bytes,
    }
}

/// Every registered fabric manager, by name.
fn fabric_managers(ctx: &ReconcileCtx) -> Vec<(String, Arc<dyn FabricManager>)> {
    let registry = ctx.dispatcher.registry();
    registry
        .registrations()
        .into_iter()
        .filter_map(|r| match registry.get(&r.name) {
            Some(RoleManager::Fabric(m)) => Some((r.name.clone(), m)),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use osac_backends::*;
    use osac_model::Kind;
    use osac_store::Record;
    use serde_json::json;

    async fn attachment(store: &dyn Store, tenant: &str, eip: &str) -> String {
        let rec = Record::new(
            Kind::ExternalIpAttachment,
            tenant,
            json!({"spec": {"external_ip": eip, "target": "vm"}}),
        );
        let mut tx = store.begin().await.unwrap();
        let rec = tx.insert(&rec).await.unwrap();
        tx.commit().await.unwrap();
        rec.id
    }

    /// Injected traffic, a dataplane reset between two sweeps and a repeated sweep: the store
    /// holds exactly what was sent, billed to the attachment's tenant and ExternalIP.
    #[tokio::test]
    async fn sweeps_record_injected_traffic_across_a_reset() {
        let store = osac_store::open("sqlite::memory:").await.unwrap();
        let fabric = SimFabric::open(Arc::new(MemorySimState::new()))
            .await
            .unwrap();
        let m: Arc<dyn FabricManager> = Arc::new(
            SimManager::fabric(Registration::sim("sim", Role::Fabric), fabric.clone()).unwrap(),
        );
        m.create_virtual_network(&CreateVirtualNetworkRequest {
            virtual_network_id: "vn".into(),
            tenant: "t1".into(),
            ipv4_cidr: Some("10.0.0.0/16".parse().unwrap()),
            ipv6_cidr: None,
        })
        .await
        .unwrap();
        let mut tenant = Record::new(Kind::Tenant, "", json!({"spec": {}}));
        tenant.name = Some("t1".into());
        let mut tx = store.begin().await.unwrap();
        let tenant = tx.insert(&tenant).await.unwrap();
        tx.commit().await.unwrap();
        let mut addresses = Vec::new();
        for id in ["e1", "e2"] {
            let a = m
                .allocate_external_ip(&AllocateExternalIpRequest {
                    external_ip_id: id.into(),
                    pool_id: "pool".into(),
                    cidrs: vec!["203.0.113.0/24".parse().unwrap()],
                })
                .await
                .unwrap();
            addresses.push(a.address);
        }
        let att = attachment(store.as_ref(), "t1", "eip-1").await;
        m.create_external_ip_attachment(&CreateExternalIpAttachmentRequest {
            attachment_id: att.clone(),
            virtual_network_id: "vn".into(),
            external_address: addresses[0],
            target_ip: "10.0.1.5".parse().unwrap(),
        })
        .await
        .unwrap();
        // A path whose object the store does not know is not metered.
        m.create_nat_gateway(&CreateNatGatewayRequest {
            nat_gateway_id: "stranger".into(),
            virtual_network_id: "vn".into(),
            external_address: addresses[1],
            source_cidrs: vec![],
        })
        .await
        .unwrap();

        let mut known = HashMap::new();
        let kind = NatPathKind::ExternalIpAttachment;
        assert!(fabric.inject_traffic(kind, &att, 1000, 100));
        assert!(fabric.inject_traffic(NatPathKind::NatGateway, "stranger", 5, 5));
        let n = sweep(store.as_ref(), m.as_ref(), &mut known).await.unwrap();
        assert_eq!(n, Some(1));
        assert!(fabric.inject_traffic(kind, &att, 500, 50));
        fabric.reset_counters();
        assert!(fabric.inject_traffic(kind, &att, 3000, 300));
        sweep(store.as_ref(), m.as_ref(), &mut known).await.unwrap();
        sweep(store.as_ref(), m.as_ref(), &mut known).await.unwrap();

        let now = chrono::Utc::now();
        let rows = store
            .traffic_usage(
                now - chrono::Duration::hours(1),
                now + chrono::Duration::hours(1),
                None,
            )
            .await
            .unwrap();
        assert!(rows.iter().all(|r| r.object_id == att));
        let (i, e) = rows.iter().fold((0, 0), |(i, e), r| {
            (i + r.ingress_bytes, e + r.egress_bytes)
        });
        // The 500/50 sent just before the reset were never read: the dataplane lost them with
        // its counters (documented: at most one interval of traffic before a rebuild).
        assert_eq!((i, e), (1000 + 3000, 100 + 300));
        assert!(
            rows.iter().all(|r| r.tenant == "t1"
                && r.tenant_id == tenant.id
                && r.external_ip_id == "eip-1")
        );
    }

    /// A manager without counters is skipped, not an error.
    #[tokio::test]
    async fn a_manager_without_counters_is_skipped() {
        struct NoCounters(Registration);
        #[async_trait::async_trait]
        impl FabricLayer for NoCounters {
            fn registration(&self) -> &Registration {
                &self.0
            }
            async fn call<R: FabricRequest>(&self, _: &R) -> Result<R::Response, OpError> {
                Err(OpError::permanent("unused"))
            }
        }
        let store = osac_store::open("sqlite::memory:").await.unwrap();
        let m = NoCounters(Registration::sim("x", Role::Fabric));
        let got = sweep(store.as_ref(), &m, &mut HashMap::new())
            .await
            .unwrap();
        assert_eq!(got, None);
    }
}
