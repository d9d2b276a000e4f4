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

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use osac_model::Kind;
    use osac_store::{Change, ListQuery, Page, Record, Reference, StateCount, StoreError, Tx};

    /// A store whose database is gone: every call fails.
    struct Down;

    fn down<T>() -> Result<T, StoreError> {
        Err(StoreError::Corrupt("the database is down".into()))
    }

    #[async_trait]
    impl Store for Down {
        async fn begin(&self) -> Result<Box<dyn Tx>, StoreError> {
            down()
        }
        async fn get(&self, _: &str) -> Result<Option<Record>, StoreError> {
            down()
        }
        async fn list(&self, _: &ListQuery) -> Result<Page, StoreError> {
            down()
        }
        async fn referrers(&self, _: &str) -> Result<Vec<Reference>, StoreError> {
            down()
        }
        async fn ids(&self, _: Kind) -> Result<Vec<String>, StoreError> {
            down()
        }
        fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Change> {
            tokio::sync::broadcast::channel(1).1
        }
        async fn ping(&self) -> Result<(), StoreError> {
            down()
        }
        async fn count_by_state(&self) -> Result<Vec<StateCount>, StoreError> {
            down()
        }
        async fn kv_load(&self, _: &str) -> Result<Vec<(String, String)>, StoreError> {
            down()
        }
        async fn kv_get(&self, _: &str, _: &str) -> Result<Option<String>, StoreError> {
            down()
        }
        async fn kv_put(&self, _: &str, _: &str, _: &str) -> Result<(), StoreError> {
            down()
        }
        async fn kv_delete(&self, _: &str, _: &str) -> Result<(), StoreError> {
            down()
        }
        async fn outbox_peek(&self, _: i64) -> Result<Vec<osac_store::OutboxEntry>, StoreError> {
            down()
        }
        async fn outbox_ack(&self, _: &[i64]) -> Result<u64, StoreError> {
            down()
        }
        async fn outbox_len(&self) -> Result<i64, StoreError> {
            down()
        }
        async fn outbox_append(&self, _: &[osac_store::OutboxEvent]) -> Result<(), StoreError> {
            down()
        }
        async fn usage_intervals(
            &self,
            _: chrono::DateTime<chrono::Utc>,
            _: chrono::DateTime<chrono::Utc>,
            _: Option<&str>,
        ) -> Result<Vec<osac_model::metering::IntervalRow>, StoreError> {
            down()
        }
        async fn record_usage(&self, _: chrono::DateTime<chrono::Utc>) -> Result<u64, StoreError> {
            down()
        }
        async fn prune_usage(&self, _: chrono::DateTime<chrono::Utc>) -> Result<u64, StoreError> {
            down()
        }
        async fn record_traffic(
            &self,
            _: chrono::DateTime<chrono::Utc>,
            _: &[osac_store::TrafficSample],
        ) -> Result<(), StoreError> {
            down()
        }
        async fn traffic_usage(
            &self,
            _: chrono::DateTime<chrono::Utc>,
            _: chrono::DateTime<chrono::Utc>,
            _: Option<&str>,
        ) -> Result<Vec<osac_store::TrafficUsageRow>, StoreError> {
            down()
        }
        async fn prune_events(
            &self,
            _: chrono::DateTime<chrono::Utc>,
            _: i64,
        ) -> Result<u64, StoreError> {
            down()
        }
        async fn kv_write(
            &self,
            _: &str,
            _: &[(String, Option<String>)],
        ) -> Result<(), StoreError> {
            down()
        }
    }

    #[tokio::test]
    async fn a_store_that_does_not_answer_is_not_serving() {
        assert_eq!(check(&Down).await, ServingStatus::NotServing);
        let (reporter, _server) = tonic_health::server::health_reporter();
        let names = vec!["osacnet.v1.Subnets".to_string()];
        report(&reporter, &names, ServingStatus::NotServing).await;
        // Both the whole server and each service say so.
        let health = tonic_health::server::HealthService::from_health_reporter(reporter);
        for service in ["", "osacnet.v1.Subnets"] {
            let r = health
                .check(tonic::Request::new(tonic_health::pb::HealthCheckRequest {
                    service: service.into(),
                }))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(
                r.status(),
                tonic_health::pb::health_check_response::ServingStatus::NotServing
            );
        }
    }
}
