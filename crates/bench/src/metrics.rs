//! Reading the controllers' Prometheus histograms in-process (the server runs in this process,
//! its metrics are in the default registry) and taking differences between two snapshots.

use std::collections::BTreeMap;

/// `labels → (count, sum in seconds)` of every series of one histogram family.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histograms(pub BTreeMap<String, (u64, f64)>);

impl Histograms {
    /// The current values of the histogram family `name`; each series is keyed by its label
    /// values in the order `label_names` gives (joined with `/`).
    pub fn now(name: &str, label_names: &[&str]) -> Self {
        let mut out = BTreeMap::new();
        for family in prometheus::gather() {
            if family.name() != name {
                continue;
            }
            for m in family.get_metric() {
                let key = label_names
                    .iter()
                    .map(|l| {
                        m.get_label()
                            .iter()
                            .find(|p| p.name() == *l)
                            .map_or("?", |p| p.value())
                            .to_string()
                    })
                    .collect::<Vec<_>>()
                    .join("/");
                let h = m.get_histogram();
                out.insert(key, (h.get_sample_count(), h.get_sample_sum()));
            }
        }
        Self(out)
    }

    /// What was observed since `before` (series without new observations are left out).
    pub fn since(&self, before: &Self) -> Self {
        Self(
            self.0
                .iter()
                .filter_map(|(k, &(n, s))| {
                    let (n0, s0) = before.0.get(k).copied().unwrap_or((0, 0.0));
                    (n > n0).then(|| (k.clone(), (n - n0, s - s0)))
                })
                .collect(),
        )
    }

    /// `(key, count, total seconds, mean seconds)`, largest total first.
    pub fn by_total(&self) -> Vec<(String, u64, f64, f64)> {
        let mut v: Vec<_> = self
            .0
            .iter()
            .map(|(k, &(n, s))| (k.clone(), n, s, s / n.max(1) as f64))
            .collect();
        v.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_and_order() {
        let before = Histograms(BTreeMap::from([
            ("vm/a".to_string(), (2, 1.0)),
            ("vm/b".to_string(), (1, 0.5)),
        ]));
        let after = Histograms(BTreeMap::from([
            ("vm/a".to_string(), (4, 2.0)),
            ("vm/b".to_string(), (1, 0.5)),
            ("vm/c".to_string(), (1, 3.0)),
        ]));
        let d = after.since(&before);
        assert_eq!(
            d.by_total(),
            vec![
                ("vm/c".to_string(), 1, 3.0, 3.0),
                ("vm/a".to_string(), 2, 1.0, 0.5)
            ]
        );
    }
}
