//! CloudEvents 1.0 (structured JSON mode) of metering: one when an interval opens, one when it
//! closes, and a periodic usage record per open interval. The `id` is derived from the
//! interval and what happened to it, so a record written twice (a retry, a failover) carries
//! the same id and a consumer (or JetStream's deduplication) keeps it once.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use super::{Dimensions, event_text};

/// The `source` of every metering event.
pub const SOURCE: &str = "/osac-net/metering";
/// The `type` of interval events (`data.action` says which).
pub const TYPE_ALLOCATION: &str = "org.osac.metering.networking.v1.allocation";
/// The `type` of periodic usage records.
pub const TYPE_USAGE: &str = "org.osac.metering.networking.v1.usage";

/// What an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventAction {
    /// The interval opened: the object started accruing.
    Opened,
    /// The interval closed.
    Closed,
    /// A periodic usage record of an open interval, ending at the given time.
    Usage(DateTime<Utc>),
}

/// One CloudEvent.
#[derive(Debug, Clone, PartialEq)]
pub struct CloudEvent {
    pub id: String,
    pub source: String,
    pub type_: String,
    /// The object: `<collection>/<id>`, e.g. `external_ips/0190…`.
    pub subject: String,
    pub time: DateTime<Utc>,
    pub data: Value,
}

/// RFC 3339 with microseconds, UTC.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// The event id of `action` on interval `interval_id`.
pub fn event_id(interval_id: &str, action: EventAction) -> String {
    match action {
        EventAction::Opened => format!("{interval_id}.opened"),
        EventAction::Closed => format!("{interval_id}.closed"),
        EventAction::Usage(end) => format!("{interval_id}.usage.{}", end.timestamp_micros()),
    }
}

fn dimensions_json(d: &Dimensions) -> Value {
    value(&event_text::DimensionsWire::of(d))
}

/// A serializable value of strings as a JSON document (this cannot fail).
fn value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or_default()
}

/// How an interval ended, for its closing event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closing {
    pub ended_at: DateTime<Utc>,
    /// `deleted` (deletion requested), `dimension_changed` or `not_ready`.
    pub reason: String,
}

impl CloudEvent {
    /// The event of an interval opening at `started_at`.
    pub fn opened(
        interval_id: &str,
        collection: &str,
        dims: &Dimensions,
        started_at: DateTime<Utc>,
    ) -> Self {
        let data = event_text::opened_data(interval_id, dims, started_at);
        let action = EventAction::Opened;
        Self::allocation(
            interval_id,
            collection,
            dims,
            action,
            started_at,
            value(&data),
        )
    }

    /// The event of an interval closing; carries its resource-seconds.
    pub fn closed(
        interval_id: &str,
        collection: &str,
        dims: &Dimensions,
        started_at: DateTime<Utc>,
        closing: &Closing,
    ) -> Self {
        let data = event_text::closed_data(interval_id, dims, started_at, closing);
        let (action, time) = (EventAction::Closed, closing.ended_at);
        Self::allocation(interval_id, collection, dims, action, time, value(&data))
    }

    /// The periodic usage record of an open interval over `[from, to)`, with the bytes moved
    /// meanwhile where the object has bandwidth meters.
    #[allow(clippy::too_many_arguments)]
    pub fn usage(
        interval_id: &str,
        collection: &str,
        dims: &Dimensions,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        ingress_bytes: i64,
        egress_bytes: i64,
    ) -> Self {
        let micros = (to - from).num_microseconds().unwrap_or(0).max(0);
        CloudEvent {
            id: event_id(interval_id, EventAction::Usage(to)),
            source: SOURCE.into(),
            type_: TYPE_USAGE.into(),
            subject: format!("{collection}/{}", dims.object),
            time: to,
            data: json!({
                "interval": interval_id,
                "from": rfc3339(from),
                "to": rfc3339(to),
                "resource_seconds": seconds_text(micros),
                "ingress_bytes": ingress_bytes.to_string(),
                "egress_bytes": egress_bytes.to_string(),
                "dimensions": dimensions_json(dims),
            }),
        }
    }

    fn allocation(
        interval_id: &str,
        collection: &str,
        dims: &Dimensions,
        action: EventAction,
        time: DateTime<Utc>,
        data: Value,
    ) -> Self {
        CloudEvent {
            id: event_id(interval_id, action),
            source: SOURCE.into(),
            type_: TYPE_ALLOCATION.into(),
            subject: format!("{collection}/{}", dims.object),
            time,
            data,
        }
    }

    /// The structured-mode JSON document.
    pub fn to_json(&self) -> Value {
        json!({
            "specversion": "1.0",
            "id": self.id,
            "source": self.source,
            "type": self.type_,
            "subject": self.subject,
            "time": rfc3339(self.time),
            "datacontenttype": "application/json",
            "data": self.data,
        })
    }

    /// [`CloudEvent::to_json`] as text (the outbox payload), written from the event without
    /// building the document first: every metered write renders its events.
    pub fn to_text(&self) -> String {
        let wire = Structured {
            data: &self.data,
            datacontenttype: "application/json",
            id: &self.id,
            source: &self.source,
            specversion: "1.0",
            subject: &self.subject,
            time: rfc3339(self.time),
            type_: &self.type_,
        };
        // Writing strings and a JSON value to a String does not fail.
        serde_json::to_string(&wire).unwrap_or_else(|_| self.to_json().to_string())
    }
}

/// The structured-mode document, borrowed from its event; fields in the order
/// [`CloudEvent::to_json`] writes its keys (sorted), so both give the same text.
#[derive(serde::Serialize)]
struct Structured<'a> {
    data: &'a Value,
    datacontenttype: &'static str,
    id: &'a str,
    source: &'a str,
    specversion: &'static str,
    subject: &'a str,
    time: String,
    #[serde(rename = "type")]
    type_: &'a str,
}

/// Microseconds as decimal seconds text (`"12.500000"`): exact, int64-safe.
pub fn seconds_text(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let m = micros.unsigned_abs();
    format!("{sign}{}.{:06}", m / 1_000_000, m % 1_000_000)
}
