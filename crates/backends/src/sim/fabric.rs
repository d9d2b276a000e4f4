//! The simulated fabric: the tables of a real fabric backend, validated like one.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::{Deserialize, Serialize};

use super::engine::{Engine, Tables};
use super::{
    FailureKind, Faults, SimError, SimStateStore, parse_request, require_non_empty, to_json,
};
use crate::contract::{OpError, Operation};
use crate::net::{has_host_bits, ipv4_gateway, ipv6_gateway, lowest_free, to_u128};
use crate::types::*;

/// First segment id handed out (segment ids double as VXLAN VNIs).
const FIRST_SEGMENT_ID: i64 = 100;

/// A VirtualNetwork as the sim fabric knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimVirtualNetwork {
    /// Our VirtualNetwork id.
    pub virtual_network_id: String,
    /// Owning tenant.
    pub tenant: String,
    /// IPv4 range.
    pub ipv4_cidr: Option<Ipv4Net>,
    /// IPv6 range.
    pub ipv6_cidr: Option<Ipv6Net>,
}

/// A subnet segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimSubnet {
    /// Our Subnet id.
    pub subnet_id: String,
    /// Its VirtualNetwork.
    pub virtual_network_id: String,
    /// Segment id (VNI).
    pub segment_id: i64,
    /// IPv4 prefix.
    pub ipv4_cidr: Option<Ipv4Net>,
    /// IPv6 prefix.
    pub ipv6_cidr: Option<Ipv6Net>,
    /// Reserved VIP range.
    pub vip_cidr: Option<IpNet>,
    /// IPv4 gateway (first usable address).
    pub ipv4_gateway: Option<Ipv4Addr>,
    /// IPv6 gateway (`::1`).
    pub ipv6_gateway: Option<Ipv6Addr>,
}

/// A programmed security group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimSecurityGroup {
    /// Our SecurityGroup id.
    pub security_group_id: String,
    /// Its VirtualNetwork.
    pub virtual_network_id: String,
    /// Inbound allow rules.
    pub ingress: Vec<SecurityRule>,
    /// Outbound allow rules.
    pub egress: Vec<SecurityRule>,
}

/// An allocated external address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimExternalIp {
    /// Our ExternalIP id.
    pub external_ip_id: String,
    /// Pool it came from.
    pub pool_id: String,
    /// The address.
    pub address: IpAddr,
}

/// An inbound DNAT entry (ExternalIPAttachment).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnatRule {
    /// Our ExternalIPAttachment id.
    pub attachment_id: String,
    /// VirtualNetwork of the target.
    pub virtual_network_id: String,
    /// Destination rewritten from…
    pub external_address: IpAddr,
    /// …to this address.
    pub target_ip: IpAddr,
}

/// An outbound SNAT entry (NATGateway).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnatRule {
    /// Our NATGateway id.
    pub nat_gateway_id: String,
    /// Translated VirtualNetwork.
    pub virtual_network_id: String,
    /// Source address after translation.
    pub external_address: IpAddr,
    /// Translated sources.
    pub source_cidrs: Vec<IpNet>,
}

/// A host port placed on a subnet, with its DHCP reservation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimNetworkAttachment {
    /// Attachment id.
    pub attachment_id: String,
    /// Host of the port.
    pub host: String,
    /// Interface on the host.
    pub interface: String,
    /// Normalised (lowercase, colon-separated) MAC.
    pub mac_address: String,
    /// Subnet.
    pub subnet_id: String,
    /// VirtualNetwork of the subnet.
    pub virtual_network_id: String,
    /// Applied security groups.
    pub security_groups: Vec<String>,
    /// Gets default route and DNS.
    pub primary: bool,
    /// Reserved IPv4 address.
    pub ipv4_address: Option<IpAddr>,
    /// Reserved IPv6 address.
    pub ipv6_address: Option<IpAddr>,
    /// Extra source addresses (VIPs) the port may use (sorted, unique).
    #[serde(default)]
    pub allowed_addresses: Vec<IpAddr>,
}

/// Where a host port is plugged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum PortLocation {
    /// On the provider parking network (idle cluster agents).
    Parked,
    /// On a subnet through an attachment.
    Attached {
        /// The attachment.
        attachment_id: String,
        /// The subnet.
        subnet_id: String,
    },
    /// On no network.
    Detached,
}

/// A host port the fabric has touched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimPort {
    /// Host.
    pub host: String,
    /// Interface.
    pub interface: String,
    /// Where it is plugged.
    pub location: PortLocation,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Meta {
    next_segment_id: i64,
}

/// One persisted record; the key is derived from the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Record {
    VirtualNetwork(SimVirtualNetwork),
    Subnet(SimSubnet),
    SecurityGroup(SimSecurityGroup),
    ExternalIp(SimExternalIp),
    Dnat(DnatRule),
    Snat(SnatRule),
    Attachment(SimNetworkAttachment),
    Port(SimPort),
    Meta(Meta),
}

fn vn_key(id: &str) -> String {
    format!("vn/{id}")
}
fn subnet_key(id: &str) -> String {
    format!("subnet/{id}")
}
fn sg_key(id: &str) -> String {
    format!("sg/{id}")
}
fn eip_key(id: &str) -> String {
    format!("eip/{id}")
}
fn dnat_key(id: &str) -> String {
    format!("dnat/{id}")
}
fn snat_key(id: &str) -> String {
    format!("snat/{id}")
}
fn att_key(id: &str) -> String {
    format!("att/{id}")
}
fn port_key(host: &str, interface: &str) -> String {
    format!("port/{host}/{interface}")
}
const META_KEY: &str = "meta";

