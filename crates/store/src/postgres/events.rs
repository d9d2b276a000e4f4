//! The PostgreSQL statement of a transaction's deferred events (see `deferred_events`): all
//! of them in one `INSERT … SELECT FROM unnest(…)`, with their change notifications, in one
//! round trip.

use sqlx::PgConnection;
use sqlx::types::Json;

use crate::Result;
use crate::deferred_events::DeferredEvents;
use crate::record::to_json;

/// The event rows (`$1`–`$12`, one array per column) and their notifications (`$13` the
/// channel, `$14` the payloads; sent only if the transaction commits). Written as
/// `unnest` of fixed arrays so that PostgreSQL keeps one generic plan for every batch size.
const INSERT_EVENTS: &str = "WITH written AS ( \
         INSERT INTO objects (id, kind, tenant, name, creator, version, created_at, \
             deleted_at, labels, annotations, finalizers, body) \
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], \
             $6::bigint[], $7::timestamptz[], $8::timestamptz[], $9::text[], $10::jsonb[], \
             $11::text[], $12::jsonb[])) \
     SELECT count(*) FROM (SELECT pg_notify($13, n) FROM unnest($14::text[]) AS n) AS sent";

/// Writes every waiting event; `notice` is the notification payload of an event's change.
pub(crate) async fn write(
    conn: &mut PgConnection,
    events: &mut DeferredEvents,
    channel: &str,
    notice: impl Fn(&crate::Record) -> String,
) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let rows = events.records();
    let column = |f: fn(&crate::Record) -> String| rows.iter().map(f).collect::<Vec<_>>();
    let notices: Vec<String> = rows.iter().map(&notice).collect();
    sqlx::query(INSERT_EVENTS)
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
        .bind(channel)
        .bind(notices)
        .fetch_one(&mut *conn)
        .await?;
    events.clear();
    Ok(())
}
