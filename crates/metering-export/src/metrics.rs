//! The export's Prometheus metrics.

use std::sync::LazyLock;

use prometheus::{IntCounter, IntGauge, Opts, Registry};

/// The export's gauges and counters.
#[derive(Clone)]
pub struct ExportMetrics {
    /// Records waiting in the outbox (read at every round).
    pub pending: IntGauge,
    /// 1 while the broker answers, 0 while it does not.
    pub broker_up: IntGauge,
    /// Records the broker acknowledged and the outbox then removed.
    pub published: IntCounter,
    /// Of those, records the broker already held (dropped as duplicates by their id).
    pub duplicates: IntCounter,
    /// Rounds that failed (broker unreachable, refused or slow; outbox unreadable).
    pub failures: IntCounter,
}

impl ExportMetrics {
    /// Metrics registered in `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let m = Self::unregistered()?;
        registry.register(Box::new(m.pending.clone()))?;
        registry.register(Box::new(m.broker_up.clone()))?;
        registry.register(Box::new(m.published.clone()))?;
        registry.register(Box::new(m.duplicates.clone()))?;
        registry.register(Box::new(m.failures.clone()))?;
        Ok(m)
    }

    /// The metrics of the process-wide registry (what a server's `/metrics` serves),
    /// registered on first use; None only if registering failed (constant, valid names rule
    /// that out), and the export then runs without metrics.
    pub fn global() -> Option<Self> {
        static GLOBAL: LazyLock<Option<ExportMetrics>> =
            LazyLock::new(|| ExportMetrics::register(prometheus::default_registry()).ok());
        GLOBAL.clone()
    }

    fn unregistered() -> Result<Self, prometheus::Error> {
        Ok(Self {
            pending: IntGauge::with_opts(Opts::new(
                "osac_metering_outbox_pending",
                "Metering records (CloudEvents) waiting in the outbox to be published",
            ))?,
            broker_up: IntGauge::with_opts(Opts::new(
                "osac_metering_export_broker_up",
                "1 while the metering export's NATS JetStream broker answers, else 0",
            ))?,
            published: IntCounter::with_opts(Opts::new(
                "osac_metering_export_published_total",
                "Metering records the broker acknowledged and the outbox removed",
            ))?,
            duplicates: IntCounter::with_opts(Opts::new(
                "osac_metering_export_duplicates_total",
                "Metering records the broker already held (dropped by their CloudEvent id)",
            ))?,
            failures: IntCounter::with_opts(Opts::new(
                "osac_metering_export_failures_total",
                "Metering export rounds that failed (broker unreachable or refusing, outbox unreadable)",
            ))?,
        })
    }
}
