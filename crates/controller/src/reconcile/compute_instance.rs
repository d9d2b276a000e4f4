//! ComputeInstance (VM): STARTING → NetworkingConfigured (one fabric port per attachment on
//! the VM's hosting cluster) → Provisioned (`boot_vm`) → IPDiscoveryComplete (DHCP leases) →
//! RUNNING with per-attachment addresses and `internal_ip_address` (the primary's).
//! Deletion: `delete_vm`, then the ports, then the finalizer.

use osac_backends::provision::{BootVmRequest, Nic};
use osac_model::{Kind, pb};
use osac_store::Record;

use super::workload::{
    HOSTING_CLUSTER_ANNOTATION, IP_DISCOVERY_COMPLETE, NETWORKING_CONFIGURED, NO_PROVISIONER,
    PROVISIONED, Port, Resolved, SECOND_FAMILY_GRACE, Work, Workload, attach_ports,
    describe_missing, detach_ports, discover, external_ip_of, hosting_cluster_for, is_true,
    lease_poll, lease_primary, lease_strings, managers_for_delete, resolve_network,
    since_condition, timed, vm_mac, wanted_families,
};
use super::{
    Action, Object, ReconcileCtx, ReconcileError, VIRTUAL_NETWORK_ANNOTATION, decode, finalize,
    has_finalizer, settled,
};

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

/// The reference field of ExternalIPAttachments targeting a VM.
pub(crate) const TARGET_FIELD: &str = "spec.compute_instance";

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
    let vm: pb::ComputeInstance = decode(&rec)?;
    if rec.deleted_at.is_some() {
        return delete(ctx, rec, vm).await;
    }
    let mut w = Work::new(rec, vm);
    if settled(&w.rec, &w.obj) {
        return refresh_external_ip(ctx, &mut w).await;
    }
    let spec = w.obj.spec.clone().unwrap_or_default();
    if spec.compute_network_attachments.is_empty() {
        let e = osac_backends::OpError::permanent(
            "spec.compute_network_attachments is empty: a VM needs at least one attachment",
        );
        return w.failed(ctx, NETWORKING_CONFIGURED, e).await;
    }
    let subnets: Vec<&str> = spec
        .compute_network_attachments
        .iter()
        .map(|a| a.subnet.as_str())
        .collect();
    let sgs: Vec<&str> = spec
        .compute_network_attachments
        .iter()
        .flat_map(|a| a.security_groups.iter().map(String::as_str))
        .collect();
    let net = match resolve_network(ctx, &subnets, &sgs).await? {
        Resolved::Ready(n) => n,
        Resolved::Wait(m) => {
            return w
                .wait(
                    ctx,
                    NETWORKING_CONFIGURED,
                    "WaitingForNetwork",
                    m,
                    Action::Retry,
                )
                .await;
        }
        Resolved::Failed(e) => return w.failed(ctx, NETWORKING_CONFIGURED, e).await,
    };
    w.annotations
        .insert(VIRTUAL_NETWORK_ANNOTATION.to_string(), net.vn_id.clone());
    let clusters = net.managers.hosting_clusters();
    let recorded = w
        .annotations
        .get(HOSTING_CLUSTER_ANNOTATION)
        .filter(|c| clusters.contains(c))
        .cloned();
    let Some(hosting) = recorded.or_else(|| hosting_cluster_for(w.id(), clusters)) else {
        let e = osac_backends::OpError::permanent(
            "BM-only deployment: this NetworkClass has no k8s manager, so virtual machines are \
             not available",
        );
        return w.failed(ctx, NETWORKING_CONFIGURED, e).await;
    };
    w.annotations
        .insert(HOSTING_CLUSTER_ANNOTATION.to_string(), hosting.clone());
    let ports = ports(w.id(), &hosting, &spec);
    let fabric = net.managers.fabric.clone();

    if !w.done(NETWORKING_CONFIGURED) {
        let attached = timed(
            KIND,
            "networking",
            attach_ports(&fabric, &net.vn_id, &ports),
        )
        .await;
        if let Err(e) = attached {
            return w.failed(ctx, NETWORKING_CONFIGURED, e).await;
        }
        let m = format!(
            "{} port(s) attached on hosting cluster '{hosting}'",
            ports.len()
        );
        w.set(NETWORKING_CONFIGURED, true, "PortsAttached", m);
    }

    if !w.done(PROVISIONED) {
        let Some(provisioner) = ctx.provisioner.clone() else {
            let m = NO_PROVISIONER.to_string();
            return w
                .wait(ctx, PROVISIONED, "NoProvisioner", m, Action::Retry)
                .await;
        };
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
            return w.failed(ctx, PROVISIONED, e).await;
        }
        let m = format!("VM booted on hosting cluster '{hosting}'");
        w.set(PROVISIONED, true, "Booted", m);
    }

    let leases = match timed(KIND, "ip_discovery", discover(&fabric, &ports)).await {
        Ok(l) => l,
        Err(e) => return w.failed(ctx, IP_DISCOVERY_COMPLETE, e).await,
    };
    let wanted = wanted_families(&ports, &net.subnets);
    let partial_ok =
        since_condition(w.obj.conditions(), NETWORKING_CONFIGURED) >= SECOND_FAMILY_GRACE;
    let missing = describe_missing(&ports, &leases, &wanted, partial_ok);
    if !missing.is_empty() {
        let m = format!("waiting for the DHCP lease of {}", missing.join(", "));
        let poll = Action::After(lease_poll(ctx));
        return w
            .wait(ctx, IP_DISCOVERY_COMPLETE, "WaitingForLease", m, poll)
            .await;
    }
    w.set(
        IP_DISCOVERY_COMPLETE,
        true,
        "AddressesDiscovered",
        "every attachment has an address",
    );
    let external = external_ip_of(ctx, w.id(), TARGET_FIELD).await?;
    let status = w.obj.status.get_or_insert_with(Default::default);
    status.compute_network_attachment_statuses = ports
        .iter()
        .zip(&leases)
        .enumerate()
        .map(|(n, (p, l))| {
            let (v4, v6) = lease_strings(l);
            pb::AttachmentStatus {
                interface: nic_name(n),
                subnet_ref: p.subnet_id.clone(),
                ip_address: v4,
                ipv6_address: v6,
                primary: p.primary,
                mac_address: p.mac_address.clone(),
            }
        })
        .collect();
    status.internal_ip_address = ports
        .iter()
        .zip(&leases)
        .find(|(p, _)| p.primary)
        .map(|(_, l)| lease_primary(l))
        .unwrap_or_default();
    status.external_ip_address = external;
    w.obj.set_state(pb::ComputeInstance::READY);
    w.obj.set_message(String::new());
    w.write(ctx).await?;
    Ok(Action::Done)
}

