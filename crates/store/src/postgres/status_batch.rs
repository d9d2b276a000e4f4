//! Concurrent status writes on PostgreSQL share statements: while every slot has a statement
//! in flight, the status writes that arrive queue, and the next free slot writes all of them
//! in ONE statement (one round trip, one commit, one notification flush). A write that
//! arrives while a slot is free goes at once: batching adds no waiting, it only forms under
//! load.
//!
//! # Contract
//!
//! Each write's outcome is the one it would have had alone ([`super::write_set`]):
//! - a write is all or nothing: its update, its event and its notifications happen together
//!   or not at all, and a write that fails its checks (another stored version, a lost lease,
//!   changed labels or references) writes nothing while the others of its statement commit;
//! - a write its statement did not make is tried again alone, off the slot, which says why
//!   (NotFound, Conflict, Fenced, or the set's own transaction); so is every write of a
//!   statement that failed as a whole;
//! - a statement never waits for an object row another transaction holds: it locks its rows
//!   in id order and skips a held one (`ORDER BY id FOR UPDATE SKIP LOCKED`), whose write
//!   then goes alone and waits there. So a slot is never stuck behind a request's
//!   transaction, and a statement takes no part in a lock cycle. An object written twice in
//!   one batch is written by the second alone, after the first.

use std::sync::Arc;

use sqlx::types::Json;
use sqlx::{PgPool, Row};
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::write_set::{Fast, HeldRow, StatusWrite, apply_one};
use crate::{Result, StoreError};

/// Statements in flight at once. Fewer slots batch more writes per statement; more keep more
/// of PostgreSQL's connections busy. One is enough: the queue fills while the one statement
/// runs, so each statement carries more writes at the same throughput (docs/benchmarks.md,
/// "PostgreSQL status writes share one statement").
const SLOTS: usize = 1;

/// The most writes one statement carries.
const MAX_BATCH: usize = 64;

/// The update of many object rows: `$1`–`$15` are one array per column of the input rows
/// (position, the new row, the expected version, the references as one text, the fence).
/// A row is written only if its version, labels and references are the stored ones and its
/// lease holds; the lease rows are key-share-locked until the statement commits, as the
/// single write's statement does.
const UPDATE: &str = "WITH input AS ( \
         SELECT * FROM unnest($1::int[], $2::text[], $3::text[], $4::text[], $5::bigint[], \
             $6::timestamptz[], $7::text[], $8::jsonb[], $9::text[], $10::jsonb[], \
             $11::bigint[], $12::text[], $13::int[], $14::text[], $15::bigint[]) \
         AS i(pos, id, name, creator, version, deleted_at, labels, annotations, finalizers, \
              body, expected, refs, shard, owner, fence)), \
     held AS ( \
         SELECT l.shard, l.owner, l.fence FROM shard_leases l \
         WHERE l.shard IN (SELECT i.shard FROM input i WHERE i.shard IS NOT NULL) \
           AND l.expires_at > now() FOR KEY SHARE OF l), \
     locked AS MATERIALIZED ( \
         SELECT o.id FROM objects o WHERE o.id IN (SELECT i.id FROM input i) \
         ORDER BY o.id FOR UPDATE OF o SKIP LOCKED), \
     updated AS ( \
         UPDATE objects o SET name = i.name, creator = i.creator, version = i.version, \
             deleted_at = i.deleted_at, labels = i.labels, annotations = i.annotations, \
             finalizers = i.finalizers, body = i.body \
         FROM input i \
         WHERE o.id = i.id AND o.id IN (SELECT id FROM locked) \
           AND o.version = i.expected AND o.labels = i.labels \
           AND (SELECT string_agg(r.field || chr(31) || r.target_id, chr(30) \
                    ORDER BY r.field COLLATE \"C\", r.target_id COLLATE \"C\") \
                FROM object_refs r WHERE r.object_id = o.id) IS NOT DISTINCT FROM i.refs \
           AND (i.shard IS NULL OR EXISTS (SELECT 1 FROM held h \
                WHERE h.shard = i.shard AND h.owner = i.owner AND h.fence = i.fence)) \
         RETURNING i.pos)";

