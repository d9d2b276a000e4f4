//! A bounded in-memory copy of recently read and written objects, so that reads by id cost no
//! round trip to the database.
//!
//! SQLite (one process owns the file) keeps it exact:
//! - Every committed write transaction updates the cache with what it wrote (new versions,
//!   removed rows) *after* its commit and *before* it releases the write lock, and bumps the
//!   cache's epoch.
//! - A reader that missed the cache reads the database, then offers the row with the epoch it
//!   saw before reading. The offer is taken only if no commit happened in between (same epoch):
//!   a row read before a concurrent commit is never cached over it, and a row removed
//!   meanwhile is never resurrected.
//! - The referrers of an object are cached the same way; a commit forgets those of every id
//!   whose reference rows it added or removed (a status write that keeps an object's
//!   references keeps the cached referrers of what it references).
//! - Reads inside a write transaction use the cache only for rows the transaction has not
//!   written: it holds the write lock, so the cache is the committed state, but not its own
//!   uncommitted writes.
//!
//! PostgreSQL (transactions commit concurrently, other processes write too) only *forgets*:
//! - A commit of this process forgets the rows it wrote and the referrers of what they
//!   reference, after the commit and before its changes go out on the change feed; another
//!   process's change notification does the same when it arrives, before the change is
//!   passed on. A reader woken by a change therefore never reads the copy the change made
//!   stale, and a read offered across a commit is refused by the epoch as above.
//! - What can lag is another process's write until its notification arrives: such copies
//!   are only for [`Store::get_cached`](crate::Store::get_cached) readers (controllers).
//! - While the notification listener is not connected, notifications may be lost: the cache
//!   is [suspended](RecordCache::suspend) (emptied, offers refused) until it listens again.
//!
//! Bounded: when full, the cache is emptied (correctness never depends on an entry).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use chrono::SubsecRound;
use osac_model::Kind;

use crate::{Record, Reference};

/// Records (and referrer lists) kept at most: enough for the objects reconciles read again and
/// again (classes, networks, subnets, groups, the workloads in flight), small enough that a
/// store of 100,000 objects stays well within its memory budget.
const CAPACITY: usize = 4096;

/// What one committed transaction wrote.
#[derive(Debug, Clone)]
pub(crate) enum Written {
    /// The row as stored now.
    Put(Box<Record>),
    /// The row is gone.
    Gone(String),
}

#[derive(Default)]
struct Inner {
    records: HashMap<String, Record>,
    /// Referrers by target id (what `Store::referrers` answers).
    referrers: HashMap<String, Vec<Reference>>,
    epoch: u64,
    /// Offers are refused (see [`RecordCache::suspend`]).
    suspended: bool,
}

/// The cache of one store.
#[derive(Default)]
pub(crate) struct RecordCache {
    inner: Mutex<Inner>,
}

