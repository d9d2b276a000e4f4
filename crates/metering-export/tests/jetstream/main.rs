//! The export against a real nats-server (one per test, on a free port, with its own store):
//! every outbox record reaches the stream once, in order, across a broker outage and a
//! re-publication.

mod nats;
mod support;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use osac_metering_export::{
    CONTENT_TYPE, ExportMetrics, Exporter, InMemoryOutbox, OutboxEntry, OutboxSource, SourceError,
};
use support::{Logs, NatsServer, append, config, drained, read_stream};
use tokio::sync::watch;
use tracing::instrument::WithSubscriber;

/// The stream holds exactly the records `0..n`, each once, in outbox order.
fn assert_exactly_once_in_order(got: &[support::Received], n: usize) {
    assert_eq!(got.len(), n, "messages in the stream");
    let ids: HashSet<&str> = got.iter().map(|m| m.msg_id.as_str()).collect();
    assert_eq!(ids.len(), n, "message ids are unique");
    for (i, m) in got.iter().enumerate() {
        let (id, _, payload) = support::cloud_event(i);
        assert_eq!(m.msg_id, id, "message {i} in outbox order");
        assert_eq!(m.payload, payload);
        assert_eq!(m.stream_seq, i as u64 + 1, "no gap in the stream");
    }
}

fn metrics() -> (prometheus::Registry, ExportMetrics) {
    let r = prometheus::Registry::new();
    let m = ExportMetrics::register(&r).expect("register");
    (r, m)
}

#[tokio::test]
async fn every_record_arrives_once_in_order_as_a_cloudevent() {
    let nats = NatsServer::start().await;
    let outbox = Arc::new(InMemoryOutbox::new());
    append(&outbox, 0..150);
    let (registry, m) = metrics();
    let cfg = config(nats.url(), "METER_ORDER");
    let exporter = Exporter::new(outbox.clone(), cfg.clone(), Some(m.clone())).expect("config");
    let (stop, rx) = watch::channel(false);
    let task = tokio::spawn(exporter.run(rx));
    drained(&*outbox).await;
    // Records appended while the export runs follow the earlier ones.
    append(&outbox, 150..300);
    drained(&*outbox).await;
    let _ = stop.send(true);
    task.await.expect("export task");

    let got = read_stream(&nats.jetstream().await, "METER_ORDER").await;
    assert_exactly_once_in_order(&got, 300);
    for msg in &got {
        assert_eq!(msg.subject, "test.metering.networking.v1.allocation");
        assert_eq!(msg.content_type, CONTENT_TYPE);
        let ce: serde_json::Value = serde_json::from_str(&msg.payload).expect("json");
        assert_eq!(ce["specversion"], "1.0");
        assert_eq!(ce["id"].as_str(), Some(msg.msg_id.as_str()));
    }
    assert_eq!(m.published.get(), 300);
    assert_eq!(m.duplicates.get(), 0);
    assert_eq!(m.pending.get(), 0);
    assert_eq!(m.broker_up.get(), 1);
    // The created stream deduplicates over the configured window.
    let mut s = nats
        .jetstream()
        .await
        .get_stream("METER_ORDER")
        .await
        .expect("stream");
    let info = s.info().await.expect("info");
    assert_eq!(info.config.duplicate_window, cfg.duplicate_window);
    assert_eq!(info.config.subjects, ["test.metering.>"]);
    promtool_accepts(&registry);
}

/// `promtool check metrics` accepts the export's metrics (names, types, help).
fn promtool_accepts(registry: &prometheus::Registry) {
    use prometheus::Encoder;
    use std::io::Write;
    let mut text = Vec::new();
    prometheus::TextEncoder::new()
        .encode(&registry.gather(), &mut text)
        .expect("encode");
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (package prometheus; .ci/run installs it)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&text)
        .expect("write");
    let out = child.wait_with_output().expect("promtool");
    assert!(
        out.status.success(),
        "promtool: {}{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&text)
    );
}

