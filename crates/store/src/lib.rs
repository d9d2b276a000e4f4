//! Persistence of osac-net objects behind one trait, with SQLite (embedded default) and
//! PostgreSQL implementations.
//!
//! Every object is one row: indexed columns for identity and metadata, a JSON body for spec and
//! status, plus side tables for labels (label filters use an index) and references (deletion
//! protection, dependent wake-ups and capacity counts never scan). Writes happen in [`Tx`]
//! transactions; committed writes are published on the change feed.

mod deferred_events;
pub mod events;
pub mod filter_sql;
mod group;
mod lease;
pub mod metering;
mod open_intervals;
pub mod pool;
mod postgres;
mod query;
mod record;
mod record_cache;
mod shared_kv;
mod sql_common;
mod sqlite;
pub mod traffic;
mod turn;

use std::sync::Arc;

use async_trait::async_trait;
use osac_model::Kind;
use tokio::sync::broadcast;

pub use group::{Applied, BATCH_TIME, FenceToken, TURN_LIMIT, Write, WriteSet, apply_in};
pub use lease::{Held, Leases, ReplicaInfo, ReplicaRow, SHARDS, ShardLease};
pub use metering::{OutboxEntry, OutboxEvent};
pub use postgres::PostgresStore;
pub use record::{
    BodyText, Change, ListQuery, Page, PageText, Record, RecordText, Reference, enum_resolver,
};
pub use shared_kv::{KvBatch, Missed};
pub use sqlite::SqliteStore;
pub use traffic::{TrafficSample, TrafficUsageRow};

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The object does not exist (or is gone).
    #[error("object {0} not found")]
    NotFound(String),
    /// A unique constraint refused the write (name taken, address taken).
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// Optimistic locking: the stored version differs from the one the writer read.
    #[error("object {id} was modified concurrently (expected version {expected}, found {found})")]
    Conflict {
        id: String,
        expected: i64,
        found: i64,
    },
    /// The list filter or order could not be parsed or translated.
    #[error(transparent)]
    Filter(#[from] osac_model::filter::FilterError),
    /// The database failed; the request may be retried.
    #[error("database error")]
    Database(#[source] sqlx::Error),
    /// A controller write carried a shard lease this replica no longer holds (another replica
    /// took the shard over): nothing was written.
    #[error("lease of shard {0} lost: write refused")]
    Fenced(i32),
    /// A shared commit (group commit) failed as a whole: nothing of the caller's writes was
    /// written; the request may be retried.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The database is taken by another process (an SQLite file serves one process).
    #[error("{0}")]
    InUse(String),
    /// A request transaction sharing the group commit ([`Store::begin_shared`]) stayed open
    /// longer than this and was rolled back so the other writers could go on: nothing of it
    /// was written; the request may be retried.
    #[error("write transaction open longer than {0:?}: rolled back")]
    TurnExpired(std::time::Duration),
    /// Stored data could not be decoded.
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        if let sqlx::Error::Database(db) = &e
            && db.is_unique_violation()
        {
            let what = match db.constraint() {
                Some("external_ip_address") => "address already allocated in this pool".to_string(),
                Some(c) => c.to_string(),
                None => db.message().to_string(),
            };
            return StoreError::AlreadyExists(what);
        }
        StoreError::Database(e)
    }
}

/// Write transactions committed by this process (object transactions and driver-record
/// writes), for `/metrics` and the benchmark's transactions-per-workload figure.
static WRITE_TRANSACTIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many write transactions this process has committed.
pub fn write_transactions() -> u64 {
    WRITE_TRANSACTIONS.load(std::sync::atomic::Ordering::Relaxed)
}

