//! Small statistics and formatting helpers for the report.

use std::time::Duration;

/// Milliseconds of a duration.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Microseconds of a duration.
pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Mean of a slice of durations (zero when empty).
pub fn mean(v: &[Duration]) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.iter().sum::<Duration>() / v.len() as u32
}

/// The `p`-th percentile (0–100, nearest rank) of `v`.
pub fn percentile(v: &[Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    let mut s = v.to_vec();
    s.sort();
    let rank = ((p / 100.0) * s.len() as f64).ceil() as usize;
    s[rank.clamp(1, s.len()) - 1]
}

/// "p50 a / p90 b / p99 c / max d ms (mean e, n=f)".
pub fn summary_ms(v: &[Duration]) -> String {
    format!(
        "p50 {:.2} / p90 {:.2} / p99 {:.2} / max {:.2} ms (mean {:.2}, n={})",
        ms(percentile(v, 50.0)),
        ms(percentile(v, 90.0)),
        ms(percentile(v, 99.0)),
        ms(percentile(v, 100.0)),
        ms(mean(v)),
        v.len()
    )
}

/// Like [`summary_ms`] in microseconds.
pub fn summary_us(v: &[Duration]) -> String {
    format!(
        "p50 {:.1} / p90 {:.1} / p99 {:.1} / max {:.1} µs (mean {:.1}, n={})",
        us(percentile(v, 50.0)),
        us(percentile(v, 90.0)),
        us(percentile(v, 99.0)),
        us(percentile(v, 100.0)),
        us(mean(v)),
        v.len()
    )
}

/// Mean of the first `k` and of the last `k` samples, and last/first.
pub fn first_last(v: &[Duration], k: usize) -> (Duration, Duration, f64) {
    let k = k.min(v.len()).max(1);
    if v.is_empty() {
        return (Duration::ZERO, Duration::ZERO, f64::NAN);
    }
    let first = mean(&v[..k]);
    let last = mean(&v[v.len() - k..]);
    (first, last, last.as_secs_f64() / first.as_secs_f64())
}

/// Mean of each consecutive block of `block` samples, as "1–500: x ms, …" (the growth curve).
pub fn curve_ms(v: &[Duration], block: usize) -> String {
    v.chunks(block.max(1))
        .enumerate()
        .map(|(i, c)| {
            let from = i * block + 1;
            format!("{}–{}: {:.1}", from, from + c.len() - 1, ms(mean(c)))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// 12,345 style thousands separators.
pub fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_ratios() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&v, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&v, 100.0), Duration::from_millis(100));
        let (a, b, r) = first_last(&v, 10);
        assert_eq!(a, Duration::from_micros(5500));
        assert_eq!(b, Duration::from_micros(95500));
        assert!((r - 95.5 / 5.5).abs() < 1e-9);
        assert_eq!(thousands(5000), "5,000");
        assert_eq!(thousands(123), "123");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
