//! ComputeInstance (VM): network attachments resolved and stored with ids and the primary flag;
//! the deprecated `network_attachments` input is converted. Only the security groups of an
//! attachment (and metadata) change afterwards. VMs need a k8s manager (hosting clusters).

use osac_model::{Kind, kinds, pb, validate};
use osac_store::Record;
use serde_json::Value;

use super::workload::{self, AttachmentInput};
use crate::error::{ApiError, ApiResult};
use crate::object::{body_of, parse, to_json};
use crate::service::RequestCtx;

const FIELD: &str = "spec.compute_network_attachments";

pub async fn create(cx: &mut RequestCtx<'_>, obj: &Value) -> ApiResult<Value> {
    let mut ci: pb::ComputeInstance = parse(Kind::ComputeInstance, obj)?;
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
    let inputs: Vec<AttachmentInput<'_>> = atts
        .iter()
        .enumerate()
        .map(|(i, a)| AttachmentInput {
            field: format!("{FIELD}[{i}]"),
            subnet: &a.subnet,
            security_groups: &a.security_groups,
        })
        .collect();
    let net = workload::resolve_attachments(cx, &inputs).await?;
    workload::require_k8s(cx, &net.vn, "virtual machines", "").await?;
    for ((a, subnet), sgs) in atts.iter_mut().zip(net.subnets).zip(net.security_groups) {
        a.subnet = subnet;
        a.security_groups = sgs;
    }
    spec.compute_network_attachments = atts;
    spec.network_attachments.clear();
    Ok(body_of(&to_json(&ci)?))
}

/// Only the security groups of the attachments (re-validated) and metadata may change.
pub async fn update(cx: &mut RequestCtx<'_>, current: &Record, body: &mut Value) -> ApiResult<()> {
    let mut ci: pb::ComputeInstance = parse(Kind::ComputeInstance, body)?;
    validate::metadata(ci.metadata.as_ref())?;
    let spec = ci.spec.get_or_insert_with(Default::default);
    if !spec.network_attachments.is_empty() {
        return Err(ApiError::invalid(
            "spec.network_attachments: the deprecated form is accepted at creation only; change spec.compute_network_attachments[].security_groups instead",
        ));
    }
    let old: pb::ComputeInstance = current.decode()?;
    let first = old
        .spec
        .as_ref()
        .and_then(|s| s.compute_network_attachments.first())
        .map(|a| a.subnet.clone())
        .unwrap_or_default();
    let groups = spec
        .compute_network_attachments
        .iter_mut()
        .map(|a| &mut a.security_groups)
        .collect();
    workload::update_security_groups(cx, FIELD, &first, groups).await?;
    *body = body_of(&to_json(&ci)?);
    Ok(())
}
