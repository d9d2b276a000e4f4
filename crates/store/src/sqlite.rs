//! SQLite backend: the embedded default. One file under the data dir, WAL mode. Write
//! transactions are serialised in-process (the SQLite way), so check-then-write sequences are
//! atomic without row locks; reads run concurrently from a pool.

mod batch;
mod commit_statements;
mod events;
mod page;
mod usage_writes;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use osac_model::Kind;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Row, SqlitePool, Transaction};
use tokio::sync::{Mutex, OwnedMutexGuard, broadcast};

use crate::deferred_events::DeferredEvents;
use crate::filter_sql::Dialect;
use crate::group::GroupCommit;
use crate::open_intervals::{OpenIntervals, PendingIntervals};
use crate::record::{BodyText, parse_json, parse_ts, to_json, ts_text};
use crate::record_cache::{RecordCache, Written, as_stored};
use crate::sql_common::{COLUMNS, check_version};
use crate::{
    Applied, Change, ListQuery, Page, PageText, Record, RecordText, Reference, Result, Store,
    StoreError, Tx, Write, WriteSet,
};
use batch::StatementBatch;
use usage_writes::DeferredIntervals;

/// The SQLite store.
pub struct SqliteStore {
    pool: SqlitePool,
    write_lock: Arc<Mutex<()>>,
    feed: broadcast::Sender<Change>,
    group: GroupCommit,
    /// Recently read and written objects: this process is the database's only writer.
    cache: Arc<RecordCache>,
    /// The open usage intervals of recently metered objects (same reason).
    open_intervals: Arc<OpenIntervals>,
    /// Held for the store's lifetime: one process per database file (see [`lock_database`]).
    _owner: Option<std::fs::File>,
}

