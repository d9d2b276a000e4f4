//! Group commit: independent writers share SQLite's write transactions — write sets
//! ([`Store::apply`](crate::Store::apply)) and request transactions
//! ([`Store::begin_shared`](crate::Store::begin_shared)) that arrive while a commit is in
//! progress are written together in the next transaction, one commit for all of them.
//!
//! Used by the SQLite store, where write transactions are serial anyway and a failed statement
//! undoes only itself (a set whose only fallible step is its first statement needs no
//! savepoint). PostgreSQL shares WAL flushes between concurrent commits on its own, and its
//! row locks would be held across a whole batch: there each set, and each request
//! transaction, is its own transaction.
//!
//! # Contract
//!
//! - A [`WriteSet`] is all or nothing: each set runs inside its own savepoint, so a set that
//!   fails (an optimistic-locking conflict, a lost lease) is rolled back alone and the others
//!   in the batch still commit.
//! - A *turn* ([`Store::begin_shared`](crate::Store::begin_shared)) is a read-modify-write
//!   transaction run inside the shared one, in its own savepoint: the caller reads and writes
//!   as in any [`Tx`], and while its turn is open nothing else writes (SQLite has one writer
//!   anyway). Rolling the turn back (dropping it, or an error) undoes only its writes;
//!   `commit()` keeps them and returns only once the shared transaction committed.
//! - A turn is bounded by [`TURN_LIMIT`]: a turn still open then is rolled back, and its
//!   further calls and its commit fail with [`StoreError::TurnExpired`], so one slow caller
//!   cannot hold every writer.
//! - [`Store::apply`](crate::Store::apply) and a turn's `commit()` return only after the
//!   transaction holding them committed (durable as any other commit of the backend); their
//!   changes are published on the change feed after that commit, like those of any
//!   transaction, and never when they were rolled back.
//! - Nothing waits to fill a batch: the first writer to arrive while the committer is idle
//!   opens a transaction, the writers queued meanwhile join it, and it commits as soon as
//!   nobody is queued, after [`BATCH_TIME`] or [`MAX_BATCH`] writers. Batching only ever
//!   replaces waiting for the database with sharing its commit.
//! - If the transaction itself fails (begin, commit, a savepoint, a database error outside
//!   any set's statements), every writer of the batch gets [`StoreError::Unavailable`] and
//!   nothing of the batch is written; callers retry as after any database error.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use crate::turn::{self, TurnEnd};
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
    /// A set under a lost lease fails with [`StoreError::Fenced`] and writes nothing (see
    /// [`Tx::fence`]).
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

/// Most writers (sets and turns) in one transaction.
const MAX_BATCH: usize = 256;

/// Longest a batch takes in writers after its transaction began: bounds how long one commit
/// holds SQLite's write lock and how long the first writer of a batch waits for its commit.
pub const BATCH_TIME: Duration = Duration::from_millis(10);

/// Longest a turn ([`Store::begin_shared`](crate::Store::begin_shared)) may stay open before
/// it is rolled back and fails with [`StoreError::TurnExpired`].
pub const TURN_LIMIT: Duration = Duration::from_secs(2);

/// A writer waiting for the committer.
enum Request {
    /// A write set, answered with its outcome once committed (or refused).
    Set {
        set: WriteSet,
        reply: oneshot::Sender<Result<Applied>>,
    },
    /// A turn: the caller receives its transaction handle when the turn begins.
    Turn {
        handover: oneshot::Sender<Box<dyn Tx>>,
    },
}

/// The committer of one store: a task that owns the batching.
pub(crate) struct GroupCommit {
    sender: mpsc::UnboundedSender<Request>,
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
        self.send(Request::Set { set, reply })?;
        answer.await.map_err(|_| committer_stopped())?
    }

    /// Waits for a turn in the group transaction and returns its handle (see the contract).
    pub(crate) async fn turn(&self) -> Result<Box<dyn Tx>> {
        let (handover, handle) = oneshot::channel();
        self.send(Request::Turn { handover })?;
        handle.await.map_err(|_| committer_stopped())
    }

    fn send(&self, request: Request) -> Result<()> {
        self.sender
            .send(request)
            .map_err(|_| StoreError::Unavailable("the store is shutting down".into()))
    }
}

fn committer_stopped() -> StoreError {
    StoreError::Unavailable("the group committer stopped".into())
}

/// Where a writer of a batch gets its answer once the batch's fate is known.
enum Waiter {
    Set(oneshot::Sender<Result<Applied>>, Result<Applied>),
    Turn(oneshot::Sender<Result<()>>),
}

