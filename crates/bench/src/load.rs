//! Running N operations over C concurrent clients and summarising their latencies.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

/// What a concurrent run produced.
pub struct Run<T> {
    /// One entry per operation, in operation order; `None` where it failed.
    pub results: Vec<Option<T>>,
    /// Latency of every operation (failed ones too), sorted ascending.
    pub latencies: Latencies,
    /// Wall time from the first operation's start to the last one's end.
    pub elapsed: Duration,
    pub errors: usize,
    pub first_error: Option<String>,
}

impl<T> Run<T> {
    /// Operations per second over the whole run.
    pub fn rate(&self) -> f64 {
        self.results.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The successful results.
    pub fn ok(self) -> impl Iterator<Item = T> {
        self.results.into_iter().flatten()
    }
}

/// Runs operations `0..n`, `clients` at a time (each client takes the next index when its
/// previous operation finished), timing each one.
pub async fn run<T, F, Fut>(n: usize, clients: usize, op: F) -> Run<T>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    run_for(n, clients, None, op).await
}

/// Like [`run`], but no operation starts after `limit` has passed (so a slow measure cannot
/// take forever); `results` then holds only the operations that ran.
pub async fn run_for<T, F, Fut>(n: usize, clients: usize, limit: Option<Duration>, op: F) -> Run<T>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    let op = Arc::new(op);
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let deadline = limit.map(|l| start + l);
    let mut set = JoinSet::new();
    for _ in 0..clients.clamp(1, n.max(1)) {
        let op = op.clone();
        let next = next.clone();
        set.spawn(async move {
            let mut out = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n || deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let t = Instant::now();
                let r = op(i).await;
                out.push((i, t.elapsed(), r));
            }
            out
        });
    }
    let mut all = Vec::with_capacity(n);
    while let Some(done) = set.join_next().await {
        match done {
            Ok(part) => all.extend(part),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
    finish(all, start.elapsed())
}

type Timed<T> = (usize, Duration, anyhow::Result<T>);

fn finish<T>(mut all: Vec<Timed<T>>, elapsed: Duration) -> Run<T> {
    all.sort_by_key(|(i, _, _)| *i);
    let mut latencies = Vec::with_capacity(all.len());
    let mut results = Vec::with_capacity(all.len());
    let mut errors = 0;
    let mut first_error = None;
    for (_, d, r) in all {
        latencies.push(d);
        match r {
            Ok(v) => results.push(Some(v)),
            Err(e) => {
                errors += 1;
                first_error.get_or_insert_with(|| format!("{e:#}"));
                results.push(None);
            }
        }
    }
    Run {
        results,
        latencies: Latencies::new(latencies),
        elapsed,
        errors,
        first_error,
    }
}

/// How operations are offered: by a fixed number of clients (closed loop: the next starts when
/// one ends, so the load adapts to the server) or at a fixed rate (open loop: operations start
/// on schedule whatever the server does, so latency is measured below saturation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    Clients(usize),
    /// Operations started per second.
    Rate(f64),
}

impl Pace {
    /// "32 clients" / "offered 200/s".
    pub fn describe(&self) -> String {
        match self {
            Pace::Clients(c) => format!("{c} clients"),
            Pace::Rate(r) => format!("offered {r:.0}/s"),
        }
    }
}

/// Runs `0..n` at `pace`; no operation starts after `limit`.
pub async fn drive<T, F, Fut>(n: usize, pace: Pace, limit: Option<Duration>, op: F) -> Run<T>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    match pace {
        Pace::Clients(c) => run_for(n, c, limit, op).await,
        Pace::Rate(r) => open_loop(n, r, limit, op).await,
    }
}

/// Starts operation `i` at `i / rate` seconds after the start (each in its own task, however
/// many are still running) and times it from that scheduled moment, so a server that falls
/// behind shows its queueing in the latencies (no coordinated omission).
pub async fn open_loop<T, F, Fut>(n: usize, rate: f64, limit: Option<Duration>, op: F) -> Run<T>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    let op = Arc::new(op);
    let start = Instant::now();
    let deadline = limit.map(|l| start + l);
    let interval = Duration::from_secs_f64(1.0 / rate.max(1e-3));
    let mut set = JoinSet::new();
    for i in 0..n {
        let scheduled = start + interval.mul_f64(i as f64);
        if deadline.is_some_and(|d| scheduled >= d) {
            break;
        }
        tokio::time::sleep_until(scheduled.into()).await;
        let op = op.clone();
        set.spawn(async move {
            let r = op(i).await;
            (i, scheduled.elapsed(), r)
        });
    }
    let mut all = Vec::with_capacity(n);
    while let Some(done) = set.join_next().await {
        match done {
            Ok(one) => all.push(one),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
    finish(all, start.elapsed())
}

/// Sorted latencies.
#[derive(Debug, Clone, Default)]
pub struct Latencies(Vec<Duration>);

impl Latencies {
    pub fn new(mut v: Vec<Duration>) -> Self {
        v.sort();
        Self(v)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The q-quantile (nearest rank), in milliseconds.
    pub fn pct(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        let rank = ((q * self.0.len() as f64).ceil() as usize).clamp(1, self.0.len());
        ms(self.0[rank - 1])
    }

    pub fn max(&self) -> f64 {
        self.0.last().map_or(f64::NAN, |d| ms(*d))
    }

    pub fn mean(&self) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        ms(self.0.iter().sum::<Duration>()) / self.0.len() as f64
    }

    /// "p50 a / p90 b / p99 c / max d ms".
    pub fn summary(&self) -> String {
        format!(
            "p50 {:.2} / p90 {:.2} / p99 {:.2} / max {:.2} ms (mean {:.2}, n={})",
            self.pct(0.50),
            self.pct(0.90),
            self.pct(0.99),
            self.max(),
            self.mean(),
            self.len()
        )
    }
}

/// A duration in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let l = Latencies::new((1..=100).rev().map(Duration::from_millis).collect());
        assert_eq!(l.pct(0.5), 50.0);
        assert_eq!(l.pct(0.99), 99.0);
        assert_eq!(l.pct(1.0), 100.0);
        assert_eq!(l.max(), 100.0);
        assert!(Latencies::default().pct(0.5).is_nan());
    }

    #[tokio::test]
    async fn runs_every_index_once_and_counts_errors() {
        let r = run(50, 7, |i| async move {
            if i % 10 == 0 {
                anyhow::bail!("bad {i}")
            }
            Ok(i)
        })
        .await;
        assert_eq!(r.results.len(), 50);
        assert_eq!(r.errors, 5);
        assert_eq!(
            r.first_error.as_deref().map(|e| e.starts_with("bad")),
            Some(true)
        );
        assert_eq!(r.results[1], Some(1));
        assert_eq!(r.results[49], Some(49));
        assert_eq!(r.latencies.len(), 50);
    }

    #[tokio::test]
    async fn stops_starting_operations_after_the_limit() {
        let r = run_for(1_000_000, 2, Some(Duration::from_millis(50)), |_| async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok(())
        })
        .await;
        assert!(r.results.len() < 100, "{}", r.results.len());
        assert!(!r.results.is_empty());
    }
}
