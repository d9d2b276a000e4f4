//! The periodic resync: every object is queued again, change or not, so that what the change
//! feed cannot see (a manager's state lost or altered behind our back, a wake-up missed) is
//! repaired.
//!
//! - The first pass, at start, queues everything at once: a fresh process (or one restarted
//!   after a crash) brings every object, and its managers' state, up to date as fast as it can.
//! - Later passes are spread over [`PACED_SHARE`] of the interval, a chunk every [`STEP`]: at
//!   100,000 objects a pass that queued everything at once kept both cores busy for tens of
//!   seconds on PostgreSQL (one read per settled object), and requests answered meanwhile took
//!   two to four times longer. Spread out, the same work is a steady trickle.
//! - A lagged change feed (changes were dropped) still queues everything at once
//!   ([`queue_everything`]): wake-ups were missed, they must not wait for a paced pass.
//! - A resync never cuts a backoff short and never queues an object that is already queued,
//!   delayed or running ([`Queue::add_if_idle`]).

use std::sync::Arc;
use std::time::Duration;

use osac_model::Kind;
use tokio::sync::watch;

use crate::queue::Queue;
use crate::reconcile::ReconcileCtx;

/// How often a paced pass queues its next chunk.
pub(crate) const STEP: Duration = Duration::from_millis(100);

/// The share of the interval a paced pass is spread over (the rest is slack, so a pass ends
/// before the next begins even when the store is slow to list).
pub(crate) const PACED_SHARE: f64 = 0.8;

/// Every object of every reconciled kind, by kind.
async fn every_object(ctx: &ReconcileCtx) -> Vec<(String, Kind)> {
    let mut all = Vec::new();
    for kind in Kind::ALL.into_iter().filter(|k| k.is_reconciled()) {
        match ctx.store.ids(kind).await {
            Ok(ids) => all.extend(ids.into_iter().map(|id| (id, kind))),
            Err(e) => tracing::warn!(%kind, error = %e, "resync listing failed"),
        }
    }
    all
}

/// Queues every object at once (start, lagged feed).
pub(crate) async fn queue_everything(ctx: &ReconcileCtx, queue: &Queue) {
    for (id, kind) in every_object(ctx).await {
        queue.add_if_idle(&id, kind);
    }
}

/// How many objects a paced pass of `total` objects over `span` queues per [`STEP`] (at
/// least one; everything at once when the span is shorter than a step).
pub(crate) fn chunk_size(total: usize, span: Duration) -> usize {
    let steps = (span.as_secs_f64() / STEP.as_secs_f64()).floor();
    if steps < 1.0 {
        return total.max(1);
    }
    // `total / steps` rounded up, in integers (`steps` ≥ 1 and at most `span` / 100 ms).
    let steps = steps as usize;
    total.div_ceil(steps).max(1)
}

/// Queues `objects` a chunk per [`STEP`], spread over `span`; stops early (false) on
/// shutdown.
pub(crate) async fn paced_pass(
    objects: Vec<(String, Kind)>,
    span: Duration,
    queue: &Queue,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    let chunk = chunk_size(objects.len(), span);
    let mut ticker = tokio::time::interval(STEP);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for part in objects.chunks(chunk) {
        tokio::select! {
            _ = ticker.tick() => {}
            changed = shutdown.changed() => if changed.is_err() || *shutdown.borrow() { return false },
        }
        for (id, kind) in part {
            queue.add_if_idle(id, *kind);
        }
    }
    true
}

/// Queues everything now, then again every `resync_interval`, each later pass paced.
pub(crate) async fn resync_loop(
    ctx: Arc<ReconcileCtx>,
    queue: Arc<Queue>,
    mut shutdown: watch::Receiver<bool>,
) {
    let period = ctx.config.resync_interval.max(Duration::from_millis(10));
    let span = period.mul_f64(PACED_SHARE);
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut first = true;
    loop {
        if *shutdown.borrow() {
            return;
        }
        tokio::select! {
            // The first tick fires at once: the initial full listing.
            _ = ticker.tick() => {}
            changed = shutdown.changed() => if changed.is_err() { return } else { continue },
        }
        if std::mem::take(&mut first) {
            queue_everything(&ctx, &queue).await;
        } else {
            let objects = every_object(&ctx).await;
            if !paced_pass(objects, span, &queue, &mut shutdown).await {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_spread_a_pass_over_its_span() {
        // 100,000 objects over 240 s (a 300 s interval): 2,400 steps of 42.
        assert_eq!(chunk_size(100_000, Duration::from_secs(240)), 42);
        assert_eq!(chunk_size(10, Duration::from_secs(240)), 1);
        assert_eq!(chunk_size(0, Duration::from_secs(240)), 1);
        // A span shorter than a step: everything at once.
        assert_eq!(chunk_size(500, Duration::from_millis(50)), 500);
        assert_eq!(chunk_size(500, Duration::from_millis(100)), 500);
    }

    /// A paced pass over 100 subnets spread over `span`, started in the background: its
    /// queue, the sender that stops it, and what it returns.
    fn start_pass(
        span: Duration,
    ) -> (
        Arc<Queue>,
        watch::Sender<bool>,
        tokio::task::JoinHandle<bool>,
    ) {
        let queue = Arc::new(Queue::new(
            Duration::from_millis(10),
            Duration::from_secs(1),
        ));
        let (stop, mut shutdown) = watch::channel(false);
        let objects: Vec<(String, Kind)> = (0..100)
            .map(|i| (format!("sn-{i}"), Kind::Subnet))
            .collect();
        let q = queue.clone();
        let pass = tokio::spawn(async move { paced_pass(objects, span, &q, &mut shutdown).await });
        (queue, stop, pass)
    }

    #[tokio::test(start_paused = true)]
    async fn a_paced_pass_queues_a_chunk_per_step() {
        let (queue, _stop, pass) = start_pass(Duration::from_secs(1));
        // Ten steps of ten: the first chunk at once, one more per 100 ms.
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(queue.ready_len(), 10, "only the first chunk at the start");
        tokio::time::sleep(Duration::from_millis(450)).await;
        assert_eq!(queue.ready_len(), 50, "five chunks after 451 ms");
        assert!(pass.await.unwrap_or(false), "the pass ran to its end");
        assert_eq!(queue.ready_len(), 100, "everything queued by the end");
    }

    #[tokio::test(start_paused = true)]
    async fn a_paced_pass_stops_on_shutdown() {
        let (queue, stop, pass) = start_pass(Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(250)).await;
        let _ = stop.send(true);
        assert!(!pass.await.unwrap_or(true), "the pass stopped");
        assert!(queue.ready_len() < 100, "the rest was not queued");
    }
}
