//! PostgreSQL backend. Transactions run concurrently; check-then-write sequences take row locks
//! (`Tx::lock` = `SELECT … FOR UPDATE`). Committed changes are also sent with NOTIFY so several
//! processes sharing one database wake each other's controllers.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use osac_model::Kind;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgListener, PgPoolOptions, PgRow};
use sqlx::types::Json;
use sqlx::{PgPool, Row, Transaction};
use tokio::sync::broadcast;

use crate::deferred_events::DeferredEvents;
use crate::filter_sql::Dialect;
use crate::pg_status_batch::StatusBatcher;
use crate::pg_write_set::{Fast, StatusWrite};
use crate::record::{BodyText, parse_json, to_json};
use crate::record_cache::{RecordCache, Written};
use crate::sql_common::{COLUMNS, check_version};
use crate::{
    Applied, Change, ListQuery, Page, PageText, Record, RecordText, Reference, Result, Store,
    StoreError, Tx, Write, WriteSet,
};

/// The columns of an object row with the body as JSON text (`jsonb` rendered by PostgreSQL).
const TEXT_COLUMNS: &str = concat!(crate::sql_common::meta_columns!(), ", o.body::text AS body");

const CHANNEL: &str = "osac_changes";

/// The PostgreSQL store.
pub struct PostgresStore {
    pub(crate) pool: PgPool,
    feed: broadcast::Sender<Change>,
    origin: String,
    /// Rows and referrers read for [`Store::get_cached`] and [`Store::referrers_cached`]
    /// (forgotten on every change, see `record_cache`).
    cache: Arc<RecordCache>,
    /// Concurrent status writes share statements (see `pg_status_batch`).
    status_writes: StatusBatcher,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Notice {
    origin: String,
    change: Change,
    /// When the change was written (µs since the epoch, the sender's clock; its transaction
    /// commits right after): the receiver measures how long the notification took. 0: not
    /// stamped (queued before the rest of its transaction ran), not measured.
    #[serde(default)]
    sent_at_us: i64,
}

/// The payload of a change notification.
fn notice_of(origin: &str, change: &Change, sent_at_us: i64) -> String {
    to_json(&Notice {
        origin: origin.to_string(),
        change: change.clone(),
        sent_at_us,
    })
}

/// How long a change took to reach another process (`NOTIFY` → `LISTEN`), seconds.
static FEED_DELAY: std::sync::LazyLock<Option<prometheus::Histogram>> =
    std::sync::LazyLock::new(|| {
        prometheus::register_histogram!(
            "osac_change_feed_delay_seconds",
            "Time from a commit in another replica to its change notification arriving here",
            vec![
                0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5
            ]
        )
        .ok()
    });

impl PostgresStore {
    /// Connects, runs migrations and starts listening for other processes' changes.
    pub async fn connect(url: &str) -> Result<Self> {
        // A transaction left open by a stopped process (SIGSTOP, a frozen VM) would hold its
        // row locks — among them a shard lease's — forever; the server ends it instead. No
        // transaction of ours waits on anything but the database.
        let options = PgConnectOptions::from_str(url)?
            .options([("idle_in_transaction_session_timeout", "5s")]);
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/postgres")
            .run(&pool)
            .await
            .map_err(|e| StoreError::Database(sqlx::Error::Migrate(Box::new(e))))?;
        let (feed, _) = broadcast::channel(65536);
        spawn_statistics_refresh(pool.clone());
        let origin = uuid::Uuid::new_v4().to_string();
        let listener = listen(&pool).await?;
        let cache = Arc::new(RecordCache::default());
        spawn_change_listener(
            pool.clone(),
            listener,
            ChangeRelay {
                feed: feed.clone(),
                origin: origin.clone(),
                cache: cache.clone(),
            },
        );
        let status_writes = StatusBatcher::start(pool.clone(), CHANNEL);
        Ok(Self {
            pool,
            feed,
            origin,
            cache,
            status_writes,
        })
    }
}

/// A connection listening for the change notifications of every process.
async fn listen(pool: &PgPool) -> Result<PgListener> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(CHANNEL).await?;
    Ok(listener)
}

/// Where another process's change goes: this process's cache and change feed.
struct ChangeRelay {
    feed: broadcast::Sender<Change>,
    /// This process's origin: its own notifications come back too and are skipped.
    origin: String,
    cache: Arc<RecordCache>,
}

