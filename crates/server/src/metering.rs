//! The metering export of `osac server --metering-nats`: the store's metering outbox (the
//! CloudEvents written with each interval opened or closed and each periodic usage record)
//! published to NATS JetStream by `osac-metering-export`.

use std::sync::Arc;

use osac_metering_export::{ConfigError, ExportConfig, OutboxSource, spawn_export};
use osac_store::Store;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Why the export cannot start.
#[derive(Debug, thiserror::Error)]
pub enum MeteringError {
    #[error(
        "--metering-nats: this server's store keeps no metering outbox to publish; start it without --metering-nats"
    )]
    NoOutbox,
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

/// The outbox the export drains: the store's `metering_outbox`, oldest record first.
///
/// This is the one place that joins the export to the store. The store has no outbox
/// methods yet, so there is nothing to publish and `--metering-nats` is refused; once it has
/// them (`outbox_peek`, `outbox_ack`, `outbox_len`), this returns the store itself through an
/// `OutboxSource` implementation over those three methods.
pub fn outbox_source(store: Arc<dyn Store>) -> Result<Arc<dyn OutboxSource>, MeteringError> {
    drop(store);
    Err(MeteringError::NoOutbox)
}

/// Starts publishing the store's outbox; the export stops with the server (`shutdown`).
pub fn start_export(
    store: Arc<dyn Store>,
    config: ExportConfig,
    shutdown: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, MeteringError> {
    let source = outbox_source(store)?;
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
