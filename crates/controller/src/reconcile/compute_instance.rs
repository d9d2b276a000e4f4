//! ComputeInstance (VM): STARTING → NetworkingConfigured (one fabric port per attachment on
//! the VM's hosting cluster) → Provisioned (`boot_vm`) → IPDiscoveryComplete (DHCP leases) →
//! RUNNING with per-attachment addresses and `internal_ip_address` (the primary's).
//! Deletion: `delete_vm`, then the ports, then the finalizer.

use osac_backends::OpError;
use osac_backends::provision::{BootVmRequest, Nic};
use osac_model::{Kind, pb};
use osac_store::Record;

use super::finalizer::{self, Cleanup};
use super::network_phase::{self, Awaited, Port, detach_ports, managers_for_delete};
use super::workload::{
    NETWORKING_CONFIGURED, PROVISIONED, Step, Work, apply_machine, deprovision, external_ip_of,
    provisioner, stop, timed,
};
use super::{Action, Object, ReconcileCtx, ReconcileError, decode, fnv1a};

super::object!(pb::ComputeInstance, pb::ComputeInstanceStatus,
    pending: pb::ComputeInstanceState::Starting, ready: pb::ComputeInstanceState::Running,
    failed: pb::ComputeInstanceState::Failed, deleting: pb::ComputeInstanceState::Deleting,
    delete_failed: None);
super::workload::workload!(
    pb::ComputeInstance,
    pb::ComputeInstanceStatus,
    Kind::ComputeInstance
);

const KIND: Kind = Kind::ComputeInstance;

/// Annotation of a ComputeInstance: the hosting cluster its VM runs on (chosen once).
pub use osac_model::labels::HOSTING_CLUSTER_ANNOTATION;

/// The reference field of ExternalIPAttachments targeting a VM.
pub(crate) const TARGET_FIELD: &str = "spec.compute_instance";

/// The deterministic MAC of a VM's NIC `n`: locally administered unicast (`02:…`).
pub fn vm_mac(instance_id: &str, n: usize) -> String {
    let b = fnv1a(format!("{instance_id}/{n}").bytes()).to_be_bytes();
    format!(
        "02:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[3], b[4], b[5], b[6], b[7]
    )
}

/// The hosting cluster a VM runs on: a stable choice from its id.
pub fn hosting_cluster_for(instance_id: &str, clusters: &[String]) -> Option<String> {
    if clusters.is_empty() {
        return None;
    }
    let n = u64::try_from(clusters.len()).unwrap_or(1);
    let i = usize::try_from(fnv1a(instance_id.bytes()) % n).unwrap_or(0);
    clusters.get(i).cloned()
}

/// The NIC name of attachment `n` inside the VM.
fn nic_name(n: usize) -> String {
    format!("eth{n}")
}

/// The VM's ports on its hosting cluster, MACs derived from the id. A hosting cluster carries
/// the ports of many VMs, so the fabric-side port name is scoped by the VM: `<vm id>/eth<n>`.
fn ports(id: &str, hosting: &str, spec: &pb::ComputeInstanceSpec) -> Vec<Port> {
    spec.compute_network_attachments
        .iter()
        .enumerate()
        .map(|(n, a)| Port {
            attachment_id: format!("{id}/{n}"),
            host: hosting.to_string(),
            interface: format!("{id}/{}", nic_name(n)),
            mac_address: vm_mac(id, n),
            subnet_id: a.subnet.clone(),
            security_groups: a.security_groups.clone(),
            primary: a.primary || spec.compute_network_attachments.len() == 1,
        })
        .collect()
}

pub(crate) async fn reconcile(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    let apply = |rec| apply_machine(ctx, rec, TARGET_FIELD, phases);
    finalizer::reconcile(ctx, rec, apply, |rec| cleanup(ctx, rec)).await
}