/// Takes the database file's owner lock (`<file>.lock`, an exclusive advisory lock), or fails
/// when another process has the file open as its store: SQLite here serves one process — its
/// object cache and in-process change feed are only right if nobody else writes the file
/// (several servers share a PostgreSQL database instead).
pub(crate) fn lock_database(path: &std::path::Path) -> Result<std::fs::File> {
    let lock_path = {
        let mut p = path.as_os_str().to_owned();
        p.push(".lock");
        std::path::PathBuf::from(p)
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| StoreError::InUse(format!("cannot open {}: {e}", lock_path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(StoreError::InUse(format!(
            "the SQLite database {} is open in another osac process (one process per SQLite file; use PostgreSQL for several servers)",
            path.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(StoreError::InUse(format!(
            "cannot lock {}: {e}",
            lock_path.display()
        ))),
    }
}

impl SqliteStore {
    /// The database file of `url` as an absolute path (None for an in-memory database): the
    /// identity under which [`crate::open`] shares one store per file in a process.
    pub fn file_of(url: &str) -> Result<Option<std::path::PathBuf>> {
        if url.contains(":memory:") {
            return Ok(None);
        }
        let parsed = SqliteConnectOptions::from_str(url)?;
        let path = std::path::absolute(parsed.get_filename())
            .map_err(|e| StoreError::InUse(format!("database path: {e}")))?;
        Ok(Some(path))
    }

    /// Opens (creating if needed) the database at `url` (`sqlite://file.db` or `sqlite::memory:`).
    /// Fails when another process has the file open as its store; within a process, open it
    /// through [`crate::open`], which hands out one store per file.
    pub async fn connect(url: &str) -> Result<Self> {
        let memory = url.contains(":memory:");
        let parsed = SqliteConnectOptions::from_str(url)?;
        let owner = if memory {
            None
        } else {
            Some(lock_database(parsed.get_filename())?)
        };
        let opts = parsed
            .create_if_missing(true)
            .journal_mode(if memory {
                SqliteJournalMode::Memory
            } else {
                SqliteJournalMode::Wal
            })
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true)
            .pragma("cache_size", "-8192")
            .pragma("temp_store", "memory")
            // A page of a list (up to 1,000 rows) crosses from the connection's thread without
            // the thread stopping to wait for the reader (sqlx's default buffer is 50 rows).
            .row_buffer_size(1024);
        // An in-memory database exists per connection: keep exactly one.
        let max = if memory { 1 } else { 8 };
        let pool = SqlitePoolOptions::new()
            .max_connections(max)
            .min_connections(1)
            // A connection to a local file does not go stale: no ping round trip to the
            // connection's thread before every statement.
            .test_before_acquire(false)
            .connect_with(opts)
            .await?;
        sqlx::migrate!("./migrations/sqlite")
            .run(&pool)
            .await
            .map_err(|e| StoreError::Database(sqlx::Error::Migrate(Box::new(e))))?;
        let (feed, _) = broadcast::channel(65536);
        let write_lock = Arc::new(Mutex::new(()));
        spawn_statistics_refresh(pool.clone(), write_lock.clone());
        let cache = Arc::new(RecordCache::default());
        let open_intervals = Arc::new(OpenIntervals::default());
        let mut tx = begin_sqlite_tx(
            pool.clone(),
            write_lock.clone(),
            feed.clone(),
            cache.clone(),
            open_intervals.clone(),
        )
        .await?;
        let opened = crate::metering::backfill(&mut tx).await?;
        Box::new(tx).commit().await?;
        if opened > 0 {
            tracing::info!(
                opened,
                "metering: opened the intervals of objects stored before"
            );
        }
        let group = {
            let (pool, write_lock, feed) = (pool.clone(), write_lock.clone(), feed.clone());
            let (cache, open_intervals) = (cache.clone(), open_intervals.clone());
            GroupCommit::start(Box::new(move || {
                Box::pin(begin_tx(
                    pool.clone(),
                    write_lock.clone(),
                    feed.clone(),
                    cache.clone(),
                    open_intervals.clone(),
                ))
            }))
        };
        Ok(Self {
            pool,
            // The statistics refresh writes too: it must take the same lock as transactions.
            write_lock,
            feed,
            group,
            cache,
            open_intervals,
            _owner: owner,
        })
    }
}

/// How often planner statistics are refreshed. Label filters are only fast when SQLite knows
/// the label index is selective, and tables grow quickly after bulk loads.
const STATISTICS_INTERVAL: Duration = Duration::from_secs(30);

/// Refreshes planner statistics now and then (sampled `ANALYZE`, a few milliseconds).
fn spawn_statistics_refresh(pool: SqlitePool, write_lock: Arc<Mutex<()>>) {
    tokio::spawn(async move {
        loop {
            {
                let _guard = write_lock.lock().await;
                if let Err(e) = sqlx::query("PRAGMA analysis_limit = 400; ANALYZE")
                    .execute(&pool)
                    .await
                {
                    tracing::debug!(error = %e, "statistics refresh failed");
                }
            }
            if pool.is_closed() {
                return;
            }
            tokio::time::sleep(STATISTICS_INTERVAL).await;
        }
    });
}

/// The metadata columns of a row, with the body still to read.
fn decode_meta(row: &SqliteRow) -> Result<Record<()>> {
    let kind: String = row.try_get("kind")?;
    Ok(Record {
        id: row.try_get("id")?,
        kind: Kind::from_str(&kind).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        tenant: row.try_get("tenant")?,
        name: row.try_get("name")?,
        creator: row.try_get("creator")?,
        version: row.try_get("version")?,
        created_at: parse_ts(&row.try_get::<String, _>("created_at")?)?,
        deleted_at: row
            .try_get::<Option<String>, _>("deleted_at")?
            .as_deref()
            .map(parse_ts)
            .transpose()?,
        labels: parse_json(&row.try_get::<String, _>("labels")?)?,
        annotations: parse_json(&row.try_get::<String, _>("annotations")?)?,
        finalizers: parse_json(&row.try_get::<String, _>("finalizers")?)?,
        body: (),
    })
}

fn decode(row: &SqliteRow) -> Result<Record> {
    let body = parse_json(&row.try_get::<String, _>("body")?)?;
    Ok(decode_meta(row)?.with_body(body))
}

/// A row with its body as the stored JSON text (not parsed: see [`BodyText`]).
fn decode_text(row: &SqliteRow) -> Result<RecordText> {
    let body = BodyText::stored(row.try_get::<String, _>("body")?);
    Ok(decode_meta(row)?.with_body(body))
}

crate::traffic::traffic_statements! { pool: SqlitePool, lock: "" }

crate::sql_common::sql_common_statements! {
    connection: SqliteConnection,
    pool: SqlitePool,
    row: SqliteRow,
    dialect: Dialect::Sqlite,
    ts: ts_text,
    json: to_json,
}

/// Writes the row of `rec` (its new version) if the stored version is `expected`, returning
/// the label rows (`json_group_object`) and reference rows (`json_group_array`) it had; None
/// when no row of that id and version exists (nothing is written then).
async fn update_row_at(
    conn: &mut SqliteConnection,
    rec: &crate::Record,
    expected: i64,
) -> crate::Result<Option<(Option<String>, Option<String>)>> {
    // The label and reference tables are not changed by this statement, so RETURNING's
    // subqueries read the rows from before the write.
    let found = sqlx::query_as(
        "UPDATE objects SET name = $1, creator = $2, version = $3, deleted_at = $4, labels = $5, annotations = $6, finalizers = $7, body = $8 WHERE id = $9 AND version = $10 \
         RETURNING (SELECT json_group_object(key, value) FROM object_labels WHERE object_id = $9), \
         (SELECT json_group_array(json_array(field, target_id)) FROM object_refs WHERE object_id = $9)",
    )
    .bind(&rec.name)
    .bind(&rec.creator)
    .bind(rec.version)
    .bind(rec.deleted_at.as_ref().map(ts_text))
    .bind(crate::record::to_json(&rec.labels))
    .bind(to_json(&rec.annotations))
    .bind(crate::record::to_json(&rec.finalizers))
    .bind(to_json(&rec.body))
    .bind(&rec.id)
    .bind(expected)
    .fetch_optional(conn)
    .await?;
    Ok(found)
}

/// Inserts the object row (the version is the record's) with its label rows and its
/// (field, target) reference rows `refs`, in ONE hand-over to the connection's thread: the
/// statements go as one text (sqlx's SQLite driver runs them in order, numbered parameters
/// shared), and the first failing one ends it — a taken name refuses the object row before any
/// index row is written.
async fn insert_with_rows(
    conn: &mut SqliteConnection,
    rec: &crate::Record,
    refs: &[(String, String)],
) -> crate::Result<()> {
    let mut sql = String::from(
        "INSERT INTO objects (id, kind, tenant, name, creator, version, created_at, deleted_at, labels, annotations, finalizers, body) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    );
    let mut next = 13;
    let mut rows = |sql: &mut String, table: &str, n: usize| {
        if n == 0 {
            return;
        }
        sql.push_str(&format!("; INSERT INTO {table} VALUES "));
        for i in 0..n {
            let sep = if i == 0 { "" } else { ", " };
            sql.push_str(&format!("{sep}($1, ${next}, ${})", next + 1));
            next += 2;
        }
    };
    rows(
        &mut sql,
        "object_labels (object_id, key, value)",
        rec.labels.len(),
    );
    rows(
        &mut sql,
        "object_refs (object_id, field, target_id)",
        refs.len(),
    );
    let mut query =
        crate::sql_common::bind_object_row!(sqlx::query(&sql), rec, ts: ts_text, json: to_json);
    for (k, v) in &rec.labels {
        query = query.bind(k).bind(v);
    }
    for (f, t) in refs {
        query = query.bind(f).bind(t);
    }
    query.execute(conn).await?;
    Ok(())
}

async fn get_row(conn: &mut SqliteConnection, id: &str) -> Result<Option<Record>> {
    let row = sqlx::query(&format!("SELECT {COLUMNS} FROM objects o WHERE o.id = ?"))
        .bind(id)
        .fetch_optional(conn)
        .await?;
    row.as_ref().map(decode).transpose()
}

/// Starts a serialised write transaction.
async fn begin_tx(
    pool: SqlitePool,
    write_lock: Arc<Mutex<()>>,
    feed: broadcast::Sender<Change>,
    cache: Arc<RecordCache>,
    open_intervals: Arc<OpenIntervals>,
) -> Result<Box<dyn Tx>> {
    Ok(Box::new(
        begin_sqlite_tx(pool, write_lock, feed, cache, open_intervals).await?,
    ))
}

/// Starts a serialised write transaction, as its own type.
async fn begin_sqlite_tx(
    pool: SqlitePool,
    write_lock: Arc<Mutex<()>>,
    feed: broadcast::Sender<Change>,
    cache: Arc<RecordCache>,
    open_intervals: Arc<OpenIntervals>,
) -> Result<SqliteTx> {
    let guard = write_lock.lock_owned().await;
    // IMMEDIATE takes SQLite's write lock at BEGIN, so the snapshot a transaction reads can
    // never be overtaken by another connection's commit (no SQLITE_BUSY_SNAPSHOT).
    let tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    Ok(SqliteTx {
        tx,
        _guard: guard,
        changes: Vec::new(),
        written: Vec::new(),
        ref_targets: Vec::new(),
        savepoints: Vec::new(),
        events: DeferredEvents::default(),
        feed,
        cache,
        open_intervals,
        pending_intervals: PendingIntervals::default(),
        intervals: DeferredIntervals::default(),
    })
}

/// The statements of a `kv_write` batch: upserts and deletes, a bounded number of rows each.
fn kv_statements<'a>(
    ns: &'a str,
    changes: &'a [(String, Option<String>)],
) -> Vec<sqlx::QueryBuilder<'a, sqlx::Sqlite>> {
    let (puts, deletes) = crate::kv_coalesce(changes);
    let mut statements = crate::sql_common::kv_upserts(ns, &puts);
    for chunk in deletes.chunks(crate::KV_CHUNK) {
        let mut q = sqlx::QueryBuilder::new("DELETE FROM kv WHERE ns = ");
        q.push_bind(ns).push(" AND key IN (");
        let mut keys = q.separated(", ");
        for key in chunk {
            keys.push_bind(*key);
        }
        q.push(")");
        statements.push(q);
    }
    statements
}

#[async_trait]
impl Store for SqliteStore {
    async fn begin(&self) -> Result<Box<dyn Tx>> {
        begin_tx(
            self.pool.clone(),
            self.write_lock.clone(),
            self.feed.clone(),
            self.cache.clone(),
            self.open_intervals.clone(),
        )
        .await
    }

    async fn begin_shared(&self) -> Result<Box<dyn Tx>> {
        self.group.turn().await
    }

    async fn apply(&self, set: WriteSet) -> Result<Applied> {
        self.group.apply(set).await
    }

    async fn get(&self, id: &str) -> Result<Option<Record>> {
        let (cached, epoch) = self.cache.get(id);
        if cached.is_some() {
            return Ok(cached);
        }
        let mut conn = self.pool.acquire().await?;
        let found = get_row(&mut conn, id).await?;
        if let Some(r) = &found {
            self.cache.offer(r, epoch);
        }
        Ok(found)
    }

    async fn list(&self, query: &ListQuery) -> Result<Page> {
        let mut conn = self.pool.acquire().await?;
        run_list(&mut conn, query).await
    }

    async fn list_items(&self, query: &ListQuery) -> Result<Vec<Record>> {
        let mut conn = self.pool.acquire().await?;
        run_list_items(&mut conn, query).await
    }

    async fn get_text(&self, id: &str) -> Result<Option<RecordText>> {
        // A cached record is rendered (one serialisation); otherwise the row's text is read.
        let (cached, _) = self.cache.get(id);
        if let Some(record) = cached {
            return record.into_text().map(Some);
        }
        let mut conn = self.pool.acquire().await?;
        let row = sqlx::query(&format!("SELECT {COLUMNS} FROM objects o WHERE o.id = ?"))
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
        row.as_ref().map(decode_text).transpose()
    }

    async fn list_text(&self, query: &ListQuery) -> Result<PageText> {
        let mut conn = self.pool.acquire().await?;
        page::list_page_text(&mut conn, query).await
    }

    async fn referrers(&self, target: &str) -> Result<Vec<Reference>> {
        let (cached, epoch) = self.cache.referrers(target);
        if let Some(found) = cached {
            return Ok(found);
        }
        let mut conn = self.pool.acquire().await?;
        let found = referrers_of(&mut conn, target).await?;
        self.cache.offer_referrers(target, &found, epoch);
        Ok(found)
    }

    async fn ids(&self, kind: Kind) -> Result<Vec<String>> {
        ids_of(&self.pool, kind).await
    }

    fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.feed.subscribe()
    }

    async fn ping(&self) -> Result<()> {
        ping(&self.pool).await
    }

    async fn count_by_state(&self) -> Result<Vec<crate::StateCount>> {
        let rows: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT kind, COALESCE(json_extract(body, '$.status.state'), ''), COUNT(*) FROM objects GROUP BY 1, 2",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(crate::state_counts(rows))
    }

    async fn kv_load(&self, ns: &str) -> Result<Vec<(String, String)>> {
        kv_load(&self.pool, ns).await
    }

    async fn kv_get(&self, ns: &str, key: &str) -> Result<Option<String>> {
        kv_get(&self.pool, ns, key).await
    }

    async fn kv_put(&self, ns: &str, key: &str, value: &str) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        kv_put(&self.pool, ns, key, value).await
    }

    async fn record_traffic(
        &self,
        at: DateTime<Utc>,
        samples: &[crate::TrafficSample],
    ) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        record_traffic(&self.pool, at, samples).await
    }

    async fn traffic_usage(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        tenant_id: Option<&str>,
    ) -> Result<Vec<crate::TrafficUsageRow>> {
        traffic_usage(&self.pool, from, to, tenant_id).await
    }

    async fn prune_events(&self, before: DateTime<Utc>, limit: i64) -> Result<u64> {
        let _guard = self.write_lock.lock().await;
        prune_events(&self.pool, before, limit).await
    }

    async fn kv_delete(&self, ns: &str, key: &str) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        kv_delete(&self.pool, ns, key).await
    }

    async fn outbox_peek(&self, limit: i64) -> Result<Vec<crate::OutboxEntry>> {
        meter_outbox_peek(&mut *self.pool.acquire().await?, limit).await
    }

    async fn outbox_ack(&self, seqs: &[i64]) -> Result<u64> {
        let _guard = self.write_lock.lock().await;
        meter_outbox_ack(&mut *self.pool.acquire().await?, seqs).await
    }

    async fn outbox_len(&self) -> Result<i64> {
        meter_outbox_len(&mut *self.pool.acquire().await?).await
    }

    async fn outbox_append(&self, events: &[crate::OutboxEvent]) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        meter_append_outbox(&mut tx, events).await?;
        tx.commit().await?;
        crate::count_write();
        Ok(())
    }

    async fn usage_intervals(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        tenant_id: Option<&str>,
    ) -> Result<Vec<osac_model::metering::IntervalRow>> {
        let mut conn = self.pool.acquire().await?;
        meter_intervals_between(
            &mut conn,
            from.timestamp_micros(),
            to.timestamp_micros(),
            tenant_id,
        )
        .await
    }

    async fn record_usage(&self, end: DateTime<Utc>) -> Result<u64> {
        let _guard = self.write_lock.lock().await;
        let mut tx = self.pool.begin().await?;
        let n = meter_record_usage(&mut tx, end.timestamp_micros()).await?;
        tx.commit().await?;
        crate::count_write();
        Ok(n)
    }

    async fn prune_usage(&self, before: DateTime<Utc>) -> Result<u64> {
        let _guard = self.write_lock.lock().await;
        meter_prune(&mut *self.pool.acquire().await?, before.timestamp_micros()).await
    }

    async fn kv_write(&self, ns: &str, changes: &[(String, Option<String>)]) -> Result<()> {
        // Driver records share the commit of concurrent controller writes.
        let set = WriteSet::of(vec![Write::Kv {
            ns: ns.to_string(),
            changes: changes.to_vec(),
        }]);
        self.group.apply(set).await.map(|_| ())
    }
}

