//! A PostgreSQL write transaction ([`Tx`]): READ COMMITTED plus explicit row locks. It knows
//! the rows it locked and wrote (read again without a statement), holds back its event rows
//! until something could read them (`deferred_events`), and at commit checks its fences and
//! queues its change notifications in one statement.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::Utc;
use osac_model::Kind;
use sqlx::postgres::PgConnection;
use sqlx::types::Json;
use sqlx::{PgPool, Transaction};
use tokio::sync::broadcast;

use super::{
    CHANNEL, RowLock, decode, delete_row, find_row_by_name, get_row, notice_of, referrers_of,
    release_savepoint, rollback_to_savepoint, run_list, run_list_items, savepoint, ts,
    write_label_rows, write_ref_rows,
};
use super::{meter_open_interval, meter_unmetered_objects};
use crate::deferred_events::DeferredEvents;
use crate::record::to_json;
use crate::record_cache::{RecordCache, Written};
use crate::sql_common::{COLUMNS, check_version};
use crate::{Change, ListQuery, Page, Record, Reference, Result, StoreError, Tx};

/// Starts a write transaction.
pub(super) async fn begin_tx(
    pool: PgPool,
    feed: broadcast::Sender<Change>,
    origin: String,
    cache: Arc<RecordCache>,
) -> Result<Box<dyn Tx>> {
    Ok(Box::new(begin_pg_tx(pool, feed, origin, cache).await?))
}

/// Starts a transaction, as its own type.
pub(super) async fn begin_pg_tx(
    pool: PgPool,
    feed: broadcast::Sender<Change>,
    origin: String,
    cache: Arc<RecordCache>,
) -> Result<PgTx> {
    let tx = pool.begin().await?;
    Ok(PgTx {
        tx,
        changes: Vec::new(),
        unsent: Vec::new(),
        written: Vec::new(),
        locked: Vec::new(),
        events: DeferredEvents::default(),
        ref_targets: Vec::new(),
        fences: Vec::new(),
        savepoints: Vec::new(),
        feed,
        origin,
        cache,
    })
}

/// The statements of a `kv_write` batch: upserts and deletes, a bounded number of rows each.
fn kv_statements<'a>(
    ns: &'a str,
    changes: &'a [(String, Option<String>)],
) -> Vec<sqlx::QueryBuilder<'a, sqlx::Postgres>> {
    let (puts, deletes) = crate::kv_coalesce(changes);
    let mut statements = crate::sql_common::kv_upserts(ns, &puts);
    for chunk in deletes.chunks(crate::KV_CHUNK) {
        let mut q = sqlx::QueryBuilder::new("DELETE FROM kv WHERE ns = ");
        q.push_bind(ns).push(" AND key = ANY(");
        q.push_bind(chunk.iter().map(|k| k.to_string()).collect::<Vec<_>>());
        q.push(")");
        statements.push(q);
    }
    statements
}

/// The last statement of a transaction: locks the shard leases its commit is conditional on
/// (those still held by the named replica with the named token; `FOR KEY SHARE`, see
/// `lease::fence_holds`) and queues its change notifications, which PostgreSQL sends only
/// if the transaction commits. (Written without a join and with the notifications counted
/// in a subquery, so that PostgreSQL keeps one generic plan for it: a join with `unnest`
/// and a `count(pg_notify(…))` beside it would be planned anew at every commit.)
const COMMIT_CHECK: &str = "SELECT ARRAY( \
         SELECT l.shard FROM shard_leases l \
         WHERE l.shard = ANY($3::int[]) \
           AND l.owner = ($4::text[])[array_position($3::int[], l.shard)] \
           AND l.fence = ($5::bigint[])[array_position($3::int[], l.shard)] \
           AND l.expires_at > now() FOR KEY SHARE OF l), \
     (SELECT count(*) FROM (SELECT pg_notify($1, n) FROM unnest($2::text[]) AS n) AS sent)";

