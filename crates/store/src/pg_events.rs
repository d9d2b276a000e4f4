//! The PostgreSQL statements of a transaction's deferred events (see `deferred_events`): all
//! of them in one `INSERT … SELECT FROM unnest(…)`, with their change notifications, in one
//! round trip — on their own, or as part of the statement that inserts the transaction's next
//! object (`postgres/tx.rs`), which then costs no round trip of its own.

use std::sync::LazyLock;

use sqlx::Postgres;
use sqlx::postgres::{PgArguments, PgConnection};
use sqlx::query::Query;
use sqlx::types::Json;

use crate::Result;
use crate::deferred_events::DeferredEvents;
use crate::record::to_json;

/// The column types of an event row, in the order [`bind_rows`] binds them.
const COLUMN_TYPES: [&str; 12] = [
    "text",
    "text",
    "text",
    "text",
    "text",
    "bigint",
    "timestamptz",
    "timestamptz",
    "text",
    "jsonb",
    "text",
    "jsonb",
];

/// `written AS (INSERT … SELECT * FROM unnest(…))`: the event rows, one array per column, bound
/// from parameter `$first` on. Written as `unnest` of fixed arrays so that PostgreSQL keeps
/// one generic plan for every number of events.
pub(crate) fn rows_cte(first: usize) -> String {
    let arrays: Vec<String> = COLUMN_TYPES
        .iter()
        .enumerate()
        .map(|(i, t)| format!("${}::{t}[]", first + i))
        .collect();
    format!(
        "written AS ( \
             INSERT INTO objects (id, kind, tenant, name, creator, version, created_at, \
                 deleted_at, labels, annotations, finalizers, body) \
             SELECT * FROM unnest({}))",
        arrays.join(", ")
    )
}

/// How many of the notifications `$payloads` (on channel `$channel`) were queued; PostgreSQL
/// sends them only if the transaction commits.
pub(crate) fn notify_count(channel: usize, payloads: usize) -> String {
    format!(
        "(SELECT count(*) FROM (SELECT pg_notify(${channel}, n) \
                               FROM unnest(${payloads}::text[]) AS n) AS sent)"
    )
}

/// The events on their own: rows `$1`–`$12`, channel `$13`, payloads `$14`.
static INSERT_EVENTS: LazyLock<String> =
    LazyLock::new(|| format!("WITH {} SELECT {}", rows_cte(1), notify_count(13, 14)));

/// Binds the rows of `events` as the next twelve parameters (the columns of [`rows_cte`]).
pub(crate) fn bind_rows<'q>(
    statement: Query<'q, Postgres, PgArguments>,
    events: &'q DeferredEvents,
) -> Query<'q, Postgres, PgArguments> {
    let rows = events.records();
    let column = |f: fn(&crate::Record) -> String| rows.iter().map(f).collect::<Vec<_>>();
    statement
        .bind(column(|r| r.id.clone()))
        .bind(column(|r| r.kind.collection().to_string()))
        .bind(column(|r| r.tenant.clone()))
        .bind(rows.iter().map(|r| r.name.clone()).collect::<Vec<_>>())
        .bind(column(|r| r.creator.clone()))
        .bind(rows.iter().map(|r| r.version).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.created_at).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.deleted_at).collect::<Vec<_>>())
        .bind(column(|r| to_json(&r.labels)))
        .bind(
            rows.iter()
                .map(|r| Json(&r.annotations))
                .collect::<Vec<_>>(),
        )
        .bind(column(|r| to_json(&r.finalizers)))
        .bind(rows.iter().map(|r| Json(&r.body)).collect::<Vec<_>>())
}

/// Writes every waiting event in a statement of their own (`payloads`: their notifications).
pub(crate) async fn write(
    conn: &mut PgConnection,
    events: &mut DeferredEvents,
    channel: &str,
    payloads: Vec<String>,
) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    bind_rows(sqlx::query(INSERT_EVENTS.as_str()), events)
        .bind(channel)
        .bind(payloads)
        .fetch_one(&mut *conn)
        .await?;
    events.clear();
    Ok(())
}
