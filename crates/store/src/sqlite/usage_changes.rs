//! SQLite's change log of usage intervals. Every interval change an object write makes (a
//! close, an opening, the finish of a deletion, with their CloudEvents) is written in the
//! write's transaction as one row of `usage_changes`; folding applies the oldest rows to
//! `usage_intervals` and `metering_outbox`, in order, in one transaction per batch, and deletes
//! them.
//!
//! Why: SQLite's writes are serial, and what a write transaction costs under its lock is
//! mostly the pages it dirties. Applied directly, an interval change touches the interval
//! table and its five indexes and the outbox and its two: about ten pages per change. A change
//! row is one append to one table; folded in batches, the pages of the intervals and the outbox
//! are written once for many changes.
//!
//! Exactness: the change row carries everything the change decided (ids, times, dimensions,
//! the CloudEvents' text), so folding decides nothing. Every reader of intervals or of the
//! outbox folds first ([`fold_all`]), and a write looking up an object's open interval reads
//! the object's latest change row before the table ([`open_interval`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use sqlx::{Connection, SqliteConnection, SqlitePool};
use tokio::sync::Mutex;

use crate::Result;
use crate::metering::{ClosingRow, IntervalWrites, OpenInterval, OpeningRow, OutboxEvent};

/// Most change rows one fold transaction applies.
const FOLD_BATCH: i64 = 2_000;

/// Rows of one multi-row statement of a fold (at most 20 parameters each: far below
/// SQLite's limit).
const ROWS_PER_STATEMENT: usize = 200;

/// Changes appended since the last fold that wake the fold before its timer: a fold of a
/// batch this size costs a little of the write lock's time, and keeps the log short.
pub(crate) const FOLD_AFTER: usize = 256;

/// Counts the changes committed since the last fold and wakes the fold when they reach
/// [`FOLD_AFTER`]; the fold also runs on a timer.
#[derive(Debug, Default)]
pub(crate) struct FoldTrigger {
    logged: AtomicUsize,
    wake: Notify,
}

impl FoldTrigger {
    /// A transaction that appended `n` changes committed.
    pub(crate) fn logged(&self, n: usize) {
        if n > 0 && self.logged.fetch_add(n, Ordering::Relaxed) + n >= FOLD_AFTER {
            self.wake.notify_one();
        }
    }

    /// Returns when the log grew by [`FOLD_AFTER`] changes or after `timeout`, whichever comes
    /// first; the count restarts (the fold that follows takes every change committed).
    pub(crate) async fn wait(&self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.wake.notified()).await;
        self.logged.store(0, Ordering::Relaxed);
    }
}

/// How often the log is folded at the latest: keeps it short, so a write that looks up an
/// open interval in it reads little.
const FOLD_INTERVAL: Duration = Duration::from_secs(1);

/// Folds the interval change log every [`FOLD_INTERVAL`], and as soon as it grew by
/// [`FOLD_AFTER`] changes, until the store is gone.
pub(crate) fn spawn_fold(
    pool: SqlitePool,
    write_lock: Arc<Mutex<()>>,
    fold: Arc<FoldTrigger>,
    alive: Weak<()>,
) {
    tokio::spawn(async move {
        loop {
            fold.wait(FOLD_INTERVAL).await;
            if pool.is_closed() || alive.strong_count() == 0 {
                return;
            }
            if let Err(e) = fold_pending(&pool, &write_lock).await {
                tracing::warn!(error = %e, "metering: folding interval changes failed");
            }
        }
    });
}

/// Folds the interval change log when it holds anything (taking the write lock only then).
pub(crate) async fn fold_pending(pool: &SqlitePool, write_lock: &Mutex<()>) -> Result<()> {
    let pending = {
        let mut conn = pool.acquire().await?;
        pending(&mut conn).await?
    };
    if pending {
        let _guard = write_lock.lock().await;
        let mut conn = pool.acquire().await?;
        fold_all(&mut conn).await?;
    }
    Ok(())
}

