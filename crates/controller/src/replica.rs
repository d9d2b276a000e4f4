//! Several replicas on one database: each registers itself, renews its registration, and
//! holds the leases of the controller shards rendezvous hashing gives it among the live
//! replicas. A replica that stops renewing (killed, paused, cut off) loses its shards when its
//! leases expire; the others take them over with a higher fencing token, after which every
//! store write and sim-manager batch the old holder attempts is refused
//! ([`osac_store::Tx::fence`]).
//!
//! Timing: a lease lasts `lease_ttl` (6 s) and is renewed every `renew_interval` (2 s), so a
//! dead replica's shards move within `lease_ttl + renew_interval` (≤ 8 s). The local deadline
//! of a lease is one second shorter than the database's, measured from before the renewal was
//! sent.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use osac_model::Kind;
use osac_store::{ReplicaInfo, ReplicaRow, Store, StoreError};
use tokio::sync::watch;

use crate::ownership::{LocalLease, Ownership, SHARDS, shard_of};
use crate::queue::Queue;

/// How a replica coordinates with the others.
#[derive(Debug, Clone)]
pub struct ReplicaConfig {
    /// This replica (its id is unique per process start).
    pub info: ReplicaInfo,
    /// How long a lease (and a registration) lasts without renewal.
    pub lease_ttl: Duration,
    /// How often leases are renewed and the shard split recomputed.
    pub renew_interval: Duration,
}

impl ReplicaConfig {
    /// Default timing (6 s leases renewed every 2 s).
    pub fn new(info: ReplicaInfo) -> Self {
        ReplicaConfig {
            info,
            lease_ttl: Duration::from_secs(6),
            renew_interval: Duration::from_secs(2),
        }
    }

    fn local_deadline(&self, sent: Instant) -> Instant {
        sent + self.lease_ttl.saturating_sub(Duration::from_secs(1))
    }
}

/// Why a replica may not join.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("the store cannot be shared by replicas (use PostgreSQL)")]
    NotShared,
    #[error("cannot register the replica")]
    Store(#[from] StoreError),
    /// The linux dataplane programs one machine's kernel: its replica runs alone.
    #[error(
        "replica {name} ({address}) is live on this database{why}: the linux dataplane drives \
         one machine's kernel, so a replica with it runs alone"
    )]
    Dataplane {
        name: String,
        address: String,
        why: &'static str,
    },
}

/// Registers the replica, refusing a configuration that would corrupt the dataplane: a
/// replica driving the linux dataplane next to any other live replica.
pub async fn join(store: &dyn Store, config: &ReplicaConfig) -> Result<(), JoinError> {
    let leases = store.leases().ok_or(JoinError::NotShared)?;
    let me = &config.info;
    let others = leases.join(me, config.lease_ttl).await?;
    let conflict = others.iter().find(|o| me.dataplane || o.info.dataplane);
    if let Some(other) = conflict {
        leases.leave(&me.id).await?;
        return Err(JoinError::Dataplane {
            name: other.info.name.clone(),
            address: other.info.address.clone(),
            why: if other.info.dataplane {
                " and drives the linux dataplane"
            } else {
                ""
            },
        });
    }
    tracing::info!(replica = %me.name, id = %me.id, others = others.len(), "joined as a replica");
    Ok(())
}

/// The shards rendezvous hashing gives `me` among the `live` replicas.
pub fn shards_for(me: &str, live: &[ReplicaRow]) -> BTreeSet<i32> {
    (0..SHARDS)
        .filter(|shard| {
            live.iter()
                .max_by_key(|r| (shard_of_pair(&r.info.id, *shard), r.info.id.clone()))
                .is_some_and(|r| r.info.id == me)
        })
        .collect()
}

