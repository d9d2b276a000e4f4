//! VirtualNetwork: the fabric creates the isolated router; delete removes it.

use osac_backends::{CreateVirtualNetworkRequest, DeleteVirtualNetworkRequest, OpError};
use osac_model::pb;
use osac_store::Record;

use super::{
    Action, ReconcileCtx, ReconcileError, cidrs, decode, delete_failed, finalize, has_finalizer,
    op_failed, settled, succeeded,
};
use crate::dispatch::network_class_of;

super::object!(pb::VirtualNetwork, pb::VirtualNetworkStatus,
    pending: pb::VirtualNetworkState::Pending, ready: pb::VirtualNetworkState::Ready,
    failed: pb::VirtualNetworkState::Failed, deleting: pb::VirtualNetworkState::Deleting,
    delete_failed: None);

pub(crate) async fn reconcile(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    let vn: pb::VirtualNetwork = decode(&rec)?;
    let class_id = network_class_of(&rec);
    if rec.deleted_at.is_some() {
        if !has_finalizer(&rec) {
            return Ok(Action::Done);
        }
        let deleted = async {
            let m = ctx.dispatcher.for_class(&*ctx.store, &class_id).await?;
            m.fabric
                .delete_virtual_network(&DeleteVirtualNetworkRequest {
                    virtual_network_id: rec.id.clone(),
                })
                .await
        }
        .await;
        return match deleted {
            Ok(()) => finalize(ctx, &rec).await,
            Err(e) => delete_failed(ctx, &rec, vn, e).await,
        };
    }
    if settled(&rec, &vn) {
        return Ok(Action::Done);
    }
    let spec = vn.spec.clone().unwrap_or_default();
    let created: Result<(), OpError> = async {
        let nets = cidrs("VirtualNetwork", &spec.ipv4_cidr, &spec.ipv6_cidr)?;
        let m = ctx.dispatcher.for_class(&*ctx.store, &class_id).await?;
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
