//! Provisioners boot virtual machines, install bare-metal servers and build clusters (workload
//! provisioning is not a manager operation). Networking is already in place when they are
//! called: every NIC has its fabric port and DHCP reservation, so a provisioner only makes the
//! machine exist and boot with those MACs.
//!
//! Drivers: `sim` ([`SimProvisioner`]: machines recorded in the sim state store), `exec`
//! ([`ExecProvisioner`]: a provider's program per operation, the same conventions as `exec`
//! managers) and `linux` (machine namespaces running a DHCP client, in `osac-linux`). Which
//! one a server uses is configured by a `role: provisioner` registration
//! ([`ProvisionerRegistration`]).

// Request fields and enum variants name themselves; the types carry the explanations.
#![allow(missing_docs)]

#[cfg(feature = "testing")]
pub mod conformance;
pub mod exec;
pub mod registration;

use std::net::{Ipv4Addr, Ipv6Addr};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::contract::OpError;

/// The `sim` provisioner lives with the other sim drivers in [`crate::sim::provisioner`].
pub use crate::sim::provisioner as sim;
pub use crate::sim::provisioner::{SIM_PROVISIONER_NAMESPACE, SimMachine, SimProvisioner};
pub use exec::ExecProvisioner;
pub use registration::{ProvisionerRegistration, RegistrationFile};

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

/// Install a bare-metal host for an instance and power it per `run_strategy`. The same
/// instance is asked again (same installation) when its run strategy or restart trigger
/// changes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvisionBareMetalRequest {
    pub instance_id: String,
    pub host_id: String,
    pub nics: Vec<Nic>,
    /// OS image to install; empty: the provisioner's default.
    #[serde(default)]
    pub image: String,
    /// OpenSSH public key for the default user; empty: none.
    #[serde(default)]
    pub ssh_public_key: String,
    /// Cloud-init / ignition user data, as the tenant wrote it; empty: none.
    #[serde(default)]
    pub user_data: String,
    #[serde(default)]
    pub run_strategy: RunStrategy,
    /// Opaque; a value different from the previous call's restarts a machine that is on.
    #[serde(default)]
    pub restart_trigger: String,
}

impl ProvisionBareMetalRequest {
    /// Whether `other` installs the same machine (everything but the power policy and the
    /// restart trigger is equal): a repeated call may only change those two.
    pub fn same_installation(&self, other: &ProvisionBareMetalRequest) -> bool {
        ProvisionBareMetalRequest {
            run_strategy: other.run_strategy,
            restart_trigger: other.restart_trigger.clone(),
            ..self.clone()
        } == *other
    }
}

/// Power policy of a bare-metal machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStrategy {
    /// Powered on, kept on.
    #[default]
    Always,
    /// Installed and kept powered off.
    Halted,
    /// Powered on by the first call; later calls leave the power state as it is.
    Manual,
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

/// The machine a power or discovery call is about: a VM by its instance id, a bare-metal
/// server by its instance and the inventory host it runs on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MachineRef {
    Vm {
        instance_id: String,
    },
    BareMetal {
        instance_id: String,
        host_id: String,
    },
}

impl MachineRef {
    /// The workload id (VM or bare-metal instance).
    pub fn instance_id(&self) -> &str {
        match self {
            MachineRef::Vm { instance_id } | MachineRef::BareMetal { instance_id, .. } => {
                instance_id
            }
        }
    }
}

/// Wanted power state of a machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PowerState {
    On,
    Off,
}

/// What the backend sees on one NIC of a machine. Absent addresses: none seen (yet).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DiscoveredNic {
    pub mac_address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4_address: Option<Ipv4Addr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6_address: Option<Ipv6Addr>,
}

/// The provisioning operations: failure injection, call counting, and the wire names of the
/// `exec` driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProvisionOp {
    BootVm,
    DeleteVm,
    ProvisionBareMetal,
    DeprovisionBareMetal,
    ProvisionCluster,
    DeprovisionCluster,
    Power,
    DiscoverAddresses,
}

impl ProvisionOp {
    /// Every operation.
    pub const ALL: [ProvisionOp; 8] = [
        ProvisionOp::BootVm,
        ProvisionOp::DeleteVm,
        ProvisionOp::ProvisionBareMetal,
        ProvisionOp::DeprovisionBareMetal,
        ProvisionOp::ProvisionCluster,
        ProvisionOp::DeprovisionCluster,
        ProvisionOp::Power,
        ProvisionOp::DiscoverAddresses,
    ];

    /// The wire name (the last argument of an `exec` provisioner's command).
    pub fn as_str(self) -> &'static str {
        match self {
            ProvisionOp::BootVm => "boot_vm",
            ProvisionOp::DeleteVm => "delete_vm",
            ProvisionOp::ProvisionBareMetal => "provision_baremetal",
            ProvisionOp::DeprovisionBareMetal => "deprovision_baremetal",
            ProvisionOp::ProvisionCluster => "provision_cluster",
            ProvisionOp::DeprovisionCluster => "deprovision_cluster",
            ProvisionOp::Power => "power",
            ProvisionOp::DiscoverAddresses => "discover_addresses",
        }
    }
}

impl std::fmt::Display for ProvisionOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Makes workloads exist. Every call is idempotent and reports failures as values.
#[async_trait]
pub trait Provisioner: Send + Sync {
    /// Boots (or finds booted) the VM.
    async fn boot_vm(&self, req: &BootVmRequest) -> Result<(), OpError>;
    /// Deletes the VM; a missing VM is success.
    async fn delete_vm(&self, instance_id: &str) -> Result<(), OpError>;
    /// Installs the host for the instance (image, SSH key, user data) and powers it per the
    /// request's run strategy: `always` on, `halted` off, `manual` on at the first call and
    /// untouched by later ones. A call whose restart trigger differs from the previous call's
    /// restarts a machine that is on. Installation fields must match a previous call's.
    async fn provision_baremetal(&self, req: &ProvisionBareMetalRequest) -> Result<(), OpError>;
    /// Wipes the host and powers it off; an unknown instance is success.
    async fn deprovision_baremetal(&self, instance_id: &str, host_id: &str) -> Result<(), OpError>;
    /// Installs the cluster on its agents and brings up its API and ingress VIPs.
    async fn provision_cluster(&self, req: &ProvisionClusterRequest) -> Result<(), OpError>;
    /// Tears the cluster down; agents return to the pre-booted state.
    async fn deprovision_cluster(&self, cluster_id: &str) -> Result<(), OpError>;

    /// Powers a provisioned VM or bare-metal server on or off (already in that state:
    /// success). A machine that was never provisioned is a permanent error. The default
    /// answers every call with a permanent "not supported" error.
    async fn power(&self, machine: &MachineRef, state: PowerState) -> Result<(), OpError> {
        Err(OpError::permanent(format!(
            "this provisioner cannot power {} {state:?}",
            machine.instance_id()
        )))
    }

    /// The NICs the backend sees on a machine, by MAC, with the addresses it sees on them.
    /// Only MACs of the machine's NICs; an unknown machine has none. Informational: the
    /// fabric's DHCP lease query is what the controllers trust. The default knows nothing.
    async fn discover_addresses(
        &self,
        machine: &MachineRef,
    ) -> Result<Vec<DiscoveredNic>, OpError> {
        let _ = machine;
        Ok(Vec::new())
    }
}
