//! The metering export of `osac server --metering-nats`: the store's metering outbox (the
//! CloudEvents written with each interval opened or closed and each periodic usage record)
//! published to NATS JetStream by `osac-metering-export`.

use std::sync::Arc;

use osac_metering_export::{
    ConfigError, ExportConfig, OutboxEntry, OutboxSource, SourceError, spawn_export,
};
use osac_store::Store;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Why the export cannot start.
#[derive(Debug, thiserror::Error)]
pub enum MeteringError {
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// The export's configuration from the `osac server` flags, checked (the error names the flag
/// and its rule).
pub fn export_config(
    url: &str,
    stream: &str,
    subject_prefix: &str,
) -> Result<ExportConfig, ConfigError> {
    let config = ExportConfig {
        stream: stream.into(),
        subject_prefix: subject_prefix.into(),
        ..ExportConfig::new(url)
    };
    config.validate()?;
    Ok(config)
}

/// The outbox the export drains: the store's `metering_outbox`, oldest record first. Rows
/// are removed only once the broker has acknowledged them.
struct StoreOutbox(Arc<dyn Store>);

#[async_trait::async_trait]
impl OutboxSource for StoreOutbox {
    async fn peek(&self, limit: i64) -> Result<Vec<OutboxEntry>, SourceError> {
        let rows = self.0.outbox_peek(limit).await.map_err(SourceError::new)?;
        Ok(rows
            .into_iter()
            .map(|r| OutboxEntry {
                seq: r.seq,
                event_id: r.event_id,
                subject: r.subject,
                payload: r.payload,
            })
            .collect())
    }
    async fn ack(&self, seqs: &[i64]) -> Result<u64, SourceError> {
        self.0.outbox_ack(seqs).await.map_err(SourceError::new)
    }
    async fn len(&self) -> Result<i64, SourceError> {
        self.0.outbox_len().await.map_err(SourceError::new)
    }
}

/// The store's outbox as the export's source: the one place that joins the export to the
/// store.
pub fn outbox_source(store: Arc<dyn Store>) -> Arc<dyn OutboxSource> {
    Arc::new(StoreOutbox(store))
}

/// Starts publishing the store's outbox; the export stops with the server (`shutdown`).
pub fn start_export(
    store: Arc<dyn Store>,
    config: ExportConfig,
    shutdown: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, MeteringError> {
    let source = outbox_source(store);
    Ok(spawn_export(source, config, shutdown)?)
}

#[cfg(test)]
mod tests {
    use super::export_config;

    #[test]
    fn flags_are_checked_and_named() {
        let c = export_config("nats://127.0.0.1:4222", "OSAC_METERING", "osac.metering")
            .expect("valid");
        assert_eq!(
            (c.stream.as_str(), c.subject_prefix.as_str()),
            ("OSAC_METERING", "osac.metering")
        );
        let e = export_config("nats://127.0.0.1:4222", "a.b", "osac.metering").expect_err("dot");
        assert!(e.to_string().contains("--metering-nats-stream"), "{e}");
        let e = export_config("nats://127.0.0.1:4222", "S", "osac.>").expect_err("wildcard");
        assert!(e.to_string().contains("--metering-nats-subject"), "{e}");
        let e = export_config("nats://h:port", "S", "osac").expect_err("url");
        assert!(e.to_string().contains("--metering-nats"), "{e}");
    }
}
