//! BareMetalInstance: PROVISIONING → InventoryAssigned (a FREE `baremetal` host of the type is
//! RESERVED in the same transaction that records it in `status.host`) → NetworkingConfigured
//! (one fabric port per attachment: host, interface, MAC from the inventory) →
//! ProvisioningComplete (`provision_baremetal`) → IPDiscoveryComplete (DHCP leases) → Ready:
//! RUNNING and the host ASSIGNED in one transaction.
//! Deletion: ports detached, `deprovision_baremetal`, host FREE with the finalizer removal.

use osac_backends::provision::{Nic, ProvisionBareMetalRequest, RunStrategy};
use osac_backends::{OpError, PortAddresses};
use osac_model::{Kind, pb};
use osac_store::Record;

use super::finalizer::{self, Cleanup};
use super::host::{POOL_BAREMETAL, free_hosts, host_mac, host_type_label, owned_by, reserve};
use super::network_phase::{self, Awaited, Port, detach_ports, managers_for_delete};
use super::workload::{
    INVENTORY_ASSIGNED, IP_DISCOVERY_COMPLETE, NETWORKING_CONFIGURED, PROVISIONING_COMPLETE, READY,
    Step, Work, apply_machine, deprovision, external_ip_of, provisioner, release_with_hosts, stop,
    timed,
};
use super::{Action, ReconcileCtx, ReconcileError, decode, describe};

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

/// The HostTypes whose hosts may serve the instance: its `host_type` when set, else the
/// HostTypes of its BareMetalInstanceType; and how messages name them.
async fn serving_host_types(
    ctx: &ReconcileCtx,
    spec: &pb::BareMetalInstanceSpec,
) -> Result<(Vec<String>, String), ReconcileError> {
    if !spec.host_type.is_empty() || spec.instance_type.is_empty() {
        let what = host_type_label(ctx, &spec.host_type).await?;
        return Ok((vec![spec.host_type.clone()], what));
    }
    let Some(rec) = ctx.store.get(&spec.instance_type).await? else {
        let what = format!("BareMetalInstanceType '{}'", spec.instance_type);
        return Ok((Vec::new(), what));
    };
    let t: pb::BareMetalInstanceType = decode(&rec)?;
    let host_types = t.spec.map(|s| s.host_types).unwrap_or_default();
    Ok((host_types, format!("a HostType serving {}", describe(&rec))))
}

/// The instance's host: the recorded one, else a FREE host of one of `host_types` reserved
/// now (the reservation and `status.host` are written in one transaction).
async fn ensure_host(
    ctx: &ReconcileCtx,
    w: &mut Work<pb::BareMetalInstance>,
    spec: &pb::BareMetalInstanceSpec,
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
    let (host_types, what) = serving_host_types(ctx, spec).await?;
    let started = std::time::Instant::now();
    let mut tx = ctx.store.begin_shared().await?;
    let mut chosen = None;
    'types: for host_type in &host_types {
        for candidate in free_hosts(&mut *tx, host_type, POOL_BAREMETAL).await? {
            let Some(current) = tx.lock(&candidate.id).await? else {
                continue;
            };
            if let Some(next) = reserve(&current, host_type, POOL_BAREMETAL, w.id())? {
                chosen = tx.update(&next).await?;
                break 'types;
            }
        }
    }
    let Some(host) = chosen else {
        drop(tx);
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
    w.commit_in(tx, "inventory", started).await?;
    Ok(Inventory::Host(Box::new(host)))
}

pub(crate) async fn reconcile(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    let apply = |rec| apply_machine(ctx, rec, TARGET_FIELD, phases);
    finalizer::reconcile(ctx, rec, apply, |rec| cleanup(ctx, rec)).await
}

