//! What the linux fabric has programmed: the records of the shared fabric model
//! ([`osac_backends::fabric_model`], whose plans validate and allocate every operation), plus
//! what only this driver allocates — each router's transit addresses and each port's packet
//! mark — and where a port's kernel objects live. Each record is persisted as one file under its
//! kind with this driver's allocations beside its fields ([`super::record_files::RecordStore`]).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use osac_backends::OpError;
use osac_backends::checks;
use osac_backends::fabric_model::{
    FabricState, NetworkAttachmentRecord, Record, SubnetRecord, VirtualNetworkRecord,
};
use serde::{Deserialize, Serialize};

use crate::fabric_manager::render::{PortKeys, TableSite};
use crate::names;

/// Record kinds (directory names in the state dir).
pub mod kind {
    /// VirtualNetworks.
    pub const VN: &str = "vn";
    /// Subnets.
    pub const SUBNET: &str = "subnet";
    /// Security groups.
    pub const SG: &str = "sg";
    /// External IP allocations.
    pub const EIP: &str = "eip";
    /// DNAT attachments.
    pub const DNAT: &str = "dnat";
    /// NAT gateways.
    pub const SNAT: &str = "snat";
    /// Network attachments (ports).
    pub const PORT: &str = "port";
    /// Where each host port is plugged.
    pub const HOST_PORT: &str = "hostport";
    /// Every kind, in the order records are loaded.
    pub const ALL: [&str; 8] = [VN, SUBNET, SG, EIP, DNAT, SNAT, PORT, HOST_PORT];
}

/// A router's addresses on the provider transit network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transit {
    /// IPv4 transit address.
    #[serde(rename = "transit_v4")]
    pub v4: Ipv4Addr,
    /// IPv6 transit address.
    #[serde(rename = "transit_v6")]
    pub v6: Ipv6Addr,
}

/// A VirtualNetwork's file: the record and its router's transit addresses.
#[derive(Debug, Serialize, Deserialize)]
struct VnFile {
    #[serde(flatten)]
    record: VirtualNetworkRecord,
    #[serde(flatten)]
    transit: Transit,
}

/// A network attachment's file: the record and its port's packet mark.
#[derive(Debug, Serialize, Deserialize)]
struct PortFile {
    #[serde(flatten)]
    record: NetworkAttachmentRecord,
    /// 0 = not allocated yet (records of older versions).
    #[serde(default)]
    mark: u32,
}

/// The kind (directory) and id (file) a record is stored under.
fn file_of(r: &Record) -> (&'static str, String) {
    match r {
        Record::VirtualNetwork(v) => (kind::VN, v.virtual_network_id.clone()),
        Record::Subnet(s) => (kind::SUBNET, s.subnet_id.clone()),
        Record::SecurityGroup(g) => (kind::SG, g.security_group_id.clone()),
        Record::ExternalIp(e) => (kind::EIP, e.external_ip_id.clone()),
        Record::Dnat(d) => (kind::DNAT, d.attachment_id.clone()),
        Record::Snat(s) => (kind::SNAT, s.nat_gateway_id.clone()),
        Record::Attachment(a) => (kind::PORT, a.attachment_id.clone()),
        Record::Port(_) | Record::Meta(_) => (kind::HOST_PORT, r.key()),
    }
}

/// Where a network attachment's kernel objects live: which machine namespace has its
/// interface, and which switch namespace its veth peer.
pub trait Placement {
    /// (machine key, interface name in the machine, is_vm).
    fn machine(&self) -> (String, String, bool);
    /// Switch-end interface name.
    fn switch_end(&self) -> String;
    /// Namespace holding the switch end: the router's, or the hosting cluster's for a VM.
    fn switch_ns(&self) -> String;
    /// Where the port's VN table lives: its hosting cluster (VMs) or its router.
    fn table_site(&self) -> TableSite;
}

impl Placement for NetworkAttachmentRecord {
    fn machine(&self) -> (String, String, bool) {
        names::machine_of(&self.host, &self.interface)
    }

    fn switch_end(&self) -> String {
        let (key, ifname, _) = self.machine();
        names::port_switch_end(&key, &ifname)
    }

    fn switch_ns(&self) -> String {
        if self.machine().2 {
            names::hosting_ns(&self.host)
        } else {
            names::router_ns(&self.virtual_network_id)
        }
    }

