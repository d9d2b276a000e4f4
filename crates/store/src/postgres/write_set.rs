//! The fast path of a controller's status write on PostgreSQL: a write set of one update
//! (and the event it implies) written in ONE statement, committed on its own, instead of a
//! transaction of five round trips (`BEGIN`, the locking read, the update, the commit check
//! with its notifications, `COMMIT`). Status writes that queue while others are in flight
//! share one statement instead (`status_batch`), under the same contract.
//!
//! # Contract
//!
//! Same outcome as the set's own transaction ([`crate::Store::apply`]):
//! - the update is written only if the stored version is the record's, every fence of the set
//!   holds (its lease rows are key-share-locked until the statement commits, as the commit
//!   check does) — and then the event row and the change notifications go with it, else
//!   nothing is written and nothing is sent;
//! - a missing row is [`StoreError::NotFound`], another stored version
//!   [`StoreError::Conflict`], a lost lease [`StoreError::Fenced`].
//!
//! It covers only writes that leave an object's label and reference rows as they are (a
//! status write): the statement writes the object row only if the stored labels and references
//! equal the new ones. Anything else — a changed label or reference, a write that removes the
//! row, other write kinds — answers [`Fast::Slow`] and takes the set's transaction.
//!
//! The labels and the new version are checked on the row being updated (re-read by PostgreSQL
//! if a concurrent writer changed it meanwhile); the reference rows are read in the statement's
//! snapshot. That snapshot already shows the version the writer read (it read a committed
//! version before the statement began), so when the version check passes the references read
//! are that version's.

use chrono::Utc;
use sqlx::types::Json;
use sqlx::{PgPool, Row};

use crate::record_cache::Written;
use crate::sql_common::check_version;
use crate::{Applied, Change, Record, Result, StoreError, Write, WriteSet};

/// What the fast path did.
pub(crate) enum Fast {
    /// Committed: the set's outcome, the changes to publish and what to tell the cache.
    Applied {
        applied: Applied,
        changes: Vec<Change>,
        written: Vec<Written>,
        ref_targets: Vec<String>,
    },
    /// Not for the fast path, or the check was not conclusive: nothing was written, the set
    /// takes its own transaction.
    Slow,
}

/// The update of the object row, conditional on its version, its labels, its reference rows
/// and the fences; `$1`–`$12` are the new row as [`crate::sql_common::bind_object_row!`] binds
/// it, `$13` the expected version, `$14`/`$15` the new references (field, target; sorted),
/// `$16`–`$18` the fences (see `lease::fence_arrays`), `$19` the channel and `$20` the
/// notifications.
const UPDATE: &str = "WITH held AS ( \
         SELECT l.shard FROM shard_leases l \
         WHERE l.shard = ANY($16::int[]) \
           AND l.owner = ($17::text[])[array_position($16::int[], l.shard)] \
           AND l.fence = ($18::bigint[])[array_position($16::int[], l.shard)] \
           AND l.expires_at > now() FOR KEY SHARE OF l), \
     stored AS ( \
         SELECT o.version, \
             ARRAY(SELECT r.field FROM object_refs r WHERE r.object_id = o.id \
                   ORDER BY r.field COLLATE \"C\") = $14::text[] \
             AND ARRAY(SELECT r.target_id FROM object_refs r WHERE r.object_id = o.id \
                   ORDER BY r.field COLLATE \"C\") = $15::text[] AS same_refs \
         FROM objects o WHERE o.id = $1), \
     {locked} \
     updated AS ( \
         UPDATE objects o SET name = $4, creator = $5, version = $6, deleted_at = $8, \
             labels = $9, annotations = $10, finalizers = $11, body = $12 \
         WHERE o.id = $1 AND o.version = $13 AND o.labels = $9 \
           AND (SELECT same_refs FROM stored) \
           AND (SELECT count(*) FROM held) = cardinality($16::int[]) {if_locked} \
         RETURNING o.id)";

