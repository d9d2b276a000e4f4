//! How the sim engines run operations so that many callers are served at once without giving
//! up determinism or durability.
//!
//! Every operation is a pure *plan* over the tables: validate, compute the records to write and
//! the response. The plan first runs against the committed tables under a read lock: an
//! operation that changes nothing there (queries such as `query_dhcp_lease`, repeated creates,
//! deletes of what is gone, and every validation error) is answered at once, concurrently with
//! other readers and without waiting for writers — a valid serialisation point, since the
//! committed tables are exactly what the store holds. An operation that changes records goes to
//! the engine's single writer task. The writer takes everything queued, plans each operation
//! again in arrival order against its working copy (so a later operation sees an earlier one's
//! changes, exactly as if they had run one by one), persists all changed records of the whole
//! batch in ONE store transaction ([`SimStateStore::put_many`], group commit), and only then
//! publishes them to the committed tables and answers. If the store fails, nothing of the batch
//! is published, the working copy is reset to the committed tables, and every operation of the
//! batch gets a transient error (retrying converges: operations are idempotent).
//!
//! When several processes write the same tables (replicas sharing a database,
//! [`SimStateStore::shared`]), the committed tables may be behind the database, so nothing is
//! answered from them: every operation goes to the writer, which runs each batch under the
//! namespace's cross-process lock ([`SimStateStore::exclusive`]), first applies what the
//! other processes wrote since the generation it last saw, then refuses the operations whose
//! shard lease no longer holds ([`crate::fence`]) and plans the rest as above. Before taking
//! that lock, a writer tries the fast path ([`SimStateStore::write_current`]): it plans the
//! batch on its tables as they are and persists it in one statement that succeeds only if no
//! other process wrote since and every lease holds; otherwise nothing was written, the working
//! copy is reset and the batch takes the locked path. A single replica is always current.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock, RwLockReadGuard};

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, oneshot};

use super::{MissedRecords, SharedBatch, SimStateStore, store_error};
use crate::contract::OpError;
use crate::fence::Fence;

/// Most operations persisted in one store transaction (bounds the transaction's size).
const MAX_BATCH: usize = 512;

/// The in-memory tables of a sim engine: records by key, plus whatever indexes the engine
/// derives from them (kept in step by [`Tables::apply`]).
pub(crate) trait Tables: Clone + Send + Sync + 'static {
    /// One persisted record (stored as its JSON text).
    type Record: Clone + PartialEq + Serialize + DeserializeOwned + Send + Sync + 'static;
    /// The record under `key`, if any.
    fn record(&self, key: &str) -> Option<&Self::Record>;
    /// Every key that holds a record.
    fn keys(&self) -> Vec<String>;
    /// Replaces (`Some`) or removes (`None`) the record under `key`, updating the indexes.
    fn apply(&mut self, key: String, record: Option<Self::Record>);
}

/// A plain table without indexes: records by key.
impl<R> Tables for BTreeMap<String, R>
where
    R: Clone + PartialEq + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    type Record = R;

    fn record(&self, key: &str) -> Option<&R> {
        self.get(key)
    }

    fn keys(&self) -> Vec<String> {
        BTreeMap::keys(self).cloned().collect()
    }

    fn apply(&mut self, key: String, record: Option<R>) {
        match record {
            Some(r) => self.insert(key, r),
            None => self.remove(&key),
        };
    }
}

/// A plan's outcome: the records to put (`Some`) or delete (`None`) by key, and the response.
pub(crate) type Planned<R, A> = (Vec<(String, Option<R>)>, A);

/// The records a plan puts (`Some`) or deletes (`None`), by key.
type Changes<R> = Vec<(String, Option<R>)>;

/// One queued operation, whatever its response type: its plan, and the caller waiting for
/// the response of the plan's last run.
trait Pending<T: Tables>: Send {
    /// Plans against `tables`, keeping the response for [`Pending::answer`].
    fn plan(&mut self, tables: &T) -> Result<Changes<T::Record>, OpError>;
    /// Answers the caller: the kept response, or the failure.
    fn answer(self: Box<Self>, outcome: Result<(), OpError>);
}

struct Typed<F, A> {
    plan: F,
    response: Option<A>,
    reply: oneshot::Sender<Result<A, OpError>>,
}

