//! The `linux` driver of the fabric manager role: a router namespace per VirtualNetwork, a bridge and a
//! dnsmasq per subnet, veth ports with anti-spoofing, stateful security groups, NAT, and the
//! external namespace. Every operation is idempotent and re-creates missing kernel state when
//! called again, which is how a start-up resync rebuilds the dataplane. The preconditions it
//! shares with the sim driver are in [`osac_backends::checks`].

pub mod dnsmasq;
pub mod gc;
mod nat;
pub mod ports;
mod record_files;
mod records;
pub mod render;
mod router;
mod secgroup;
mod subnet;
mod vips;

use std::sync::Arc;

use async_trait::async_trait;
use osac_backends::types::*;
use osac_backends::{FabricManager, OpError, Registration, Request, Role};
use tokio::sync::Mutex;

use crate::config::LinuxSettings;
use crate::error::LinuxError;
use record_files::RecordStore;
use records::{Model, kind};

pub use gc::{GcReport, OwnedSet, gc, gc_among};
pub use record_files::RecordStore as RecordStoreHandle;
pub use records::{DnatRec, EipRec, PortRec, SgRec, SnatRec, SubnetRec, VnRec};

/// A registered `linux` fabric manager. Operations are serialised (one kernel writer).
pub struct LinuxFabric {
    registration: Registration,
    inner: Arc<Mutex<Inner>>,
}

/// The manager's state behind its lock.
pub(crate) struct Inner {
    pub(crate) settings: LinuxSettings,
    pub(crate) store: RecordStore,
    pub(crate) model: Model,
}

impl LinuxFabric {
    /// Checks the machine ([`crate::preflight`]) and that dnsmasq can read its host entries
    /// ([`dnsmasq::ensure_hosts_root`]), loads the persisted allocations from the
    /// state directory and ensures the external and parking namespaces.
    pub async fn new(
        registration: Registration,
        settings: LinuxSettings,
    ) -> Result<Self, LinuxError> {
        crate::error::ready_to_start(&registration, Role::Fabric, &settings).await?;
        dnsmasq::ensure_hosts_root(&settings)?;
        let store = RecordStore::new(settings.state_dir.join("fabric"));
        let model = Model {
            vns: store.load(kind::VN, |r: &VnRec| r.id.clone()).await?,
            subnets: store
                .load(kind::SUBNET, |r: &SubnetRec| r.id.clone())
                .await?,
            sgs: store.load(kind::SG, |r: &SgRec| r.id.clone()).await?,
            eips: store.load(kind::EIP, |r: &EipRec| r.id.clone()).await?,
            dnats: store.load(kind::DNAT, |r: &DnatRec| r.id.clone()).await?,
            snats: store.load(kind::SNAT, |r: &SnatRec| r.id.clone()).await?,
            ports: store.load(kind::PORT, |r: &PortRec| r.id.clone()).await?,
        };
        crate::kernel::ensure_external(&settings).await?;
        crate::kernel::ensure_park().await?;
        let inner = Arc::new(Mutex::new(Inner {
            settings: settings.clone(),
            store,
            model,
        }));
        // dnsmasq logs stay bounded whatever the workloads send, while this fabric lives.
        let alive = Arc::downgrade(&inner);
        tokio::spawn(async move {
            dnsmasq::bound_logs(&settings, || alive.strong_count() > 0).await;
        });
        Ok(LinuxFabric {
            registration,
            inner,
        })
    }

    /// The settings the manager runs with.
    pub async fn settings(&self) -> LinuxSettings {
        self.inner.lock().await.settings.clone()
    }

    /// A port record (tests, dev tooling).
    pub async fn port(&self, attachment_id: &str) -> Option<PortRec> {
        self.inner
            .lock()
            .await
            .model
            .ports
            .get(attachment_id)
            .cloned()
    }

    /// A subnet record (tests, dev tooling).
    pub async fn subnet(&self, subnet_id: &str) -> Option<SubnetRec> {
        self.inner
            .lock()
            .await
            .model
            .subnets
            .get(subnet_id)
            .cloned()
    }

    /// A VirtualNetwork record with its transit addresses (tests, dev tooling).
    pub async fn virtual_network(&self, vn_id: &str) -> Option<VnRec> {
        self.inner.lock().await.model.vns.get(vn_id).cloned()
    }