/// With [`HeldRow::Skip`]: the row is locked first, or skipped if another transaction holds
/// it (then nothing is written).
const LOCKED: &str = "locked AS MATERIALIZED ( \
         SELECT o.id FROM objects o WHERE o.id = $1 FOR UPDATE SKIP LOCKED),";
const IF_LOCKED: &str = "AND EXISTS (SELECT 1 FROM locked)";

/// What the statement does when another transaction holds the object's row.
#[derive(Clone, Copy)]
pub(crate) enum HeldRow {
    /// Waits for it.
    Wait,
    /// Writes nothing and answers [`Fast::Slow`]: the set's own transaction waits instead.
    Skip,
}

/// The event row inserted with the update (and its label and reference rows), only if the
/// update happened; `$21`–`$32` are its row, `$33`–`$36` its labels and references.
const EVENT: &str = ", \
     event AS ( \
         INSERT INTO objects (id, kind, tenant, name, creator, version, created_at, \
             deleted_at, labels, annotations, finalizers, body) \
         SELECT $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32 \
         WHERE EXISTS (SELECT 1 FROM updated)), \
     event_labels AS ( \
         INSERT INTO object_labels (object_id, key, value) \
         SELECT $21, k, v FROM unnest($33::text[], $34::text[]) AS u(k, v) \
         WHERE EXISTS (SELECT 1 FROM updated)), \
     event_refs AS ( \
         INSERT INTO object_refs (object_id, field, target_id) \
         SELECT $21, f, t FROM unnest($35::text[], $36::text[]) AS u(f, t) \
         WHERE EXISTS (SELECT 1 FROM updated))";

/// The answer: the stored version (NULL: no such row), whether the update happened, how many
/// fences held, and the notifications sent (only if it happened).
const ANSWER: &str = " SELECT (SELECT version FROM stored), \
         (SELECT count(*) FROM updated), \
         (SELECT count(*) FROM held), \
         (SELECT count(*) FROM (SELECT pg_notify($19, n) FROM unnest($20::text[]) AS n \
                                WHERE EXISTS (SELECT 1 FROM updated)) AS sent)";

/// The set's writes if it is for the fast path: one update that keeps the row, and at most
/// one insert (its event).
fn eligible(set: &WriteSet) -> Option<(&Record, Option<&Record>)> {
    let (update, event) = match set.writes.as_slice() {
        [Write::Update(u)] => (u, None),
        [Write::Update(u), Write::Insert(e)] => (u, Some(e)),
        _ => return None,
    };
    let removes = update.deleted_at.is_some() && update.finalizers.is_empty();
    (!removes).then_some((update, event))
}

/// A status write ready for a statement: the set's update with its new version, its event, the
/// changes it publishes and their notification payloads (see the module's contract).
pub(crate) struct StatusWrite {
    /// The version the writer read (the update's condition).
    pub(crate) expected: i64,
    /// The object row as it will be stored (version bumped).
    pub(crate) next: Record,
    /// The object's references (field, target), sorted: the stored rows must equal them.
    pub(crate) refs: Vec<(String, String)>,
    /// The event inserted with the update, at version 1.
    pub(crate) event: Option<Record>,
    /// The event's references, sorted.
    pub(crate) event_refs: Vec<(String, String)>,
    /// The lease the set must still hold: shard, owner, token.
    pub(crate) fence: Option<crate::Fence>,
    /// The notification payloads of the changes, sent only if the update happens.
    pub(crate) notices: Vec<String>,
    changes: Vec<Change>,
}

impl StatusWrite {
    /// The set as a status write, if it is one (one update that keeps the row, at most one
    /// insert: its event). `notice` turns a change into its notification payload.
    pub(crate) fn of(set: &WriteSet, notice: impl Fn(&Change, i64) -> String) -> Option<Self> {
        let (update, event) = eligible(set)?;
        let mut next = update.clone();
        next.version = update.version + 1;
        let mut refs = next.references();
        refs.sort();
        let event = event.map(|e| {
            let mut e = e.clone();
            e.version = 1;
            e
        });
        let mut changes = vec![Change::of(&next, false, &[])];
        let mut event_refs = Vec::new();
        if let Some(e) = &event {
            event_refs = e.references();
            event_refs.sort();
            changes.push(Change::of(e, false, &[]));
        }
        let sent_at_us = Utc::now().timestamp_micros();
        let notices = changes.iter().map(|c| notice(c, sent_at_us)).collect();
        let fence = set
            .fence
            .as_ref()
            .map(|f| (f.shard, f.replica.clone(), f.token));
        Some(Self {
            expected: update.version,
            next,
            refs,
            event,
            event_refs,
            fence,
            notices,
            changes,
        })
    }

