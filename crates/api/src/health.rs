//! The standard gRPC health service (`grpc.health.v1.Health`) on the API port.
//!
//! The server reports SERVING while the store answers and NOT_SERVING when it does not, for
//! the whole server (the empty service name) and for every osac-net gRPC service by its full
//! name (`osacnet.v1.Subnets`, …). The store is checked every [`CHECK_INTERVAL`]; a check
//! that takes longer than [`CHECK_TIMEOUT`] counts as a failure.

use std::sync::Arc;
use std::time::Duration;

use osac_store::Store;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic_health::ServingStatus;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::server::HealthReporter;

/// How often the store is checked.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(5);
/// How long one check may take.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// The health service and the task that keeps it current until `shutdown` turns true.
pub async fn start(
    store: Arc<dyn Store>,
    mut shutdown: watch::Receiver<bool>,
) -> (HealthServer<impl Health>, JoinHandle<()>) {
    let (reporter, server) = tonic_health::server::health_reporter();
    let names = crate::metrics::grpc_service_names();
    // The first status is known before the port opens.
    let mut last = check(store.as_ref()).await;
    report(&reporter, &names, last).await;
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = shutdown.wait_for(|v| *v) => return,
                _ = tokio::time::sleep(CHECK_INTERVAL) => {}
            }
            let now = check(store.as_ref()).await;
            if now != last {
                match now {
                    ServingStatus::Serving => tracing::info!("the store answers again: SERVING"),
                    _ => tracing::warn!("the store does not answer: NOT_SERVING"),
                }
                report(&reporter, &names, now).await;
                last = now;
            }
        }
    });
    (server, task)
}

async fn check(store: &dyn Store) -> ServingStatus {
    match tokio::time::timeout(CHECK_TIMEOUT, store.ping()).await {
        Ok(Ok(())) => ServingStatus::Serving,
        _ => ServingStatus::NotServing,
    }
}

async fn report(reporter: &HealthReporter, names: &[String], status: ServingStatus) {
    reporter.set_service_status("", status).await;
    for name in names {
        reporter.set_service_status(name, status).await;
    }
}