/// Runs [`COMMIT_CHECK`]; a lease no longer held refuses the commit ([`StoreError::Fenced`]:
/// the caller drops the transaction, which rolls it back and its notifications with it).
async fn check_fences_and_notify(
    tx: &mut PgConnection,
    fences: &[crate::Fence],
    notices: Vec<String>,
) -> Result<()> {
    let (shards, owners, tokens) = super::lease::fence_arrays(fences);
    let (held, _sent): (Vec<i32>, i64) = sqlx::query_as(COMMIT_CHECK)
        .bind(CHANNEL)
        .bind(notices)
        .bind(&shards)
        .bind(&owners)
        .bind(&tokens)
        .fetch_one(tx)
        .await?;
    // One row per fence still held (a shard's lease row matches at most one token).
    if held.len() == fences.len() {
        return Ok(());
    }
    let lost = shards.iter().find(|s| !held.contains(s)).or(shards.first());
    Err(StoreError::Fenced(lost.copied().unwrap_or_default()))
}

/// The stored row an update replaces: its version, whether the labels change, and its
/// reference rows (sorted).
struct StoredRow {
    version: i64,
    labels_changed: bool,
    refs: Vec<(String, String)>,
}

crate::metering::impl_meter_tx!(PgTx);

/// A PostgreSQL transaction (READ COMMITTED plus explicit row locks).
pub(super) struct PgTx {
    tx: Transaction<'static, sqlx::Postgres>,
    /// Every change, for this process's change feed once committed.
    changes: Vec<Change>,
    /// The changes whose notification is still to be queued (at commit); inserts and updates
    /// queue theirs in their own statement.
    unsent: Vec<Change>,
    /// The rows written, for the cache once committed.
    written: Vec<Written>,
    /// The rows this transaction read with a row lock (as read, and whether the lock is
    /// exclusive), the latest last: while it holds the lock nobody else can change or remove
    /// such a row, so it is read again, and checked before an update, without a statement.
    locked: Vec<(Record, bool)>,
    /// Events inserted and not written yet (see [`DeferredEvents`]).
    events: DeferredEvents,
    /// Every id whose referrers changed (reference rows added or removed), for the cache.
    ref_targets: Vec<String>,
    /// The shard leases the commit is conditional on (see [`Tx::fence`]): shard, replica,
    /// fencing token.
    fences: Vec<crate::Fence>,
    /// Changes, unsent changes, rows written, rows locked, targets and deferred events
    /// recorded when each open savepoint was made, the latest last. (Rolling back to a
    /// savepoint releases the row locks taken since, so those rows are no longer known.)
    savepoints: Vec<[usize; 6]>,
    feed: broadcast::Sender<Change>,
    origin: String,
    cache: Arc<RecordCache>,
}

impl PgTx {
    /// Writes the reference rows of `record`: all of them for a new object (`old` None), else
    /// only when they differ from `old` (the stored ones, sorted); returns the previous
    /// targets when they were rewritten.
    async fn write_refs(
        &mut self,
        record: &Record,
        old: Option<Vec<(String, String)>>,
    ) -> Result<Vec<String>> {
        let mut new = record.references();
        new.sort();
        if old.as_ref() == Some(&new) {
            return Ok(Vec::new());
        }
        self.ref_targets
            .extend(old.iter().flatten().chain(&new).map(|(_, t)| t.clone()));
        write_ref_rows(&mut self.tx, &record.id, &new, old.is_some()).await?;
        Ok(old
            .unwrap_or_default()
            .into_iter()
            .map(|(_, t)| t)
            .collect())
    }

    /// The notification payload of a change of this process, queued by its write's statement
    /// before the transaction commits. It carries no send time: the time from this statement
    /// to the commit is the transaction's, not the notification's, so the receiver does not
    /// count it in `osac_change_feed_delay_seconds` (which measures the notifications stamped
    /// at their commit: status writes, and those queued by the commit check).
    fn notice(&self, change: &Change) -> String {
        notice_of(&self.origin, change, 0)
    }

