//! Host (inventory): an idle `caas` host — FREE, a pre-booted cluster agent — has its first
//! fabric interface on the deployment's parking network. The reconciler parks it through the
//! default class's fabric manager (`delete_network_attachment {park: true}`, idempotent) and
//! remembers that in [`PARKED_ANNOTATION`], so a resync costs no manager call. Reservation
//! (FREE → RESERVED → ASSIGNED → FREE) is done by the workload reconcilers in store
//! transactions; this reconciler never changes the state.

use osac_backends::DeleteNetworkAttachmentRequest;
use osac_model::pb;
use osac_store::Record;

use super::workload::{POOL_CAAS, host_mac, host_state};
use super::{Action, ReconcileCtx, ReconcileError, decode, describe, write};

/// Annotation of a parked host: the interface that is on the parking network.
pub const PARKED_ANNOTATION: &str = "osac.openshift.io/parked";

/// The fabric attachment id used to park a host's port.
pub fn parking_attachment_id(host_id: &str) -> String {
    format!("parking/{host_id}")
}

/// The first `fabric` interface of a HostType record.
pub(crate) fn first_fabric_interface(host_type: &Record) -> Result<Option<String>, ReconcileError> {
    let ht: pb::HostType = decode(host_type)?;
    Ok(ht
        .interfaces
        .into_iter()
        .find(|i| i.role == "fabric")
        .map(|i| i.name))
}

pub(crate) async fn reconcile(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    let mut host: pb::Host = decode(&rec)?;
    let spec = host.spec.clone().unwrap_or_default();
    let free = host_state(&host).0 == pb::HostState::Free as i32 && rec.deleted_at.is_none();
    if spec.pool != POOL_CAAS || !free {
        if rec.annotations.contains_key(PARKED_ANNOTATION) {
            let mut next = rec.clone();
            next.annotations.remove(PARKED_ANNOTATION);
            write(ctx, &rec, next).await?;
        }
        return Ok(Action::Done);
    }
    let host_type = ctx.store.get(&spec.host_type).await?;
    let interface = match &host_type {
        Some(ht) => first_fabric_interface(ht)?,
        None => None,
    };
    let Some(interface) = interface else {
        let what = host_type
            .as_ref()
            .map_or_else(|| format!("HostType '{}'", spec.host_type), describe);
        let m = format!("{what} has no fabric interface: the host cannot be parked");
        return show(ctx, &rec, host, m, Action::Done).await;
    };
    if rec.annotations.get(PARKED_ANNOTATION) == Some(&interface) {
        return Ok(Action::Done);
    }
    let Some(mac) = host_mac(&host, &interface) else {
        let m = format!("interface '{interface}' has no MAC address in the host's inventory");
        return show(ctx, &rec, host, m, Action::Done).await;
    };
    let parked = async {
        let m = ctx.dispatcher.for_default_class(&*ctx.store).await?;
        m.fabric
            .delete_network_attachment(&DeleteNetworkAttachmentRequest {
                attachment_id: parking_attachment_id(&rec.id),
                host: rec.id.clone(),
                interface: interface.clone(),
                mac_address: mac,
                subnet_id: String::new(),
                park: true,
            })
            .await
    }
    .await;
    match parked {
        Ok(()) => {
            host.status.get_or_insert_with(Default::default).message = String::new();
            let mut next = rec.clone();
            next.encode(&host)?;
            next.annotations
                .insert(PARKED_ANNOTATION.to_string(), interface);
            write(ctx, &rec, next).await?;
            Ok(Action::Done)
        }
        Err(e) => {
            let action = if e.is_transient() {
                Action::Retry
            } else {
                Action::After(ctx.config.backoff_cap)
            };
            // Hosts are the provider's objects: their message may carry backend detail.
            let m = format!("cannot park interface '{interface}': {}", e.message());
            show(ctx, &rec, host, m, action).await
        }
    }
}

/// Shows `message` on the host (its state is the workloads' business) and schedules `action`.
async fn show(
    ctx: &ReconcileCtx,
    rec: &Record,
    mut host: pb::Host,
    message: String,
    action: Action,
) -> Result<Action, ReconcileError> {
    host.status.get_or_insert_with(Default::default).message = message;
    let mut next = rec.clone();
    next.encode(&host)?;
    write(ctx, rec, next).await?;
    Ok(action)
}
