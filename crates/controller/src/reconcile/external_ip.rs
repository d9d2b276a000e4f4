//! ExternalIP: the fabric allocates the address (capacity was reserved by the API), the
//! controller reports it, keeps `status.attached` right, and on delete releases the address and
//! gives the capacity back in the same transaction that removes the row (the pool's counters
//! are in `osac_store::pool`).

use std::net::IpAddr;

use osac_backends::{AllocateExternalIpRequest, OpError, ReleaseExternalIpRequest};
use osac_model::{Kind, pb};
use osac_store::Record;
use osac_store::pool::{adjust_pool, pool_cidrs};

use super::finalizer::{self, Cleanup};
use super::{
    Action, Object, ReconcileCtx, ReconcileError, decode, op_failed, save, settled, succeeded,
};

super::object!(pb::ExternalIp, pb::ExternalIpStatus,
    pending: pb::ExternalIpState::Pending, ready: pb::ExternalIpState::Allocated,
    failed: pb::ExternalIpState::Failed, deleting: pb::ExternalIpState::Deleting,
    delete_failed: None);

/// The pool an ExternalIP draws from: `spec.pool` (the API stores its automatic choice there),
/// else `status.pool`.
fn pool_of(eip: &pb::ExternalIp) -> String {
    let spec = eip.spec.as_ref().map_or("", |s| s.pool.as_str());
    if spec.is_empty() {
        eip.status
            .as_ref()
            .map_or("", |s| s.pool.as_str())
            .to_string()
    } else {
        spec.to_string()
    }
}

/// Whether a live (not deleted) NATGateway or ExternalIPAttachment consumes the ExternalIP.
pub(crate) async fn is_attached(ctx: &ReconcileCtx, eip_id: &str) -> Result<bool, ReconcileError> {
    for r in ctx.store.referrers(eip_id).await? {
        let consumer = matches!(r.source_kind, Kind::NatGateway | Kind::ExternalIpAttachment);
        if consumer
            && r.field == "spec.external_ip"
            && let Some(src) = ctx.store.get(&r.source).await?
            && src.deleted_at.is_none()
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The allocated address of an ExternalIP record, when it is ALLOCATED.
pub(crate) fn allocated_address(rec: &Record) -> Result<Option<IpAddr>, ReconcileError> {
    let eip: pb::ExternalIp = decode(rec)?;
    if eip.state() != pb::ExternalIp::READY || rec.deleted_at.is_some() {
        return Ok(None);
    }
    Ok(eip
        .status
        .as_ref()
        .and_then(|s| s.address.parse::<IpAddr>().ok()))
}

pub(crate) async fn reconcile(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    finalizer::reconcile(ctx, rec, |rec| apply(ctx, rec), |rec| cleanup(ctx, rec)).await
}

/// The fabric allocates the address once; `status.attached` follows the consumers.
async fn apply(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    let mut eip: pb::ExternalIp = decode(&rec)?;
    let pool_id = pool_of(&eip);
    let attached = is_attached(ctx, &rec.id).await?;
    eip.status.get_or_insert_with(Default::default).attached = attached;
    let has_address = eip.status.as_ref().is_some_and(|s| !s.address.is_empty());
    if (eip.state() == pb::ExternalIp::READY && has_address) || settled(&rec, &eip) {
        save(ctx, &rec, rec.clone(), &eip).await?;
        return Ok(Action::Done);
    }
    match allocate(ctx, &pool_id, &rec.id).await {
        Ok(address) => {
            let status = eip.status.get_or_insert_with(Default::default);
            status.address = address.to_string();
            status.pool = pool_id;
            succeeded(ctx, &rec, eip).await
        }
        Err(e) => op_failed(ctx, &rec, eip, e).await,
    }
}

async fn allocate(ctx: &ReconcileCtx, pool_id: &str, eip_id: &str) -> Result<IpAddr, OpError> {
    if pool_id.is_empty() {
        return Err(OpError::permanent(
            "no ExternalIPPool assigned (spec.pool is empty)",
        ));
    }
    let pool_rec = ctx
        .store
        .get(pool_id)
        .await
        .map_err(|e| OpError::transient(format!("store: {e}")))?
        .filter(|r| r.kind == Kind::ExternalIpPool)
        .ok_or_else(|| OpError::permanent(format!("ExternalIPPool '{pool_id}' does not exist")))?;
    let pool: pb::ExternalIpPool = pool_rec
        .decode()
        .map_err(|e| OpError::permanent(e.to_string()))?;
    let cidrs = pool_cidrs(&pool);
    // The pool's class's fabric allocates (pools without a class: the default class).
    let class = pool
        .spec
        .as_ref()
        .map(|s| s.network_class.as_str())
        .unwrap_or_default();
    let managers = ctx.dispatcher.for_class(&*ctx.store, class).await?;
    let resp = managers
        .fabric
        .allocate_external_ip(&AllocateExternalIpRequest {
            external_ip_id: eip_id.to_string(),
            pool_id: pool_id.to_string(),
            cidrs,
        })
        .await?;
    Ok(resp.address)
}

/// The managers of a pool's NetworkClass (the default class for a pool without one, or one
/// that is gone).
async fn managers_of_pool(ctx: &ReconcileCtx, pool_id: &str) -> Result<crate::Managers, OpError> {
    let class = ctx
        .store
        .get(pool_id)
        .await
        .map_err(|e| OpError::transient(format!("store: {e}")))?
        .and_then(|p| {
            p.body
                .pointer("/spec/network_class")
                .and_then(serde_json::Value::as_str)
                .map(String::from)
        })
        .unwrap_or_default();
    ctx.dispatcher.for_class(&*ctx.store, &class).await
}

/// The fabric releases the address; then, in one transaction, the row goes (the finalizer
/// dropped) and the pool gets its capacity back.
async fn cleanup(ctx: &ReconcileCtx, rec: Record) -> Result<Cleanup, ReconcileError> {
    let eip: pb::ExternalIp = decode(&rec)?;
    let pool_id = pool_of(&eip);
    if !pool_id.is_empty() {
        let released = async {
            let managers = managers_of_pool(ctx, &pool_id).await?;
            managers
                .fabric
                .release_external_ip(&ReleaseExternalIpRequest {
                    external_ip_id: rec.id.clone(),
                    pool_id: pool_id.clone(),
                })
                .await
        }
        .await;
        if let Err(e) = released {
            return Ok(Cleanup::NotYet(
                finalizer::undo_failed(ctx, &rec, eip, e).await?,
            ));
        }
    }
    // The removal and the pool's counter commit together; the pool row is locked last (by
    // `adjust_pool`), so it is held only from then to the commit, as reservations hold it.
    let mut tx = ctx.store.begin_shared().await?;
    let removed = finalizer::release_in(&mut *tx, &rec).await?;
    if removed && !pool_id.is_empty() {
        adjust_pool(&mut *tx, &pool_id, -1).await?;
    }
    tx.commit().await?;
    Ok(Cleanup::Released)
}
