//! A commit's deferred events, interval changes and CloudEvents written by one statement text
//! of a few fixed shapes, so SQLite prepares it once per connection instead of at every commit.
//!
//! Why: a group commit's rows differ in number every time, and the text of a multi-row
//! statement with it; SQLite then parses and plans the events, the closes, the openings and
//! the outbox rows at every commit, which costs about as much as executing them. Here each
//! part has room for a fixed number of rows (the smallest tier that holds the commit's), the
//! unused room is bound to NULL and skipped, and the connection's statement cache keeps the
//! prepared statements: 24 texts in all. A commit with more rows than the largest tiers hold,
//! or with finished deletions to record, takes the multi-row statements of `events` and
//! `usage_writes` instead, also in one execution.

use std::sync::OnceLock;

use sqlx::SqliteConnection;
use sqlx::sqlite::SqliteArguments;

use super::events::EVENT_COLUMNS;
use super::usage_writes::{INTERVAL_COLUMNS, WritePlan};
use crate::record::{to_json, ts_text};
use crate::{Record, Result};

/// Rows the events part has room for.
const EVENT_TIERS: [usize; 4] = [4, 16, 64, 256];

/// Rows the closes and the openings have room for; the CloudEvents have twice as many (an
/// interval that reopens writes two).
const INTERVAL_TIERS: [usize; 4] = [2, 8, 32, 128];

/// Which parts a commit's statement has, and their tiers (indexes of [`EVENT_TIERS`] and
/// [`INTERVAL_TIERS`]; None: the part is left out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    events: Option<usize>,
    intervals: Option<usize>,
}

/// The shape that holds `events` and `plan`; None when there is nothing to write, when the
/// plan records finished deletions, or when a part has more rows than its largest tier.
pub(crate) fn shape_of(events: &[Record], plan: &WritePlan) -> Option<Shape> {
    if !plan.finishes.is_empty() {
        return None;
    }
    let events = tier(&EVENT_TIERS, events.len())?;
    let need = plan
        .closes
        .len()
        .max(plan.intervals.len())
        .max(plan.outbox.len().div_ceil(2));
    let intervals = tier(&INTERVAL_TIERS, need)?;
    if events.is_none() && intervals.is_none() {
        return None;
    }
    Some(Shape { events, intervals })
}

/// Some(None) for no rows, Some(Some(tier)) for the smallest tier that holds `rows`, None when
/// none does.
fn tier(tiers: &[usize], rows: usize) -> Option<Option<usize>> {
    if rows == 0 {
        return Some(None);
    }
    tiers.iter().position(|&t| t >= rows).map(Some)
}

/// Writes `events` (in their order), then the closes of `plan` (first: their objects may open
/// the next), its openings and its CloudEvents (in their order), with the statement of `shape`.
pub(crate) async fn execute(
    conn: &mut SqliteConnection,
    shape: Shape,
    events: &[Record],
    plan: &WritePlan,
) -> Result<()> {
    let mut args = SqliteArguments::default();
    if let Some(t) = shape.events {
        bind_events(&mut args, events, EVENT_TIERS[t])?;
    }
    if let Some(t) = shape.intervals {
        let rows = INTERVAL_TIERS[t];
        bind_closes(&mut args, plan, rows)?;
        bind_openings(&mut args, plan, rows)?;
        bind_outbox(&mut args, plan, 2 * rows)?;
    }
    sqlx::query_with(text(shape), args).execute(conn).await?;
    Ok(())
}

/// Binds one value.
fn bind<'q, T>(args: &mut SqliteArguments<'q>, value: T) -> Result<()>
where
    T: sqlx::Encode<'q, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite> + 'q,
{
    use sqlx::Arguments;
    args.add(value)
        .map_err(|e| crate::StoreError::Corrupt(format!("binding a commit's row: {e}")))
}

/// Binds `n` NULLs.
fn bind_nulls(args: &mut SqliteArguments<'_>, n: usize) -> Result<()> {
    for _ in 0..n {
        bind(args, None::<&str>)?;
    }
    Ok(())
}

