//! The work queue: object ids waiting for a worker, with per-object exclusivity, dirty
//! tracking, delayed requeues and exponential backoff.
//!
//! A reconcile is not woken by its own write: when it ends converged ([`Schedule::Done`]), the
//! queue keeps the object's version it saw (read, or wrote last), and a change of the object
//! itself at or below that version ([`Queue::changed`]) does not run it again — the reconcile
//! that made the change already ran on it. Any other wake (a dependency changed, an API
//! enqueue, the resync, a newer version of the object) runs it as before.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use osac_model::Kind;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::metrics;

/// Metrics label of an id whose kind is not known yet (a reference seen on the feed).
const UNKNOWN_KIND: &str = "unknown";

/// What to do with an object after its reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Schedule {
    /// Converged: nothing until the next change or resync; backoff resets.
    Done,
    /// Run again after this delay; backoff resets.
    After(Duration),
    /// Run again after the object's next backoff delay.
    Backoff,
}

#[derive(Default)]
struct State {
    /// Ready to run, in order, with the metrics label they were counted under.
    ready: VecDeque<(String, &'static str)>,
    /// Ids in `ready`.
    queued: HashSet<String>,
    /// Ids to move to `ready` at the given instant.
    delayed: HashMap<String, Instant>,
    /// Ids a worker is reconciling.
    running: HashSet<String>,
    /// Running ids that changed meanwhile: run again when the current run ends.
    dirty: HashSet<String>,
    /// Running ids whose own row changed meanwhile, and to which version (run again unless
    /// the run ends converged at that version or later).
    changed_while_running: HashMap<String, i64>,
    /// The version of each object its last reconcile saw when it ended converged.
    converged_at: HashMap<String, i64>,
    /// Consecutive failures per id (backoff exponent).
    failures: HashMap<String, u32>,
    /// Known kinds, for metrics labels.
    kinds: HashMap<String, Kind>,
}

impl State {
    fn label(&self, id: &str) -> &'static str {
        self.kinds.get(id).map_or(UNKNOWN_KIND, |k| k.collection())
    }

    fn push_ready(&mut self, id: &str) {
        if self.queued.insert(id.to_string()) {
            let label = self.label(id);
            self.ready.push_back((id.to_string(), label));
            metrics::queue_depth_add(label, 1);
        }
    }

    fn promote_due(&mut self, now: Instant) {
        let due: Vec<String> = self
            .delayed
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            self.delayed.remove(&id);
            self.push_ready(&id);
        }
    }
}

/// The shared queue of one [`crate::Controllers`].
pub(crate) struct Queue {
    state: Mutex<State>,
    notify: Notify,
    backoff_base: Duration,
    backoff_cap: Duration,
}

