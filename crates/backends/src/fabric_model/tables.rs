//! The fabric model's tables: every record (one per object, keyed by kind and id) and the
//! indexes derived from them, kept in step on every change.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::external_ip::ExternalIpRecord;
use super::external_ip_attachment::ExternalIpAttachmentRecord;
use super::nat_gateway::NatGatewayRecord;
use super::network_attachment::{NetworkAttachmentRecord, PortRecord};
use super::security_group::SecurityGroupRecord;
use super::subnet::SubnetRecord;
use super::virtual_network::VirtualNetworkRecord;
use crate::checks;
use crate::contract::OpError;
use crate::net::to_u128;

/// A record earlier sim stores kept for a sequential segment allocator; loaded and ignored
/// (segment ids are derived from subnet ids, see [`super::subnet`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// The next sequential segment id it would have handed out.
    pub next_segment_id: i64,
}

/// One persisted record; the key is derived from the record (kind prefix and id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// A VirtualNetwork.
    VirtualNetwork(VirtualNetworkRecord),
    /// A subnet segment.
    Subnet(SubnetRecord),
    /// A security group's rules.
    SecurityGroup(SecurityGroupRecord),
    /// An allocated external address.
    ExternalIp(ExternalIpRecord),
    /// The DNAT entry of an ExternalIPAttachment.
    Dnat(ExternalIpAttachmentRecord),
    /// The SNAT entry of a NATGateway.
    Snat(NatGatewayRecord),
    /// A network attachment with its DHCP reservation.
    Attachment(NetworkAttachmentRecord),
    /// Where a host port is plugged.
    Port(PortRecord),
    /// Kept by earlier sim stores; ignored.
    Meta(Meta),
}

pub(crate) fn vn_key(id: &str) -> String {
    format!("vn/{id}")
}
pub(crate) fn subnet_key(id: &str) -> String {
    format!("subnet/{id}")
}
pub(crate) fn sg_key(id: &str) -> String {
    format!("sg/{id}")
}
pub(crate) fn eip_key(id: &str) -> String {
    format!("eip/{id}")
}
pub(crate) fn dnat_key(id: &str) -> String {
    format!("dnat/{id}")
}
pub(crate) fn snat_key(id: &str) -> String {
    format!("snat/{id}")
}
pub(crate) fn att_key(id: &str) -> String {
    format!("att/{id}")
}
pub(crate) fn port_key(host: &str, interface: &str) -> String {
    format!("port/{host}/{interface}")
}
pub(crate) const META_KEY: &str = "meta";

impl Record {
    /// The key the record is stored under (kind prefix and id).
    pub fn key(&self) -> String {
        match self {
            Record::VirtualNetwork(r) => vn_key(&r.virtual_network_id),
            Record::Subnet(r) => subnet_key(&r.subnet_id),
            Record::SecurityGroup(r) => sg_key(&r.security_group_id),
            Record::ExternalIp(r) => eip_key(&r.external_ip_id),
            Record::Dnat(r) => dnat_key(&r.attachment_id),
            Record::Snat(r) => snat_key(&r.nat_gateway_id),
            Record::Attachment(r) => att_key(&r.attachment_id),
            Record::Port(r) => port_key(&r.host, &r.interface),
            Record::Meta(_) => META_KEY.to_string(),
        }
    }
}

/// A pending change: put the record under the key, or delete the key.
pub type Change = (String, Option<Record>);

/// Sorted, non-overlapping prefixes of one family of one VN: start → (end, subnet id).
type RangeIndex = BTreeMap<u128, (u128, String)>;

