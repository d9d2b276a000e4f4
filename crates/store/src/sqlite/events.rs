//! The SQLite statement of a transaction's deferred events (see `deferred_events`): one
//! multi-row `INSERT` per [`EVENTS_PER_INSERT`]. At the commit, the statement of constant
//! shape of `commit_statements` usually writes them instead.

use sqlx::SqliteConnection;

use super::batch::StatementBatch;
use crate::deferred_events::DeferredEvents;
use crate::record::{to_json, ts_text};
use crate::{Record, Result};

/// The columns of an event row, in the order its values are bound.
pub(super) const EVENT_COLUMNS: &str = "id, kind, tenant, name, creator, version, created_at, \
     deleted_at, labels, annotations, finalizers, body";

/// Most event rows in one statement (twelve parameters each: far below SQLite's limit).
const EVENTS_PER_INSERT: usize = 100;

/// Writes every waiting event.
pub(crate) async fn write(conn: &mut SqliteConnection, events: &mut DeferredEvents) -> Result<()> {
    let mut batch = StatementBatch::default();
    push(&mut batch, events.records());
    batch.execute(conn).await?;
    events.clear();
    Ok(())
}

/// Adds the statements writing `records` (deferred events) to `batch`.
pub(crate) fn push<'a>(batch: &mut StatementBatch<'a>, records: &'a [Record]) {
    for chunk in records.chunks(EVENTS_PER_INSERT) {
        let q = batch.statement(12 * chunk.len());
        q.push(format!("INSERT INTO objects ({EVENT_COLUMNS}) "));
        q.push_values(chunk, |mut row, rec| {
            row.push_bind(&rec.id)
                .push_bind(rec.kind.collection())
                .push_bind(&rec.tenant)
                .push_bind(&rec.name)
                .push_bind(&rec.creator)
                .push_bind(rec.version)
                .push_bind(ts_text(&rec.created_at))
                .push_bind(rec.deleted_at.as_ref().map(ts_text))
                .push_bind(to_json(&rec.labels))
                .push_bind(to_json(&rec.annotations))
                .push_bind(to_json(&rec.finalizers))
                .push_bind(to_json(&rec.body));
        });
    }
}
