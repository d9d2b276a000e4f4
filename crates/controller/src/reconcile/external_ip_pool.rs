//! ExternalIPPool: no manager owns pools; the controller keeps the state READY (FAILED when the
//! stored CIDRs are unusable) and the counters right. The counters are also moved by the
//! writers that reserve (API create) or release (ExternalIP removal) one address, in their
//! own transactions; the accounting both use is `osac_store::pool`, whose recount is the
//! source of truth. The controller recounts when the pool itself changes and at every resync,
//! not at its addresses' writes (those move the counters themselves; see the runtime's
//! `on_change`).

use osac_model::{Kind, pb};
use osac_store::Record;
use osac_store::pool::{PoolCounts, counts_for, recount_with};

use super::finalizer::{self, Cleanup};
use super::{Action, Object, ReconcileCtx, ReconcileError, decode};

super::object!(pb::ExternalIpPool, pb::ExternalIpPoolStatus,
    pending: pb::ExternalIpPoolState::Pending, ready: pb::ExternalIpPoolState::Ready,
    failed: pb::ExternalIpPoolState::Failed, deleting: pb::ExternalIpPoolState::Deleting,
    delete_failed: Some(pb::ExternalIpPoolState::DeleteFailed as i32));

pub(crate) async fn reconcile(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    finalizer::reconcile(
        ctx,
        rec,
        |rec| apply(ctx, rec),
        // The API refuses the delete while addresses are allocated: nothing to undo.
        |rec| async { Ok(Cleanup::done(rec)) },
    )
    .await
}

async fn apply(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    let pool: pb::ExternalIpPool = decode(&rec)?;
    let (state, message) = match osac_model::validate::external_ip_pool(&pool) {
        Ok(_) => (pb::ExternalIpPool::READY, String::new()),
        Err(e) => (pb::ExternalIpPool::FAILED, format!("invalid pool: {e}")),
    };
    let allocated = allocated_outside_tx(ctx, &rec.id).await?;
    let want = counts_for(&pool, allocated);
    let have = pool.status.as_ref().map(|s| PoolCounts {
        total: s.total,
        allocated: s.allocated,
        available: s.available,
    });
    if have == Some(want) && pool.state() == state && pool.message() == message {
        return Ok(Action::Done);
    }
    let mut tx = ctx.store.begin_shared().await?;
    recount_with(&mut *tx, &rec.id, Some((state, message))).await?;
    tx.commit().await?;
    Ok(Action::Done)
}

/// ExternalIPs referencing the pool, read outside a transaction (to skip a no-op write).
async fn allocated_outside_tx(ctx: &ReconcileCtx, pool_id: &str) -> Result<i64, ReconcileError> {
    let refs = ctx.store.referrers(pool_id).await?;
    let n = refs
        .iter()
        .filter(|r| r.source_kind == Kind::ExternalIp && r.field == "spec.pool")
        .count();
    Ok(i64::try_from(n).unwrap_or(i64::MAX))
}
