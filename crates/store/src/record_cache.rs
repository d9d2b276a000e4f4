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
//!   references keeps the cached referrers of what it references) — except where it knows
//!   the new list: a target whose only changed rows are those of new objects keeps its list
//!   with them added, and a new object's list is the new objects of its commit that
//!   reference it (nothing could reference it before). Either way older reads are refused.
//!   A kept list holds the same referrers as a read, not always in its order.
//! - Reads inside a write transaction use the cache only for rows the transaction has not
//!   written: it holds the write lock, so the cache is the committed state, but not its own
//!   uncommitted writes.
//!
//! PostgreSQL (transactions commit concurrently, other processes write too):
//! - A commit of this process *puts* the rows it wrote, after the commit and before its
//!   changes go out on the change feed — unless the cache holds a newer version (a later
//!   commit's put came first) or the row was forgotten since the commit began (something this
//!   process does not know the outcome of happened to it): then the row is forgotten.
//!   Removed rows, and the referrers of what written rows reference, are forgotten (or
//!   extended, as above).
//! - Another process's change notification forgets its row and the referrers of what it
//!   references when it arrives, before the change is passed on: a reader woken by a change
//!   never reads the copy the change made stale.
//! - What can lag is another process's write until its notification arrives: such copies
//!   are only for [`Store::get_cached`](crate::Store::get_cached) readers (controllers).
//! - While the notification listener is not connected, notifications may be lost: the cache
//!   is [suspended](RecordCache::suspend) (emptied, offers refused) until it listens again.
//!
//! Both: a read offered after a row was forgotten, or older than the cached version, is
//! refused; forgetting is per row (and per referrer list), so writes of other rows do not
//! refuse a read.
//!
//! Bounded: when full, half of it is dropped (correctness never depends on an entry).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use chrono::SubsecRound;
use osac_model::Kind;

use crate::{Record, Reference};

/// Records (and referrer lists) kept at most: enough for the objects reconciles read again and
/// again (classes, networks, subnets, groups, the workloads in flight), small enough that a
/// store of 100,000 objects stays well within its memory budget.
const CAPACITY: usize = 8_192;

/// What one committed transaction wrote.
#[derive(Debug, Clone)]
pub(crate) enum Written {
    /// The row as stored now.
    Put(Box<Record>),
    /// The row is gone.
    Gone(String),
}

impl Written {
    /// The id of the row written.
    pub(crate) fn id(&self) -> &str {
        match self {
            Written::Put(r) => &r.id,
            Written::Gone(id) => id,
        }
    }

    /// The row `id` as the last of `writes` left it: `Some(None)` when removed, `None` when
    /// `writes` do not touch it. The record is as a read of its row returns it.
    pub(crate) fn last_of(writes: &[Written], id: &str) -> Option<Option<Record>> {
        writes.iter().rev().find_map(|w| match w {
            Written::Put(r) if r.id == id => Some(Some(as_stored(r))),
            Written::Gone(gone) if gone == id => Some(None),
            _ => None,
        })
    }
}

/// A record as a read of its row returns it: timestamps are stored to the microsecond.
pub(crate) fn as_stored(record: &Record) -> Record {
    let mut rec = record.clone();
    rec.created_at = rec.created_at.trunc_subsecs(6);
    rec.deleted_at = rec.deleted_at.map(|t| t.trunc_subsecs(6));
    rec
}

/// How many forgotten ids are remembered at most; beyond it they are all dropped and every
/// read or put begun before is refused (the horizon moves).
const FORGOTTEN_CAPACITY: usize = 4 * CAPACITY;

#[derive(Default)]
struct Inner {
    records: HashMap<String, Record>,
    /// Referrers by target id (what `Store::referrers` answers).
    referrers: HashMap<String, Vec<Reference>>,
    /// The id of the named record kept under (kind, tenant, name): a hint, checked against
    /// the kept record on every lookup (a record renamed or forgotten since leaves it stale).
    names: HashMap<(Kind, String, String), String>,
    /// Counts the forgettings: a reader notes it before reading the database.
    epoch: u64,
    /// The epoch at which each row was last forgotten.
    forgotten: HashMap<String, u64>,
    /// The epoch at which each target's referrers were last forgotten.
    forgotten_referrers: HashMap<String, u64>,
    /// Reads and puts begun before this epoch are refused (the forgotten maps were dropped, or
    /// the cache was emptied, halved or suspended).
    horizon: u64,
    /// Offers are refused (see [`RecordCache::suspend`]).
    suspended: bool,
}

