//! A seeded generator (`fastrand`'s, seeded): the same seed gives the same topology and questions
//! on every machine, so a printed seed replays a run.

pub struct Rng(fastrand::Rng);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(fastrand::Rng::with_seed(seed))
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        self.0.usize(lo..=hi)
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.0.u64(0..100) < percent
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len() - 1)]
    }
}

/// The run's seed: `OSAC_TRACE_SEED` when set (a replay), else a fresh one.
pub fn seed() -> u64 {
    if let Some(s) = std::env::var("OSAC_TRACE_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
    {
        return s;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    // Keep it short enough to retype.
    u64::try_from(now % 1_000_000_000).unwrap_or(1) ^ u64::from(std::process::id())
}