/// The events of the rows written, with their label and reference rows: `$16`–`$28` the
/// event rows (the columns of the input rows, then kind, tenant and creation time),
/// `$29`–`$32` their labels, `$33`–`$36` their
/// references (each row led by its write's position and the event's id); then `$37` the
/// channel and `$38`/`$39` the notifications (position, payload), sent only for the rows
/// written. The answer is the positions written.
const EVENTS_AND_ANSWER: &str = ", \
     event AS ( \
         INSERT INTO objects (id, kind, tenant, name, creator, version, created_at, \
             deleted_at, labels, annotations, finalizers, body) \
         SELECT e.id, e.kind, e.tenant, e.name, e.creator, e.version, e.created_at, \
             e.deleted_at, e.labels, e.annotations, e.finalizers, e.body \
         FROM unnest($16::int[], $17::text[], $18::text[], $19::text[], $20::bigint[], \
             $21::timestamptz[], $22::text[], $23::jsonb[], $24::text[], $25::jsonb[], \
             $26::text[], $27::text[], $28::timestamptz[]) \
         AS e(pos, id, name, creator, version, deleted_at, labels, annotations, finalizers, \
              body, kind, tenant, created_at) \
         WHERE e.pos IN (SELECT pos FROM updated)), \
     event_labels AS ( \
         INSERT INTO object_labels (object_id, key, value) \
         SELECT l.id, l.k, l.v \
         FROM unnest($29::int[], $30::text[], $31::text[], $32::text[]) AS l(pos, id, k, v) \
         WHERE l.pos IN (SELECT pos FROM updated)), \
     event_refs AS ( \
         INSERT INTO object_refs (object_id, field, target_id) \
         SELECT r.id, r.f, r.t \
         FROM unnest($33::int[], $34::text[], $35::text[], $36::text[]) AS r(pos, id, f, t) \
         WHERE r.pos IN (SELECT pos FROM updated)), \
     sent AS ( \
         SELECT pg_notify($37, n.payload) \
         FROM unnest($38::int[], $39::text[]) AS n(pos, payload) \
         WHERE n.pos IN (SELECT pos FROM updated)) \
     SELECT ARRAY(SELECT pos FROM updated), (SELECT count(*) FROM sent)";

/// A write waiting for its statement, and where its outcome goes.
struct Job {
    write: StatusWrite,
    reply: oneshot::Sender<Result<Fast>>,
}

/// Hands status writes to the batching task.
pub(crate) struct StatusBatcher {
    jobs: mpsc::UnboundedSender<Job>,
}

impl StatusBatcher {
    /// Starts the task that writes the queued status writes (it ends when this is dropped).
    pub(crate) fn start(pool: PgPool, channel: &'static str) -> Self {
        let (jobs, queue) = mpsc::unbounded_channel();
        tokio::spawn(run(pool, channel, queue));
        Self { jobs }
    }

    /// Writes `write`, alone or with the others queued meanwhile; returns its own outcome.
    pub(crate) async fn write(&self, write: StatusWrite) -> Result<Fast> {
        let (reply, outcome) = oneshot::channel();
        self.jobs
            .send(Job { write, reply })
            .map_err(|_| stopped())?;
        outcome.await.map_err(|_| stopped())?
    }
}

fn stopped() -> StoreError {
    StoreError::Unavailable("the status writer stopped".into())
}