    /// The row `id` as this transaction knows it without a statement, because it holds the
    /// row's lock: its last write (`Some(None)`: removed), else the row as it locked it
    /// (`exclusive`: only a row it wrote or locked FOR UPDATE, for a caller that needs the
    /// exclusive lock; a shared one would not keep other readers' shared locks out). None:
    /// not known, read it.
    fn known(&self, id: &str, exclusive: bool) -> Option<Option<Record>> {
        Written::last_of(&self.written, id).or_else(|| {
            self.locked
                .iter()
                .rev()
                .find(|(r, held_exclusive)| r.id == id && (*held_exclusive || !exclusive))
                .map(|(r, _)| Some(r.clone()))
        })
    }

    /// Writes an object write's interval changes directly (see `usage_writes`).
    async fn write_interval_changes(
        &mut self,
        object_id: &str,
        writes: crate::metering::IntervalWrites,
    ) -> Result<()> {
        super::usage_writes::write(&mut self.tx, object_id, &writes).await
    }

    /// Open intervals are not kept between statements here: another replica may change them.
    fn known_open_interval(
        &self,
        _object_id: &str,
    ) -> Option<Option<crate::metering::OpenInterval>> {
        None
    }

    fn note_open_interval(
        &mut self,
        _object_id: &str,
        _open: Option<crate::metering::OpenInterval>,
    ) {
    }

    /// For metering: the stored record that `record` replaces (its id at its version) as this
    /// transaction or the record cache knows it without a statement (a write checked against a
    /// version replaces exactly that one: each version of a row is written once). None: not a
    /// metered kind, or not known.
    fn replaced(&self, record: &Record) -> Option<Record> {
        if !osac_model::metering::metered(record.kind) {
            return None;
        }
        let (id, version) = (record.id.as_str(), record.version);
        let known = match self.known(id, false) {
            Some(known) => known,
            None => self.cache.get(id).0,
        };
        known.filter(|r| r.version == version)
    }

    /// Reads a row with a lock (or returns it as known) and remembers it as locked.
    async fn lock_row(&mut self, id: &str, lock: RowLock) -> Result<Option<Record>> {
        let exclusive = matches!(lock, RowLock::Exclusive);
        if let Some(known) = self.known(id, exclusive) {
            return Ok(known);
        }
        if exclusive {
            self.write_events_before_lock().await?;
        }
        let found = get_row(&mut self.tx, id, lock).await?;
        self.remember_locked(found.iter(), exclusive);
        Ok(found)
    }

