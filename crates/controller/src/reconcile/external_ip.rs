//! ExternalIP: the fabric allocates the address (capacity was reserved by the API), the
//! controller reports it, keeps `status.attached` right, and on delete releases the address and
//! gives the capacity back in the same transaction that removes the row.

use std::net::IpAddr;

use ipnet::IpNet;
use osac_backends::{AllocateExternalIpRequest, OpError, ReleaseExternalIpRequest};
use osac_model::{Kind, pb};
use osac_store::{Record, StoreError, Tx};

use super::{
    Action, Object, ReconcileCtx, ReconcileError, decode, delete_failed, has_finalizer, op_failed,
    save, settled, succeeded,
};

super::object!(pb::ExternalIp, pb::ExternalIpStatus,
    pending: pb::ExternalIpState::Pending, ready: pb::ExternalIpState::Allocated,
    failed: pb::ExternalIpState::Failed, deleting: pb::ExternalIpState::Deleting,
    delete_failed: None);

/// The counters of a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolCounts {
    /// Assignable addresses of the pool's CIDRs.
    pub total: i64,
    /// ExternalIPs holding capacity in the pool (including ones being deleted).
    pub allocated: i64,
    /// `total - allocated`, never negative.
    pub available: i64,
}

/// Recomputes a pool's `status.total/allocated/available` inside `tx` and writes them when they
/// changed. The pool row is locked first, so concurrent reservations serialise on it. Allocated
/// = ExternalIPs that reference the pool through `spec.pool` as seen by `tx` (an ExternalIP
/// removed earlier in the same transaction no longer counts; one inserted does). Returns None
/// when the pool does not exist.
pub async fn recount_pool(
    tx: &mut dyn Tx,
    pool_id: &str,
) -> Result<Option<PoolCounts>, StoreError> {
    recount_with(tx, pool_id, None).await
}

/// Moves a pool's stored `allocated` counter by `delta` inside `tx` (the pool row is locked
/// first): O(1), for the hot paths that reserve (API create) or release (row removal) exactly
/// one address in the same transaction. The pool controller's [`recount_pool`] stays the
/// source of truth and corrects any drift. Returns None when the pool does not exist.
pub async fn adjust_pool(
    tx: &mut dyn Tx,
    pool_id: &str,
    delta: i64,
) -> Result<Option<PoolCounts>, StoreError> {
    let Some(rec) = tx.lock(pool_id).await? else {
        return Ok(None);
    };
    if rec.kind != Kind::ExternalIpPool {
        return Ok(None);
    }
    let mut pool: pb::ExternalIpPool = rec.decode()?;
    let stored = pool.status.as_ref().map_or(0, |s| s.allocated);
    let counts = counts_for(&pool, (stored + delta).max(0));
    let status = pool.status.get_or_insert_with(Default::default);
    status.total = counts.total;
    status.allocated = counts.allocated;
    status.available = counts.available;
    let mut next = rec.clone();
    next.encode(&pool)?;
    if next != rec {
        tx.update(&next).await?;
    }
    Ok(Some(counts))
}

/// [`recount_pool`], optionally also setting the pool's state and message.
pub(crate) async fn recount_with(
    tx: &mut dyn Tx,
    pool_id: &str,
    state: Option<(i32, String)>,
) -> Result<Option<PoolCounts>, StoreError> {
    let Some(rec) = tx.lock(pool_id).await? else {
        return Ok(None);
    };
    if rec.kind != Kind::ExternalIpPool {
        return Ok(None);
    }
    let mut pool: pb::ExternalIpPool = rec.decode()?;
    let refs = tx.referrers(pool_id).await?;
    let allocated = refs
        .iter()
        .filter(|r| r.source_kind == Kind::ExternalIp && r.field == "spec.pool")
        .count();
    let counts = counts_for(&pool, i64::try_from(allocated).unwrap_or(i64::MAX));
    let status = pool.status.get_or_insert_with(Default::default);
    status.total = counts.total;
    status.allocated = counts.allocated;
    status.available = counts.available;
    if let Some((state, message)) = state {
        status.state = state;
        status.message = message;
    }
    let mut next = rec.clone();
    next.encode(&pool)?;
    if next != rec {
        crate::events::update(tx, &rec, &next).await?;
    }
    Ok(Some(counts))
}

/// Counters of `pool` with `allocated` addresses taken (unparseable CIDRs count as empty).
pub(crate) fn counts_for(pool: &pb::ExternalIpPool, allocated: i64) -> PoolCounts {
    let nets = pool_cidrs(pool);
    let total = osac_model::net::total_capacity(&nets);
    PoolCounts {
        total,
        allocated,
        available: total.saturating_sub(allocated).max(0),
    }
}

fn pool_cidrs(pool: &pb::ExternalIpPool) -> Vec<IpNet> {
    pool.spec
        .as_ref()
        .map(|s| {
            s.cidrs
                .iter()
                .filter_map(|c| osac_model::net::parse_any_cidr("spec.cidrs", c).ok())
                .collect()
        })
        .unwrap_or_default()
}

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
    let mut eip: pb::ExternalIp = decode(&rec)?;
    let pool_id = pool_of(&eip);
    if rec.deleted_at.is_some() {
        return delete(ctx, rec, eip, pool_id).await;
    }
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

async fn delete(
    ctx: &ReconcileCtx,
    rec: Record,
    eip: pb::ExternalIp,
    pool_id: String,
) -> Result<Action, ReconcileError> {
    if !has_finalizer(&rec) {
        return Ok(Action::Done);
    }
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
            return delete_failed(ctx, &rec, eip, e).await;
        }
    }
    // Remove the row and give the capacity back atomically: lock the pool, drop our finalizer
    // (the row goes), recount.
    let mut tx = ctx.store.begin().await?;
    if !pool_id.is_empty() {
        tx.lock(&pool_id).await?;
    }
    let mut next = rec.clone();
    next.finalizers
        .retain(|f| f != osac_model::FABRIC_FINALIZER);
    let removed = crate::events::update(&mut *tx, &rec, &next)
        .await?
        .is_none();
    if removed && !pool_id.is_empty() {
        adjust_pool(&mut *tx, &pool_id, -1).await?;
    }
    tx.commit().await?;
    Ok(Action::Done)
}