/// Takes what is queued whenever a slot is free, and writes it on that slot.
async fn run(pool: PgPool, channel: &'static str, mut queue: mpsc::UnboundedReceiver<Job>) {
    let slots = Arc::new(Semaphore::new(SLOTS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let Some(first) = queue.recv().await else {
            return;
        };
        let mut jobs = vec![first];
        while jobs.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let pool = pool.clone();
        tokio::spawn(async move {
            let left = write_jobs(&pool, channel, jobs).await;
            drop(slot);
            // One after the other, off the slot: rare (a conflict, a row another transaction
            // holds, a lost lease, a failed statement), may wait on a lock, and a second
            // write of one object must follow the first.
            for job in left {
                let outcome = apply_one(&pool, channel, job.write, HeldRow::Wait).await;
                let _ = job.reply.send(outcome);
            }
        });
    }
}

/// Writes `jobs` in one statement and answers those written; returns the others (not written:
/// refused, skipped, or an object's second write). A write alone takes the single write's
/// statement, lighter than the batch's, skipping a held row as the batch's does (then the
/// set's own transaction waits for it, off the slot).
async fn write_jobs(pool: &PgPool, channel: &str, mut jobs: Vec<Job>) -> Vec<Job> {
    if jobs.len() == 1
        && let Some(job) = jobs.pop()
    {
        let _ = job
            .reply
            .send(apply_one(pool, channel, job.write, HeldRow::Skip).await);
        return Vec::new();
    }
    let mut batch = Vec::with_capacity(jobs.len());
    let mut left = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for job in jobs {
        if ids.insert(job.write.next.id.clone()) {
            batch.push(job);
        } else {
            left.push(job);
        }
    }
    let written = match write_batch(pool, channel, &batch).await {
        Ok(written) => written,
        Err(e) => {
            tracing::debug!(error = %e, writes = batch.len(), "a statement of status writes failed; writing each alone");
            Vec::new()
        }
    };
    let mut rest = Vec::new();
    for (pos, job) in batch.into_iter().enumerate() {
        if written.contains(&pos) {
            let _ = job.reply.send(Ok(job.write.applied()));
        } else {
            rest.push(job);
        }
    }
    rest.extend(left);
    rest
}

/// A statement of this module with its parameters bound so far.
type Statement<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// The columns of the batch statement's input rows, one vector per column.
#[derive(Default)]
struct Rows<'a> {
    pos: Vec<i32>,
    id: Vec<&'a str>,
    name: Vec<Option<&'a str>>,
    creator: Vec<&'a str>,
    version: Vec<i64>,
    deleted_at: Vec<Option<chrono::DateTime<chrono::Utc>>>,
    labels: Vec<String>,
    annotations: Vec<Json<&'a std::collections::BTreeMap<String, String>>>,
    finalizers: Vec<String>,
    body: Vec<Json<&'a serde_json::Value>>,
}

impl<'a> Rows<'a> {
    fn push(&mut self, pos: i32, r: &'a crate::Record) {
        self.pos.push(pos);
        self.id.push(&r.id);
        self.name.push(r.name.as_deref());
        self.creator.push(&r.creator);
        self.version.push(r.version);
        self.deleted_at.push(r.deleted_at);
        self.labels.push(crate::record::to_json(&r.labels));
        self.annotations.push(Json(&r.annotations));
        self.finalizers.push(crate::record::to_json(&r.finalizers));
        self.body.push(Json(&r.body));
    }

    /// Binds the columns, in their order here, as the next ten parameters.
    fn bind<'q>(&'q self, q: Statement<'q>) -> Statement<'q> {
        q.bind(&self.pos)
            .bind(&self.id)
            .bind(&self.name)
            .bind(&self.creator)
            .bind(&self.version)
            .bind(&self.deleted_at)
            .bind(&self.labels)
            .bind(&self.annotations)
            .bind(&self.finalizers)
            .bind(&self.body)
    }
}

/// Pairs of an event (label or reference rows): position, event id, the two values.
#[derive(Default)]
struct Pairs<'a> {
    pos: Vec<i32>,
    id: Vec<&'a str>,
    a: Vec<&'a str>,
    b: Vec<&'a str>,
}

impl<'a> Pairs<'a> {
    fn push(&mut self, pos: i32, id: &'a str, a: &'a str, b: &'a str) {
        self.pos.push(pos);
        self.id.push(id);
        self.a.push(a);
        self.b.push(b);
    }