    fn table_site(&self) -> TableSite {
        if self.machine().2 {
            TableSite::Hosting
        } else {
            TableSite::Router
        }
    }
}

/// Everything the fabric knows, loaded at start and kept in step with the record store.
#[derive(Debug, Default)]
pub struct Model {
    /// The shared fabric model's records and indexes.
    pub state: FabricState,
    /// Routers' transit addresses by VirtualNetwork id.
    pub transit: BTreeMap<String, Transit>,
    /// Ports' packet marks by attachment id.
    pub marks: BTreeMap<String, u32>,
}

impl Model {
    /// Adds one record read from the state directory (`text` is its file).
    pub fn load(&mut self, kind: &str, text: &[u8]) -> Result<(), serde_json::Error> {
        let record = match kind {
            kind::VN => {
                let f: VnFile = serde_json::from_slice(text)?;
                self.transit
                    .insert(f.record.virtual_network_id.clone(), f.transit);
                Record::VirtualNetwork(f.record)
            }
            kind::PORT => {
                let f: PortFile = serde_json::from_slice(text)?;
                self.marks.insert(f.record.attachment_id.clone(), f.mark);
                Record::Attachment(f.record)
            }
            kind::SUBNET => Record::Subnet(serde_json::from_slice(text)?),
            kind::SG => Record::SecurityGroup(serde_json::from_slice(text)?),
            kind::EIP => Record::ExternalIp(serde_json::from_slice(text)?),
            kind::DNAT => Record::Dnat(serde_json::from_slice(text)?),
            kind::SNAT => Record::Snat(serde_json::from_slice(text)?),
            _ => serde_json::from_slice(text)?,
        };
        self.state.apply(record.key(), Some(record));
        Ok(())
    }

    /// The file of `record`: its kind, its id and its text (with this driver's allocations).
    pub fn file(&self, record: &Record) -> Result<(&'static str, String, Vec<u8>), OpError> {
        let (kind, id) = file_of(record);
        let text = match record {
            Record::VirtualNetwork(v) => serde_json::to_vec_pretty(&VnFile {
                record: v.clone(),
                transit: *self.transit(&v.virtual_network_id)?,
            }),
            Record::Attachment(a) => serde_json::to_vec_pretty(&PortFile {
                record: a.clone(),
                mark: self.mark(&a.attachment_id),
            }),
            Record::Subnet(s) => serde_json::to_vec_pretty(s),
            Record::SecurityGroup(g) => serde_json::to_vec_pretty(g),
            Record::ExternalIp(e) => serde_json::to_vec_pretty(e),
            Record::Dnat(d) => serde_json::to_vec_pretty(d),
            Record::Snat(s) => serde_json::to_vec_pretty(s),
            Record::Port(_) | Record::Meta(_) => serde_json::to_vec_pretty(record),
        }
        .map_err(|e| OpError::permanent(format!("cannot encode record {id}: {e}")))?;
        Ok((kind, id, text))
    }

    /// The kind and id of the file of the record under `key`, if there is one.
    pub fn file_of_key(&self, key: &str) -> Option<(&'static str, String)> {
        self.state.get(key).map(file_of)
    }

    /// The VirtualNetwork a request names, or the refusal.
    pub fn vn(&self, id: &str) -> Result<&VirtualNetworkRecord, OpError> {
        self.state
            .vn(id)
            .ok_or_else(|| checks::missing_virtual_network(id))
    }

    /// The transit addresses of VirtualNetwork `id`'s router.
    pub fn transit(&self, id: &str) -> Result<&Transit, OpError> {
        self.transit.get(id).ok_or_else(|| {
            OpError::permanent(format!(
                "virtual network '{id}' has no transit addresses recorded"
            ))
        })
    }

    /// A subnet, or the refusal.
    pub fn subnet(&self, id: &str) -> Result<&SubnetRecord, OpError> {
        self.state
            .subnet(id)
            .ok_or_else(|| checks::missing_subnet(id))
    }

    /// A port's packet mark (0 = none yet).
    pub fn mark(&self, attachment_id: &str) -> u32 {
        self.marks.get(attachment_id).copied().unwrap_or(0)
    }

    /// A port's keys in the security-group maps.
    pub fn sg_keys(&self, p: &NetworkAttachmentRecord) -> PortKeys {
        PortKeys {
            mac: p.mac_address.clone(),
            mark: self.mark(&p.attachment_id),
            v4: p.ipv4_address,
            v6: p.ipv6_address,
        }
    }

