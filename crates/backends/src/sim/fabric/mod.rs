//! The sim driver of the fabric manager role: the tables of a real fabric backend, validated
//! like one (the preconditions shared with the linux driver live in [`crate::checks`]).
//!
//! Laid out like the linux driver (`osac_linux::fabric_manager`): one file per resource with
//! its record type and the plans of its operations ([`virtual_network`], [`subnet`],
//! [`security_group`], [`external_ip`], [`external_ip_attachment`], [`nat_gateway`],
//! [`network_attachment`]), the persisted tables and their indexes in [`tables`], and here the
//! engine handle ([`SimFabric`]) whose `plan` dispatches each operation to its resource.

mod external_ip;
mod external_ip_attachment;
mod nat_gateway;
mod network_attachment;
mod security_group;
mod subnet;
mod tables;
mod virtual_network;

use std::sync::Arc;

use super::engine::{Engine, Planned};
use super::{FailureKind, Faults, SimError, SimStateStore, load_records};
use crate::checks::{self, decode_request};
use crate::contract::{OpError, Operation};
use crate::types::PortAddresses;
use network_attachment::{HeldLeases, held_lease_key};
use tables::{Change, Record, State};

pub use external_ip::SimExternalIp;
pub use external_ip_attachment::DnatRule;
pub use nat_gateway::SnatRule;
pub use network_attachment::{PortLocation, SimNetworkAttachment, SimPort};
pub use security_group::SimSecurityGroup;
pub use subnet::SimSubnet;
pub use virtual_network::SimVirtualNetwork;

/// What planning an operation gives: the records to write and the response, or the refusal.
type Plan = Result<Planned<Record>, OpError>;

fn empty() -> serde_json::Value {
    checks::empty_response()
}

fn put(r: Record) -> Change {
    (r.key(), Some(r))
}

/// Deletes the record under `key`; deleting what is gone changes nothing.
fn remove(state: &State, key: String) -> Plan {
    let changes = if state.get(&key).is_some() {
        vec![(key, None)]
    } else {
        vec![]
    };
    Ok((changes, empty()))
}

/// The simulated fabric engine. Share it (`Arc`) between registrations and tests; bind it to a
/// registration with [`super::SimManager::fabric`]. Operations run through an [`Engine`]:
/// queries and no-op calls are answered from the committed tables without waiting, changes of
/// concurrent calls are persisted together in one store transaction.
pub struct SimFabric {
    namespace: String,
    engine: Engine<State>,
    faults: Faults,
    held_leases: Arc<HeldLeases>,
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
        let mut state = State {
            next_segment_id: subnet::FIRST_SEGMENT_ID,
            ..State::default()
        };
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
        let mac = held_lease_key(mac_address);
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
        self.engine.read().all(
            |r| match r {
                Record::ExternalIp(e) => Some(e),
                _ => None,
            },
            |e| e.address,
        )
    }

    /// The DNAT table, sorted by external address.
    pub async fn dnat_rules(&self) -> Vec<DnatRule> {
        self.engine.read().all(
            |r| match r {
                Record::Dnat(d) => Some(d),
                _ => None,
            },
            |d| d.external_address,
        )
    }

    /// The SNAT table, sorted by external address.
    pub async fn snat_rules(&self) -> Vec<SnatRule> {
        self.engine.read().all(
            |r| match r {
                Record::Snat(s) => Some(s),
                _ => None,
            },
            |s| s.external_address,
        )
    }

    /// A network attachment.
    pub async fn network_attachment(&self, attachment_id: &str) -> Option<SimNetworkAttachment> {
        self.engine.read().attachment(attachment_id).cloned()
    }

    /// The lease of a MAC on a subnet (ignores [`SimFabric::hold_lease`]).
    pub async fn lease(&self, subnet_id: &str, mac_address: &str) -> Option<PortAddresses> {
        let mac = checks::mac_address(mac_address).ok()?.to_string();
        let state = self.engine.read();
        let id = state.leases.get(&(subnet_id.to_string(), mac))?;
        state.attachment(id).map(SimNetworkAttachment::addresses)
    }

    /// Where a host port is plugged (None = never touched by the fabric).
    pub async fn port(&self, host: &str, interface: &str) -> Option<PortLocation> {
        let state = self.engine.read();
        state.port(host, interface).map(|p| p.location.clone())
    }
}

/// Validates a request against the current tables and computes the records to write and the
/// response, in the file of the resource it is about. Nothing is changed here: the caller
/// persists, then applies.
fn plan(state: &State, op: Operation, request: serde_json::Value, held: &HeldLeases) -> Plan {
    let r = request;
    match op {
        Operation::CreateVirtualNetwork => virtual_network::create(state, decode_request(op, r)?),
        Operation::DeleteVirtualNetwork => virtual_network::delete(state, decode_request(op, r)?),
        Operation::CreateSubnet => subnet::create(state, decode_request(op, r)?),
        Operation::DeleteSubnet => subnet::delete(state, decode_request(op, r)?),
        Operation::ApplySecurityGroup => security_group::apply(state, decode_request(op, r)?),
        Operation::DeleteSecurityGroup => security_group::delete(state, decode_request(op, r)?),
        Operation::AllocateExternalIp => external_ip::allocate(state, decode_request(op, r)?),
        Operation::ReleaseExternalIp => external_ip::release(state, decode_request(op, r)?),
        Operation::CreateExternalIpAttachment => {
            external_ip_attachment::create(state, decode_request(op, r)?)
        }
        Operation::DeleteExternalIpAttachment => {
            external_ip_attachment::delete(state, decode_request(op, r)?)
        }
        Operation::CreateNatGateway => nat_gateway::create(state, decode_request(op, r)?),
        Operation::DeleteNatGateway => nat_gateway::delete(state, decode_request(op, r)?),
        Operation::CreateNetworkAttachment => {
            network_attachment::create(state, decode_request(op, r)?)
        }
        Operation::DeleteNetworkAttachment => {
            network_attachment::delete(state, decode_request(op, r)?)
        }
        Operation::QueryDhcpLease => {
            network_attachment::query_dhcp_lease(state, decode_request(op, r)?, held)
        }
        Operation::CreateSubnetOverlay | Operation::DeleteSubnetOverlay => {
            Err(checks::not_an_operation_of(op, "fabric"))
        }
    }
}
