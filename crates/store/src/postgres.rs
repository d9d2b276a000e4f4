//! PostgreSQL backend. Transactions run concurrently; check-then-write sequences take row locks
//! (`Tx::lock` = `SELECT … FOR UPDATE`). Committed changes are also sent with NOTIFY so several
//! processes sharing one database wake each other's controllers. The write transaction is in
//! `postgres/tx.rs`; events, leases and the write paths are the other files of `postgres/`.

mod events;
mod lease;
mod status_batch;
mod tx;
mod usage_writes;
mod write_set;

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use osac_model::Kind;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgListener, PgPoolOptions, PgRow};
use sqlx::types::Json;
use sqlx::{PgPool, Row};
use tokio::sync::broadcast;

use crate::filter_sql::Dialect;
use crate::record::{BodyText, parse_json, to_json};
use crate::record_cache::RecordCache;
use crate::sql_common::COLUMNS;
use crate::{
    Applied, Change, ListQuery, Page, PageText, Record, RecordText, Reference, Result, Store,
    StoreError, Tx, Write, WriteSet,
};
use status_batch::StatusBatcher;
use tx::begin_tx;
use write_set::{Fast, StatusWrite};

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
    /// Concurrent status writes share statements (see `status_batch`).
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
        backfill_metering(&pool, &feed, &origin, &cache).await?;
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

/// Opens the intervals of objects stored before the store metered (see
/// [`crate::metering::backfill`]). Replicas starting together may race for the same object:
/// the loser's transaction fails on the unique interval id and the next attempt finds the
/// winner's intervals.
async fn backfill_metering(
    pool: &PgPool,
    feed: &broadcast::Sender<Change>,
    origin: &str,
    cache: &Arc<RecordCache>,
) -> Result<()> {
    let mut attempt = 0;
    loop {
        let mut tx = tx::begin_pg_tx(
            pool.clone(),
            feed.clone(),
            origin.to_string(),
            cache.clone(),
        )
        .await?;
        let result = match crate::metering::backfill(&mut tx).await {
            Ok(opened) => Box::new(tx).commit().await.map(|()| opened),
            Err(e) => Err(e),
        };
        match result {
            Ok(opened) => {
                if opened > 0 {
                    tracing::info!(
                        opened,
                        "metering: opened the intervals of objects stored before"
                    );
                }
                return Ok(());
            }
            Err(e) if attempt < 3 => {
                attempt += 1;
                tracing::debug!(error = %e, attempt, "metering backfill raced another replica; again");
            }
            Err(e) => return Err(e),
        }
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

crate::traffic::traffic_statements! { pool: PgPool, lock: " FOR UPDATE" }
crate::metering::metering_statements!(connection: PgConnection);

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

    /// One transaction per write set, or one statement for a status write (`write_set`),
    /// shared with the status writes queued meanwhile (`status_batch`: one statement that
    /// commits at once and skips rows others hold). Other sets are not batched into shared
    /// transactions here: PostgreSQL already shares WAL flushes between concurrent commits
    /// (its own group commit), and a shared transaction would hold row locks across a whole
    /// batch, which API transactions would wait for (docs/benchmarks.md, "Group commit on
    /// SQLite").
    async fn apply(&self, set: WriteSet) -> Result<Applied> {
        let since = self.cache.epoch();
        let notice = |change: &Change, sent_at_us: i64| notice_of(&self.origin, change, sent_at_us);
        // A write that opens or closes an interval goes through a transaction, which meters it.
        let meters_nothing = crate::metering::keeps_intervals(&set, |id| self.cache.get(id).0);
        let fast = match StatusWrite::of(&set, notice).filter(|_| meters_nothing) {
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

    async fn record_traffic(
        &self,
        at: DateTime<Utc>,
        samples: &[crate::TrafficSample],
    ) -> Result<()> {
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
        prune_events(&self.pool, before, limit).await
    }

    async fn kv_delete(&self, ns: &str, key: &str) -> Result<()> {
        kv_delete(&self.pool, ns, key).await
    }

    async fn outbox_peek(&self, limit: i64) -> Result<Vec<crate::OutboxEntry>> {
        meter_outbox_peek(&mut *self.pool.acquire().await?, limit).await
    }

    async fn outbox_ack(&self, seqs: &[i64]) -> Result<u64> {
        meter_outbox_ack(&mut *self.pool.acquire().await?, seqs).await
    }

    async fn outbox_len(&self) -> Result<i64> {
        meter_outbox_len(&mut *self.pool.acquire().await?).await
    }

    async fn outbox_append(&self, events: &[crate::OutboxEvent]) -> Result<()> {
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

    /// Serialised between replicas by a transaction-scoped advisory lock, so two replicas
    /// recording at once write each record once.
    async fn record_usage(&self, end: DateTime<Utc>) -> Result<u64> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('osac-metering-usage'))")
            .execute(&mut *tx)
            .await?;
        let n = meter_record_usage(&mut tx, end.timestamp_micros()).await?;
        tx.commit().await?;
        crate::count_write();
        Ok(n)
    }

    async fn prune_usage(&self, before: DateTime<Utc>) -> Result<u64> {
        meter_prune(&mut *self.pool.acquire().await?, before.timestamp_micros()).await
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
            lease::PgKvBatch::open(self, ns, seen).await?,
        )))
    }

    async fn kv_write_current(
        &self,
        ns: &str,
        seen: i64,
        fences: &[crate::Fence],
        changes: &[(String, Option<String>)],
    ) -> Result<Option<i64>> {
        lease::kv_write_current(&self.pool, ns, seen, fences, changes).await
    }
}
