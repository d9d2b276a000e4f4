//! BareMetalInstance: PROVISIONING → InventoryAssigned (a FREE `baremetal` host of the type is
//! RESERVED in the same transaction that records it in `status.host`) → NetworkingConfigured
//! (one fabric port per attachment: host, interface, MAC from the inventory) →
//! ProvisioningComplete (`provision_baremetal`) → IPDiscoveryComplete (DHCP leases) → Ready:
//! RUNNING and the host ASSIGNED in one transaction.
//! Deletion: ports detached, `deprovision_baremetal`, host FREE with the finalizer removal.

use osac_backends::OpError;
use osac_backends::provision::{Nic, ProvisionBareMetalRequest};
use osac_model::{Kind, pb};
use osac_store::Record;

use super::workload::{
    INVENTORY_ASSIGNED, IP_DISCOVERY_COMPLETE, NETWORKING_CONFIGURED, NO_PROVISIONER,
    POOL_BAREMETAL, PROVISIONING_COMPLETE, Port, READY, Resolved, SECOND_FAMILY_GRACE, Work,
    Workload, attach_ports, describe_missing, detach_ports, discover, external_ip_of,
    finalize_with_hosts, free_hosts, host_mac, host_type_label, is_true, lease_poll, lease_primary,
    lease_strings, managers_for_delete, owned_by, reserve, resolve_network, set_host_state,
    since_condition, timed, wanted_families,
};
use super::{
    Action, Object, ReconcileCtx, ReconcileError, VIRTUAL_NETWORK_ANNOTATION, decode, describe,
    has_finalizer, settled,
};

super::object!(pb::BareMetalInstance, pb::BareMetalInstanceStatus,
    pending: pb::BareMetalInstanceState::Provisioning, ready: pb::BareMetalInstanceState::Running,
    failed: pb::BareMetalInstanceState::Failed, deleting: pb::BareMetalInstanceState::Deleting,
    delete_failed: None);
super::workload::workload!(
    pb::BareMetalInstance,
    pb::BareMetalInstanceStatus,
    Kind::BareMetalInstance
);

const KIND: Kind = Kind::BareMetalInstance;

/// The reference field of ExternalIPAttachments targeting a bare-metal instance.
pub(crate) const TARGET_FIELD: &str = "spec.baremetal_instance";

/// The instance's ports on `host` (MACs from the inventory; a missing one is an error).
fn ports(
    id: &str,
    host_id: &str,
    host: Option<&pb::Host>,
    spec: &pb::BareMetalInstanceSpec,
) -> Result<Vec<Port>, OpError> {
    let single = spec.network_attachments.len() == 1;
    spec.network_attachments
        .iter()
        .enumerate()
        .map(|(n, a)| {
            let mac = match host {
                Some(h) => host_mac(h, &a.interface).ok_or_else(|| {
                    OpError::permanent(format!(
                        "host '{host_id}' has no interface '{}' in its inventory",
                        a.interface
                    ))
                })?,
                None => String::new(),
            };
            Ok(Port {
                attachment_id: format!("{id}/{n}"),
                host: host_id.to_string(),
                interface: a.interface.clone(),
                mac_address: mac,
                subnet_id: a.subnet.clone(),
                security_groups: a.security_groups.clone(),
                primary: a.primary || single,
            })
        })
        .collect()
}

/// Outcome of the inventory phase.
enum Inventory {
    /// The host reserved for (or assigned to) the instance.
    Host(Box<Record>),
    /// No FREE host: the message says what is missing.
    NoFreeHost(String),
    /// The recorded host is no longer the instance's.
    Lost(String),
}

