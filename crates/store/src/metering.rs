//! Metering in the store: the usage intervals of metered objects, written in the transaction
//! of every object write (so an interval is never lost nor counted twice, whichever replica
//! writes), and the outbox of CloudEvents that records them.
//!
//! Each write of a metered kind compares the record's metering signature
//! ([`osac_model::metering::signature`]) with the object's open interval: equal, nothing is
//! written (a repeated status write writes nothing); otherwise the open interval closes and/or
//! the next opens, each with one outbox row, in the same transaction. Interval ids are
//! `<object id>.<ordinal>`, the ordinal being the version of the object write that opened it: a
//! write retried after a conflict computes the same id.
//!
//! The open interval's signature is always the signature of the stored record (every write
//! passes here, and [`backfill`] opens the intervals of objects stored before metering), so
//! when the transaction knows the stored record it replaces (cached, at the version the write
//! was checked against) and its signature equals the new one, nothing is read at all.

use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use osac_model::Kind;
use osac_model::metering::cloudevent::Closing;
use osac_model::metering::{
    self, CloudEvent, Dimensions, IntervalRow, Transition, event_text, interval_id, signature,
    transition,
};
use serde_json::Value;

use crate::{Record, Result, Tx};

/// Set when a benchmark turned metering off (see [`disable_for_benchmark`]).
static OFF_FOR_BENCHMARK: AtomicBool = AtomicBool::new(false);

/// Turns metering off in this process: no interval and no outbox row is written any more.
/// Only for measuring what metering costs (`osac-bench --no-metering` against a run with it,
/// same binary, alternating; docs/benchmarks.md measure M). A server never calls it: usage
/// written while it is off would be lost.
pub fn disable_for_benchmark() {
    OFF_FOR_BENCHMARK.store(true, Ordering::Relaxed);
}

/// Whether writes meter (always, unless a benchmark turned it off).
fn metering_on() -> bool {
    !OFF_FOR_BENCHMARK.load(Ordering::Relaxed)
}

/// One outbox row: a CloudEvent waiting to be published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEntry {
    /// Order of writing (drain in ascending order).
    pub seq: i64,
    /// The CloudEvent's `id` (the broker's message id).
    pub event_id: String,
    /// The CloudEvent's `subject`.
    pub subject: String,
    /// The complete structured-mode CloudEvent JSON.
    pub payload: String,
}

/// A CloudEvent to append to the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEvent {
    pub event_id: String,
    pub subject: String,
    pub payload: String,
}

impl From<event_text::EventText> for OutboxEvent {
    fn from(e: event_text::EventText) -> Self {
        OutboxEvent {
            event_id: e.id,
            subject: e.subject,
            payload: e.payload,
        }
    }
}

impl From<&CloudEvent> for OutboxEvent {
    fn from(e: &CloudEvent) -> Self {
        OutboxEvent {
            event_id: e.id.clone(),
            subject: e.subject.clone(),
            payload: e.to_text(),
        }
    }
}

/// The open interval of an object, as the write's transaction reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OpenInterval {
    pub id: String,
    pub signature: String,
    pub started_us: i64,
    pub dims: Dimensions,
}

/// A stored interval row (the columns the query and the usage records read).
pub(crate) type IntervalColumns = (
    String,
    i64,
    Option<i64>,
    i64,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
);

/// An interval's signature and its [`IntervalColumns`].
pub(crate) type OpenColumns = (
    String,
    String,
    i64,
    Option<i64>,
    i64,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
);

/// An interval read with [`OpenColumns`].
pub(crate) fn open_of(c: OpenColumns) -> OpenInterval {
    let (signature, a, b, c2, d, e, f, g, h, i, j, k, l, m, n) = c;
    let (row, _) = interval_of((a, b, c2, d, e, f, g, h, i, j, k, l, m, n));
    OpenInterval {
        id: row.interval_id,
        signature,
        started_us: row.started_at.timestamp_micros(),
        dims: row.dims,
    }
}

/// The columns of [`IntervalColumns`], in order.
pub(crate) const INTERVAL_COLUMNS: &str = "id, started_us, ended_us, reported_us, tenant, tenant_id, kind, object_id, object_name, network_class, ip_family, attached, parent_kind, parent_id";

