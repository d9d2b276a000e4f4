//! Group commit: independent write sets that arrive while a commit is in progress are applied
//! together in the next transaction, one commit for all of them.
//!
//! Used by the SQLite store, where write transactions are serial anyway and a failed statement
//! undoes only itself (a set whose only fallible step is its first statement needs no
//! savepoint). PostgreSQL shares WAL flushes between concurrent commits on its own, and its
//! row locks would be held across a whole batch: there each set is its own transaction.
//!
//! # Contract
//!
//! - A [`WriteSet`] is all or nothing: each set runs inside its own savepoint, so a set that
//!   fails (an optimistic-locking conflict, a lost lease) is rolled back alone and the others
//!   in the batch still commit.
//! - [`Store::apply`](crate::Store::apply) returns only after the transaction holding the set
//!   committed (durable as any other commit of the backend), and its changes are published on
//!   the change feed like those of any transaction.
//! - Nothing waits to fill a batch: a set that arrives while the committer is idle is committed
//!   at once; the sets that arrive during that commit form the next batch. Batching only ever
//!   replaces waiting for the database with sharing its commit.
//! - If the transaction itself fails (begin, commit, a database error outside any set's
//!   statements), every set of the batch gets [`StoreError::Unavailable`] and nothing of the
//!   batch is written; callers retry as after any database error.

use std::future::Future;
use std::pin::Pin;

use tokio::sync::{mpsc, oneshot};

use crate::{Record, Result, StoreError, Tx};

/// One write of a [`WriteSet`].
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// [`Tx::update`]: written only if the stored version equals the record's (else
    /// [`StoreError::Conflict`]); a deleted record without finalizers is removed.
    Update(Record),
    /// [`Tx::insert`].
    Insert(Record),
    /// [`Tx::kv_write`]: puts (`Some`) and removes (`None`) records of a driver namespace.
    Kv {
        ns: String,
        changes: Vec<(String, Option<String>)>,
    },
}

/// A shard lease a write set must still hold when it is written (see [`Tx::fence`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceToken {
    pub shard: i32,
    pub replica: String,
    pub token: i64,
}

/// Writes applied all or nothing, in order, in a transaction shared with other sets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteSet {
    /// Checked first: a set under a lost lease fails with [`StoreError::Fenced`].
    pub fence: Option<FenceToken>,
    pub writes: Vec<Write>,
}

impl WriteSet {
    /// A set of these writes, unfenced.
    pub fn of(writes: Vec<Write>) -> Self {
        WriteSet {
            fence: None,
            writes,
        }
    }
}

/// The outcome of each write of a set, in order: the record as written for `Update` (`None`
/// when the update removed the row) and `Insert`, `None` for `Kv`.
pub type Applied = Vec<Option<Record>>;

/// Applies a set's writes in `tx` (no savepoint: the caller decides what a failure undoes).
pub async fn apply_in(tx: &mut dyn Tx, set: &WriteSet) -> Result<Applied> {
    if let Some(f) = &set.fence {
        tx.fence(f.shard, &f.replica, f.token).await?;
    }
    let mut applied = Vec::with_capacity(set.writes.len());
    for write in &set.writes {
        applied.push(match write {
            Write::Update(rec) => tx.update(rec).await?,
            Write::Insert(rec) => Some(tx.insert(rec).await?),
            Write::Kv { ns, changes } => {
                tx.kv_write(ns, changes).await?;
                None
            }
        });
    }
    Ok(applied)
}

/// Starts a write transaction of the backend the committer serves.
pub(crate) type Begin =
    Box<dyn Fn() -> Pin<Box<dyn Future<Output = Result<Box<dyn Tx>>> + Send>> + Send + Sync>;

/// Most sets in one transaction (bounds how long one commit holds SQLite's write lock).
const MAX_BATCH: usize = 256;

struct Pending {
    set: WriteSet,
    reply: oneshot::Sender<Result<Applied>>,
}

/// The committer of one store: a task that owns the batching.
pub(crate) struct GroupCommit {
    sender: mpsc::UnboundedSender<Pending>,
}

impl GroupCommit {
    /// Spawns the committer task; it ends when the store (this handle) is dropped.
    pub(crate) fn start(begin: Begin) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        tokio::spawn(committer(receiver, begin));
        GroupCommit { sender }
    }

    /// Applies `set` in the next group transaction; returns once it is committed.
    pub(crate) async fn apply(&self, set: WriteSet) -> Result<Applied> {
        if set.writes.is_empty() && set.fence.is_none() {
            return Ok(Vec::new());
        }
        let (reply, answer) = oneshot::channel();
        self.sender
            .send(Pending { set, reply })
            .map_err(|_| StoreError::Unavailable("the store is shutting down".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Unavailable("the group committer stopped".into()))?
    }
}

async fn committer(mut receiver: mpsc::UnboundedReceiver<Pending>, begin: Begin) {
    while let Some(first) = receiver.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match receiver.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        commit_batch(&begin, batch).await;
    }
}

/// Whether a failing `set` could leave some of its writes behind without a savepoint: a set
/// fails before writing anything when it is unfenced and only its first write can fail (an
/// update's version check, an insert's unique name — both checked by the write's first
/// statement); nameless inserts (events) and driver records (upserts) cannot fail on their
/// own.
fn may_fail_midway(set: &WriteSet) -> bool {
    set.fence.is_some()
        || set.writes.iter().skip(1).any(|w| match w {
            Write::Update(_) => true,
            Write::Insert(rec) => rec.name.is_some(),
            Write::Kv { .. } => false,
        })
}

/// Sets of a batch written in one transaction, each isolated by a savepoint where its
/// failure could otherwise leave part of it behind.
async fn commit_batch(begin: &Begin, batch: Vec<Pending>) {
    let sets = batch.len();
    let mut tx = match begin().await {
        Ok(tx) => tx,
        Err(e) => return fail_all(batch, &e),
    };
    let mut outcomes = Vec::with_capacity(sets);
    for p in &batch {
        let alone = sets == 1 || !may_fail_midway(&p.set);
        let outcome = if alone {
            apply_in(tx.as_mut(), &p.set).await
        } else {
            match isolated(tx.as_mut(), &p.set).await {
                Ok(outcome) => outcome,
                // The transaction is unusable (the savepoint itself failed).
                Err(e) => return fail_all(batch, &e),
            }
        };
        outcomes.push(outcome);
    }
    if outcomes.iter().all(Result::is_err) {
        // Nothing to commit: the rollback of dropping `tx` is enough.
        drop(tx);
    } else if let Err(e) = tx.commit().await {
        return fail_all(batch, &e);
    }
    crate::count_group(sets);
    for (p, outcome) in batch.into_iter().zip(outcomes) {
        let _ = p.reply.send(outcome);
    }
}

/// Applies one set of a batch inside a savepoint. The outer error means the transaction
/// failed; the inner result is the set's own outcome (rolled back alone when it failed).
async fn isolated(tx: &mut dyn Tx, set: &WriteSet) -> Result<Result<Applied>> {
    tx.savepoint().await?;
    match apply_in(tx, set).await {
        Ok(applied) => {
            tx.release_savepoint().await?;
            Ok(Ok(applied))
        }
        Err(e) => {
            tx.rollback_to_savepoint().await?;
            Ok(Err(e))
        }
    }
}

fn fail_all(batch: Vec<Pending>, e: &StoreError) {
    tracing::warn!(error = %e, sets = batch.len(), "group commit failed");
    for p in batch {
        let _ = p.reply.send(Err(StoreError::Unavailable(format!(
            "group commit failed: {e}"
        ))));
    }
}
