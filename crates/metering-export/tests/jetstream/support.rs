//! Records and configurations of the export's tests, and the nats-server of [`super::nats`].

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use osac_metering_export::{ExportConfig, InMemoryOutbox, OutboxSource};

pub use super::nats::{NatsServer, Received, read_stream};

/// A structured CloudEvent like the store's outbox holds.
pub fn cloud_event(n: usize) -> (String, String, String) {
    let id = format!("evt-{n:05}");
    let subject = format!("externalips/eip-{n}");
    let payload = serde_json::json!({
        "specversion": "1.0",
        "id": id,
        "source": "/osac-net/test",
        "type": "org.osac.metering.networking.v1.allocation",
        "subject": subject,
        "time": "2026-01-01T00:00:00Z",
        "datacontenttype": "application/json",
        "data": {"n": n}
    })
    .to_string();
    (id, subject, payload)
}

pub fn append(outbox: &InMemoryOutbox, range: std::ops::Range<usize>) {
    for n in range {
        let (id, subject, payload) = cloud_event(n);
        outbox.append(id, subject, payload);
    }
}

/// A configuration for quick tests: short polls and backoff.
pub fn config(url: String, stream: &str) -> ExportConfig {
    ExportConfig {
        stream: stream.into(),
        subject_prefix: "test.metering".into(),
        batch: 64,
        poll_interval: Duration::from_millis(50),
        backoff_min: Duration::from_millis(100),
        backoff_max: Duration::from_millis(500),
        publish_timeout: Duration::from_secs(2),
        warn_unreachable: Duration::from_secs(5),
        ..ExportConfig::new(url)
    }
}

/// Waits until the outbox is empty.
pub async fn drained(outbox: &dyn OutboxSource) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = outbox.len().await.expect("len");
        if left == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{left} records still in the outbox"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Log lines written through a subscriber, for counting warnings.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }

    pub fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync + use<> {
        let logs = self.clone();
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || logs.clone())
            .finish()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
