//! Events: recorded with the writes they describe, scoped to the tenant, read-only through the
//! API, warnings for failures, and pruned after their TTL.

use std::time::Duration;

use chrono::Utc;
use osac_backends::{FailureKind, Operation};
use osac_model::Kind;
use serde_json::{Value, json};

use crate::both_backends;
use crate::common::*;

/// The events of one object, in creation order.
async fn events_for(api: &Api, object_id: &str) -> Vec<Value> {
    let filter = format!("this.spec.object_id == \"{object_id}\"");
    let r = api.list("events", &[("filter", &filter)]).await.ok();
    r["items"].as_array().cloned().unwrap_or_default()
}

fn reasons(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["spec"]["reason"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Polls until the object's events include `reason`; returns them all.
async fn wait_for_reason(api: &Api, object_id: &str, reason: &str) -> Vec<Value> {
    let start = std::time::Instant::now();
    loop {
        let events = events_for(api, object_id).await;
        if reasons(&events).iter().any(|r| r == reason) {
            return events;
        }
        assert!(
            start.elapsed() < WAIT,
            "no {reason} event for {object_id}; got {:?}",
            reasons(&events)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

both_backends!(
    subnet_lifecycle_is_recorded,
    events_are_pruned_after_their_ttl
);

async fn subnet_lifecycle_is_recorded(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let t = s.tenant("acme").await;
    let other = s.tenant("globex").await;
    t.ready_vn("net", "10.0.0.0/16").await;
    let subnet = t.ready_subnet("web", "net", "10.0.1.0/24").await;
    let sid = id(&subnet);

    let events = wait_for_reason(&t, &sid, "Ready").await;
    let rs = reasons(&events);
    assert_eq!(rs.first().map(String::as_str), Some("Created"), "{rs:?}");
    let created = rs.iter().position(|r| r == "Created");
    let ready = rs.iter().position(|r| r == "Ready");
    assert!(created < ready, "Created before Ready: {rs:?}");
    let ev = &events[ready.unwrap_or_default()];
    assert_eq!(ev["spec"]["object_kind"], "Subnet");
    assert_eq!(ev["spec"]["object_name"], "web");
    assert_eq!(ev["spec"]["type"], "EVENT_TYPE_NORMAL");
    assert_eq!(ev["metadata"]["tenant"], "acme");
    assert!(
        ev["spec"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("READY"),
        "{ev}"
    );

    // Another tenant sees none of them, not even by id; the provider sees them all.
    assert!(events_for(&other, &sid).await.is_empty());
    let ev_id = id(ev);
    other
        .get(&format!("{PUB}/events/{ev_id}"))
        .await
        .err(404, "NOT_FOUND", &[]);
    t.get(&format!("{PUB}/events/{ev_id}")).await.ok();
    assert_eq!(events_for(&s.admin, &sid).await.len(), events.len());

    // Read-only: no create, update or delete.
    t.post(
        &format!("{PUB}/events"),
        json!({"spec": {"object_id": sid, "reason": "Fake"}}),
    )
    .await
    .err(405, "METHOD_NOT_ALLOWED", &[]);
    t.patch(
        &format!("{PUB}/events/{ev_id}"),
        json!({"spec": {"message": "changed"}}),
    )
    .await
    .err(405, "METHOD_NOT_ALLOWED", &[]);
    t.delete(&format!("{PUB}/events/{ev_id}"))
        .await
        .err(405, "METHOD_NOT_ALLOWED", &[]);

    // Deletion: Deleting when requested, Deleted when the row is gone.
    t.delete(&format!("{PUB}/subnets/web")).await.ok();
    t.wait_gone(PUB, "subnets", &sid).await;
    let rs = reasons(&wait_for_reason(&t, &sid, "Deleted").await);
    let deleting = rs.iter().position(|r| r == "Deleting");
    let deleted = rs.iter().position(|r| r == "Deleted");
    assert!(
        deleting.is_some() && deleting < deleted,
        "Deleting before Deleted: {rs:?}"
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_state_is_a_warning() {
    let mut s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    t.ready_vn("net", "10.0.0.0/16").await;
    let mut ctl = s.pause().await;
    let subnet = t
        .create("subnets", subnet_body("bad", "net", "10.0.1.0/24"))
        .await;
    let sid = id(&subnet);
    ctl.sim_fabric().inject_failure(
        Operation::CreateSubnet,
        &sid,
        u32::MAX,
        FailureKind::Permanent,
    );
    ctl.run();
    t.wait("subnets", &sid, "SUBNET_STATE_FAILED").await;
    let events = wait_for_reason(&t, &sid, "Failed").await;
    let failed = events
        .iter()
        .find(|e| e["spec"]["reason"] == "Failed")
        .expect("a Failed event");
    assert_eq!(failed["spec"]["type"], "EVENT_TYPE_WARNING", "{failed}");
    assert!(
        failed["spec"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("injected"),
        "the failure's message: {failed}"
    );
    // Warnings can be selected by type, by name or by number.
    for filter in [
        format!("this.spec.object_id == \"{sid}\" && this.spec.type == \"EVENT_TYPE_WARNING\""),
        format!("this.spec.object_id == \"{sid}\" && this.spec.type == 2"),
    ] {
        let r = t.list("events", &[("filter", &filter)]).await.ok();
        assert_eq!(r["total"], 1, "{filter}: {r}");
    }
    ctl.stop().await;
    s.finish().await;
}

async fn events_are_pruned_after_their_ttl(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let t = s.tenant("acme").await;
    let store = s.store();
    let old = osac_store::events::NewEvent::normal("acme", Kind::Subnet, "s-old", "x", "Ready", "");
    let fresh =
        osac_store::events::NewEvent::normal("acme", Kind::Subnet, "s-new", "y", "Ready", "");
    let mut tx = store.begin().await.expect("begin");
    for (ev, age) in [(old, Duration::from_secs(7200)), (fresh, Duration::ZERO)] {
        let mut rec = ev.to_record();
        rec.created_at = Utc::now() - chrono::Duration::from_std(age).expect("age");
        tx.insert(&rec).await.expect("insert");
    }
    tx.commit().await.expect("commit");
    assert_eq!(events_for(&t, "s-old").await.len(), 1);

    let removed = osac_store::events::prune(&*store, Duration::from_secs(3600), 1)
        .await
        .expect("prune");
    assert_eq!(removed, 1, "exactly the expired event is removed");
    assert!(
        events_for(&t, "s-old").await.is_empty(),
        "expired event gone"
    );
    assert_eq!(events_for(&t, "s-new").await.len(), 1, "fresh event kept");
    s.finish().await;
}
