//! The sim driver of the fabric manager role: the [fabric model](crate::fabric_model) kept in
//! memory and persisted, with nothing to render — what a real backend would program is the
//! records themselves. Here: the engine handle ([`SimFabric`]) with failure injection and
//! held leases for tests, and the [`FabricManager`] implementation of
//! [`SimManager<SimFabric>`](SimManager), which hands each operation to its plan in the model.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::engine::{Engine, Tables};
use super::traffic::SimTraffic;
use super::{FailureKind, Faults, SimError, SimManager, SimStateStore, load_records};
use crate::checks;
use crate::contract::{FabricManager, OpError, Operation, Request};
use crate::fabric_model::{
    ExternalIpAttachmentRecord, ExternalIpRecord, FabricState, NatGatewayRecord,
    NetworkAttachmentRecord, Plan, PortLocation, Record, SecurityGroupRecord, SubnetRecord,
    VirtualNetworkRecord, external_ip, external_ip_attachment, nat_gateway, network_attachment,
    security_group, subnet, virtual_network,
};
use crate::registration::Registration;
use crate::types::*;

/// MACs (normalised) whose `query_dhcp_lease` answers "not yet" for a number of calls.
type HeldLeases = Mutex<HashMap<String, u32>>;

/// The key of a MAC in [`HeldLeases`]: normalised when it is a MAC, else lowercased.
fn held_lease_key(mac_address: &str) -> String {
    checks::mac_address(mac_address)
        .map(|m| m.to_string())
        .unwrap_or_else(|_| mac_address.to_lowercase())
}

/// `query_dhcp_lease` of the model, answering "not yet" while the MAC is held (see
/// [`SimFabric::hold_lease`]).
fn query_dhcp_lease(
    state: &FabricState,
    r: QueryDhcpLeaseRequest,
    held_leases: &HeldLeases,
) -> Plan<PortAddresses> {
    let mac = held_lease_key(&r.mac_address);
    let answer = network_attachment::query_dhcp_lease(state, r)?;
    let mut held = held_leases.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = held.get_mut(&mac) {
        if *n != u32::MAX {
            *n -= 1;
            if *n == 0 {
                held.remove(&mac);
            }
        }
        return Ok((vec![], PortAddresses::default()));
    }
    Ok(answer)
}

impl Tables for FabricState {
    type Record = Record;

    fn record(&self, key: &str) -> Option<&Record> {
        self.get(key)
    }

    fn keys(&self) -> Vec<String> {
        self.records.keys().cloned().collect()
    }

    fn apply(&mut self, key: String, record: Option<Record>) {
        FabricState::apply(self, key, record);
    }
}

/// The simulated fabric engine. Share it (`Arc`) between registrations and tests; bind it to a
/// registration with [`super::SimManager::fabric`]. Operations run through an [`Engine`]:
/// queries and no-op calls are answered from the committed tables without waiting, changes of
/// concurrent calls are persisted together in one store transaction.
pub struct SimFabric {
    namespace: String,
    engine: Engine<FabricState>,
    faults: Faults,
    held_leases: Arc<HeldLeases>,
    traffic: Mutex<SimTraffic>,
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
        let mut state = FabricState::default();
        for (key, record) in load_records::<Record>(&store, namespace).await? {
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
            held_leases: Arc::default(),
            traffic: Mutex::default(),
        }))
    }

    /// The state-store namespace of this engine.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Makes the next `times` calls of `op` whose primary id (see [`Request::primary_id`]) is
    /// `object_id` fail with `kind`; `u32::MAX` = forever,
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
        let mac = held_lease_key(mac_address);
        if times == 0 {
            held.remove(&mac);
        } else {
            held.insert(mac, times);
        }
    }

    /// Runs one operation: counts it, fails it if a failure is injected for its primary id,
    /// then plans it with `plan` (in the file of the resource it is about) and persists what
    /// the plan changes.
    async fn run<R, P>(&self, request: &R, plan: P) -> Result<R::Response, OpError>
    where
        R: Request + Clone,
        P: Fn(&FabricState, R, &HeldLeases) -> Plan<R::Response> + Send + 'static,
    {
        self.faults.enter(request)?;
        let held = self.held_leases.clone();
        let request = request.clone();
        self.engine
            .run(move |state: &FabricState| plan(state, request.clone(), &held))
            .await
    }

    /// The traffic model (see [`super::traffic`]).
    pub(super) fn traffic(&self) -> std::sync::MutexGuard<'_, SimTraffic> {
        self.traffic.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The committed model tables (hold the guard briefly, never across an `.await`).
    pub(super) fn engine_read(&self) -> std::sync::RwLockReadGuard<'_, FabricState> {
        self.engine.read()
    }

    // ---- inspection (tests, dev tooling) ----

    /// A virtual network.
    pub async fn virtual_network(&self, id: &str) -> Option<VirtualNetworkRecord> {
        self.engine.read().vn(id).cloned()
    }

    /// A subnet with its segment, gateways and VIP range.
    pub async fn subnet(&self, subnet_id: &str) -> Option<SubnetRecord> {
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
    pub async fn security_group(&self, id: &str) -> Option<SecurityGroupRecord> {
        self.engine.read().sg(id).cloned()
    }

    /// Every external address allocation, sorted by address.
    pub async fn external_addresses(&self) -> Vec<ExternalIpRecord> {
        self.engine.read().all(
            |r| match r {
                Record::ExternalIp(e) => Some(e),
                _ => None,
            },
            |e| e.address,
        )
    }

    /// The DNAT table, sorted by external address.
    pub async fn dnat_rules(&self) -> Vec<ExternalIpAttachmentRecord> {
        self.engine.read().all(
            |r| match r {
                Record::Dnat(d) => Some(d),
                _ => None,
            },
            |d| d.external_address,
        )
    }

    /// The SNAT table, sorted by external address.
    pub async fn snat_rules(&self) -> Vec<NatGatewayRecord> {
        self.engine.read().all(
            |r| match r {
                Record::Snat(s) => Some(s),
                _ => None,
            },
            |s| s.external_address,
        )
    }

    /// A network attachment.
    pub async fn network_attachment(&self, attachment_id: &str) -> Option<NetworkAttachmentRecord> {
        self.engine.read().attachment(attachment_id).cloned()
    }

    /// The lease of a MAC on a subnet (ignores [`SimFabric::hold_lease`]).
    pub async fn lease(&self, subnet_id: &str, mac_address: &str) -> Option<PortAddresses> {
        let mac = checks::mac_address(mac_address).ok()?.to_string();
        let state = self.engine.read();
        let id = state.leases.get(&(subnet_id.to_string(), mac))?;
        state.attachment(id).map(NetworkAttachmentRecord::addresses)
    }

    /// Where a host port is plugged (None = never touched by the fabric).
    pub async fn port(&self, host: &str, interface: &str) -> Option<PortLocation> {
        let state = self.engine.read();
        state.port(host, interface).map(|p| p.location.clone())
    }
}