fn count_write() {
    WRITE_TRANSACTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// Group commits made and the write sets they carried (see [`Store::apply`]).
static GROUP_COMMITS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static GROUPED_SETS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many group commits this process made, and how many write sets they carried in all.
pub fn group_commits() -> (u64, u64) {
    (
        GROUP_COMMITS.load(std::sync::atomic::Ordering::Relaxed),
        GROUPED_SETS.load(std::sync::atomic::Ordering::Relaxed),
    )
}

/// Nanoseconds the group committer spent with a transaction open (from its `BEGIN` to the
/// answers after its `COMMIT`): every SQLite write waits for it, so this is the serial part of
/// a write-heavy run.
static GROUP_COMMIT_BUSY_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How long the group committer has held a transaction open in all (see [`Store::apply`]).
pub fn group_commit_busy() -> std::time::Duration {
    std::time::Duration::from_nanos(GROUP_COMMIT_BUSY_NS.load(std::sync::atomic::Ordering::Relaxed))
}

fn count_group_busy(busy: std::time::Duration) {
    let ns = u64::try_from(busy.as_nanos()).unwrap_or(u64::MAX);
    GROUP_COMMIT_BUSY_NS.fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
}

fn count_group(sets: usize) {
    GROUP_COMMITS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    GROUPED_SETS.fetch_add(
        u64::try_from(sets).unwrap_or(u64::MAX),
        std::sync::atomic::Ordering::Relaxed,
    );
}

/// Result of store calls.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The store: reads outside transactions, writes inside them, and a change feed.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Starts a write transaction of its own. On SQLite write transactions are serialised.
    async fn begin(&self) -> Result<Box<dyn Tx>>;
    /// Starts a write transaction that may share its commit with other writers: on SQLite a
    /// turn inside the group commit's transaction (see [`WriteSet`] and the contract of the
    /// group commit: rolled back alone, `commit()` returns once the shared transaction
    /// committed, [`StoreError::TurnExpired`] after [`TURN_LIMIT`]); elsewhere the same as
    /// [`Store::begin`]. For short request and reconcile transactions that read before they
    /// write; never call the store's other write methods while holding it.
    async fn begin_shared(&self) -> Result<Box<dyn Tx>> {
        self.begin().await
    }
    /// Reads one object by id (any kind).
    async fn get(&self, id: &str) -> Result<Option<Record>>;
    /// Lists objects of a kind with filter, order and paging.
    async fn list(&self, query: &ListQuery) -> Result<Page>;
    /// The page of a list without the total of all that match (one statement fewer where the
    /// caller needs only the objects).
    async fn list_items(&self, query: &ListQuery) -> Result<Vec<Record>> {
        Ok(self.list(query).await?.items)
    }
    /// [`Store::get`] with the body as the stored JSON text, not parsed: for replies that
    /// carry it through. (This default renders the parsed body; the SQL stores read the text.)
    async fn get_text(&self, id: &str) -> Result<Option<RecordText>> {
        self.get(id).await?.map(Record::into_text).transpose()
    }
    /// [`Store::list`] (same filter, order, paging and total) with the bodies as the stored
    /// JSON text, not parsed.
    async fn list_text(&self, query: &ListQuery) -> Result<PageText> {
        self.list(query).await?.into_text()
    }
    /// Objects that reference `target`.
    async fn referrers(&self, target: &str) -> Result<Vec<Reference>>;
    /// [`Store::get`] that may answer from a copy this process keeps. The copy never lags
    /// this process's own committed writes, but may lag another process's (replicas sharing a
    /// PostgreSQL database) by the time its change notification takes to arrive — the change
    /// that then wakes the reader again. For controllers, which are woken by those changes and
    /// write with optimistic locking; requests read with [`Store::get`].
    async fn get_cached(&self, id: &str) -> Result<Option<Record>> {
        self.get(id).await
    }
    /// [`Store::referrers`] that may answer from a copy this process keeps, on the terms of
    /// [`Store::get_cached`]; the same referrers, not always in the same order.
    async fn referrers_cached(&self, target: &str) -> Result<Vec<Reference>> {
        self.referrers(target).await
    }
    /// Ids of every object of a kind (periodic resync).
    async fn ids(&self, kind: Kind) -> Result<Vec<String>>;
    /// Committed changes, for controllers.
    fn subscribe(&self) -> broadcast::Receiver<Change>;
    /// Checks the database answers (readiness).
    async fn ping(&self) -> Result<()>;
    /// How many objects of each kind are in each `status.state` (an object without one counts
    /// under `""`), with one grouped statement: the object gauges of `/metrics`. Rows of a
    /// kind this build does not know are left out.
    async fn count_by_state(&self) -> Result<Vec<StateCount>>;
    /// Loads every record of a driver namespace.
    async fn kv_load(&self, ns: &str) -> Result<Vec<(String, String)>>;
    /// Reads one record of a namespace by key (a point lookup on the primary key).
    async fn kv_get(&self, ns: &str, key: &str) -> Result<Option<String>>;
    /// Writes one driver record.
    async fn kv_put(&self, ns: &str, key: &str, value: &str) -> Result<()>;
    /// Removes one driver record.
    async fn kv_delete(&self, ns: &str, key: &str) -> Result<()>;
    /// Removes up to `limit` events (kind `events`) created before `before`, oldest first, and
    /// returns how many: event retention, one statement on an index, not on the change feed.
    async fn prune_events(&self, before: chrono::DateTime<chrono::Utc>, limit: i64) -> Result<u64>;
    /// Bandwidth metering: adds what each sample's counter counted since its last stored
    /// reading to the usage bucket of `at`, and keeps the samples as the last readings (see
    /// [`traffic`]: a reading below the last one, or of a new epoch, is a reset).
    async fn record_traffic(
        &self,
        at: chrono::DateTime<chrono::Utc>,
        samples: &[TrafficSample],
    ) -> Result<()>;
    /// The usage buckets starting in `[from, to)`, of the tenant with id `tenant_id` when
    /// given (a tenant's identity, not its name: a new tenant of an old name is another
    /// tenant), in time order.
    async fn traffic_usage(
        &self,
        from: chrono::DateTime<chrono::Utc>,
        to: chrono::DateTime<chrono::Utc>,
        tenant_id: Option<&str>,
    ) -> Result<Vec<TrafficUsageRow>>;
    /// Puts (`Some(value)`) and removes (`None`) several driver records in ONE transaction —
    /// all or nothing, one commit — so a driver operation that changes several records (or a
    /// batch of concurrent ones) costs one write; for a key given twice the last change wins.
    async fn kv_write(&self, ns: &str, changes: &[(String, Option<String>)]) -> Result<()>;
    /// Applies a set of writes all or nothing, sharing one transaction (and one commit) with
    /// the sets other tasks submit meanwhile (group commit; see [`WriteSet`] for the
    /// contract). Returns once the set is committed. For writes that need no reads inside
    /// their transaction: controller status writes with their events, driver records.
    async fn apply(&self, set: WriteSet) -> Result<Applied> {
        let mut tx = self.begin().await?;
        let applied = apply_in(tx.as_mut(), &set).await?;
        tx.commit().await?;
        Ok(applied)
    }
    /// The oldest `limit` metering outbox rows, in the order they were written (by `seq`).
    async fn outbox_peek(&self, limit: i64) -> Result<Vec<OutboxEntry>>;
    /// Deletes the outbox rows `seqs` (published and acknowledged); returns how many were
    /// there.
    async fn outbox_ack(&self, seqs: &[i64]) -> Result<u64>;
    /// How many rows the outbox holds.
    async fn outbox_len(&self) -> Result<i64>;
    /// Appends metering events not tied to an object write (an event id already in the
    /// outbox is kept as it is).
    async fn outbox_append(&self, events: &[OutboxEvent]) -> Result<()>;
    /// The usage intervals overlapping `[from, to)` (not clipped), of the tenant with id
    /// `tenant_id` (its Tenant object's id) or of every tenant, ordered by start.
    async fn usage_intervals(
        &self,
        from: chrono::DateTime<chrono::Utc>,
        to: chrono::DateTime<chrono::Utc>,
        tenant_id: Option<&str>,
    ) -> Result<Vec<osac_model::metering::IntervalRow>>;
    /// Writes, in one transaction, the periodic usage record (one outbox CloudEvent) of every
    /// open interval not yet recorded up to `end`, covering the time since its previous record
    /// and, for an ExternalIP or NATGateway, the bytes its bandwidth rows counted that no
    /// earlier record carried; returns how many. Idempotent for one `end`: a second call
    /// (another replica) writes nothing.
    async fn record_usage(&self, end: chrono::DateTime<chrono::Utc>) -> Result<u64>;
    /// Deletes the closed intervals that ended before `before`; never an open one.
    async fn prune_usage(&self, before: chrono::DateTime<chrono::Utc>) -> Result<u64>;
    /// Replica coordination, for stores several processes share (None: this process is the
    /// only one, and owns all controller work).
    fn leases(&self) -> Option<&dyn Leases> {
        None
    }
    /// Starts a write batch of a namespace that other processes also write, after catching up
    /// from generation `seen` (see [`KvBatch`]). None: nobody else writes this store, plain
    /// [`Store::kv_write`] is enough.
    async fn kv_exclusive(&self, _ns: &str, _seen: i64) -> Result<Option<Box<dyn KvBatch>>> {
        Ok(None)
    }
    /// The fast path of a shared namespace's batch, for a writer that is probably current:
    /// if namespace `ns` is still at generation `seen` and every `(shard, replica, token)`
    /// of `fences` still holds, writes `changes` as generation `seen + 1` in one statement
    /// that also holds the leases until it commits (nothing is written, and `seen` returned,
    /// when `changes` is empty) and returns the new generation. Otherwise it writes nothing
    /// and returns None: the caller takes the locked path ([`Store::kv_exclusive`]), which
    /// catches up and checks each fence on its own. None also when the write needs the
    /// locked path anyway (the namespace's first write, journal pruning) and from stores
    /// nobody else writes.
    async fn kv_write_current(
        &self,
        _ns: &str,
        _seen: i64,
        _fences: &[Fence],
        _changes: &[(String, Option<String>)],
    ) -> Result<Option<i64>> {
        Ok(None)
    }
}

