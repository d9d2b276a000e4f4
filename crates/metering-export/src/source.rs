//! Where the records come from: the outbox, oldest first, and how delivered records leave it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;

/// One record waiting in the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEntry {
    /// Position in the outbox: records are published in increasing `seq`.
    pub seq: i64,
    /// The CloudEvent `id`: the JetStream message id, so the broker drops a second copy.
    pub event_id: String,
    /// The CloudEvent `subject` (the metered object).
    pub subject: String,
    /// The complete CloudEvent, structured JSON.
    pub payload: String,
}

/// Why the outbox could not be read or trimmed.
#[derive(Debug, thiserror::Error)]
#[error("metering outbox: {0}")]
pub struct SourceError(#[source] Box<dyn std::error::Error + Send + Sync>);

impl SourceError {
    pub fn new(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Box::new(e))
    }
}

/// A durable, ordered outbox of CloudEvents (the store's `metering_outbox` table in a server).
#[async_trait]
pub trait OutboxSource: Send + Sync {
    /// Up to `limit` records, lowest `seq` first.
    async fn peek(&self, limit: i64) -> Result<Vec<OutboxEntry>, SourceError>;
    /// Removes the records with these `seq`s (delivered); returns how many were removed.
    async fn ack(&self, seqs: &[i64]) -> Result<u64, SourceError>;
    /// How many records wait.
    async fn len(&self) -> Result<i64, SourceError>;
    /// Whether no record waits.
    async fn is_empty(&self) -> Result<bool, SourceError> {
        Ok(self.len().await? == 0)
    }
}

/// An outbox in memory (tests, and processes without a store): same contract as the store's,
/// but lost with the process.
#[derive(Debug, Default)]
pub struct InMemoryOutbox {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    next_seq: i64,
    entries: BTreeMap<i64, OutboxEntry>,
}

impl InMemoryOutbox {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a record and returns its `seq` (1, 2, 3, … in append order).
    pub fn append(
        &self,
        event_id: impl Into<String>,
        subject: impl Into<String>,
        payload: impl Into<String>,
    ) -> i64 {
        let mut inner = self.lock();
        inner.next_seq += 1;
        let seq = inner.next_seq;
        inner.entries.insert(
            seq,
            OutboxEntry {
                seq,
                event_id: event_id.into(),
                subject: subject.into(),
                payload: payload.into(),
            },
        );
        seq
    }

    /// Every record still waiting, lowest `seq` first.
    pub fn entries(&self) -> Vec<OutboxEntry> {
        self.lock().entries.values().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the map half-changed (each change is one
        // insert or remove), so a poisoned lock is still consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl OutboxSource for InMemoryOutbox {
    async fn peek(&self, limit: i64) -> Result<Vec<OutboxEntry>, SourceError> {
        let limit = usize::try_from(limit).unwrap_or(0);
        Ok(self.lock().entries.values().take(limit).cloned().collect())
    }

    async fn ack(&self, seqs: &[i64]) -> Result<u64, SourceError> {
        let mut inner = self.lock();
        Ok(seqs
            .iter()
            .filter(|s| inner.entries.remove(s).is_some())
            .count() as u64)
    }

    async fn len(&self) -> Result<i64, SourceError> {
        Ok(self.lock().entries.len() as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn in_memory_outbox_is_ordered_and_acks_only_what_it_holds() {
        let o = InMemoryOutbox::new();
        for i in 0..5 {
            o.append(format!("id-{i}"), "s", "{}");
        }
        let first = o.peek(2).await.expect("peek");
        assert_eq!(first.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(o.ack(&[1, 3, 99]).await.expect("ack"), 2);
        assert_eq!(o.len().await.expect("len"), 3);
        let rest = o.peek(10).await.expect("peek");
        assert_eq!(rest.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 4, 5]);
        assert!(o.peek(-1).await.expect("peek").is_empty());
    }
}
