//! The metering export: CloudEvents written to the store's outbox (in the same transaction as
//! the state change they record) are published to a NATS JetStream stream, oldest first, with
//! the CloudEvent id as the JetStream message id (`Nats-Msg-Id`, so the broker drops a second
//! copy within its duplicate window), and removed from the outbox only once the broker
//! acknowledged them: at-least-once delivery with ids a consumer deduplicates on.
//!
//! - [`OutboxSource`]: the outbox (the store's in a server; [`InMemoryOutbox`] in tests).
//! - [`ExportConfig`]: broker URL, stream, subject prefix, batch, backoff and warning
//!   thresholds.
//! - [`spawn_export`] / [`Exporter`]: the loop. With the broker away it retries with backoff
//!   while the records wait in the outbox (read in batches, so memory stays bounded); it logs
//!   one warning when the broker has been unreachable or the backlog large for a while, and
//!   one info when it is back to normal; [`ExportMetrics`] count what waits and what went out.

mod alarm;
mod config;
mod export;
mod metrics;
mod source;
mod subject;

pub use config::{ConfigError, ExportConfig};
pub use export::{CONTENT_TYPE, ExportError, Exporter, spawn_export};
pub use metrics::ExportMetrics;
pub use source::{InMemoryOutbox, OutboxEntry, OutboxSource, SourceError};
pub use subject::subject_for;