/// A shard lease a write is conditional on: shard, replica, fencing token.
pub type Fence = (i32, String, i64);

/// One row of [`Store::count_by_state`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct StateCount {
    pub kind: Kind,
    /// The stored `status.state` (an enum name such as `SUBNET_STATE_READY`), or `""`.
    pub state: String,
    pub count: i64,
}

/// Turns grouped `(collection, state, count)` rows into [`StateCount`]s.
fn state_counts(rows: Vec<(String, String, i64)>) -> Vec<StateCount> {
    rows.into_iter()
        .filter_map(|(collection, state, count)| {
            let kind = Kind::ALL
                .into_iter()
                .find(|k| k.collection() == collection)?;
            Some(StateCount { kind, state, count })
        })
        .collect()
}

/// Rows of a kv table statement (bounds the number of bound parameters per statement).
const KV_CHUNK: usize = 256;

/// The net effect of a `kv_write` batch: the records to upsert and the keys to delete, each key
/// once (its last change), in key order.
fn kv_coalesce(changes: &[(String, Option<String>)]) -> (Vec<(&str, &str)>, Vec<&str>) {
    let mut last: std::collections::BTreeMap<&str, Option<&str>> = Default::default();
    for (key, value) in changes {
        last.insert(key, value.as_deref());
    }
    let mut puts = Vec::new();
    let mut deletes = Vec::new();
    for (key, value) in last {
        match value {
            Some(v) => puts.push((key, v)),
            None => deletes.push(key),
        }
    }
    (puts, deletes)
}

