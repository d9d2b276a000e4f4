//! ExternalIPAttachment (inbound DNAT): external IP ALLOCATED and free, exactly one target,
//! `target_endpoint` only for clusters. The target workload must exist in the writer's tenant
//! (another tenant's ⇒ NOT_FOUND) and not be deleting; its id is stored. It may not have an IP
//! yet: the attachment then stays PENDING until it has one (docs/workloads.md).

use osac_model::kinds::external_ip_attachment::AttachmentTarget;
use osac_model::{Kind, kinds, pb, validate};
use serde_json::Value;

use crate::error::ApiResult;
use crate::object::{body_of, to_json};
use crate::request::RequestCtx;

pub async fn create(cx: &mut RequestCtx<'_>, mut a: pb::ExternalIpAttachment) -> ApiResult<Value> {
    let target = kinds::external_ip_attachment::validate(&a)?;
    let spec = a.spec.get_or_insert_with(Default::default);
    let eip = super::external_ip::require_free(cx, &spec.external_ip).await?;
    spec.external_ip = eip.id.clone();
    let (kind, field, key) = match &target {
        AttachmentTarget::ComputeInstance(k) => (Kind::ComputeInstance, "spec.compute_instance", k),
        AttachmentTarget::Cluster(k, _) => (Kind::Cluster, "spec.cluster", k),
        AttachmentTarget::BaremetalInstance(k) => {
            (Kind::BareMetalInstance, "spec.baremetal_instance", k)
        }
    };
    let workload = super::resolve(cx, kind, field, key, true).await?;
    match kind {
        Kind::ComputeInstance => spec.compute_instance = workload.id,
        Kind::Cluster => spec.cluster = workload.id,
        _ => spec.baremetal_instance = workload.id,
    }
    Ok(body_of(&to_json(&a)?))
}

pub fn update(a: &pb::ExternalIpAttachment) -> ApiResult<()> {
    validate::metadata(a.metadata.as_ref())?;
    Ok(())
}