crate::metering::metering_statements!(connection: SqliteConnection);
crate::metering::impl_meter_tx!(SqliteTx);

/// The lengths of a transaction's own records when a savepoint was made.
struct SavepointMarks {
    changes: usize,
    written: usize,
    ref_targets: usize,
    events: usize,
    open_intervals: usize,
    interval_changes: usize,
}

/// A serialised SQLite write transaction.
struct SqliteTx {
    tx: Transaction<'static, sqlx::Sqlite>,
    _guard: OwnedMutexGuard<()>,
    changes: Vec<Change>,
    /// The rows written, for the cache once committed.
    written: Vec<Written>,
    /// Ids whose referrers this transaction changed (reference rows added or removed).
    ref_targets: Vec<String>,
    /// What each open savepoint rolls back to, the latest last.
    savepoints: Vec<SavepointMarks>,
    /// Events inserted and not written yet (see [`DeferredEvents`]).
    events: DeferredEvents,
    feed: broadcast::Sender<Change>,
    cache: Arc<RecordCache>,
    /// The committed open usage intervals known (see [`OpenIntervals`]).
    open_intervals: Arc<OpenIntervals>,
    /// The open intervals this transaction changed.
    pending_intervals: PendingIntervals,
    /// Their changes, written at the commit.
    intervals: DeferredIntervals,
}

