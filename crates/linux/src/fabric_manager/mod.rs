//! The `linux` driver of the fabric manager role: a router namespace per VirtualNetwork, a bridge and a
//! dnsmasq per subnet, veth ports with anti-spoofing, stateful security groups, NAT, and the
//! external namespace. Every operation is planned on the shared fabric model
//! ([`osac_backends::fabric_model`]: validation, allocation, the records to write); this driver
//! renders kernel state from the records. Every operation is idempotent and re-creates missing
//! kernel state when called again, which is how a start-up resync rebuilds the dataplane.

mod counters;
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
use osac_backends::fabric_model::{NetworkAttachmentRecord, Record, SubnetRecord};
use osac_backends::types::*;
use osac_backends::{FabricManager, OpError, Registration, Request, Role};
use tokio::sync::Mutex;

use crate::config::LinuxSettings;
use crate::error::LinuxError;
use osac_backends::fabric_model::Change;
use record_files::RecordStore;
use records::{Model, Placement, kind};

pub use gc::{GcReport, OwnedSet, gc, gc_among};
pub use record_files::RecordStore as RecordStoreHandle;
pub use records::Transit;

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
        let mut model = Model::default();
        for k in kind::ALL {
            for (path, text) in store.load_texts(k).await? {
                model.load(k, &text).map_err(|e| LinuxError::State {
                    path: path.display().to_string(),
                    message: e.to_string(),
                })?;
            }
        }
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

    /// A network attachment's record (tests, dev tooling).
    pub async fn port(&self, attachment_id: &str) -> Option<NetworkAttachmentRecord> {
        let inner = self.inner.lock().await;
        inner.model.state.attachment(attachment_id).cloned()
    }

    /// A subnet record (tests, dev tooling).
    pub async fn subnet(&self, subnet_id: &str) -> Option<SubnetRecord> {
        let inner = self.inner.lock().await;
        inner.model.state.subnet(subnet_id).cloned()
    }

    /// A VirtualNetwork's router transit addresses (tests, dev tooling).
    pub async fn transit(&self, vn_id: &str) -> Option<Transit> {
        let inner = self.inner.lock().await;
        inner.model.transit.get(vn_id).copied()
    }

    /// Ids this fabric still holds, for [`gc`] in processes that have no store at hand.
    pub async fn owned(&self) -> OwnedSet {
        let inner = self.inner.lock().await;
        let m = &inner.model.state;
        OwnedSet {
            virtual_networks: m.vns().map(|v| v.virtual_network_id.clone()).collect(),
            subnets: m.subnets().map(|s| s.subnet_id.clone()).collect(),
            machines: m.attachments().map(|p| p.machine().0).collect(),
            hosting_clusters: m
                .attachments()
                .filter(|p| p.machine().2)
                .map(|p| p.host.clone())
                .collect(),
        }
    }
}

impl Inner {
    /// Persists what a plan of the fabric model changes, then applies it to the model. A record
    /// that is already as planned is not written again.
    pub(crate) async fn commit(&mut self, changes: Vec<Change>) -> Result<(), OpError> {
        for (key, record) in changes {
            match &record {
                Some(r) if self.model.state.get(&key) == Some(r) => continue,
                Some(r) => {
                    let (kind, id, text) = self.model.file(r)?;
                    self.store.put_text(kind, &id, text).await?;
                }
                None => {
                    if let Some((kind, id)) = self.model.file_of_key(&key) {
                        self.store.delete(kind, &id).await?;
                    }
                }
            }
            if record.is_none()
                && let Some(Record::VirtualNetwork(v)) = self.model.state.get(&key)
            {
                let id = v.virtual_network_id.clone();
                self.model.transit.remove(&id);
            }
            if record.is_none()
                && let Some(Record::Attachment(a)) = self.model.state.get(&key)
            {
                let id = a.attachment_id.clone();
                self.model.marks.remove(&id);
            }
            self.model.state.apply(key, record);
        }
        Ok(())
    }

    /// Writes a port's record again (its mark changed; the model's fields did not).
    pub(crate) async fn persist_attachment(&self, attachment_id: &str) -> Result<(), OpError> {
        if let Some(a) = self.model.state.attachment(attachment_id) {
            let (kind, id, text) = self.model.file(&Record::Attachment(a.clone()))?;
            self.store.put_text(kind, &id, text).await?;
        }
        Ok(())
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

    /// Reads the counters outside the manager's lock: only the list of paths is taken under
    /// it, so metering never holds up an operation.
    async fn nat_counters(&self) -> Result<Option<Vec<NatPathCounter>>, OpError> {
        let paths = self.inner.lock().await.nat_paths();
        counters::read(paths).await.map(Some)
    }
}
