//! The metering export end to end: a server on the sim fabric publishes its store's outbox to
//! a nats-server of the test's own; the broker is stopped for 30 s while 500 creates and
//! deletes go through the API, then started again. Every interval the store opened and closed
//! reaches the stream as its CloudEvent exactly once (ids unique, none missing).

#[allow(dead_code)]
#[path = "../../../metering-export/tests/jetstream/nats.rs"]
mod nats;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use chrono::Utc;
use osac_metering_export::ExportConfig;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::common::*;

const STREAM: &str = "OSAC_METERING_E2E";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_interval_reaches_the_stream_once_across_a_30s_outage() {
    if !std::path::Path::new(nats::NATS_SERVER).exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} missing (package nats-server; .ci/run installs it)",
            nats::NATS_SERVER
        );
        return;
    }
    let mut broker = nats::NatsServer::start().await;
    let s = TestServer::sqlite().await;
    let start = Utc::now();
    let (stop_export, shutdown) = watch::channel(false);
    let config = ExportConfig {
        stream: STREAM.into(),
        poll_interval: Duration::from_millis(100),
        backoff_max: Duration::from_secs(1),
        ..ExportConfig::new(broker.url())
    };
    let export = osac_server::metering::start_export(s.store(), config, shutdown)
        .expect("the export starts");

    let t = s.tenant("acme").await;
    // 250 VNs created and deleted (500 requests), in batches under the tenant's VN quota:
    // the first batch is READY before the outage, the rest live and die during it.
    let first = create_vns(&t, 0..25).await;

    broker.stop().await;
    let stopped = Instant::now();
    delete_vns(&t, &first).await;
    for batch in 1..10 {
        let vns = create_vns(&t, batch * 25..(batch + 1) * 25).await;
        delete_vns(&t, &vns).await;
    }
    let outage = Duration::from_secs(30).saturating_sub(stopped.elapsed());
    tokio::time::sleep(outage).await;
    assert!(
        s.store().outbox_len().await.expect("outbox") > 0,
        "the records wait in the outbox while the broker is down"
    );
    broker.restart().await;

    let deadline = Instant::now() + Duration::from_secs(60);
    while s.store().outbox_len().await.expect("outbox") > 0 {
        assert!(Instant::now() < deadline, "the outbox was not drained");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop_export.send(true).ok();
    export.await.ok();

    let got = nats::read_stream(&broker.jetstream().await, STREAM).await;
    let ids: Vec<&str> = got.iter().map(|m| m.msg_id.as_str()).collect();
    let unique: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "every record arrives once");
    for m in &got {
        let event: Value = serde_json::from_str(&m.payload).expect("a CloudEvent");
        assert_eq!(event["id"], m.msg_id, "the message id is the CloudEvent id");
        assert_eq!(event["specversion"], "1.0");
    }

    let intervals = s
        .store()
        .usage_intervals(start, Utc::now() + chrono::Duration::seconds(1), None)
        .await
        .expect("intervals");
    let vn_intervals = intervals
        .iter()
        .filter(|r| r.dims.kind == "VirtualNetwork" && r.dims.object_name.starts_with("e2e-"))
        .count();
    assert_eq!(vn_intervals, 250, "each VN accrued in one interval");
    for row in &intervals {
        let opened = format!("{}.opened", row.interval_id);
        assert!(unique.contains(opened.as_str()), "{opened} missing");
        if row.ended_at.is_some() {
            let closed = format!("{}.closed", row.interval_id);
            assert!(unique.contains(closed.as_str()), "{closed} missing");
        }
    }
    s.finish().await;
}

/// Deletes the VNs and waits until they are gone (their intervals closed).
async fn delete_vns(t: &Api, vns: &[Value]) {
    for vn in vns {
        t.delete(&format!("{PUB}/virtual_networks/{}", id(vn)))
            .await
            .ok();
    }
    for vn in vns {
        t.wait_gone(PUB, "virtual_networks", &id(vn)).await;
    }
}

/// Creates the VNs `e2e-<n>` and waits until each is READY (its interval is open).
async fn create_vns(t: &Api, range: std::ops::Range<usize>) -> Vec<Value> {
    let mut vns = Vec::with_capacity(range.len());
    for n in range {
        let cidr = format!("10.{}.{}.0/24", 100 + n / 256, n % 256);
        vns.push(
            t.create(
                "virtual_networks",
                json!({"metadata": {"name": format!("e2e-{n}")}, "spec": {"ipv4_cidr": cidr}}),
            )
            .await,
        );
    }
    for vn in &vns {
        t.wait_until(
            &format!("{PUB}/virtual_networks/{}", id(vn)),
            "READY",
            |o| o["status"]["state"] == "VIRTUAL_NETWORK_STATE_READY",
        )
        .await;
    }
    vns
}