impl SqliteTx {
    /// Keeps an object write's interval changes for the commit (see `usage_writes`).
    async fn write_interval_changes(
        &mut self,
        object_id: &str,
        writes: crate::metering::IntervalWrites,
    ) -> Result<()> {
        self.intervals.push(object_id, writes);
        Ok(())
    }

    /// The object's open interval without a statement: as this transaction left it, else as
    /// committed when known (exact: see [`OpenIntervals`]).
    fn known_open_interval(
        &self,
        object_id: &str,
    ) -> Option<Option<crate::metering::OpenInterval>> {
        self.pending_intervals
            .get(object_id)
            .or_else(|| self.open_intervals.get(object_id).map(Some))
    }

    fn note_open_interval(&mut self, object_id: &str, open: Option<crate::metering::OpenInterval>) {
        self.pending_intervals.push(object_id, open);
    }

    /// Reads a row inside the transaction, without a statement where it can: a row this
    /// transaction wrote is its last write of it (kept until a rolled-back savepoint drops it,
    /// with the timestamps as the database stores them); a row it has not written is the
    /// committed one, which the cache holds exactly (every commit updates it under the write
    /// lock this transaction holds). A miss is read and cached.
    async fn read(&mut self, id: &str) -> Result<Option<Record>> {
        if let Some(last) = Written::last_of(&self.written, id) {
            return Ok(last);
        }
        let (cached, epoch) = self.cache.get(id);
        if cached.is_some() {
            return Ok(cached);
        }
        let found = get_row(&mut self.tx, id).await?;
        if let Some(r) = &found {
            self.cache.offer(r, epoch);
        }
        Ok(found)
    }

