//! Which objects this process reconciles. Objects are split into [`SHARDS`] shards by a hash of
//! their id; a process alone on its store owns them all, a replica owns the shards whose lease
//! it holds (see [`crate::replica`]). Each held lease has a local deadline on this machine's
//! monotonic clock, shorter than the lease in the database: past it, the replica acts as if the
//! lease were lost (a paused process wakes up past its deadlines and does nothing).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use osac_backends::fence::Fence;

pub use osac_store::SHARDS;

/// The shard of an object id (FNV-1a of the id; stable across processes and releases).
pub fn shard_of(id: &str) -> i32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in id.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    (h % SHARDS as u32) as i32
}

/// A held lease: its fencing token and until when this process trusts it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LocalLease {
    pub token: i64,
    pub deadline: Instant,
}

#[derive(Debug)]
enum Mode {
    /// The only process on its store: owns every shard, nothing to fence.
    Alone,
    /// One of several replicas.
    Replica {
        id: String,
        held: BTreeMap<i32, LocalLease>,
    },
}

/// What this process owns; cheap to clone, shared by the workers and the lease loop.
#[derive(Clone)]
pub struct Ownership(Arc<RwLock<Mode>>);

/// What to do with an object a worker took from the queue.
pub(crate) enum Claim {
    /// Not ours (now): skip it; the owner reconciles it.
    NotMine,
    /// Ours, with nothing to fence (alone on the store).
    Alone,
    /// Ours under this lease.
    Leased(Fence),
}

impl Ownership {
    /// Owns everything (a single process on its store).
    pub fn alone() -> Self {
        Ownership(Arc::new(RwLock::new(Mode::Alone)))
    }

    /// A replica `id` that owns nothing until its lease loop acquires shards.
    pub fn replica(id: &str) -> Self {
        Ownership(Arc::new(RwLock::new(Mode::Replica {
            id: id.to_string(),
            held: BTreeMap::new(),
        })))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Mode> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Mode> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether object `id` is this process's to reconcile, and under which lease.
    pub(crate) fn claim(&self, id: &str) -> Claim {
        let shard = shard_of(id);
        match &*self.read() {
            Mode::Alone => Claim::Alone,
            Mode::Replica { id: me, held } => match held.get(&shard) {
                Some(l) if l.deadline > Instant::now() => {
                    let this = self.clone();
                    Claim::Leased(Fence::new(
                        shard,
                        me.clone(),
                        l.token,
                        Arc::new(move |s, t| this.holds(s, t)),
                    ))
                }
                _ => Claim::NotMine,
            },
        }
    }

    /// Whether `shard` is held with `token` and its local deadline has not passed.
    pub fn holds(&self, shard: i32, token: i64) -> bool {
        match &*self.read() {
            Mode::Alone => true,
            Mode::Replica { held, .. } => held
                .get(&shard)
                .is_some_and(|l| l.token == token && l.deadline > Instant::now()),
        }
    }

    /// The shards held now (all of them when alone), with their fencing tokens (0 when alone).
    pub fn held(&self) -> Vec<(i32, i64)> {
        match &*self.read() {
            Mode::Alone => (0..SHARDS).map(|s| (s, 0)).collect(),
            Mode::Replica { held, .. } => {
                let now = Instant::now();
                held.iter()
                    .filter(|(_, l)| l.deadline > now)
                    .map(|(s, l)| (*s, l.token))
                    .collect()
            }
        }
    }

    /// Replaces the held leases (the lease loop's view after renewing and acquiring).
    pub(crate) fn set(&self, leases: BTreeMap<i32, LocalLease>) {
        if let Mode::Replica { held, .. } = &mut *self.write() {
            *held = leases;
        }
    }

    /// Drops everything (shutdown).
    pub(crate) fn clear(&self) {
        self.set(BTreeMap::new());
    }

    /// This replica's id (None when alone).
    pub fn replica_id(&self) -> Option<String> {
        match &*self.read() {
            Mode::Alone => None,
            Mode::Replica { id, .. } => Some(id.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn shards_are_spread_and_stable() {
        let mut counts = [0u32; SHARDS as usize];
        for i in 0..6400 {
            counts[shard_of(&format!("obj-{i}")) as usize] += 1;
        }
        assert!(counts.iter().all(|c| *c > 50 && *c < 150), "{counts:?}");
        assert_eq!(shard_of("abc"), shard_of("abc"));
    }

    #[test]
    fn a_lease_past_its_local_deadline_is_not_held() {
        let o = Ownership::replica("r1");
        let id = "some-object";
        let shard = shard_of(id);
        assert!(matches!(o.claim(id), Claim::NotMine));
        let mut held = BTreeMap::new();
        held.insert(
            shard,
            LocalLease {
                token: 7,
                deadline: Instant::now() + Duration::from_secs(60),
            },
        );
        o.set(held.clone());
        let Claim::Leased(fence) = o.claim(id) else {
            panic!("held shard not claimed")
        };
        assert_eq!((fence.shard, fence.token), (shard, 7));
        assert!(fence.holds_locally());
        // Taken over: a new token; the old fence no longer holds.
        if let Some(l) = held.get_mut(&shard) {
            l.token = 8;
        }
        o.set(held.clone());
        assert!(!fence.holds_locally());
        if let Some(l) = held.get_mut(&shard) {
            l.deadline = Instant::now();
        }
        o.set(held);
        assert!(matches!(o.claim(id), Claim::NotMine));
    }
}
