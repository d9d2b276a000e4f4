//! A nats-server of the test's own (free port, temporary store) and a reader of the stream.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream;
use futures::StreamExt;
use osac_metering_export::{ExportConfig, InMemoryOutbox, OutboxSource};
use tokio::process::{Child, Command};

pub const NATS_SERVER: &str = "/usr/sbin/nats-server";

/// A JetStream server on 127.0.0.1 that the test can stop and start again on the same port
/// and store.
pub struct NatsServer {
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl NatsServer {
    pub async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let mut s = Self {
            port,
            dir: tempfile::tempdir().expect("temp dir"),
            child: None,
        };
        s.restart().await;
        s
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kills the server (its store stays).
    pub async fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().await.expect("kill nats-server");
        }
    }

    /// Starts the server on its port and store and waits until JetStream answers.
    pub async fn restart(&mut self) {
        let store: PathBuf = self.dir.path().join("js");
        let child = Command::new(NATS_SERVER)
            .args(["-js", "-a", "127.0.0.1", "-p"])
            .arg(self.port.to_string())
            .arg("-sd")
            .arg(&store)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {NATS_SERVER} (package nats-server; .ci/run installs it): {e}")
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let last = match async_nats::connect(self.url()).await {
                // The account info request answers once JetStream is up.
                Ok(c) => match c.request("$JS.API.INFO", "".into()).await {
                    Ok(m) if !String::from_utf8_lossy(&m.payload).contains("\"error\"") => {
                        return;
                    }
                    Ok(m) => String::from_utf8_lossy(&m.payload).into_owned(),
                    Err(e) => format!("{e:?}"),
                },
                Err(e) => format!("{e:?}"),
            };
            assert!(
                Instant::now() < deadline,
                "nats-server did not start: {last}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn jetstream(&self) -> jetstream::Context {
        jetstream::new(async_nats::connect(self.url()).await.expect("connect"))
    }
}

/// A message as a consumer of the stream sees it.
#[derive(Debug)]
pub struct Received {
    pub stream_seq: u64,
    pub subject: String,
    pub msg_id: String,
    pub content_type: String,
    pub payload: String,
}

/// Every message of `stream`, read with a pull consumer, in stream order.
pub async fn read_stream(js: &jetstream::Context, stream: &str) -> Vec<Received> {
    let mut s = js.get_stream(stream).await.expect("stream exists");
    let total = s.info().await.expect("stream info").state.messages as usize;
    let consumer: jetstream::consumer::PullConsumer = s
        .create_consumer(jetstream::consumer::pull::Config {
            ack_policy: jetstream::consumer::AckPolicy::None,
            ..Default::default()
        })
        .await
        .expect("consumer");
    let mut out = Vec::with_capacity(total);
    let deadline = Instant::now() + Duration::from_secs(30);
    while out.len() < total {
        assert!(Instant::now() < deadline, "read {} of {total}", out.len());
        let mut batch = consumer
            .fetch()
            .max_messages(500)
            .messages()
            .await
            .expect("fetch");
        while let Some(m) = batch.next().await {
            let m = m.expect("message");
            let header = |name: &str| {
                m.headers
                    .as_ref()
                    .and_then(|h| h.get(name))
                    .map(|v| v.as_str().to_string())
                    .unwrap_or_default()
            };
            out.push(Received {
                stream_seq: m.info().expect("jetstream message").stream_sequence,
                subject: m.subject.to_string(),
                msg_id: header("Nats-Msg-Id"),
                content_type: header("content-type"),
                payload: String::from_utf8(m.payload.to_vec()).expect("utf-8"),
            });
        }
    }
    out
}

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