/// An interval row's dimensions and times.
pub(crate) fn interval_of(c: IntervalColumns) -> (IntervalRow, i64) {
    let (
        id,
        started,
        ended,
        reported,
        tenant,
        tenant_id,
        kind,
        object,
        object_name,
        class,
        family,
        attached,
        parent_kind,
        parent,
    ) = c;
    let row = IntervalRow {
        interval_id: id,
        dims: Dimensions {
            tenant,
            tenant_id,
            kind,
            object,
            object_name,
            network_class: class,
            ip_family: family,
            attached,
            parent_kind,
            parent,
        },
        started_at: from_us(started),
        ended_at: ended.map(from_us),
    };
    (row, reported)
}

/// Microseconds since the epoch as a time.
pub(crate) fn from_us(us: i64) -> DateTime<Utc> {
    Utc.timestamp_micros(us).single().unwrap_or_default()
}

/// The statements metering needs inside a write transaction (each backend runs them on its
/// transaction's connection).
#[async_trait]
pub(crate) trait MeterTx: Tx {
    /// The object's open interval, read.
    async fn open_interval(&mut self, object_id: &str) -> Result<Option<OpenInterval>>;
    /// The object's open interval as the backend knows it without a statement (Some(None):
    /// known to have none), or None when not known.
    fn known_open(&self, object_id: &str) -> Option<Option<OpenInterval>>;
    /// Notes the object's open interval after a write of this transaction (None: none).
    fn note_open(&mut self, object_id: &str, open: Option<OpenInterval>);
    /// Writes what one object write changes of its intervals, in the order of
    /// [`IntervalWrites`]' fields, in the transaction (SQLite: at its commit).
    async fn write_intervals(&mut self, object_id: &str, writes: IntervalWrites) -> Result<()>;
    /// The objects of metered kinds that have no interval at all.
    async fn unmetered_objects(&mut self) -> Result<Vec<Record>>;
}

/// What one object write changes of its intervals.
#[derive(Debug, Default)]
pub(crate) struct IntervalWrites {
    /// The open interval ends.
    pub close: Option<ClosingRow>,
    /// The next interval opens.
    pub open: Option<OpeningRow>,
    /// The object's row went away at this time (recorded on its latest interval).
    pub finished_us: Option<i64>,
    /// The CloudEvents recording it.
    pub outbox: Vec<OutboxEvent>,
}

/// An interval ending.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ClosingRow {
    pub id: String,
    pub ended_us: i64,
    pub reason: &'static str,
    pub deletion_requested_us: Option<i64>,
}

/// An interval opening.
#[derive(Debug, PartialEq)]
pub(crate) struct OpeningRow {
    pub id: String,
    pub ordinal: i64,
    pub signature: String,
    pub dims: Dimensions,
    pub started_us: i64,
}

/// Opens the interval of every object that accrues and has none: objects stored before the
/// store metered (an upgrade) start accruing when a server first opens the store. Returns how
/// many were opened. A no-op once done (objects that accrue then always have an interval).
pub(crate) async fn backfill<T: MeterTx + ?Sized>(tx: &mut T) -> Result<usize> {
    if !metering_on() {
        return Ok(0);
    }
    let mut opened = 0;
    for rec in tx.unmetered_objects().await? {
        if signature(rec.kind, &rec.body, rec.deleted_at.is_some()).is_some() {
            on_write(tx, &rec, false, None).await?;
            opened += 1;
        }
    }
    Ok(opened)
}

