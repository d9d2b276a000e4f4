//! Prometheus metrics of the controllers, in the default registry (served by the API's
//! `/metrics`). Labels are kinds, operations, manager names and outcomes only: low cardinality.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts};

struct Metrics {
    reconcile_total: IntCounterVec,
    reconcile_duration: HistogramVec,
    queue_depth: IntGaugeVec,
    manager_ops: IntCounterVec,
    manager_duration: HistogramVec,
    workload_phase: HistogramVec,
}

impl Metrics {
    fn register() -> Result<Self, prometheus::Error> {
        let m = Metrics {
            reconcile_total: IntCounterVec::new(
                Opts::new("osac_reconcile_total", "Reconciles by kind and outcome."),
                &["kind", "outcome"],
            )?,
            reconcile_duration: HistogramVec::new(
                HistogramOpts::new(
                    "osac_reconcile_duration_seconds",
                    "Duration of one reconcile.",
                ),
                &["kind"],
            )?,
            queue_depth: IntGaugeVec::new(
                Opts::new(
                    "osac_reconcile_queue_depth",
                    "Objects waiting for a worker, by kind.",
                ),
                &["kind"],
            )?,
            manager_ops: IntCounterVec::new(
                Opts::new(
                    "osac_manager_operations_total",
                    "Manager operations by manager, operation and outcome.",
                ),
                &["manager", "operation", "outcome"],
            )?,
            manager_duration: HistogramVec::new(
                HistogramOpts::new(
                    "osac_manager_operation_duration_seconds",
                    "Duration of one manager operation.",
                ),
                &["manager", "operation"],
            )?,
            workload_phase: HistogramVec::new(
                HistogramOpts::new(
                    "osac_workload_phase_duration_seconds",
                    "Duration of one workload phase step (manager or provisioner calls, store \
                     transactions) inside a reconcile, by workload kind and phase.",
                )
                .buckets(vec![
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0, 30.0, 60.0, 300.0,
                ]),
                &["kind", "phase"],
            )?,
        };
        let r = prometheus::default_registry();
        r.register(Box::new(m.reconcile_total.clone()))?;
        r.register(Box::new(m.reconcile_duration.clone()))?;
        r.register(Box::new(m.queue_depth.clone()))?;
        r.register(Box::new(m.manager_ops.clone()))?;
        r.register(Box::new(m.manager_duration.clone()))?;
        r.register(Box::new(m.workload_phase.clone()))?;
        Ok(m)
    }
}

/// Registered once per process; a registration failure disables metrics instead of failing.
static METRICS: LazyLock<Option<Metrics>> = LazyLock::new(|| match Metrics::register() {
    Ok(m) => Some(m),
    Err(e) => {
        tracing::warn!(error = %e, "controller metrics disabled");
        None
    }
});

/// Counts one finished reconcile.
pub(crate) fn reconcile_done(kind: &str, outcome: &str, elapsed: Duration) {
    if let Some(m) = METRICS.as_ref() {
        m.reconcile_total.with_label_values(&[kind, outcome]).inc();
        m.reconcile_duration
            .with_label_values(&[kind])
            .observe(elapsed.as_secs_f64());
    }
}

/// Moves the queue depth of `kind` by `delta`.
pub(crate) fn queue_depth_add(kind: &str, delta: i64) {
    if let Some(m) = METRICS.as_ref() {
        m.queue_depth.with_label_values(&[kind]).add(delta);
    }
}

/// Counts one manager operation.
pub(crate) fn manager_op(manager: &str, operation: &str, outcome: &str, elapsed: Duration) {
    if let Some(m) = METRICS.as_ref() {
        m.manager_ops
            .with_label_values(&[manager, operation, outcome])
            .inc();
        m.manager_duration
            .with_label_values(&[manager, operation])
            .observe(elapsed.as_secs_f64());
    }
}

/// Records how long one phase step of a workload reconcile took.
pub(crate) fn workload_phase(kind: &str, phase: &str, elapsed: Duration) {
    if let Some(m) = METRICS.as_ref() {
        m.workload_phase
            .with_label_values(&[kind, phase])
            .observe(elapsed.as_secs_f64());
    }
}
