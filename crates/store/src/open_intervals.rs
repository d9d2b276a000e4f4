//! The open usage intervals of recently metered objects, kept in memory by a store whose
//! writes are serial (SQLite), so that closing an interval needs no statement to find it.
//!
//! Exact by construction: only a committed transaction changes the map, while it still holds
//! the store's write lock (no other transaction can change an interval meanwhile); what a
//! transaction read of them (under that lock) comes with its changes. An entry is only ever an open interval; an
//! object without one is simply absent (absence means "not known", and the caller reads).
//! Bounded: when full, half of the entries are dropped and read again when needed.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::metering::OpenInterval;

/// How many open intervals are kept at most.
const CAPACITY: usize = 32_768;

/// The committed open intervals known, by object id.
#[derive(Debug, Default)]
pub(crate) struct OpenIntervals {
    map: Mutex<HashMap<String, OpenInterval>>,
}

impl OpenIntervals {
    /// The object's open interval, when known.
    pub(crate) fn get(&self, object_id: &str) -> Option<OpenInterval> {
        self.lock().get(object_id).cloned()
    }

    /// Applies what a committed transaction did, in its order: each object's open interval
    /// after it (None: none open any more).
    pub(crate) fn committed(&self, changes: Vec<(String, Option<OpenInterval>)>) {
        let mut map = self.lock();
        for (object_id, open) in changes {
            match open {
                Some(interval) => {
                    make_room(&mut map);
                    map.insert(object_id, interval);
                }
                None => {
                    map.remove(&object_id);
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, OpenInterval>> {
        // A panic while the map was held leaves it as it was between two statements: usable.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Drops half of the entries when the map is full.
fn make_room(map: &mut HashMap<String, OpenInterval>) {
    if map.len() >= CAPACITY {
        let drop: Vec<String> = map.keys().take(CAPACITY / 2).cloned().collect();
        for id in drop {
            map.remove(&id);
        }
    }
}

/// The open intervals a transaction changed, latest last, until it commits.
#[derive(Debug, Default)]
pub(crate) struct PendingIntervals(Vec<(String, Option<OpenInterval>)>);

impl PendingIntervals {
    /// The object's open interval after this transaction's last change of it (Some(None):
    /// it closed it), or None when the transaction did not change it.
    pub(crate) fn get(&self, object_id: &str) -> Option<Option<OpenInterval>> {
        self.0
            .iter()
            .rev()
            .find(|(id, _)| id == object_id)
            .map(|(_, open)| open.clone())
    }

    pub(crate) fn push(&mut self, object_id: &str, open: Option<OpenInterval>) {
        self.0.push((object_id.to_string(), open));
    }

    /// How many changes are recorded (a savepoint records it).
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn truncate(&mut self, len: usize) {
        self.0.truncate(len);
    }

    pub(crate) fn take(&mut self) -> Vec<(String, Option<OpenInterval>)> {
        std::mem::take(&mut self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use osac_model::metering::Dimensions;

    fn open(object: &str, ordinal: i64) -> OpenInterval {
        OpenInterval {
            id: format!("{object}.{ordinal}"),
            signature: "s".into(),
            started_us: 1,
            dims: Dimensions {
                object: object.into(),
                ..Default::default()
            },
        }
    }

    #[test]
    fn a_commit_replaces_and_removes_in_order() {
        let known = OpenIntervals::default();
        known.committed(vec![
            ("a".into(), Some(open("a", 1))),
            ("a".into(), None),
            ("a".into(), Some(open("a", 3))),
            ("b".into(), Some(open("b", 2))),
            ("b".into(), None),
        ]);
        assert_eq!(known.get("a").map(|o| o.id), Some("a.3".into()));
        assert!(known.get("b").is_none());
    }

    #[test]
    fn the_latest_pending_change_wins_and_a_savepoint_undoes() {
        let mut pending = PendingIntervals::default();
        assert!(pending.get("a").is_none());
        pending.push("a", Some(open("a", 2)));
        let mark = pending.len();
        pending.push("a", None);
        assert_eq!(pending.get("a"), Some(None));
        pending.truncate(mark);
        assert_eq!(pending.get("a").flatten().map(|o| o.id), Some("a.2".into()));
    }

    #[test]
    fn a_full_map_drops_half() {
        let known = OpenIntervals::default();
        for i in 0..CAPACITY + 1 {
            let id = format!("o{i}");
            known.committed(vec![(id.clone(), Some(open(&id, 1)))]);
        }
        let kept = known.lock().len();
        assert!(kept <= CAPACITY / 2 + 1, "{kept}");
        assert!(
            known.get(&format!("o{CAPACITY}")).is_some(),
            "the newest is kept"
        );
    }
}