/// Appends one object write's interval changes to the log.
pub(crate) async fn append(
    conn: &mut SqliteConnection,
    object_id: &str,
    writes: &IntervalWrites,
) -> Result<()> {
    let text = serde_json::to_string(writes)
        .map_err(|e| crate::StoreError::Corrupt(format!("usage change: {e}")))?;
    sqlx::query("INSERT INTO usage_changes (object_id, writes) VALUES ($1, $2)")
        .bind(object_id)
        .bind(text)
        .execute(conn)
        .await?;
    Ok(())
}

/// The object's open interval as the log leaves it: Some(state) when the log has a change of
/// the object (its latest decides), None when the table alone knows it.
pub(crate) async fn open_interval(
    conn: &mut SqliteConnection,
    object_id: &str,
) -> Result<Option<Option<OpenInterval>>> {
    let latest: Option<String> = sqlx::query_scalar(
        "SELECT writes FROM usage_changes WHERE object_id = $1 ORDER BY seq DESC LIMIT 1",
    )
    .bind(object_id)
    .fetch_optional(conn)
    .await?;
    let Some(text) = latest else {
        return Ok(None);
    };
    let writes = decode(&text)?;
    Ok(Some(writes.open.map(|o| OpenInterval {
        id: o.id,
        signature: o.signature,
        started_us: o.started_us,
        dims: o.dims,
    })))
}

fn decode(text: &str) -> Result<IntervalWrites> {
    serde_json::from_str(text).map_err(|e| crate::StoreError::Corrupt(format!("usage change: {e}")))
}

/// Whether the log holds a change not folded yet.
pub(crate) async fn pending(conn: &mut SqliteConnection) -> Result<bool> {
    Ok(
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM usage_changes)")
            .fetch_one(conn)
            .await?,
    )
}

/// Folds the whole log, a batch per transaction (the caller holds the store's write lock).
/// Returns how many changes it folded.
pub(crate) async fn fold_all(conn: &mut SqliteConnection) -> Result<u64> {
    let mut folded = 0;
    loop {
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
        let n = fold_batch(&mut tx).await?;
        tx.commit().await?;
        folded += n;
        if n < FOLD_BATCH as u64 {
            return Ok(folded);
        }
    }
}

/// Folds the oldest [`FOLD_BATCH`] changes in the caller's transaction; returns how many.
pub(crate) async fn fold_batch(conn: &mut SqliteConnection) -> Result<u64> {
    let rows: Vec<(i64, String, String)> =
        sqlx::query_as("SELECT seq, object_id, writes FROM usage_changes ORDER BY seq LIMIT $1")
            .bind(FOLD_BATCH)
            .fetch_all(&mut *conn)
            .await?;
    let Some(&(last, _, _)) = rows.last() else {
        return Ok(0);
    };
    let mut changes = Vec::with_capacity(rows.len());
    for (_, object_id, text) in &rows {
        changes.push((object_id.clone(), decode(text)?));
    }
    let plan = plan(changes);
    write_closes(conn, &plan.closes).await?;
    write_intervals(conn, &plan.intervals).await?;
    write_finishes(conn, &plan.finishes).await?;
    for chunk in plan.outbox.chunks(ROWS_PER_STATEMENT) {
        let mut q =
            sqlx::QueryBuilder::new("INSERT INTO metering_outbox (event_id, subject, payload) ");
        q.push_values(chunk, |mut row, e| {
            row.push_bind(&e.event_id)
                .push_bind(&e.subject)
                .push_bind(&e.payload);
        });
        q.push(" ON CONFLICT (event_id) DO NOTHING");
        q.build().execute(&mut *conn).await?;
    }
    sqlx::query("DELETE FROM usage_changes WHERE seq <= $1")
        .bind(last)
        .execute(&mut *conn)
        .await?;
    Ok(rows.len() as u64)
}

/// An interval a batch opens, with what later changes of the batch did to it.
#[derive(Debug, PartialEq)]
pub(crate) struct FoldedInterval {
    pub object_id: String,
    pub open: OpeningRow,
    pub close: Option<ClosingRow>,
    pub finished_us: Option<i64>,
}

