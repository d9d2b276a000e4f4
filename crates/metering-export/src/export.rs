//! The export loop: outbox → JetStream, in order, deleting only what the broker acknowledged.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::context::{CreateStreamError, PublishError};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::{self, stream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::alarm::{Alarm, Notice, Observation};
use crate::config::{ConfigError, ExportConfig};
use crate::metrics::ExportMetrics;
use crate::source::{OutboxEntry, OutboxSource, SourceError};
use crate::subject::subject_for;

/// The content type of a structured-mode CloudEvent in JSON.
pub const CONTENT_TYPE: &str = "application/cloudevents+json";

/// Why a round of the export failed (the loop retries; these reach the log, not the caller).
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot connect to NATS at {addr}")]
    Connect {
        addr: String,
        #[source]
        source: async_nats::ConnectError,
    },
    #[error("NATS at {addr} is not connected")]
    Disconnected { addr: String },
    #[error("cannot create or read JetStream stream {stream}")]
    Stream {
        stream: String,
        #[source]
        source: CreateStreamError,
    },
    #[error(
        "JetStream stream {stream} does not capture subject {subject} (its subjects: {subjects:?}); add `{wanted}` to it or choose another --metering-nats-stream"
    )]
    StreamSubjects {
        stream: String,
        subject: String,
        subjects: Vec<String>,
        wanted: String,
    },
    #[error("publishing outbox record {seq} (CloudEvent {event_id})")]
    Publish {
        seq: i64,
        event_id: String,
        #[source]
        source: PublishError,
    },
    #[error(
        "outbox record {seq} was stored in JetStream stream {got}, not {want} (another stream captures the subject)"
    )]
    WrongStream { seq: i64, got: String, want: String },
    #[error(transparent)]
    Source(#[from] SourceError),
}

impl ExportError {
    /// Whether the failure is the broker's (unreachable, refusing) rather than the outbox's.
    fn is_broker(&self) -> bool {
        !matches!(self, Self::Source(_) | Self::Config(_))
    }
}

