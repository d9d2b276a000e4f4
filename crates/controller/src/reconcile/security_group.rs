//! SecurityGroup: the fabric gets the full desired rule set; a rule change (a new spec hash)
//! re-applies it. Delete removes the group (DELETE_FAILED on a permanent failure).

use osac_backends::{
    ApplySecurityGroupRequest, DeleteSecurityGroupRequest, OpError, Protocol, SecurityRule,
};
use osac_model::pb;
use osac_store::Record;

use super::finalizer::{self, Cleanup};
use super::virtual_network::{ready_virtual_network, undo_in_network};
use super::{
    Action, ReconcileCtx, ReconcileError, Resolved, decode, op_failed, settled, succeeded, waiting,
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
    finalizer::reconcile(ctx, rec, |rec| apply(ctx, rec), |rec| cleanup(ctx, rec)).await
}

/// The fabric removes the group.
async fn cleanup(ctx: &ReconcileCtx, rec: Record) -> Result<Cleanup, ReconcileError> {
    let security_group_id = rec.id.clone();
    undo_in_network::<pb::SecurityGroup, _, _>(ctx, rec, |fabric, virtual_network_id| async move {
        let request = DeleteSecurityGroupRequest {
            security_group_id,
            virtual_network_id,
        };
        fabric.delete_security_group(&request).await
    })
    .await
}

/// Once the VirtualNetwork is READY, the fabric gets the full rule set (again after a rule
/// change).
async fn apply(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    let sg: pb::SecurityGroup = decode(&rec)?;
    let spec = sg.spec.clone().unwrap_or_default();
    if settled(&rec, &sg) {
        return Ok(Action::Done);
    }
    let vn = match ready_virtual_network(ctx, &spec.virtual_network).await? {
        Resolved::Ready(vn) => vn,
        Resolved::Wait(m) => return waiting(ctx, &rec, sg, m).await,
        Resolved::Failed(e) => return op_failed(ctx, &rec, sg, e).await,
    };
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