/// What a batch of changes does to the tables, as few statements can write it.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct FoldPlan {
    /// Closes of intervals the table holds (written first: their objects may open the next).
    pub closes: Vec<ClosingRow>,
    /// The intervals the batch opens, in order, closed and finished as the batch left them.
    pub intervals: Vec<FoldedInterval>,
    /// Deletions finished of objects whose latest interval the table holds: (object, time).
    pub finishes: Vec<(String, i64)>,
    /// The CloudEvents, in the order of the changes.
    pub outbox: Vec<OutboxEvent>,
}

/// Folds a batch of changes (object id, its changes), oldest first, into one plan with the
/// same effect as applying each change in turn: a close or finish of an interval the batch
/// opened lands on its row before it is written; a close of an older interval is kept once
/// (an interval ends once).
pub(crate) fn plan(changes: Vec<(String, IntervalWrites)>) -> FoldPlan {
    let mut plan = FoldPlan::default();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    let mut latest_of: HashMap<String, usize> = HashMap::new();
    let mut closed_in_table: std::collections::HashSet<String> = Default::default();
    let mut finished_in_table: std::collections::HashSet<String> = Default::default();
    for (object_id, w) in changes {
        if let Some(close) = w.close {
            match by_id.get(&close.id) {
                Some(&i) => {
                    let row = &mut plan.intervals[i];
                    if row.close.is_none() {
                        row.close = Some(close);
                    }
                }
                None => {
                    if closed_in_table.insert(close.id.clone()) {
                        plan.closes.push(close);
                    }
                }
            }
        }
        if let Some(open) = w.open {
            by_id.insert(open.id.clone(), plan.intervals.len());
            latest_of.insert(object_id.clone(), plan.intervals.len());
            plan.intervals.push(FoldedInterval {
                object_id: object_id.clone(),
                open,
                close: None,
                finished_us: None,
            });
        }
        if let Some(at) = w.finished_us {
            match latest_of.get(&object_id) {
                Some(&i) => {
                    let row = &mut plan.intervals[i];
                    row.finished_us.get_or_insert(at);
                }
                None => {
                    if finished_in_table.insert(object_id.clone()) {
                        plan.finishes.push((object_id.clone(), at));
                    }
                }
            }
        }
        plan.outbox.extend(w.outbox);
    }
    plan
}

/// Ends intervals the table holds (an interval already ended keeps its end).
async fn write_closes(conn: &mut SqliteConnection, closes: &[ClosingRow]) -> Result<()> {
    for chunk in closes.chunks(ROWS_PER_STATEMENT) {
        let mut q = sqlx::QueryBuilder::new(
            "UPDATE usage_intervals SET ended_us = v.column2, end_reason = v.column3, \
             deletion_requested_us = v.column4 FROM (",
        );
        q.push_values(chunk, |mut row, c| {
            row.push_bind(&c.id)
                .push_bind(c.ended_us)
                .push_bind(&c.reason)
                .push_bind(c.deletion_requested_us);
        });
        q.push(") AS v WHERE usage_intervals.id = v.column1 AND usage_intervals.ended_us IS NULL");
        q.build().execute(&mut *conn).await?;
    }
    Ok(())
}

/// Inserts the intervals a batch opened, as the batch left them.
async fn write_intervals(conn: &mut SqliteConnection, rows: &[FoldedInterval]) -> Result<()> {
    for chunk in rows.chunks(ROWS_PER_STATEMENT) {
        let mut q = sqlx::QueryBuilder::new(
            "INSERT INTO usage_intervals (id, object_id, ordinal, signature, tenant, tenant_id, \
             kind, object_name, network_class, ip_family, attached, parent_kind, parent_id, \
             started_us, reported_us, ended_us, end_reason, deletion_requested_us, \
             deletion_finished_us) ",
        );
        q.push_values(chunk, |mut row, r| {
            let (o, d) = (&r.open, &r.open.dims);
            row.push_bind(&o.id)
                .push_bind(&r.object_id)
                .push_bind(o.ordinal)
                .push_bind(&o.signature)
                .push_bind(&d.tenant)
                .push_bind(&d.tenant_id)
                .push_bind(&d.kind)
                .push_bind(&d.object_name)
                .push_bind(&d.network_class)
                .push_bind(&d.ip_family)
                .push_bind(&d.attached)
                .push_bind(&d.parent_kind)
                .push_bind(&d.parent)
                .push_bind(o.started_us)
                .push_bind(o.started_us)
                .push_bind(r.close.as_ref().map(|c| c.ended_us))
                .push_bind(r.close.as_ref().map(|c| c.reason.clone()))
                .push_bind(r.close.as_ref().and_then(|c| c.deletion_requested_us))
                .push_bind(r.finished_us);
        });
        q.build().execute(&mut *conn).await?;
    }
    Ok(())
}

