//! Tenants' network snapshots, indexed, kept between explanations, so that a question costs
//! the pure explainer and not a read, decode and index of the whole tenant (~1,200 objects
//! for a tenant of 1,000 VMs).
//!
//! Coherence (why an explanation never answers from a network older than the caller's own
//! writes):
//! - The store publishes every committed change on its change feed before the write returns
//!   to its caller. Each lookup first drains the feed (without waiting) and drops the snapshot
//!   of every tenant one of whose network objects changed; a lagged feed drops them all.
//! - A snapshot loaded from the store is offered with the epoch seen before loading; it is
//!   kept only if its tenant was not invalidated meanwhile, so a load that raced a write is
//!   used once and never cached over it.
//! - With several replicas on one database, a write on another replica reaches this one's feed
//!   with the change-notification delay (milliseconds): until then an explanation here may
//!   answer from the network before that write, as a watch would show it.
//! - Bounded: at most [`CAPACITY`] tenants; when full, every snapshot is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use osac_model::Kind;
use osac_model::reachability::IndexedNetwork;
use osac_store::Change;
use tokio::sync::broadcast::{self, error::TryRecvError};

/// Tenants whose snapshot is kept at most.
const CAPACITY: usize = 64;

/// The kinds a network snapshot is made of: a change to one of them invalidates its tenant.
pub const NETWORK_KINDS: [Kind; 9] = [
    Kind::VirtualNetwork,
    Kind::Subnet,
    Kind::SecurityGroup,
    Kind::ComputeInstance,
    Kind::BareMetalInstance,
    Kind::Cluster,
    Kind::ExternalIp,
    Kind::ExternalIpAttachment,
    Kind::NatGateway,
];

struct Inner {
    feed: broadcast::Receiver<Change>,
    snapshots: HashMap<String, Arc<IndexedNetwork>>,
    /// Bumped by every invalidation.
    epoch: u64,
    /// The epoch of each tenant's last invalidation.
    invalidated: HashMap<String, u64>,
    /// The epoch at which everything was last dropped (lagged feed, capacity).
    cleared: u64,
}

impl Inner {
    fn drain(&mut self) {
        loop {
            match self.feed.try_recv() {
                Ok(change) => {
                    if NETWORK_KINDS.iter().any(|k| k.collection() == change.kind) {
                        self.epoch += 1;
                        self.snapshots.remove(&change.tenant);
                        self.invalidated.insert(change.tenant, self.epoch);
                        if self.invalidated.len() > CAPACITY * 16 {
                            self.clear();
                        }
                    }
                }
                Err(TryRecvError::Lagged(_)) => {
                    self.epoch += 1;
                    self.clear();
                }
                Err(TryRecvError::Empty | TryRecvError::Closed) => return,
            }
        }
    }

    fn clear(&mut self) {
        self.snapshots.clear();
        self.invalidated.clear();
        self.cleared = self.epoch;
    }
}

/// The snapshots of one service.
pub struct NetworkSnapshots {
    inner: Mutex<Inner>,
}

impl NetworkSnapshots {
    /// Snapshots kept coherent by the store's change feed `feed`.
    pub fn new(feed: broadcast::Receiver<Change>) -> Self {
        Self {
            inner: Mutex::new(Inner {
                feed,
                snapshots: HashMap::new(),
                epoch: 0,
                invalidated: HashMap::new(),
                cleared: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The map holds copies only: after a panic elsewhere, start afresh.
        let mut guard = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.inner.is_poisoned() {
            guard.epoch += 1;
            guard.clear();
            self.inner.clear_poison();
        }
        guard
    }

    /// The tenant's current snapshot, or the epoch to offer a fresh load with.
    pub fn get(&self, tenant: &str) -> Result<Arc<IndexedNetwork>, u64> {
        let mut inner = self.lock();
        inner.drain();
        match inner.snapshots.get(tenant) {
            Some(n) => Ok(Arc::clone(n)),
            None => Err(inner.epoch),
        }
    }

    /// Offers a snapshot loaded after [`NetworkSnapshots::get`] returned `epoch`: kept unless
    /// the tenant changed (or everything was dropped) since.
    pub fn offer(&self, tenant: &str, network: Arc<IndexedNetwork>, epoch: u64) {
        let mut inner = self.lock();
        inner.drain();
        let changed =
            inner.cleared > epoch || inner.invalidated.get(tenant).is_some_and(|&at| at > epoch);
        if changed {
            return;
        }
        if inner.snapshots.len() >= CAPACITY {
            inner.clear();
        }
        inner.snapshots.insert(tenant.to_string(), network);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(kind: Kind, tenant: &str) -> Change {
        Change {
            kind: kind.collection().to_string(),
            id: "x".into(),
            tenant: tenant.into(),
            gone: false,
            refs: Vec::new(),
            version: None,
        }
    }

    fn net() -> Arc<IndexedNetwork> {
        Arc::new(IndexedNetwork::new(Default::default()))
    }

    #[test]
    fn a_change_to_a_network_object_drops_its_tenants_snapshot_only() {
        let (tx, rx) = broadcast::channel(16);
        let cache = NetworkSnapshots::new(rx);
        let e = cache.get("a").unwrap_err();
        cache.offer("a", net(), e);
        let e = cache.get("b").unwrap_err();
        cache.offer("b", net(), e);
        assert!(cache.get("a").is_ok() && cache.get("b").is_ok());
        tx.send(change(Kind::SecurityGroup, "a")).unwrap();
        assert!(cache.get("a").is_err(), "a's rule changed: reload");
        assert!(cache.get("b").is_ok(), "b is untouched");
    }

    #[test]
    fn other_kinds_keep_the_snapshot() {
        let (tx, rx) = broadcast::channel(16);
        let cache = NetworkSnapshots::new(rx);
        let e = cache.get("a").unwrap_err();
        cache.offer("a", net(), e);
        tx.send(change(Kind::Event, "a")).unwrap();
        tx.send(change(Kind::Tenant, "a")).unwrap();
        assert!(cache.get("a").is_ok());
    }

    #[test]
    fn a_load_that_raced_a_write_is_not_kept() {
        let (tx, rx) = broadcast::channel(16);
        let cache = NetworkSnapshots::new(rx);
        let e = cache.get("a").unwrap_err();
        // The load reads the store; meanwhile a write to a's network commits.
        tx.send(change(Kind::Subnet, "a")).unwrap();
        cache.offer("a", net(), e);
        assert!(cache.get("a").is_err(), "the stale load must not be cached");
        // Another tenant's write during a load does not stop a's snapshot being kept.
        let e = cache.get("a").unwrap_err();
        tx.send(change(Kind::Subnet, "b")).unwrap();
        cache.offer("a", net(), e);
        assert!(cache.get("a").is_ok());
    }

    #[test]
    fn a_lagged_feed_drops_everything() {
        let (tx, rx) = broadcast::channel(2);
        let cache = NetworkSnapshots::new(rx);
        let e = cache.get("a").unwrap_err();
        cache.offer("a", net(), e);
        for _ in 0..5 {
            tx.send(change(Kind::Event, "z")).unwrap();
        }
        assert!(cache.get("a").is_err());
    }

    #[test]
    fn capacity_is_bounded() {
        let (_tx, rx) = broadcast::channel(2);
        let cache = NetworkSnapshots::new(rx);
        for i in 0..=CAPACITY {
            let t = format!("t{i}");
            let e = cache.get(&t).unwrap_err();
            cache.offer(&t, net(), e);
        }
        assert!(cache.lock().snapshots.len() <= CAPACITY);
        assert!(cache.get(&format!("t{CAPACITY}")).is_ok());
    }
}