/// The `objects.kind` values of the metered kinds, as an SQL list.
pub(crate) fn metered_kinds_sql() -> String {
    metering::METERED
        .iter()
        .map(|k| format!("'{}'", k.collection()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Meters one object write: `rec` as written, `gone` when its row was removed. `replaced` is
/// the stored record the write replaced when the transaction knows it without a statement (its
/// version is the one the write was checked against): its signature is the open interval's,
/// so an unchanged signature writes nothing and a first opening reads nothing.
pub(crate) async fn on_write<T: MeterTx + ?Sized>(
    tx: &mut T,
    rec: &Record,
    gone: bool,
    replaced: Option<&Record>,
) -> Result<()> {
    if !metering::metered(rec.kind) || !metering_on() {
        return Ok(());
    }
    let wanted = if gone {
        None
    } else {
        signature(rec.kind, &rec.body, rec.deleted_at.is_some())
    };
    let replaced_signature =
        replaced.map(|old| signature(old.kind, &old.body, old.deleted_at.is_some()));
    if !gone && replaced_signature.as_ref() == Some(&wanted) {
        return Ok(());
    }
    // The open interval is read unless the replaced record proves there is none or the
    // backend knows it. An interval's ordinal is the version of the write that opened it:
    // versions only grow, so it is unique and the same when a write is retried.
    let open = if replaced_signature == Some(None) {
        None
    } else if let Some(known) = tx.known_open(&rec.id) {
        known
    } else {
        let read = tx.open_interval(&rec.id).await?;
        tx.note_open(&rec.id, read.clone());
        read
    };
    let ordinal = rec.version;
    let step = transition(
        open.as_ref().map(|o| o.signature.as_str()),
        wanted.as_deref(),
    );
    let now = Utc::now();
    let collection = rec.kind.collection();
    let mut writes = IntervalWrites::default();
    if let Some(o) = open
        .as_ref()
        .filter(|_| matches!(step, Transition::Close | Transition::Reopen))
    {
        let started = from_us(o.started_us);
        let (ended_at, reason) = match (step, rec.deleted_at) {
            (Transition::Reopen, _) => (now, "dimension_changed"),
            // Deletion requested ends the interval at the request (see docs/metering.md).
            (_, Some(requested)) => (requested.min(now), "deleted"),
            _ if gone => (now, "removed"),
            _ => (now, "not_ready"),
        };
        let ended_at = ended_at.max(started);
        writes.close = Some(ClosingRow {
            id: o.id.clone(),
            ended_us: ended_at.timestamp_micros(),
            reason,
            deletion_requested_us: rec.deleted_at.map(|d| d.timestamp_micros()),
        });
        let closing = Closing {
            ended_at,
            reason: reason.to_string(),
        };
        writes
            .outbox
            .push(event_text::closed(&o.id, collection, &o.dims, started, &closing).into());
    }
    if let (Some(sig), Transition::Open | Transition::Reopen) = (&wanted, step) {
        let id = interval_id(&rec.id, ordinal);
        let dims = resolve(tx, rec).await?;
        writes
            .outbox
            .push(event_text::opened(&id, collection, &dims, now).into());
        writes.open = Some(OpeningRow {
            id,
            ordinal,
            signature: sig.clone(),
            dims,
            started_us: now.timestamp_micros(),
        });
    }
    if gone {
        writes.finished_us = Some(now.timestamp_micros());
    }
    let changed = writes.close.is_some() || writes.open.is_some();
    let now_open = writes.open.as_ref().map(|o| OpenInterval {
        id: o.id.clone(),
        signature: o.signature.clone(),
        started_us: o.started_us,
        dims: o.dims.clone(),
    });
    if changed || writes.finished_us.is_some() {
        tx.write_intervals(&rec.id, writes).await?;
    }
    if changed {
        tx.note_open(&rec.id, now_open);
    }
    Ok(())
}

/// A string field of a body.
fn text<'a>(body: &'a Value, path: &str) -> &'a str {
    body.pointer(path).and_then(Value::as_str).unwrap_or("")
}

/// The dimensions of an interval opening now, read in the write's transaction.
async fn resolve<T: Tx + ?Sized>(tx: &mut T, rec: &Record) -> Result<Dimensions> {
    let tenant_id = match tx.find_by_name(Kind::Tenant, "", &rec.tenant).await? {
        Some(t) => t.id,
        None => String::new(),
    };
    let mut dims = Dimensions {
        tenant: rec.tenant.clone(),
        tenant_id,
        kind: rec.kind.to_string(),
        object: rec.id.clone(),
        object_name: rec.name.clone().unwrap_or_default(),
        ip_family: metering::ip_family(rec.kind, &rec.body),
        ..Default::default()
    };
    let vn_id = match rec.kind {
        Kind::VirtualNetwork => None,
        _ => Some(text(&rec.body, "/spec/virtual_network").to_string()).filter(|s| !s.is_empty()),
    };
    let class_ref = match (&vn_id, rec.kind) {
        (_, Kind::VirtualNetwork) => text(&rec.body, "/spec/network_class").to_string(),
        (Some(vn), _) => match tx.get(vn).await? {
            Some(v) => text(&v.body, "/spec/network_class").to_string(),
            None => String::new(),
        },
        (None, _) => String::new(),
    };
    dims.network_class = class_name(tx, &class_ref).await?;
    if let Some(vn) = vn_id {
        dims.parent_kind = Kind::VirtualNetwork.to_string();
        dims.parent = vn;
    }
    if rec.kind == Kind::ExternalIp {
        let attached = metering::attached(&rec.body);
        dims.attached = attached.to_string();
        if attached && let Some((kind, id)) = external_ip_user(tx, &rec.id).await? {
            dims.parent_kind = kind.to_string();
            dims.parent = id;
        }
    }
    Ok(dims)
}

/// A NetworkClass reference as the class's name (the reference itself when it names none).
async fn class_name<T: Tx + ?Sized>(tx: &mut T, class_ref: &str) -> Result<String> {
    if class_ref.is_empty() {
        return Ok(String::new());
    }
    Ok(match tx.get(class_ref).await? {
        Some(c) if c.kind == Kind::NetworkClass => c.name.unwrap_or_else(|| c.id.clone()),
        _ => class_ref.to_string(),
    })
}

/// What an attached ExternalIP is attributed to: the workload of its attachment, or the NAT
/// gateway that uses it.
async fn external_ip_user<T: Tx + ?Sized>(tx: &mut T, eip: &str) -> Result<Option<(Kind, String)>> {
    let referrers = tx.referrers(eip).await?;
    for r in &referrers {
        if r.source_kind == Kind::ExternalIpAttachment
            && let Some(att) = tx.get(&r.source).await?
            && att.deleted_at.is_none()
        {
            for field in [
                "/spec/compute_instance",
                "/spec/cluster",
                "/spec/baremetal_instance",
            ] {
                let target = text(&att.body, field);
                if !target.is_empty() {
                    let kind = match tx.get(target).await? {
                        Some(w) => w.kind,
                        None => continue,
                    };
                    return Ok(Some((kind, target.to_string())));
                }
            }
            return Ok(Some((Kind::ExternalIpAttachment, att.id)));
        }
    }
    Ok(referrers
        .into_iter()
        .find(|r| r.source_kind == Kind::NatGateway)
        .map(|r| (Kind::NatGateway, r.source)))
}

/// Expands, in a backend module, the metering statements (they are word for word the same on
/// both backends: times are integers, flags text) over its connection type.
macro_rules! metering_statements {
    (connection: $conn:ty) => {
        /// The object's open interval.
        async fn meter_open_interval(
            conn: &mut $conn,
            object_id: &str,
        ) -> crate::Result<Option<crate::metering::OpenInterval>> {
            let found: Option<crate::metering::OpenColumns> = sqlx::query_as(&format!(
                "SELECT signature, {} FROM usage_intervals WHERE object_id = $1 AND ended_us IS NULL",
                crate::metering::INTERVAL_COLUMNS
            ))
            .bind(object_id)
            .fetch_optional(&mut *conn)
            .await?;
            Ok(found.map(crate::metering::open_of))
        }

        /// The objects of metered kinds without any interval.
        async fn meter_unmetered_objects(conn: &mut $conn) -> crate::Result<Vec<crate::Record>> {
            let rows = sqlx::query(&format!(
                "SELECT {COLUMNS} FROM objects o WHERE o.kind IN ({}) \
                 AND NOT EXISTS (SELECT 1 FROM usage_intervals u WHERE u.object_id = o.id)",
                crate::metering::metered_kinds_sql()
            ))
            .fetch_all(conn)
            .await?;
            rows.iter().map(decode).collect()
        }

        /// Appends events to the outbox; an event id already there is kept as it is.
        async fn meter_append_outbox(
            conn: &mut $conn,
            events: &[crate::metering::OutboxEvent],
        ) -> crate::Result<()> {
            for chunk in events.chunks(crate::sql_common::ROWS_PER_INSERT) {
                let mut q = sqlx::QueryBuilder::new("INSERT INTO metering_outbox (event_id, subject, payload) ");
                q.push_values(chunk, |mut row, e| {
                    row.push_bind(&e.event_id).push_bind(&e.subject).push_bind(&e.payload);
                });
                q.push(" ON CONFLICT (event_id) DO NOTHING");
                q.build().execute(&mut *conn).await?;
            }
            Ok(())
        }

        async fn meter_outbox_peek(
            conn: &mut $conn,
            limit: i64,
        ) -> crate::Result<Vec<crate::metering::OutboxEntry>> {
            let rows: Vec<(i64, String, String, String)> = sqlx::query_as(
                "SELECT seq, event_id, subject, payload FROM metering_outbox ORDER BY seq LIMIT $1",
            )
            .bind(limit)
            .fetch_all(conn)
            .await?;
            Ok(rows
                .into_iter()
                .map(|(seq, event_id, subject, payload)| crate::metering::OutboxEntry {
                    seq,
                    event_id,
                    subject,
                    payload,
                })
                .collect())
        }

        async fn meter_outbox_ack(conn: &mut $conn, seqs: &[i64]) -> crate::Result<u64> {
            let mut done = 0;
            for chunk in seqs.chunks(crate::KV_CHUNK) {
                let mut q = sqlx::QueryBuilder::new("DELETE FROM metering_outbox WHERE seq IN (");
                let mut list = q.separated(", ");
                for s in chunk {
                    list.push_bind(*s);
                }
                q.push(")");
                done += q.build().execute(&mut *conn).await?.rows_affected();
            }
            Ok(done)
        }

        async fn meter_outbox_len(conn: &mut $conn) -> crate::Result<i64> {
            Ok(sqlx::query_scalar("SELECT COUNT(*) FROM metering_outbox")
                .fetch_one(conn)
                .await?)
        }

        /// Intervals overlapping `[from_us, to_us)`, of the tenant with id `tenant_id` or of
        /// all.
        async fn meter_intervals_between(
            conn: &mut $conn,
            from_us: i64,
            to_us: i64,
            tenant_id: Option<&str>,
        ) -> crate::Result<Vec<osac_model::metering::IntervalRow>> {
            let rows: Vec<crate::metering::IntervalColumns> = sqlx::query_as(&format!(
                "SELECT {} FROM usage_intervals WHERE started_us < $2 AND (ended_us IS NULL OR ended_us > $1) \
                 AND (CAST($3 AS TEXT) IS NULL OR tenant_id = $3) ORDER BY started_us, id",
                crate::metering::INTERVAL_COLUMNS
            ))
            .bind(from_us)
            .bind(to_us)
            .bind(tenant_id)
            .fetch_all(conn)
            .await?;
            Ok(rows.into_iter().map(|c| crate::metering::interval_of(c).0).collect())
        }

        /// The bandwidth rows with bytes no usage record carried yet whose `column` is one of
        /// `ids` (and that meet `condition`, an SQL condition ending in `AND`), on the partial
        /// indexes of such rows: by `object_id` alone, not by the primary key, which would read
        /// every bucket of the path.
        async fn meter_uncarried(
            conn: &mut $conn,
            condition: &str,
            column: &str,
            ids: &[&str],
        ) -> crate::Result<Vec<crate::traffic::ReportRow>> {
            let mut out = Vec::new();
            for chunk in ids.chunks(crate::KV_CHUNK) {
                let mut q = sqlx::QueryBuilder::new(
                    "SELECT kind, object_id, external_ip_id, bucket_start, ingress_bytes, egress_bytes, reported_ingress, reported_egress \
                     FROM traffic_usage WHERE (ingress_bytes <> reported_ingress OR egress_bytes <> reported_egress) AND ",
                );
                q.push(condition);
                q.push(column);
                q.push(" IN (");
                let mut list = q.separated(", ");
                for id in chunk {
                    list.push_bind(*id);
                }
                q.push(")");
                let found: Vec<(String, String, String, i64, i64, i64, i64, i64)> =
                    q.build_query_as().fetch_all(&mut *conn).await?;
                out.extend(found.into_iter().map(
                    |(kind, object_id, external_ip_id, bucket_start, i, e, ri, re)| {
                        crate::traffic::ReportRow {
                            kind,
                            object_id,
                            external_ip_id,
                            bucket_start,
                            ingress_bytes: i,
                            egress_bytes: e,
                            reported_ingress: ri,
                            reported_egress: re,
                        }
                    },
                ));
            }
            Ok(out)
        }

        /// Writes the periodic usage record of every open interval not yet recorded up to
        /// `end_us`, in the caller's transaction; returns how many. An ExternalIP's or
        /// NATGateway's record carries the bytes its bandwidth rows counted beyond what earlier
        /// records carried ([`crate::traffic::due`]), and those rows are marked carried in
        /// the same transaction.
        async fn meter_record_usage(conn: &mut $conn, end_us: i64) -> crate::Result<u64> {
            let columns: Vec<crate::metering::IntervalColumns> = sqlx::query_as(&format!(
                "SELECT {} FROM usage_intervals WHERE ended_us IS NULL AND reported_us < $1 ORDER BY id",
                crate::metering::INTERVAL_COLUMNS
            ))
            .bind(end_us)
            .fetch_all(&mut *conn)
            .await?;
            let rows: Vec<_> = columns.into_iter().map(crate::metering::interval_of).collect();
            let of_kind = |kind: osac_model::Kind| -> Vec<&str> {
                rows.iter()
                    .filter(|(r, _)| r.dims.kind == kind.to_string())
                    .map(|(r, _)| r.dims.object.as_str())
                    .collect()
            };
            let gateways = of_kind(osac_model::Kind::NatGateway);
            let addresses = of_kind(osac_model::Kind::ExternalIp);
            // Each row is read once: a gateway's path by the gateway, an attachment's by its
            // ExternalIP.
            let mut traffic = meter_uncarried(&mut *conn, "", "object_id", &gateways).await?;
            traffic.retain(|r| r.kind == crate::traffic::KIND_NAT_GATEWAY);
            let not_gateway = format!("kind <> '{}' AND ", crate::traffic::KIND_NAT_GATEWAY);
            let by_address =
                meter_uncarried(&mut *conn, &not_gateway, "external_ip_id", &addresses).await?;
            traffic.extend(by_address);
            let recording: std::collections::HashSet<&str> =
                gateways.iter().chain(&addresses).copied().collect();
            let (bytes, carried) = crate::traffic::due(&traffic, &recording);
            let mut events = Vec::with_capacity(rows.len());
            let mut ids = Vec::with_capacity(rows.len());
            for (row, reported) in &rows {
                let moved = bytes.get(&row.dims.object).copied().unwrap_or((0, 0));
                let event = crate::metering::usage_event(row, *reported, end_us, moved);
                events.push(crate::metering::OutboxEvent::from(&event));
                ids.push(row.interval_id.as_str());
            }
            meter_append_outbox(&mut *conn, &events).await?;
            for r in carried {
                sqlx::query(
                    "UPDATE traffic_usage SET reported_ingress = $4, reported_egress = $5 \
                     WHERE kind = $1 AND object_id = $2 AND bucket_start = $3",
                )
                .bind(&r.kind)
                .bind(&r.object_id)
                .bind(r.bucket_start)
                .bind(r.ingress_bytes)
                .bind(r.egress_bytes)
                .execute(&mut *conn)
                .await?;
            }
            for chunk in ids.chunks(crate::KV_CHUNK) {
                let mut q = sqlx::QueryBuilder::new("UPDATE usage_intervals SET reported_us = ");
                q.push_bind(end_us);
                q.push(" WHERE id IN (");
                let mut list = q.separated(", ");
                for id in chunk {
                    list.push_bind(*id);
                }
                q.push(")");
                q.build().execute(&mut *conn).await?;
            }
            Ok(ids.len() as u64)
        }

        /// Deletes closed intervals that ended before `before_us` (never an open one). They
        /// started before it too, which the time index finds.
        async fn meter_prune(conn: &mut $conn, before_us: i64) -> crate::Result<u64> {
            Ok(sqlx::query(
                "DELETE FROM usage_intervals WHERE started_us < $1 AND ended_us IS NOT NULL AND ended_us < $1",
            )
                .bind(before_us)
                .execute(conn)
                .await?
                .rows_affected())
        }
    };
}
pub(crate) use metering_statements;

/// Implements [`MeterTx`] for a backend transaction type whose `tx` field is its sqlx
/// transaction, with the statements of [`metering_statements!`] and the type's own
/// `known_open_interval`, `note_open_interval` and `write_interval_changes` (each backend
/// stores interval changes its own way).
macro_rules! impl_meter_tx {
    ($tx:ty) => {
        #[async_trait::async_trait]
        impl crate::metering::MeterTx for $tx {
            async fn open_interval(
                &mut self,
                object_id: &str,
            ) -> crate::Result<Option<crate::metering::OpenInterval>> {
                meter_open_interval(&mut self.tx, object_id).await
            }
            fn known_open(&self, object_id: &str) -> Option<Option<crate::metering::OpenInterval>> {
                self.known_open_interval(object_id)
            }
            fn note_open(&mut self, object_id: &str, open: Option<crate::metering::OpenInterval>) {
                self.note_open_interval(object_id, open)
            }
            async fn write_intervals(
                &mut self,
                object_id: &str,
                writes: crate::metering::IntervalWrites,
            ) -> crate::Result<()> {
                self.write_interval_changes(object_id, writes).await
            }
            async fn unmetered_objects(&mut self) -> crate::Result<Vec<crate::Record>> {
                meter_unmetered_objects(&mut self.tx).await
            }
        }
    };
}
pub(crate) use impl_meter_tx;

/// The periodic usage record of an interval from its last record (`reported_us`) to `end_us`,
/// carrying `bytes` (ingress, egress): what the interval's object moved since its last record
/// (ExternalIPs and NAT gateways, which traffic goes through; the other kinds move none).
pub(crate) fn usage_event(
    row: &IntervalRow,
    reported_us: i64,
    end_us: i64,
    bytes: (i64, i64),
) -> CloudEvent {
    let collection = row
        .dims
        .kind
        .parse::<Kind>()
        .map(|k| k.collection())
        .unwrap_or("objects");
    CloudEvent::usage(
        &row.interval_id,
        collection,
        &row.dims,
        from_us(reported_us),
        from_us(end_us),
        bytes.0,
        bytes.1,
    )
}

/// Whether a write set leaves every interval as it is, judged from the stored records
/// `cached` knows (None: unknown): for write paths that do not run through a [`Tx`] (the
/// PostgreSQL status-write statements), which may only take a set that meters nothing.
pub(crate) fn keeps_intervals(
    set: &crate::WriteSet,
    cached: impl Fn(&str) -> Option<Record>,
) -> bool {
    !metering_on()
        || set.writes.iter().all(|w| match w {
            crate::Write::Update(new) | crate::Write::Insert(new)
                if metering::metered(new.kind) =>
            {
                let sig = |r: &Record| signature(r.kind, &r.body, r.deleted_at.is_some());
                match (w, cached(&new.id)) {
                    (crate::Write::Insert(_), _) => sig(new).is_none(),
                    (_, Some(old)) if old.version == new.version => sig(&old) == sig(new),
                    _ => false,
                }
            }
            _ => true,
        })
}

/// The id of the tenant currently named `name` (its Tenant object's, also while it is being
/// deleted), or None when no tenant has that name.
pub async fn tenant_id(store: &dyn crate::Store, name: &str) -> Result<Option<String>> {
    // Tenant names are DNS labels: a name with a quote or backslash names no tenant.
    if name.is_empty() || name.contains(['"', '\\']) {
        return Ok(None);
    }
    let page = store
        .list(&crate::ListQuery {
            tenant: Some(String::new()),
            filter: format!("this.metadata.name == \"{name}\""),
            limit: 2,
            ..crate::ListQuery::all(Kind::Tenant)
        })
        .await?;
    Ok(page
        .items
        .into_iter()
        .find(|r| r.name.as_deref() == Some(name))
        .map(|r| r.id))
}