impl Waiter {
    /// Whether this writer has something to commit.
    fn writes(&self) -> bool {
        match self {
            Waiter::Set(_, outcome) => outcome.is_ok(),
            Waiter::Turn(_) => true,
        }
    }
}

/// The writers of the open transaction, and whether it must end now.
#[derive(Default)]
struct Batch {
    waiters: Vec<Waiter>,
    /// Writers taken in (a turn that rolled back leaves no waiter but counts).
    taken: usize,
    /// A set ran without a savepoint and failed: the transaction holds nothing else and must
    /// be rolled back as a whole, now.
    abandon: bool,
}

async fn committer(mut receiver: mpsc::UnboundedReceiver<Request>, begin: Begin) {
    while let Some(first) = receiver.recv().await {
        let opened = Instant::now();
        let mut tx = match begin().await {
            Ok(tx) => tx,
            Err(e) => {
                refuse(first, &e);
                continue;
            }
        };
        let started = Instant::now();
        let mut batch = Batch::default();
        let mut request = first;
        let outcome = loop {
            tx = match batch.take(tx, request).await {
                Ok(tx) => tx,
                Err(e) => break Err(e),
            };
            if batch.abandon || batch.taken >= MAX_BATCH || started.elapsed() >= BATCH_TIME {
                break Ok(tx);
            }
            match receiver.try_recv() {
                Ok(next) => request = next,
                Err(_) => break Ok(tx),
            }
        };
        match outcome {
            Ok(tx) => commit_batch(tx, batch).await,
            // The transaction is unusable (and rolled back, dropped).
            Err(e) => fail_all(batch.waiters, &e),
        }
        crate::count_group_busy(opened.elapsed());
    }
}

impl Batch {
    /// Writes one writer's part in `tx` and hands `tx` back. An error means the transaction
    /// failed as a whole.
    async fn take(&mut self, mut tx: Box<dyn Tx>, request: Request) -> Result<Box<dyn Tx>> {
        let first = self.taken == 0;
        self.taken += 1;
        match request {
            Request::Set { set, reply } => {
                if !may_fail_midway(&set) {
                    let outcome = apply_in(tx.as_mut(), &set).await;
                    self.waiters.push(Waiter::Set(reply, outcome));
                } else if first {
                    // No savepoint: should it fail, the whole transaction is rolled back.
                    let outcome = apply_in(tx.as_mut(), &set).await;
                    self.abandon = outcome.is_err();
                    self.waiters.push(Waiter::Set(reply, outcome));
                } else {
                    let outcome = isolated(tx.as_mut(), &set).await?;
                    self.waiters.push(Waiter::Set(reply, outcome));
                }
                Ok(tx)
            }
            Request::Turn { handover } => {
                let (tx, end) = turn::run(tx, handover).await?;
                match end {
                    TurnEnd::Commit(reply) => self.waiters.push(Waiter::Turn(reply)),
                    TurnEnd::RolledBack => {}
                }
                Ok(tx)
            }
        }
    }
}

/// Tells a writer whose transaction could not begin why.
fn refuse(request: Request, e: &StoreError) {
    tracing::warn!(error = %e, "group commit could not begin");
    match request {
        Request::Set { reply, .. } => {
            let _ = reply.send(Err(unavailable(e)));
        }
        // Dropping the handover fails the caller's wait for its turn.
        Request::Turn { .. } => {}
    }
}

fn unavailable(e: &StoreError) -> StoreError {
    StoreError::Unavailable(format!("group commit failed: {e}"))
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

/// Commits the batch's transaction (or rolls it back when nobody has anything to commit)
/// and answers its writers.
async fn commit_batch(tx: Box<dyn Tx>, batch: Batch) {
    if batch.abandon || !batch.waiters.iter().any(Waiter::writes) {
        // Nothing to commit: the rollback of dropping `tx` is enough.
        drop(tx);
    } else if let Err(e) = tx.commit().await {
        return fail_all(batch.waiters, &e);
    }
    crate::count_group(batch.taken);
    for waiter in batch.waiters {
        match waiter {
            Waiter::Set(reply, outcome) => {
                let _ = reply.send(outcome);
            }
            Waiter::Turn(reply) => {
                let _ = reply.send(Ok(()));
            }
        }
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

fn fail_all(waiters: Vec<Waiter>, e: &StoreError) {
    tracing::warn!(error = %e, writers = waiters.len(), "group commit failed");
    for waiter in waiters {
        match waiter {
            Waiter::Set(reply, _) => {
                let _ = reply.send(Err(unavailable(e)));
            }
            Waiter::Turn(reply) => {
                let _ = reply.send(Err(unavailable(e)));
            }
        }
    }
}
