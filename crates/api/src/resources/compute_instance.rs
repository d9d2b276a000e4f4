//! ComputeInstance (VM): network attachments resolved and stored with ids and the primary flag;
//! the deprecated `network_attachments` input is converted. Only the security groups of an
//! attachment (and metadata) change afterwards. VMs need a k8s manager (hosting clusters).

use osac_model::{kinds, pb, validate};
use osac_store::Record;
use serde_json::Value;

use super::workload;
use crate::error::{ApiError, ApiResult};
use crate::object::{body_of, to_json};
use crate::request::RequestCtx;

const FIELD: &str = "spec.compute_network_attachments";

pub async fn create(cx: &mut RequestCtx<'_>, mut ci: pb::ComputeInstance) -> ApiResult<Value> {
    validate::metadata(ci.metadata.as_ref())?;
    let spec = ci.spec.get_or_insert_with(Default::default);
    let mut atts = kinds::compute_instance::network_attachments(spec)?;
    if atts.is_empty() {
        let d = workload::default_attachment(cx).await?;
        atts.push(pb::ComputeNetworkAttachment {
            subnet: d.subnet,
            security_groups: d.security_groups,
            primary: true,
        });
    }
    let vn = workload::resolve_machine_attachments(cx, FIELD, &mut atts).await?;
    workload::require_k8s(cx, &vn, "virtual machines", "").await?;
    spec.compute_network_attachments = atts;
    spec.network_attachments.clear();
    Ok(body_of(&to_json(&ci)?))
}

/// Only the security groups of the attachments (re-validated) and metadata may change.
pub async fn update(
    cx: &mut RequestCtx<'_>,
    current: &Record,
    ci: &mut pb::ComputeInstance,
) -> ApiResult<()> {
    validate::metadata(ci.metadata.as_ref())?;
    let spec = ci.spec.get_or_insert_with(Default::default);
    if !spec.network_attachments.is_empty() {
        return Err(ApiError::invalid(
            "spec.network_attachments: the deprecated form is accepted at creation only; change spec.compute_network_attachments[].security_groups instead",
        ));
    }
    let old: pb::ComputeInstance = current.decode()?;
    let stored = old.spec.unwrap_or_default().compute_network_attachments;
    workload::update_machine_security_groups(
        cx,
        FIELD,
        &stored,
        &mut spec.compute_network_attachments,
    )
    .await?;
    Ok(())
}
