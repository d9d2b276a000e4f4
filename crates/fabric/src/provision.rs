//! Provisioners boot virtual machines, install bare-metal servers and build clusters (SPEC §4:
//! workload provisioning is not a manager operation). Networking is already in place when they
//! are called: every NIC has its fabric port and DHCP reservation, so a provisioner only makes
//! the machine exist and boot with those MACs. The `sim` provisioner records machines in the
//! sim state store; a `linux` one (namespaces running a DHCP client) plugs in behind the trait.

// Request fields and enum variants name themselves; the types carry the explanations.
#![allow(missing_docs)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::contract::OpError;
use crate::sim::engine::{Engine, Tables};
use crate::sim::{FailureKind, SimError, SimStateStore};

/// One network interface of a machine being provisioned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nic {
    /// Interface name inside the machine (`data-0` for bare metal, `eth0` for VMs).
    pub name: String,
    pub mac_address: String,
    pub subnet_id: String,
    /// The primary NIC gets the default route and DNS from DHCP.
    pub primary: bool,
}

/// Boot a VM on a hosting cluster's overlay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootVmRequest {
    pub instance_id: String,
    pub hosting_cluster: String,
    pub template: String,
    pub nics: Vec<Nic>,
}

/// Install and boot a bare-metal host for an instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvisionBareMetalRequest {
    pub instance_id: String,
    pub host_id: String,
    pub nics: Vec<Nic>,
}

/// One agent (pre-booted host) of a cluster being built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterAgent {
    pub host_id: String,
    pub node_set: String,
    pub mac_address: String,
    pub ip_address: String,
}

/// Build a cluster from agents that already have tenant-subnet addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvisionClusterRequest {
    pub cluster_id: String,
    pub template: String,
    pub agents: Vec<ClusterAgent>,
    pub api_vip: String,
    pub ingress_vip: String,
}

/// The provisioning operations, for failure injection and call counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProvisionOp {
    BootVm,
    DeleteVm,
    ProvisionBareMetal,
    DeprovisionBareMetal,
    ProvisionCluster,
    DeprovisionCluster,
}

/// Makes workloads exist. Every call is idempotent and reports failures as values.
#[async_trait]
pub trait Provisioner: Send + Sync {
    /// Boots (or finds booted) the VM.
    async fn boot_vm(&self, req: &BootVmRequest) -> Result<(), OpError>;
    /// Deletes the VM; a missing VM is success.
    async fn delete_vm(&self, instance_id: &str) -> Result<(), OpError>;
    /// Installs and boots the host for the instance.
    async fn provision_baremetal(&self, req: &ProvisionBareMetalRequest) -> Result<(), OpError>;
    /// Wipes the host and powers it off; an unknown instance is success.
    async fn deprovision_baremetal(&self, instance_id: &str, host_id: &str) -> Result<(), OpError>;
    /// Installs the cluster on its agents and brings up its API and ingress VIPs.
    async fn provision_cluster(&self, req: &ProvisionClusterRequest) -> Result<(), OpError>;
    /// Tears the cluster down; agents return to the pre-booted state.
    async fn deprovision_cluster(&self, cluster_id: &str) -> Result<(), OpError>;
}

/// A machine the sim provisioner knows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SimMachine {
    Vm(BootVmRequest),
    BareMetal(ProvisionBareMetalRequest),
    Cluster(ProvisionClusterRequest),
}

/// Default state-store namespace of the sim provisioner.
pub const SIM_PROVISIONER_NAMESPACE: &str = "sim-provisioner";

/// The sim provisioner's table: machines by workload id (the key is the workload id).
#[derive(Clone, Default)]
struct Machines(BTreeMap<String, SimMachine>);

impl Tables for Machines {
    type Record = SimMachine;

    fn record(&self, key: &str) -> Option<&SimMachine> {
        self.0.get(key)
    }