impl<T, F, A> Pending<T> for Typed<F, A>
where
    T: Tables,
    F: Fn(&T) -> Result<Planned<T::Record, A>, OpError> + Send,
    A: Send,
{
    fn plan(&mut self, tables: &T) -> Result<Changes<T::Record>, OpError> {
        let (changes, response) = (self.plan)(tables)?;
        self.response = Some(response);
        Ok(changes)
    }

    fn answer(self: Box<Self>, outcome: Result<(), OpError>) {
        let Typed {
            response, reply, ..
        } = *self;
        let answer = outcome.and_then(|()| {
            response.ok_or_else(|| OpError::transient("sim operation was not planned"))
        });
        // The caller may have given up waiting; the operation stands regardless.
        let _ = reply.send(answer);
    }
}

struct Job<T: Tables> {
    pending: Box<dyn Pending<T>>,
    /// The lease of the reconcile that asked (checked by shared writers).
    fence: Option<Fence>,
}

/// Committed tables plus the writer task that changes them.
pub(crate) struct Engine<T: Tables> {
    committed: Arc<RwLock<T>>,
    jobs: mpsc::UnboundedSender<Job<T>>,
    namespace: String,
    /// Other processes write the same tables: never answer from `committed`.
    shared: bool,
}

impl<T: Tables> Engine<T> {
    /// Starts the writer task over `tables` (as loaded from the store). Must be called inside
    /// a tokio runtime; the task ends when the engine is dropped.
    pub(crate) fn start(store: Arc<dyn SimStateStore>, namespace: &str, tables: T) -> Self {
        let committed = Arc::new(RwLock::new(tables.clone()));
        let (jobs, queue) = mpsc::unbounded_channel();
        let shared = store.shared();
        tokio::spawn(writer(
            store,
            namespace.to_string(),
            committed.clone(),
            tables,
            queue,
        ));
        Engine {
            committed,
            jobs,
            namespace: namespace.to_string(),
            shared,
        }
    }

    /// The committed tables (what the store holds). Hold the guard only briefly and never
    /// across an `.await`.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, T> {
        self.committed.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs one operation given as its plan (called once or twice; it must have no side
    /// effect unless it changes no record). Returns once its changes are persisted.
    pub(crate) async fn run<F, A>(&self, plan: F) -> Result<A, OpError>
    where
        F: Fn(&T) -> Result<Planned<T::Record, A>, OpError> + Send + 'static,
        A: Send + 'static,
    {
        if !self.shared {
            let tables = self.read();
            let (changes, response) = plan(&tables)?;
            if changes
                .iter()
                .all(|(key, record)| tables.record(key) == record.as_ref())
            {
                return Ok(response);
            }
        }
        let (reply, answer) = oneshot::channel();
        let job = Job {
            pending: Box::new(Typed {
                plan,
                response: None,
                reply,
            }),
            fence: crate::fence::current(),
        };
        if self.jobs.send(job).is_err() {
            return Err(self.stopped());
        }
        answer.await.unwrap_or_else(|_| Err(self.stopped()))
    }

    fn stopped(&self) -> OpError {
        OpError::transient(format!("sim engine ({}) is shutting down", self.namespace))
    }
}

/// A batch's writes by key: the record for the committed tables and its JSON text for the store.
type Writes<R> = BTreeMap<String, (Option<R>, Option<String>)>;

async fn writer<T: Tables>(
    store: Arc<dyn SimStateStore>,
    namespace: String,
    committed: Arc<RwLock<T>>,
    mut working: T,
    mut queue: mpsc::UnboundedReceiver<Job<T>>,
) {
    let mut jobs = Vec::new();
    // The generation of the shared namespace the tables reflect (shared stores only).
    let mut seen = 0;
    while queue.recv_many(&mut jobs, MAX_BATCH).await > 0 {
        let batch = if store.shared() {
            let run = SharedRun {
                namespace: &namespace,
                committed: &committed,
                seen: &mut seen,
            };
            if let Some(answers) = run.write_current(&*store, &mut working, &mut jobs).await {
                for (pending, outcome) in answers {
                    pending.answer(outcome);
                }
                continue;
            }
            match store.exclusive(&namespace, seen).await {
                Ok(b) => Some(b),
                Err(message) => {
                    let err = store_error(&namespace, message);
                    for job in jobs.drain(..) {
                        job.pending.answer(Err(err.clone()));
                    }
                    continue;
                }
            }
        } else {
            None
        };
        let answers = match batch {
            Some(batch) => {
                let run = SharedRun {
                    namespace: &namespace,
                    committed: &committed,
                    seen: &mut seen,
                };
                run.write(batch, &mut working, std::mem::take(&mut jobs))
                    .await
            }
            None => {
                write_local(
                    &*store,
                    &namespace,
                    &committed,
                    &mut working,
                    jobs.drain(..),
                )
                .await
            }
        };
        for (pending, outcome) in answers {
            pending.answer(outcome);
        }
    }
}

/// The operations of a batch with their outcomes, to answer once the batch is persisted.
type Answers<T> = Vec<(Box<dyn Pending<T>>, Result<(), OpError>)>;

/// The JSON texts of a batch's writes, for the store.
fn rows<R>(writes: &Writes<R>) -> Vec<(String, Option<String>)> {
    writes
        .iter()
        .map(|(key, (_, text))| (key.clone(), text.clone()))
        .collect()
}

/// Publishes a persisted batch to the committed tables.
fn publish<T: Tables>(committed: &RwLock<T>, writes: Writes<T::Record>) {
    let mut tables = committed.write().unwrap_or_else(|e| e.into_inner());
    for (key, (record, _)) in writes {
        tables.apply(key, record);
    }
}

/// Fails every answer of a batch that could not be persisted and resets the working copy.
fn fail_batch<T: Tables>(
    namespace: &str,
    committed: &RwLock<T>,
    working: &mut T,
    answers: &mut Answers<T>,
    message: String,
) {
    let err = store_error(namespace, message);
    *working = committed.read().unwrap_or_else(|e| e.into_inner()).clone();
    for (_, outcome) in answers {
        *outcome = Err(err.clone());
    }
}

/// One batch when this process is the only writer.
async fn write_local<T: Tables>(
    store: &dyn SimStateStore,
    namespace: &str,
    committed: &RwLock<T>,
    working: &mut T,
    jobs: impl Iterator<Item = Job<T>>,
) -> Answers<T> {
    let mut writes: Writes<T::Record> = BTreeMap::new();
    let mut answers: Answers<T> = jobs
        .map(|mut job| {
            let outcome = plan_into(working, &mut *job.pending, &mut writes);
            (job.pending, outcome)
        })
        .collect();
    tracing::debug!(
        namespace,
        operations = answers.len(),
        records = writes.len(),
        "sim batch"
    );
    if !writes.is_empty() {
        match store.put_many(namespace, &rows(&writes)).await {
            Ok(()) => publish(committed, writes),
            Err(message) => fail_batch(namespace, committed, working, &mut answers, message),
        }
    }
    answers
}

/// One batch of a namespace other processes also write.
struct SharedRun<'a, T: Tables> {
    namespace: &'a str,
    committed: &'a RwLock<T>,
    seen: &'a mut i64,
}