/// A converged VM: only the external address (from attachments) may change.
async fn refresh_external_ip(
    ctx: &ReconcileCtx,
    w: &mut Work<pb::ComputeInstance>,
) -> Result<Action, ReconcileError> {
    let external = external_ip_of(ctx, w.id(), TARGET_FIELD).await?;
    let status = w.obj.status.get_or_insert_with(Default::default);
    if status.external_ip_address != external {
        status.external_ip_address = external;
        w.write(ctx).await?;
    }
    Ok(Action::Done)
}

/// `delete_vm`, then the ports, then the finalizer.
async fn delete(
    ctx: &ReconcileCtx,
    rec: Record,
    vm: pb::ComputeInstance,
) -> Result<Action, ReconcileError> {
    if !has_finalizer(&rec) {
        return Ok(Action::Done);
    }
    let mut w = Work::new(rec, vm);
    let spec = w.obj.spec.clone().unwrap_or_default();
    match ctx.provisioner.clone() {
        Some(p) => {
            if let Err(e) = timed(KIND, "deprovisioning", p.delete_vm(w.id())).await {
                return w.delete_failed(ctx, e).await;
            }
        }
        None if is_true(w.obj.conditions(), PROVISIONED) => {
            let m = "waiting for a provisioner to delete the VM: none is configured";
            return w
                .delete_failed(ctx, osac_backends::OpError::transient(m))
                .await;
        }
        None => {}
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
    finalize(ctx, &w.rec).await
}