fn bind_events<'q>(
    args: &mut SqliteArguments<'q>,
    events: &'q [Record],
    rows: usize,
) -> Result<()> {
    for i in 0..rows {
        let Some(rec) = events.get(i) else {
            bind_nulls(args, 12)?;
            continue;
        };
        bind(args, rec.id.as_str())?;
        bind(args, rec.kind.collection())?;
        bind(args, rec.tenant.as_str())?;
        bind(args, rec.name.as_deref())?;
        bind(args, rec.creator.as_str())?;
        bind(args, rec.version)?;
        bind(args, ts_text(&rec.created_at))?;
        bind(args, rec.deleted_at.as_ref().map(ts_text))?;
        bind(args, to_json(&rec.labels))?;
        bind(args, to_json(&rec.annotations))?;
        bind(args, to_json(&rec.finalizers))?;
        bind(args, to_json(&rec.body))?;
    }
    Ok(())
}

fn bind_closes<'q>(args: &mut SqliteArguments<'q>, plan: &'q WritePlan, rows: usize) -> Result<()> {
    for i in 0..rows {
        let c = plan.closes.get(i);
        bind(args, c.map(|c| c.id.as_str()))?;
        bind(args, c.map(|c| c.ended_us))?;
        bind(args, c.map(|c| c.reason))?;
        bind(args, c.and_then(|c| c.deletion_requested_us))?;
    }
    Ok(())
}

fn bind_openings<'q>(
    args: &mut SqliteArguments<'q>,
    plan: &'q WritePlan,
    rows: usize,
) -> Result<()> {
    for i in 0..rows {
        let Some(r) = plan.intervals.get(i) else {
            bind_nulls(args, 19)?;
            continue;
        };
        let (o, d) = (&r.open, &r.open.dims);
        for text in [&o.id, &d.object] {
            bind(args, text.as_str())?;
        }
        bind(args, o.ordinal)?;
        for text in [
            &o.signature,
            &d.tenant,
            &d.tenant_id,
            &d.kind,
            &d.object_name,
            &d.network_class,
            &d.ip_family,
            &d.attached,
            &d.parent_kind,
            &d.parent,
        ] {
            bind(args, text.as_str())?;
        }
        bind(args, o.started_us)?;
        bind(args, o.started_us)?;
        bind(args, r.close.as_ref().map(|c| c.ended_us))?;
        bind(args, r.close.as_ref().map(|c| c.reason))?;
        bind(args, r.close.as_ref().and_then(|c| c.deletion_requested_us))?;
        bind(args, r.finished_us)?;
    }
    Ok(())
}

fn bind_outbox<'q>(args: &mut SqliteArguments<'q>, plan: &'q WritePlan, rows: usize) -> Result<()> {
    for i in 0..rows {
        let e = plan.outbox.get(i);
        bind(args, e.map(|e| e.event_id.as_str()))?;
        bind(args, e.map(|e| e.subject.as_str()))?;
        bind(args, e.map(|e| e.payload.as_str()))?;
    }
    Ok(())
}

/// The statement text of a shape, each built once.
fn text(shape: Shape) -> &'static str {
    const SLOTS: usize = EVENT_TIERS.len() + 1;
    static TEXTS: OnceLock<Vec<String>> = OnceLock::new();
    let slot = |tier: Option<usize>| tier.map_or(0, |t| t + 1);
    let texts = TEXTS.get_or_init(|| {
        let tiers = |n: usize| std::iter::once(None).chain((0..n).map(Some));
        tiers(EVENT_TIERS.len())
            .flat_map(|e| tiers(INTERVAL_TIERS.len()).map(move |i| (e, i)))
            .map(|(events, intervals)| statement(Shape { events, intervals }))
            .collect()
    });
    let index = slot(shape.events) * SLOTS + slot(shape.intervals);
    texts.get(index).map(String::as_str).unwrap_or_default()
}

