//! ExternalIPAttachment (inbound DNAT): external IP ALLOCATED and free, exactly one target,
//! `target_endpoint` only for clusters. Workload targets arrive with the workloads release:
//! until then a create that passes every other rule is refused with FAILED_PRECONDITION.

use osac_model::validate::AttachmentTarget;
use osac_model::{Kind, pb, validate};
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::object::{body_of, parse, to_json};
use crate::service::Cx;

pub async fn create(cx: &mut Cx<'_>, obj: &Value) -> ApiResult<Value> {
    let mut a: pb::ExternalIpAttachment = parse(Kind::ExternalIpAttachment, obj)?;
    let target = validate::external_ip_attachment(&a)?;
    let spec = a.spec.get_or_insert_with(Default::default);
    let eip = super::external_ip::require_free(cx, &spec.external_ip).await?;
    spec.external_ip = eip.id.clone();
    let (field, what) = match target {
        AttachmentTarget::ComputeInstance(_) => ("spec.compute_instance", "compute instances"),
        AttachmentTarget::Cluster(..) => ("spec.cluster", "clusters"),
        AttachmentTarget::BaremetalInstance(_) => {
            ("spec.baremetal_instance", "bare-metal instances")
        }
    };
    if !workload_targets_supported() {
        return Err(ApiError::precondition(format!(
            "{field}: attaching external IPs to {what} is not supported yet (workloads arrive in the next release)"
        )));
    }
    Ok(body_of(&to_json(&a)?))
}

pub fn update(body: &mut Value) -> ApiResult<()> {
    let a: pb::ExternalIpAttachment = parse(Kind::ExternalIpAttachment, body)?;
    validate::metadata(a.metadata.as_ref())?;
    Ok(())
}

/// Workload kinds are not part of this release; the seam for the next one.
const fn workload_targets_supported() -> bool {
    false
}