fn shard_of_pair(replica: &str, shard: i32) -> u64 {
    let mut h = osac_model::hash::fnv1a64(replica.bytes().chain(shard.to_le_bytes()));
    // FNV leaves the high bits weakly mixed with the last bytes; finish with MurmurHash3's
    // 64-bit mix so every bit depends on the shard.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Renews, releases and acquires leases until shutdown, then leaves (releasing everything).
pub(crate) async fn lease_loop(
    store: Arc<dyn Store>,
    ownership: Ownership,
    config: ReplicaConfig,
    queue: Arc<Queue>,
    mut shutdown: watch::Receiver<bool>,
) {
    let Some(leases) = store.leases() else {
        return;
    };
    let me = config.info.id.clone();
    let mut ticker = tokio::time::interval(config.renew_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            changed = shutdown.changed() => if changed.is_err() || *shutdown.borrow() { break },
        }
        if *shutdown.borrow() {
            break;
        }
        let sent = Instant::now();
        let live = match leases.heartbeat(&config.info, config.lease_ttl).await {
            Ok(live) => live,
            Err(e) => {
                tracing::warn!(error = %e, "replica heartbeat failed; leases lapse unless renewed");
                continue;
            }
        };
        let desired = shards_for(&me, &live);
        let held: Vec<i32> = ownership.held().into_iter().map(|(s, _)| s).collect();
        let renewed = match leases.renew(&me, &held, config.lease_ttl).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "lease renewal failed");
                continue;
            }
        };
        let deadline = config.local_deadline(sent);
        let mut next: BTreeMap<i32, LocalLease> = renewed
            .into_iter()
            .map(|(s, token)| (s, LocalLease { token, deadline }))
            .collect();
        // Shards another replica should have now: stop working on them, then release.
        let surplus: Vec<i32> = next
            .keys()
            .filter(|s| !desired.contains(s))
            .copied()
            .collect();
        for s in &surplus {
            next.remove(s);
        }
        ownership.set(next.clone());
        if !surplus.is_empty() {
            if let Err(e) = leases.release(&me, &surplus).await {
                tracing::warn!(error = %e, "lease release failed (they expire instead)");
            }
            tracing::info!(shards = surplus.len(), "released shards to other replicas");
        }
        let wanted: Vec<i32> = desired
            .iter()
            .filter(|s| !next.contains_key(s))
            .copied()
            .collect();
        if wanted.is_empty() {
            continue;
        }
        match leases.acquire(&me, &wanted, config.lease_ttl).await {
            Ok(taken) if !taken.is_empty() => {
                let shards: BTreeSet<i32> = taken.iter().map(|(s, _)| *s).collect();
                for (s, token) in taken {
                    next.insert(s, LocalLease { token, deadline });
                }
                ownership.set(next);
                tracing::info!(shards = shards.len(), "acquired shards");
                enqueue_shards(&*store, &queue, &shards).await;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "lease acquisition failed"),
        }
    }
    ownership.clear();
    if let Err(e) = leases.leave(&me).await {
        tracing::warn!(error = %e, "cannot release leases at shutdown (they expire instead)");
    }
}

/// Enqueues every object of `shards` (newly acquired: their previous owner's queue is gone).
async fn enqueue_shards(store: &dyn Store, queue: &Queue, shards: &BTreeSet<i32>) {
    for kind in Kind::ALL.into_iter().filter(|k| k.is_reconciled()) {
        match store.ids(kind).await {
            Ok(ids) => {
                for id in ids.into_iter().filter(|id| shards.contains(&shard_of(id))) {
                    queue.add_if_idle(&id, kind);
                }
            }
            Err(e) => tracing::warn!(%kind, error = %e, "listing for acquired shards failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str) -> ReplicaRow {
        ReplicaRow {
            info: ReplicaInfo {
                id: id.into(),
                name: id.into(),
                address: String::new(),
                dataplane: false,
            },
            started_at: chrono::Utc::now(),
            expires_at: chrono::Utc::now(),
            live: true,
        }
    }

    #[test]
    fn every_shard_has_exactly_one_owner_and_few_move_when_one_leaves() {
        let three = [row("a"), row("b"), row("c")];
        let split: Vec<BTreeSet<i32>> = ["a", "b", "c"]
            .iter()
            .map(|me| shards_for(me, &three))
            .collect();
        let total: usize = split.iter().map(BTreeSet::len).sum();
        assert_eq!(total, SHARDS as usize);
        assert!(split.iter().all(|s| s.len() > 12), "{split:?}");
        // "c" leaves: only its shards move.
        let two = [row("a"), row("b")];
        let a2 = shards_for("a", &two);
        assert!(split[0].is_subset(&a2));
        assert_eq!(a2.len() + shards_for("b", &two).len(), SHARDS as usize);
    }
}