/// Starts the export of `source` to the broker of `config` in the background, with the
/// process-wide metrics; it stops when `shutdown` turns true (or its sender is dropped),
/// after the records in flight were acknowledged or timed out.
pub fn spawn_export(
    source: Arc<dyn OutboxSource>,
    config: ExportConfig,
    shutdown: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, ConfigError> {
    let exporter = Exporter::new(source, config, ExportMetrics::global())?;
    Ok(tokio::spawn(exporter.run(shutdown)))
}

/// Publishes an outbox to NATS JetStream.
pub struct Exporter {
    source: Arc<dyn OutboxSource>,
    config: ExportConfig,
    metrics: Option<ExportMetrics>,
    /// `host:port` of the broker, for logs (the URL may carry credentials).
    addr: String,
}

/// A connection and whether the stream is known to be in place.
struct Link {
    client: async_nats::Client,
    js: jetstream::Context,
    stream_ready: bool,
}

/// What a successful round left.
enum Progress {
    /// A full batch went out: more may wait.
    More,
    /// The outbox is drained (as of the round).
    Idle,
}

impl Exporter {
    pub fn new(
        source: Arc<dyn OutboxSource>,
        config: ExportConfig,
        metrics: Option<ExportMetrics>,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let addr = config
            .url
            .parse::<async_nats::ServerAddr>()
            .map(|a| format!("{}:{}", a.host(), a.port()))
            .map_err(|e| ConfigError::Url(e.to_string()))?;
        Ok(Self {
            source,
            config,
            metrics,
            addr,
        })
    }

    /// Runs until `shutdown` turns true (or its sender is dropped).
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let mut alarm = Alarm::new(self.config.warn_pending, self.config.warn_unreachable);
        let mut backoff = self.config.backoff_min;
        let mut link: Option<Link> = None;
        let mut last_pending = 0;
        tracing::info!(
            broker = %self.addr,
            stream = %self.config.stream,
            subjects = %format!("{}.>", self.config.subject_prefix),
            "metering export to NATS JetStream started"
        );
        loop {
            if stopping(&shutdown) {
                break;
            }
            let (outcome, pending) = self.round(&mut link).await;
            if let Some(p) = pending {
                last_pending = p;
            }
            let reachable = match &outcome {
                Ok(_) => true,
                Err(e) => !e.is_broker(),
            };
            if let Some(m) = &self.metrics {
                m.broker_up.set(i64::from(reachable));
            }
            let notice = alarm.observe(Observation {
                now: Instant::now(),
                reachable,
                pending: last_pending,
            });
            self.log(notice, outcome.as_ref().err());
            let wait = match outcome {
                Ok(Progress::More) => {
                    backoff = self.config.backoff_min;
                    Duration::ZERO
                }
                Ok(Progress::Idle) => {
                    backoff = self.config.backoff_min;
                    self.config.poll_interval
                }
                Err(e) => {
                    if let Some(m) = &self.metrics {
                        m.failures.inc();
                    }
                    if e.is_broker() {
                        // The next round checks the stream again: a broker that came back
                        // empty has lost it.
                        if let Some(l) = &mut link {
                            l.stream_ready = false;
                        }
                    }
                    tracing::debug!(error = %error_chain(&e), "metering export round failed; retrying");
                    let w = backoff;
                    backoff = (backoff * 2).min(self.config.backoff_max);
                    w
                }
            };
            if !wait.is_zero() {
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.wait_for(|v| *v) => {}
                }
            } else {
                tokio::task::yield_now().await;
            }
        }
        if let Some(l) = link {
            let _ = l.client.flush().await;
        }
        tracing::info!(pending = last_pending, "metering export stopped");
    }

    fn log(&self, notice: Option<Notice>, error: Option<&ExportError>) {
        let error = error.map(|e| error_chain(e)).unwrap_or_default();
        match notice {
            Some(Notice::Unreachable { down_for, pending }) => tracing::warn!(
                broker = %self.addr,
                down_seconds = down_for.as_secs(),
                pending,
                %error,
                "metering export: NATS JetStream unreachable; records wait in the outbox and are published when it returns"
            ),
            Some(Notice::Backlog { pending }) => tracing::warn!(
                broker = %self.addr,
                pending,
                threshold = self.config.warn_pending,
                "metering export: records pile up in the outbox"
            ),
            Some(Notice::Recovered { pending }) => tracing::info!(
                broker = %self.addr,
                pending,
                "metering export: publishing normally again"
            ),
            None => {}
        }
    }

    /// One round: count the outbox, make sure of the connection and the stream, publish one
    /// batch and remove what the broker acknowledged. Returns the outbox length when known.
    async fn round(&self, link: &mut Option<Link>) -> (Result<Progress, ExportError>, Option<i64>) {
        let pending = match self.source.len().await {
            Ok(p) => p,
            Err(e) => return (Err(e.into()), None),
        };
        self.set_pending(pending);
        if pending == 0 {
            // Nothing to send; still keep the connection up so the broker's state is known.
            return (self.connected(link).await.map(|_| Progress::Idle), Some(0));
        }
        let result = async {
            let l = self.connected(link).await?;
            if !l.stream_ready {
                self.ensure_stream(&l.js).await?;
                l.stream_ready = true;
            }
            let limit = i64::try_from(self.config.batch).unwrap_or(i64::MAX);
            let batch = self.source.peek(limit).await?;
            let full = batch.len() >= self.config.batch;
            let (delivered, failure) = self.publish(&l.js, &batch).await;
            if !delivered.is_empty() {
                let removed = self.source.ack(&delivered).await?;
                if let Some(m) = &self.metrics {
                    m.published.inc_by(removed);
                }
            }
            match failure {
                Some(e) => Err(e),
                None if full => Ok(Progress::More),
                None => Ok(Progress::Idle),
            }
        }
        .await;
        let pending = match self.source.len().await {
            Ok(p) => {
                self.set_pending(p);
                p
            }
            Err(_) => pending,
        };
        (result, Some(pending))
    }

    fn set_pending(&self, pending: i64) {
        if let Some(m) = &self.metrics {
            m.pending.set(pending);
        }
    }

    /// The connection, made on first use. The client reconnects by itself after a drop; a
    /// round only proceeds while it is connected, so nothing piles up in the client's buffer.
    async fn connected<'a>(&self, link: &'a mut Option<Link>) -> Result<&'a mut Link, ExportError> {
        if link.is_none() {
            let (min, max) = (self.config.backoff_min, self.config.backoff_max);
            let client = async_nats::ConnectOptions::new()
                .name("osac-metering-export")
                .retry_on_initial_connect()
                .max_reconnects(None)
                .connection_timeout(self.config.publish_timeout)
                .reconnect_delay_callback(move |attempts| {
                    let shift = u32::try_from(attempts.min(16)).unwrap_or(16);
                    min.saturating_mul(1u32 << shift).min(max)
                })
                .connect(self.config.url.as_str())
                .await
                .map_err(|source| ExportError::Connect {
                    addr: self.addr.clone(),
                    source,
                })?;
            // Acks abandoned after a failure give their slot back within the publish timeout,
            // so the next round never waits long for a slot.
            let js = jetstream::ContextBuilder::new()
                .timeout(self.config.publish_timeout)
                .ack_timeout(self.config.publish_timeout)
                .max_ack_inflight(self.config.batch.saturating_mul(2))
                .backpressure_on_inflight(true)
                .build(client.clone());
            *link = Some(Link {
                client,
                js,
                stream_ready: false,
            });
        }
        let Some(l) = link.as_mut() else {
            return Err(ExportError::Disconnected {
                addr: self.addr.clone(),
            });
        };
        if l.client.connection_state() != async_nats::connection::State::Connected {
            return Err(ExportError::Disconnected {
                addr: self.addr.clone(),
            });
        }
        Ok(l)
    }

    /// Creates the stream when missing (file storage, the duplicate window of the config,
    /// capturing `<prefix>.>`); an existing stream is kept as its operator configured it, but
    /// must capture the prefix.
    async fn ensure_stream(&self, js: &jetstream::Context) -> Result<(), ExportError> {
        let wanted = format!("{}.>", self.config.subject_prefix);
        let s = js
            .get_or_create_stream(stream::Config {
                name: self.config.stream.clone(),
                subjects: vec![wanted.clone()],
                storage: stream::StorageType::File,
                retention: stream::RetentionPolicy::Limits,
                duplicate_window: self.config.duplicate_window,
                description: Some(
                    "osac-net metering records (CloudEvents 1.0, structured JSON)".into(),
                ),
                ..Default::default()
            })
            .await
            .map_err(|source| ExportError::Stream {
                stream: self.config.stream.clone(),
                source,
            })?;
        let subjects = s.cached_info().config.subjects.clone();
        let probe = format!("{}.x", self.config.subject_prefix);
        if !subjects
            .iter()
            .any(|p| covers(p, &probe) && covers(p, &wanted))
        {
            return Err(ExportError::StreamSubjects {
                stream: self.config.stream.clone(),
                subject: wanted.clone(),
                subjects,
                wanted,
            });
        }
        Ok(())
    }

    /// Publishes `batch` in order, pipelined: every record is sent, then the acks are awaited
    /// in order. Returns the `seq`s of the acknowledged prefix and the first failure; records
    /// after a failure are published again by a later round (the broker drops the copies it
    /// already holds).
    async fn publish(
        &self,
        js: &jetstream::Context,
        batch: &[OutboxEntry],
    ) -> (Vec<i64>, Option<ExportError>) {
        let mut in_flight = Vec::with_capacity(batch.len());
        let mut failure = None;
        for e in batch {
            let msg = PublishMessage::build()
                .payload(e.payload.clone().into())
                .message_id(&e.event_id)
                .header("content-type", CONTENT_TYPE);
            match js
                .send_publish(subject_for(&self.config.subject_prefix, &e.payload), msg)
                .await
            {
                Ok(ack) => in_flight.push((e, ack)),
                Err(source) => {
                    failure = Some(publish_error(e, source));
                    break;
                }
            }
        }
        let mut delivered = Vec::with_capacity(in_flight.len());
        for (e, ack) in in_flight {
            if failure.is_some() {
                break;
            }
            match ack.await {
                Ok(ack) if ack.stream != self.config.stream => {
                    failure = Some(ExportError::WrongStream {
                        seq: e.seq,
                        got: ack.stream,
                        want: self.config.stream.clone(),
                    });
                }
                Ok(ack) => {
                    if ack.duplicate
                        && let Some(m) = &self.metrics
                    {
                        m.duplicates.inc();
                    }
                    delivered.push(e.seq);
                }
                Err(source) => failure = Some(publish_error(e, source)),
            }
        }
        (delivered, failure)
    }
}