    /// The lowest packet mark no port of switch namespace `ns` uses (ports' bridged-ingress
    /// keys; 0 means "no port" to the bridge table, so marks start at 1).
    pub fn free_mark(&self, ns: &str) -> u32 {
        let used: BTreeSet<u32> = self
            .state
            .attachments()
            .filter(|p| p.switch_ns() == ns)
            .map(|p| self.mark(&p.attachment_id))
            .collect();
        // Below the router's hairpin bit, which must never look like a port's mark.
        (1..super::render::HAIRPIN_MARK)
            .find(|m| !used.contains(m))
            .unwrap_or(super::render::HAIRPIN_MARK - 1)
    }

    /// The union of the security groups (sorted, unique) of the ports of `vn` in namespace `ns`
    /// that may use `addr` (their allowed addresses), leaving out attachment `except`: what
    /// filters traffic of that address there. `None` when no port claims it there.
    pub fn claimant_groups(
        &self,
        vn: &str,
        ns: &str,
        addr: IpAddr,
        except: &str,
    ) -> Option<Vec<String>> {
        let claimants: Vec<&NetworkAttachmentRecord> = self
            .state
            .attachments()
            .filter(|p| {
                p.attachment_id != except
                    && p.virtual_network_id == vn
                    && p.allowed_addresses.contains(&addr)
            })
            .filter(|p| p.switch_ns() == ns)
            .collect();
        if claimants.is_empty() {
            return None;
        }
        let set: BTreeSet<String> = claimants
            .iter()
            .flat_map(|p| p.security_groups.iter().cloned())
            .collect();
        Some(set.into_iter().collect())
    }

    /// Security-group ids used by ports whose switch end lives in `ns`, for VN `vn`.
    pub fn sgs_in_ns(&self, vn: &str, ns: &str) -> BTreeSet<String> {
        self.state
            .attachments()
            .filter(|p| p.virtual_network_id == vn && p.switch_ns() == ns)
            .flat_map(|p| p.security_groups.iter().cloned())
            .collect()
    }

    /// Hosting-cluster namespaces holding ports of `vn`.
    pub fn hosting_namespaces_of(&self, vn: &str) -> BTreeSet<String> {
        self.state
            .attachments()
            .filter(|p| p.virtual_network_id == vn && p.machine().2)
            .map(|p| p.switch_ns())
            .collect()
    }

    /// Transit addresses in use.
    pub fn transit_used(&self) -> BTreeSet<IpAddr> {
        self.transit
            .values()
            .flat_map(|t| [IpAddr::V4(t.v4), IpAddr::V6(t.v6)])
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_written_by_the_driver_before_the_shared_model_still_load() {
        let mut model = Model::default();
        let vn = br#"{"id":"vn1","tenant":"t","ipv4_cidr":"10.0.0.0/16","ipv6_cidr":null,
            "transit_v4":"100.64.0.2","transit_v6":"fd00:64::2"}"#;
        let port = br#"{"id":"a1","host":"h","interface":"data-0","mac":"02:00:00:00:00:01",
            "subnet":"s1","vn":"vn1","sgs":["g"],"primary":true,"v4":"10.0.1.2","v6":null,
            "allowed":[],"mark":3}"#;
        model.load(kind::VN, vn).unwrap();
        model.load(kind::PORT, port).unwrap();
        assert_eq!(model.vn("vn1").unwrap().tenant, "t");
        assert_eq!(
            model.transit("vn1").unwrap().v4,
            Ipv4Addr::new(100, 64, 0, 2)
        );
        let a = model.state.attachment("a1").unwrap();
        assert_eq!(a.mac_address, "02:00:00:00:00:01");
        assert_eq!(a.security_groups, vec!["g".to_string()]);
        assert_eq!(a.ipv4_address, Some(Ipv4Addr::new(10, 0, 1, 2)));
        assert_eq!(model.mark("a1"), 3);

        // Written back in the model's own field names, then read again unchanged.
        let (_, _, text) = model.file(&Record::Attachment(a.clone())).unwrap();
        let mut again = Model::default();
        again.load(kind::PORT, &text).unwrap();
        assert_eq!(again.state.attachment("a1"), Some(a));
        assert_eq!(again.mark("a1"), 3);
    }
}
