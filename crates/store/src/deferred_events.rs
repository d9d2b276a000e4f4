//! Event rows a transaction inserted and writes together (both SQL backends).
//!
//! Nearly every write carries an event (a reconcile's status write and what happened; a
//! create and what it made), and each `INSERT` of one is a statement of its own: on SQLite a
//! hand-over to the connection's thread, on PostgreSQL a round trip. An event has no labels
//! and no references, nothing in the transaction depends on its row, and nothing outside it
//! sees the row before the commit; so the transaction keeps its events and writes them in
//! one statement (per chunk), before a statement could read them: a lookup by name or a
//! list of events, a locking read naming one, an update or removal of one, and the commit (a
//! read by id answers from the transaction's own writes, without a statement). A rolled-back
//! savepoint drops the events deferred since it was made.
//!
//! An event is deferred only when it has no name, no labels and no references: its insert
//! then cannot be refused and writes no index rows. Any other record is inserted at once.
//!
//! The statements are the backends' own: `sqlite::events` and `postgres::events`.

use crate::Record;

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

    /// Whether none is waiting.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Drops the events deferred after the first `len` (their savepoint was rolled back).
    pub(crate) fn truncate(&mut self, len: usize) {
        self.0.truncate(len);
    }

    /// The waiting events, in insertion order.
    pub(crate) fn records(&self) -> &[Record] {
        &self.0
    }

    /// Forgets every waiting event (they were written).
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }
}
