//! ExternalIPAttachment (inbound DNAT): external IP ALLOCATED and free, exactly one target,
//! `target_endpoint` only for clusters. A target that exists in the writer's tenant must not be
//! deleting; its id is stored. A target *name* that no workload of the writer's tenant has is a
//! forward reference: the name is stored and the controller binds the attachment when a
//! workload of that kind and name is created there. Only names may be forward references: an
//! id that does not exist (in this tenant) is NOT_FOUND. The target may not have an IP yet: the
//! attachment then stays PENDING until it has one (docs/workloads.md).

use osac_model::kinds::external_ip_attachment::AttachmentTarget;
use osac_model::{Kind, kinds, pb, validate};
use serde_json::{Value, json};

use crate::error::{ApiResult, Code};
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
    let (stored, target_name) = match super::resolve(cx, kind, field, key, true).await {
        Ok(workload) => (workload.id.clone(), workload.name.unwrap_or_default()),
        Err(e) if e.code == Code::NotFound && !osac_model::refs::is_object_id(key) => {
            // A forward reference: kept as the name, waited for by the controller.
            osac_model::labels::check_name(field, key)?;
            (key.clone(), key.clone())
        }
        Err(e) => return Err(e),
    };
    match kind {
        Kind::ComputeInstance => spec.compute_instance = stored,
        Kind::Cluster => spec.cluster = stored,
        _ => spec.baremetal_instance = stored,
    }
    cx.initial_status = Some(json!({ "target_name": target_name }));
    Ok(body_of(&to_json(&a)?))
}

pub fn update(a: &pb::ExternalIpAttachment) -> ApiResult<()> {
    validate::metadata(a.metadata.as_ref())?;
    Ok(())
}