    /// Ids this fabric still holds, for [`gc`] in processes that have no store at hand.
    pub async fn owned(&self) -> OwnedSet {
        let inner = self.inner.lock().await;
        let m = &inner.model;
        OwnedSet {
            virtual_networks: m.vns.keys().cloned().collect(),
            subnets: m.subnets.keys().cloned().collect(),
            machines: m.ports.values().map(|p| p.machine().0).collect(),
            hosting_clusters: m
                .ports
                .values()
                .filter(|p| p.machine().2)
                .map(|p| p.host.clone())
                .collect(),
        }
    }
}

/// Logs a failed operation and passes its outcome on.
fn logged<R: Request, T>(_request: &R, result: Result<T, OpError>) -> Result<T, OpError> {
    if let Err(e) = &result {
        tracing::warn!(op = %R::OPERATION, error = %e, "linux fabric operation failed");
    }
    result
}

/// Every operation runs under the manager's lock.
#[async_trait]
impl FabricManager for LinuxFabric {
    fn registration(&self) -> &Registration {
        &self.registration
    }

    async fn create_virtual_network(
        &self,
        req: &CreateVirtualNetworkRequest,
    ) -> Result<(), OpError> {
        let result = self
            .inner
            .lock()
            .await
            .create_virtual_network(req.clone())
            .await;
        logged(req, result)
    }

    async fn delete_virtual_network(
        &self,
        req: &DeleteVirtualNetworkRequest,
    ) -> Result<(), OpError> {
        let result = self
            .inner
            .lock()
            .await
            .delete_virtual_network(req.clone())
            .await;
        logged(req, result)
    }

    async fn create_subnet(
        &self,
        req: &CreateSubnetRequest,
    ) -> Result<CreateSubnetResponse, OpError> {
        let result = self.inner.lock().await.create_subnet(req.clone()).await;
        logged(req, result)
    }

    async fn delete_subnet(&self, req: &DeleteSubnetRequest) -> Result<(), OpError> {
        let result = self.inner.lock().await.delete_subnet(req.clone()).await;
        logged(req, result)
    }

    async fn apply_security_group(&self, req: &ApplySecurityGroupRequest) -> Result<(), OpError> {
        let result = self
            .inner
            .lock()
            .await
            .apply_security_group(req.clone())
            .await;
        logged(req, result)
    }

    async fn delete_security_group(&self, req: &DeleteSecurityGroupRequest) -> Result<(), OpError> {
        let result = self
            .inner
            .lock()
            .await
            .delete_security_group(req.clone())
            .await;
        logged(req, result)
    }

    async fn allocate_external_ip(
        &self,
        req: &AllocateExternalIpRequest,
    ) -> Result<AllocateExternalIpResponse, OpError> {
        let result = self
            .inner
            .lock()
            .await
            .allocate_external_ip(req.clone())
            .await;
        logged(req, result)
    }

    async fn release_external_ip(&self, req: &ReleaseExternalIpRequest) -> Result<(), OpError> {
        let result = self
            .inner
            .lock()
            .await
            .release_external_ip(req.clone())
            .await;
        logged(req, result)
    }

    async fn create_external_ip_attachment(
        &self,
        req: &CreateExternalIpAttachmentRequest,
    ) -> Result<(), OpError> {
        let result = self.inner.lock().await.create_dnat(req.clone()).await;
        logged(req, result)
    }

    async fn delete_external_ip_attachment(
        &self,
        req: &DeleteExternalIpAttachmentRequest,
    ) -> Result<(), OpError> {
        let result = self.inner.lock().await.delete_dnat(req.clone()).await;
        logged(req, result)
    }

    async fn create_nat_gateway(&self, req: &CreateNatGatewayRequest) -> Result<(), OpError> {
        let result = self
            .inner
            .lock()
            .await
            .create_nat_gateway(req.clone())
            .await;
        logged(req, result)
    }

    async fn delete_nat_gateway(&self, req: &DeleteNatGatewayRequest) -> Result<(), OpError> {
        let result = self
            .inner
            .lock()
            .await
            .delete_nat_gateway(req.clone())
            .await;
        logged(req, result)
    }

    async fn create_network_attachment(
        &self,
        req: &CreateNetworkAttachmentRequest,
    ) -> Result<PortAddresses, OpError> {
        let result = self.inner.lock().await.create_port(req.clone()).await;
        logged(req, result)
    }

    async fn delete_network_attachment(
        &self,
        req: &DeleteNetworkAttachmentRequest,
    ) -> Result<(), OpError> {
        let result = self.inner.lock().await.delete_port(req.clone()).await;
        logged(req, result)
    }

    async fn query_dhcp_lease(
        &self,
        req: &QueryDhcpLeaseRequest,
    ) -> Result<PortAddresses, OpError> {
        let result = self.inner.lock().await.query_lease(req.clone()).await;
        logged(req, result)
    }
}