    /// For metering: the stored record that `record` replaces (its id at its version) as this
    /// transaction or the record cache knows it without a statement (exact: see
    /// [`SqliteTx::read`]). None: not a metered kind, not known, or of another version (the
    /// write will be refused).
    fn replaced(&self, record: &Record) -> Option<Record> {
        if !osac_model::metering::metered(record.kind) {
            return None;
        }
        let (id, version) = (record.id.as_str(), record.version);
        let known = match Written::last_of(&self.written, id) {
            Some(last) => last,
            None => self.cache.get(id).0,
        };
        known.filter(|r| r.version == version)
    }

    /// Writes the deferred events first if `id` is one of them.
    async fn write_event(&mut self, id: &str) -> Result<()> {
        if self.events.holds(id) {
            events::write(&mut self.tx, &mut self.events).await?;
        }
        Ok(())
    }

    /// Writes the deferred events first if a query of `kind` could read them.
    async fn write_events_of(&mut self, kind: Kind) -> Result<()> {
        if kind == Kind::Event && !self.events.is_empty() {
            events::write(&mut self.tx, &mut self.events).await?;
        }
        Ok(())
    }

    /// The stored version of `record`'s row, checked against `record.version`, and its
    /// reference rows (sorted).
    async fn stored_state(&mut self, record: &Record) -> Result<(i64, Vec<(String, String)>)> {
        let current: Option<(i64, Option<String>)> = sqlx::query_as(
            "SELECT version, (SELECT json_group_array(json_array(field, target_id)) FROM object_refs WHERE object_id = ?1) FROM objects WHERE id = ?1",
        )
        .bind(&record.id)
        .fetch_optional(&mut *self.tx)
        .await?;
        let Some((found, old_refs)) = current else {
            return Err(StoreError::NotFound(record.id.clone()));
        };
        check_version(&record.id, record.version, found)?;
        Ok((found, stored_refs(old_refs.as_deref())?))
    }