/// The instance's host: the recorded one, else a FREE host of the type reserved now (the
/// reservation and `status.host` are written in one transaction).
async fn ensure_host(
    ctx: &ReconcileCtx,
    w: &mut Work<pb::BareMetalInstance>,
    host_type: &str,
) -> Result<Inventory, ReconcileError> {
    let recorded = w
        .obj
        .status
        .as_ref()
        .map(|s| s.host.clone())
        .unwrap_or_default();
    if !recorded.is_empty() {
        return Ok(match ctx.store.get(&recorded).await? {
            Some(h) if owned_by(&h, w.id())? => Inventory::Host(Box::new(h)),
            _ => Inventory::Lost(format!(
                "host '{recorded}' is no longer reserved for this instance"
            )),
        });
    }
    let started = std::time::Instant::now();
    let mut tx = ctx.store.begin().await?;
    let mut chosen = None;
    for candidate in free_hosts(&mut *tx, host_type, POOL_BAREMETAL).await? {
        let Some(current) = tx.lock(&candidate.id).await? else {
            continue;
        };
        if let Some(next) = reserve(&current, host_type, POOL_BAREMETAL, w.id())? {
            chosen = tx.update(&next).await?;
            break;
        }
    }
    let Some(host) = chosen else {
        drop(tx);
        let what = host_type_label(ctx, host_type).await?;
        return Ok(Inventory::NoFreeHost(format!(
            "no FREE baremetal host of {what} is available; waiting for one"
        )));
    };
    w.obj.status.get_or_insert_with(Default::default).host = host.id.clone();
    w.set(
        INVENTORY_ASSIGNED,
        true,
        "HostReserved",
        format!("{} reserved", describe(&host)),
    );
    let written = w.write_in(&mut *tx).await?;
    tx.commit().await?;
    w.written(written);
    crate::metrics::workload_phase(KIND.collection(), "inventory", started.elapsed());
    Ok(Inventory::Host(Box::new(host)))
}

