//! VirtualNetwork: the fabric creates the isolated router; delete removes it.

use std::future::Future;
use std::sync::Arc;

use osac_backends::{
    CreateVirtualNetworkRequest, DeleteVirtualNetworkRequest, FabricManager, OpError,
};
use osac_model::pb;
use osac_store::Record;

use super::finalizer::{self, Cleanup};
use super::{
    Action, Object, ReconcileCtx, ReconcileError, Resolved, cidrs, decode, describe,
    failed_dependency, op_failed, settled, succeeded,
};
use crate::dispatch::network_class_of;

super::object!(pb::VirtualNetwork, pb::VirtualNetworkStatus,
    pending: pb::VirtualNetworkState::Pending, ready: pb::VirtualNetworkState::Ready,
    failed: pb::VirtualNetworkState::Failed, deleting: pb::VirtualNetworkState::Deleting,
    delete_failed: None);

pub(crate) async fn reconcile(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    finalizer::reconcile(ctx, rec, |rec| apply(ctx, rec), |rec| cleanup(ctx, rec)).await
}

/// The fabric creates the VirtualNetwork's router once per spec.
async fn apply(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    let vn: pb::VirtualNetwork = decode(&rec)?;
    if settled(&rec, &vn) {
        return Ok(Action::Done);
    }
    let spec = vn.spec.clone().unwrap_or_default();
    let created: Result<(), OpError> = async {
        let nets = cidrs("VirtualNetwork", &spec.ipv4_cidr, &spec.ipv6_cidr)?;
        let m = ctx
            .dispatcher
            .for_class(&*ctx.store, &network_class_of(&rec))
            .await?;
        m.fabric
            .create_virtual_network(&CreateVirtualNetworkRequest {
                virtual_network_id: rec.id.clone(),
                tenant: rec.tenant.clone(),
                ipv4_cidr: nets.v4,
                ipv6_cidr: nets.v6,
            })
            .await
    }
    .await;
    match created {
        Ok(()) => succeeded(ctx, &rec, vn).await,
        Err(e) => op_failed(ctx, &rec, vn, e).await,
    }
}

/// The fabric removes the router.
async fn cleanup(ctx: &ReconcileCtx, rec: Record) -> Result<Cleanup, ReconcileError> {
    let vn: pb::VirtualNetwork = decode(&rec)?;
    let deleted = async {
        let m = ctx
            .dispatcher
            .for_class(&*ctx.store, &network_class_of(&rec))
            .await?;
        m.fabric
            .delete_virtual_network(&DeleteVirtualNetworkRequest {
                virtual_network_id: rec.id.clone(),
            })
            .await
    }
    .await;
    finalizer::undone(ctx, rec, vn, deleted).await
}

/// The VirtualNetwork `vn_id` once it is READY: what a Subnet or SecurityGroup waits for
/// before the fabric can program it inside the network. A FAILED network fails its dependent.
pub(crate) async fn ready_virtual_network(
    ctx: &ReconcileCtx,
    vn_id: &str,
) -> Result<Resolved<Record>, ReconcileError> {
    let Some(vn) = ctx.store.get(vn_id).await? else {
        return Ok(Resolved::Wait(format!(
            "waiting for VirtualNetwork '{vn_id}' to exist"
        )));
    };
    if let Some(e) = failed_dependency(&vn) {
        return Ok(Resolved::Failed(e));
    }
    if vn_state(&vn)? != pb::VirtualNetwork::READY {
        return Ok(Resolved::Wait(format!(
            "waiting for {} to be READY",
            describe(&vn)
        )));
    }
    Ok(Resolved::Ready(vn))
}

/// The cleanup of an object `T` the fabric programmed inside the VirtualNetwork its
/// `spec.virtual_network` names (a SecurityGroup, a NATGateway): `undo` with that network's
/// fabric manager and the network's id, then the finalizer's outcome ([`finalizer::undone`]).
pub(crate) async fn undo_in_network<T, F, Fut>(
    ctx: &ReconcileCtx,
    rec: Record,
    undo: F,
) -> Result<Cleanup, ReconcileError>
where
    T: Object,
    F: FnOnce(Arc<dyn FabricManager>, String) -> Fut,
    Fut: Future<Output = Result<(), OpError>>,
{
    let obj: T = decode(&rec)?;
    let vn_id = osac_model::refs::string_at(&rec.body, "spec.virtual_network")
        .unwrap_or_default()
        .to_string();
    let undone = async {
        let (_, m) = ctx
            .dispatcher
            .for_virtual_network(&*ctx.store, &vn_id)
            .await?;
        undo(m.fabric, vn_id).await
    }
    .await;
    finalizer::undone(ctx, rec, obj, undone).await
}

/// The state of a VirtualNetwork record.
pub(crate) fn vn_state(vn: &Record) -> Result<i32, ReconcileError> {
    let v: pb::VirtualNetwork = decode(vn)?;
    Ok(v.status.map_or(0, |s| s.state))
}
