//! When the export warns: once when records pile up or the broker has been away for a while,
//! and once (info) when it is back to normal — never once per retry.

use std::time::{Duration, Instant};

/// What one round of the export found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Observation {
    pub now: Instant,
    /// The broker answered (published, or had nothing to publish while connected).
    pub reachable: bool,
    /// Records waiting in the outbox.
    pub pending: i64,
}

/// A message to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Notice {
    /// The broker has been unreachable for `down_for`.
    Unreachable { down_for: Duration, pending: i64 },
    /// More records wait than the threshold, the broker answering.
    Backlog { pending: i64 },
    /// Back to normal after a warning.
    Recovered { pending: i64 },
}

/// Remembers whether a warning is out: a warning is logged once until the export is back to
/// normal (broker reachable, at most half the pending threshold waiting), which is then logged
/// once too. Half the threshold, so a backlog hovering at the threshold does not flap.
#[derive(Debug)]
pub(crate) struct Alarm {
    warn_pending: i64,
    warn_unreachable: Duration,
    down_since: Option<Instant>,
    warned: bool,
}

impl Alarm {
    pub fn new(warn_pending: i64, warn_unreachable: Duration) -> Self {
        Self {
            warn_pending,
            warn_unreachable,
            down_since: None,
            warned: false,
        }
    }

    pub fn observe(&mut self, o: Observation) -> Option<Notice> {
        if o.reachable {
            self.down_since = None;
        } else {
            self.down_since.get_or_insert(o.now);
        }
        let down_for = self.down_since.map(|since| o.now.duration_since(since));
        if self.warned {
            if o.reachable && o.pending <= self.warn_pending / 2 {
                self.warned = false;
                return Some(Notice::Recovered { pending: o.pending });
            }
            return None;
        }
        match down_for {
            Some(down_for) if down_for >= self.warn_unreachable => {
                self.warned = true;
                Some(Notice::Unreachable {
                    down_for,
                    pending: o.pending,
                })
            }
            _ if o.pending > self.warn_pending => {
                self.warned = true;
                Some(Notice::Backlog { pending: o.pending })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start: Instant, secs: u64, reachable: bool, pending: i64) -> Observation {
        Observation {
            now: start + Duration::from_secs(secs),
            reachable,
            pending,
        }
    }

    #[test]
    fn one_warning_per_outage_and_one_recovery() {
        let t = Instant::now();
        let mut a = Alarm::new(100, Duration::from_secs(60));
        let notices: Vec<_> = [
            at(t, 0, true, 0),
            at(t, 1, false, 5),
            at(t, 30, false, 10),
            at(t, 61, false, 20),
            at(t, 62, false, 500),
            at(t, 90, false, 900),
            at(t, 91, true, 60),
            at(t, 92, true, 40),
            at(t, 93, true, 0),
        ]
        .into_iter()
        .filter_map(|o| a.observe(o))
        .collect();
        assert_eq!(
            notices,
            [
                Notice::Unreachable {
                    down_for: Duration::from_secs(60),
                    pending: 20
                },
                Notice::Recovered { pending: 40 },
            ]
        );
    }

    #[test]
    fn backlog_warns_once_without_flapping_at_the_threshold() {
        let t = Instant::now();
        let mut a = Alarm::new(100, Duration::from_secs(60));
        let notices: Vec<_> = [101, 99, 101, 80, 50, 101]
            .into_iter()
            .enumerate()
            .filter_map(|(i, p)| a.observe(at(t, i as u64, true, p)))
            .collect();
        assert_eq!(
            notices,
            [
                Notice::Backlog { pending: 101 },
                Notice::Recovered { pending: 50 },
                Notice::Backlog { pending: 101 },
            ]
        );
    }

    #[test]
    fn a_short_outage_says_nothing() {
        let t = Instant::now();
        let mut a = Alarm::new(100, Duration::from_secs(60));
        for o in [at(t, 0, false, 1), at(t, 59, false, 2), at(t, 60, true, 0)] {
            assert_eq!(a.observe(o), None);
        }
        // The outage clock restarts after the broker answered.
        assert_eq!(a.observe(at(t, 100, false, 0)), None);
        assert_eq!(a.observe(at(t, 159, false, 0)), None);
    }
}