impl Inner {
    /// Whether a row read (or written) at epoch `since` may still be kept.
    fn row_current(&self, id: &str, since: u64) -> bool {
        !self.suspended
            && since >= self.horizon
            && self.forgotten.get(id).is_none_or(|at| *at <= since)
    }

    /// Whether referrers of `target` read at epoch `since` may still be kept.
    fn referrers_current(&self, target: &str, since: u64) -> bool {
        !self.suspended
            && since >= self.horizon
            && self
                .forgotten_referrers
                .get(target)
                .is_none_or(|at| *at <= since)
    }

    /// A commit's writes, made at epoch `since` (see [`RecordCache::written`]).
    fn apply<'a>(
        &mut self,
        writes: Vec<Written>,
        targets: impl Iterator<Item = &'a str>,
        since: u64,
    ) {
        let at = self.next_epoch();
        let added = AddedReferrers::of(&writes);
        let mut changed: HashMap<&str, usize> = HashMap::new();
        for target in targets {
            *changed.entry(target).or_default() += 1;
        }
        // A new object's referrers are the new objects of the same commit that reference it:
        // nothing else could reference it before the commit, and a later commit that does
        // forgets (or extends) the list.
        let gone: std::collections::HashSet<&str> = writes
            .iter()
            .filter_map(|w| match w {
                Written::Gone(id) => Some(id.as_str()),
                Written::Put(_) => None,
            })
            .collect();
        let created: Vec<&str> = writes
            .iter()
            .filter_map(|w| match w {
                Written::Put(record)
                    if record.version == 1
                        && osac_model::refs::is_referenced(record.kind)
                        && !gone.contains(record.id.as_str()) =>
                {
                    Some(record.id.as_str())
                }
                _ => None,
            })
            .collect();
        for (target, changes) in &changed {
            // Kept up to date, not re-read, when every reference row the commit changed for
            // the target is a new object's: the list is then the kept one plus those.
            let kept = match added.to(target) {
                Some(new) if new.len() == *changes && self.referrers_current(target, since) => {
                    if created.contains(target) {
                        Some(new.clone())
                    } else {
                        // Taken out, not copied: a list can hold thousands (every VM of a
                        // security group), and it is forgotten below anyway.
                        self.referrers.remove(*target).map(|mut list| {
                            for r in new {
                                if !list
                                    .iter()
                                    .any(|k| k.source == r.source && k.field == r.field)
                                {
                                    list.push(r.clone());
                                }
                            }
                            list
                        })
                    }
                }
                _ => None,
            };
            // Forgotten either way, so that a read begun before is not kept over this.
            self.forget_referrers(target, at);
            if let Some(list) = kept
                && self.referrers.len() < CAPACITY
            {
                self.referrers.insert(target.to_string(), list);
            }
        }
        // The new objects nothing in the commit references: none yet.
        for id in created {
            if !changed.contains_key(id)
                && self.referrers_current(id, since)
                && self.referrers.len() < CAPACITY
            {
                self.referrers.insert(id.to_string(), Vec::new());
            }
        }
        for w in writes {
            match w {
                Written::Put(record) if record.kind == Kind::Event => {}
                Written::Put(record) if self.row_current(&record.id, since) => self.keep(*record),
                Written::Put(record) => self.forget_row(&record.id, at),
                Written::Gone(id) => self.forget_row(&id, at),
            }
        }
    }

    /// Starts a new epoch and returns it.
    fn next_epoch(&mut self) -> u64 {
        self.epoch += 1;
        self.epoch
    }

    fn forget_row(&mut self, id: &str, at: u64) {
        self.records.remove(id);
        self.forgotten.insert(id.to_string(), at);
        if self.forgotten.len() > FORGOTTEN_CAPACITY {
            self.forgotten.clear();
            self.horizon = at;
        }
    }

    fn forget_referrers(&mut self, target: &str, at: u64) {
        self.referrers.remove(target);
        self.forgotten_referrers.insert(target.to_string(), at);
        if self.forgotten_referrers.len() > FORGOTTEN_CAPACITY {
            self.forgotten_referrers.clear();
            self.horizon = at;
        }
    }

    /// Keeps `record` unless a newer version is cached.
    fn keep(&mut self, record: Record) {
        if self
            .records
            .get(&record.id)
            .is_some_and(|cached| cached.version >= record.version)
        {
            return;
        }
        if self.records.len() >= CAPACITY {
            self.evict_half();
        }
        let record = as_stored(&record);
        if let Some(name) = &record.name {
            self.names.insert(
                (record.kind, record.tenant.clone(), name.clone()),
                record.id.clone(),
            );
        }
        self.records.insert(record.id.clone(), record);
    }

    /// Makes room: drops every other kept record (in the map's arbitrary order, so each one
    /// stays with even odds and the records read again and again are soon back) and the
    /// name hints of those dropped, and refuses the offers begun before (a dropped record
    /// may have been newer than what such an offer read).
    fn evict_half(&mut self) {
        let mut keep = false;
        self.records.retain(|_, _| {
            keep = !keep;
            keep
        });
        let records = &self.records;
        self.names.retain(|_, id| records.contains_key(id));
        self.horizon = self.next_epoch();
    }

    /// The same for the kept referrer lists.
    fn evict_half_referrers(&mut self) {
        let mut keep = false;
        self.referrers.retain(|_, _| {
            keep = !keep;
            keep
        });
        self.horizon = self.next_epoch();
    }

    /// Empties the cache and refuses what began before.
    fn empty(&mut self) {
        self.horizon = self.next_epoch();
        self.records.clear();
        self.names.clear();
        self.referrers.clear();
        self.forgotten.clear();
        self.forgotten_referrers.clear();
    }
}

