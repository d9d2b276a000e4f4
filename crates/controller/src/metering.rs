//! The periodic side of metering: every period (60 s by default) one usage record per open
//! interval goes to the outbox, and intervals closed longer ago than the retention (13 months
//! by default) are pruned — never an open one.
//!
//! Periods are aligned to the epoch (a record ends at a multiple of the period), so the
//! record's CloudEvent id is the same whichever replica writes it; the replica holding
//! controller shard 0 writes them (all of them when alone). When that replica dies, the one
//! that takes shard 0 over writes the next record, which covers the time since the last one.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use osac_store::Store;
use tokio::sync::watch;

use crate::ownership::Ownership;

/// Default period of the usage records.
pub const DEFAULT_USAGE_RECORD_INTERVAL: Duration = Duration::from_secs(60);
/// Default retention of closed intervals: 13 months (of 31 days: never less than 13).
pub const DEFAULT_USAGE_RETENTION: Duration = Duration::from_secs(13 * 31 * 24 * 3600);

/// The end of the period `now` lies in the next of: the latest multiple of `period` at or
/// before `now`.
pub fn period_end(now: DateTime<Utc>, period: Duration) -> DateTime<Utc> {
    let p = i64::try_from(period.as_micros()).unwrap_or(i64::MAX).max(1);
    let us = now.timestamp_micros();
    Utc.timestamp_micros(us - us.rem_euclid(p))
        .single()
        .unwrap_or(now)
}

/// Writes the usage records and prunes, each period, while this process holds shard 0.
pub(crate) async fn metering_loop(
    store: Arc<dyn Store>,
    ownership: Ownership,
    period: Duration,
    retention: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let period = period.max(Duration::from_secs(1));
    loop {
        let now = Utc::now();
        let next = period_end(now, period)
            + chrono::Duration::from_std(period).unwrap_or(chrono::Duration::seconds(60));
        let wait = (next - now).to_std().unwrap_or(period);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            return;
        }
        if !ownership.held().iter().any(|(shard, _)| *shard == 0) {
            continue;
        }
        let end = period_end(Utc::now(), period);
        match store.record_usage(end).await {
            Ok(n) => tracing::debug!(records = n, %end, "usage records written"),
            Err(e) => tracing::warn!(error = %e, "usage records not written: retried next period"),
        }
        let cut =
            Utc::now() - chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::MAX);
        match store.prune_usage(cut).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(intervals = n, before = %cut, "usage intervals pruned"),
            Err(e) => tracing::warn!(error = %e, "usage pruning failed: retried next period"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_end_on_multiples_of_the_period() {
        let t = Utc.timestamp_opt(1_800_000_125, 500).single().unwrap();
        let end = period_end(t, Duration::from_secs(60));
        assert_eq!(end.timestamp(), 1_800_000_120);
        assert_eq!(end.timestamp_subsec_nanos(), 0);
        assert_eq!(period_end(end, Duration::from_secs(60)), end);
    }
}