    /// Rewrites the reference rows when they differ from `old` (the stored (field, target)
    /// rows, sorted); returns the previous targets (none when the rows are unchanged).
    async fn write_refs(
        &mut self,
        record: &Record,
        old: Vec<(String, String)>,
    ) -> Result<Vec<String>> {
        let mut new: Vec<(String, String)> = record.references();
        new.sort();
        if old == new {
            return Ok(Vec::new());
        }
        self.ref_targets
            .extend(old.iter().chain(&new).map(|(_, t)| t.clone()));
        write_ref_rows(&mut self.tx, &record.id, &new, true).await?;
        Ok(old.into_iter().map(|(_, t)| t).collect())
    }
}

/// The (field, target) rows of `json_group_array(json_array(field, target_id))`, sorted.
fn stored_refs(json: Option<&str>) -> Result<Vec<(String, String)>> {
    let mut refs: Vec<(String, String)> = match json {
        None => Vec::new(),
        Some(text) => serde_json::from_str(text)
            .map_err(|e| StoreError::Corrupt(format!("reference rows: {e}")))?,
    };
    refs.sort();
    Ok(refs)
}

/// The labels of `json_group_object(key, value)` over an object's label rows.
fn stored_labels(json: Option<&str>) -> Result<std::collections::BTreeMap<String, String>> {
    match json {
        None => Ok(Default::default()),
        Some(text) => {
            serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("label rows: {e}")))
        }
    }
}

