//! Coalescing the events of refused requests (a create over a quota, an exhausted address
//! pool), so a tenant hammering a limit cannot write without bound.
//!
//! Rules:
//! - At most one event per tenant (by id), reason and quota (or kind) per
//!   [`REFUSAL_EVENT_INTERVAL`]; refusals in between are counted, and the next event written
//!   says how many there were ("N more refused since the previous event").
//! - Counted per server process (each replica coalesces its own refusals); bounded: when more
//!   than [`MAX_KEYS`] keys are tracked, those whose interval is over are forgotten.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One event per tenant and quota per this interval.
pub const REFUSAL_EVENT_INTERVAL: Duration = Duration::from_secs(60);

/// Keys tracked before expired ones are forgotten.
const MAX_KEYS: usize = 10_000;

/// The current interval of one key: when it started and how many refusals it did not record.
struct Window {
    started: Instant,
    unrecorded: u64,
}

/// Which refusals get an event.
pub(crate) struct RefusalEvents {
    interval: Duration,
    windows: Mutex<HashMap<String, Window>>,
}

impl Default for RefusalEvents {
    fn default() -> Self {
        Self::every(REFUSAL_EVENT_INTERVAL)
    }
}

impl RefusalEvents {
    pub(crate) fn every(interval: Duration) -> Self {
        RefusalEvents {
            interval,
            windows: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Window>> {
        // Counts only: a poisoned map is still usable.
        self.windows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A refusal under `key`: Some(refusals not recorded since the previous event) when this
    /// one gets an event, None when it is only counted.
    pub(crate) fn admit(&self, key: &str) -> Option<u64> {
        let now = Instant::now();
        let mut windows = self.lock();
        if windows.len() >= MAX_KEYS {
            let interval = self.interval;
            windows.retain(|_, w| now.duration_since(w.started) < interval);
        }
        match windows.get_mut(key) {
            Some(w) if now.duration_since(w.started) < self.interval => {
                w.unrecorded += 1;
                None
            }
            Some(w) => {
                let before = w.unrecorded;
                *w = Window {
                    started: now,
                    unrecorded: 0,
                };
                Some(before)
            }
            None => {
                windows.insert(
                    key.to_string(),
                    Window {
                        started: now,
                        unrecorded: 0,
                    },
                );
                Some(0)
            }
        }
    }
}

/// The message of a refusal event that follows `unrecorded` refusals without one.
pub(crate) fn with_count(message: &str, unrecorded: u64) -> String {
    if unrecorded == 0 {
        message.to_string()
    } else {
        format!("{message} ({unrecorded} more refused since the previous event)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_event_per_key_and_interval_with_the_count() {
        let r = RefusalEvents::every(Duration::from_millis(200));
        assert_eq!(r.admit("t1/q"), Some(0));
        for _ in 0..500 {
            assert_eq!(r.admit("t1/q"), None);
        }
        assert_eq!(r.admit("t2/q"), Some(0), "another tenant has its own");
        assert_eq!(r.admit("t1/other"), Some(0), "another quota has its own");
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(r.admit("t1/q"), Some(500));
        assert_eq!(r.admit("t1/q"), None);
        assert_eq!(with_count("m", 0), "m");
        assert_eq!(
            with_count("m", 3),
            "m (3 more refused since the previous event)"
        );
    }
}
