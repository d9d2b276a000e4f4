//! The `linux` k8s manager: one namespace per hosting cluster with an overlay bridge per
//! subnet, joined to the subnet's bridge in the router namespace by VXLAN (VNI = segment id,
//! UDP 4789) over the IPv6 underlay bridge in `osac-ext`. VMs plug into the overlay bridge;
//! the fabric enforces anti-spoofing and security groups there too.

use std::collections::BTreeMap;

use async_trait::async_trait;
use osac_backends::checks;
use osac_backends::{
    CreateSubnetOverlayRequest, DeleteSubnetOverlayRequest, K8sManager, OpError, Registration, Role,
};
use tokio::sync::Mutex;

use crate::cmd;
use crate::config::LinuxSettings;
use crate::error::LinuxError;
use crate::fabric_manager::render;
use crate::kernel;
use crate::names;

const OVERLAY_KIND: &str = "overlay";

/// A subnet's overlay on one hosting cluster, as programmed: the request that programmed it
/// (with the reserved VIP block the cluster load balancer may use and DHCP never hands out).
pub type OverlayRec = CreateSubnetOverlayRequest;

fn overlay_key(cluster: &str, subnet: &str) -> String {
    format!("{cluster}/{subnet}")
}

/// A registered `linux` k8s manager.
pub struct LinuxK8s {
    registration: Registration,
    settings: LinuxSettings,
    clusters: Vec<String>,
    store: crate::fabric_manager::RecordStoreHandle,
    overlays: Mutex<BTreeMap<String, OverlayRec>>,
}

impl LinuxK8s {
    /// Checks the machine, loads the overlays it programmed, and builds every hosting
    /// cluster's namespace and underlay leg. Hosting clusters come from the registration's
    /// `hosting_clusters`, else from the settings.
    pub async fn new(
        registration: Registration,
        settings: LinuxSettings,
    ) -> Result<Self, LinuxError> {
        crate::error::ready_to_start(&registration, Role::K8s, &settings).await?;
        let clusters = if registration.hosting_clusters.is_empty() {
            settings.hosting_clusters.clone()
        } else {
            registration.hosting_clusters.clone()
        };
        let store = crate::fabric_manager::RecordStoreHandle::new(settings.state_dir.join("k8s"));
        let overlays = store
            .load(OVERLAY_KIND, |o: &OverlayRec| {
                overlay_key(&o.hosting_cluster, &o.subnet_id)
            })
            .await?;
        let me = LinuxK8s {
            registration,
            settings,
            clusters,
            store,
            overlays: Mutex::new(overlays),
        };
        for c in &me.clusters {
            me.ensure_cluster(c).await?;
        }
        Ok(me)
    }

    /// The hosting clusters this manager serves.
    pub fn hosting_clusters(&self) -> &[String] {
        &self.clusters
    }

    /// A programmed overlay (tests, dev tooling, the provisioner's VIP choice).
    pub async fn overlay(&self, subnet_id: &str, cluster: &str) -> Option<OverlayRec> {
        self.overlays
            .lock()
            .await
            .get(&overlay_key(cluster, subnet_id))
            .cloned()
    }

    /// A hosting cluster's namespace, underlay leg, br_netfilter and anti-spoofing table.
    async fn ensure_cluster(&self, cluster: &str) -> Result<(), LinuxError> {
        let ns = names::hosting_ns(cluster);
        cmd::ensure_netns(&ns).await?;
        kernel::prepare_bridging_ns(&ns, &[]).await?;
        kernel::ensure_underlay(
            &self.settings,
            &ns,
            &names::hosting_underlay_ext_end(cluster),
        )
        .await?;
        // Workloads meet a hosting cluster at layer 2 only: it answers nothing on its own
        // (VXLAN and neighbour discovery come only through the underlay).
        let mut script = render::l2_guard_table();
        script.push_str(&render::bridge_table());
        cmd::nft(&ns, &script).await?;
        Ok(())
    }

    async fn create_overlay(&self, r: &CreateSubnetOverlayRequest) -> Result<(), OpError> {
        checks::subnet_overlay(r, &self.clusters)?;
        let mut overlays = self.overlays.lock().await;
        let other = overlays.values().find(|o| {
            o.hosting_cluster == r.hosting_cluster
                && o.segment_id == r.segment_id
                && o.subnet_id != r.subnet_id
        });
        checks::segment_free(r, other.map(|o| o.subnet_id.as_str()))?;
        let key = overlay_key(&r.hosting_cluster, &r.subnet_id);
        let old = overlays.get(&key).cloned();
        let rec: OverlayRec = r.clone();
        let ns = names::hosting_ns(&rec.hosting_cluster);
        self.ensure_cluster(&rec.hosting_cluster).await?;
        let br = names::subnet_bridge(&rec.subnet_id);
        if let Some(old) = &old
            && old.segment_id != rec.segment_id
        {
            cmd::ip_ignore_missing(
                Some(&ns),
                &["link", "del", &names::vxlan_dev(old.segment_id)],
            )
            .await?;
        }
        kernel::ensure_bridge(&ns, &br, Some(self.settings.mtu)).await?;
        let local = kernel::underlay_addr(self.settings.underlay_ipv6_cidr, &ns);
        kernel::ensure_vxlan(&ns, rec.segment_id, local, &br, self.settings.mtu).await?;
        if old.as_ref() != Some(&rec) {
            self.store.put(OVERLAY_KIND, &key, &rec).await?;
            overlays.insert(key, rec);
        }
        Ok(())
    }

    async fn delete_overlay(&self, r: &DeleteSubnetOverlayRequest) -> Result<(), OpError> {
        checks::hosting_cluster(&r.hosting_cluster, &self.clusters)?;
        let mut overlays = self.overlays.lock().await;
        let key = overlay_key(&r.hosting_cluster, &r.subnet_id);
        let ns = names::hosting_ns(&r.hosting_cluster);
        if cmd::netns_exists(&ns).await? {
            if let Some(o) = overlays.get(&key) {
                cmd::ip_ignore_missing(
                    Some(&ns),
                    &["link", "del", &names::vxlan_dev(o.segment_id)],
                )
                .await?;
            }
            cmd::ip_ignore_missing(
                Some(&ns),
                &["link", "del", &names::subnet_bridge(&r.subnet_id)],
            )
            .await?;
        }
        if overlays.remove(&key).is_some() {
            self.store.delete(OVERLAY_KIND, &key).await?;
        }
        Ok(())
    }
}

#[async_trait]
impl K8sManager for LinuxK8s {
    fn registration(&self) -> &Registration {
        &self.registration
    }

    async fn create_subnet_overlay(&self, req: &CreateSubnetOverlayRequest) -> Result<(), OpError> {
        self.create_overlay(req).await
    }

    async fn delete_subnet_overlay(&self, req: &DeleteSubnetOverlayRequest) -> Result<(), OpError> {
        self.delete_overlay(req).await
    }
}
