//! Metering exactness through the API on the sim fabric: objects created and deleted at known
//! times accrue the resource-seconds between them (within 1 s), an ExternalIP attached half
//! its life has two intervals with the right `attached` dimension, the outbox holds one
//! CloudEvent per interval opened and closed, and a tenant reads only its own usage.

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use crate::both_backends;
use crate::common::*;

both_backends!(allocation_is_exact);

fn rfc(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn secs(a: DateTime<Utc>, b: DateTime<Utc>) -> f64 {
    (b - a).num_microseconds().unwrap_or(0) as f64 / 1e6
}

/// The groups of a usage answer, by their dimension values joined with `/`.
fn seconds_by(answer: &Value) -> Vec<(String, i64)> {
    answer["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            let dims: Vec<&str> = g["dimensions"]
                .as_object()
                .expect("dimensions")
                .values()
                .filter_map(Value::as_str)
                .collect();
            let n = g["resource_seconds"].as_str().expect("int64 as string");
            (dims.join("/"), n.parse().expect("integer"))
        })
        .collect()
}

fn seconds_of(answer: &Value, key: &str) -> i64 {
    seconds_by(answer)
        .into_iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("no group {key} in {answer}"))
        .1
}

/// `got` lies within 1 s of the interval [lo, hi] the measurements allow.
fn within(got: i64, lo: f64, hi: f64, what: &str) {
    assert!(
        (got as f64) >= lo - 1.0 && (got as f64) <= hi + 1.0,
        "{what}: {got} s, measured between {lo:.3} and {hi:.3} s"
    );
}

async fn allocation_is_exact(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let t = s.tenant("acme").await;
    let start = Utc::now();

    // A VirtualNetwork that lives about 2 s.
    let t0 = Utc::now();
    let vn = t.ready_vn("metered", "10.40.0.0/16").await;
    let t1 = Utc::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let t2 = Utc::now();
    t.delete(&format!("{PUB}/virtual_networks/{}", id(&vn)))
        .await
        .ok();
    let t3 = Utc::now();
    t.wait_gone(PUB, "virtual_networks", &id(&vn)).await;

    // An ExternalIP unattached for about 2 s, then used by a NAT gateway for about 2 s.
    let nat_net = t.ready_vn("nat-net", "10.41.0.0/16").await;
    let eip = t.allocated_eip("metered-ip", "").await;
    let e1 = Utc::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let a0 = Utc::now();
    t.create(
        "nat_gateways",
        json!({"metadata": {"name": "gw"}, "spec": {"virtual_network": id(&nat_net), "external_ip": id(&eip)}}),
    )
    .await;
    t.wait_until(
        &format!("{PUB}/external_ips/{}", id(&eip)),
        "attached",
        |o| o["status"]["attached"] == true,
    )
    .await;
    let a1 = Utc::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let e2 = Utc::now();

    // The VN: from READY to the deletion request.
    let q = format!(
        "{PUB}/usage?from={}&to={}&group_by=object",
        rfc(start),
        rfc(e2)
    );
    let answer = t.get(&q.replace('+', "%2B")).await.ok();
    within(
        seconds_of(&answer, &id(&vn)),
        secs(t1, t2),
        secs(t0, t3),
        "VirtualNetwork",
    );

    // The ExternalIP over [e1, e2): unattached until the attachment, attached after.
    let q = format!(
        "{PUB}/usage?from={}&to={}&group_by=object,attached&meter=allocation",
        rfc(e1),
        rfc(e2)
    );
    let answer = t.get(&q).await.ok();
    assert_eq!(answer["meter"], "allocation");
    within(
        seconds_of(&answer, &format!("false/{}", id(&eip))),
        secs(e1, a0),
        secs(e1, a1),
        "ExternalIP unattached",
    );
    within(
        seconds_of(&answer, &format!("true/{}", id(&eip))),
        secs(a1, e2),
        secs(a0, e2),
        "ExternalIP attached",
    );
    let again = t.get(&q).await.ok();
    assert_eq!(answer, again, "a closed period answers the same every time");
    let rows = s
        .store()
        .usage_intervals(start, e2, None)
        .await
        .expect("intervals");
    let eip_rows: Vec<_> = rows.iter().filter(|r| r.dims.object == id(&eip)).collect();
    assert_eq!(eip_rows.len(), 2, "{eip_rows:?}");
    assert_eq!(
        (
            eip_rows[0].dims.attached.as_str(),
            eip_rows[1].dims.attached.as_str()
        ),
        ("false", "true")
    );
    assert_eq!(eip_rows[1].dims.parent_kind, "NATGateway");

    // The outbox: one event per interval opened and closed, ids unique.
    let outbox = s.store().outbox_peek(1_000_000).await.expect("outbox");
    let ids: Vec<&str> = outbox.iter().map(|e| e.event_id.as_str()).collect();
    let unique: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "event ids are unique");
    let all = s
        .store()
        .usage_intervals(
            start - chrono::Duration::hours(1),
            Utc::now() + chrono::Duration::hours(1),
            None,
        )
        .await
        .expect("intervals");
    for r in &all {
        assert!(
            unique.contains(format!("{}.opened", r.interval_id).as_str()),
            "{} opened",
            r.interval_id
        );
        assert_eq!(
            unique.contains(format!("{}.closed", r.interval_id).as_str()),
            r.ended_at.is_some(),
            "{} closed",
            r.interval_id
        );
    }
    let opened_or_closed = ids
        .iter()
        .filter(|i| i.ends_with(".opened") || i.ends_with(".closed"))
        .count();
    let expected = all.len() + all.iter().filter(|r| r.ended_at.is_some()).count();
    assert_eq!(opened_or_closed, expected, "nothing else and nothing twice");

    // Tenancy: another tenant sees none of acme's usage, even naming it.
    let globex = s.tenant("globex").await;
    let q = format!(
        "{PUB}/usage?from={}&to={}&group_by=object",
        rfc(start),
        rfc(e2)
    );
    let theirs = globex.get(&q).await.ok();
    assert!(
        !seconds_by(&theirs)
            .iter()
            .any(|(k, _)| *k == id(&vn) || *k == id(&eip)),
        "{theirs}"
    );
    globex
        .get(&format!("{q}&tenant=acme"))
        .await
        .err(403, "PERMISSION_DENIED", &["tenant"]);
    // The provider reads any tenant's.
    let provider = s
        .admin
        .get(&format!(
            "{PRIV}/usage?from={}&to={}&group_by=tenant,object&tenant=acme",
            rfc(start),
            rfc(e2)
        ))
        .await
        .ok();
    assert!(
        seconds_by(&provider)
            .iter()
            .any(|(k, _)| *k == format!("{}/acme", id(&vn))),
        "{provider}"
    );
    // Bad parameters name themselves.
    t.get(&format!("{PUB}/usage?group_by=colour")).await.err(
        400,
        "INVALID_ARGUMENT",
        &["group_by"],
    );
    t.get(&format!("{PUB}/usage?meter=bytes"))
        .await
        .err(400, "INVALID_ARGUMENT", &["meter"]);
    t.get(&format!("{PUB}/usage?from=yesterday"))
        .await
        .err(400, "INVALID_ARGUMENT", &["from"]);
    s.finish().await;
}
