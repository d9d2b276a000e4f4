//! A commit's interval changes and CloudEvents written by one statement text of a few fixed
//! sizes, so SQLite prepares it once per connection instead of at every commit.
//!
//! Why: a group commit's rows differ in number every time, and the text of a multi-row
//! statement with it; SQLite then parses and plans the closes, the openings and the outbox
//! rows at every commit, which costs about as much as executing them. Here each part has room
//! for a fixed number of rows (the smallest of [`TIERS`] that holds the commit's), the unused
//! room is bound to NULL and skipped, and the statement cache of the connection keeps the
//! prepared statements. A commit with more rows than the largest tier holds takes the
//! multi-row statements of `usage_writes` instead.

use std::sync::OnceLock;

use sqlx::SqliteConnection;
use sqlx::sqlite::SqliteArguments;

use super::usage_writes::WritePlan;
use crate::Result;

/// Rows each part of a statement has room for: closes and openings hold this many, the
/// CloudEvents twice as many (an interval that reopens writes two).
const TIERS: [usize; 4] = [2, 8, 32, 128];

/// The columns of an interval row, in the order its values are bound.
const INTERVAL_COLUMNS: &str = "id, object_id, ordinal, signature, tenant, tenant_id, kind, \
     object_name, network_class, ip_family, attached, parent_kind, parent_id, started_us, \
     reported_us, ended_us, end_reason, deletion_requested_us, deletion_finished_us";

/// Which tier holds the closes, openings and CloudEvents of `plan` (an index of [`TIERS`]);
/// None when it has none of them, or more than the largest tier holds.
pub(crate) fn tier_of(plan: &WritePlan) -> Option<usize> {
    let need = plan
        .closes
        .len()
        .max(plan.intervals.len())
        .max(plan.outbox.len().div_ceil(2));
    if need == 0 {
        return None;
    }
    TIERS.iter().position(|&rows| rows >= need)
}

/// Whether `plan` has rows the tiers cannot hold.
pub(crate) fn too_large(plan: &WritePlan) -> bool {
    tier_of(plan).is_none()
        && !(plan.closes.is_empty() && plan.intervals.is_empty() && plan.outbox.is_empty())
}

/// Writes the closes (first: their objects may open the next), the openings and the
/// CloudEvents (in their order) of `plan` with the statement of `tier`.
pub(crate) async fn execute(
    conn: &mut SqliteConnection,
    tier: usize,
    plan: &WritePlan,
) -> Result<()> {
    let rows = TIERS[tier.min(TIERS.len() - 1)];
    let mut args = SqliteArguments::default();
    bind_closes(&mut args, plan, rows)?;
    bind_openings(&mut args, plan, rows)?;
    bind_outbox(&mut args, plan, 2 * rows)?;
    sqlx::query_with(text(tier), args).execute(conn).await?;
    Ok(())
}

/// Binds one value.
fn bind<'q, T>(args: &mut SqliteArguments<'q>, value: T) -> Result<()>
where
    T: sqlx::Encode<'q, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite> + 'q,
{
    use sqlx::Arguments;
    args.add(value)
        .map_err(|e| crate::StoreError::Corrupt(format!("binding a metering row: {e}")))
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
            for _ in 0..19 {
                bind(args, None::<&str>)?;
            }
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

/// The statement text of a tier, built once.
fn text(tier: usize) -> &'static str {
    static TEXTS: OnceLock<Vec<String>> = OnceLock::new();
    let texts = TEXTS.get_or_init(|| TIERS.iter().map(|&rows| statement(rows)).collect());
    texts
        .get(tier)
        .or(texts.last())
        .map(String::as_str)
        .unwrap_or_default()
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

/// The three statements of a tier of `rows`. The close matches the interval by its key only:
/// `+ended_us` keeps SQLite's planner from scanning the open intervals' index instead. Unused
/// rows are NULL: they match no interval and are filtered before the inserts. The outbox rows
/// are inserted in their order (their sequence is the order the export publishes).
fn statement(rows: usize) -> String {
    format!(
        "UPDATE usage_intervals SET ended_us = c.column2, end_reason = c.column3, \
         deletion_requested_us = c.column4 FROM (VALUES {closes}) AS c \
         WHERE usage_intervals.id = c.column1 AND +usage_intervals.ended_us IS NULL; \
         INSERT INTO usage_intervals ({INTERVAL_COLUMNS}) \
         SELECT * FROM (VALUES {openings}) WHERE column1 IS NOT NULL; \
         INSERT INTO metering_outbox (event_id, subject, payload) \
         SELECT column1, column2, column3 FROM (VALUES {events}) WHERE column1 IS NOT NULL \
         ORDER BY column4 ON CONFLICT (event_id) DO NOTHING",
        closes = value_rows(rows, 4, false),
        openings = value_rows(rows, 19, false),
        events = value_rows(2 * rows, 3, true),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metering::{ClosingRow, OpeningRow, OutboxEvent};
    use crate::sqlite::usage_writes::PlannedInterval;
    use osac_model::metering::Dimensions;
    use sqlx::Connection;

    async fn database() -> SqliteConnection {
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
        execute(&mut conn, tier_of(&plan).expect("tier"), &plan)
            .await
            .expect("open");
        sqlx::query("ANALYZE")
            .execute(&mut conn)
            .await
            .expect("analyze");
        let close = statement(8);
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
        assert_eq!(tier_of(&first), Some(2));
        execute(&mut conn, 2, &first).await.expect("first");
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
        execute(&mut conn, 2, &second).await.expect("second");
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
    fn the_smallest_tier_that_holds_the_rows_is_chosen() {
        assert_eq!(tier_of(&WritePlan::default()), None);
        assert!(!too_large(&WritePlan::default()));
        let text_of = |tier: usize| text(tier).matches('?').count();
        assert_eq!(text_of(0), 2 * 4 + 2 * 19 + 4 * 3);
        assert_eq!(text_of(3), 128 * 4 + 128 * 19 + 256 * 3);
    }
}
