//! The `exec` provisioner: a provider's program per operation (KubeVirt, Ironic, HyperShift…
//! behind a script or playbook), with the conventions of `exec` managers (see
//! [`crate::exec`]): `command args... <operation>`, request JSON on stdin, result JSON on
//! stdout, exit 75 = transient, other non-zero = permanent with the last stderr line as
//! message, the process group killed on timeout. `OSAC_ROLE` is `provisioner`.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::registration::{PROVISIONER_ROLE, ProvisionerRegistration};
use super::{
    BootVmRequest, DiscoveredNic, MachineRef, PowerState, ProvisionBareMetalRequest,
    ProvisionClusterRequest, ProvisionOp, Provisioner,
};
use crate::contract::OpError;
use crate::exec::{ExecInvocation, NotExecDriver};
use crate::registration::ExecConfig;

/// A provisioner implemented by an external command.
pub struct ExecProvisioner {
    registration: ProvisionerRegistration,
    config: ExecConfig,
}

/// The request of `power`: the machine's fields and the wanted state.
#[derive(Serialize)]
struct PowerRequest<'a> {
    #[serde(flatten)]
    machine: &'a MachineRef,
    state: PowerState,
}

/// The result of `discover_addresses`.
#[derive(Deserialize)]
struct DiscoverResult {
    #[serde(default)]
    nics: Vec<DiscoveredNic>,
}

impl ExecProvisioner {
    /// Binds a `driver: exec` provisioner registration.
    pub fn new(registration: ProvisionerRegistration) -> Result<Self, NotExecDriver> {
        let config = NotExecDriver::exec_config(&registration.name, &registration.driver)?;
        Ok(ExecProvisioner {
            registration,
            config,
        })
    }

    /// The registration this provisioner runs.
    pub fn registration(&self) -> &ProvisionerRegistration {
        &self.registration
    }

    async fn call(
        &self,
        op: ProvisionOp,
        request: serde_json::Value,
    ) -> Result<serde_json::Value, OpError> {
        ExecInvocation {
            name: &self.registration.name,
            role: PROVISIONER_ROLE,
            config: &self.config,
        }
        .run(op.as_str(), &request)
        .await
    }

    /// Calls an operation whose result carries nothing the server uses.
    async fn call_unit(&self, op: ProvisionOp, request: serde_json::Value) -> Result<(), OpError> {
        self.call(op, request).await.map(drop)
    }
}

fn encode<T: Serialize>(op: ProvisionOp, request: &T) -> Result<serde_json::Value, OpError> {
    serde_json::to_value(request)
        .map_err(|e| OpError::permanent(format!("cannot encode the {op} request: {e}")))
}

#[async_trait]
impl Provisioner for ExecProvisioner {
    async fn boot_vm(&self, req: &BootVmRequest) -> Result<(), OpError> {
        let op = ProvisionOp::BootVm;
        self.call_unit(op, encode(op, req)?).await
    }

    async fn delete_vm(&self, instance_id: &str) -> Result<(), OpError> {
        self.call_unit(ProvisionOp::DeleteVm, json!({"instance_id": instance_id}))
            .await
    }

    async fn provision_baremetal(&self, req: &ProvisionBareMetalRequest) -> Result<(), OpError> {
        let op = ProvisionOp::ProvisionBareMetal;
        self.call_unit(op, encode(op, req)?).await
    }

    async fn deprovision_baremetal(&self, instance_id: &str, host_id: &str) -> Result<(), OpError> {
        self.call_unit(
            ProvisionOp::DeprovisionBareMetal,
            json!({"instance_id": instance_id, "host_id": host_id}),
        )
        .await
    }

    async fn provision_cluster(&self, req: &ProvisionClusterRequest) -> Result<(), OpError> {
        let op = ProvisionOp::ProvisionCluster;
        self.call_unit(op, encode(op, req)?).await
    }

    async fn deprovision_cluster(&self, cluster_id: &str) -> Result<(), OpError> {
        self.call_unit(
            ProvisionOp::DeprovisionCluster,
            json!({"cluster_id": cluster_id}),
        )
        .await
    }

    async fn power(&self, machine: &MachineRef, state: PowerState) -> Result<(), OpError> {
        let op = ProvisionOp::Power;
        self.call_unit(op, encode(op, &PowerRequest { machine, state })?)
            .await
    }

    async fn discover_addresses(
        &self,
        machine: &MachineRef,
    ) -> Result<Vec<DiscoveredNic>, OpError> {
        let op = ProvisionOp::DiscoverAddresses;
        let result = self.call(op, encode(op, machine)?).await?;
        let parsed: DiscoverResult = serde_json::from_value(result).map_err(|e| {
            OpError::backend_permanent(format!(
                "{} {op} printed an unexpected result: {e}",
                self.config.command.display()
            ))
        })?;
        Ok(parsed.nics)
    }
}