/// A write transaction. Dropping it without `commit` rolls back.
#[async_trait]
pub trait Tx: Send {
    /// Reads one object by id.
    async fn get(&mut self, id: &str) -> Result<Option<Record>>;
    /// Reads one object by id for what never changes once it is stored — its kind, tenant and
    /// the references its spec may not change — where the store can without a round trip: the
    /// row may come from this process's record cache and be an older version (on PostgreSQL,
    /// another replica's write is seen when its notification arrives). Nothing that changes
    /// (state, deletion, labels) may be decided from it: a caller checks that on a row it then
    /// locks. A row of another kind or tenant is returned as it is: the caller filters.
    async fn get_stable(&mut self, id: &str) -> Result<Option<Record>> {
        self.get(id).await
    }
    /// Reads one object and locks it until the transaction ends, so checks made against it and
    /// the writes that follow are atomic (PostgreSQL `FOR UPDATE`; SQLite is already serial).
    async fn lock(&mut self, id: &str) -> Result<Option<Record>>;
    /// Reads one object and keeps it from being updated or deleted until the transaction ends,
    /// while other transactions may hold the same shared lock: for rows that must stay as they
    /// are while this transaction refers to them (a workload's subnets and security groups),
    /// so that concurrent creates referring to one row do not wait for each other (PostgreSQL
    /// `FOR SHARE`; SQLite is already serial, and this is [`Tx::lock`]).
    async fn lock_shared(&mut self, id: &str) -> Result<Option<Record>> {
        self.lock(id).await
    }
    /// The object `id` if it is of `kind` in `tenant`, locked as by [`Tx::lock`], in one step
    /// where the store can: an object of another kind or tenant is neither returned nor (on
    /// PostgreSQL) locked, so a caller naming someone else's id holds no lock on it.
    async fn lock_of(&mut self, kind: Kind, tenant: &str, id: &str) -> Result<Option<Record>> {
        Ok(self
            .lock(id)
            .await?
            .filter(|r| r.kind == kind && r.tenant == tenant))
    }
    /// Finds an object by name within a tenant and share-locks it as [`Tx::lock_shared`] does,
    /// in one step where the store can: the row as it is once locked, None if no row of that
    /// name exists by then.
    async fn lock_shared_by_name(
        &mut self,
        kind: Kind,
        tenant: &str,
        name: &str,
    ) -> Result<Option<Record>> {
        match self.find_by_name(kind, tenant, name).await? {
            Some(found) => self.lock_shared(&found.id).await,
            None => Ok(None),
        }
    }
    /// Share-locks several objects as [`Tx::lock_shared`] does, in ascending byte order of
    /// their ids (every caller locks in one order: no lock-order deadlocks), in one step where
    /// the store can. Returns those that exist, in that order.
    async fn lock_shared_all(&mut self, ids: &[String]) -> Result<Vec<Record>> {
        let mut ids: Vec<&String> = ids.iter().collect();
        ids.sort();
        ids.dedup();
        let mut found = Vec::with_capacity(ids.len());
        for id in ids {
            found.extend(self.lock_shared(id).await?);
        }
        Ok(found)
    }
    /// Serialises this transaction with every other one that locks the same kind, until it
    /// ends — for rules over a whole kind that no row lock covers (pool CIDRs never overlap,
    /// one default NetworkClass), also across processes sharing a PostgreSQL database
    /// (`pg_advisory_xact_lock`; SQLite write transactions are already serial). The
    /// [`Tx::lock_name`] of `osac-kind:<collection>`.
    async fn lock_kind(&mut self, kind: Kind) -> Result<()> {
        self.lock_name(&format!("osac-kind:{}", kind.collection()))
            .await
    }
    /// Serialises this transaction with every other one that locks the same `name`, until it
    /// ends — for rules over a set of rows narrower than a kind (one tenant's quota count),
    /// also across processes sharing a PostgreSQL database (`pg_advisory_xact_lock`; SQLite
    /// write transactions are already serial).
    async fn lock_name(&mut self, name: &str) -> Result<()>;
    /// Finds an object by name within a tenant.
    async fn find_by_name(
        &mut self,
        kind: Kind,
        tenant: &str,
        name: &str,
    ) -> Result<Option<Record>>;
    /// Lists objects inside the transaction.
    async fn list(&mut self, query: &ListQuery) -> Result<Page>;
    /// The page of a list inside the transaction, without the total of all that match (one
    /// statement fewer where the caller needs only the objects).
    async fn list_items(&mut self, query: &ListQuery) -> Result<Vec<Record>> {
        Ok(self.list(query).await?.items)
    }
    /// Objects that reference `target`.
    async fn referrers(&mut self, target: &str) -> Result<Vec<Reference>>;
    /// Inserts a new object (version 1); names are unique per kind and tenant.
    async fn insert(&mut self, record: &Record) -> Result<Record>;
    /// Writes an object if its stored version equals `record.version`, bumping the version.
    /// A deleted object without finalizers is removed instead; then `None` is returned.
    async fn update(&mut self, record: &Record) -> Result<Option<Record>>;
    /// Removes an object now.
    async fn remove(&mut self, id: &str) -> Result<()>;
    /// Makes this transaction's commit conditional on `replica` still holding the lease of
    /// `shard` with fencing token `token`: if it does not, the store refuses — at once or when
    /// committing ([`StoreError::Fenced`]) — and nothing of the transaction is written. The
    /// lease stays locked from the check until the transaction ends, so no other replica takes
    /// the shard over between the check and the commit. (PostgreSQL checks at commit, in the
    /// statement that sends the change notifications.) Stores with a single process (no
    /// [`Store::leases`]) have nothing to check.
    async fn fence(&mut self, _shard: i32, _replica: &str, _token: i64) -> Result<()> {
        Ok(())
    }
    /// Publishes `change` on the change feed (on PostgreSQL also to the other processes) when
    /// this transaction commits, like the changes of its object writes: for what the feed does
    /// not otherwise see, such as a revoked token (kind [`Change::kind`] unknown to
    /// controllers, which ignore it).
    fn publish(&mut self, change: Change);
    /// [`Store::kv_write`] inside this transaction.
    async fn kv_write(&mut self, ns: &str, changes: &[(String, Option<String>)]) -> Result<()>;
    /// Marks a point this transaction can roll back to ([`Tx::rollback_to_savepoint`]) without
    /// losing what was written before it. Savepoints nest: a rollback or release ends the latest
    /// one still open.
    async fn savepoint(&mut self) -> Result<()>;
    /// Undoes every write (and unpublishes every change) since [`Tx::savepoint`].
    async fn rollback_to_savepoint(&mut self) -> Result<()>;
    /// Keeps the writes since [`Tx::savepoint`] and forgets the savepoint.
    async fn release_savepoint(&mut self) -> Result<()>;
    /// Commits and publishes the changes.
    async fn commit(self: Box<Self>) -> Result<()>;
}