    fn remember_locked<'a>(&mut self, rows: impl Iterator<Item = &'a Record>, exclusive: bool) {
        self.locked.extend(rows.map(|r| (r.clone(), exclusive)));
    }

    /// What an update needs of the stored row `record` replaces, the row locked: from what
    /// the transaction knows of it without a statement (see [`PgTx::known`]), else read with
    /// [`UPDATE_READ`]. None: no such row.
    async fn stored_row(&mut self, record: &Record) -> Result<Option<StoredRow>> {
        if let Some(known) = self.known(&record.id, false) {
            return Ok(known.map(|row| {
                let mut refs = row.references();
                refs.sort();
                StoredRow {
                    version: row.version,
                    labels_changed: row.labels != record.labels,
                    refs,
                }
            }));
        }
        let current: Option<(i64, String, Vec<String>, Vec<String>)> = sqlx::query_as(UPDATE_READ)
            .bind(&record.id)
            .fetch_optional(&mut *self.tx)
            .await?;
        Ok(current.map(|(version, labels, fields, targets)| {
            let mut refs: Vec<(String, String)> = fields.into_iter().zip(targets).collect();
            refs.sort();
            StoredRow {
                version,
                labels_changed: to_json(&record.labels) != labels,
                refs,
            }
        }))
    }

    /// Writes the deferred events (with their notifications), if any.
    async fn write_events(&mut self) -> Result<()> {
        let origin = &self.origin;
        super::events::write(&mut self.tx, &mut self.events, CHANNEL, |rec| {
            notice_of(origin, &Change::of(rec, false, &[]), 0)
        })
        .await
    }

    /// Writes the deferred events before an exclusive row lock is taken: the lock is held
    /// until the commit, and a row many writers lock (a pool whose counters every
    /// reservation moves) should be held for as few statements as possible, so the events
    /// do not wait for the commit behind it.
    async fn write_events_before_lock(&mut self) -> Result<()> {
        self.write_events().await
    }

    /// Writes the deferred events first if `id` is one of them.
    async fn write_event(&mut self, id: &str) -> Result<()> {
        if self.events.holds(id) {
            self.write_events().await?;
        }
        Ok(())
    }

    /// Writes the deferred events first if a query of `kind` could read them.
    async fn write_events_of(&mut self, kind: Kind) -> Result<()> {
        if kind == Kind::Event {
            self.write_events().await?;
        }
        Ok(())
    }

    /// A change whose notification goes out at commit.
    fn record_unsent(&mut self, change: Change) {
        self.unsent.push(change.clone());
        self.changes.push(change);
    }

    /// The writer read `id` older than it is (another process's change whose notification
    /// has not arrived yet): its cached copy is forgotten so that the retry reads it anew.
    fn forget_stale(&self, id: &str) {
        self.cache.forget(std::iter::once(id), std::iter::empty());
    }
}

/// Inserts a new object's row with its label and reference rows in ONE statement (one round
/// trip instead of one per row; the reference rows' foreign keys are checked at the end of
/// the statement, once the object row is there), and queues its change notification
/// (`notice`; sent only if the transaction commits).
async fn insert_object_rows(
    conn: &mut PgConnection,
    rec: &Record,
    refs: &[(String, String)],
    notice: &str,
) -> Result<()> {
    let (label_keys, label_values): (Vec<&str>, Vec<&str>) = rec
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .unzip();
    let (fields, targets): (Vec<&str>, Vec<&str>) =
        refs.iter().map(|(f, t)| (f.as_str(), t.as_str())).unzip();
    let statement = sqlx::query(
        "WITH object AS ( \
             INSERT INTO objects (id, kind, tenant, name, creator, version, created_at, \
                 deleted_at, labels, annotations, finalizers, body) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id), \
         labels AS ( \
             INSERT INTO object_labels (object_id, key, value) \
             SELECT $1, k, v FROM unnest($13::text[], $14::text[]) AS u(k, v)), \
         refs AS ( \
             INSERT INTO object_refs (object_id, field, target_id) \
             SELECT $1, f, t FROM unnest($15::text[], $16::text[]) AS u(f, t)) \
         SELECT pg_notify($17, $18) FROM object",
    );
    crate::sql_common::bind_object_row!(statement, rec, ts: ts, json: Json)
        .bind(&label_keys)
        .bind(&label_values)
        .bind(&fields)
        .bind(&targets)
        .bind(CHANNEL)
        .bind(notice)
        .execute(conn)
        .await?;
    Ok(())
}

/// Overwrites the object row's mutable columns with the record's and queues its change
/// notification (`notice`; sent only if the transaction commits), in one statement.
async fn update_row_notifying(conn: &mut PgConnection, rec: &Record, notice: &str) -> Result<()> {
    sqlx::query(
        "UPDATE objects SET name = $1, creator = $2, version = $3, deleted_at = $4, labels = $5, \
             annotations = $6, finalizers = $7, body = $8 WHERE id = $9 \
         RETURNING pg_notify($10, $11)",
    )
    .bind(&rec.name)
    .bind(&rec.creator)
    .bind(rec.version)
    .bind(rec.deleted_at.as_ref().map(ts))
    .bind(to_json(&rec.labels))
    .bind(Json(&rec.annotations))
    .bind(to_json(&rec.finalizers))
    .bind(Json(&rec.body))
    .bind(&rec.id)
    .bind(CHANNEL)
    .bind(notice)
    .execute(conn)
    .await?;
    Ok(())
}