impl SimManager<SimFabric> {
    /// Runs one operation on the engine after the simulated latency.
    async fn run<R, P>(&self, request: &R, plan: P) -> Result<R::Response, OpError>
    where
        R: Request + Clone,
        P: Fn(&FabricState, R, &HeldLeases) -> Plan<R::Response> + Send + 'static,
    {
        self.delay().await;
        self.engine.run(request, plan).await
    }
}

/// The sim fabric manager: each operation is planned in the file of the resource it is about.
/// Plans only validate and compute the records to write and the response; the engine
/// persists, then applies.
#[async_trait]
impl FabricManager for SimManager<SimFabric> {
    fn registration(&self) -> &Registration {
        &self.registration
    }

    async fn create_virtual_network(
        &self,
        req: &CreateVirtualNetworkRequest,
    ) -> Result<(), OpError> {
        self.run(req, |s, r, _| virtual_network::create(s, r)).await
    }

    async fn delete_virtual_network(
        &self,
        req: &DeleteVirtualNetworkRequest,
    ) -> Result<(), OpError> {
        self.run(req, |s, r, _| virtual_network::delete(s, r)).await
    }

    async fn create_subnet(
        &self,
        req: &CreateSubnetRequest,
    ) -> Result<CreateSubnetResponse, OpError> {
        self.run(req, |s, r, _| subnet::create(s, r)).await
    }

    async fn delete_subnet(&self, req: &DeleteSubnetRequest) -> Result<(), OpError> {
        self.run(req, |s, r, _| subnet::delete(s, r)).await
    }

    async fn apply_security_group(&self, req: &ApplySecurityGroupRequest) -> Result<(), OpError> {
        self.run(req, |s, r, _| security_group::apply(s, r)).await
    }

    async fn delete_security_group(&self, req: &DeleteSecurityGroupRequest) -> Result<(), OpError> {
        self.run(req, |s, r, _| security_group::delete(s, r)).await
    }

    async fn allocate_external_ip(
        &self,
        req: &AllocateExternalIpRequest,
    ) -> Result<AllocateExternalIpResponse, OpError> {
        self.run(req, |s, r, _| external_ip::allocate(s, r)).await
    }

    async fn release_external_ip(&self, req: &ReleaseExternalIpRequest) -> Result<(), OpError> {
        self.run(req, |s, r, _| external_ip::release(s, r)).await
    }

    async fn create_external_ip_attachment(
        &self,
        req: &CreateExternalIpAttachmentRequest,
    ) -> Result<(), OpError> {
        self.run(req, |s, r, _| external_ip_attachment::create(s, r))
            .await
    }

    async fn delete_external_ip_attachment(
        &self,
        req: &DeleteExternalIpAttachmentRequest,
    ) -> Result<(), OpError> {
        self.run(req, |s, r, _| external_ip_attachment::delete(s, r))
            .await
    }

    async fn create_nat_gateway(&self, req: &CreateNatGatewayRequest) -> Result<(), OpError> {
        self.run(req, |s, r, _| nat_gateway::create(s, r)).await
    }

    async fn delete_nat_gateway(&self, req: &DeleteNatGatewayRequest) -> Result<(), OpError> {
        self.run(req, |s, r, _| nat_gateway::delete(s, r)).await
    }

    async fn create_network_attachment(
        &self,
        req: &CreateNetworkAttachmentRequest,
    ) -> Result<PortAddresses, OpError> {
        self.run(req, |s, r, _| network_attachment::create(s, r))
            .await
    }

    async fn delete_network_attachment(
        &self,
        req: &DeleteNetworkAttachmentRequest,
    ) -> Result<(), OpError> {
        self.run(req, |s, r, _| network_attachment::delete(s, r))
            .await
    }

    async fn query_dhcp_lease(
        &self,
        req: &QueryDhcpLeaseRequest,
    ) -> Result<PortAddresses, OpError> {
        self.run(req, query_dhcp_lease).await
    }

    async fn nat_counters(&self) -> Result<Option<Vec<NatPathCounter>>, OpError> {
        Ok(Some(self.engine.counters()))
    }
}