/// Network, hosting cluster, boot, addresses, RUNNING.
async fn phases(ctx: &ReconcileCtx, w: &mut Work<pb::ComputeInstance>) -> Step<()> {
    let spec = w.obj.spec.clone().unwrap_or_default();
    let empty = "spec.compute_network_attachments is empty: a VM needs at least one attachment";
    let net =
        network_phase::resolve_machine(ctx, w, &spec.compute_network_attachments, empty).await?;
    let clusters = net.managers.hosting_clusters();
    let recorded = w
        .annotations
        .get(HOSTING_CLUSTER_ANNOTATION)
        .filter(|c| clusters.contains(c))
        .cloned();
    let Some(hosting) = recorded.or_else(|| hosting_cluster_for(w.id(), clusters)) else {
        let e = OpError::permanent(
            "BM-only deployment: this NetworkClass has no k8s manager, so virtual machines are \
             not available",
        );
        return stop(w.failed(ctx, NETWORKING_CONFIGURED, e).await);
    };
    w.annotations
        .insert(HOSTING_CLUSTER_ANNOTATION.to_string(), hosting.clone());
    let ports = ports(w.id(), &hosting, &spec);

    let summary = format!(
        "{} port(s) attached on hosting cluster '{hosting}'",
        ports.len()
    );
    network_phase::attach(ctx, w, &net, &ports, &[], summary).await?;

    if !w.done(PROVISIONED) {
        let provisioner = provisioner(ctx, w, PROVISIONED).await?;
        let request = BootVmRequest {
            instance_id: w.id().to_string(),
            hosting_cluster: hosting.clone(),
            template: spec.template.clone(),
            nics: ports
                .iter()
                .enumerate()
                .map(|(n, p)| Nic {
                    name: nic_name(n),
                    mac_address: p.mac_address.clone(),
                    subnet_id: p.subnet_id.clone(),
                    primary: p.primary,
                })
                .collect(),
        };
        if let Err(e) = timed(KIND, "provisioning", provisioner.boot_vm(&request)).await {
            return stop(w.failed(ctx, PROVISIONED, e).await);
        }
        let m = format!("VM booted on hosting cluster '{hosting}'");
        w.set(PROVISIONED, true, "Booted", m);
    }

    let leases = network_phase::discover(ctx, w, &net, &ports, Awaited::Nics("attachment")).await?;
    let external = external_ip_of(ctx, w.id(), TARGET_FIELD, None).await?;
    let (statuses, primary) =
        network_phase::attachment_statuses(&ports, &leases, |n, _| nic_name(n));
    let status = w.obj.status.get_or_insert_with(Default::default);
    status.compute_network_attachment_statuses = statuses;
    status.internal_ip_address = primary;
    status.external_ip_address = external;
    w.obj.set_state(pb::ComputeInstance::READY);
    w.obj.set_message(String::new());
    w.write(ctx).await?;
    Ok(())
}

/// `delete_vm`, then the ports, then the finalizer.
async fn cleanup(ctx: &ReconcileCtx, rec: Record) -> Result<Cleanup, ReconcileError> {
    let vm: pb::ComputeInstance = decode(&rec)?;
    let mut w = Work::new(rec, vm);
    let spec = w.obj.spec.clone().unwrap_or_default();
    let id = w.id().to_string();
    let deleted = deprovision(ctx, &mut w, PROVISIONED, "delete the VM", |p| async move {
        p.delete_vm(&id).await
    });
    if let Some(not_yet) = deleted.await? {
        return Ok(not_yet);
    }
    let first_subnet = spec
        .compute_network_attachments
        .first()
        .map_or("", |a| a.subnet.as_str());
    let detached = async {
        let managers = managers_for_delete(ctx, &w.rec, first_subnet).await?;
        let clusters = managers.hosting_clusters();
        let hosting = w
            .rec
            .annotations
            .get(HOSTING_CLUSTER_ANNOTATION)
            .cloned()
            .or_else(|| hosting_cluster_for(&w.rec.id, clusters));
        // Without a hosting cluster no port was ever created.
        let Some(hosting) = hosting else {
            return Ok(());
        };
        let ports = ports(&w.rec.id, &hosting, &spec);
        timed(
            KIND,
            "detach",
            detach_ports(&managers.fabric, &ports, false),
        )
        .await
    }
    .await;
    if let Err(e) = detached {
        return w.delete_failed(ctx, e).await;
    }
    Ok(Cleanup::done(w.rec))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn vm_macs_are_stable_local_and_distinct() {
        let a = vm_mac("0190-abc", 0);
        assert_eq!(a, vm_mac("0190-abc", 0));
        assert!(a.starts_with("02:"));
        assert_eq!(a.len(), 17);
        assert_ne!(a, vm_mac("0190-abc", 1));
        assert_ne!(a, vm_mac("0190-abd", 0));
    }

    #[test]
    fn hosting_cluster_choice_is_stable() {
        let clusters = vec!["a".to_string(), "b".to_string()];
        let c = hosting_cluster_for("x", &clusters);
        assert_eq!(c, hosting_cluster_for("x", &clusters));
        assert!(c.is_some());
        assert_eq!(hosting_cluster_for("x", &[]), None);
        let spread: BTreeSet<String> = (0..32)
            .filter_map(|i| hosting_cluster_for(&format!("vm-{i}"), &clusters))
            .collect();
        assert_eq!(spread.len(), 2, "ids spread over the clusters");
    }
}
