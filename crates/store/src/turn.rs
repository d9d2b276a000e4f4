//! Turns: request transactions run inside the group commit's shared transaction (see the
//! contract in [`crate::group`]). The committer lends its transaction to one caller at a time,
//! inside a savepoint, and takes it back when the caller commits, rolls back or runs out of
//! time.

use std::sync::Arc;

use async_trait::async_trait;
use osac_model::Kind;
use tokio::sync::{Mutex, oneshot};

use crate::group::TURN_LIMIT;
use crate::{Change, ListQuery, Page, Record, Reference, Result, StoreError, Tx};

/// How a turn ended, as the committer saw it.
pub(crate) enum TurnEnd {
    /// Its writes are kept: answer here once the shared transaction committed.
    Commit(oneshot::Sender<Result<()>>),
    /// Its writes were undone (the caller dropped it, failed, or ran out of time).
    RolledBack,
}

/// The shared transaction while a caller holds it.
struct Lent {
    tx: Option<Box<dyn Tx>>,
    /// The turn outlived [`TURN_LIMIT`] and was rolled back.
    expired: bool,
}

/// Runs one turn: lends `tx` to the caller waiting on `handover` inside a savepoint and
/// returns it with the turn's end. An error means the shared transaction failed.
pub(crate) async fn run(
    mut tx: Box<dyn Tx>,
    handover: oneshot::Sender<Box<dyn Tx>>,
) -> Result<(Box<dyn Tx>, TurnEnd)> {
    tx.savepoint().await?;
    let lent = Arc::new(Mutex::new(Lent {
        tx: Some(tx),
        expired: false,
    }));
    let (end, mut ended) = oneshot::channel();
    let turn = SharedTurn {
        lent: lent.clone(),
        end: Some(end),
    };
    // A caller that stopped waiting drops the handle at once: the turn rolls back.
    drop(handover.send(Box::new(turn)));
    let outcome = tokio::select! {
        biased;
        end = &mut ended => Some(end.ok()),
        () = tokio::time::sleep(TURN_LIMIT) => None,
    };
    let mut held = lent.lock().await;
    held.expired = outcome.is_none();
    let taken = held.tx.take();
    drop(held);
    // Only now may a late commit learn that its turn is over (it reads `expired`).
    drop(ended);
    let mut tx =
        taken.ok_or_else(|| StoreError::Unavailable("a turn lost its transaction".into()))?;
    match outcome {
        Some(Some(reply)) => {
            tx.release_savepoint().await?;
            Ok((tx, TurnEnd::Commit(reply)))
        }
        Some(None) => {
            tx.rollback_to_savepoint().await?;
            Ok((tx, TurnEnd::RolledBack))
        }
        None => {
            tracing::warn!(limit = ?TURN_LIMIT, "a write turn outlived its limit: rolled back");
            tx.rollback_to_savepoint().await?;
            Ok((tx, TurnEnd::RolledBack))
        }
    }
}

/// Runs `$call` on the shared transaction, while the turn still holds it.
macro_rules! on_tx {
    ($turn:expr, $call:ident($($arg:expr),*)) => {{
        let mut held = $turn.lent.lock().await;
        match held.tx.as_mut() {
            Some(tx) => tx.$call($($arg),*).await,
            None => Err(StoreError::TurnExpired(TURN_LIMIT)),
        }
    }};
}

/// The caller's handle on its turn. Dropping it without `commit` rolls the turn back.
struct SharedTurn {
    lent: Arc<Mutex<Lent>>,
    /// Sends the commit's answer channel; dropped unsent, it rolls the turn back.
    end: Option<oneshot::Sender<oneshot::Sender<Result<()>>>>,
}

impl SharedTurn {
    /// Why the committer no longer answers this turn.
    async fn why_over(&self) -> StoreError {
        if self.lent.lock().await.expired {
            StoreError::TurnExpired(TURN_LIMIT)
        } else {
            StoreError::Unavailable("the group committer stopped".into())
        }
    }
}

#[async_trait]
impl Tx for SharedTurn {
    async fn get(&mut self, id: &str) -> Result<Option<Record>> {
        on_tx!(self, get(id))
    }
    async fn lock(&mut self, id: &str) -> Result<Option<Record>> {
        on_tx!(self, lock(id))
    }
    async fn lock_shared(&mut self, id: &str) -> Result<Option<Record>> {
        on_tx!(self, lock_shared(id))
    }
    async fn lock_name(&mut self, name: &str) -> Result<()> {
        on_tx!(self, lock_name(name))
    }
    async fn find_by_name(
        &mut self,
        kind: Kind,
        tenant: &str,
        name: &str,
    ) -> Result<Option<Record>> {
        on_tx!(self, find_by_name(kind, tenant, name))
    }
    async fn list(&mut self, query: &ListQuery) -> Result<Page> {
        on_tx!(self, list(query))
    }
    async fn list_items(&mut self, query: &ListQuery) -> Result<Vec<Record>> {
        on_tx!(self, list_items(query))
    }
    async fn referrers(&mut self, target: &str) -> Result<Vec<Reference>> {
        on_tx!(self, referrers(target))
    }
    async fn insert(&mut self, record: &Record) -> Result<Record> {
        on_tx!(self, insert(record))
    }
    async fn update(&mut self, record: &Record) -> Result<Option<Record>> {
        on_tx!(self, update(record))
    }
    async fn remove(&mut self, id: &str) -> Result<()> {
        on_tx!(self, remove(id))
    }
    async fn fence(&mut self, shard: i32, replica: &str, token: i64) -> Result<()> {
        on_tx!(self, fence(shard, replica, token))
    }
    fn publish(&mut self, change: Change) {
        // Only the committer, taking the transaction back, contends for the lock: then the
        // turn is over and its changes go nowhere anyway.
        if let Ok(mut held) = self.lent.try_lock()
            && let Some(tx) = held.tx.as_mut()
        {
            tx.publish(change);
        }
    }
    async fn kv_write(&mut self, ns: &str, changes: &[(String, Option<String>)]) -> Result<()> {
        on_tx!(self, kv_write(ns, changes))
    }
    async fn savepoint(&mut self) -> Result<()> {
        on_tx!(self, savepoint())
    }
    async fn rollback_to_savepoint(&mut self) -> Result<()> {
        on_tx!(self, rollback_to_savepoint())
    }
    async fn release_savepoint(&mut self) -> Result<()> {
        on_tx!(self, release_savepoint())
    }
    async fn commit(mut self: Box<Self>) -> Result<()> {
        let (reply, answer) = oneshot::channel();
        let sent = self.end.take().map(|end| end.send(reply));
        if !matches!(sent, Some(Ok(()))) {
            return Err(self.why_over().await);
        }
        match answer.await {
            Ok(outcome) => outcome,
            Err(_) => Err(self.why_over().await),
        }
    }
}