/// `n` value rows of `columns` parameters each, with the row's position appended when
/// `numbered` (to keep the rows' order where it matters).
fn value_rows(n: usize, columns: usize, numbered: bool) -> String {
    let row = vec!["?"; columns].join(", ");
    (0..n)
        .map(|i| {
            if numbered {
                format!("({row}, {i})")
            } else {
                format!("({row})")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The statements of a shape. Unused rows are NULL: they match no interval and are filtered
/// before the inserts. Events and outbox rows are inserted in their order (their sequence is
/// the order watches and the export see them). The close matches the interval by its key
/// only: `+ended_us` keeps the open intervals' index out of SQLite's plan.
fn statement(shape: Shape) -> String {
    let mut parts = Vec::new();
    if let Some(t) = shape.events {
        let columns = (1..=12)
            .map(|i| format!("column{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        parts.push(format!(
            "INSERT INTO objects ({EVENT_COLUMNS}) SELECT {columns} FROM (VALUES {}) \
             WHERE column1 IS NOT NULL ORDER BY column13",
            value_rows(EVENT_TIERS[t], 12, true)
        ));
    }
    if let Some(t) = shape.intervals {
        let rows = INTERVAL_TIERS[t];
        parts.push(format!(
            "UPDATE usage_intervals SET ended_us = c.column2, end_reason = c.column3, \
             deletion_requested_us = c.column4 FROM (VALUES {}) AS c \
             WHERE usage_intervals.id = c.column1 AND +usage_intervals.ended_us IS NULL",
            value_rows(rows, 4, false)
        ));
        parts.push(format!(
            "INSERT INTO usage_intervals ({INTERVAL_COLUMNS}) \
             SELECT * FROM (VALUES {}) WHERE column1 IS NOT NULL",
            value_rows(rows, 19, false)
        ));
        parts.push(format!(
            "INSERT INTO metering_outbox (event_id, subject, payload) \
             SELECT column1, column2, column3 FROM (VALUES {}) WHERE column1 IS NOT NULL \
             ORDER BY column4 ON CONFLICT (event_id) DO NOTHING",
            value_rows(2 * rows, 3, true)
        ));
    }
    parts.join("; ")
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::metering::{ClosingRow, OpeningRow, OutboxEvent};
    use crate::sqlite::usage_writes::PlannedInterval;
    use osac_model::metering::Dimensions;
    use sqlx::Connection;

    /// A migrated in-memory database.
    pub(in crate::sqlite) async fn database() -> SqliteConnection {
        let mut conn = SqliteConnection::connect("sqlite::memory:")
            .await
            .expect("connect");
        sqlx::migrate!("./migrations/sqlite")
            .run(&mut conn)
            .await
            .expect("migrate");
        conn
    }

    fn opening(object: &str, ordinal: i64) -> PlannedInterval {
        PlannedInterval {
            open: OpeningRow {
                id: format!("{object}.{ordinal}"),
                ordinal,
                signature: "attached=false".to_string(),
                dims: Dimensions {
                    object: object.to_string(),
                    ..Dimensions::default()
                },
                started_us: ordinal,
            },
            close: None,
            finished_us: None,
        }
    }

    fn event(id: String) -> OutboxEvent {
        OutboxEvent {
            event_id: id,
            subject: "s".to_string(),
            payload: "{}".to_string(),
        }
    }

    /// Many open intervals and the planner's statistics: the close still finds each
    /// interval by its key, not by scanning the open intervals.
    #[tokio::test]
    async fn a_close_finds_its_interval_by_key_whatever_the_statistics() {
        let mut conn = database().await;
        let plan = WritePlan {
            intervals: (0..100).map(|i| opening(&format!("o{i:03}"), 1)).collect(),
            ..WritePlan::default()
        };
        let shape = shape_of(&[], &plan).expect("shape");
        execute(&mut conn, shape, &[], &plan).await.expect("open");
        sqlx::query("ANALYZE")
            .execute(&mut conn)
            .await
            .expect("analyze");
        let close = statement(Shape {
            events: None,
            intervals: Some(1),
        });
        let update = close.split(';').next().unwrap_or_default();
        let steps: Vec<(i64, i64, i64, String)> =
            sqlx::query_as(&format!("EXPLAIN QUERY PLAN {update}"))
                .fetch_all(&mut conn)
                .await
                .expect("plan");
        let plan_text: Vec<&str> = steps.iter().map(|s| s.3.as_str()).collect();
        assert!(
            plan_text
                .iter()
                .any(|s| s.starts_with("SEARCH usage_intervals") && s.contains("(id=?)")),
            "{plan_text:?}"
        );
    }

    /// A tier's rows closed and opened, and CloudEvents kept in the order of the changes
    /// (their ids sort the other way round).
    #[tokio::test]
    async fn rows_are_written_and_events_keep_their_order() {
        let mut conn = database().await;
        let first = WritePlan {
            intervals: (0..20).map(|i| opening(&format!("o{i:02}"), 1)).collect(),
            outbox: (0..40).rev().map(|i| event(format!("e{i:02}"))).collect(),
            ..WritePlan::default()
        };
        let shape = shape_of(&[], &first).expect("shape");
        assert_eq!(shape.intervals, Some(2));
        execute(&mut conn, shape, &[], &first).await.expect("first");
        let second = WritePlan {
            closes: (0..20)
                .map(|i| ClosingRow {
                    id: format!("o{i:02}.1"),
                    ended_us: 7,
                    reason: "dimension_changed",
                    deletion_requested_us: None,
                })
                .collect(),
            intervals: (0..20).map(|i| opening(&format!("o{i:02}"), 7)).collect(),
            ..WritePlan::default()
        };
        let shape = shape_of(&[], &second).expect("shape");
        execute(&mut conn, shape, &[], &second)
            .await
            .expect("second");
        let open: Vec<String> =
            sqlx::query_scalar("SELECT id FROM usage_intervals WHERE ended_us IS NULL ORDER BY id")
                .fetch_all(&mut conn)
                .await
                .expect("open");
        let wanted: Vec<String> = (0..20).map(|i| format!("o{i:02}.7")).collect();
        assert_eq!(open, wanted);
        let events: Vec<String> =
            sqlx::query_scalar("SELECT event_id FROM metering_outbox ORDER BY seq")
                .fetch_all(&mut conn)
                .await
                .expect("outbox");
        let wanted: Vec<String> = (0..40).rev().map(|i| format!("e{i:02}")).collect();
        assert_eq!(events, wanted);
    }

    #[test]
    fn the_smallest_tiers_that_hold_the_rows_are_chosen() {
        let none = WritePlan::default();
        assert_eq!(shape_of(&[], &none), None, "nothing to write");
        let outbox = |n: usize| WritePlan {
            outbox: (0..n).map(|i| event(format!("e{i}"))).collect(),
            ..WritePlan::default()
        };
        let intervals = |plan: &WritePlan| shape_of(&[], plan).map(|s| s.intervals);
        assert_eq!(intervals(&outbox(1)), Some(Some(0)));
        assert_eq!(intervals(&outbox(4)), Some(Some(0)));
        assert_eq!(intervals(&outbox(5)), Some(Some(1)));
        assert_eq!(intervals(&outbox(256)), Some(Some(3)));
        assert_eq!(intervals(&outbox(257)), None, "more than the largest tier");
        let openings = WritePlan {
            intervals: (0..129).map(|i| opening(&format!("o{i}"), 1)).collect(),
            ..WritePlan::default()
        };
        assert_eq!(shape_of(&[], &openings), None);
        let finishing = WritePlan {
            finishes: vec![("o1".to_string(), 5)],
            ..outbox(1)
        };
        assert_eq!(shape_of(&[], &finishing), None, "finishes take the batch");
        let events: Vec<Record> = (0..17).map(|_| event_record("e")).collect();
        let shape = shape_of(&events, &none).expect("shape");
        assert_eq!((shape.events, shape.intervals), (Some(2), None));
        let many: Vec<Record> = (0..257).map(|_| event_record("e")).collect();
        assert_eq!(shape_of(&many, &outbox(1)), None);
        let question_marks = |shape| text(shape).matches('?').count();
        let both = Shape {
            events: Some(0),
            intervals: Some(0),
        };
        assert_eq!(question_marks(both), 4 * 12 + 2 * 4 + 2 * 19 + 4 * 3);
    }

    fn event_record(reason: &str) -> Record {
        Record::new(
            osac_model::Kind::Event,
            "t",
            serde_json::json!({ "reason": reason }),
        )
    }

    /// Events and interval rows in one statement: the events keep their order.
    #[tokio::test]
    async fn events_are_written_in_their_order_with_the_intervals() {
        let mut conn = database().await;
        let events: Vec<Record> = (0..10).map(|i| event_record(&format!("r{i}"))).collect();
        let plan = WritePlan {
            intervals: vec![opening("o1", 1)],
            outbox: vec![event("o1.1.opened".to_string())],
            ..WritePlan::default()
        };
        let shape = shape_of(&events, &plan).expect("shape");
        execute(&mut conn, shape, &events, &plan)
            .await
            .expect("write");
        let written: Vec<String> =
            sqlx::query_scalar("SELECT id FROM objects WHERE kind = 'events' ORDER BY seq")
                .fetch_all(&mut conn)
                .await
                .expect("events");
        let wanted: Vec<String> = events.iter().map(|e| e.id.clone()).collect();
        assert_eq!(written, wanted);
        let bodies: Vec<String> =
            sqlx::query_scalar("SELECT body FROM objects WHERE kind = 'events' ORDER BY seq")
                .fetch_all(&mut conn)
                .await
                .expect("bodies");
        assert_eq!(bodies[3], r#"{"reason":"r3"}"#);
        let intervals: i64 = sqlx::query_scalar("SELECT count(*) FROM usage_intervals")
            .fetch_one(&mut conn)
            .await
            .expect("intervals");
        assert_eq!(intervals, 1);
    }
}
