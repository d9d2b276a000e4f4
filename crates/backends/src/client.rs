//! Typed wrappers over [`Manager::call`]: the controllers call these, never raw JSON.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::contract::{Manager, OpError, Operation};
use crate::registration::Registration;
use crate::types::*;

/// Serialize → call → deserialize; a response that does not parse is a permanent error
/// (the manager broke the contract; retrying will not fix it).
async fn typed<Req: Serialize + Sync, Resp: DeserializeOwned>(
    manager: &dyn Manager,
    op: Operation,
    request: &Req,
) -> Result<Resp, OpError> {
    let value = serde_json::to_value(request)
        .map_err(|e| OpError::permanent(format!("cannot encode {op} request: {e}")))?;
    let response = manager.call(op, value).await?;
    serde_json::from_value(response).map_err(|e| {
        OpError::backend_permanent(format!(
            "manager '{}' returned a malformed {op} response: {e}",
            manager.registration().name
        ))
    })
}

/// Like [`typed`] for operations whose result is `{}`: any result is accepted.
async fn unit<Req: Serialize + Sync>(
    manager: &dyn Manager,
    op: Operation,
    request: &Req,
) -> Result<(), OpError> {
    let value = serde_json::to_value(request)
        .map_err(|e| OpError::permanent(format!("cannot encode {op} request: {e}")))?;
    manager.call(op, value).await.map(|_| ())
}

/// Typed access to a fabric manager.
#[derive(Clone)]
pub struct FabricClient(pub Arc<dyn Manager>);

impl FabricClient {
    /// Wraps a manager (role checks happen per call: the wrong role is a permanent error).
    pub fn new(manager: Arc<dyn Manager>) -> Self {
        FabricClient(manager)
    }

    /// The wrapped manager's registration.
    pub fn registration(&self) -> &Registration {
        self.0.registration()
    }

    /// The wrapped manager.
    pub fn manager(&self) -> &Arc<dyn Manager> {
        &self.0
    }

    /// `create_virtual_network`.
    pub async fn create_virtual_network(
        &self,
        req: &CreateVirtualNetworkRequest,
    ) -> Result<(), OpError> {
        unit(&*self.0, Operation::CreateVirtualNetwork, req).await
    }

    /// `delete_virtual_network`.
    pub async fn delete_virtual_network(
        &self,
        req: &DeleteVirtualNetworkRequest,
    ) -> Result<(), OpError> {
        unit(&*self.0, Operation::DeleteVirtualNetwork, req).await
    }

    /// `create_subnet` → segment id and gateways.
    pub async fn create_subnet(
        &self,
        req: &CreateSubnetRequest,
    ) -> Result<CreateSubnetResponse, OpError> {
        typed(&*self.0, Operation::CreateSubnet, req).await
    }

    /// `delete_subnet`.
    pub async fn delete_subnet(&self, req: &DeleteSubnetRequest) -> Result<(), OpError> {
        unit(&*self.0, Operation::DeleteSubnet, req).await
    }

    /// `apply_security_group` (full desired rules).
    pub async fn apply_security_group(
        &self,
        req: &ApplySecurityGroupRequest,
    ) -> Result<(), OpError> {
        unit(&*self.0, Operation::ApplySecurityGroup, req).await
    }

    /// `delete_security_group`.
    pub async fn delete_security_group(
        &self,
        req: &DeleteSecurityGroupRequest,
    ) -> Result<(), OpError> {
        unit(&*self.0, Operation::DeleteSecurityGroup, req).await
    }

    /// `allocate_external_ip` → address.
    pub async fn allocate_external_ip(
        &self,
        req: &AllocateExternalIpRequest,
    ) -> Result<AllocateExternalIpResponse, OpError> {
        typed(&*self.0, Operation::AllocateExternalIp, req).await
    }

    /// `release_external_ip`.
    pub async fn release_external_ip(&self, req: &ReleaseExternalIpRequest) -> Result<(), OpError> {
        unit(&*self.0, Operation::ReleaseExternalIp, req).await
    }

    /// `create_external_ip_attachment` (inbound DNAT).
    pub async fn create_external_ip_attachment(
        &self,
        req: &CreateExternalIpAttachmentRequest,
    ) -> Result<(), OpError> {
        unit(&*self.0, Operation::CreateExternalIpAttachment, req).await
    }

    /// `delete_external_ip_attachment`.
    pub async fn delete_external_ip_attachment(
        &self,
        req: &DeleteExternalIpAttachmentRequest,
    ) -> Result<(), OpError> {
        unit(&*self.0, Operation::DeleteExternalIpAttachment, req).await
    }

    /// `create_nat_gateway` (outbound SNAT).
    pub async fn create_nat_gateway(&self, req: &CreateNatGatewayRequest) -> Result<(), OpError> {
        unit(&*self.0, Operation::CreateNatGateway, req).await
    }

    /// `delete_nat_gateway`.
    pub async fn delete_nat_gateway(&self, req: &DeleteNatGatewayRequest) -> Result<(), OpError> {
        unit(&*self.0, Operation::DeleteNatGateway, req).await
    }

    /// `create_network_attachment` → the port's addresses.
    pub async fn create_network_attachment(
        &self,
        req: &CreateNetworkAttachmentRequest,
    ) -> Result<PortAddresses, OpError> {
        typed(&*self.0, Operation::CreateNetworkAttachment, req).await
    }

    /// `delete_network_attachment`.
    pub async fn delete_network_attachment(
        &self,
        req: &DeleteNetworkAttachmentRequest,
    ) -> Result<(), OpError> {
        unit(&*self.0, Operation::DeleteNetworkAttachment, req).await
    }

    /// `query_dhcp_lease` → addresses (empty = not yet).
    pub async fn query_dhcp_lease(
        &self,
        req: &QueryDhcpLeaseRequest,
    ) -> Result<PortAddresses, OpError> {
        typed(&*self.0, Operation::QueryDhcpLease, req).await
    }
}

/// Typed access to a k8s manager.
#[derive(Clone)]
pub struct K8sClient(pub Arc<dyn Manager>);

impl K8sClient {
    /// Wraps a manager (role checks happen per call).
    pub fn new(manager: Arc<dyn Manager>) -> Self {
        K8sClient(manager)
    }

    /// The wrapped manager's registration (its `hosting_clusters` drive the overlay fan-out).
    pub fn registration(&self) -> &Registration {
        self.0.registration()
    }

    /// The hosting clusters to call `create_subnet_overlay` on.
    pub fn hosting_clusters(&self) -> &[String] {
        &self.0.registration().hosting_clusters
    }

    /// The wrapped manager.
    pub fn manager(&self) -> &Arc<dyn Manager> {
        &self.0
    }

    /// `create_subnet_overlay` on one hosting cluster.
    pub async fn create_subnet_overlay(
        &self,
        req: &CreateSubnetOverlayRequest,
    ) -> Result<(), OpError> {
        unit(&*self.0, Operation::CreateSubnetOverlay, req).await
    }

    /// `delete_subnet_overlay` on one hosting cluster.
    pub async fn delete_subnet_overlay(
        &self,
        req: &DeleteSubnetOverlayRequest,
    ) -> Result<(), OpError> {
        unit(&*self.0, Operation::DeleteSubnetOverlay, req).await
    }
}