impl ChangeRelay {
    fn relay(&self, payload: &str) {
        let Ok(notice) = serde_json::from_str::<Notice>(payload) else {
            return;
        };
        if notice.origin == self.origin {
            return;
        }
        if notice.sent_at_us > 0
            && let Some(h) = FEED_DELAY.as_ref()
        {
            let now = Utc::now().timestamp_micros();
            h.observe((now - notice.sent_at_us).max(0) as f64 / 1e6);
        }
        let change = notice.change;
        self.cache.forget(
            std::iter::once(change.id.as_str()),
            change.refs.iter().map(String::as_str),
        );
        let _ = self.feed.send(change);
    }
}

/// Passes other processes' changes on. A lost connection may have lost notifications: the
/// cache is suspended until a new connection listens again.
fn spawn_change_listener(pool: PgPool, listener: PgListener, relay: ChangeRelay) {
    tokio::spawn(async move {
        let mut listener = Some(listener);
        loop {
            let Some(connected) = listener.as_mut() else {
                match listen(&pool).await {
                    Ok(l) => {
                        relay.cache.resume();
                        listener = Some(l);
                    }
                    Err(e) => {
                        if pool.is_closed() {
                            return;
                        }
                        tracing::warn!(error = %e, "change-feed listener cannot reconnect; retrying");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    }
                }
                continue;
            };
            match connected.try_recv().await {
                Ok(Some(n)) => relay.relay(n.payload()),
                Ok(None) => {
                    tracing::warn!("change-feed listener lost its connection; reconnecting");
                    relay.cache.suspend();
                    listener = None;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "change-feed listener error; reconnecting");
                    relay.cache.suspend();
                    listener = None;
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        }
    });
}

/// How often the tables' change counts are looked at for a statistics refresh.
const STATISTICS_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// The tables whose planner statistics this store keeps fresh.
const ANALYZED_TABLES: &str = "'objects', 'object_labels', 'object_refs', 'kv', 'kv_journal'";

/// Keeps planner statistics fresh whether or not autovacuum runs: a table is analyzed once its
/// number of rows moved away from what its statistics say (`pg_class.reltuples`) by more than
/// 50 + 50 % (the statistics are never off by more than a factor of two, and a table growing
/// from n to N rows is analyzed about log₁.₅(N/n) times, not once per tenth). Without it a
/// database that grows fast is planned with the statistics of its empty tables, and the
/// statements' cached plans keep sequential scans (a busy server read hundreds of millions of
/// rows a minute that way) until the next refresh. Updates alone do
/// not count (unlike autovacuum's rule): status writes rewrite every object several times
/// without changing what the plans depend on. (Analyzing for every 10 % of changes cost about
/// 5 % of the machine's CPU under load.)
fn spawn_statistics_refresh(pool: PgPool) {
    tokio::spawn(async move {
        loop {
            if let Err(e) = refresh_statistics(&pool).await {
                tracing::debug!(error = %e, "statistics refresh failed");
            }
            if pool.is_closed() {
                return;
            }
            tokio::time::sleep(STATISTICS_CHECK).await;
        }
    });
}

/// Analyzes the tables that changed enough (see [`spawn_statistics_refresh`]); a table another
/// process is analyzing is skipped.
async fn refresh_statistics(pool: &PgPool) -> Result<()> {
    let stale: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT s.relname::text FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid \
         WHERE s.relname IN ({ANALYZED_TABLES}) AND s.schemaname = current_schema() \
           AND (COALESCE(s.last_analyze, s.last_autoanalyze) IS NULL \
                OR abs(s.n_live_tup - greatest(c.reltuples, 0)) > 50 + greatest(c.reltuples, 0) / 2) \
         ORDER BY s.relname"
    ))
    .fetch_all(pool)
    .await?;
    if !stale.is_empty() {
        sqlx::query(&format!("ANALYZE (SKIP_LOCKED) {}", stale.join(", ")))
            .execute(pool)
            .await?;
    }
    Ok(())
}