#[async_trait]
impl Tx for SqliteTx {
    async fn get(&mut self, id: &str) -> Result<Option<Record>> {
        self.read(id).await
    }

    async fn lock(&mut self, id: &str) -> Result<Option<Record>> {
        // SQLite write transactions are serial: reading is locking.
        self.read(id).await
    }

    async fn lock_name(&mut self, _name: &str) -> Result<()> {
        Ok(())
    }

    async fn find_by_name(
        &mut self,
        kind: Kind,
        tenant: &str,
        name: &str,
    ) -> Result<Option<Record>> {
        self.write_events_of(kind).await?;
        // A row this transaction wrote under that name, if that is its last write of it. Later
        // writes are scanned only for a row whose name matches: a group transaction holds
        // hundreds of writes, and most lookups match none of them.
        for (i, w) in self.written.iter().enumerate().rev() {
            if let Written::Put(r) = w
                && r.kind == kind
                && r.tenant == tenant
                && r.name.as_deref() == Some(name)
                && !self.written[i + 1..].iter().any(|later| later.id() == r.id)
            {
                return Ok(Some(as_stored(r)));
            }
        }
        // Otherwise the committed row of that name, which the cache holds exactly when it
        // holds it (this transaction holds the write lock) — unless this transaction wrote it
        // (renamed or removed it) since.
        if let Some(r) = self.cache.named(kind, tenant, name)
            && !self.written.iter().any(|w| w.id() == r.id)
        {
            return Ok(Some(r));
        }
        let epoch = self.cache.epoch();
        let found = find_row_by_name(&mut self.tx, kind, tenant, name).await?;
        // Not a row this transaction wrote (it would have been found above under this name):
        // the committed one.
        if let Some(r) = &found {
            self.cache.offer(r, epoch);
        }
        Ok(found)
    }

    async fn list(&mut self, query: &ListQuery) -> Result<Page> {
        self.write_events_of(query.kind).await?;
        run_list(&mut self.tx, query).await
    }

    async fn list_items(&mut self, query: &ListQuery) -> Result<Vec<Record>> {
        self.write_events_of(query.kind).await?;
        run_list_items(&mut self.tx, query).await
    }

    /// The committed referrers from the cache, which holds them exactly (every commit updates
    /// it under the write lock this transaction holds), unless this transaction changed the
    /// reference rows to `target`; otherwise read in the transaction.
    async fn referrers(&mut self, target: &str) -> Result<Vec<Reference>> {
        if !self.ref_targets.iter().any(|t| t == target) {
            let (cached, epoch) = self.cache.referrers(target);
            if let Some(found) = cached {
                return Ok(found);
            }
            let found = referrers_of(&mut self.tx, target).await?;
            self.cache.offer_referrers(target, &found, epoch);
            return Ok(found);
        }
        referrers_of(&mut self.tx, target).await
    }

    async fn insert(&mut self, record: &Record) -> Result<Record> {
        let mut rec = record.clone();
        rec.version = 1;
        if DeferredEvents::can_defer(&rec) {
            self.events.defer(rec.clone());
        } else {
            let mut refs = rec.references();
            refs.sort();
            insert_with_rows(&mut self.tx, &rec, &refs).await?;
            self.ref_targets.extend(refs.into_iter().map(|(_, t)| t));
        }
        if osac_model::metering::signature(rec.kind, &rec.body, rec.deleted_at.is_some()).is_some()
        {
            crate::metering::on_write(self, &rec, false, None).await?;
        }
        self.changes.push(Change::of(&rec, false, &[]));
        self.written.push(Written::Put(Box::new(rec.clone())));
        Ok(rec)
    }