fn publish_error(e: &OutboxEntry, source: PublishError) -> ExportError {
    ExportError::Publish {
        seq: e.seq,
        event_id: e.event_id.clone(),
        source,
    }
}

fn stopping(shutdown: &watch::Receiver<bool>) -> bool {
    *shutdown.borrow() || shutdown.has_changed().is_err()
}

/// Whether the stream subject pattern `pattern` matches every subject `subject` stands for
/// (`subject` may end in `>`).
fn covers(pattern: &str, subject: &str) -> bool {
    let mut p = pattern.split('.');
    let mut s = subject.split('.');
    loop {
        match (p.next(), s.next()) {
            (Some(">"), Some(_)) => return true,
            (Some("*"), Some(t)) if t != ">" => {}
            (Some(a), Some(b)) if a == b => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::covers;

    #[test]
    fn stream_subject_coverage() {
        assert!(covers("osac.metering.>", "osac.metering.>"));
        assert!(covers("osac.>", "osac.metering.>"));
        assert!(covers(">", "osac.metering.>"));
        assert!(covers("osac.*.>", "osac.metering.>"));
        assert!(!covers("osac.metering.*", "osac.metering.>"));
        assert!(!covers("osac.metering", "osac.metering.>"));
        assert!(!covers("other.>", "osac.metering.>"));
        assert!(covers("osac.metering.*", "osac.metering.x"));
    }
}
