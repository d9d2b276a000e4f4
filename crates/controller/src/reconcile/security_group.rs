//! SecurityGroup: the fabric gets the full desired rule set; a rule change (a new spec hash)
//! re-applies it. Delete removes the group (DELETE_FAILED on a permanent failure).

use osac_backends::{
    ApplySecurityGroupRequest, DeleteSecurityGroupRequest, OpError, Protocol, SecurityRule,
};
use osac_model::pb;
use osac_store::Record;

use super::{
    Action, Object, ReconcileCtx, ReconcileError, decode, delete_failed, describe,
    failed_dependency, finalize, has_finalizer, op_failed, settled, succeeded, vn_state, waiting,
};

super::object!(pb::SecurityGroup, pb::SecurityGroupStatus,
    pending: pb::SecurityGroupState::Pending, ready: pb::SecurityGroupState::Ready,
    failed: pb::SecurityGroupState::Failed, deleting: pb::SecurityGroupState::Deleting,
    delete_failed: Some(pb::SecurityGroupState::DeleteFailed as i32));

/// Converts a stored rule to the manager contract's shape.
pub(crate) fn to_fabric_rule(r: &pb::SecurityRule) -> Result<SecurityRule, String> {
    let protocol = match pb::Protocol::try_from(r.protocol) {
        Ok(pb::Protocol::Tcp) => Protocol::Tcp,
        Ok(pb::Protocol::Udp) => Protocol::Udp,
        Ok(pb::Protocol::Icmp) => Protocol::Icmp,
        Ok(pb::Protocol::All) => Protocol::All,
        _ => return Err(format!("unsupported protocol {}", r.protocol)),
    };
    let port = |p: i32| u16::try_from(p).map_err(|_| format!("port {p} is outside 0–65535"));
    let (from, to) = (port(r.port_from)?, port(r.port_to)?);
    let (port_from, port_to) = match (from, to) {
        (0, 0) => (None, None),
        (f, 0) => (Some(f), Some(f)),
        (0, t) => (Some(t), Some(t)),
        (f, t) => (Some(f), Some(t)),
    };
    let cidr = osac_model::validate::rule_peer(r).map_err(|e| e.to_string())?;
    Ok(SecurityRule {
        protocol,
        port_from,
        port_to,
        cidr,
    })
}

fn to_fabric_rules(dir: &str, rules: &[pb::SecurityRule]) -> Result<Vec<SecurityRule>, OpError> {
    rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            to_fabric_rule(r).map_err(|m| OpError::permanent(format!("spec.{dir}[{i}]: {m}")))
        })
        .collect()
}

pub(crate) async fn reconcile(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    let sg: pb::SecurityGroup = decode(&rec)?;
    let spec = sg.spec.clone().unwrap_or_default();
    if rec.deleted_at.is_some() {
        if !has_finalizer(&rec) {
            return Ok(Action::Done);
        }
        let deleted = async {
            let (_, m) = ctx
                .dispatcher
                .for_virtual_network(&*ctx.store, &spec.virtual_network)
                .await?;
            m.fabric
                .delete_security_group(&DeleteSecurityGroupRequest {
                    security_group_id: rec.id.clone(),
                    virtual_network_id: spec.virtual_network.clone(),
                })
                .await
        }
        .await;
        return match deleted {
            Ok(()) => finalize(ctx, &rec).await,
            Err(e) => delete_failed(ctx, &rec, sg, e).await,
        };
    }
    if settled(&rec, &sg) {
        return Ok(Action::Done);
    }
    let Some(vn) = ctx.store.get(&spec.virtual_network).await? else {
        let m = format!(
            "waiting for VirtualNetwork '{}' to exist",
            spec.virtual_network
        );
        return waiting(ctx, &rec, sg, m).await;
    };
    if let Some(e) = failed_dependency(&vn) {
        return op_failed(ctx, &rec, sg, e).await;
    }
    if vn_state(&vn)? != pb::VirtualNetwork::READY {
        let m = format!("waiting for {} to be READY", describe(&vn));
        return waiting(ctx, &rec, sg, m).await;
    }
    let applied = async {
        let request = ApplySecurityGroupRequest {
            security_group_id: rec.id.clone(),
            virtual_network_id: vn.id.clone(),
            ingress: to_fabric_rules("ingress", &spec.ingress)?,
            egress: to_fabric_rules("egress", &spec.egress)?,
        };
        let (_, m) = ctx
            .dispatcher
            .for_virtual_network(&*ctx.store, &vn.id)
            .await?;
        m.fabric.apply_security_group(&request).await
    }
    .await;
    match applied {
        Ok(()) => succeeded(ctx, &rec, sg).await,
        Err(e) => op_failed(ctx, &rec, sg, e).await,
    }
}