/// Opens a store from a URL: `sqlite://path` / `sqlite::memory:` or `postgres://…`; runs migrations.
///
/// An SQLite file is served by one store per process: opening it again while a store on it
/// is alive (a server restarted in-process, a tool next to a server) returns that store, so
/// its object cache, write lock and change feed stay the only ones; another process is
/// refused ([`StoreError::InUse`]).
pub async fn open(url: &str) -> Result<Arc<dyn Store>> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Arc::new(PostgresStore::connect(url).await?));
    }
    let Some(file) = SqliteStore::file_of(url)? else {
        return Ok(Arc::new(SqliteStore::connect(url).await?));
    };
    let mut open = SQLITE_STORES.lock().await;
    // A store of this process that was on the file and is gone may still be mid-drop on
    // another thread (its last reference released, its file lock not yet): wait for it.
    let released_here = match open.get(&file) {
        Some(store) => match store.upgrade() {
            Some(store) => return Ok(store),
            None => true,
        },
        None => false,
    };
    open.retain(|_, store| store.strong_count() > 0);
    let store = Arc::new(connect_sqlite_file(url, released_here).await?);
    open.insert(file, Arc::downgrade(&store));
    Ok(store)
}

/// How long [`open`] waits for a store of this process that is being dropped to release the
/// database file's lock.
const RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Connects to an SQLite file; when `released_here` (this process's own store on the file has
/// just been dropped), a lock still held is that store finishing its drop, so it is retried for
/// up to [`RELEASE_WAIT`] instead of being reported as another process.
async fn connect_sqlite_file(url: &str, released_here: bool) -> Result<SqliteStore> {
    let started = std::time::Instant::now();
    loop {
        match SqliteStore::connect(url).await {
            Err(StoreError::InUse(_)) if released_here && started.elapsed() < RELEASE_WAIT => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            other => return other,
        }
    }
}

/// The SQLite stores alive in this process, by database file.
static SQLITE_STORES: std::sync::LazyLock<
    tokio::sync::Mutex<std::collections::HashMap<std::path::PathBuf, std::sync::Weak<SqliteStore>>>,
> = std::sync::LazyLock::new(Default::default);

#[cfg(test)]
mod tests {
    use super::*;

    /// A server restarted in-process opens its file again right after dropping its store; the
    /// old store's drop may still hold the file lock on another thread for a moment. That is
    /// not another process, and the open must wait for it rather than fail.
    #[tokio::test]
    async fn reopening_waits_for_this_process_store_to_release_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("osac.db");
        let url = format!("sqlite://{}", path.display());
        drop(open(&url).await.unwrap());
        // The dropped store's lock, still held while its drop finishes elsewhere.
        let held = sqlite::lock_database(&path).unwrap();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            drop(held);
        });
        let reopened = open(&url).await;
        releaser.join().unwrap();
        assert!(reopened.is_ok(), "{:?}", reopened.err());
    }

    /// Another process's lock is still refused (here: a lock not left by a store of this
    /// process).
    #[tokio::test]
    async fn a_file_locked_without_a_store_of_this_process_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("osac.db");
        let _other = sqlite::lock_database(&path).unwrap();
        let url = format!("sqlite://{}", path.display());
        assert!(matches!(open(&url).await, Err(StoreError::InUse(_))));
    }
}