/// A typed accessor: the record of one kind under its id (its key function and variant).
macro_rules! typed_get {
    ($(#[$doc:meta])* $name:ident, $key:ident, $variant:ident, $ty:ty) => {
        $(#[$doc])*
        pub fn $name(&self, id: &str) -> Option<&$ty> {
            match self.get(&$key(id)) {
                Some(Record::$variant(r)) => Some(r),
                _ => None,
            }
        }
    };
}

/// A typed iterator: every record of one kind.
macro_rules! typed_all {
    ($(#[$doc:meta])* $name:ident, $variant:ident, $ty:ty) => {
        $(#[$doc])*
        pub fn $name(&self) -> impl Iterator<Item = &$ty> {
            self.records.values().filter_map(|r| match r {
                Record::$variant(v) => Some(v),
                _ => None,
            })
        }
    };
}

/// The tables with their indexes.
#[derive(Debug, Default, Clone)]
pub struct FabricState {
    /// Every record by key.
    pub(crate) records: HashMap<String, Record>,
    /// Segment ids in use.
    pub(crate) segments: BTreeSet<i64>,
    /// VN → what still lives in it ("subnet 'x'", …), for delete validation.
    pub(crate) vn_refs: HashMap<String, BTreeSet<String>>,
    /// (VN, is_ipv4) → subnet prefixes, for O(log n) overlap checks.
    pub(crate) vn_ranges: HashMap<(String, bool), RangeIndex>,
    /// VN → its NAT gateway.
    pub(crate) vn_nat: HashMap<String, String>,
    /// Subnet → its network attachments.
    pub(crate) subnet_ports: HashMap<String, BTreeSet<String>>,
    /// Subnet → the addresses its attachments hold.
    pub(crate) subnet_addrs: HashMap<String, BTreeSet<IpAddr>>,
    /// Security group → the network attachments it is applied to.
    pub(crate) sg_refs: HashMap<String, BTreeSet<String>>,
    /// (subnet, normalised MAC) → the network attachment holding the DHCP reservation.
    pub(crate) leases: HashMap<(String, String), String>,
    /// Allocated external address → its external IP.
    pub(crate) external_used: HashMap<IpAddr, String>,
    /// External address → the DNAT or SNAT rule using it.
    pub(crate) address_consumer: HashMap<IpAddr, String>,
}

pub(crate) fn ref_subnet(id: &str) -> String {
    format!("subnet '{id}'")
}
pub(crate) fn ref_sg(id: &str) -> String {
    format!("security group '{id}'")
}
pub(crate) fn ref_dnat(id: &str) -> String {
    checks::external_ip_attachment_user(id)
}
pub(crate) fn ref_snat(id: &str) -> String {
    checks::nat_gateway_user(id)
}

pub(crate) fn subnet_prefixes(s: &SubnetRecord) -> Vec<(bool, u128, u128)> {
    let mut out = Vec::new();
    if let Some(n) = s.ipv4_cidr {
        out.push((
            true,
            to_u128(IpAddr::V4(n.network())),
            to_u128(IpAddr::V4(n.broadcast())),
        ));
    }
    if let Some(n) = s.ipv6_cidr {
        out.push((
            false,
            to_u128(IpAddr::V6(n.network())),
            to_u128(IpAddr::V6(n.broadcast())),
        ));
    }
    out
}

pub(crate) fn port_addrs(a: &NetworkAttachmentRecord) -> impl Iterator<Item = IpAddr> + use<> {
    a.addrs()
}

impl FabricState {
    /// The record under `key`.
    pub fn get(&self, key: &str) -> Option<&Record> {
        self.records.get(key)
    }

    typed_get!(
        /// A VirtualNetwork.
        vn, vn_key, VirtualNetwork, VirtualNetworkRecord
    );
    typed_get!(
        /// A subnet.
        subnet, subnet_key, Subnet, SubnetRecord
    );
    typed_get!(
        /// A security group.
        sg, sg_key, SecurityGroup, SecurityGroupRecord
    );
    typed_get!(
        /// An external address allocation.
        eip, eip_key, ExternalIp, ExternalIpRecord
    );
    typed_get!(
        /// The DNAT entry of an ExternalIPAttachment.
        dnat, dnat_key, Dnat, ExternalIpAttachmentRecord
    );
    typed_get!(
        /// The SNAT entry of a NATGateway.
        snat, snat_key, Snat, NatGatewayRecord
    );
    typed_get!(
        /// A network attachment.
        attachment, att_key, Attachment, NetworkAttachmentRecord
    );
    /// Where host port `interface` of `host` is plugged.
    pub fn port(&self, host: &str, interface: &str) -> Option<&PortRecord> {
        match self.get(&port_key(host, interface)) {
            Some(Record::Port(r)) => Some(r),
            _ => None,
        }
    }

    /// Every record.
    pub fn records(&self) -> impl Iterator<Item = &Record> {
        self.records.values()
    }

    typed_all!(
        /// Every VirtualNetwork.
        vns, VirtualNetwork, VirtualNetworkRecord
    );
    typed_all!(
        /// Every subnet.
        subnets, Subnet, SubnetRecord
    );
    typed_all!(
        /// Every network attachment.
        attachments, Attachment, NetworkAttachmentRecord
    );

    /// The network attachments of subnet `subnet`.
    pub fn attachments_of_subnet<'a>(
        &'a self,
        subnet: &str,
    ) -> impl Iterator<Item = &'a NetworkAttachmentRecord> {
        self.subnet_ports
            .get(subnet)
            .into_iter()
            .flatten()
            .filter_map(|id| self.attachment(id))
    }

    /// The NAT gateway of VirtualNetwork `vn`, if it has one.
    pub fn nat_gateway_of(&self, vn: &str) -> Option<&NatGatewayRecord> {
        self.vn_nat.get(vn).and_then(|id| self.snat(id))
    }

    /// Who uses external address `address` (an ExternalIPAttachment's DNAT or a NATGateway's
    /// SNAT), as a human reference.
    pub fn external_consumer(&self, address: IpAddr) -> Option<&str> {
        self.address_consumer.get(&address).map(String::as_str)
    }

    /// Replaces (or removes) one record and keeps every index in step.
    pub fn apply(&mut self, key: String, record: Option<Record>) {
        if let Some(old) = self.records.remove(&key) {
            self.unindex(&old);
        }
        if let Some(new) = record {
            self.index(&new);
            self.records.insert(key, new);
        }
    }

    fn index(&mut self, r: &Record) {
        match r {
            Record::VirtualNetwork(_) | Record::Port(_) => {}
            Record::Meta(_) => {}
            Record::Subnet(s) => {
                self.segments.insert(s.segment_id);
                self.vn_refs
                    .entry(s.virtual_network_id.clone())
                    .or_default()
                    .insert(ref_subnet(&s.subnet_id));
                for (v4, lo, hi) in subnet_prefixes(s) {
                    self.vn_ranges
                        .entry((s.virtual_network_id.clone(), v4))
                        .or_default()
                        .insert(lo, (hi, s.subnet_id.clone()));
                }
            }
            Record::SecurityGroup(g) => {
                self.vn_refs
                    .entry(g.virtual_network_id.clone())
                    .or_default()
                    .insert(ref_sg(&g.security_group_id));
            }
            Record::ExternalIp(e) => {
                self.external_used
                    .insert(e.address, e.external_ip_id.clone());
            }
            Record::Dnat(d) => {
                self.vn_refs
                    .entry(d.virtual_network_id.clone())
                    .or_default()
                    .insert(ref_dnat(&d.attachment_id));
                self.address_consumer
                    .insert(d.external_address, ref_dnat(&d.attachment_id));
            }
            Record::Snat(s) => {
                self.vn_refs
                    .entry(s.virtual_network_id.clone())
                    .or_default()
                    .insert(ref_snat(&s.nat_gateway_id));
                self.address_consumer
                    .insert(s.external_address, ref_snat(&s.nat_gateway_id));
                self.vn_nat
                    .insert(s.virtual_network_id.clone(), s.nat_gateway_id.clone());
            }
            Record::Attachment(a) => {
                self.subnet_ports
                    .entry(a.subnet_id.clone())
                    .or_default()
                    .insert(a.attachment_id.clone());
                for sg in &a.security_groups {
                    self.sg_refs
                        .entry(sg.clone())
                        .or_default()
                        .insert(a.attachment_id.clone());
                }
                let addrs = self.subnet_addrs.entry(a.subnet_id.clone()).or_default();
                addrs.extend(port_addrs(a));
                self.leases.insert(
                    (a.subnet_id.clone(), a.mac_address.clone()),
                    a.attachment_id.clone(),
                );
            }
        }
    }

    fn unindex(&mut self, r: &Record) {
        fn remove_from<K: std::hash::Hash + Eq>(
            map: &mut HashMap<K, BTreeSet<String>>,
            key: &K,
            item: &str,
        ) {
            if let Some(set) = map.get_mut(key) {
                set.remove(item);
                if set.is_empty() {
                    map.remove(key);
                }
            }
        }
        match r {
            Record::VirtualNetwork(_) | Record::Port(_) | Record::Meta(_) => {}
            Record::Subnet(s) => {
                self.segments.remove(&s.segment_id);
                remove_from(
                    &mut self.vn_refs,
                    &s.virtual_network_id,
                    &ref_subnet(&s.subnet_id),
                );
                for (v4, lo, _) in subnet_prefixes(s) {
                    let key = (s.virtual_network_id.clone(), v4);
                    if let Some(ranges) = self.vn_ranges.get_mut(&key) {
                        ranges.remove(&lo);
                        if ranges.is_empty() {
                            self.vn_ranges.remove(&key);
                        }
                    }
                }
            }
            Record::SecurityGroup(g) => remove_from(
                &mut self.vn_refs,
                &g.virtual_network_id,
                &ref_sg(&g.security_group_id),
            ),
            Record::ExternalIp(e) => {
                self.external_used.remove(&e.address);
            }
            Record::Dnat(d) => {
                remove_from(
                    &mut self.vn_refs,
                    &d.virtual_network_id,
                    &ref_dnat(&d.attachment_id),
                );
                self.address_consumer.remove(&d.external_address);
            }
            Record::Snat(s) => {
                remove_from(
                    &mut self.vn_refs,
                    &s.virtual_network_id,
                    &ref_snat(&s.nat_gateway_id),
                );
                self.address_consumer.remove(&s.external_address);
                self.vn_nat.remove(&s.virtual_network_id);
            }
            Record::Attachment(a) => {
                remove_from(&mut self.subnet_ports, &a.subnet_id, &a.attachment_id);
                for sg in &a.security_groups {
                    remove_from(&mut self.sg_refs, sg, &a.attachment_id);
                }
                if let Some(addrs) = self.subnet_addrs.get_mut(&a.subnet_id) {
                    for ip in port_addrs(a) {
                        addrs.remove(&ip);
                    }
                    if addrs.is_empty() {
                        self.subnet_addrs.remove(&a.subnet_id);
                    }
                }
                self.leases
                    .remove(&(a.subnet_id.clone(), a.mac_address.clone()));
            }
        }
    }

    /// The VirtualNetwork a request names, or the refusal.
    pub fn required_vn(&self, id: &str) -> Result<&VirtualNetworkRecord, OpError> {
        self.vn(id)
            .ok_or_else(|| checks::missing_virtual_network(id))
    }

    /// The external address is allocated and used by nobody but `me`.
    pub fn external_address_free(&self, address: IpAddr, me: &str) -> Result<(), OpError> {
        checks::external_address_free(
            address,
            self.external_used.contains_key(&address),
            self.address_consumer.get(&address).map(String::as_str),
            me,
        )
    }

    /// Every record `pick` selects, sorted by `order`.
    pub fn all<T: Clone, K: Ord>(
        &self,
        pick: impl Fn(&Record) -> Option<&T>,
        order: impl Fn(&T) -> K,
    ) -> Vec<T> {
        let mut out: Vec<T> = self.records.values().filter_map(pick).cloned().collect();
        out.sort_by_key(order);
        out
    }

    /// The sibling subnets of `vn` whose prefix (of family `v4`) could overlap a prefix
    /// starting at `lo`: the one starting last at or before `lo` and the one starting first at
    /// or after it. The prefixes of siblings never overlap each other, so no other sibling can
    /// overlap; whether these two do is the sibling rule's to decide.
    pub fn sibling_neighbours(&self, vn: &str, v4: bool, lo: u128) -> Vec<&str> {
        let Some(ranges) = self.vn_ranges.get(&(vn.to_string(), v4)) else {
            return Vec::new();
        };
        let before = ranges.range(..=lo).next_back();
        let after = ranges.range(lo..).next();
        before
            .into_iter()
            .chain(after)
            .map(|(_, (_, id))| id.as_str())
            .collect()
    }
}
