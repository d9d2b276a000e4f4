//! A nats-server of the test's own (free port, temporary store) and a reader of its stream;
//! also used by the server's end-to-end metering test.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use futures::StreamExt;
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