    fn apply(&mut self, key: String, record: Option<SimMachine>) {
        match record {
            Some(m) => self.0.insert(key, m),
            None => self.0.remove(&key),
        };
    }
}

/// In-process provisioner: records machines (persisted), supports failure injection. Calls run
/// through the sim [`Engine`]: repeated calls are answered without a write, and the machines
/// recorded by concurrent calls are persisted together in one store transaction.
pub struct SimProvisioner {
    engine: Engine<Machines>,
    faults: Mutex<HashMap<(ProvisionOp, String), (u32, FailureKind)>>,
    counts: Mutex<HashMap<ProvisionOp, u64>>,
}

impl SimProvisioner {
    /// Opens the provisioner, loading machines recorded before a restart.
    pub async fn open(store: Arc<dyn SimStateStore>) -> Result<Arc<Self>, SimError> {
        let namespace = SIM_PROVISIONER_NAMESPACE.to_string();
        let records = store
            .load_all(&namespace)
            .await
            .map_err(|message| SimError::Store {
                namespace: namespace.clone(),
                message,
            })?;
        let mut machines = Machines::default();
        for (key, value) in records {
            let m: SimMachine = serde_json::from_str(&value).map_err(|e| SimError::Corrupt {
                namespace: namespace.clone(),
                key: key.clone(),
                message: e.to_string(),
            })?;
            machines.0.insert(key, m);
        }
        Ok(Arc::new(Self {
            engine: Engine::start(store, &namespace, machines),
            faults: Mutex::new(HashMap::new()),
            counts: Mutex::new(HashMap::new()),
        }))
    }

    /// The next `times` calls of `op` for `object_id` fail with `kind` (`u32::MAX` = forever).
    pub fn inject_failure(&self, op: ProvisionOp, object_id: &str, times: u32, kind: FailureKind) {
        let mut f = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        if times == 0 {
            f.remove(&(op, object_id.to_string()));
        } else {
            f.insert((op, object_id.to_string()), (times, kind));
        }
    }

    /// Removes every injected failure.
    pub fn clear_failures(&self) {
        self.faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// How many times `op` was called.
    pub fn call_count(&self, op: ProvisionOp) -> u64 {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&op)
            .copied()
            .unwrap_or(0)
    }

    /// The machine recorded for a workload id, if any.
    pub async fn machine(&self, id: &str) -> Option<SimMachine> {
        self.engine.read().0.get(id).cloned()
    }

    /// Number of machines.
    pub async fn machine_count(&self) -> usize {
        self.engine.read().0.len()
    }

    fn enter(&self, op: ProvisionOp, id: &str) -> Result<(), OpError> {
        *self
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(op)
            .or_insert(0) += 1;
        let mut f = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        let key = (op, id.to_string());
        let Some((remaining, kind)) = f.get_mut(&key) else {
            return Ok(());
        };
        let kind = *kind;
        if *remaining != u32::MAX {
            *remaining -= 1;
            if *remaining == 0 {
                f.remove(&key);
            }
        }
        let msg = format!("injected failure of {op:?} for '{id}'");
        Err(match kind {
            FailureKind::Transient => OpError::Transient(msg),
            FailureKind::Permanent => OpError::Permanent(msg),
        })
    }

    async fn record(&self, id: &str, machine: SimMachine) -> Result<(), OpError> {
        let id = id.to_string();
        self.engine
            .run(move |machines: &Machines| {
                if let Some(existing) = machines.record(&id)
                    && existing != &machine
                {
                    return Err(OpError::Permanent(format!(
                        "workload '{id}' is already provisioned with a different shape"
                    )));
                }
                Ok((
                    vec![(id.clone(), Some(machine.clone()))],
                    serde_json::Value::Null,
                ))
            })
            .await
            .map(drop)
    }

    async fn forget(&self, id: &str) -> Result<(), OpError> {
        let id = id.to_string();
        self.engine
            .run(move |_: &Machines| Ok((vec![(id.clone(), None)], serde_json::Value::Null)))
            .await
            .map(drop)
    }
}