    async fn update(&mut self, record: &Record) -> Result<Option<Record>> {
        self.write_event(&record.id).await?;
        let replaced = self.replaced(record);
        if record.deleted_at.is_some() && record.finalizers.is_empty() {
            let (_, old_refs) = self.stored_state(record).await?;
            delete_row(&mut self.tx, &record.id).await?;
            let targets: Vec<String> = old_refs.into_iter().map(|(_, t)| t).collect();
            self.ref_targets.extend(targets.iter().cloned());
            crate::metering::on_write(self, record, true, replaced.as_ref()).await?;
            self.changes.push(Change::of(record, true, &targets));
            self.written.push(Written::Gone(record.id.clone()));
            return Ok(None);
        }
        let mut rec = record.clone();
        rec.version = record.version + 1;
        // The row, its version check and what its label and reference rows were, in one
        // statement; a row that is missing or of another version is told apart afterwards.
        let Some((old_labels, old_refs)) =
            update_row_at(&mut self.tx, &rec, record.version).await?
        else {
            let (found, _) = self.stored_state(record).await?;
            return Err(StoreError::Conflict {
                id: record.id.clone(),
                expected: record.version,
                found,
            });
        };
        if stored_labels(old_labels.as_deref())? != rec.labels {
            write_label_rows(&mut self.tx, &rec, true).await?;
        }
        let old_refs = self
            .write_refs(&rec, stored_refs(old_refs.as_deref())?)
            .await?;
        crate::metering::on_write(self, &rec, false, replaced.as_ref()).await?;
        self.changes.push(Change::of(&rec, false, &old_refs));
        self.written.push(Written::Put(Box::new(rec.clone())));
        Ok(Some(rec))
    }

    async fn remove(&mut self, id: &str) -> Result<()> {
        self.write_event(id).await?;
        let Some(rec) = get_row(&mut self.tx, id).await? else {
            return Err(StoreError::NotFound(id.to_string()));
        };
        delete_row(&mut self.tx, id).await?;
        crate::metering::on_write(self, &rec, true, Some(&rec)).await?;
        self.changes.push(Change::of(&rec, true, &[]));
        self.ref_targets
            .extend(rec.references().into_iter().map(|(_, t)| t));
        self.written.push(Written::Gone(id.to_string()));
        Ok(())
    }

    fn publish(&mut self, change: Change) {
        self.changes.push(change);
    }

    async fn kv_write(&mut self, ns: &str, changes: &[(String, Option<String>)]) -> Result<()> {
        for mut q in kv_statements(ns, changes) {
            q.build().execute(&mut *self.tx).await?;
        }
        Ok(())
    }

    async fn savepoint(&mut self) -> Result<()> {
        savepoint(&mut self.tx).await?;
        self.savepoints.push(SavepointMarks {
            changes: self.changes.len(),
            written: self.written.len(),
            ref_targets: self.ref_targets.len(),
            events: self.events.len(),
            open_intervals: self.pending_intervals.len(),
            interval_changes: self.intervals.len(),
        });
        Ok(())
    }

    async fn rollback_to_savepoint(&mut self) -> Result<()> {
        rollback_to_savepoint(&mut self.tx).await?;
        if let Some(marks) = self.savepoints.pop() {
            self.changes.truncate(marks.changes);
            self.written.truncate(marks.written);
            self.ref_targets.truncate(marks.ref_targets);
            self.events.truncate(marks.events);
            self.pending_intervals.truncate(marks.open_intervals);
            self.intervals.truncate(marks.interval_changes);
        }
        Ok(())
    }

    async fn release_savepoint(&mut self) -> Result<()> {
        release_savepoint(&mut self.tx).await?;
        self.savepoints.pop();
        Ok(())
    }

    async fn commit(self: Box<Self>) -> Result<()> {
        let mut this = *self;
        // The deferred events and the interval changes with their CloudEvents, in one round
        // trip: a statement prepared once (see `commit_statements`), or multi-row statements
        // when they do not fit it.
        let plan = this.intervals.take_plan();
        let events = this.events.records();
        if let Some(shape) = commit_statements::shape_of(events, &plan) {
            commit_statements::execute(&mut this.tx, shape, events, &plan).await?;
        } else {
            let mut batch = StatementBatch::default();
            events::push(&mut batch, events);
            usage_writes::push(&mut batch, &plan);
            batch.execute(&mut this.tx).await?;
        }
        this.events.clear();
        this.tx.commit().await?;
        // Still under the write lock (released when `this` is dropped): see `record_cache`.
        let targets = this.ref_targets.iter().map(String::as_str);
        this.cache.committed(this.written, targets);
        this.open_intervals.committed(this.pending_intervals.take());
        crate::count_write();
        // Every change is published, events included: watches (`osac events --watch`) stream
        // them; controllers skip kinds nothing reconciles.
        for c in this.changes {
            let _ = this.feed.send(c);
        }
        Ok(())
    }
}
