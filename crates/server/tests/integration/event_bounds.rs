//! Refused requests and busy tenants cannot write events without bound: a tenant at its quota
//! sends hundreds of creates (all 429), and a tenant producing many events is trimmed to its
//! cap.
//!
//! Rules under attack and how removing each made these tests fail (checked once):
//! - Refusal events are coalesced per tenant, reason and quota (`Service::record_refusal`,
//!   crates/api/src/refusals.rs). With `admit` returning Some for every refusal, 500 refused
//!   creates wrote 500 `QuotaExceeded` events (the assertion "at most 2" failed).
//! - Each tenant keeps at most `--max-events-per-tenant` events (`events::trim`, run by the
//!   pruner on every pass). With `trim_tenant` returning without removing, acme kept all 60.

use osac_model::Kind;
use osac_store::events::{NewEvent, record_now, trim};
use serde_json::json;

use crate::both_backends;
use crate::common::*;

both_backends!(
    refused_creates_write_a_bounded_number_of_events,
    a_tenants_events_stay_under_its_cap
);

async fn refused_creates_write_a_bounded_number_of_events(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    // The default network takes the only VirtualNetwork the tenant may have.
    s.admin
        .post(
            &format!("{PRIV}/tenants"),
            json!({"metadata": {"name": "acme"}, "spec": {"quotas": {"virtual_networks": 1}}}),
        )
        .await
        .ok();
    let acme = s.client_for("acme", "tenant-admin").await;
    // Five waves of 100 concurrent creates: one client address holds at most
    // `--max-connections-per-address` connections (256 by default).
    let mut refused = Vec::new();
    for wave in 0..5 {
        refused.extend(
            futures::future::join_all((0..100).map(|i| {
                let acme = &acme;
                async move {
                    acme.post(
                        &format!("{PUB}/virtual_networks"),
                        json!({"metadata": {"name": format!("over-{wave}-{i}")},
                               "spec": {"ipv4_cidr": "10.50.0.0/16"}}),
                    )
                    .await
                    .status
                }
            }))
            .await,
        );
    }
    assert!(refused.iter().all(|s| *s == 429), "{refused:?}");
    let events = acme
        .list(
            "events",
            &[("filter", "this.spec.reason == \"QuotaExceeded\"")],
        )
        .await
        .ok();
    let total = events["total"].as_i64().unwrap_or(0);
    assert!(
        (1..=2).contains(&total),
        "500 refused creates wrote {total} QuotaExceeded events"
    );
    assert!(
        events["items"][0]["spec"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("quota virtual_networks of tenant 'acme' exceeded"),
        "{events}"
    );
    s.finish().await;
}

async fn a_tenants_events_stay_under_its_cap(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let acme = s.tenant("acme").await;
    let quiet = s.tenant("quiet").await;
    for t in ["acme", "quiet"] {
        s.admin
            .wait_for_state(PRIV, "tenants", t, "TENANT_STATE_READY")
            .await;
    }
    let store = s.store();
    for i in 0..60 {
        let ev = NewEvent::normal(
            "acme",
            Kind::VirtualNetwork,
            "",
            "net",
            "Noise",
            format!("noise {i:02}"),
        );
        record_now(&*store, ev).await;
    }
    let quiet_before = quiet.list("events", &[]).await.ok()["total"].as_i64();
    // Above what a tenant's onboarding writes, below acme's noise plus that.
    let cap = 40;
    trim(&*store, cap).await.expect("trim");
    let events = acme.list("events", &[("limit", "1000")]).await.ok();
    let total = events["total"].as_i64().unwrap_or(0);
    assert!(
        total <= cap as i64,
        "acme kept {total} events over its cap of {cap}"
    );
    let messages: Vec<&str> = events["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|e| e["spec"]["message"].as_str())
        .collect();
    assert!(
        messages.contains(&"noise 59"),
        "the newest stay: {messages:?}"
    );
    assert!(
        !messages.contains(&"noise 00"),
        "the oldest go: {messages:?}"
    );
    let quiet_after = quiet.list("events", &[]).await.ok()["total"].as_i64();
    assert_eq!(
        quiet_before, quiet_after,
        "a tenant under its cap keeps all"
    );
    s.finish().await;
}