/// What an update reads of the stored row, locking it: version, labels and references (by
/// field, the order of [`Record::references`] sorted) in one statement.
const UPDATE_READ: &str = "SELECT o.version, o.labels, \
     ARRAY(SELECT r.field FROM object_refs r WHERE r.object_id = o.id ORDER BY r.field), \
     ARRAY(SELECT r.target_id FROM object_refs r WHERE r.object_id = o.id ORDER BY r.field) \
     FROM objects o WHERE o.id = $1 FOR UPDATE OF o";

#[async_trait]
impl Tx for PgTx {
    // A row this transaction wrote or locked is locked by it until the commit: its last
    // write, or the row as locked, is the row, read or locked, without a statement.
    async fn get(&mut self, id: &str) -> Result<Option<Record>> {
        if let Some(known) = self.known(id, false) {
            return Ok(known);
        }
        get_row(&mut self.tx, id, RowLock::None).await
    }

    /// From the record cache when it holds the row (any version: only what never changes may
    /// be read from it), else from the transaction. A row read here is not offered to the
    /// cache: the transaction may have written it.
    async fn get_stable(&mut self, id: &str) -> Result<Option<Record>> {
        match self.cache.get(id).0 {
            Some(cached) => Ok(Some(cached)),
            None => self.get(id).await,
        }
    }

    // A row this transaction wrote or locked FOR UPDATE is locked again without a statement;
    // one it holds only FOR SHARE is locked FOR UPDATE by a statement (see `PgTx::known`).
    async fn lock(&mut self, id: &str) -> Result<Option<Record>> {
        self.lock_row(id, RowLock::Exclusive).await
    }

    async fn lock_shared(&mut self, id: &str) -> Result<Option<Record>> {
        self.lock_row(id, RowLock::Shared).await
    }