impl<T: Tables> SharedRun<'_, T> {
    /// The fast path: plans the jobs on the working copy as if it were current and persists
    /// them only if it is and every job's lease holds ([`SimStateStore::write_current`], one
    /// statement, no lock held across the planning). None when it was not: nothing was
    /// written, the working copy is reset, and `jobs` are left for the locked path.
    async fn write_current(
        self,
        store: &dyn SimStateStore,
        working: &mut T,
        jobs: &mut Vec<Job<T>>,
    ) -> Option<Answers<T>> {
        let mut fences: Vec<Fence> = Vec::new();
        for fence in jobs.iter().filter_map(|job| job.fence.as_ref()) {
            let known = fences.iter().any(|f| {
                f.shard == fence.shard && f.token == fence.token && f.replica == fence.replica
            });
            if !known {
                fences.push(fence.clone());
            }
        }
        let mut writes: Writes<T::Record> = BTreeMap::new();
        let outcomes: Vec<_> = jobs
            .iter_mut()
            .map(|job| plan_into(working, &mut *job.pending, &mut writes))
            .collect();
        match store
            .write_current(self.namespace, *self.seen, &fences, &rows(&writes))
            .await
        {
            Ok(Some(generation)) => {
                *self.seen = generation;
                publish(self.committed, writes);
                let replies = jobs.drain(..).map(|job| job.pending);
                Some(replies.zip(outcomes).collect())
            }
            refused => {
                // A store error here is met again (and answered) on the locked path.
                let error = refused.err();
                tracing::debug!(
                    namespace = self.namespace,
                    ?error,
                    "sim batch takes the locked path"
                );
                if !writes.is_empty() {
                    *working = self
                        .committed
                        .read()
                        .unwrap_or_else(|e| e.into_inner())
                        .clone();
                }
                None
            }
        }
    }

    async fn write(
        self,
        mut batch: Box<dyn SharedBatch>,
        working: &mut T,
        jobs: Vec<Job<T>>,
    ) -> Answers<T> {
        let mut answers: Answers<T> = Vec::with_capacity(jobs.len());
        if let Err(message) = catch_up(self.committed, working, batch.take_missed()) {
            fail_jobs(self.namespace, jobs, &mut answers, message);
            return answers;
        }
        *self.seen = batch.generation();
        let mut writes: Writes<T::Record> = BTreeMap::new();
        for mut job in jobs {
            if let Some(fence) = &job.fence {
                match batch.fence_holds(fence).await {
                    Ok(true) => {}
                    Ok(false) => {
                        answers.push((job.pending, Err(fence.lost())));
                        continue;
                    }
                    Err(message) => {
                        answers.push((job.pending, Err(store_error(self.namespace, message))));
                        continue;
                    }
                }
            }
            let outcome = plan_into(working, &mut *job.pending, &mut writes);
            answers.push((job.pending, outcome));
        }
        match batch.commit(&rows(&writes)).await {
            Ok(generation) => {
                *self.seen = generation;
                publish(self.committed, writes);
            }
            Err(message) => fail_batch(
                self.namespace,
                self.committed,
                working,
                &mut answers,
                message,
            ),
        }
        answers
    }
}

