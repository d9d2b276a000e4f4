//! SQLite writes a transaction's interval changes at its commit. Each metered object write
//! decides its changes (the close, the opening, the finish of a deletion, their CloudEvents)
//! in its transaction, as on every backend; SQLite keeps them until the commit and writes them
//! there, together with the transaction's deferred events, in one execution.
//!
//! Why: SQLite's writes are serial, under one lock held across every statement's round trip to
//! the connection's thread, and a group commit carries dozens of write sets. Written as each
//! set decides them, their interval changes would cost a round trip each under that lock;
//! gathered, they go with the events the commit writes anyway, in one execution: usually in
//! the statement of constant shape of `commit_statements`, otherwise as the multi-row
//! statements written here.
//!
//! Exact: nothing in the transaction reads the changes back from the tables — the open
//! intervals it changed are known from its own record of them (`open_intervals`), which a
//! savepoint rolled back truncates together with the changes ([`DeferredIntervals`]).

use std::collections::{HashMap, HashSet};

use super::batch::StatementBatch;
use crate::metering::{ClosingRow, IntervalWrites, OpeningRow, OutboxEvent};

/// The columns of an interval row, in the order its values are bound.
pub(super) const INTERVAL_COLUMNS: &str = "id, object_id, ordinal, signature, tenant, tenant_id, \
     kind, object_name, network_class, ip_family, attached, parent_kind, parent_id, started_us, \
     reported_us, ended_us, end_reason, deletion_requested_us, deletion_finished_us";

/// Rows of one multi-row statement (at most 19 parameters each).
const ROWS_PER_STATEMENT: usize = 200;

/// The interval changes of a transaction's writes, in order, until its commit.
#[derive(Debug, Default)]
pub(crate) struct DeferredIntervals(Vec<(String, IntervalWrites)>);

impl DeferredIntervals {
    /// Adds what one write of `object_id` changes.
    pub(crate) fn push(&mut self, object_id: &str, writes: IntervalWrites) {
        self.0.push((object_id.to_string(), writes));
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Drops the changes after the first `len` (a savepoint rolled back).
    pub(crate) fn truncate(&mut self, len: usize) {
        self.0.truncate(len);
    }

    /// The statements' plan of every change, emptying the list.
    pub(crate) fn take_plan(&mut self) -> WritePlan {
        plan(std::mem::take(&mut self.0))
    }
}

/// An interval a batch opens, with what later changes of the batch did to it.
#[derive(Debug, PartialEq)]
pub(crate) struct PlannedInterval {
    pub open: OpeningRow,
    pub close: Option<ClosingRow>,
    pub finished_us: Option<i64>,
}

/// What a transaction's changes do to the tables, as few statements can write it.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct WritePlan {
    /// Closes of intervals the table holds (written first: their objects may open the next).
    pub closes: Vec<ClosingRow>,
    /// The intervals the batch opens, in order, closed and finished as the batch left them.
    pub intervals: Vec<PlannedInterval>,
    /// Deletions finished of objects whose latest interval the table holds: (object, time).
    pub finishes: Vec<(String, i64)>,
    /// The CloudEvents, in the order of the changes.
    pub outbox: Vec<OutboxEvent>,
}

/// Turns a transaction's changes (object id, its changes), oldest first, into one plan with
/// the same effect as applying each change in turn: a close or finish of an interval the batch
/// opened lands on its row before it is written; a close of an older interval is kept once
/// (an interval ends once).
pub(crate) fn plan(changes: Vec<(String, IntervalWrites)>) -> WritePlan {
    let mut plan = WritePlan {
        closes: Vec::with_capacity(changes.len()),
        intervals: Vec::with_capacity(changes.len()),
        finishes: Vec::new(),
        outbox: Vec::with_capacity(2 * changes.len()),
    };
    let mut by_id: HashMap<String, usize> = HashMap::with_capacity(changes.len());
    let mut latest_of: HashMap<String, usize> = HashMap::with_capacity(changes.len());
    let mut closed_in_table: HashSet<String> = HashSet::new();
    let mut finished_in_table: HashSet<String> = HashSet::new();
    for (object_id, w) in changes {
        if let Some(close) = w.close {
            match by_id.get(&close.id) {
                Some(&i) => {
                    let row = &mut plan.intervals[i];
                    if row.close.is_none() {
                        row.close = Some(close);
                    }
                }
                None => {
                    if closed_in_table.insert(close.id.clone()) {
                        plan.closes.push(close);
                    }
                }
            }
        }
        if let Some(open) = w.open {
            by_id.insert(open.id.clone(), plan.intervals.len());
            latest_of.insert(object_id.clone(), plan.intervals.len());
            plan.intervals.push(PlannedInterval {
                open,
                close: None,
                finished_us: None,
            });
        }
        if let Some(at) = w.finished_us {
            match latest_of.get(&object_id) {
                Some(&i) => {
                    let row = &mut plan.intervals[i];
                    row.finished_us.get_or_insert(at);
                }
                None => {
                    if finished_in_table.insert(object_id.clone()) {
                        plan.finishes.push((object_id.clone(), at));
                    }
                }
            }
        }
        plan.outbox.extend(w.outbox);
    }
    plan
}

