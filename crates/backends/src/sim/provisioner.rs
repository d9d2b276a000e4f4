//! The `sim` provisioner: machines recorded (persisted) in the sim state store, with failure
//! injection and call counts for tests. It implements [`crate::provision::Provisioner`]
//! (re-exported there) and runs on the same [`Engine`] as the sim managers.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::engine::Engine;
use super::{FailureKind, SimError, SimStateStore, load_records};
use crate::contract::OpError;
use crate::provision::{
    BootVmRequest, DiscoveredNic, MachineRef, PowerState, ProvisionBareMetalRequest,
    ProvisionClusterRequest, ProvisionOp, Provisioner, RunStrategy,
};

/// A machine the sim provisioner knows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SimMachine {
    /// A VM booted on a hosting cluster.
    Vm(BootVmRequest),
    /// A bare-metal host installed for an instance.
    BareMetal(ProvisionBareMetalRequest),
    /// A cluster built from agents.
    Cluster(ProvisionClusterRequest),
}

/// Default state-store namespace of the sim provisioner.
pub const SIM_PROVISIONER_NAMESPACE: &str = "sim-provisioner";

/// State-store namespace of the sim provisioner's powered-off machines.
const SIM_POWER_NAMESPACE: &str = "sim-provisioner-power";

impl SimMachine {
    /// The NICs' MACs of a VM or bare-metal machine (a cluster has none of its own).
    fn macs(&self) -> Vec<String> {
        match self {
            SimMachine::Vm(r) => r.nics.iter().map(|n| n.mac_address.clone()).collect(),
            SimMachine::BareMetal(r) => r.nics.iter().map(|n| n.mac_address.clone()).collect(),
            SimMachine::Cluster(_) => Vec::new(),
        }
    }
}

/// The machines powered off, by workload id (a machine without a record is on).
type PoweredOff = BTreeMap<String, PowerState>;

/// Loads every record of `namespace` by key.
async fn load<T: serde::de::DeserializeOwned>(
    store: &Arc<dyn SimStateStore>,
    namespace: &str,
) -> Result<BTreeMap<String, T>, SimError> {
    Ok(load_records(store, namespace).await?.into_iter().collect())
}

/// The sim provisioner's table: machines by workload id (the key is the workload id).
type Machines = BTreeMap<String, SimMachine>;

/// In-process provisioner: records machines (persisted), supports failure injection. Calls run
/// through the sim [`Engine`]: repeated calls are answered without a write, and the machines
/// recorded by concurrent calls are persisted together in one store transaction.
pub struct SimProvisioner {
    engine: Engine<Machines>,
    power: Engine<PoweredOff>,
    faults: Mutex<HashMap<(ProvisionOp, String), (u32, FailureKind)>>,
    counts: Mutex<HashMap<ProvisionOp, u64>>,
    /// Restarts by restart-trigger change, by instance id (not persisted).
    restarts: Mutex<HashMap<String, u64>>,
}