/// The metadata columns of a row, with the body still to read.
fn decode_meta(row: &PgRow) -> Result<Record<()>> {
    let kind: String = row.try_get("kind")?;
    let annotations: Json<BTreeMap<String, String>> = row.try_get("annotations")?;
    Ok(Record {
        id: row.try_get("id")?,
        kind: Kind::from_str(&kind).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        tenant: row.try_get("tenant")?,
        name: row.try_get("name")?,
        creator: row.try_get("creator")?,
        version: row.try_get("version")?,
        created_at: row.try_get::<DateTime<Utc>, _>("created_at")?,
        deleted_at: row.try_get::<Option<DateTime<Utc>>, _>("deleted_at")?,
        labels: parse_json(&row.try_get::<String, _>("labels")?)?,
        annotations: annotations.0,
        finalizers: parse_json(&row.try_get::<String, _>("finalizers")?)?,
        body: (),
    })
}

fn decode(row: &PgRow) -> Result<Record> {
    let body: Json<serde_json::Value> = row.try_get("body")?;
    Ok(decode_meta(row)?.with_body(body.0))
}

/// A row of [`TEXT_COLUMNS`]: the body as PostgreSQL's text of the `jsonb` (not parsed).
fn decode_text(row: &PgRow) -> Result<RecordText> {
    let body = BodyText::stored(row.try_get::<String, _>("body")?);
    Ok(decode_meta(row)?.with_body(body))
}

/// [`run_list`] with the bodies as PostgreSQL's text of the `jsonb`.
async fn run_list_text(conn: &mut PgConnection, q: &ListQuery) -> Result<PageText> {
    run_list_as(conn, q, TEXT_COLUMNS, decode_text).await
}

crate::sql_common::sql_common_statements! {
    connection: PgConnection,
    pool: PgPool,
    row: PgRow,
    dialect: Dialect::Postgres,
    ts: ts,
    json: Json,
}

/// A timestamp is bound as `timestamptz`.
pub(crate) fn ts(t: &DateTime<Utc>) -> DateTime<Utc> {
    *t
}

/// How [`get_row`] locks the row it reads until the transaction ends.
#[derive(Clone, Copy)]
enum RowLock {
    None,
    Exclusive,
    Shared,
}

async fn get_row(conn: &mut PgConnection, id: &str, lock: RowLock) -> Result<Option<Record>> {
    let suffix = match lock {
        RowLock::None => "",
        RowLock::Exclusive => " FOR UPDATE",
        RowLock::Shared => " FOR SHARE",
    };
    let row = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM objects o WHERE o.id = $1{suffix}"
    ))
    .bind(id)
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(decode).transpose()
}

#[async_trait]
impl Store for PostgresStore {
    async fn begin(&self) -> Result<Box<dyn Tx>> {
        begin_tx(
            self.pool.clone(),
            self.feed.clone(),
            self.origin.clone(),
            self.cache.clone(),
        )
        .await
    }

    /// One transaction per write set, or one statement for a status write (`pg_write_set`),
    /// shared with the status writes queued meanwhile (`pg_status_batch`: one statement that
    /// commits at once and skips rows others hold). Other sets are not batched into shared
    /// transactions here: PostgreSQL already shares WAL flushes between concurrent commits
    /// (its own group commit), and a shared transaction held row locks across a whole batch,
    /// which API transactions then waited for (measured slower: docs/benchmarks.md).
    async fn apply(&self, set: WriteSet) -> Result<Applied> {
        let since = self.cache.epoch();
        let notice = |change: &Change, sent_at_us: i64| notice_of(&self.origin, change, sent_at_us);
        let fast = match StatusWrite::of(&set, notice) {
            Some(write) => self.status_writes.write(write).await,
            None => Ok(Fast::Slow),
        };
        match fast {
            Ok(Fast::Applied {
                applied,
                changes,
                written,
                ref_targets,
            }) => {
                // Before the changes go out: a reader they wake finds what they made.
                self.cache
                    .written(written, ref_targets.iter().map(String::as_str), since);
                for c in changes {
                    let _ = self.feed.send(c);
                }
                return Ok(applied);
            }
            Ok(Fast::Slow) => {}
            Err(e) => {
                if let StoreError::NotFound(id) | StoreError::Conflict { id, .. } = &e {
                    // Read older than it is: the retry reads it anew.
                    self.cache
                        .forget(std::iter::once(id.as_str()), std::iter::empty());
                }
                return Err(e);
            }
        }
        let mut tx = self.begin().await?;
        let applied = crate::apply_in(tx.as_mut(), &set).await?;
        tx.commit().await?;
        Ok(applied)
    }

