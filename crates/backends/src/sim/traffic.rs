//! The sim fabric's traffic model: deterministic byte counters of the NAT paths that tests
//! drive. Each DNAT (ExternalIPAttachment) and SNAT (NATGateway) path of the model has a
//! counter that starts at zero when the path appears; tests add bytes to it
//! ([`SimFabric::inject_traffic`]) and simulate a dataplane rebuild
//! ([`SimFabric::reset_counters`]: every counter starts again from zero under a new epoch).
//! A path that is removed loses its counter; a path created again starts from zero.

use std::collections::{BTreeMap, BTreeSet};

use super::fabric::SimFabric;
use crate::fabric_model::Record;
use crate::types::{NatPathCounter, NatPathKind};

/// One counter of the model.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SimCounter {
    ingress: u64,
    egress: u64,
    epoch: u64,
}

/// Every counter, by path.
#[derive(Debug, Default)]
pub(crate) struct SimTraffic {
    counters: BTreeMap<(NatPathKind, String), SimCounter>,
    /// Bumped by every reset; a counter created after it carries it as its epoch.
    generation: u64,
}

/// A path of the model the counters can be about.
fn paths(fabric: &SimFabric) -> BTreeSet<(NatPathKind, String)> {
    let state = fabric.engine_read();
    state
        .records
        .values()
        .filter_map(|r| match r {
            Record::Dnat(d) => Some((NatPathKind::ExternalIpAttachment, d.attachment_id.clone())),
            Record::Snat(s) => Some((NatPathKind::NatGateway, s.nat_gateway_id.clone())),
            _ => None,
        })
        .collect()
}

impl SimTraffic {
    /// Drops the counters of paths that no longer exist and adds zeroed ones for new paths.
    fn sync(&mut self, live: &BTreeSet<(NatPathKind, String)>) {
        self.counters.retain(|k, _| live.contains(k));
        for key in live {
            let generation = self.generation;
            self.counters.entry(key.clone()).or_insert(SimCounter {
                epoch: generation,
                ..SimCounter::default()
            });
        }
    }
}

impl SimFabric {
    /// Adds `ingress` and `egress` bytes to the counter of a NAT path; false (nothing counted)
    /// when the model has no such path.
    pub fn inject_traffic(
        &self,
        kind: NatPathKind,
        object_id: &str,
        ingress: u64,
        egress: u64,
    ) -> bool {
        let live = paths(self);
        let mut traffic = self.traffic();
        traffic.sync(&live);
        match traffic.counters.get_mut(&(kind, object_id.to_string())) {
            Some(c) => {
                c.ingress = c.ingress.saturating_add(ingress);
                c.egress = c.egress.saturating_add(egress);
                true
            }
            None => false,
        }
    }

    /// Simulates a dataplane rebuild: every counter starts again from zero, under a new epoch.
    pub fn reset_counters(&self) {
        let mut traffic = self.traffic();
        traffic.generation += 1;
        let generation = traffic.generation;
        for c in traffic.counters.values_mut() {
            *c = SimCounter {
                epoch: generation,
                ..SimCounter::default()
            };
        }
    }

    /// The counters of every NAT path of the model, sorted by kind and object id.
    pub(crate) fn counters(&self) -> Vec<NatPathCounter> {
        let live = paths(self);
        let mut traffic = self.traffic();
        traffic.sync(&live);
        traffic
            .counters
            .iter()
            .map(|((kind, object_id), c)| NatPathCounter {
                kind: *kind,
                object_id: object_id.clone(),
                ingress_bytes: c.ingress,
                egress_bytes: c.egress,
                epoch: c.epoch.to_string(),
            })
            .collect()
    }
}