/// Network, host, ports, installation, addresses, RUNNING with the host ASSIGNED.
async fn phases(ctx: &ReconcileCtx, w: &mut Work<pb::BareMetalInstance>) -> Step<()> {
    let spec = w.obj.spec.clone().unwrap_or_default();
    let empty = "spec.network_attachments is empty: a bare-metal instance needs at least one";
    let net = network_phase::resolve_machine(ctx, w, &spec.network_attachments, empty).await?;
    let halted = spec.run_strategy == pb::BareMetalRunStrategy::Halted as i32;

    let host_rec = match ensure_host(ctx, w, &spec).await? {
        Inventory::Host(h) => *h,
        Inventory::NoFreeHost(m) => {
            let retry = Action::Retry;
            return stop(
                w.wait(ctx, INVENTORY_ASSIGNED, "NoFreeHost", m, retry)
                    .await,
            );
        }
        Inventory::Lost(m) => {
            let e = OpError::permanent(m);
            return stop(w.failed(ctx, INVENTORY_ASSIGNED, e).await);
        }
    };
    let host: pb::Host = decode(&host_rec)?;
    let ports = match ports(w.id(), &host_rec.id, Some(&host), &spec) {
        Ok(p) => p,
        Err(e) => return stop(w.failed(ctx, NETWORKING_CONFIGURED, e).await),
    };

    let summary = format!(
        "{} switch port(s) of {} moved onto their subnets",
        ports.len(),
        describe(&host_rec)
    );
    network_phase::attach(ctx, w, &net, &ports, &[], summary).await?;

    if !w.done(PROVISIONING_COMPLETE) {
        let provisioner = provisioner(ctx, w, PROVISIONING_COMPLETE).await?;
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
            image: spec.image.clone(),
            ssh_public_key: spec.ssh_public_key.clone(),
            user_data: spec.user_data.clone(),
            run_strategy: run_strategy(spec.run_strategy),
            restart_trigger: spec.restart_trigger.clone(),
        };
        let provisioned = timed(
            KIND,
            "provisioning",
            provisioner.provision_baremetal(&request),
        )
        .await;
        if let Err(e) = provisioned {
            return stop(w.failed(ctx, PROVISIONING_COMPLETE, e).await);
        }
        let m = if halted {
            format!(
                "{} installed and powered off (run_strategy HALTED)",
                describe(&host_rec)
            )
        } else {
            format!("{} installed and booted", describe(&host_rec))
        };
        w.set(PROVISIONING_COMPLETE, true, "Provisioned", m);
    }

    // A halted machine holds no lease: nothing to discover.
    let leases = if halted {
        let m = "run_strategy HALTED: the machine is powered off and holds no address";
        w.set(IP_DISCOVERY_COMPLETE, true, "PoweredOff", m);
        vec![PortAddresses::default(); ports.len()]
    } else {
        network_phase::discover(ctx, w, &net, &ports, Awaited::Nics("interface")).await?
    };
    let external = external_ip_of(ctx, w.id(), TARGET_FIELD, None).await?;
    let (statuses, primary) =
        network_phase::attachment_statuses(&ports, &leases, |_, p| p.interface.clone());
    let status = w.obj.status.get_or_insert_with(Default::default);
    status.network_attachment_statuses = statuses;
    status.internal_ip_address = primary;
    status.external_ip_address = external;
    if halted {
        let m = "the instance is installed and powered off (run_strategy HALTED)";
        w.set(READY, true, "Halted", m);
    } else {
        w.set(READY, true, "Running", "the instance is running");
    }
    w.ready_with_hosts(ctx, &[host_rec.id.as_str()]).await?;
    Ok(())
}

/// Ports, then `deprovision_baremetal`, then the host FREE with the finalizer removal.
async fn cleanup(ctx: &ReconcileCtx, rec: Record) -> Result<Cleanup, ReconcileError> {
    let bm: pb::BareMetalInstance = decode(&rec)?;
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
        return release_with_hosts(ctx, &w.rec, &[]).await;
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
    let (id, host) = (w.id().to_string(), host_id.clone());
    let wiped = deprovision(
        ctx,
        &mut w,
        PROVISIONING_COMPLETE,
        "wipe the host",
        |p| async move { p.deprovision_baremetal(&id, &host).await },
    );
    if let Some(not_yet) = wiped.await? {
        return Ok(not_yet);
    }
    release_with_hosts(ctx, &w.rec, &[host_id]).await
}

/// The provisioner's run strategy of the instance's (UNSPECIFIED and unknown: ALWAYS).
fn run_strategy(value: i32) -> RunStrategy {
    match pb::BareMetalRunStrategy::try_from(value) {
        Ok(pb::BareMetalRunStrategy::Halted) => RunStrategy::Halted,
        Ok(pb::BareMetalRunStrategy::Manual) => RunStrategy::Manual,
        _ => RunStrategy::Always,
    }
}