fn fail_jobs<T: Tables>(
    namespace: &str,
    jobs: Vec<Job<T>>,
    answers: &mut Answers<T>,
    message: String,
) {
    let err = store_error(namespace, message);
    for job in jobs {
        answers.push((job.pending, Err(err.clone())));
    }
}

/// Applies what other processes wrote to both the working copy and the committed tables.
fn catch_up<T: Tables>(
    committed: &RwLock<T>,
    working: &mut T,
    missed: MissedRecords,
) -> Result<(), String> {
    let decode = |text: &str| {
        serde_json::from_str::<T::Record>(text).map_err(|e| format!("undecodable record: {e}"))
    };
    let changes: Vec<(String, Option<T::Record>)> = match missed {
        MissedRecords::Changes(changes) => changes
            .into_iter()
            .map(|(key, text)| Ok((key, text.as_deref().map(decode).transpose()?)))
            .collect::<Result<_, String>>()?,
        MissedRecords::Everything(records) => {
            let mut all: BTreeMap<String, Option<T::Record>> =
                working.keys().into_iter().map(|k| (k, None)).collect();
            for (key, text) in records {
                all.insert(key, Some(decode(&text)?));
            }
            all.into_iter().collect()
        }
    };
    if changes.is_empty() {
        return Ok(());
    }
    let mut tables = committed.write().unwrap_or_else(|e| e.into_inner());
    for (key, record) in changes {
        if working.record(&key) != record.as_ref() {
            working.apply(key.clone(), record.clone());
        }
        if tables.record(&key) != record.as_ref() {
            tables.apply(key, record);
        }
    }
    Ok(())
}