#[async_trait]
impl Provisioner for SimProvisioner {
    async fn boot_vm(&self, req: &BootVmRequest) -> Result<(), OpError> {
        self.enter(ProvisionOp::BootVm, &req.instance_id)?;
        if req.nics.is_empty() {
            return Err(OpError::Permanent("a VM needs at least one NIC".into()));
        }
        self.record(&req.instance_id, SimMachine::Vm(req.clone()))
            .await
    }

    async fn delete_vm(&self, instance_id: &str) -> Result<(), OpError> {
        self.enter(ProvisionOp::DeleteVm, instance_id)?;
        self.forget(instance_id).await
    }

    async fn provision_baremetal(&self, req: &ProvisionBareMetalRequest) -> Result<(), OpError> {
        self.enter(ProvisionOp::ProvisionBareMetal, &req.instance_id)?;
        self.record(&req.instance_id, SimMachine::BareMetal(req.clone()))
            .await
    }

    async fn deprovision_baremetal(
        &self,
        instance_id: &str,
        _host_id: &str,
    ) -> Result<(), OpError> {
        self.enter(ProvisionOp::DeprovisionBareMetal, instance_id)?;
        self.forget(instance_id).await
    }

    async fn provision_cluster(&self, req: &ProvisionClusterRequest) -> Result<(), OpError> {
        self.enter(ProvisionOp::ProvisionCluster, &req.cluster_id)?;
        if req.agents.is_empty() || req.api_vip.is_empty() || req.ingress_vip.is_empty() {
            return Err(OpError::Permanent(
                "a cluster needs agents and both VIPs".into(),
            ));
        }
        self.record(&req.cluster_id, SimMachine::Cluster(req.clone()))
            .await
    }

    async fn deprovision_cluster(&self, cluster_id: &str) -> Result<(), OpError> {
        self.enter(ProvisionOp::DeprovisionCluster, cluster_id)?;
        self.forget(cluster_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::MemorySimState;

    fn vm() -> BootVmRequest {
        BootVmRequest {
            instance_id: "vm-1".into(),
            hosting_cluster: "hosting-a".into(),
            template: "small".into(),
            nics: vec![Nic {
                name: "eth0".into(),
                mac_address: "02:00:00:00:00:01".into(),
                subnet_id: "s".into(),
                primary: true,
            }],
        }
    }

    #[tokio::test]
    async fn machines_persist_and_calls_are_idempotent() {
        let state = Arc::new(MemorySimState::new());
        let p = SimProvisioner::open(state.clone()).await.unwrap();
        p.boot_vm(&vm()).await.unwrap();
        p.boot_vm(&vm()).await.unwrap();
        let again = SimProvisioner::open(state.clone()).await.unwrap();
        assert_eq!(again.machine("vm-1").await, Some(SimMachine::Vm(vm())));
        let mut other = vm();
        other.template = "large".into();
        assert!(matches!(
            again.boot_vm(&other).await,
            Err(OpError::Permanent(_))
        ));
        again.delete_vm("vm-1").await.unwrap();
        again.delete_vm("vm-1").await.unwrap();
        assert_eq!(again.machine_count().await, 0);
    }

    #[tokio::test]
    async fn injected_failures_run_out() {
        let p = SimProvisioner::open(Arc::new(MemorySimState::new()))
            .await
            .unwrap();
        p.inject_failure(ProvisionOp::BootVm, "vm-1", 2, FailureKind::Transient);
        assert!(matches!(p.boot_vm(&vm()).await, Err(OpError::Transient(_))));
        assert!(matches!(p.boot_vm(&vm()).await, Err(OpError::Transient(_))));
        p.boot_vm(&vm()).await.unwrap();
        assert_eq!(p.call_count(ProvisionOp::BootVm), 3);
    }
}