impl Queue {
    pub(crate) fn new(backoff_base: Duration, backoff_cap: Duration) -> Self {
        Queue {
            state: Mutex::new(State::default()),
            notify: Notify::new(),
            backoff_base,
            backoff_cap,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent even if a holder panicked: every method finishes its
        // mutations before it could panic.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Something about `id` changed: run it now (or right after its current run). An immediate
    /// add supersedes a pending delayed retry; the failure count is kept.
    pub(crate) fn add(&self, id: &str, kind: Option<Kind>) {
        let mut s = self.lock();
        if let Some(k) = kind {
            s.kinds.insert(id.to_string(), k);
        }
        if s.running.contains(id) {
            s.dirty.insert(id.to_string());
            return;
        }
        s.delayed.remove(id);
        s.push_ready(id);
        drop(s);
        self.notify.notify_one();
    }

    /// The object `id` itself changed, to `version` when known: run it, unless its last
    /// reconcile ended converged at that version or later (its own write), or, while it
    /// runs, unless this run ends so.
    pub(crate) fn changed(&self, id: &str, kind: Kind, version: Option<i64>) {
        let Some(version) = version else {
            return self.add(id, Some(kind));
        };
        let mut s = self.lock();
        s.kinds.insert(id.to_string(), kind);
        if s.running.contains(id) {
            let seen = s
                .changed_while_running
                .entry(id.to_string())
                .or_insert(version);
            *seen = (*seen).max(version);
            return;
        }
        if s.converged_at.get(id).is_some_and(|at| *at >= version) {
            return;
        }
        s.delayed.remove(id);
        s.push_ready(id);
        drop(s);
        self.notify.notify_one();
    }

    /// Periodic resync: run `id` unless it is already queued, delayed or running (a resync must
    /// not cut a backoff short).
    pub(crate) fn add_if_idle(&self, id: &str, kind: Kind) {
        let mut s = self.lock();
        s.kinds.insert(id.to_string(), kind);
        if s.running.contains(id) || s.queued.contains(id) || s.delayed.contains_key(id) {
            return;
        }
        s.push_ready(id);
        drop(s);
        self.notify.notify_one();
    }

    /// The object is gone: forget its backoff and pending retry.
    pub(crate) fn forget(&self, id: &str) {
        let mut s = self.lock();
        s.delayed.remove(id);
        s.failures.remove(id);
        s.converged_at.remove(id);
        if !s.running.contains(id) && !s.queued.contains(id) {
            s.kinds.remove(id);
        }
    }

    /// Records the kind of an id (learned when a worker read the object).
    pub(crate) fn learn(&self, id: &str, kind: Kind) {
        self.lock().kinds.insert(id.to_string(), kind);
    }

    /// Waits for the next id to reconcile and marks it running; None once `shutdown` is set.
    pub(crate) async fn next(&self, shutdown: &mut watch::Receiver<bool>) -> Option<String> {
        loop {
            if *shutdown.borrow() {
                return None;
            }
            let next_due = {
                let mut s = self.lock();
                s.promote_due(Instant::now());
                if let Some((id, label)) = s.ready.pop_front() {
                    s.queued.remove(&id);
                    s.running.insert(id.clone());
                    metrics::queue_depth_add(label, -1);
                    let more = !s.ready.is_empty();
                    drop(s);
                    if more {
                        self.notify.notify_one();
                    }
                    return Some(id);
                }
                s.delayed.values().min().copied()
            };
            let sleep = async {
                match next_due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = self.notify.notified() => {}
                _ = sleep => {}
                changed = shutdown.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
            }
        }
    }

    /// A reconcile of `id` finished; schedules what comes next. `seen` is the object's version
    /// the reconcile saw last (read, or written), when known.
    pub(crate) fn done(&self, id: &str, schedule: Schedule, seen: Option<i64>) {
        let mut s = self.lock();
        s.running.remove(id);
        let converged_at = seen.filter(|_| schedule == Schedule::Done);
        match converged_at {
            Some(at) => s.converged_at.insert(id.to_string(), at),
            None => s.converged_at.remove(id),
        };
        let changed_since = s
            .changed_while_running
            .remove(id)
            .is_some_and(|version| converged_at.is_none_or(|at| at < version));
        let now = Instant::now();
        match schedule {
            Schedule::Done => {
                s.failures.remove(id);
            }
            Schedule::After(d) => {
                s.failures.remove(id);
                s.delayed.insert(id.to_string(), now + d);
            }
            Schedule::Backoff => {
                let n = s.failures.entry(id.to_string()).or_insert(0);
                *n = n.saturating_add(1);
                let delay = backoff(self.backoff_base, self.backoff_cap, *n);
                s.delayed.insert(id.to_string(), now + delay);
            }
        }
        let rerun = s.dirty.remove(id) | changed_since;
        if rerun {
            s.delayed.remove(id);
            s.push_ready(id);
        }
        drop(s);
        // Wake a worker either way: a new delayed entry may be due before what they sleep on.
        self.notify.notify_one();
    }

    /// Ids waiting for a worker (tests and debugging).
    #[cfg(test)]
    pub(crate) fn ready_len(&self) -> usize {
        self.lock().ready.len()
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // Items never run: take them out of the (process-wide) depth gauge.
        for (_, label) in &self.lock().ready {
            metrics::queue_depth_add(label, -1);
        }
    }
}

/// Delay after `failures` consecutive failures: base, 2·base, 4·base, … capped.
pub(crate) fn backoff(base: Duration, cap: Duration, failures: u32) -> Duration {
    let factor = 2u32.saturating_pow(failures.saturating_sub(1));
    base.saturating_mul(factor).min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let b = Duration::from_millis(100);
        let cap = Duration::from_secs(1);
        assert_eq!(backoff(b, cap, 1), b);
        assert_eq!(backoff(b, cap, 2), Duration::from_millis(200));
        assert_eq!(backoff(b, cap, 4), Duration::from_millis(800));
        assert_eq!(backoff(b, cap, 5), cap);
        assert_eq!(backoff(b, cap, 500), cap);
    }

    #[tokio::test]
    async fn running_object_is_marked_dirty_not_run_twice() {
        let q = Queue::new(Duration::from_millis(10), Duration::from_secs(1));
        let (_tx, mut rx) = watch::channel(false);
        q.add("a", Some(Kind::Subnet));
        assert_eq!(q.next(&mut rx).await.as_deref(), Some("a"));
        q.add("a", None);
        assert_eq!(q.ready_len(), 0, "a running object is not queued again");
        q.done("a", Schedule::Done, None);
        assert_eq!(q.ready_len(), 1, "dirty object runs again after its run");
        assert_eq!(q.next(&mut rx).await.as_deref(), Some("a"));
        q.done("a", Schedule::Done, None);
        assert_eq!(q.ready_len(), 0);
    }

    #[tokio::test]
    async fn backoff_delays_and_add_supersedes() {
        let q = Queue::new(Duration::from_millis(50), Duration::from_secs(1));
        let (_tx, mut rx) = watch::channel(false);
        q.add("a", Some(Kind::Subnet));
        assert_eq!(q.next(&mut rx).await.as_deref(), Some("a"));
        q.done("a", Schedule::Backoff, None);
        let start = Instant::now();
        assert_eq!(q.next(&mut rx).await.as_deref(), Some("a"));
        assert!(start.elapsed() >= Duration::from_millis(45));
        q.done("a", Schedule::Backoff, None);
        q.add_if_idle("a", Kind::Subnet);
        assert_eq!(q.ready_len(), 0, "resync does not cut a backoff short");
        q.add("a", None);
        assert_eq!(q.ready_len(), 1, "a change does");
    }

    #[tokio::test]
    async fn a_converged_reconcile_is_not_woken_by_its_own_write() {
        let q = Queue::new(Duration::from_millis(10), Duration::from_secs(1));
        let (_tx, mut rx) = watch::channel(false);
        q.add("a", Some(Kind::Subnet));
        assert_eq!(q.next(&mut rx).await.as_deref(), Some("a"));
        // The run writes version 2; its change arrives while it still runs.
        q.changed("a", Kind::Subnet, Some(2));
        q.done("a", Schedule::Done, Some(2));
        assert_eq!(q.ready_len(), 0, "its own write does not run it again");
        // The same change arriving after the run ended does not either.
        q.changed("a", Kind::Subnet, Some(2));
        assert_eq!(q.ready_len(), 0);
        // A newer version (someone else's write) does.
        q.changed("a", Kind::Subnet, Some(3));
        assert_eq!(q.ready_len(), 1, "a newer version runs it");
        assert_eq!(q.next(&mut rx).await.as_deref(), Some("a"));
        // A dependency's change wakes it whatever its version.
        q.add("a", None);
        q.done("a", Schedule::Done, Some(3));
        assert_eq!(q.ready_len(), 1, "a dependency's change runs it again");
    }

    #[tokio::test]
    async fn only_a_converged_run_at_that_version_absorbs_a_change() {
        let q = Queue::new(Duration::from_millis(10), Duration::from_secs(1));
        let (_tx, mut rx) = watch::channel(false);
        q.add("a", Some(Kind::Subnet));
        assert_eq!(q.next(&mut rx).await.as_deref(), Some("a"));
        // Version 3 arrives while the run, which saw version 2, is still going.
        q.changed("a", Kind::Subnet, Some(3));
        q.done("a", Schedule::Done, Some(2));
        assert_eq!(
            q.ready_len(),
            1,
            "a version the run did not see runs it again"
        );
        assert_eq!(q.next(&mut rx).await.as_deref(), Some("a"));
        // A run that does not end converged keeps nothing: its own write wakes it.
        q.changed("a", Kind::Subnet, Some(4));
        q.done("a", Schedule::After(Duration::from_secs(60)), Some(4));
        assert_eq!(q.ready_len(), 1, "not converged: the change runs it");
        assert_eq!(q.next(&mut rx).await.as_deref(), Some("a"));
        q.done("a", Schedule::Done, Some(4));
        // A change of unknown version always runs it.
        q.changed("a", Kind::Subnet, None);
        assert_eq!(q.ready_len(), 1, "unknown version: run");
    }

    #[tokio::test]
    async fn shutdown_stops_waiting_workers() {
        let q = std::sync::Arc::new(Queue::new(
            Duration::from_millis(10),
            Duration::from_secs(1),
        ));
        let (tx, mut rx) = watch::channel(false);
        let q2 = q.clone();
        let waiter = tokio::spawn(async move { q2.next(&mut rx).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let _ = tx.send(true);
        assert_eq!(waiter.await.ok().flatten(), None);
    }
}