    /// What a committed write tells its caller, the change feed and the cache.
    /// (The caller counts the transaction: one statement may carry several writes.)
    pub(crate) fn applied(self) -> Fast {
        // The update's reference rows stayed as they were: only the event's are new.
        let ref_targets = self.event_refs.into_iter().map(|(_, t)| t).collect();
        let mut applied = vec![Some(self.next.clone())];
        let mut written = vec![Written::Put(Box::new(self.next))];
        if let Some(e) = self.event {
            applied.push(Some(e.clone()));
            written.push(Written::Put(Box::new(e)));
        }
        Fast::Applied {
            applied,
            changes: self.changes,
            written,
            ref_targets,
        }
    }
}

/// Splits (a, b) pairs into the two arrays a statement binds.
pub(crate) fn columns(pairs: &[(String, String)]) -> (Vec<&str>, Vec<&str>) {
    pairs.iter().map(|(a, b)| (a.as_str(), b.as_str())).unzip()
}

/// Writes one status write in its own statement.
pub(crate) async fn apply_one(
    pool: &PgPool,
    channel: &str,
    write: StatusWrite,
    held_row: HeldRow,
) -> Result<Fast> {
    let fences: Vec<crate::Fence> = write.fence.iter().cloned().collect();
    let (shards, owners, tokens) = super::lease::fence_arrays(&fences);
    let (fields, targets) = columns(&write.refs);
    let next = &write.next;
    let (locked, if_locked) = match held_row {
        HeldRow::Wait => ("", ""),
        HeldRow::Skip => (LOCKED, IF_LOCKED),
    };
    let update = UPDATE
        .replace("{locked}", locked)
        .replace("{if_locked}", if_locked);
    let sql = match write.event {
        Some(_) => format!("{update}{EVENT}{ANSWER}"),
        None => format!("{update}{ANSWER}"),
    };
    let statement =
        crate::sql_common::bind_object_row!(sqlx::query(&sql), next, ts: super::ts, json: Json)
            .bind(write.expected)
            .bind(&fields)
            .bind(&targets)
            .bind(&shards)
            .bind(&owners)
            .bind(&tokens)
            .bind(channel)
            .bind(&write.notices);
    let labels: Vec<(String, String)> = write
        .event
        .iter()
        .flat_map(|e| e.labels.iter().map(|(k, v)| (k.clone(), v.clone())))
        .collect();
    let (label_keys, label_values) = columns(&labels);
    let (event_fields, event_targets) = columns(&write.event_refs);
    let statement = match &write.event {
        Some(e) => crate::sql_common::bind_object_row!(statement, e, ts: super::ts, json: Json)
            .bind(&label_keys)
            .bind(&label_values)
            .bind(&event_fields)
            .bind(&event_targets),
        None => statement,
    };
    let row = statement.fetch_one(pool).await?;
    let stored: Option<i64> = row.try_get(0)?;
    let updated: i64 = row.try_get(1)?;
    let held: i64 = row.try_get(2)?;

    if updated == 1 {
        crate::count_write();
        return Ok(write.applied());
    }
    let id = &write.next.id;
    let Some(found) = stored else {
        return Err(StoreError::NotFound(id.clone()));
    };
    check_version(id, write.expected, found)?;
    if held < shards.len() as i64 {
        return Err(StoreError::Fenced(
            shards.first().copied().unwrap_or_default(),
        ));
    }
    // The labels or references change, the row changed after the statement's snapshot, or
    // (skipping) another transaction holds it: the set's own transaction decides.
    Ok(Fast::Slow)
}