impl RecordCache {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The map holds copies only: after a panic elsewhere, start afresh.
        let mut guard = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.inner.is_poisoned() {
            guard.records.clear();
            guard.referrers.clear();
            self.inner.clear_poison();
        }
        guard
    }

    /// The cached record, and the epoch to offer a database read with on a miss.
    pub(crate) fn get(&self, id: &str) -> (Option<Record>, u64) {
        let inner = self.lock();
        (inner.records.get(id).cloned(), inner.epoch)
    }

    /// Offers a row read from the database after [`RecordCache::get`] returned `epoch`.
    /// Events are never cached (they are pruned outside transactions).
    pub(crate) fn offer(&self, record: &Record, epoch: u64) {
        if record.kind == Kind::Event {
            return;
        }
        let mut inner = self.lock();
        if inner.epoch != epoch || inner.suspended {
            return;
        }
        if inner.records.len() >= CAPACITY {
            inner.records.clear();
        }
        inner.records.insert(record.id.clone(), record.clone());
    }

    /// The cached referrers of `target`, and the epoch to offer a database read with.
    pub(crate) fn referrers(&self, target: &str) -> (Option<Vec<Reference>>, u64) {
        let inner = self.lock();
        (inner.referrers.get(target).cloned(), inner.epoch)
    }

    /// Offers referrers read from the database after [`RecordCache::referrers`] returned
    /// `epoch`.
    pub(crate) fn offer_referrers(&self, target: &str, referrers: &[Reference], epoch: u64) {
        let mut inner = self.lock();
        if inner.epoch != epoch || inner.suspended {
            return;
        }
        if inner.referrers.len() >= CAPACITY {
            inner.referrers.clear();
        }
        inner
            .referrers
            .insert(target.to_string(), referrers.to_vec());
    }

    /// Applies a committed transaction's writes (call before releasing the write lock):
    /// `writes` are its rows, `targets` every id whose reference rows it added or removed
    /// (whose referrers changed).
    pub(crate) fn committed<'a>(
        &self,
        writes: Vec<Written>,
        targets: impl Iterator<Item = &'a str>,
    ) {
        if writes.is_empty() {
            return;
        }
        let mut inner = self.lock();
        inner.epoch += 1;
        for target in targets {
            inner.referrers.remove(target);
        }
        for w in writes {
            match w {
                Written::Put(record) if record.kind == Kind::Event => {}
                Written::Put(record) => {
                    let mut record = *record;
                    if inner.records.len() >= CAPACITY {
                        inner.records.clear();
                    }
                    // As the database returns it: timestamps are stored to the microsecond.
                    record.created_at = record.created_at.trunc_subsecs(6);
                    record.deleted_at = record.deleted_at.map(|t| t.trunc_subsecs(6));
                    inner.records.insert(record.id.clone(), record);
                }
                Written::Gone(id) => {
                    inner.records.remove(&id);
                }
            }
        }
    }
    /// Forgets the rows `ids` and the referrers of `targets` (a commit whose rows are not
    /// known here, or another process's change), and refuses the reads offered across it.
    pub(crate) fn forget<'a>(
        &self,
        ids: impl Iterator<Item = &'a str>,
        targets: impl Iterator<Item = &'a str>,
    ) {
        let mut inner = self.lock();
        inner.epoch += 1;
        for id in ids {
            inner.records.remove(id);
        }
        for target in targets {
            inner.referrers.remove(target);
        }
    }

    /// Empties the cache and refuses every offer until [`RecordCache::resume`]: for while
    /// the changes that would make entries stale may not arrive.
    pub(crate) fn suspend(&self) {
        let mut inner = self.lock();
        inner.epoch += 1;
        inner.suspended = true;
        inner.records.clear();
        inner.referrers.clear();
    }

    /// Takes offers again (of reads started from now on) after [`RecordCache::suspend`].
    pub(crate) fn resume(&self) {
        let mut inner = self.lock();
        inner.epoch += 1;
        inner.suspended = false;
        inner.records.clear();
        inner.referrers.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(version: i64) -> Record {
        let mut r = Record::new(Kind::Subnet, "t", json!({"spec": {}}));
        r.id = "a".into();
        r.version = version;
        r
    }

    #[test]
    fn a_read_overtaken_by_a_commit_is_not_cached() {
        let cache = RecordCache::default();
        let (hit, epoch) = cache.get("a");
        assert!(hit.is_none());
        // A writer commits version 2 while the reader still holds its version-1 row.
        cache.committed(vec![Written::Put(Box::new(rec(2)))], std::iter::empty());
        cache.offer(&rec(1), epoch);
        assert_eq!(cache.get("a").0.map(|r| r.version), Some(2));
    }

    #[test]
    fn a_removed_row_is_not_resurrected() {
        let cache = RecordCache::default();
        cache.committed(vec![Written::Put(Box::new(rec(1)))], std::iter::empty());
        let (_, epoch) = cache.get("b");
        cache.committed(vec![Written::Gone("a".into())], std::iter::empty());
        cache.offer(&rec(1), epoch);
        assert!(cache.get("a").0.is_none());
    }

    #[test]
    fn referrers_of_a_written_row_s_targets_are_forgotten() {
        let cache = RecordCache::default();
        let (_, epoch) = cache.referrers("vn");
        cache.offer_referrers("vn", &[], epoch);
        assert_eq!(cache.referrers("vn").0.map(|r| r.len()), Some(0));
        // A subnet referencing the VN is written: the VN's referrers must be read again.
        cache.committed(vec![Written::Put(Box::new(rec(1)))], ["vn"].into_iter());
        assert!(cache.referrers("vn").0.is_none());
    }

    #[test]
    fn a_quiet_read_is_cached() {
        let cache = RecordCache::default();
        let (_, epoch) = cache.get("a");
        cache.offer(&rec(3), epoch);
        assert_eq!(cache.get("a").0.map(|r| r.version), Some(3));
    }

    #[test]
    fn a_forgotten_row_is_read_again_and_a_read_across_it_is_refused() {
        let cache = RecordCache::default();
        let (_, epoch) = cache.get("a");
        cache.offer(&rec(1), epoch);
        let (_, epoch) = cache.referrers("vn");
        cache.offer_referrers("vn", &[], epoch);
        let (_, before) = cache.get("a");
        cache.forget(["a"].into_iter(), ["vn"].into_iter());
        assert!(cache.get("a").0.is_none());
        assert!(cache.referrers("vn").0.is_none());
        // A read that began before the change does not bring the old row back.
        cache.offer(&rec(1), before);
        assert!(cache.get("a").0.is_none());
    }

    #[test]
    fn a_suspended_cache_holds_nothing_until_resumed() {
        let cache = RecordCache::default();
        let (_, epoch) = cache.get("a");
        cache.offer(&rec(1), epoch);
        cache.suspend();
        assert!(cache.get("a").0.is_none());
        let (_, epoch) = cache.get("a");
        cache.offer(&rec(1), epoch);
        assert!(
            cache.get("a").0.is_none(),
            "offers are refused while suspended"
        );
        cache.resume();
        // A read begun while suspended is refused after the resume too.
        cache.offer(&rec(1), epoch);
        assert!(cache.get("a").0.is_none());
        let (_, epoch) = cache.get("a");
        cache.offer(&rec(2), epoch);
        assert_eq!(cache.get("a").0.map(|r| r.version), Some(2));
    }
}