pub(crate) async fn reconcile(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    let bm: pb::BareMetalInstance = decode(&rec)?;
    if rec.deleted_at.is_some() {
        return delete(ctx, rec, bm).await;
    }
    let mut w = Work::new(rec, bm);
    if settled(&w.rec, &w.obj) {
        return refresh_external_ip(ctx, &mut w).await;
    }
    let spec = w.obj.spec.clone().unwrap_or_default();
    if spec.network_attachments.is_empty() {
        let e = OpError::permanent(
            "spec.network_attachments is empty: a bare-metal instance needs at least one",
        );
        return w.failed(ctx, NETWORKING_CONFIGURED, e).await;
    }
    let subnets: Vec<&str> = spec
        .network_attachments
        .iter()
        .map(|a| a.subnet.as_str())
        .collect();
    let sgs: Vec<&str> = spec
        .network_attachments
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

    let host_rec = match ensure_host(ctx, &mut w, &spec.host_type).await? {
        Inventory::Host(h) => *h,
        Inventory::NoFreeHost(m) => {
            return w
                .wait(ctx, INVENTORY_ASSIGNED, "NoFreeHost", m, Action::Retry)
                .await;
        }
        Inventory::Lost(m) => {
            return w
                .failed(ctx, INVENTORY_ASSIGNED, OpError::permanent(m))
                .await;
        }
    };
    let host: pb::Host = decode(&host_rec)?;
    let ports = match ports(w.id(), &host_rec.id, Some(&host), &spec) {
        Ok(p) => p,
        Err(e) => return w.failed(ctx, NETWORKING_CONFIGURED, e).await,
    };
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
            "{} switch port(s) of {} moved onto their subnets",
            ports.len(),
            describe(&host_rec)
        );
        w.set(NETWORKING_CONFIGURED, true, "PortsAttached", m);
    }

    if !w.done(PROVISIONING_COMPLETE) {
        let Some(provisioner) = ctx.provisioner.clone() else {
            let m = NO_PROVISIONER.to_string();
            return w
                .wait(
                    ctx,
                    PROVISIONING_COMPLETE,
                    "NoProvisioner",
                    m,
                    Action::Retry,
                )
                .await;
        };
        let request = ProvisionBareMetalRequest {
            instance_id: w.id().to_string(),
            host_id: host_rec.id.clone(),
            nics: ports
                .iter()
                .map(|p| Nic {
                    name: p.interface.clone(),
                    mac_address: p.mac_address.clone(),
                    subnet_id: p.subnet_id.clone(),
                    primary: p.primary,
                })
                .collect(),
        };
        let provisioned = timed(
            KIND,
            "provisioning",
            provisioner.provision_baremetal(&request),
        )
        .await;
        if let Err(e) = provisioned {
            return w.failed(ctx, PROVISIONING_COMPLETE, e).await;
        }
        let m = format!("{} installed and booted", describe(&host_rec));
        w.set(PROVISIONING_COMPLETE, true, "Provisioned", m);
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
        "every interface has an address",
    );
    let external = external_ip_of(ctx, w.id(), TARGET_FIELD).await?;
    let status = w.obj.status.get_or_insert_with(Default::default);
    status.network_attachment_statuses = ports
        .iter()
        .zip(&leases)
        .map(|(p, l)| {
            let (v4, v6) = lease_strings(l);
            pb::AttachmentStatus {
                interface: p.interface.clone(),
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
    w.set(READY, true, "Running", "the instance is running");
    w.obj.set_state(pb::BareMetalInstance::READY);
    w.obj.set_message(String::new());

    // RUNNING and the host ASSIGNED together.
    let started = std::time::Instant::now();
    let mut tx = ctx.store.begin().await?;
    set_host_state(&mut *tx, &host_rec.id, w.id(), pb::HostState::Assigned).await?;
    let written = w.write_in(&mut *tx).await?;
    tx.commit().await?;
    w.written(written);
    crate::metrics::workload_phase(KIND.collection(), "assign", started.elapsed());
    Ok(Action::Done)
}

/// A converged instance: only the external address (from attachments) may change.
async fn refresh_external_ip(
    ctx: &ReconcileCtx,
    w: &mut Work<pb::BareMetalInstance>,
) -> Result<Action, ReconcileError> {
    let external = external_ip_of(ctx, w.id(), TARGET_FIELD).await?;
    let status = w.obj.status.get_or_insert_with(Default::default);
    if status.external_ip_address != external {
        status.external_ip_address = external;
        w.write(ctx).await?;
    }
    Ok(Action::Done)
}

/// Ports, then `deprovision_baremetal`, then the host FREE with the finalizer removal.
async fn delete(
    ctx: &ReconcileCtx,
    rec: Record,
    bm: pb::BareMetalInstance,
) -> Result<Action, ReconcileError> {
    if !has_finalizer(&rec) {
        return Ok(Action::Done);
    }
    let mut w = Work::new(rec, bm);
    let spec = w.obj.spec.clone().unwrap_or_default();
    let host_id = w
        .obj
        .status
        .as_ref()
        .map(|s| s.host.clone())
        .unwrap_or_default();
    // Without a host nothing was attached or installed.
    if host_id.is_empty() {
        return finalize_with_hosts(ctx, &w.rec, &[]).await;
    }
    let host = match ctx.store.get(&host_id).await? {
        Some(h) => Some(decode::<pb::Host>(&h)?),
        None => None,
    };
    let first_subnet = spec
        .network_attachments
        .first()
        .map_or("", |a| a.subnet.as_str());
    let detached = async {
        // A host gone from the inventory leaves MACs unknown: detach by port name.
        let ports = match ports(&w.rec.id, &host_id, host.as_ref(), &spec) {
            Ok(p) => p,
            Err(_) => ports(&w.rec.id, &host_id, None, &spec)?,
        };
        let managers = managers_for_delete(ctx, &w.rec, first_subnet).await?;
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
    match ctx.provisioner.clone() {
        Some(p) => {
            let done = timed(
                KIND,
                "deprovisioning",
                p.deprovision_baremetal(&w.rec.id, &host_id),
            )
            .await;
            if let Err(e) = done {
                return w.delete_failed(ctx, e).await;
            }
        }
        None if is_true(w.obj.conditions(), PROVISIONING_COMPLETE) => {
            let m = "waiting for a provisioner to wipe the host: none is configured";
            return w.delete_failed(ctx, OpError::transient(m)).await;
        }
        None => {}
    }
    finalize_with_hosts(ctx, &w.rec, &[host_id]).await
}
