//! The provisioner as reconciles see it: no call is made once the reconcile's shard lease is
//! lost (by this replica's clock; the sim provisioner also checks the fencing token in the
//! transaction that writes its state).

use std::sync::Arc;

use async_trait::async_trait;
use osac_backends::OpError;
use osac_backends::fence::check;
use osac_backends::provision::{
    BootVmRequest, DiscoveredNic, MachineRef, PowerState, ProvisionBareMetalRequest,
    ProvisionClusterRequest, Provisioner,
};

/// Wraps the provisioner the controllers use.
pub(crate) struct FencedProvisioner(pub Arc<dyn Provisioner>);

#[async_trait]
impl Provisioner for FencedProvisioner {
    async fn boot_vm(&self, req: &BootVmRequest) -> Result<(), OpError> {
        check()?;
        self.0.boot_vm(req).await
    }
    async fn delete_vm(&self, instance_id: &str) -> Result<(), OpError> {
        check()?;
        self.0.delete_vm(instance_id).await
    }
    async fn provision_baremetal(&self, req: &ProvisionBareMetalRequest) -> Result<(), OpError> {
        check()?;
        self.0.provision_baremetal(req).await
    }
    async fn deprovision_baremetal(&self, instance_id: &str, host_id: &str) -> Result<(), OpError> {
        check()?;
        self.0.deprovision_baremetal(instance_id, host_id).await
    }
    async fn provision_cluster(&self, req: &ProvisionClusterRequest) -> Result<(), OpError> {
        check()?;
        self.0.provision_cluster(req).await
    }
    async fn deprovision_cluster(&self, cluster_id: &str) -> Result<(), OpError> {
        check()?;
        self.0.deprovision_cluster(cluster_id).await
    }
    async fn power(&self, machine: &MachineRef, state: PowerState) -> Result<(), OpError> {
        check()?;
        self.0.power(machine, state).await
    }
    async fn discover_addresses(
        &self,
        machine: &MachineRef,
    ) -> Result<Vec<DiscoveredNic>, OpError> {
        self.0.discover_addresses(machine).await
    }
}
