//! [`WorkloadTargets`]: the ExternalIPAttachment target resolver over the stored workloads.
//! VM → `status.internal_ip_address` (its primary attachment's address); bare-metal instance →
//! `status.internal_ip_address` (its primary interface's); cluster → `status.api_endpoint` or
//! `status.ingress_endpoint` per `target_endpoint` once the cluster is READY. The
//! VirtualNetwork is the one the workload controller recorded (or its first subnet's). A target
//! that is gone or being deleted is waited for: the attachment's DNAT is removed and it shows
//! PENDING with the reason.
//!
//! Binding ([`TargetResolver::bind`]): a target field holding an id of a workload of the
//! attachment's tenant stays bound. One holding a name (a forward reference), or the id of a
//! workload that is gone, is looked up by name — the name written, else `status.target_name` —
//! among the workloads of that kind **in the attachment's tenant** only: found, the field gets
//! its id; not found, the field holds the name and the attachment waits for it. Attachments
//! auto-provisioned for a workload are never rebound (they are deleted with it).

use std::net::IpAddr;

use async_trait::async_trait;
use osac_model::defaults::AUTO_PROVISIONED_FOR_LABEL;
use osac_model::{Kind, pb};
use osac_store::{ListQuery, Record, Store, StoreError};

use super::external_ip_attachment::{Binding, Target, TargetResolver};
use super::{VIRTUAL_NETWORK_ANNOTATION, describe};

/// Resolves attachment targets from the store (the default of `Controllers::new`).
pub struct WorkloadTargets;

/// The target an attachment spec names.
fn target_of(spec: &pb::ExternalIpAttachmentSpec) -> Option<(Kind, &str)> {
    if !spec.compute_instance.is_empty() {
        Some((Kind::ComputeInstance, &spec.compute_instance))
    } else if !spec.baremetal_instance.is_empty() {
        Some((Kind::BareMetalInstance, &spec.baremetal_instance))
    } else if !spec.cluster.is_empty() {
        Some((Kind::Cluster, &spec.cluster))
    } else {
        None
    }
}

/// The VirtualNetwork of a workload: recorded by its controller, else its first subnet's.
async fn virtual_network(store: &dyn Store, rec: &Record) -> Result<Option<String>, StoreError> {
    if let Some(vn) = rec.annotations.get(VIRTUAL_NETWORK_ANNOTATION)
        && !vn.is_empty()
    {
        return Ok(Some(vn.clone()));
    }
    let subnet = rec
        .references()
        .into_iter()
        .find(|(field, _)| field.ends_with(".subnet"))
        .map(|(_, id)| id);
    let Some(subnet) = subnet else {
        return Ok(None);
    };
    Ok(store.get(&subnet).await?.and_then(|s| {
        osac_model::refs::string_at(&s.body, "spec.virtual_network")
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    }))
}

/// The live (not deleting) workload of `kind` named `name` in `tenant`.
async fn named(
    store: &dyn Store,
    kind: Kind,
    tenant: &str,
    name: &str,
) -> Result<Option<Record>, StoreError> {
    let query = ListQuery {
        kind,
        tenant: Some(tenant.to_string()),
        filter: format!(
            "this.metadata.name == {}",
            serde_json::Value::String(name.to_string())
        ),
        order: String::new(),
        offset: 0,
        limit: 1,
    };
    let page = store.list(&query).await?;
    Ok(page.items.into_iter().find(|r| r.deleted_at.is_none()))
}

#[async_trait]
impl TargetResolver for WorkloadTargets {
    async fn bind(
        &self,
        store: &dyn Store,
        rec: &Record,
        att: &pb::ExternalIpAttachment,
    ) -> Result<Binding, StoreError> {
        let spec = att.spec.clone().unwrap_or_default();
        let Some((kind, key)) = target_of(&spec) else {
            return Ok(Binding::Unchanged);
        };
        if let Some(target) = store
            .get(key)
            .await?
            .filter(|r| r.kind == kind && r.tenant == rec.tenant)
        {
            let name = target.name.clone().unwrap_or_default();
            let recorded = att.status.as_ref().map(|s| s.target_name.as_str());
            return Ok(if recorded == Some(name.as_str()) {
                Binding::Unchanged
            } else {
                Binding::Bound {
                    id: target.id,
                    name,
                }
            });
        }
        if rec.labels.contains_key(AUTO_PROVISIONED_FOR_LABEL) {
            return Ok(Binding::Unchanged);
        }
        let name = if osac_model::refs::is_object_id(key) {
            att.status
                .as_ref()
                .map(|s| s.target_name.clone())
                .unwrap_or_default()
        } else {
            key.to_string()
        };
        if name.is_empty() {
            return Ok(Binding::Unchanged);
        }
        if let Some(found) = named(store, kind, &rec.tenant, &name).await? {
            return Ok(Binding::Bound { id: found.id, name });
        }
        let message = format!("waiting for {kind} '{name}' to be created in this tenant");
        Ok(Binding::Awaiting { name, message })
    }

    async fn resolve(
        &self,
        store: &dyn Store,
        spec: &pb::ExternalIpAttachmentSpec,
    ) -> Result<Target, StoreError> {
        let Some((kind, id)) = target_of(spec) else {
            return Ok(Target::Waiting(
                "waiting for a target (no compute_instance, cluster or baremetal_instance set)"
                    .to_string(),
            ));
        };
        let Some(rec) = store.get(id).await?.filter(|r| r.kind == kind) else {
            return Ok(Target::Waiting(format!(
                "target {kind} '{id}' no longer exists"
            )));
        };
        if rec.deleted_at.is_some() {
            return Ok(Target::Waiting(format!(
                "target {} is being deleted",
                describe(&rec)
            )));
        }
        let (ip, waiting_for) = match kind {
            Kind::ComputeInstance => {
                let vm: pb::ComputeInstance = rec.decode()?;
                let ip = vm.status.map(|s| s.internal_ip_address).unwrap_or_default();
                (ip, "a primary IP")
            }
            Kind::BareMetalInstance => {
                let bm: pb::BareMetalInstance = rec.decode()?;
                let ip = bm.status.map(|s| s.internal_ip_address).unwrap_or_default();
                (ip, "a primary IP")
            }
            _ => {
                let c: pb::Cluster = rec.decode()?;
                let ingress =
                    spec.target_endpoint == pb::ExternalIpAttachmentEndpoint::Ingress as i32;
                let what = if ingress {
                    "an ingress VIP"
                } else {
                    "an API VIP"
                };
                let status = c.status.unwrap_or_default();
                let ready = status.state == pb::ClusterState::Ready as i32;
                let ip = match (ready, ingress) {
                    (false, _) => String::new(),
                    (true, true) => status.ingress_endpoint,
                    (true, false) => status.api_endpoint,
                };
                (ip, what)
            }
        };
        let waiting = || {
            Target::Waiting(format!(
                "waiting for {} to have {waiting_for}",
                describe(&rec)
            ))
        };
        let Ok(ip) = ip.parse::<IpAddr>() else {
            return Ok(waiting());
        };
        let Some(virtual_network) = virtual_network(store, &rec).await? else {
            return Ok(waiting());
        };
        Ok(Target::Known {
            ip,
            virtual_network,
        })
    }
}
