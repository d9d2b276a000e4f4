//! A small seeded generator (SplitMix64): the same seed gives the same topology and questions
//! on every machine, so a printed seed replays a run.

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        let span = u64::try_from(hi - lo + 1).unwrap_or(u64::MAX);
        lo + usize::try_from(self.next_u64() % span).unwrap_or(0)
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
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