/// The references a commit's new objects add, by target, in the order the objects were
/// written (the order of their rows).
struct AddedReferrers(HashMap<String, Vec<Reference>>);

impl AddedReferrers {
    fn of(writes: &[Written]) -> Self {
        let mut by_target: HashMap<String, Vec<Reference>> = HashMap::new();
        for w in writes {
            if let Written::Put(record) = w
                && record.version == 1
            {
                for (field, target) in record.references() {
                    by_target.entry(target).or_default().push(Reference {
                        source: record.id.clone(),
                        source_kind: record.kind,
                        field,
                    });
                }
            }
        }
        Self(by_target)
    }

    fn to(&self, target: &str) -> Option<&Vec<Reference>> {
        self.0.get(target)
    }
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
            guard.empty();
            self.inner.clear_poison();
        }
        guard
    }

    /// The epoch now: what a writer notes before its commit (see [`RecordCache::written`]).
    pub(crate) fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    /// The cached record, and the epoch to offer a database read with on a miss.
    pub(crate) fn get(&self, id: &str) -> (Option<Record>, u64) {
        let inner = self.lock();
        (inner.records.get(id).cloned(), inner.epoch)
    }

    /// The kept record of `kind` named `name` in `tenant`, if one is kept. On SQLite that is
    /// the committed row of that name (kept records are exact there, and names are unique per
    /// kind and tenant); a miss says nothing.
    pub(crate) fn named(&self, kind: Kind, tenant: &str, name: &str) -> Option<Record> {
        let inner = self.lock();
        let id = inner
            .names
            .get(&(kind, tenant.to_string(), name.to_string()))?;
        inner
            .records
            .get(id)
            .filter(|r| r.kind == kind && r.tenant == tenant && r.name.as_deref() == Some(name))
            .cloned()
    }

    /// Offers a row read from the database after [`RecordCache::get`] returned `epoch`: kept
    /// unless the row was forgotten since or a newer version is cached. Events are never
    /// cached (they are pruned outside transactions).
    pub(crate) fn offer(&self, record: &Record, epoch: u64) {
        if record.kind == Kind::Event {
            return;
        }
        let mut inner = self.lock();
        if inner.row_current(&record.id, epoch) {
            inner.keep(record.clone());
        }
    }

    /// The cached referrers of `target`, and the epoch to offer a database read with.
    pub(crate) fn referrers(&self, target: &str) -> (Option<Vec<Reference>>, u64) {
        let inner = self.lock();
        (inner.referrers.get(target).cloned(), inner.epoch)
    }

    /// Offers referrers read from the database after [`RecordCache::referrers`] returned
    /// `epoch`: kept unless they were forgotten since.
    pub(crate) fn offer_referrers(&self, target: &str, referrers: &[Reference], epoch: u64) {
        let mut inner = self.lock();
        if !inner.referrers_current(target, epoch) {
            return;
        }
        if inner.referrers.len() >= CAPACITY {
            inner.evict_half_referrers();
            return;
        }
        inner
            .referrers
            .insert(target.to_string(), referrers.to_vec());
    }

    /// Applies a committed SQLite transaction's writes (call before releasing the write lock,
    /// so commits arrive in order and nothing is forgotten in between): `writes` are its rows,
    /// `targets` every id whose reference rows it added or removed (whose referrers changed).
    pub(crate) fn committed<'a>(
        &self,
        writes: Vec<Written>,
        targets: impl Iterator<Item = &'a str>,
    ) {
        if writes.is_empty() {
            return;
        }
        let mut inner = self.lock();
        let since = inner.epoch;
        inner.apply(writes, targets, since);
    }

    /// Applies a committed PostgreSQL transaction's writes, `since` being the
    /// [`RecordCache::epoch`] noted before it committed: its rows are kept unless they were
    /// forgotten since (then forgotten again) or a newer version is cached; removed rows and
    /// the referrers of `targets` are forgotten.
    pub(crate) fn written<'a>(
        &self,
        writes: Vec<Written>,
        targets: impl Iterator<Item = &'a str>,
        since: u64,
    ) {
        self.lock().apply(writes, targets, since);
    }

    /// Forgets the rows `ids` and the referrers of `targets` (another process's change, or a
    /// row found newer than its copy), and refuses the reads of them offered across it.
    pub(crate) fn forget<'a>(
        &self,
        ids: impl Iterator<Item = &'a str>,
        targets: impl Iterator<Item = &'a str>,
    ) {
        let mut inner = self.lock();
        let at = inner.next_epoch();
        for id in ids {
            inner.forget_row(id, at);
        }
        for target in targets {
            inner.forget_referrers(target, at);
        }
    }

    /// Empties the cache and refuses every offer until [`RecordCache::resume`]: for while
    /// the changes that would make entries stale may not arrive.
    pub(crate) fn suspend(&self) {
        let mut inner = self.lock();
        inner.empty();
        inner.suspended = true;
    }

    /// Takes offers again (of reads begun from now on) after [`RecordCache::suspend`].
    pub(crate) fn resume(&self) {
        let mut inner = self.lock();
        inner.empty();
        inner.suspended = false;
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

    /// A full cache drops half of what it keeps, never more than it may hold, and refuses an
    /// offer begun before: the dropped copy of a row may have been newer than that read.
    #[test]
    fn a_full_cache_drops_half_and_refuses_older_reads() {
        let cache = RecordCache::default();
        let numbered = |n: usize, version: i64| {
            let mut r = rec(version);
            r.id = format!("r{n}");
            r
        };
        let (_, before) = cache.get("r0");
        for n in 0..CAPACITY {
            cache.committed(
                vec![Written::Put(Box::new(numbered(n, 2)))],
                std::iter::empty(),
            );
        }
        assert_eq!(cache.lock().records.len(), CAPACITY);
        cache.committed(
            vec![Written::Put(Box::new(numbered(CAPACITY, 2)))],
            std::iter::empty(),
        );
        let kept = cache.lock().records.len();
        assert!(
            (CAPACITY / 2..=CAPACITY / 2 + 1).contains(&kept),
            "half kept: {kept}"
        );
        let dropped = (0..CAPACITY)
            .find(|n| cache.get(&format!("r{n}")).0.is_none())
            .expect("some row was dropped");
        cache.offer(&numbered(dropped, 1), before);
        assert!(
            cache.get(&format!("r{dropped}")).0.is_none(),
            "an older read does not come back in place of the dropped newer copy"
        );
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

    fn subnet_of(id: &str, vn: &str, version: i64) -> Record {
        let mut r = Record::new(Kind::Subnet, "t", json!({"spec": {"virtual_network": vn}}));
        r.id = id.into();
        r.version = version;
        r
    }

    fn sources(cache: &RecordCache, target: &str) -> Option<Vec<String>> {
        cache
            .referrers(target)
            .0
            .map(|list| list.into_iter().map(|r| r.source).collect())
    }

    #[test]
    fn referrers_of_a_written_row_s_targets_are_forgotten() {
        let cache = RecordCache::default();
        let (_, epoch) = cache.referrers("vn");
        cache.offer_referrers("vn", &[], epoch);
        assert_eq!(cache.referrers("vn").0.map(|r| r.len()), Some(0));
        // A subnet moved to the VN from another is written: the VN's referrers (and the
        // other's) must be read again.
        cache.committed(
            vec![Written::Put(Box::new(subnet_of("s", "vn", 2)))],
            ["old-vn", "vn"].into_iter(),
        );
        assert!(cache.referrers("vn").0.is_none());
    }

    /// A commit that only adds new referrers extends the kept list instead of dropping it, and
    /// a read begun before that commit is not kept over the extended list.
    #[test]
    fn new_referrers_extend_the_kept_list() {
        let cache = RecordCache::default();
        let (_, epoch) = cache.referrers("vn");
        cache.offer_referrers("vn", &[], epoch);
        let (_, before) = cache.referrers("vn");
        cache.committed(
            vec![Written::Put(Box::new(subnet_of("s1", "vn", 1)))],
            ["vn"].into_iter(),
        );
        assert_eq!(sources(&cache, "vn"), Some(vec!["s1".to_string()]));
        cache.offer_referrers("vn", &[], before);
        assert_eq!(
            sources(&cache, "vn"),
            Some(vec!["s1".to_string()]),
            "an older read is refused"
        );
        // A new subnet and a removed one in one commit: read again.
        cache.committed(
            vec![
                Written::Put(Box::new(subnet_of("s2", "vn", 1))),
                Written::Gone("s1".into()),
            ],
            ["vn", "vn"].into_iter(),
        );
        assert!(cache.referrers("vn").0.is_none());
    }

    /// A new object's referrers are known at its commit: those made with it.
    #[test]
    fn a_new_object_s_referrers_are_those_made_with_it() {
        let cache = RecordCache::default();
        let mut vn = Record::new(Kind::VirtualNetwork, "t", json!({"spec": {}}));
        vn.id = "vn-new".into();
        cache.committed(
            vec![
                Written::Put(Box::new(vn)),
                Written::Put(Box::new(subnet_of("s1", "vn-new", 1))),
            ],
            ["vn-new"].into_iter(),
        );
        assert_eq!(sources(&cache, "vn-new"), Some(vec!["s1".to_string()]));
        assert_eq!(
            sources(&cache, "s1"),
            Some(vec![]),
            "nothing references the new subnet yet"
        );
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

    #[test]
    fn a_commit_puts_its_rows_unless_a_newer_one_or_a_forgetting_came_first() {
        let cache = RecordCache::default();
        // Two commits of one row finish in the wrong order: the newer stays.
        let since = cache.epoch();
        cache.written(
            vec![Written::Put(Box::new(rec(3)))],
            std::iter::empty(),
            since,
        );
        cache.written(
            vec![Written::Put(Box::new(rec(2)))],
            std::iter::empty(),
            since,
        );
        assert_eq!(cache.get("a").0.map(|r| r.version), Some(3));
        // Another process's change arrives between a commit and its put: nothing is kept.
        let since = cache.epoch();
        cache.forget(["a"].into_iter(), std::iter::empty());
        cache.written(
            vec![Written::Put(Box::new(rec(4)))],
            std::iter::empty(),
            since,
        );
        assert!(cache.get("a").0.is_none());
        // Writes of other rows do not refuse a read of this one.
        let (_, epoch) = cache.get("a");
        cache.forget(["b"].into_iter(), ["vn"].into_iter());
        cache.offer(&rec(5), epoch);
        assert_eq!(cache.get("a").0.map(|r| r.version), Some(5));
    }

    #[test]
    fn an_older_read_never_replaces_a_newer_copy() {
        let cache = RecordCache::default();
        let (_, epoch) = cache.get("a");
        cache.written(
            vec![Written::Put(Box::new(rec(2)))],
            std::iter::empty(),
            epoch,
        );
        cache.offer(&rec(1), epoch);
        assert_eq!(cache.get("a").0.map(|r| r.version), Some(2));
    }
}