/// Records the finished deletions on their objects' latest intervals in the table.
async fn write_finishes(conn: &mut SqliteConnection, finishes: &[(String, i64)]) -> Result<()> {
    for chunk in finishes.chunks(ROWS_PER_STATEMENT) {
        let mut q = sqlx::QueryBuilder::new(
            "UPDATE usage_intervals SET deletion_finished_us = v.column2 FROM (",
        );
        q.push_values(chunk, |mut row, (object_id, at)| {
            row.push_bind(object_id).push_bind(*at);
        });
        q.push(
            ") AS v WHERE usage_intervals.id = (SELECT u.id FROM usage_intervals u \
             WHERE u.object_id = v.column1 ORDER BY u.ordinal DESC LIMIT 1) \
             AND usage_intervals.deletion_finished_us IS NULL",
        );
        q.build().execute(&mut *conn).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use osac_model::metering::Dimensions;

    fn opening(id: &str, at: i64) -> OpeningRow {
        OpeningRow {
            id: id.to_string(),
            ordinal: at,
            signature: format!("sig-{id}"),
            dims: Dimensions::default(),
            started_us: at,
        }
    }

    fn closing(id: &str, at: i64) -> ClosingRow {
        ClosingRow {
            id: id.to_string(),
            ended_us: at,
            reason: "dimension_changed".to_string(),
            deletion_requested_us: None,
        }
    }

    fn event(id: &str) -> OutboxEvent {
        OutboxEvent {
            event_id: id.to_string(),
            subject: "s".to_string(),
            payload: "{}".to_string(),
        }
    }

    fn change(
        object: &str,
        close: Option<ClosingRow>,
        open: Option<OpeningRow>,
        finished_us: Option<i64>,
        events: &[&str],
    ) -> (String, IntervalWrites) {
        let writes = IntervalWrites {
            close,
            open,
            finished_us,
            outbox: events.iter().map(|e| event(e)).collect(),
        };
        (object.to_string(), writes)
    }

    #[test]
    fn an_interval_opened_and_closed_in_one_batch_is_written_once_closed() {
        let plan = plan(vec![
            change("a", None, Some(opening("a.1", 1)), None, &["o1"]),
            change(
                "a",
                Some(closing("a.1", 5)),
                Some(opening("a.2", 5)),
                None,
                &["c1", "o2"],
            ),
        ]);
        assert!(plan.closes.is_empty());
        assert_eq!(plan.intervals.len(), 2);
        assert_eq!(plan.intervals[0].close, Some(closing("a.1", 5)));
        assert_eq!(plan.intervals[1].close, None);
        let ids: Vec<_> = plan.outbox.iter().map(|e| e.event_id.as_str()).collect();
        assert_eq!(
            ids,
            ["o1", "c1", "o2"],
            "events keep the order of the changes"
        );
    }

    #[test]
    fn a_close_of_an_older_interval_goes_to_the_table_before_the_next_opens() {
        let plan = plan(vec![change(
            "a",
            Some(closing("a.1", 5)),
            Some(opening("a.7", 5)),
            None,
            &[],
        )]);
        assert_eq!(plan.closes, vec![closing("a.1", 5)]);
        assert_eq!(plan.intervals.len(), 1);
        assert_eq!(plan.intervals[0].close, None);
    }

    #[test]
    fn a_finish_lands_on_the_latest_interval_the_batch_opened_else_the_table() {
        let plan = plan(vec![
            change("a", None, Some(opening("a.1", 1)), None, &[]),
            change("a", Some(closing("a.1", 4)), None, None, &[]),
            change("a", None, None, Some(6), &[]),
            change("b", Some(closing("b.1", 4)), None, None, &[]),
            change("b", None, None, Some(7), &[]),
        ]);
        assert_eq!(plan.intervals[0].finished_us, Some(6));
        assert_eq!(plan.intervals[0].close, Some(closing("a.1", 4)));
        assert_eq!(plan.closes, vec![closing("b.1", 4)]);
        assert_eq!(plan.finishes, vec![("b".to_string(), 7)]);
    }

    #[test]
    fn an_interval_ends_once() {
        let plan = plan(vec![
            change("a", None, Some(opening("a.1", 1)), None, &[]),
            change("a", Some(closing("a.1", 4)), None, None, &[]),
            change("a", Some(closing("a.1", 9)), None, None, &[]),
            change("b", Some(closing("b.1", 4)), None, None, &[]),
            change("b", Some(closing("b.1", 9)), None, None, &[]),
        ]);
        assert_eq!(plan.intervals[0].close, Some(closing("a.1", 4)));
        assert_eq!(plan.closes, vec![closing("b.1", 4)]);
    }

    /// The change log and its fold, on a real database: what a write looking up an open
    /// interval sees before and after a fold, and the rows a fold leaves.
    #[tokio::test]
    async fn the_log_decides_an_open_interval_until_it_is_folded() {
        let mut conn = <SqliteConnection as Connection>::connect("sqlite::memory:")
            .await
            .expect("connect");
        sqlx::migrate!("./migrations/sqlite")
            .run(&mut conn)
            .await
            .expect("migrate");
        let write = |w: IntervalWrites| w;
        append(
            &mut conn,
            "a",
            &write(change("a", None, Some(opening("a.1", 1)), None, &["a.1.opened"]).1),
        )
        .await
        .expect("append");
        let open = open_interval(&mut conn, "a").await.expect("read");
        assert_eq!(open.map(|o| o.map(|o| o.id)), Some(Some("a.1".to_string())));
        assert_eq!(open_interval(&mut conn, "b").await.expect("read"), None);
        assert_eq!(fold_all(&mut conn).await.expect("fold"), 1);
        assert!(!pending(&mut conn).await.expect("pending"));
        assert_eq!(
            open_interval(&mut conn, "a").await.expect("read"),
            None,
            "the table knows it now"
        );

        // The next change closes the folded interval, opens another and finishes the object.
        append(
            &mut conn,
            "a",
            &change(
                "a",
                Some(closing("a.1", 5)),
                Some(opening("a.5", 5)),
                None,
                &["a.1.closed", "a.5.opened"],
            )
            .1,
        )
        .await
        .expect("append");
        append(
            &mut conn,
            "a",
            &change("a", Some(closing("a.5", 8)), None, Some(9), &["a.5.closed"]).1,
        )
        .await
        .expect("append");
        assert_eq!(
            open_interval(&mut conn, "a").await.expect("read"),
            Some(None)
        );
        assert_eq!(fold_all(&mut conn).await.expect("fold"), 2);
        type Row = (String, Option<i64>, Option<String>, Option<i64>);
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT id, ended_us, end_reason, deletion_finished_us FROM usage_intervals ORDER BY ordinal",
        )
        .fetch_all(&mut conn)
        .await
        .expect("rows");
        let reason = Some("dimension_changed".to_string());
        assert_eq!(
            rows,
            vec![
                ("a.1".to_string(), Some(5), reason.clone(), None),
                ("a.5".to_string(), Some(8), reason, Some(9)),
            ]
        );
        let events: Vec<String> =
            sqlx::query_scalar("SELECT event_id FROM metering_outbox ORDER BY seq")
                .fetch_all(&mut conn)
                .await
                .expect("outbox");
        assert_eq!(
            events,
            ["a.1.opened", "a.1.closed", "a.5.opened", "a.5.closed"]
        );
    }
}