impl Record {
    fn key(&self) -> String {
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
type Change = (String, Option<Record>);

/// Sorted, non-overlapping prefixes of one family of one VN: start → (end, subnet id).
type RangeIndex = BTreeMap<u128, (u128, String)>;

#[derive(Default, Clone)]
struct State {
    records: HashMap<String, Record>,
    next_segment_id: i64,
    /// VN → what still lives in it ("subnet 'x'", …), for delete validation.
    vn_refs: HashMap<String, BTreeSet<String>>,
    /// (VN, is_ipv4) → subnet prefixes, for O(log n) overlap checks.
    vn_ranges: HashMap<(String, bool), RangeIndex>,
    vn_nat: HashMap<String, String>,
    subnet_ports: HashMap<String, BTreeSet<String>>,
    subnet_addrs: HashMap<String, BTreeSet<IpAddr>>,
    sg_refs: HashMap<String, BTreeSet<String>>,
    leases: HashMap<(String, String), String>,
    external_used: HashMap<IpAddr, String>,
    address_consumer: HashMap<IpAddr, String>,
}

fn ref_subnet(id: &str) -> String {
    format!("subnet '{id}'")
}
fn ref_sg(id: &str) -> String {
    format!("security group '{id}'")
}
fn ref_dnat(id: &str) -> String {
    format!("external IP attachment '{id}'")
}
fn ref_snat(id: &str) -> String {
    format!("NAT gateway '{id}'")
}

fn subnet_prefixes(s: &SimSubnet) -> Vec<(bool, u128, u128)> {
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

fn port_addrs(a: &SimNetworkAttachment) -> impl Iterator<Item = IpAddr> {
    a.ipv4_address.into_iter().chain(a.ipv6_address)
}

impl State {
    fn get(&self, key: &str) -> Option<&Record> {
        self.records.get(key)
    }

    fn vn(&self, id: &str) -> Option<&SimVirtualNetwork> {
        match self.get(&vn_key(id)) {
            Some(Record::VirtualNetwork(r)) => Some(r),
            _ => None,
        }
    }
    fn subnet(&self, id: &str) -> Option<&SimSubnet> {
        match self.get(&subnet_key(id)) {
            Some(Record::Subnet(r)) => Some(r),
            _ => None,
        }
    }
    fn sg(&self, id: &str) -> Option<&SimSecurityGroup> {
        match self.get(&sg_key(id)) {
            Some(Record::SecurityGroup(r)) => Some(r),
            _ => None,
        }
    }
    fn eip(&self, id: &str) -> Option<&SimExternalIp> {
        match self.get(&eip_key(id)) {
            Some(Record::ExternalIp(r)) => Some(r),
            _ => None,
        }
    }
    fn dnat(&self, id: &str) -> Option<&DnatRule> {
        match self.get(&dnat_key(id)) {
            Some(Record::Dnat(r)) => Some(r),
            _ => None,
        }
    }
    fn snat(&self, id: &str) -> Option<&SnatRule> {
        match self.get(&snat_key(id)) {
            Some(Record::Snat(r)) => Some(r),
            _ => None,
        }
    }
    fn attachment(&self, id: &str) -> Option<&SimNetworkAttachment> {
        match self.get(&att_key(id)) {
            Some(Record::Attachment(r)) => Some(r),
            _ => None,
        }
    }
    fn port(&self, host: &str, interface: &str) -> Option<&SimPort> {
        match self.get(&port_key(host, interface)) {
            Some(Record::Port(r)) => Some(r),
            _ => None,
        }
    }

    /// Replaces (or removes) one record and keeps every index in step.
    fn apply(&mut self, key: String, record: Option<Record>) {
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
            Record::Meta(m) => self.next_segment_id = self.next_segment_id.max(m.next_segment_id),
            Record::Subnet(s) => {
                self.next_segment_id = self.next_segment_id.max(s.segment_id + 1);
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

    /// The sibling subnet whose prefix overlaps `[lo, hi]`, if any.
    fn overlapping_sibling(&self, vn: &str, v4: bool, lo: u128, hi: u128) -> Option<&str> {
        let ranges = self.vn_ranges.get(&(vn.to_string(), v4))?;
        if let Some((_, (end, id))) = ranges.range(..=lo).next_back()
            && *end >= lo
        {
            return Some(id);
        }
        if let Some((start, (_, id))) = ranges.range(lo..).next()
            && *start <= hi
        {
            return Some(id);
        }
        None
    }
}

impl Tables for State {
    type Record = Record;

    fn record(&self, key: &str) -> Option<&Record> {
        self.get(key)
    }

    fn keys(&self) -> Vec<String> {
        self.records.keys().cloned().collect()
    }

    fn apply(&mut self, key: String, record: Option<Record>) {
        State::apply(self, key, record);
    }
}

/// MACs whose `query_dhcp_lease` answers "not yet" for a number of calls.
type HeldLeases = Arc<Mutex<HashMap<String, u32>>>;

/// The simulated fabric engine. Share it (`Arc`) between registrations and tests; bind it to a
/// registration with [`super::SimManager::fabric`]. Operations run through an [`Engine`]:
/// queries and no-op calls are answered from the committed tables without waiting, changes of
/// concurrent calls are persisted together in one store transaction.
pub struct SimFabric {
    namespace: String,
    engine: Engine<State>,
    faults: Faults,
    held_leases: HeldLeases,
}

/// Namespace [`SimFabric::open`] uses.
pub const DEFAULT_FABRIC_NAMESPACE: &str = "sim-fabric";

impl SimFabric {
    /// Opens the engine over `store` in the default namespace, loading what it persisted.
    pub async fn open(store: Arc<dyn SimStateStore>) -> Result<Arc<SimFabric>, SimError> {
        Self::open_namespaced(store, DEFAULT_FABRIC_NAMESPACE).await
    }

    /// Opens the engine in `namespace` (one namespace per independent simulated fabric).
    pub async fn open_namespaced(
        store: Arc<dyn SimStateStore>,
        namespace: &str,
    ) -> Result<Arc<SimFabric>, SimError> {
        let rows = store
            .load_all(namespace)
            .await
            .map_err(|message| SimError::Store {
                namespace: namespace.to_string(),
                message,
            })?;
        let mut state = State {
            next_segment_id: FIRST_SEGMENT_ID,
            ..State::default()
        };
        for (key, value) in rows {
            let record: Record = serde_json::from_str(&value).map_err(|e| SimError::Corrupt {
                namespace: namespace.to_string(),
                key: key.clone(),
                message: e.to_string(),
            })?;
            if record.key() != key {
                return Err(SimError::Corrupt {
                    namespace: namespace.to_string(),
                    message: format!("record belongs under key '{}'", record.key()),
                    key,
                });
            }
            state.apply(key, Some(record));
        }
        Ok(Arc::new(SimFabric {
            namespace: namespace.to_string(),
            engine: Engine::start(store, namespace, state),
            faults: Faults::default(),
            held_leases: HeldLeases::default(),
        }))
    }

    /// The state-store namespace of this engine.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Makes the next `times` calls of `op` whose primary id (see
    /// [`Operation::primary_id_field`]) is `object_id` fail with `kind`; `u32::MAX` = forever,
    /// `0` removes the rule.
    pub fn inject_failure(&self, op: Operation, object_id: &str, times: u32, kind: FailureKind) {
        self.faults.inject(op, object_id, times, kind);
    }

    /// Removes every injected failure.
    pub fn clear_failures(&self) {
        self.faults.clear();
    }

    /// How many times `op` was called (including failed calls).
    pub fn call_count(&self, op: Operation) -> u64 {
        self.faults.count(op)
    }

    /// Makes the next `times` `query_dhcp_lease` calls for `mac_address` answer "not yet",
    /// to simulate a host that is slow to DHCP (`u32::MAX` = never, `0` releases).
    pub fn hold_lease(&self, mac_address: &str, times: u32) {
        let mut held = self.held_leases.lock().unwrap_or_else(|e| e.into_inner());
        let mac = normalize_mac(mac_address).unwrap_or_else(|_| mac_address.to_lowercase());
        if times == 0 {
            held.remove(&mac);
        } else {
            held.insert(mac, times);
        }
    }

    /// Runs one fabric operation (role checks are the manager's job).
    pub async fn call(
        &self,
        op: Operation,
        request: serde_json::Value,
    ) -> Result<serde_json::Value, OpError> {
        self.faults.enter(op, &request)?;
        let held = self.held_leases.clone();
        self.engine
            .run(move |state: &State| plan(state, op, request.clone(), &held))
            .await
    }

    // ---- inspection (tests, dev tooling) ----

    /// A virtual network.
    pub async fn virtual_network(&self, id: &str) -> Option<SimVirtualNetwork> {
        self.engine.read().vn(id).cloned()
    }

    /// A subnet with its segment, gateways and VIP range.
    pub async fn subnet(&self, subnet_id: &str) -> Option<SimSubnet> {
        self.engine.read().subnet(subnet_id).cloned()
    }

    /// The segment id of a subnet.
    pub async fn segment(&self, subnet_id: &str) -> Option<i64> {
        self.subnet(subnet_id).await.map(|s| s.segment_id)
    }

    /// Number of subnets.
    pub async fn subnet_count(&self) -> usize {
        let state = self.engine.read();
        state
            .records
            .values()
            .filter(|r| matches!(r, Record::Subnet(_)))
            .count()
    }

    /// A security group's programmed rules.
    pub async fn security_group(&self, id: &str) -> Option<SimSecurityGroup> {
        self.engine.read().sg(id).cloned()
    }

    /// Every external address allocation, sorted by address.
    pub async fn external_addresses(&self) -> Vec<SimExternalIp> {
        let state = self.engine.read();
        let mut out: Vec<SimExternalIp> = state
            .records
            .values()
            .filter_map(|r| match r {
                Record::ExternalIp(e) => Some(e.clone()),
                _ => None,
            })
            .collect();
        out.sort_by_key(|e| e.address);
        out
    }

    /// The DNAT table, sorted by external address.
    pub async fn dnat_rules(&self) -> Vec<DnatRule> {
        let state = self.engine.read();
        let mut out: Vec<DnatRule> = state
            .records
            .values()
            .filter_map(|r| match r {
                Record::Dnat(d) => Some(d.clone()),
                _ => None,
            })
            .collect();
        out.sort_by_key(|d| d.external_address);
        out
    }

    /// The SNAT table, sorted by external address.
    pub async fn snat_rules(&self) -> Vec<SnatRule> {
        let state = self.engine.read();
        let mut out: Vec<SnatRule> = state
            .records
            .values()
            .filter_map(|r| match r {
                Record::Snat(s) => Some(s.clone()),
                _ => None,
            })
            .collect();
        out.sort_by_key(|s| s.external_address);
        out
    }

    /// A network attachment.
    pub async fn network_attachment(&self, attachment_id: &str) -> Option<SimNetworkAttachment> {
        self.engine.read().attachment(attachment_id).cloned()
    }

    /// The lease of a MAC on a subnet (ignores [`SimFabric::hold_lease`]).
    pub async fn lease(&self, subnet_id: &str, mac_address: &str) -> Option<PortAddresses> {
        let mac = normalize_mac(mac_address).ok()?;
        let state = self.engine.read();
        let id = state.leases.get(&(subnet_id.to_string(), mac))?;
        state.attachment(id).map(|a| PortAddresses {
            ipv4_address: a.ipv4_address,
            ipv6_address: a.ipv6_address,
        })
    }

    /// Where a host port is plugged (None = never touched by the fabric).
    pub async fn port(&self, host: &str, interface: &str) -> Option<PortLocation> {
        let state = self.engine.read();
        state.port(host, interface).map(|p| p.location.clone())
    }
}

/// Lowercase colon-separated MAC, or a permanent error.
fn normalize_mac(mac: &str) -> Result<String, OpError> {
    let parts: Vec<&str> = mac.split([':', '-']).collect();
    let ok = parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()));
    if ok {
        Ok(parts.join(":").to_ascii_lowercase())
    } else {
        Err(OpError::permanent(format!(
            "mac_address '{mac}' is not a MAC address (aa:bb:cc:dd:ee:ff)"
        )))
    }
}

fn no_host_bits(field: &str, net: IpNet) -> Result<(), OpError> {
    if has_host_bits(net) {
        Err(OpError::permanent(format!(
            "{field} '{net}' has host bits set (did you mean '{}'?)",
            net.trunc()
        )))
    } else {
        Ok(())
    }
}

fn missing_vn(id: &str) -> OpError {
    OpError::permanent(format!("virtual network '{id}' does not exist"))
}

fn empty() -> serde_json::Value {
    serde_json::json!({})
}

fn put(r: Record) -> Change {
    (r.key(), Some(r))
}

/// Validates a request against the current tables and computes the records to write and the
/// response. Nothing is changed here: the caller persists, then applies.
fn plan(
    state: &State,
    op: Operation,
    request: serde_json::Value,
    held_leases: &Mutex<HashMap<String, u32>>,
) -> Result<(Vec<Change>, serde_json::Value), OpError> {
    match op {
        Operation::CreateVirtualNetwork => {
            let r: CreateVirtualNetworkRequest = parse_request(op, request)?;
            require_non_empty("virtual_network_id", &r.virtual_network_id)?;
            if let Some(n) = r.ipv4_cidr {
                no_host_bits("ipv4_cidr", IpNet::V4(n))?;
            }
            if let Some(n) = r.ipv6_cidr {
                no_host_bits("ipv6_cidr", IpNet::V6(n))?;
            }
            if let Some(old) = state.vn(&r.virtual_network_id)
                && (old.ipv4_cidr != r.ipv4_cidr
                    || old.ipv6_cidr != r.ipv6_cidr
                    || old.tenant != r.tenant)
            {
                return Err(OpError::permanent(format!(
                    "virtual network '{}' already exists with a different tenant or CIDRs",
                    r.virtual_network_id
                )));
            }
            let rec = Record::VirtualNetwork(SimVirtualNetwork {
                virtual_network_id: r.virtual_network_id,
                tenant: r.tenant,
                ipv4_cidr: r.ipv4_cidr,
                ipv6_cidr: r.ipv6_cidr,
            });
            Ok((vec![put(rec)], empty()))
        }
        Operation::DeleteVirtualNetwork => {
            let r: DeleteVirtualNetworkRequest = parse_request(op, request)?;
            if state.vn(&r.virtual_network_id).is_none() {
                return Ok((vec![], empty()));
            }
            if let Some(refs) = state.vn_refs.get(&r.virtual_network_id) {
                let listed: Vec<&str> = refs.iter().take(5).map(String::as_str).collect();
                return Err(OpError::permanent(format!(
                    "virtual network '{}' is still in use by {}{}",
                    r.virtual_network_id,
                    listed.join(", "),
                    if refs.len() > listed.len() {
                        ", …"
                    } else {
                        ""
                    }
                )));
            }
            Ok((vec![(vn_key(&r.virtual_network_id), None)], empty()))
        }
        Operation::CreateSubnet => create_subnet(state, parse_request(op, request)?),
        Operation::DeleteSubnet => {
            let r: DeleteSubnetRequest = parse_request(op, request)?;
            let Some(s) = state.subnet(&r.subnet_id) else {
                return Ok((vec![], empty()));
            };
            if s.virtual_network_id != r.virtual_network_id {
                return Err(OpError::permanent(format!(
                    "subnet '{}' belongs to virtual network '{}', not '{}'",
                    r.subnet_id, s.virtual_network_id, r.virtual_network_id
                )));
            }
            if let Some(ports) = state.subnet_ports.get(&r.subnet_id) {
                return Err(OpError::permanent(format!(
                    "subnet '{}' still has {} network attachment(s), e.g. '{}'",
                    r.subnet_id,
                    ports.len(),
                    ports.iter().next().map_or("", String::as_str)
                )));
            }
            Ok((vec![(subnet_key(&r.subnet_id), None)], empty()))
        }
        Operation::ApplySecurityGroup => {
            let r: ApplySecurityGroupRequest = parse_request(op, request)?;
            require_non_empty("security_group_id", &r.security_group_id)?;
            if state.vn(&r.virtual_network_id).is_none() {
                return Err(missing_vn(&r.virtual_network_id));
            }
            if let Some(old) = state.sg(&r.security_group_id)
                && old.virtual_network_id != r.virtual_network_id
            {
                return Err(OpError::permanent(format!(
                    "security group '{}' belongs to virtual network '{}'",
                    r.security_group_id, old.virtual_network_id
                )));
            }
            for (dir, rules) in [("ingress", &r.ingress), ("egress", &r.egress)] {
                for (i, rule) in rules.iter().enumerate() {
                    validate_rule(rule)
                        .map_err(|m| OpError::permanent(format!("{dir} rule {i}: {m}")))?;
                }
            }
            let rec = Record::SecurityGroup(SimSecurityGroup {
                security_group_id: r.security_group_id,
                virtual_network_id: r.virtual_network_id,
                ingress: r.ingress,
                egress: r.egress,
            });
            Ok((vec![put(rec)], empty()))
        }
        Operation::DeleteSecurityGroup => {
            let r: DeleteSecurityGroupRequest = parse_request(op, request)?;
            let Some(g) = state.sg(&r.security_group_id) else {
                return Ok((vec![], empty()));
            };
            if g.virtual_network_id != r.virtual_network_id {
                return Err(OpError::permanent(format!(
                    "security group '{}' belongs to virtual network '{}', not '{}'",
                    r.security_group_id, g.virtual_network_id, r.virtual_network_id
                )));
            }
            if let Some(users) = state.sg_refs.get(&r.security_group_id) {
                return Err(OpError::permanent(format!(
                    "security group '{}' is still applied to {} network attachment(s), e.g. '{}'",
                    r.security_group_id,
                    users.len(),
                    users.iter().next().map_or("", String::as_str)
                )));
            }
            Ok((vec![(sg_key(&r.security_group_id), None)], empty()))
        }
        Operation::AllocateExternalIp => {
            let r: AllocateExternalIpRequest = parse_request(op, request)?;
            require_non_empty("external_ip_id", &r.external_ip_id)?;
            if let Some(e) = state.eip(&r.external_ip_id) {
                if e.pool_id != r.pool_id {
                    return Err(OpError::permanent(format!(
                        "external IP '{}' is already allocated from pool '{}'",
                        r.external_ip_id, e.pool_id
                    )));
                }
                return Ok((
                    vec![],
                    to_json(&AllocateExternalIpResponse { address: e.address })?,
                ));
            }
            if r.cidrs.is_empty() {
                return Err(OpError::permanent(format!(
                    "pool '{}' has no CIDRs",
                    r.pool_id
                )));
            }
            let mut cidrs = r.cidrs.clone();
            for c in &cidrs {
                no_host_bits("cidrs", *c)?;
            }
            cidrs.sort();
            let used = |a: &IpAddr| state.external_used.contains_key(a);
            let address = cidrs
                .iter()
                .find_map(|c| lowest_free(*c, &used, &[]))
                .ok_or_else(|| {
                    OpError::permanent(format!(
                        "pool exhausted: no free address left in external IP pool '{}'",
                        r.pool_id
                    ))
                })?;
            let rec = Record::ExternalIp(SimExternalIp {
                external_ip_id: r.external_ip_id,
                pool_id: r.pool_id,
                address,
            });
            Ok((
                vec![put(rec)],
                to_json(&AllocateExternalIpResponse { address })?,
            ))
        }
        Operation::ReleaseExternalIp => {
            let r: ReleaseExternalIpRequest = parse_request(op, request)?;
            let Some(e) = state.eip(&r.external_ip_id) else {
                return Ok((vec![], empty()));
            };
            if e.pool_id != r.pool_id {
                return Err(OpError::permanent(format!(
                    "external IP '{}' belongs to pool '{}', not '{}'",
                    r.external_ip_id, e.pool_id, r.pool_id
                )));
            }
            if let Some(user) = state.address_consumer.get(&e.address) {
                return Err(OpError::permanent(format!(
                    "external address {} is still used by {user}",
                    e.address
                )));
            }
            Ok((vec![(eip_key(&r.external_ip_id), None)], empty()))
        }
        Operation::CreateExternalIpAttachment => {
            let r: CreateExternalIpAttachmentRequest = parse_request(op, request)?;
            require_non_empty("attachment_id", &r.attachment_id)?;
            let vn = state
                .vn(&r.virtual_network_id)
                .ok_or_else(|| missing_vn(&r.virtual_network_id))?;
            check_external_address(state, r.external_address, &ref_dnat(&r.attachment_id))?;
            if r.external_address.is_ipv4() != r.target_ip.is_ipv4() {
                return Err(OpError::permanent(format!(
                    "external address {} and target {} are of different IP families",
                    r.external_address, r.target_ip
                )));
            }
            let inside = match r.target_ip {
                IpAddr::V4(a) => vn.ipv4_cidr.is_some_and(|n| n.contains(&a)),
                IpAddr::V6(a) => vn.ipv6_cidr.is_some_and(|n| n.contains(&a)),
            };
            if !inside {
                return Err(OpError::permanent(format!(
                    "target {} is not inside virtual network '{}'",
                    r.target_ip, r.virtual_network_id
                )));
            }
            if let Some(old) = state.dnat(&r.attachment_id)
                && old.virtual_network_id != r.virtual_network_id
            {
                return Err(OpError::permanent(format!(
                    "external IP attachment '{}' belongs to virtual network '{}'",
                    r.attachment_id, old.virtual_network_id
                )));
            }
            let rec = Record::Dnat(DnatRule {
                attachment_id: r.attachment_id,
                virtual_network_id: r.virtual_network_id,
                external_address: r.external_address,
                target_ip: r.target_ip,
            });
            Ok((vec![put(rec)], empty()))
        }
        Operation::DeleteExternalIpAttachment => {
            let r: DeleteExternalIpAttachmentRequest = parse_request(op, request)?;
            if state.dnat(&r.attachment_id).is_none() {
                return Ok((vec![], empty()));
            }
            Ok((vec![(dnat_key(&r.attachment_id), None)], empty()))
        }
        Operation::CreateNatGateway => {
            let r: CreateNatGatewayRequest = parse_request(op, request)?;
            require_non_empty("nat_gateway_id", &r.nat_gateway_id)?;
            if state.vn(&r.virtual_network_id).is_none() {
                return Err(missing_vn(&r.virtual_network_id));
            }
            check_external_address(state, r.external_address, &ref_snat(&r.nat_gateway_id))?;
            if let Some(other) = state.vn_nat.get(&r.virtual_network_id)
                && *other != r.nat_gateway_id
            {
                return Err(OpError::permanent(format!(
                    "virtual network '{}' already has NAT gateway '{other}'",
                    r.virtual_network_id
                )));
            }
            if let Some(old) = state.snat(&r.nat_gateway_id)
                && old.virtual_network_id != r.virtual_network_id
            {
                return Err(OpError::permanent(format!(
                    "NAT gateway '{}' belongs to virtual network '{}'",
                    r.nat_gateway_id, old.virtual_network_id
                )));
            }
            for c in &r.source_cidrs {
                no_host_bits("source_cidrs", *c)?;
            }
            let rec = Record::Snat(SnatRule {
                nat_gateway_id: r.nat_gateway_id,
                virtual_network_id: r.virtual_network_id,
                external_address: r.external_address,
                source_cidrs: r.source_cidrs,
            });
            Ok((vec![put(rec)], empty()))
        }
        Operation::DeleteNatGateway => {
            let r: DeleteNatGatewayRequest = parse_request(op, request)?;
            if state.snat(&r.nat_gateway_id).is_none() {
                return Ok((vec![], empty()));
            }
            Ok((vec![(snat_key(&r.nat_gateway_id), None)], empty()))
        }
        Operation::CreateNetworkAttachment => {
            create_network_attachment(state, parse_request(op, request)?)
        }
        Operation::DeleteNetworkAttachment => {
            let r: DeleteNetworkAttachmentRequest = parse_request(op, request)?;
            require_non_empty("host", &r.host)?;
            require_non_empty("interface", &r.interface)?;
            let mut changes = Vec::new();
            if state.attachment(&r.attachment_id).is_some() {
                changes.push((att_key(&r.attachment_id), None));
            }
            let occupied_by_other = matches!(
                state.port(&r.host, &r.interface).map(|p| &p.location),
                Some(PortLocation::Attached { attachment_id, .. }) if *attachment_id != r.attachment_id
            );
            if !occupied_by_other {
                changes.push(put(Record::Port(SimPort {
                    host: r.host,
                    interface: r.interface,
                    location: if r.park {
                        PortLocation::Parked
                    } else {
                        PortLocation::Detached
                    },
                })));
            }
            Ok((changes, empty()))
        }
        Operation::QueryDhcpLease => {
            let r: QueryDhcpLeaseRequest = parse_request(op, request)?;
            if state.subnet(&r.subnet_id).is_none() {
                return Err(OpError::permanent(format!(
                    "subnet '{}' does not exist",
                    r.subnet_id
                )));
            }
            let mac = normalize_mac(&r.mac_address)?;
            {
                let mut held = held_leases.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(n) = held.get_mut(&mac) {
                    if *n != u32::MAX {
                        *n -= 1;
                        if *n == 0 {
                            held.remove(&mac);
                        }
                    }
                    return Ok((vec![], to_json(&PortAddresses::default())?));
                }
            }
            let lease = state
                .leases
                .get(&(r.subnet_id, mac))
                .and_then(|id| state.attachment(id))
                .map(|a| PortAddresses {
                    ipv4_address: a.ipv4_address,
                    ipv6_address: a.ipv6_address,
                })
                .unwrap_or_default();
            Ok((vec![], to_json(&lease)?))
        }
        Operation::CreateSubnetOverlay | Operation::DeleteSubnetOverlay => Err(OpError::permanent(
            format!("operation {op} is not a fabric operation"),
        )),
    }
}

/// The address must be allocated and not consumed by someone other than `me`.
fn check_external_address(state: &State, address: IpAddr, me: &str) -> Result<(), OpError> {
    if !state.external_used.contains_key(&address) {
        return Err(OpError::permanent(format!(
            "external address {address} is not allocated"
        )));
    }
    match state.address_consumer.get(&address) {
        Some(user) if user != me => Err(OpError::permanent(format!(
            "external address {address} is already used by {user}"
        ))),
        _ => Ok(()),
    }
}

fn validate_rule(rule: &SecurityRule) -> Result<(), String> {
    match rule.protocol {
        Protocol::Tcp | Protocol::Udp => match (rule.port_from, rule.port_to) {
            (None, None) => {}
            (Some(from), Some(to)) => {
                if from == 0 || from > to {
                    return Err(format!(
                        "port range {from}-{to} is invalid (1-65535, from <= to)"
                    ));
                }
            }
            _ => return Err("port_from and port_to must be given together".into()),
        },
        Protocol::Icmp | Protocol::All => {
            if rule.port_from.is_some() || rule.port_to.is_some() {
                return Err("ports are only valid for tcp and udp".into());
            }
        }
    }
    if has_host_bits(rule.cidr) {
        return Err(format!("cidr '{}' has host bits set", rule.cidr));
    }
    Ok(())
}

fn create_subnet(
    state: &State,
    r: CreateSubnetRequest,
) -> Result<(Vec<Change>, serde_json::Value), OpError> {
    require_non_empty("subnet_id", &r.subnet_id)?;
    let vn = state
        .vn(&r.virtual_network_id)
        .ok_or_else(|| missing_vn(&r.virtual_network_id))?;
    if r.ipv4_cidr.is_none() && r.ipv6_cidr.is_none() {
        return Err(OpError::permanent(
            "a subnet needs ipv4_cidr, ipv6_cidr or both",
        ));
    }
    if let Some(n) = r.ipv4_cidr {
        no_host_bits("ipv4_cidr", IpNet::V4(n))?;
        match vn.ipv4_cidr {
            Some(v) if v.contains(&n) => {}
            Some(v) => {
                return Err(OpError::permanent(format!(
                    "subnet IPv4 CIDR '{n}' is not inside virtual network CIDR '{v}'"
                )));
            }
            None => {
                return Err(OpError::permanent(format!(
                    "virtual network '{}' has no IPv4 CIDR",
                    r.virtual_network_id
                )));
            }
        }
    }
    if let Some(n) = r.ipv6_cidr {
        no_host_bits("ipv6_cidr", IpNet::V6(n))?;
        match vn.ipv6_cidr {
            Some(v) if v.contains(&n) => {}
            Some(v) => {
                return Err(OpError::permanent(format!(
                    "subnet IPv6 CIDR '{n}' is not inside virtual network CIDR '{v}'"
                )));
            }
            None => {
                return Err(OpError::permanent(format!(
                    "virtual network '{}' has no IPv6 CIDR",
                    r.virtual_network_id
                )));
            }
        }
    }
    if let Some(vip) = r.vip_cidr {
        no_host_bits("vip_cidr", vip)?;
        let inside = match vip {
            IpNet::V4(v) => r.ipv4_cidr.is_some_and(|n| n.contains(&v)),
            IpNet::V6(v) => r.ipv6_cidr.is_some_and(|n| n.contains(&v)),
        };
        if !inside {
            return Err(OpError::permanent(format!(
                "vip_cidr '{vip}' is not inside the subnet's CIDR of its family"
            )));
        }
    }

    let ipv4_gateway = r.ipv4_cidr.map(ipv4_gateway);
    let ipv6_gateway = r.ipv6_cidr.map(ipv6_gateway);
    let mut changes = Vec::new();
    let segment_id = if let Some(old) = state.subnet(&r.subnet_id) {
        if old.virtual_network_id != r.virtual_network_id
            || old.ipv4_cidr != r.ipv4_cidr
            || old.ipv6_cidr != r.ipv6_cidr
        {
            return Err(OpError::permanent(format!(
                "subnet '{}' already exists with a different virtual network or CIDRs",
                r.subnet_id
            )));
        }
        old.segment_id
    } else {
        let candidate = SimSubnet {
            subnet_id: r.subnet_id.clone(),
            virtual_network_id: r.virtual_network_id.clone(),
            segment_id: 0,
            ipv4_cidr: r.ipv4_cidr,
            ipv6_cidr: r.ipv6_cidr,
            vip_cidr: None,
            ipv4_gateway: None,
            ipv6_gateway: None,
        };
        for (v4, lo, hi) in subnet_prefixes(&candidate) {
            if let Some(other) = state.overlapping_sibling(&r.virtual_network_id, v4, lo, hi) {
                return Err(OpError::permanent(format!(
                    "subnet '{}' overlaps subnet '{other}' in virtual network '{}'",
                    r.subnet_id, r.virtual_network_id
                )));
            }
        }
        let segment_id = state.next_segment_id;
        changes.push(put(Record::Meta(Meta {
            next_segment_id: segment_id + 1,
        })));
        segment_id
    };
    changes.push(put(Record::Subnet(SimSubnet {
        subnet_id: r.subnet_id,
        virtual_network_id: r.virtual_network_id,
        segment_id,
        ipv4_cidr: r.ipv4_cidr,
        ipv6_cidr: r.ipv6_cidr,
        vip_cidr: r.vip_cidr,
        ipv4_gateway,
        ipv6_gateway,
    })));
    let response = CreateSubnetResponse {
        segment_id,
        ipv4_gateway: ipv4_gateway.map(IpAddr::V4),
        ipv6_gateway: ipv6_gateway.map(IpAddr::V6),
    };
    Ok((changes, to_json(&response)?))
}

fn create_network_attachment(
    state: &State,
    r: CreateNetworkAttachmentRequest,
) -> Result<(Vec<Change>, serde_json::Value), OpError> {
    require_non_empty("attachment_id", &r.attachment_id)?;
    require_non_empty("host", &r.host)?;
    require_non_empty("interface", &r.interface)?;
    let mac = normalize_mac(&r.mac_address)?;
    let subnet = state
        .subnet(&r.subnet_id)
        .ok_or_else(|| OpError::permanent(format!("subnet '{}' does not exist", r.subnet_id)))?;
    if subnet.virtual_network_id != r.virtual_network_id {
        return Err(OpError::permanent(format!(
            "subnet '{}' belongs to virtual network '{}', not '{}'",
            r.subnet_id, subnet.virtual_network_id, r.virtual_network_id
        )));
    }
    for sg in &r.security_groups {
        match state.sg(sg) {
            None => {
                return Err(OpError::permanent(format!(
                    "security group '{sg}' does not exist"
                )));
            }
            Some(g) if g.virtual_network_id != r.virtual_network_id => {
                return Err(OpError::permanent(format!(
                    "security group '{sg}' belongs to virtual network '{}', not '{}'",
                    g.virtual_network_id, r.virtual_network_id
                )));
            }
            Some(_) => {}
        }
    }
    let mut security_groups = r.security_groups.clone();
    security_groups.sort();
    security_groups.dedup();
    let allowed_addresses = r.checked_allowed_addresses(subnet.vip_cidr)?;

    if let Some(old) = state.attachment(&r.attachment_id) {
        if old.host != r.host
            || old.interface != r.interface
            || old.mac_address != mac
            || old.subnet_id != r.subnet_id
        {
            return Err(OpError::permanent(format!(
                "network attachment '{}' already exists for port {}/{} ({}) on subnet '{}'",
                r.attachment_id, old.host, old.interface, old.mac_address, old.subnet_id
            )));
        }
        let updated = SimNetworkAttachment {
            security_groups,
            primary: r.primary,
            allowed_addresses,
            ..old.clone()
        };
        let response = PortAddresses {
            ipv4_address: updated.ipv4_address,
            ipv6_address: updated.ipv6_address,
        };
        let port = SimPort {
            host: r.host,
            interface: r.interface,
            location: PortLocation::Attached {
                attachment_id: r.attachment_id,
                subnet_id: r.subnet_id,
            },
        };
        return Ok((
            vec![put(Record::Attachment(updated)), put(Record::Port(port))],
            to_json(&response)?,
        ));
    }

    if let Some(PortLocation::Attached { attachment_id, .. }) =
        state.port(&r.host, &r.interface).map(|p| &p.location)
    {
        return Err(OpError::permanent(format!(
            "port {}/{} is already attached by network attachment '{attachment_id}'",
            r.host, r.interface
        )));
    }
    if let Some(other) = state.leases.get(&(r.subnet_id.clone(), mac.clone())) {
        return Err(OpError::permanent(format!(
            "MAC {mac} already has network attachment '{other}' on subnet '{}'",
            r.subnet_id
        )));
    }

    let empty_set = BTreeSet::new();
    let used_set = state.subnet_addrs.get(&r.subnet_id).unwrap_or(&empty_set);
    let used = |a: &IpAddr| used_set.contains(a);
    let mut blocked: Vec<IpNet> = subnet.vip_cidr.into_iter().collect();
    blocked.extend(subnet.ipv4_gateway.map(|g| IpNet::V4(Ipv4Net::from(g))));
    blocked.extend(subnet.ipv6_gateway.map(|g| IpNet::V6(Ipv6Net::from(g))));
    let pick = |net: IpNet, family: &str| {
        lowest_free(net, &used, &blocked).ok_or_else(|| {
            OpError::permanent(format!(
                "subnet '{}' has no free {family} address left",
                r.subnet_id
            ))
        })
    };
    let ipv4_address = subnet
        .ipv4_cidr
        .map(|n| pick(IpNet::V4(n), "IPv4"))
        .transpose()?;
    let ipv6_address = subnet
        .ipv6_cidr
        .map(|n| pick(IpNet::V6(n), "IPv6"))
        .transpose()?;

    let response = PortAddresses {
        ipv4_address,
        ipv6_address,
    };
    let attachment = SimNetworkAttachment {
        attachment_id: r.attachment_id.clone(),
        host: r.host.clone(),
        interface: r.interface.clone(),
        mac_address: mac,
        subnet_id: r.subnet_id.clone(),
        virtual_network_id: r.virtual_network_id,
        security_groups,
        primary: r.primary,
        ipv4_address,
        ipv6_address,
        allowed_addresses,
    };
    let port = SimPort {
        host: r.host,
        interface: r.interface,
        location: PortLocation::Attached {
            attachment_id: r.attachment_id,
            subnet_id: r.subnet_id,
        },
    };
    Ok((
        vec![put(Record::Attachment(attachment)), put(Record::Port(port))],
        to_json(&response)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_normalise() {
        assert_eq!(
            normalize_mac("AA-bb-CC-dd-EE-ff").unwrap(),
            "aa:bb:cc:dd:ee:ff"
        );
        assert!(normalize_mac("aa:bb").is_err());
        assert!(normalize_mac("zz:bb:cc:dd:ee:ff").is_err());
    }

    #[test]
    fn rules_validate() {
        let rule = |p, f, t| SecurityRule {
            protocol: p,
            port_from: f,
            port_to: t,
            cidr: "0.0.0.0/0".parse().unwrap(),
        };
        assert!(validate_rule(&rule(Protocol::Tcp, Some(22), Some(22))).is_ok());
        assert!(validate_rule(&rule(Protocol::Tcp, None, None)).is_ok());
        assert!(validate_rule(&rule(Protocol::Tcp, Some(23), Some(22))).is_err());
        assert!(validate_rule(&rule(Protocol::Udp, Some(0), Some(22))).is_err());
        assert!(validate_rule(&rule(Protocol::Udp, Some(1), None)).is_err());
        assert!(validate_rule(&rule(Protocol::Icmp, Some(1), Some(2))).is_err());
    }
}