    async fn get(&self, id: &str) -> Result<Option<Record>> {
        let mut conn = self.pool.acquire().await?;
        get_row(&mut conn, id, RowLock::None).await
    }

    async fn list(&self, query: &ListQuery) -> Result<Page> {
        let mut conn = self.pool.acquire().await?;
        run_list(&mut conn, query).await
    }

    async fn list_items(&self, query: &ListQuery) -> Result<Vec<Record>> {
        let mut conn = self.pool.acquire().await?;
        run_list_items(&mut conn, query).await
    }

    async fn get_cached(&self, id: &str) -> Result<Option<Record>> {
        let (cached, epoch) = self.cache.get(id);
        if cached.is_some() {
            return Ok(cached);
        }
        let found = self.get(id).await?;
        if let Some(r) = &found {
            self.cache.offer(r, epoch);
        }
        Ok(found)
    }

    async fn referrers_cached(&self, target: &str) -> Result<Vec<Reference>> {
        let (cached, epoch) = self.cache.referrers(target);
        if let Some(found) = cached {
            return Ok(found);
        }
        let found = self.referrers(target).await?;
        self.cache.offer_referrers(target, &found, epoch);
        Ok(found)
    }

    async fn get_text(&self, id: &str) -> Result<Option<RecordText>> {
        let row = sqlx::query(&format!(
            "SELECT {TEXT_COLUMNS} FROM objects o WHERE o.id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(decode_text).transpose()
    }

    async fn list_text(&self, query: &ListQuery) -> Result<PageText> {
        let mut conn = self.pool.acquire().await?;
        run_list_text(&mut conn, query).await
    }

    async fn referrers(&self, target: &str) -> Result<Vec<Reference>> {
        let mut conn = self.pool.acquire().await?;
        referrers_of(&mut conn, target).await
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
            "SELECT kind, COALESCE(body #>> '{status,state}', ''), COUNT(*) FROM objects GROUP BY 1, 2",
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
        kv_put(&self.pool, ns, key, value).await
    }

    async fn prune_events(&self, before: DateTime<Utc>, limit: i64) -> Result<u64> {
        prune_events(&self.pool, before, limit).await
    }

    async fn kv_delete(&self, ns: &str, key: &str) -> Result<()> {
        kv_delete(&self.pool, ns, key).await
    }

    async fn kv_write(&self, ns: &str, changes: &[(String, Option<String>)]) -> Result<()> {
        let set = WriteSet::of(vec![Write::Kv {
            ns: ns.to_string(),
            changes: changes.to_vec(),
        }]);
        self.apply(set).await.map(|_| ())
    }

    fn leases(&self) -> Option<&dyn crate::Leases> {
        Some(self)
    }

    async fn kv_exclusive(&self, ns: &str, seen: i64) -> Result<Option<Box<dyn crate::KvBatch>>> {
        Ok(Some(Box::new(
            crate::pg_lease::PgKvBatch::open(self, ns, seen).await?,
        )))
    }

    async fn kv_write_current(
        &self,
        ns: &str,
        seen: i64,
        fences: &[crate::Fence],
        changes: &[(String, Option<String>)],
    ) -> Result<Option<i64>> {
        crate::pg_lease::kv_write_current(&self.pool, ns, seen, fences, changes).await
    }
}

/// A PostgreSQL transaction (READ COMMITTED plus explicit row locks).
/// Starts a write transaction.
async fn begin_tx(
    pool: PgPool,
    feed: broadcast::Sender<Change>,
    origin: String,
    cache: Arc<RecordCache>,
) -> Result<Box<dyn Tx>> {
    let tx = pool.begin().await?;
    Ok(Box::new(PgTx {
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
    }))
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
/// `pg_lease::fence_holds`) and queues its change notifications, which PostgreSQL sends only
/// if the transaction commits. (Written without a join and with the notifications counted
/// in a subquery, so that PostgreSQL keeps one generic plan for it: the join with `unnest`
/// and `count(pg_notify(…))` were planned anew at every commit.)
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
    let (shards, owners, tokens) = crate::pg_lease::fence_arrays(fences);
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

struct PgTx {
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
        crate::pg_events::write(&mut self.tx, &mut self.events, CHANNEL, |rec| {
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
            delete_row(&mut self.tx, &record.id).await?;
            let targets: Vec<String> = stored.into_iter().map(|(_, t)| t).collect();
            self.ref_targets.extend(targets.iter().cloned());
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
