//! Host (inventory): an idle `caas` host — FREE, a pre-booted cluster agent — has its first
//! fabric interface on the deployment's parking network. The reconciler parks it through the
//! default class's fabric manager (`delete_network_attachment {park: true}`, idempotent) and
//! remembers that in [`PARKED_ANNOTATION`], so a resync costs no manager call. This reconciler
//! never changes the state.
//!
//! Reservation (FREE → RESERVED → ASSIGNED → FREE) is done by the workload reconcilers
//! (BareMetalInstance: one `baremetal` host; Cluster: `caas` hosts per node set) in store
//! transactions that also write the workload, with the primitives below: [`free_hosts`],
//! [`reserve`], [`set_host_state`], [`owned_by`].

use osac_backends::DeleteNetworkAttachmentRequest;
use osac_model::{Kind, pb};
use osac_store::{ListQuery, Record, StoreError, Tx};

use super::{Action, ReconcileCtx, ReconcileError, decode, describe, write};

pub use osac_model::annotations::PARKED_ANNOTATION;

/// Host pools: hosts for bare-metal instances, and pre-booted cluster agents.
pub(crate) const POOL_BAREMETAL: &str = "baremetal";
pub(crate) const POOL_CAAS: &str = "caas";

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

fn quoted(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// FREE hosts of a type and pool, in name order (inside `tx`).
pub(crate) async fn free_hosts(
    tx: &mut dyn Tx,
    host_type: &str,
    pool: &str,
) -> Result<Vec<Record>, StoreError> {
    let filter = format!(
        "this.spec.host_type == {} && this.spec.pool == {} && this.status.state == \"HOST_STATE_FREE\"",
        quoted(host_type),
        quoted(pool)
    );
    let page = tx
        .list(&ListQuery {
            kind: Kind::Host,
            tenant: None,
            filter,
            order: "metadata.name".to_string(),
            offset: 0,
            limit: 1000,
        })
        .await?;
    Ok(page.items)
}

/// The host's state and owner.
pub(crate) fn host_state(host: &pb::Host) -> (i32, &str) {
    host.status
        .as_ref()
        .map_or((0, ""), |s| (s.state, s.assigned_to.as_str()))
}

/// Whether the host record is (still) reserved or assigned to `owner`.
pub(crate) fn owned_by(rec: &Record, owner: &str) -> Result<bool, StoreError> {
    if rec.kind != Kind::Host || rec.deleted_at.is_some() {
        return Ok(false);
    }
    let h: pb::Host = rec.decode()?;
    let (state, who) = host_state(&h);
    Ok(who == owner
        && (state == pb::HostState::Reserved as i32 || state == pb::HostState::Assigned as i32))
}

/// The RESERVED version of a locked host record when it is FREE, of `host_type` and `pool`
/// (None otherwise). Drops the parking mark: the port is about to leave the parking network.
pub(crate) fn reserve(
    rec: &Record,
    host_type: &str,
    pool: &str,
    owner: &str,
) -> Result<Option<Record>, StoreError> {
    if rec.kind != Kind::Host || rec.deleted_at.is_some() {
        return Ok(None);
    }
    let mut h: pb::Host = rec.decode()?;
    let spec = h.spec.clone().unwrap_or_default();
    if spec.host_type != host_type
        || spec.pool != pool
        || host_state(&h).0 != pb::HostState::Free as i32
    {
        return Ok(None);
    }
    let status = h.status.get_or_insert_with(Default::default);
    status.state = pb::HostState::Reserved as i32;
    status.assigned_to = owner.to_string();
    status.message = String::new();
    let mut next = rec.clone();
    next.encode(&h)?;
    next.annotations.remove(PARKED_ANNOTATION);
    Ok(Some(next))
}

/// Locks host `id` in `tx` and moves it to `state` if `owner` holds it (FREE clears the
/// owner). Returns whether it was written.
pub(crate) async fn set_host_state(
    tx: &mut dyn Tx,
    id: &str,
    owner: &str,
    state: pb::HostState,
) -> Result<bool, StoreError> {
    let Some(rec) = tx.lock(id).await? else {
        return Ok(false);
    };
    if !owned_by(&rec, owner)? {
        return Ok(false);
    }
    let mut h: pb::Host = rec.decode()?;
    let status = h.status.get_or_insert_with(Default::default);
    if status.state == state as i32 {
        return Ok(false);
    }
    status.state = state as i32;
    if state == pb::HostState::Free {
        status.assigned_to = String::new();
    }
    status.message = String::new();
    let mut next = rec.clone();
    next.encode(&h)?;
    tx.update(&next).await?;
    Ok(true)
}

/// The MAC address of a host's interface.
pub(crate) fn host_mac(host: &pb::Host, interface: &str) -> Option<String> {
    host.spec.as_ref().and_then(|s| {
        s.interfaces
            .iter()
            .find(|i| i.name == interface)
            .map(|i| i.mac_address.clone())
    })
}

/// "HostType 'name'" (or its id when it is gone), for messages.
pub(crate) async fn host_type_label(
    ctx: &ReconcileCtx,
    id: &str,
) -> Result<String, ReconcileError> {
    Ok(match ctx.store.get(id).await? {
        Some(r) => describe(&r),
        None => format!("HostType '{id}'"),
    })
}