impl SimProvisioner {
    /// Opens the provisioner, loading machines recorded before a restart.
    pub async fn open(store: Arc<dyn SimStateStore>) -> Result<Arc<Self>, SimError> {
        let machines = load(&store, SIM_PROVISIONER_NAMESPACE).await?;
        let powered_off = load(&store, SIM_POWER_NAMESPACE).await?;
        Ok(Arc::new(Self {
            power: Engine::start(store.clone(), SIM_POWER_NAMESPACE, powered_off),
            engine: Engine::start(store, SIM_PROVISIONER_NAMESPACE, machines),
            faults: Mutex::new(HashMap::new()),
            counts: Mutex::new(HashMap::new()),
            restarts: Mutex::new(HashMap::new()),
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
        self.engine.read().get(id).cloned()
    }

    /// The power state of a recorded machine (None: not recorded).
    pub async fn power_state(&self, id: &str) -> Option<PowerState> {
        self.engine.read().get(id)?;
        Some(self.power.read().get(id).copied().unwrap_or(PowerState::On))
    }

    /// How many times a bare-metal machine was restarted by a new restart trigger.
    pub fn restart_count(&self, id: &str) -> u64 {
        self.restarts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .copied()
            .unwrap_or(0)
    }

    /// Number of machines.
    pub async fn machine_count(&self) -> usize {
        self.engine.read().len()
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
        let id_for_power = id.to_string();
        let id = id.to_string();
        self.engine
            .run(move |machines: &Machines| {
                if let Some(existing) = machines.get(&id)
                    && existing != &machine
                {
                    return Err(OpError::Permanent(format!(
                        "workload '{id}' is already provisioned with a different shape"
                    )));
                }
                Ok((vec![(id.clone(), Some(machine.clone()))], ()))
            })
            .await?;
        // Provisioning boots the machine.
        self.set_power(&id_for_power, PowerState::On).await
    }

    async fn forget(&self, id: &str) -> Result<(), OpError> {
        let key = id.to_string();
        self.engine
            .run(move |_: &Machines| Ok((vec![(key.clone(), None)], ())))
            .await?;
        self.set_power(id, PowerState::On).await
    }

    /// Records the power state (only "off" is stored).
    async fn set_power(&self, id: &str, state: PowerState) -> Result<(), OpError> {
        let id = id.to_string();
        let record = (state == PowerState::Off).then_some(PowerState::Off);
        self.power
            .run(move |_: &PoweredOff| Ok((vec![(id.clone(), record)], ())))
            .await
    }

    /// The recorded machine of a power or discovery call, checked against its kind.
    fn machine_of(&self, machine: &MachineRef) -> Option<SimMachine> {
        let recorded = self.engine.read().get(machine.instance_id()).cloned()?;
        match (&recorded, machine) {
            (SimMachine::Vm(_), MachineRef::Vm { .. }) => Some(recorded),
            (SimMachine::BareMetal(r), MachineRef::BareMetal { host_id, .. })
                if &r.host_id == host_id =>
            {
                Some(recorded)
            }
            _ => None,
        }
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

    /// Records the request (a repeated call may change only the run strategy and restart
    /// trigger), then powers the machine per its run strategy; a new restart trigger on a
    /// machine that stays on counts a restart.
    async fn provision_baremetal(&self, req: &ProvisionBareMetalRequest) -> Result<(), OpError> {
        let id = req.instance_id.clone();
        self.enter(ProvisionOp::ProvisionBareMetal, &id)?;
        let before = match self.engine.read().get(&id) {
            Some(SimMachine::BareMetal(r)) => Some(r.clone()),
            _ => None,
        };
        let was_on = self.power.read().get(&id).is_none();
        let (key, next) = (id.clone(), req.clone());
        self.engine
            .run(move |machines: &Machines| {
                match machines.get(&key) {
                    Some(SimMachine::BareMetal(r)) if r.same_installation(&next) => {}
                    None => {}
                    Some(_) => {
                        return Err(OpError::Permanent(format!(
                            "workload '{key}' is already provisioned with a different shape"
                        )));
                    }
                }
                Ok((
                    vec![(key.clone(), Some(SimMachine::BareMetal(next.clone())))],
                    (),
                ))
            })
            .await?;
        let on = match (req.run_strategy, &before) {
            (RunStrategy::Halted, _) => false,
            (RunStrategy::Manual, Some(_)) => was_on,
            (RunStrategy::Always | RunStrategy::Manual, _) => true,
        };
        if on && was_on && before.is_some_and(|b| b.restart_trigger != req.restart_trigger) {
            *self
                .restarts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(id.clone())
                .or_insert(0) += 1;
        }
        let state = if on { PowerState::On } else { PowerState::Off };
        self.set_power(&id, state).await
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

    async fn power(&self, machine: &MachineRef, state: PowerState) -> Result<(), OpError> {
        self.enter(ProvisionOp::Power, machine.instance_id())?;
        if self.machine_of(machine).is_none() {
            return Err(OpError::permanent(format!(
                "cannot power {} {state:?}: no such machine is provisioned",
                machine.instance_id()
            )));
        }
        self.set_power(machine.instance_id(), state).await
    }

    /// The machine's NICs by MAC, without addresses: the sim provisioner does not see them
    /// (the sim fabric's leases do).
    async fn discover_addresses(
        &self,
        machine: &MachineRef,
    ) -> Result<Vec<DiscoveredNic>, OpError> {
        self.enter(ProvisionOp::DiscoverAddresses, machine.instance_id())?;
        Ok(self
            .machine_of(machine)
            .map(|m| m.macs())
            .unwrap_or_default()
            .into_iter()
            .map(|mac_address| DiscoveredNic {
                mac_address,
                ..DiscoveredNic::default()
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provision::Nic;
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
        let vm_ref = MachineRef::Vm {
            instance_id: "vm-1".into(),
        };
        again.power(&vm_ref, PowerState::Off).await.unwrap();
        let after_restart = SimProvisioner::open(state.clone()).await.unwrap();
        assert_eq!(
            after_restart.power_state("vm-1").await,
            Some(PowerState::Off)
        );
        again.delete_vm("vm-1").await.unwrap();
        again.delete_vm("vm-1").await.unwrap();
        assert_eq!(again.machine_count().await, 0);
        assert_eq!(again.power_state("vm-1").await, None);
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

    #[tokio::test]
    async fn bare_metal_follows_its_run_strategy_and_restart_trigger() {
        let p = SimProvisioner::open(Arc::new(MemorySimState::new()))
            .await
            .unwrap();
        let mut req = ProvisionBareMetalRequest {
            instance_id: "bmi-1".into(),
            host_id: "host-1".into(),
            image: "rhel-9.4".into(),
            ssh_public_key: "ssh-ed25519 AAAA test".into(),
            user_data: "#cloud-config\n".into(),
            run_strategy: RunStrategy::Halted,
            ..Default::default()
        };
        p.provision_baremetal(&req).await.unwrap();
        // Recorded as asked, powered off.
        assert_eq!(
            p.machine("bmi-1").await,
            Some(SimMachine::BareMetal(req.clone()))
        );
        assert_eq!(p.power_state("bmi-1").await, Some(PowerState::Off));
        req.run_strategy = RunStrategy::Always;
        p.provision_baremetal(&req).await.unwrap();
        assert_eq!(p.power_state("bmi-1").await, Some(PowerState::On));
        assert_eq!(p.restart_count("bmi-1"), 0);
        req.restart_trigger = "1".into();
        p.provision_baremetal(&req).await.unwrap();
        p.provision_baremetal(&req).await.unwrap();
        assert_eq!(p.restart_count("bmi-1"), 1, "one restart per new trigger");
        // Manual leaves the power state to the owner.
        let bm_ref = MachineRef::BareMetal {
            instance_id: "bmi-1".into(),
            host_id: "host-1".into(),
        };
        p.power(&bm_ref, PowerState::Off).await.unwrap();
        req.run_strategy = RunStrategy::Manual;
        p.provision_baremetal(&req).await.unwrap();
        assert_eq!(p.power_state("bmi-1").await, Some(PowerState::Off));
        // The installation itself never changes.
        let mut other = req.clone();
        other.image = "ubuntu-24.04".into();
        assert!(matches!(
            p.provision_baremetal(&other).await,
            Err(OpError::Permanent(_))
        ));
    }
}
