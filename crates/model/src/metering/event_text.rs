//! The interval events' outbox form — id, subject and structured-mode text — written straight
//! from borrowed values: every metered write that opens or closes an interval renders its
//! events inside the store's write transaction, so no JSON document is built first. The text
//! is the one [`CloudEvent::to_text`](super::CloudEvent::to_text) gives for the same event
//! (keys sorted, as a JSON object writes them), which the tests check. The fields of the
//! events' `data` are defined here once, for both.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Dimensions;
use super::cloudevent::{
    Closing, EventAction, SOURCE, TYPE_ALLOCATION, event_id, rfc3339, seconds_text,
};

/// One event as the outbox stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventText {
    /// The CloudEvent's `id`.
    pub id: String,
    /// The CloudEvent's `subject`.
    pub subject: String,
    /// The complete structured-mode JSON.
    pub payload: String,
}

/// [`CloudEvent::opened`](super::CloudEvent::opened), as outbox text.
pub fn opened(
    interval_id: &str,
    collection: &str,
    dims: &Dimensions,
    started_at: DateTime<Utc>,
) -> EventText {
    let data = opened_data(interval_id, dims, started_at);
    let action = EventAction::Opened;
    render(interval_id, collection, dims, action, started_at, &data)
}

/// [`CloudEvent::closed`](super::CloudEvent::closed), as outbox text.
pub fn closed(
    interval_id: &str,
    collection: &str,
    dims: &Dimensions,
    started_at: DateTime<Utc>,
    closing: &Closing,
) -> EventText {
    let data = closed_data(interval_id, dims, started_at, closing);
    let (action, time) = (EventAction::Closed, closing.ended_at);
    render(interval_id, collection, dims, action, time, &data)
}

/// The `data` of an interval's opening event (the one definition of its fields).
pub(super) fn opened_data<'a>(
    interval_id: &'a str,
    dims: &'a Dimensions,
    started_at: DateTime<Utc>,
) -> OpenedData<'a> {
    OpenedData {
        action: "opened",
        dimensions: DimensionsWire::of(dims),
        interval: interval_id,
        started_at: rfc3339(started_at),
    }
}

/// The `data` of an interval's closing event, with its resource-seconds.
pub(super) fn closed_data<'a>(
    interval_id: &'a str,
    dims: &'a Dimensions,
    started_at: DateTime<Utc>,
    closing: &'a Closing,
) -> ClosedData<'a> {
    let micros = (closing.ended_at - started_at)
        .num_microseconds()
        .unwrap_or(0);
    ClosedData {
        action: "closed",
        dimensions: DimensionsWire::of(dims),
        ended_at: rfc3339(closing.ended_at),
        interval: interval_id,
        reason: &closing.reason,
        resource_seconds: seconds_text(micros),
        started_at: rfc3339(started_at),
    }
}

fn render<D: Serialize>(
    interval_id: &str,
    collection: &str,
    dims: &Dimensions,
    action: EventAction,
    time: DateTime<Utc>,
    data: &D,
) -> EventText {
    let id = event_id(interval_id, action);
    let subject = format!("{collection}/{}", dims.object);
    let wire = Envelope {
        data,
        datacontenttype: "application/json",
        id: &id,
        source: SOURCE,
        specversion: "1.0",
        subject: &subject,
        time: rfc3339(time),
        type_: TYPE_ALLOCATION,
    };
    // Strings and integers written to a String: serializing cannot fail.
    let payload = serde_json::to_string(&wire).unwrap_or_default();
    EventText {
        id,
        subject,
        payload,
    }
}

/// The structured-mode envelope; fields in sorted order, as a JSON object writes its keys.
#[derive(Serialize)]
struct Envelope<'a, D> {
    data: &'a D,
    datacontenttype: &'static str,
    id: &'a str,
    source: &'static str,
    specversion: &'static str,
    subject: &'a str,
    time: String,
    #[serde(rename = "type")]
    type_: &'static str,
}

#[derive(Serialize)]
pub(super) struct OpenedData<'a> {
    action: &'static str,
    dimensions: DimensionsWire<'a>,
    interval: &'a str,
    started_at: String,
}

#[derive(Serialize)]
pub(super) struct ClosedData<'a> {
    action: &'static str,
    dimensions: DimensionsWire<'a>,
    ended_at: String,
    interval: &'a str,
    reason: &'a str,
    resource_seconds: String,
    started_at: String,
}

/// An event's `data.dimensions`, keys sorted.
#[derive(Serialize)]
pub(super) struct DimensionsWire<'a> {
    attached: &'a str,
    ip_family: &'a str,
    kind: &'a str,
    network_class: &'a str,
    object: &'a str,
    object_name: &'a str,
    parent: &'a str,
    parent_kind: &'a str,
    tenant: &'a str,
    tenant_id: &'a str,
}

impl<'a> DimensionsWire<'a> {
    pub(super) fn of(d: &'a Dimensions) -> Self {
        DimensionsWire {
            attached: &d.attached,
            ip_family: &d.ip_family,
            kind: &d.kind,
            network_class: &d.network_class,
            object: &d.object,
            object_name: &d.object_name,
            parent: &d.parent,
            parent_kind: &d.parent_kind,
            tenant: &d.tenant,
            tenant_id: &d.tenant_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metering::CloudEvent;
    use chrono::TimeZone;

    fn dims() -> Dimensions {
        Dimensions {
            tenant: "acme \"corp\"\n".into(),
            tenant_id: "t-1".into(),
            kind: "ExternalIP".into(),
            object: "eip-1".into(),
            object_name: "web\u{1F600}".into(),
            network_class: "default".into(),
            ip_family: "ipv4".into(),
            attached: "true".into(),
            parent_kind: "ComputeInstance".into(),
            parent: "ci-9".into(),
        }
    }

    /// The text is the event's, byte for byte, whatever the strings hold (quotes, control
    /// characters, characters outside the BMP).
    #[test]
    fn texts_are_the_events_own() {
        let start = Utc
            .timestamp_micros(1_700_000_000_123_456)
            .single()
            .unwrap_or_default();
        let closing = Closing {
            ended_at: start + chrono::Duration::microseconds(2_500_001),
            reason: "dimension_changed".into(),
        };
        let d = dims();
        let event = CloudEvent::opened("eip-1.7", "external_ips", &d, start);
        let text = opened("eip-1.7", "external_ips", &d, start);
        assert_eq!(text.payload, event.to_text());
        assert_eq!((text.id, text.subject), (event.id, event.subject));
        let event = CloudEvent::closed("eip-1.7", "external_ips", &d, start, &closing);
        let text = closed("eip-1.7", "external_ips", &d, start, &closing);
        assert_eq!(text.payload, event.to_text());
        assert_eq!((text.id, text.subject), (event.id, event.subject));
    }
}