    /// Binds the columns, in their order here, as the next four parameters.
    fn bind<'q>(&'q self, q: Statement<'q>) -> Statement<'q> {
        q.bind(&self.pos).bind(&self.id).bind(&self.a).bind(&self.b)
    }
}

/// The references of a row as the statement compares them: `field US target`, joined by RS,
/// in byte order (PostgreSQL's `COLLATE "C"`); None for no references.
fn refs_text(refs: &[(String, String)]) -> Option<String> {
    let mut sorted: Vec<String> = refs.iter().map(|(f, t)| format!("{f}\u{1f}{t}")).collect();
    sorted.sort();
    (!sorted.is_empty()).then(|| sorted.join("\u{1e}"))
}

/// Writes the batch in one statement; returns the positions written.
async fn write_batch(pool: &PgPool, channel: &str, batch: &[Job]) -> Result<Vec<usize>> {
    let mut rows = Rows::default();
    let mut expected = Vec::new();
    let mut refs = Vec::new();
    let mut shard = Vec::new();
    let mut owner = Vec::new();
    let mut fence = Vec::new();
    let mut events = Rows::default();
    let mut event_kind = Vec::new();
    let mut event_tenant = Vec::new();
    let mut event_created = Vec::new();
    let mut labels = Pairs::default();
    let mut event_refs = Pairs::default();
    let mut notice_pos = Vec::new();
    let mut notices = Vec::new();
    for (n, job) in batch.iter().enumerate() {
        let w = &job.write;
        let pos = i32::try_from(n).unwrap_or(i32::MAX);
        rows.push(pos, &w.next);
        expected.push(w.expected);
        refs.push(refs_text(&w.refs));
        shard.push(w.fence.as_ref().map(|f| f.0));
        owner.push(w.fence.as_ref().map(|f| f.1.as_str()));
        fence.push(w.fence.as_ref().map(|f| f.2));
        if let Some(e) = &w.event {
            events.push(pos, e);
            event_kind.push(e.kind.collection());
            event_tenant.push(e.tenant.as_str());
            event_created.push(e.created_at);
            for (k, v) in &e.labels {
                labels.push(pos, &e.id, k, v);
            }
            for (f, t) in &w.event_refs {
                event_refs.push(pos, &e.id, f, t);
            }
        }
        for p in &w.notices {
            notice_pos.push(pos);
            notices.push(p.as_str());
        }
    }
    let sql = format!("{UPDATE}{EVENTS_AND_ANSWER}");
    let query = rows
        .bind(sqlx::query(&sql))
        .bind(&expected)
        .bind(&refs)
        .bind(&shard)
        .bind(&owner)
        .bind(&fence);
    let query = events
        .bind(query)
        .bind(&event_kind)
        .bind(&event_tenant)
        .bind(&event_created);
    let row = event_refs
        .bind(labels.bind(query))
        .bind(channel)
        .bind(&notice_pos)
        .bind(&notices)
        .fetch_one(pool)
        .await?;
    let written: Vec<i32> = row.try_get(0)?;
    if !written.is_empty() {
        crate::count_write();
    }
    if written.len() > 1 {
        crate::count_group(written.len());
    }
    Ok(written
        .into_iter()
        .filter_map(|p| usize::try_from(p).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::refs_text;

    #[test]
    fn references_compare_in_byte_order_and_none_is_null() {
        let refs = vec![
            ("spec.subnet".to_string(), "b".to_string()),
            ("spec.security_groups".to_string(), "z".to_string()),
            ("spec.security_groups".to_string(), "a".to_string()),
        ];
        assert_eq!(
            refs_text(&refs).as_deref(),
            Some(
                "spec.security_groups\u{1f}a\u{1e}spec.security_groups\u{1f}z\u{1e}spec.subnet\u{1f}b"
            )
        );
        assert_eq!(refs_text(&[]), None);
    }
}
