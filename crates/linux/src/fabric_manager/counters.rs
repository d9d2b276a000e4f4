//! Reading the NAT paths' byte counters ([`FabricManager::nat_counters`]): one
//! `nft -j list counters table inet <vn table>` per router namespace that has a NAT path,
//! never one command per counter. The counters themselves are declared with the paths (see
//! [`super::render::meter`]).
//!
//! [`FabricManager::nat_counters`]: osac_backends::FabricManager::nat_counters

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;

use osac_backends::fabric_model::Record;
use osac_backends::{NatPathCounter, NatPathKind, OpError};

use super::Inner;
use super::render::meter::{self, MeterPath};
use crate::cmd;
use crate::names;

/// The NAT paths of one VN: (kind, object id).
type Paths = Vec<(NatPathKind, String)>;

impl Inner {
    /// Every NAT path of the model, by VirtualNetwork.
    pub(crate) fn nat_paths(&self) -> BTreeMap<String, Paths> {
        let mut by_vn: BTreeMap<String, Paths> = BTreeMap::new();
        for record in self.model.state.records() {
            let (vn, path) = match record {
                Record::Dnat(d) => (
                    &d.virtual_network_id,
                    (NatPathKind::ExternalIpAttachment, d.attachment_id.clone()),
                ),
                Record::Snat(s) => (
                    &s.virtual_network_id,
                    (NatPathKind::NatGateway, s.nat_gateway_id.clone()),
                ),
                _ => continue,
            };
            by_vn.entry(vn.clone()).or_default().push(path);
        }
        by_vn
    }
}

/// Reads the counters of every path in `by_vn`. A router namespace that is missing (being
/// rebuilt) contributes nothing; a path whose counters are missing too (created before this
/// version, or removed by hand: the next resync declares them again) is left out.
pub(crate) async fn read(by_vn: BTreeMap<String, Paths>) -> Result<Vec<NatPathCounter>, OpError> {
    let mut out = Vec::new();
    for (vn, paths) in by_vn {
        let ns = names::router_ns(&vn);
        // The namespace's identity: a rebuilt router is a new namespace, whose counters
        // started again from zero even if the kernel reused their handles.
        let Ok(meta) = tokio::fs::metadata(format!("/run/netns/{ns}")).await else {
            continue;
        };
        let table = names::vn_table(&vn);
        let json = match cmd::in_ns(
            &ns,
            "nft",
            &["-j", "list", "counters", "table", "inet", &table],
            None,
        )
        .await
        {
            Ok(json) => json,
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e.into()),
        };
        let readings = meter::parse_counters(&json, &table).map_err(OpError::backend_transient)?;
        let by_name: BTreeMap<&str, &meter::CounterReading> =
            readings.iter().map(|r| (r.name.as_str(), r)).collect();
        for (kind, object_id) in paths {
            let path = match kind {
                NatPathKind::ExternalIpAttachment => MeterPath::Dnat,
                NatPathKind::NatGateway => MeterPath::Snat,
            };
            let (cin, cout) = meter::counter_names(path, &object_id);
            let (Some(i), Some(e)) = (by_name.get(cin.as_str()), by_name.get(cout.as_str())) else {
                continue;
            };
            out.push(NatPathCounter {
                kind,
                object_id,
                ingress_bytes: i.bytes,
                egress_bytes: e.bytes,
                epoch: format!("{}:{}:{}", meta.ino(), i.handle, e.handle),
            });
        }
    }
    Ok(out)
}