/// Adds the statements writing `plan` to `batch`: closes of intervals the table holds first
/// (their objects may open the next), then the intervals opened, the finished deletions and
/// the CloudEvents. A close or finish is one `UPDATE` by key per row: a single
/// `UPDATE … FROM (VALUES …)` lets SQLite's planner scan the open intervals' index for every
/// value row.
pub(crate) fn push<'a>(batch: &mut StatementBatch<'a>, plan: &'a WritePlan) {
    for c in &plan.closes {
        batch
            .statement(4)
            .push("UPDATE usage_intervals SET ended_us = ")
            .push_bind(c.ended_us)
            .push(", end_reason = ")
            .push_bind(c.reason)
            .push(", deletion_requested_us = ")
            .push_bind(c.deletion_requested_us)
            .push(" WHERE id = ")
            .push_bind(&c.id)
            .push(" AND ended_us IS NULL");
    }
    for chunk in plan.intervals.chunks(ROWS_PER_STATEMENT) {
        let q = batch.statement(19 * chunk.len());
        q.push(format!("INSERT INTO usage_intervals ({INTERVAL_COLUMNS}) "));
        q.push_values(chunk, |mut row, r| {
            let (o, d) = (&r.open, &r.open.dims);
            row.push_bind(&o.id)
                .push_bind(&d.object)
                .push_bind(o.ordinal)
                .push_bind(&o.signature)
                .push_bind(&d.tenant)
                .push_bind(&d.tenant_id)
                .push_bind(&d.kind)
                .push_bind(&d.object_name)
                .push_bind(&d.network_class)
                .push_bind(&d.ip_family)
                .push_bind(&d.attached)
                .push_bind(&d.parent_kind)
                .push_bind(&d.parent)
                .push_bind(o.started_us)
                .push_bind(o.started_us)
                .push_bind(r.close.as_ref().map(|c| c.ended_us))
                .push_bind(r.close.as_ref().map(|c| c.reason))
                .push_bind(r.close.as_ref().and_then(|c| c.deletion_requested_us))
                .push_bind(r.finished_us);
        });
    }
    for (object_id, at) in &plan.finishes {
        batch
            .statement(2)
            .push("UPDATE usage_intervals SET deletion_finished_us = ")
            .push_bind(*at)
            .push(" WHERE id = (SELECT id FROM usage_intervals WHERE object_id = ")
            .push_bind(object_id)
            .push(" ORDER BY ordinal DESC LIMIT 1) AND deletion_finished_us IS NULL");
    }
    for chunk in plan.outbox.chunks(ROWS_PER_STATEMENT) {
        let q = batch.statement(3 * chunk.len());
        q.push("INSERT INTO metering_outbox (event_id, subject, payload) ");
        q.push_values(chunk, |mut row, e| {
            row.push_bind(&e.event_id)
                .push_bind(&e.subject)
                .push_bind(&e.payload);
        });
        q.push(" ON CONFLICT (event_id) DO NOTHING");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use osac_model::metering::Dimensions;

    fn opening(id: &str, at: i64) -> OpeningRow {
        OpeningRow {
            id: id.to_string(),
            ordinal: at,
            signature: format!("sig-{id}"),
            dims: Dimensions {
                object: id.split('.').next().unwrap_or_default().to_string(),
                ..Dimensions::default()
            },
            started_us: at,
        }
    }

    fn closing(id: &str, at: i64) -> ClosingRow {
        ClosingRow {
            id: id.to_string(),
            ended_us: at,
            reason: "dimension_changed",
            deletion_requested_us: None,
        }
    }

    fn event(id: &str) -> OutboxEvent {
        OutboxEvent {
            event_id: id.to_string(),
            subject: "s".to_string(),
            payload: "{}".to_string(),
        }
    }

    fn change(
        object: &str,
        close: Option<ClosingRow>,
        open: Option<OpeningRow>,
        finished_us: Option<i64>,
        events: &[&str],
    ) -> (String, IntervalWrites) {
        let writes = IntervalWrites {
            close,
            open,
            finished_us,
            outbox: events.iter().map(|e| event(e)).collect(),
        };
        (object.to_string(), writes)
    }

    #[test]
    fn an_interval_opened_and_closed_in_one_batch_is_written_once_closed() {
        let plan = plan(vec![
            change("a", None, Some(opening("a.1", 1)), None, &["o1"]),
            change(
                "a",
                Some(closing("a.1", 5)),
                Some(opening("a.2", 5)),
                None,
                &["c1", "o2"],
            ),
        ]);
        assert!(plan.closes.is_empty());
        assert_eq!(plan.intervals.len(), 2);
        assert_eq!(plan.intervals[0].close, Some(closing("a.1", 5)));
        assert_eq!(plan.intervals[1].close, None);
        let ids: Vec<_> = plan.outbox.iter().map(|e| e.event_id.as_str()).collect();
        assert_eq!(
            ids,
            ["o1", "c1", "o2"],
            "events keep the order of the changes"
        );
    }

    #[test]
    fn a_close_of_an_older_interval_goes_to_the_table_before_the_next_opens() {
        let plan = plan(vec![change(
            "a",
            Some(closing("a.1", 5)),
            Some(opening("a.7", 5)),
            None,
            &[],
        )]);
        assert_eq!(plan.closes, vec![closing("a.1", 5)]);
        assert_eq!(plan.intervals.len(), 1);
        assert_eq!(plan.intervals[0].close, None);
    }

    #[test]
    fn a_finish_lands_on_the_latest_interval_the_batch_opened_else_the_table() {
        let plan = plan(vec![
            change("a", None, Some(opening("a.1", 1)), None, &[]),
            change("a", Some(closing("a.1", 4)), None, None, &[]),
            change("a", None, None, Some(6), &[]),
            change("b", Some(closing("b.1", 4)), None, None, &[]),
            change("b", None, None, Some(7), &[]),
        ]);
        assert_eq!(plan.intervals[0].finished_us, Some(6));
        assert_eq!(plan.intervals[0].close, Some(closing("a.1", 4)));
        assert_eq!(plan.closes, vec![closing("b.1", 4)]);
        assert_eq!(plan.finishes, vec![("b".to_string(), 7)]);
    }

    #[test]
    fn an_interval_ends_once() {
        let plan = plan(vec![
            change("a", None, Some(opening("a.1", 1)), None, &[]),
            change("a", Some(closing("a.1", 4)), None, None, &[]),
            change("a", Some(closing("a.1", 9)), None, None, &[]),
            change("b", Some(closing("b.1", 4)), None, None, &[]),
            change("b", Some(closing("b.1", 9)), None, None, &[]),
        ]);
        assert_eq!(plan.intervals[0].close, Some(closing("a.1", 4)));
        assert_eq!(plan.closes, vec![closing("b.1", 4)]);
    }

    /// The statements of three commits on a real database: the second closes an interval the
    /// first wrote, opens and closes another, and finishes the object; the third finishes an
    /// object on its latest interval the table holds.
    #[tokio::test]
    async fn the_statements_write_what_the_changes_did_in_order() {
        for constant in [false, true] {
            statements_write_what_the_changes_did(constant).await;
        }
    }

    /// The commits below written by the multi-row statements, or (`constant`) by the
    /// statements of constant text where they hold the rows.
    async fn statements_write_what_the_changes_did(constant: bool) {
        use super::super::commit_statements;
        let mut conn = commit_statements::tests::database().await;
        let commit = |changes: Vec<(String, IntervalWrites)>| {
            let mut deferred = DeferredIntervals::default();
            for (object, writes) in changes {
                deferred.push(&object, writes);
            }
            deferred.take_plan()
        };
        for plan in [
            commit(vec![change(
                "a",
                None,
                Some(opening("a.1", 1)),
                None,
                &["a.1.opened"],
            )]),
            commit(vec![
                change(
                    "a",
                    Some(closing("a.1", 5)),
                    Some(opening("a.5", 5)),
                    None,
                    &["a.1.closed", "a.5.opened"],
                ),
                change("a", Some(closing("a.5", 8)), None, Some(9), &["a.5.closed"]),
                change("b", None, Some(opening("b.2", 2)), None, &[]),
                change(
                    "b",
                    Some(closing("b.2", 6)),
                    Some(opening("b.6", 6)),
                    None,
                    &[],
                ),
            ]),
            commit(vec![change(
                "b",
                Some(closing("b.6", 10)),
                None,
                Some(11),
                &[],
            )]),
        ] {
            match commit_statements::shape_of(&[], &plan).filter(|_| constant) {
                Some(shape) => commit_statements::execute(&mut conn, shape, &[], &plan)
                    .await
                    .expect("write"),
                None => {
                    let mut batch = StatementBatch::default();
                    push(&mut batch, &plan);
                    batch.execute(&mut conn).await.expect("write");
                }
            }
        }
        type Row = (String, Option<i64>, Option<String>, Option<i64>);
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT id, ended_us, end_reason, deletion_finished_us FROM usage_intervals \
             ORDER BY object_id, ordinal",
        )
        .fetch_all(&mut conn)
        .await
        .expect("rows");
        let reason = Some("dimension_changed".to_string());
        assert_eq!(
            rows,
            vec![
                ("a.1".to_string(), Some(5), reason.clone(), None),
                ("a.5".to_string(), Some(8), reason.clone(), Some(9)),
                ("b.2".to_string(), Some(6), reason.clone(), None),
                ("b.6".to_string(), Some(10), reason, Some(11)),
            ]
        );
        let events: Vec<String> =
            sqlx::query_scalar("SELECT event_id FROM metering_outbox ORDER BY seq")
                .fetch_all(&mut conn)
                .await
                .expect("outbox");
        assert_eq!(
            events,
            ["a.1.opened", "a.1.closed", "a.5.opened", "a.5.closed"]
        );
    }
}
