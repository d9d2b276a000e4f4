//! ExternalIPPool accounting: the `status.total/allocated/available` counters of a pool, moved
//! by the writers that reserve (API create) or release (ExternalIP removal) one address in their
//! own transactions ([`adjust_pool`]) and recomputed by the pool's controller ([`recount_pool`],
//! the source of truth). Both the API and the controllers call these inside their transaction.

use ipnet::IpNet;
use osac_model::{Kind, pb};

use crate::{Record, StoreError, Tx};

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
    let Some((rec, mut pool)) = lock_pool(tx, pool_id).await? else {
        return Ok(None);
    };
    let stored = pool.status.as_ref().map_or(0, |s| s.allocated);
    let counts = counts_for(&pool, (stored + delta).max(0));
    set_counts(&mut pool, counts);
    let mut next = rec.clone();
    next.encode(&pool)?;
    if next != rec {
        tx.update(&next).await?;
    }
    Ok(Some(counts))
}

/// [`recount_pool`], optionally also setting the pool's state and message.
pub async fn recount_with(
    tx: &mut dyn Tx,
    pool_id: &str,
    state: Option<(i32, String)>,
) -> Result<Option<PoolCounts>, StoreError> {
    let Some((rec, mut pool)) = lock_pool(tx, pool_id).await? else {
        return Ok(None);
    };
    let refs = tx.referrers(pool_id).await?;
    let allocated = refs
        .iter()
        .filter(|r| r.source_kind == Kind::ExternalIp && r.field == "spec.pool")
        .count();
    let counts = counts_for(&pool, i64::try_from(allocated).unwrap_or(i64::MAX));
    set_counts(&mut pool, counts);
    if let Some((state, message)) = state {
        let status = pool.status.get_or_insert_with(Default::default);
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

/// Locks pool `pool_id` in `tx` and decodes it (None: no such pool).
async fn lock_pool(
    tx: &mut dyn Tx,
    pool_id: &str,
) -> Result<Option<(Record, pb::ExternalIpPool)>, StoreError> {
    match tx.lock(pool_id).await? {
        Some(rec) if rec.kind == Kind::ExternalIpPool => {
            let pool = rec.decode()?;
            Ok(Some((rec, pool)))
        }
        _ => Ok(None),
    }
}

fn set_counts(pool: &mut pb::ExternalIpPool, counts: PoolCounts) {
    let status = pool.status.get_or_insert_with(Default::default);
    status.total = counts.total;
    status.allocated = counts.allocated;
    status.available = counts.available;
}

/// Counters of `pool` with `allocated` addresses taken (unparseable CIDRs count as empty).
pub fn counts_for(pool: &pb::ExternalIpPool, allocated: i64) -> PoolCounts {
    let nets = pool_cidrs(pool);
    let total = osac_model::net::total_capacity(&nets);
    PoolCounts {
        total,
        allocated,
        available: total.saturating_sub(allocated).max(0),
    }
}

pub fn pool_cidrs(pool: &pb::ExternalIpPool) -> Vec<IpNet> {
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