    async fn lock_of(&mut self, kind: Kind, tenant: &str, id: &str) -> Result<Option<Record>> {
        if let Some(known) = self.known(id, true) {
            return Ok(known.filter(|r| r.kind == kind && r.tenant == tenant));
        }
        self.write_events_before_lock().await?;
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM objects o \
             WHERE o.id = $1 AND o.kind = $2 AND o.tenant = $3 FOR UPDATE"
        ))
        .bind(id)
        .bind(kind.collection())
        .bind(tenant)
        .fetch_optional(&mut *self.tx)
        .await?;
        let found = row.as_ref().map(decode).transpose()?;
        self.remember_locked(found.iter(), true);
        Ok(found)
    }

    async fn lock_shared_by_name(
        &mut self,
        kind: Kind,
        tenant: &str,
        name: &str,
    ) -> Result<Option<Record>> {
        // A row updated meanwhile is read again once locked and returned only if it still
        // has that name (PostgreSQL re-checks the condition on the newest version).
        self.write_events_of(kind).await?;
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM objects o \
             WHERE o.kind = $1 AND o.tenant = $2 AND o.name = $3 FOR SHARE"
        ))
        .bind(kind.collection())
        .bind(tenant)
        .bind(name)
        .fetch_optional(&mut *self.tx)
        .await?;
        let found = row.as_ref().map(decode).transpose()?;
        self.remember_locked(found.iter(), false);
        Ok(found)
    }

    async fn lock_shared_all(&mut self, ids: &[String]) -> Result<Vec<Record>> {
        let Some(last) = ids.last() else {
            return Ok(Vec::new());
        };
        if ids.iter().any(|id| self.events.holds(id)) {
            self.write_events().await?;
        }
        // An `IN` list of a fixed size (a power of two, at least 4; padded with a repeated
        // id) rather than `= ANY(array)`: PostgreSQL then keeps one generic plan per size,
        // where an array of unknown length made it plan every execution anew. Rows are locked
        // as the sort returns them: in byte order of their ids.
        let size = ids.len().next_power_of_two().max(4);
        let params: Vec<String> = (1..=size).map(|i| format!("${i}")).collect();
        let sql = format!(
            "SELECT {COLUMNS} FROM objects o WHERE o.id IN ({}) \
             ORDER BY o.id COLLATE \"C\" FOR SHARE",
            params.join(", ")
        );
        let mut statement = sqlx::query(&sql);
        for i in 0..size {
            statement = statement.bind(ids.get(i).unwrap_or(last));
        }
        let rows = statement.fetch_all(&mut *self.tx).await?;
        let found = rows.iter().map(decode).collect::<Result<Vec<_>>>()?;
        self.remember_locked(found.iter(), false);
        Ok(found)
    }

    async fn lock_name(&mut self, name: &str) -> Result<()> {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
            .bind(name)
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    async fn find_by_name(
        &mut self,
        kind: Kind,
        tenant: &str,
        name: &str,
    ) -> Result<Option<Record>> {
        self.write_events_of(kind).await?;
        find_row_by_name(&mut self.tx, kind, tenant, name).await
    }

    async fn list(&mut self, query: &ListQuery) -> Result<Page> {
        self.write_events_of(query.kind).await?;
        run_list(&mut self.tx, query).await
    }

    async fn list_items(&mut self, query: &ListQuery) -> Result<Vec<Record>> {
        self.write_events_of(query.kind).await?;
        run_list_items(&mut self.tx, query).await
    }

    async fn referrers(&mut self, target: &str) -> Result<Vec<Reference>> {
        referrers_of(&mut self.tx, target).await
    }

    async fn insert(&mut self, record: &Record) -> Result<Record> {
        let mut rec = record.clone();
        rec.version = 1;
        let change = Change::of(&rec, false, &[]);
        if DeferredEvents::can_defer(&rec) {
            self.events.defer(rec.clone());
        } else {
            let mut refs = rec.references();
            refs.sort();
            let notice = self.notice(&change);
            insert_object_rows(&mut self.tx, &rec, &refs, &notice).await?;
            self.ref_targets.extend(refs.into_iter().map(|(_, t)| t));
        }
        if osac_model::metering::signature(rec.kind, &rec.body, rec.deleted_at.is_some()).is_some()
        {
            crate::metering::on_write(self, &rec, false, None).await?;
        }
        self.changes.push(change);
        self.written.push(Written::Put(Box::new(rec.clone())));
        Ok(rec)
    }

    async fn update(&mut self, record: &Record) -> Result<Option<Record>> {
        self.write_event(&record.id).await?;
        let Some(StoredRow {
            version: found,
            labels_changed,
            refs: stored,
        }) = self.stored_row(record).await?
        else {
            self.forget_stale(&record.id);
            return Err(StoreError::NotFound(record.id.clone()));
        };
        if let Err(e) = check_version(&record.id, record.version, found) {
            self.forget_stale(&record.id);
            return Err(e);
        }
        if record.deleted_at.is_some() && record.finalizers.is_empty() {
            let replaced = self.replaced(record);
            delete_row(&mut self.tx, &record.id).await?;
            let targets: Vec<String> = stored.into_iter().map(|(_, t)| t).collect();
            self.ref_targets.extend(targets.iter().cloned());
            crate::metering::on_write(self, record, true, replaced.as_ref()).await?;
            self.record_unsent(Change::of(record, true, &targets));
            self.written.push(Written::Gone(record.id.clone()));
            return Ok(None);
        }
        let mut rec = record.clone();
        rec.version = found + 1;
        let mut new_refs = rec.references();
        new_refs.sort();
        // The previous targets go with the change when the references change.
        let old_targets: Vec<String> = if stored == new_refs {
            Vec::new()
        } else {
            stored.iter().map(|(_, t)| t.clone()).collect()
        };
        let change = Change::of(&rec, false, &old_targets);
        let notice = self.notice(&change);
        update_row_notifying(&mut self.tx, &rec, &notice).await?;
        if labels_changed {
            write_label_rows(&mut self.tx, &rec, true).await?;
        }
        self.write_refs(&rec, Some(stored)).await?;
        let replaced = self.replaced(record);
        crate::metering::on_write(self, &rec, false, replaced.as_ref()).await?;
        self.changes.push(change);
        self.written.push(Written::Put(Box::new(rec.clone())));
        Ok(Some(rec))
    }

    async fn remove(&mut self, id: &str) -> Result<()> {
        self.write_event(id).await?;
        let Some(rec) = self.lock_row(id, RowLock::Exclusive).await? else {
            return Err(StoreError::NotFound(id.to_string()));
        };
        delete_row(&mut self.tx, id).await?;
        crate::metering::on_write(self, &rec, true, Some(&rec)).await?;
        self.record_unsent(Change::of(&rec, true, &[]));
        self.ref_targets
            .extend(rec.references().into_iter().map(|(_, t)| t));
        self.written.push(Written::Gone(id.to_string()));
        Ok(())
    }

    /// Checked when the transaction commits, in the statement that sends its change
    /// notifications (one round trip for both; the lease is locked from then until the
    /// commit ends).
    async fn fence(&mut self, shard: i32, replica: &str, token: i64) -> Result<()> {
        let fence = (shard, replica.to_string(), token);
        if !self.fences.contains(&fence) {
            self.fences.push(fence);
        }
        Ok(())
    }

    fn publish(&mut self, change: Change) {
        self.record_unsent(change);
    }

    async fn kv_write(&mut self, ns: &str, changes: &[(String, Option<String>)]) -> Result<()> {
        for mut q in kv_statements(ns, changes) {
            q.build().execute(&mut *self.tx).await?;
        }
        Ok(())
    }

    async fn savepoint(&mut self) -> Result<()> {
        savepoint(&mut self.tx).await?;
        self.savepoints.push([
            self.changes.len(),
            self.unsent.len(),
            self.written.len(),
            self.locked.len(),
            self.ref_targets.len(),
            self.events.len(),
        ]);
        Ok(())
    }

    async fn rollback_to_savepoint(&mut self) -> Result<()> {
        rollback_to_savepoint(&mut self.tx).await?;
        if let Some([changes, unsent, written, locked, ref_targets, events]) = self.savepoints.pop()
        {
            self.changes.truncate(changes);
            self.unsent.truncate(unsent);
            self.written.truncate(written);
            self.locked.truncate(locked);
            self.ref_targets.truncate(ref_targets);
            self.events.truncate(events);
        }
        Ok(())
    }

    async fn release_savepoint(&mut self) -> Result<()> {
        release_savepoint(&mut self.tx).await?;
        self.savepoints.pop();
        Ok(())
    }

    async fn commit(self: Box<Self>) -> Result<()> {
        // Every change is published, events included: watches (`osac events --watch`) stream
        // them; controllers skip kinds nothing reconciles.
        let mut this = *self;
        this.write_events().await?;
        let sent_at_us = Utc::now().timestamp_micros();
        let notices: Vec<String> = this
            .unsent
            .iter()
            .map(|c| notice_of(&this.origin, c, sent_at_us))
            .collect();
        if !notices.is_empty() || !this.fences.is_empty() {
            check_fences_and_notify(&mut this.tx, &this.fences, notices).await?;
        }
        let since = this.cache.epoch();
        this.tx.commit().await?;
        crate::count_write();
        // Before the changes go out: a reader they wake finds what they made.
        this.cache.written(
            this.written,
            this.ref_targets.iter().map(String::as_str),
            since,
        );
        for c in this.changes {
            let _ = this.feed.send(c);
        }
        Ok(())
    }
}