/// Plans one operation against the working copy and applies its changes there; nothing is
/// applied when the plan or the encoding of a record fails.
fn plan_into<T: Tables>(
    working: &mut T,
    pending: &mut dyn Pending<T>,
    writes: &mut Writes<T::Record>,
) -> Result<(), OpError> {
    let changes = pending.plan(working)?;
    let mut encoded = Vec::with_capacity(changes.len());
    for (key, record) in changes {
        let text = record
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| OpError::permanent(format!("cannot encode sim record: {e}")))?;
        encoded.push((key, record, text));
    }
    for (key, record, text) in encoded {
        if working.record(&key) == record.as_ref() {
            continue;
        }
        working.apply(key.clone(), record.clone());
        writes.insert(key, (record, text));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::MemorySimState;
    use async_trait::async_trait;
    use std::sync::Mutex;

    type Counters = BTreeMap<String, i64>;

    /// Adds one to `key` and answers the new value.
    fn increment(key: &'static str) -> impl Fn(&Counters) -> Result<Planned<i64, i64>, OpError> {
        move |t: &Counters| {
            let next = t.record(key).copied().unwrap_or(0) + 1;
            Ok((vec![(key.to_string(), Some(next))], next))
        }
    }

    /// A store that fails while `failing` is set and counts batches.
    #[derive(Default)]
    struct Flaky {
        inner: MemorySimState,
        failing: Mutex<bool>,
        batches: Mutex<usize>,
    }

    #[async_trait]
    impl SimStateStore for Flaky {
        async fn load_all(&self, ns: &str) -> Result<Vec<(String, String)>, String> {
            self.inner.load_all(ns).await
        }
        async fn put(&self, ns: &str, key: &str, value: &str) -> Result<(), String> {
            self.inner.put(ns, key, value).await
        }
        async fn delete(&self, ns: &str, key: &str) -> Result<(), String> {
            self.inner.delete(ns, key).await
        }
        async fn put_many(
            &self,
            ns: &str,
            rows: &[(String, Option<String>)],
        ) -> Result<(), String> {
            *self.batches.lock().unwrap() += 1;
            if *self.failing.lock().unwrap() {
                return Err("disk full".into());
            }
            self.inner.put_many(ns, rows).await
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writers_serialise_and_persist_everything() {
        let store = Arc::new(Flaky::default());
        let engine = Arc::new(Engine::start(store.clone(), "t", Counters::default()));
        let mut tasks = Vec::new();
        for _ in 0..200 {
            let engine = engine.clone();
            tasks.push(tokio::spawn(
                async move { engine.run(increment("n")).await },
            ));
        }
        let mut answers = Vec::new();
        for t in tasks {
            answers.push(t.await.unwrap().unwrap());
        }
        answers.sort();
        assert_eq!(
            answers,
            (1..=200).collect::<Vec<_>>(),
            "each saw its own step"
        );
        assert_eq!(store.inner.get("t", "n").as_deref(), Some("200"));
        assert_eq!(engine.read().record("n"), Some(&200));
    }

    #[tokio::test]
    async fn a_failed_commit_publishes_nothing_and_is_transient() {
        let store = Arc::new(Flaky::default());
        let engine = Engine::start(store.clone(), "t", Counters::default());
        engine.run(increment("n")).await.unwrap();
        *store.failing.lock().unwrap() = true;
        let err = engine.run(increment("n")).await.unwrap_err();
        assert!(matches!(err, OpError::Transient(_)), "{err:?}");
        assert_eq!(engine.read().record("n"), Some(&1));
        assert_eq!(store.inner.get("t", "n").as_deref(), Some("1"));
        *store.failing.lock().unwrap() = false;
        assert_eq!(
            engine.run(increment("n")).await.unwrap(),
            2,
            "retry converges"
        );
        assert_eq!(store.inner.get("t", "n").as_deref(), Some("2"));
    }

    #[tokio::test]
    async fn operations_that_change_nothing_skip_the_writer() {
        let store = Arc::new(Flaky::default());
        let engine = Engine::start(store.clone(), "t", Counters::default());
        engine.run(increment("n")).await.unwrap();
        *store.failing.lock().unwrap() = true;
        let read = engine
            .run(|t: &Counters| Ok((vec![], t.record("n").copied())))
            .await
            .unwrap();
        assert_eq!(read, Some(1), "a query is served while the store is down");
        let same = engine
            .run(|_: &Counters| Ok((vec![("n".to_string(), Some(1))], "ok")))
            .await;
        assert_eq!(
            same.unwrap(),
            "ok",
            "re-writing the same value writes nothing"
        );
        assert_eq!(*store.batches.lock().unwrap(), 1);
    }

    /// Journal rows: (generation, key, value).
    type Journal = Vec<(i64, String, Option<String>)>;

    /// Several "processes" sharing one namespace: a journal of (generation, key, value) and
    /// one writer at a time, like the PostgreSQL store; fences named in `lost` do not hold.
    #[derive(Default)]
    struct SharedJournal {
        journal: Arc<tokio::sync::Mutex<Journal>>,
        lost: Mutex<Vec<i64>>,
        /// Batches that took the locked path.
        locked: Mutex<usize>,
    }

    struct JournalBatch {
        guard: tokio::sync::OwnedMutexGuard<Journal>,
        generation: i64,
        missed: Vec<(String, Option<String>)>,
        lost: Vec<i64>,
    }

    #[async_trait]
    impl SharedBatch for JournalBatch {
        fn generation(&self) -> i64 {
            self.generation
        }
        fn take_missed(&mut self) -> MissedRecords {
            MissedRecords::Changes(std::mem::take(&mut self.missed))
        }
        async fn fence_holds(&mut self, fence: &Fence) -> Result<bool, String> {
            Ok(!self.lost.contains(&fence.token))
        }
        async fn commit(
            mut self: Box<Self>,
            rows: &[(String, Option<String>)],
        ) -> Result<i64, String> {
            if rows.is_empty() {
                return Ok(self.generation);
            }
            let generation = self.generation + 1;
            for (k, v) in rows {
                self.guard.push((generation, k.clone(), v.clone()));
            }
            Ok(generation)
        }
    }

    #[async_trait]
    impl SimStateStore for SharedJournal {
        async fn load_all(&self, _: &str) -> Result<Vec<(String, String)>, String> {
            Ok(Vec::new())
        }
        async fn put(&self, _: &str, _: &str, _: &str) -> Result<(), String> {
            Err("shared: batches only".into())
        }
        async fn delete(&self, _: &str, _: &str) -> Result<(), String> {
            Err("shared: batches only".into())
        }
        fn shared(&self) -> bool {
            true
        }
        async fn write_current(
            &self,
            _: &str,
            seen: i64,
            fences: &[Fence],
            rows: &[(String, Option<String>)],
        ) -> Result<Option<i64>, String> {
            let mut journal = self.journal.lock().await;
            let generation = journal.last().map_or(0, |(g, _, _)| *g);
            let lost = self.lost.lock().unwrap().clone();
            if generation != seen || fences.iter().any(|f| lost.contains(&f.token)) {
                return Ok(None);
            }
            if rows.is_empty() {
                return Ok(Some(generation));
            }
            for (k, v) in rows {
                journal.push((generation + 1, k.clone(), v.clone()));
            }
            Ok(Some(generation + 1))
        }
        async fn exclusive(&self, _: &str, seen: i64) -> Result<Box<dyn SharedBatch>, String> {
            *self.locked.lock().unwrap() += 1;
            let guard = self.journal.clone().lock_owned().await;
            let generation = guard.last().map_or(0, |(g, _, _)| *g);
            let missed = guard
                .iter()
                .filter(|(g, _, _)| *g > seen)
                .map(|(_, k, v)| (k.clone(), v.clone()))
                .collect();
            Ok(Box::new(JournalBatch {
                guard,
                generation,
                missed,
                lost: self.lost.lock().unwrap().clone(),
            }))
        }
    }

    #[tokio::test]
    async fn engines_sharing_a_namespace_see_each_others_writes() {
        let store = Arc::new(SharedJournal::default());
        let a = Engine::start(store.clone(), "t", Counters::default());
        let b = Engine::start(store.clone(), "t", Counters::default());
        let mut answers = Vec::new();
        for _ in 0..3 {
            answers.push(a.run(increment("n")).await.unwrap());
            answers.push(b.run(increment("n")).await.unwrap());
        }
        // Each engine caught up on the other's increments before adding its own.
        assert_eq!(answers, (1..=6).collect::<Vec<_>>());
        assert_eq!(b.read().record("n"), Some(&6));
    }

    #[tokio::test]
    async fn a_current_writer_skips_the_lock_and_an_overtaken_one_catches_up() {
        let store = Arc::new(SharedJournal::default());
        let a = Engine::start(store.clone(), "t", Counters::default());
        for n in 1..=3 {
            assert_eq!(a.run(increment("n")).await.unwrap(), n);
        }
        assert_eq!(*store.locked.lock().unwrap(), 0, "a was current every time");
        // b starts behind: its batch is refused on the fast path, then catches up.
        let b = Engine::start(store.clone(), "t", Counters::default());
        assert_eq!(b.run(increment("n")).await.unwrap(), 4);
        assert_eq!(*store.locked.lock().unwrap(), 1);
        // a is behind now, reads included: nothing is answered from its stale tables.
        let read = a
            .run(|t: &Counters| Ok((vec![], t.record("n").copied())))
            .await
            .unwrap();
        assert_eq!(read, Some(4));
        assert_eq!(a.run(increment("n")).await.unwrap(), 5);
        assert_eq!(store.journal.lock().await.len(), 5, "each increment once");
    }

    #[tokio::test]
    async fn an_operation_under_a_lost_lease_writes_nothing() {
        let store = Arc::new(SharedJournal::default());
        let engine = Engine::start(store.clone(), "t", Counters::default());
        store.lost.lock().unwrap().push(7);
        let stale = Fence::new(3, "r1".into(), 7, Arc::new(|_, _| true));
        let refused = crate::fence::scope(stale, engine.run(increment("n"))).await;
        assert!(matches!(refused, Err(OpError::Transient(_))), "{refused:?}");
        assert!(store.journal.lock().await.is_empty(), "nothing written");
        let held = Fence::new(3, "r2".into(), 8, Arc::new(|_, _| true));
        let done = crate::fence::scope(held, engine.run(increment("n"))).await;
        assert_eq!(done.unwrap(), 1);
        assert_eq!(store.journal.lock().await.len(), 1);
    }
}
