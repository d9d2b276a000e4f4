//! `Reachability.Explain` (gRPC) and `POST …/reachability:explain` (REST): loads one tenant's
//! network objects from the store and answers with the pure explainer of `osac_model`, so it
//! works with any manager. Tenant callers explain their own tenant; provider admins name one
//! (`tenant`, required on the private API). Names resolve within that tenant only: another
//! tenant's object is NOT_FOUND. The tenant's network is read once and kept until one of its
//! objects changes ([`snapshots`]).

pub mod snapshots;

use std::sync::Arc;

use osac_model::pb;
use osac_model::reachability::{self, ExplainError, IndexedNetwork, Network};
use osac_model::{Kind, Scope};
use osac_store::{ListQuery, Record};
use serde::de::DeserializeOwned;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::service::Service;

/// A network object of the snapshot: decoded from its record's body, then given the record's
/// id, name, labels and annotations (the body holds none of them; the explainer reads the
/// controllers' internal annotations, such as a VM's hosting cluster).
trait Stored: DeserializeOwned {
    fn set_identity(&mut self, id: String, metadata: pb::Metadata);
}

macro_rules! stored {
    ($($t:ty),* $(,)?) => {
        $(impl Stored for $t {
            fn set_identity(&mut self, id: String, metadata: pb::Metadata) {
                self.id = id;
                self.metadata = Some(metadata);
            }
        })*
    };
}

stored!(
    pb::VirtualNetwork,
    pb::Subnet,
    pb::SecurityGroup,
    pb::ComputeInstance,
    pb::BareMetalInstance,
    pb::Cluster,
    pb::ExternalIp,
    pb::ExternalIpAttachment,
    pb::NatGateway,
);

fn decode<T: Stored>(rec: &Record) -> ApiResult<T> {
    let mut v: T = rec.decode()?;
    v.set_identity(
        rec.id.clone(),
        pb::Metadata {
            name: rec.name.clone().unwrap_or_default(),
            tenant: rec.tenant.clone(),
            labels: rec.labels.clone().into_iter().collect(),
            annotations: rec.annotations.clone().into_iter().collect(),
            ..Default::default()
        },
    );
    Ok(v)
}

impl Service {
    /// Every live object of `kind` owned by `tenant`, decoded.
    async fn tenant_objects<T: Stored>(&self, kind: Kind, tenant: &str) -> ApiResult<Vec<T>> {
        let mut out = Vec::new();
        let mut offset = 0i64;
        loop {
            let page = self
                .store
                .list(&ListQuery {
                    tenant: Some(tenant.to_string()),
                    offset,
                    ..ListQuery::all(kind)
                })
                .await?;
            let n = page.items.len();
            for rec in page.items.iter().filter(|r| r.deleted_at.is_none()) {
                out.push(decode(rec)?);
            }
            offset += i64::try_from(n).unwrap_or(i64::MAX);
            if n == 0 || offset >= page.total {
                return Ok(out);
            }
        }
    }

    /// The network snapshot of one tenant: the kept one, or read from the store (and kept).
    pub async fn tenant_network(&self, tenant: &str) -> ApiResult<Arc<IndexedNetwork>> {
        let epoch = match self.network_snapshots.get(tenant) {
            Ok(network) => return Ok(network),
            Err(epoch) => epoch,
        };
        let network = Arc::new(IndexedNetwork::new(self.load_tenant_network(tenant).await?));
        self.network_snapshots
            .offer(tenant, Arc::clone(&network), epoch);
        Ok(network)
    }

    /// Reads one tenant's network objects from the store.
    async fn load_tenant_network(&self, tenant: &str) -> ApiResult<Network> {
        Ok(Network {
            virtual_networks: self.tenant_objects(Kind::VirtualNetwork, tenant).await?,
            subnets: self.tenant_objects(Kind::Subnet, tenant).await?,
            security_groups: self.tenant_objects(Kind::SecurityGroup, tenant).await?,
            compute_instances: self.tenant_objects(Kind::ComputeInstance, tenant).await?,
            baremetal_instances: self.tenant_objects(Kind::BareMetalInstance, tenant).await?,
            clusters: self.tenant_objects(Kind::Cluster, tenant).await?,
            external_ips: self.tenant_objects(Kind::ExternalIp, tenant).await?,
            external_ip_attachments: self
                .tenant_objects(Kind::ExternalIpAttachment, tenant)
                .await?,
            nat_gateways: self.tenant_objects(Kind::NatGateway, tenant).await?,
            transit_prefixes: Vec::new(),
        })
    }

    /// Answers a reachability question on the tenant (`Scope::Tenant`: the caller's own) or
    /// provider (`Scope::Provider`: `tenant` names it) surface.
    pub async fn explain_reachability(
        &self,
        caller: &Caller,
        surface: Scope,
        req: &pb::ExplainReachabilityRequest,
    ) -> ApiResult<pb::ExplainReachabilityResponse> {
        let tenant = match surface {
            Scope::Provider => {
                crate::rest::require_provider(caller)?;
                if req.tenant.trim().is_empty() {
                    return Err(ApiError::invalid(
                        "tenant: is required on the private API (the tenant whose network to explain)",
                    ));
                }
                self.live_tenant(req.tenant.trim()).await?.1
            }
            Scope::Tenant => {
                let Some(own) = caller.tenant.clone() else {
                    return Err(ApiError::denied(
                        "a provider admin explains a tenant's network through the private API (POST /api/private/v1/reachability:explain with `tenant`)",
                    ));
                };
                if !req.tenant.is_empty() && req.tenant != own {
                    return Err(ApiError::invalid(
                        "tenant: is for provider callers on the private API; leave it empty",
                    ));
                }
                own
            }
        };
        let question = reachability::question_from_request(req)?;
        let network = self.tenant_network(&tenant).await?;
        match network.explain(&question) {
            Ok(e) => Ok(reachability::to_response(&e)),
            Err(ExplainError::NotFound { field, kind, key }) => Err(ApiError::not_found(format!(
                "{field}: {} '{key}' does not exist",
                kind.display_name()
            ))),
            Err(ExplainError::Invalid(i)) => Err(i.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use osac_model::labels::HOSTING_CLUSTER_ANNOTATION;

    #[test]
    fn a_decoded_vm_keeps_its_hosting_cluster() {
        // The snapshot keeps a VM's metadata as stored: name, labels and annotations such
        // as the hosting cluster it runs on.
        let mut rec = Record::new(
            Kind::ComputeInstance,
            "t1",
            serde_json::json!({"spec": {"template": "small"}}),
        );
        rec.name = Some("vm1".into());
        rec.annotations
            .insert(HOSTING_CLUSTER_ANNOTATION.into(), "hosting-b".into());
        rec.labels.insert("app".into(), "web".into());
        let vm: pb::ComputeInstance = decode(&rec).unwrap();
        let meta = vm.metadata.unwrap();
        assert_eq!(meta.name, "vm1");
        assert_eq!(
            meta.annotations
                .get(HOSTING_CLUSTER_ANNOTATION)
                .map(String::as_str),
            Some("hosting-b")
        );
        assert_eq!(meta.labels.get("app").map(String::as_str), Some("web"));
    }
}
