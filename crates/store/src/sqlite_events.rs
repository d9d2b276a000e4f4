//! Event rows of a SQLite transaction, written together.
//!
//! Nearly every write set carries an event (a reconcile's status write and what happened),
//! and a shared transaction holds many sets: one `INSERT` per event is one statement handed to
//! the connection's thread each. An event has no labels and no references, nothing in the
//! transaction depends on its row, and nothing outside it sees the row before the commit; so
//! the transaction keeps its events and writes them in one statement per
//! [`EVENTS_PER_INSERT`], before a statement could read them: a lookup by name or a list of
//! events, an update or removal of one, and the commit (a read by id answers from the
//! transaction's own writes, without a statement). A rolled-back savepoint drops the events
//! deferred since it was made.
//!
//! An event is deferred only when it has no name, no labels and no references: its insert
//! then cannot be refused and writes no index rows. Any other record is inserted at once.

use sqlx::SqliteConnection;

use crate::record::{to_json, ts_text};
use crate::{Record, Result};

/// Most event rows in one statement (twelve parameters each: far below SQLite's limit).
const EVENTS_PER_INSERT: usize = 100;

/// The events a transaction inserted and has not written yet, in insertion order.
#[derive(Default)]
pub(crate) struct DeferredEvents(Vec<Record>);

impl DeferredEvents {
    /// Whether `rec` can wait: a nameless event without index rows, whose insert cannot be
    /// refused (no name to be taken) and writes one row.
    pub(crate) fn can_defer(rec: &Record) -> bool {
        rec.kind == osac_model::Kind::Event
            && rec.name.is_none()
            && rec.labels.is_empty()
            && rec.references().is_empty()
    }

    pub(crate) fn defer(&mut self, rec: Record) {
        self.0.push(rec);
    }

    /// Whether the event `id` is waiting to be written.
    pub(crate) fn holds(&self, id: &str) -> bool {
        self.0.iter().any(|r| r.id == id)
    }

    /// How many are waiting (a savepoint records it).
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Drops the events deferred after the first `len` (their savepoint was rolled back).
    pub(crate) fn truncate(&mut self, len: usize) {
        self.0.truncate(len);
    }

    /// Writes every waiting event.
    pub(crate) async fn write(&mut self, conn: &mut SqliteConnection) -> Result<()> {
        for chunk in self.0.chunks(EVENTS_PER_INSERT) {
            let mut q = sqlx::QueryBuilder::new(
                "INSERT INTO objects (id, kind, tenant, name, creator, version, created_at, deleted_at, labels, annotations, finalizers, body) ",
            );
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
            q.build().execute(&mut *conn).await?;
        }
        self.0.clear();
        Ok(())
    }
}