#[tokio::test]
async fn a_30s_broker_outage_delays_records_but_loses_and_doubles_none() {
    let mut nats = NatsServer::start().await;
    let outbox = Arc::new(InMemoryOutbox::new());
    let (_registry, m) = metrics();
    let logs = Logs::default();
    let exporter = Exporter::new(
        outbox.clone(),
        config(nats.url(), "METER_OUTAGE"),
        Some(m.clone()),
    )
    .expect("config");
    let (stop, rx) = watch::channel(false);
    let task = tokio::spawn(exporter.run(rx).with_subscriber(logs.subscriber()));
    append(&outbox, 0..100);
    drained(&*outbox).await;

    nats.stop().await;
    // 500 records over 30 s of outage: they wait in the outbox.
    for chunk in 0..10 {
        let start = 100 + chunk * 50;
        append(&outbox, start..start + 50);
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    assert_eq!(
        outbox.len().await.expect("len"),
        500,
        "nothing left the outbox"
    );
    assert_eq!(m.pending.get(), 500);
    assert_eq!(m.broker_up.get(), 0);
    assert!(m.failures.get() > 0);

    nats.restart().await;
    drained(&*outbox).await;
    let _ = stop.send(true);
    task.await.expect("export task");

    let got = read_stream(&nats.jetstream().await, "METER_OUTAGE").await;
    assert_exactly_once_in_order(&got, 600);
    assert_eq!(m.pending.get(), 0);
    let text = logs.text();
    let warnings = text.matches("NATS JetStream unreachable").count();
    assert_eq!(warnings, 1, "one warning for the whole outage:\n{text}");
    assert_eq!(
        text.matches("publishing normally again").count(),
        1,
        "one recovery notice:\n{text}"
    );
    assert!(!text.contains("ERROR"), "{text}");
}

/// An outbox that loses every delete, as a process that crashes after the broker's ack and
/// before it removes the records would.
struct CrashBeforeDelete(Arc<InMemoryOutbox>);

#[async_trait]
impl OutboxSource for CrashBeforeDelete {
    async fn peek(&self, limit: i64) -> Result<Vec<OutboxEntry>, SourceError> {
        self.0.peek(limit).await
    }
    async fn ack(&self, _seqs: &[i64]) -> Result<u64, SourceError> {
        Err(SourceError::new(std::io::Error::other("crashed")))
    }
    async fn len(&self) -> Result<i64, SourceError> {
        self.0.len().await
    }
}

#[tokio::test]
async fn a_record_published_twice_is_stored_once() {
    let nats = NatsServer::start().await;
    let outbox = Arc::new(InMemoryOutbox::new());
    append(&outbox, 0..40);
    let cfg = config(nats.url(), "METER_DEDUP");
    let js = nats.jetstream().await;

    // First process: publishes everything, never gets to delete.
    let first = Exporter::new(
        Arc::new(CrashBeforeDelete(outbox.clone())),
        cfg.clone(),
        None,
    )
    .expect("config");
    let (stop, rx) = watch::channel(false);
    let task = tokio::spawn(first.run(rx));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let stored = match js.get_stream("METER_DEDUP").await {
            Ok(mut s) => s.info().await.map(|i| i.state.messages).unwrap_or(0),
            Err(_) => 0,
        };
        if stored == 40 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{stored} of 40 published"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop.send(true);
    task.await.expect("first export");
    assert_eq!(outbox.len().await.expect("len"), 40, "nothing was deleted");

    // The restarted process publishes the same records again.
    let (_registry, m) = metrics();
    let second = Exporter::new(outbox.clone(), cfg, Some(m.clone())).expect("config");
    let (stop, rx) = watch::channel(false);
    let task = tokio::spawn(second.run(rx));
    drained(&*outbox).await;
    let _ = stop.send(true);
    task.await.expect("second export");

    assert_eq!(m.published.get(), 40);
    assert_eq!(m.duplicates.get(), 40, "the broker recognised every copy");
    assert_exactly_once_in_order(&read_stream(&js, "METER_DEDUP").await, 40);
}

#[tokio::test]
async fn records_the_broker_refuses_stay_in_the_outbox_until_it_accepts_them() {
    let nats = NatsServer::start().await;
    let js = nats.jetstream().await;
    // The operator's stream: full after 10 messages, refusing new ones.
    let mut stream_config = async_nats::jetstream::stream::Config {
        name: "METER_FULL".into(),
        subjects: vec!["test.metering.>".into()],
        max_messages: 10,
        discard: async_nats::jetstream::stream::DiscardPolicy::New,
        ..Default::default()
    };
    js.create_stream(stream_config.clone())
        .await
        .expect("create stream");
    let outbox = Arc::new(InMemoryOutbox::new());
    append(&outbox, 0..25);
    let (_registry, m) = metrics();
    let exporter = Exporter::new(
        outbox.clone(),
        config(nats.url(), "METER_FULL"),
        Some(m.clone()),
    )
    .expect("config");
    let (stop, rx) = watch::channel(false);
    let task = tokio::spawn(exporter.run(rx));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while m.failures.get() < 2 || outbox.len().await.expect("len") != 15 {
        assert!(
            std::time::Instant::now() < deadline,
            "export did not fill the stream"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Refused records are kept, oldest first.
    let waiting: Vec<i64> = outbox.entries().iter().map(|e| e.seq).collect();
    assert_eq!(waiting, (11..=25).collect::<Vec<i64>>());

    // The operator lifts the limit: the rest follows, in order, none twice.
    stream_config.max_messages = -1;
    js.update_stream(stream_config)
        .await
        .expect("update stream");
    drained(&*outbox).await;
    let _ = stop.send(true);
    task.await.expect("export task");
    assert_exactly_once_in_order(&read_stream(&js, "METER_FULL").await, 25);
}

#[tokio::test]
async fn a_stream_that_misses_the_subjects_holds_the_records_and_says_why() {
    let nats = NatsServer::start().await;
    let js = nats.jetstream().await;
    js.create_stream(async_nats::jetstream::stream::Config {
        name: "METER_ELSEWHERE".into(),
        subjects: vec!["other.>".into()],
        ..Default::default()
    })
    .await
    .expect("create stream");
    let outbox = Arc::new(InMemoryOutbox::new());
    append(&outbox, 0..5);
    let logs = Logs::default();
    let cfg = osac_metering_export::ExportConfig {
        warn_unreachable: Duration::from_secs(1),
        ..config(nats.url(), "METER_ELSEWHERE")
    };
    let exporter = Exporter::new(outbox.clone(), cfg, None).expect("config");
    let (stop, rx) = watch::channel(false);
    let task = tokio::spawn(exporter.run(rx).with_subscriber(logs.subscriber()));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !logs.text().contains("WARN") {
        assert!(std::time::Instant::now() < deadline, "no warning");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop.send(true);
    task.await.expect("export task");
    let text = logs.text();
    assert!(
        text.contains("does not capture subject test.metering.>"),
        "the warning says why:\n{text}"
    );
    assert_eq!(outbox.len().await.expect("len"), 5, "the records wait");
    let mut s = js.get_stream("METER_ELSEWHERE").await.expect("stream");
    assert_eq!(
        s.info().await.expect("info").config.subjects,
        ["other.>"],
        "the operator's stream is left as it was"
    );
}

#[tokio::test]
async fn spawn_export_counts_in_the_process_metrics() {
    let nats = NatsServer::start().await;
    let outbox = Arc::new(InMemoryOutbox::new());
    append(&outbox, 0..10);
    let (stop, rx) = watch::channel(false);
    let task =
        osac_metering_export::spawn_export(outbox.clone(), config(nats.url(), "METER_GLOBAL"), rx)
            .expect("config");
    drained(&*outbox).await;
    let _ = stop.send(true);
    task.await.expect("export task");
    let published = prometheus::gather()
        .into_iter()
        .find(|f| f.name() == "osac_metering_export_published_total")
        .map(|f| f.get_metric()[0].get_counter().get_value())
        .expect("the metric is in the process registry");
    assert!(published >= 10.0, "{published}");
    assert_exactly_once_in_order(
        &read_stream(&nats.jetstream().await, "METER_GLOBAL").await,
        10,
    );
}
