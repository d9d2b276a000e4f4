//! Cluster: one network attachment (subnet READY with a VIP block, SGs of the same network),
//! node sets of bare-metal host types with their `fabric_interface` resolved and stored; needs
//! a k8s manager (the VIP pool). Only the attachment's security groups (and metadata) change
//! afterwards.

use osac_model::{Kind, kinds, pb, validate};
use osac_store::Record;
use serde_json::Value;

use super::workload::{self, AttachmentInput};
use crate::error::{ApiError, ApiResult};
use crate::object::{body_of, to_json};
use crate::request::RequestCtx;

const FIELD: &str = "spec.network_attachment";

pub async fn create(cx: &mut RequestCtx<'_>, mut c: pb::Cluster) -> ApiResult<Value> {
    kinds::cluster::validate(&c)?;
    let spec = c.spec.get_or_insert_with(Default::default);
    let mut names: Vec<String> = spec.node_sets.keys().cloned().collect();
    names.sort();
    let mut type_refs = Vec::new();
    for name in &names {
        let Some(ns) = spec.node_sets.get_mut(name) else {
            continue;
        };
        let field = format!("spec.node_sets.{name}.host_type");
        let ht_rec = super::resolve(cx, Kind::HostType, &field, &ns.host_type, false).await?;
        let ht: pb::HostType = ht_rec.decode()?;
        ns.fabric_interface = kinds::cluster::node_set_interface(name, &ht, ht_rec.label())?;
        ns.host_type = ht_rec.id.clone();
        type_refs.push((ht_rec.id, field));
    }
    let att = spec.network_attachment.get_or_insert_with(Default::default);
    if att.subnet.is_empty() {
        let d = workload::default_attachment(cx).await?;
        att.subnet = d.subnet;
        if att.security_groups.is_empty() {
            att.security_groups = d.security_groups;
        }
    }
    let net = workload::resolve_attachments(
        cx,
        &[AttachmentInput {
            field: FIELD.to_string(),
            subnet: &att.subnet,
            security_groups: &att.security_groups,
        }],
    )
    .await?;
    workload::require_k8s(cx, &net.vn, "clusters", ": there is no VIP pool").await?;
    let subnet_id = net.subnets.into_iter().next().unwrap_or_default();
    if let Some(sn) = cx.tx.get(&subnet_id).await?
        && sn
            .body
            .pointer("/status/vip_cidr")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    {
        return Err(ApiError::precondition(format!(
            "{FIELD}.subnet: Subnet '{}' has no VIP block (status.vip_cidr: it is IPv6-only or too small), so a cluster's API and ingress VIPs cannot be allocated",
            sn.label()
        )));
    }
    att.subnet = subnet_id;
    att.security_groups = net.security_groups.into_iter().next().unwrap_or_default();
    workload::lock_refs(cx, type_refs).await?;
    Ok(body_of(&to_json(&c)?))
}

/// Only the attachment's security groups (re-validated) and metadata may change.
pub async fn update(
    cx: &mut RequestCtx<'_>,
    current: &Record,
    c: &mut pb::Cluster,
) -> ApiResult<()> {
    validate::metadata(c.metadata.as_ref())?;
    let old: pb::Cluster = current.decode()?;
    let subnet = old
        .spec
        .and_then(|s| s.network_attachment)
        .map(|a| a.subnet)
        .unwrap_or_default();
    let vn = workload::stored_vn(cx, &subnet).await?;
    let field = format!("{FIELD}.security_groups");
    if let Some(att) = c.spec.as_mut().and_then(|s| s.network_attachment.as_mut()) {
        att.security_groups =
            workload::resolve_security_groups(cx, &field, &att.security_groups, &vn).await?;
        let refs = att
            .security_groups
            .iter()
            .enumerate()
            .map(|(j, id)| (id.clone(), format!("{field}[{j}]")))
            .collect();
        workload::lock_refs(cx, refs).await?;
    }
    Ok(())
}
