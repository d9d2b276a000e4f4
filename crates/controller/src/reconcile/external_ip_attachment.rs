//! ExternalIPAttachment: inbound DNAT from an ALLOCATED ExternalIP to a workload's IP. It stays
//! PENDING until both are known; targets (workloads) are resolved behind [`TargetResolver`].

use std::net::IpAddr;

use async_trait::async_trait;
use osac_backends::{
    CreateExternalIpAttachmentRequest, DeleteExternalIpAttachmentRequest, OpError,
};
use osac_model::{Kind, pb};
use osac_store::{Record, Store, StoreError};

use super::backend::status_message;
use super::external_ip::allocated_address;
use super::finalizer::{self, Cleanup};
use super::{
    Action, Object, ReconcileCtx, ReconcileError, VIRTUAL_NETWORK_ANNOTATION, decode, describe,
    failed_dependency, op_failed, save, save_applied, settled, waiting,
};

super::object!(pb::ExternalIpAttachment, pb::ExternalIpAttachmentStatus,
    pending: pb::ExternalIpAttachmentState::Pending, ready: pb::ExternalIpAttachmentState::Ready,
    failed: pb::ExternalIpAttachmentState::Failed, deleting: pb::ExternalIpAttachmentState::Deleting,
    delete_failed: None);

/// Where an attachment's DNAT points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The target's IP and the VirtualNetwork it lives in.
    Known {
        /// Primary IP (VM, BM) or endpoint VIP (cluster).
        ip: IpAddr,
        /// VirtualNetwork id of that IP.
        virtual_network: String,
    },
    /// Not known yet; the message says what the attachment waits for.
    Waiting(String),
}

/// Which workload an attachment's target field names, by id or (a forward reference) by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binding {
    /// Nothing to change: the field keeps its value.
    Unchanged,
    /// The workload exists in the attachment's tenant: the field holds its id.
    Bound {
        /// The workload's id.
        id: String,
        /// Its name (recorded as `status.target_name`).
        name: String,
    },
    /// No workload of that kind and name exists in the tenant (not yet, or no longer): the
    /// field holds the name, and the attachment waits with `message`.
    Awaiting {
        /// The awaited name.
        name: String,
        /// What the attachment waits for (kind and name).
        message: String,
    },
}

/// Resolves an attachment's target workload to an IP. Follows the reconciler contract: reads
/// the store only, never blocks.
#[async_trait]
pub trait TargetResolver: Send + Sync {
    /// The target of an attachment with this spec.
    async fn resolve(
        &self,
        store: &dyn Store,
        spec: &pb::ExternalIpAttachmentSpec,
    ) -> Result<Target, StoreError>;

    /// Which workload the attachment `rec` (decoded as `att`) names: its id, or the name it
    /// waits for. The default binds nothing (the target field is used as it is).
    async fn bind(
        &self,
        _store: &dyn Store,
        _rec: &Record,
        _att: &pb::ExternalIpAttachment,
    ) -> Result<Binding, StoreError> {
        Ok(Binding::Unchanged)
    }
}

/// The resolver while no workload kinds exist: every target is waited for.
pub struct NoWorkloads;

#[async_trait]
impl TargetResolver for NoWorkloads {
    async fn resolve(
        &self,
        _store: &dyn Store,
        spec: &pb::ExternalIpAttachmentSpec,
    ) -> Result<Target, StoreError> {
        let endpoint = match pb::ExternalIpAttachmentEndpoint::try_from(spec.target_endpoint) {
            Ok(pb::ExternalIpAttachmentEndpoint::Ingress) => "an ingress endpoint",
            _ => "an API endpoint",
        };
        let message = if !spec.compute_instance.is_empty() {
            format!(
                "waiting for compute instance {} to have a primary IP",
                spec.compute_instance
            )
        } else if !spec.baremetal_instance.is_empty() {
            format!(
                "waiting for bare-metal instance {} to have a primary IP",
                spec.baremetal_instance
            )
        } else if !spec.cluster.is_empty() {
            format!("waiting for cluster {} to have {endpoint}", spec.cluster)
        } else {
            "waiting for a target (no compute_instance, cluster or baremetal_instance set)"
                .to_string()
        };
        Ok(Target::Waiting(message))
    }
}

pub(crate) async fn reconcile(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    finalizer::reconcile(ctx, rec, |rec| apply(ctx, rec), |rec| cleanup(ctx, rec)).await
}

/// The DNAT is removed wherever it was programmed.
async fn cleanup(ctx: &ReconcileCtx, rec: Record) -> Result<Cleanup, ReconcileError> {
    let att: pb::ExternalIpAttachment = decode(&rec)?;
    let spec = att.spec.clone().unwrap_or_default();
    let undone = undo(ctx, &rec, &spec).await;
    finalizer::undone(ctx, rec, att, undone).await
}

/// Once the ExternalIP is ALLOCATED and the target has an IP, the fabric programs the DNAT
/// (again when either changes).
async fn apply(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    let mut att: pb::ExternalIpAttachment = decode(&rec)?;
    let mut rebound = false;
    match ctx.targets.bind(&*ctx.store, &rec, &att).await? {
        Binding::Unchanged => {}
        Binding::Bound { id, name } => {
            set_target(&mut att, id, name);
            rebound = true;
        }
        Binding::Awaiting { name, message } => {
            set_target(&mut att, name.clone(), name);
            return pending(ctx, &rec, att, message).await;
        }
    }
    let spec = att.spec.clone().unwrap_or_default();
    let eip = ctx.store.get(&spec.external_ip).await?;
    if let Some(e) = eip.as_ref().and_then(failed_dependency) {
        return op_failed(ctx, &rec, att, e).await;
    }
    let address = match &eip {
        Some(e) => allocated_address(e)?,
        None => None,
    };
    let Some(address) = address else {
        let what = eip.as_ref().map_or_else(
            || format!("ExternalIP '{}' to exist", spec.external_ip),
            |e| format!("{} to be ALLOCATED", describe(e)),
        );
        return pending(ctx, &rec, att, format!("waiting for {what}")).await;
    };
    let (ip, vn_id) = match ctx.targets.resolve(&*ctx.store, &spec).await? {
        Target::Known {
            ip,
            virtual_network,
        } => (ip, virtual_network),
        Target::Waiting(message) => return pending(ctx, &rec, att, message).await,
    };
    let status = att.status.get_or_insert_with(Default::default);
    let same_target = status.target_ip == ip.to_string()
        && status.external_ip_address == address.to_string()
        && (att.state() == pb::ExternalIpAttachment::FAILED
            || rec.annotations.get(VIRTUAL_NETWORK_ANNOTATION) == Some(&vn_id));
    if same_target && !rebound && settled(&rec, &att) {
        return Ok(Action::Done);
    }
    let created = async {
        let (_, m) = ctx
            .dispatcher
            .for_virtual_network(&*ctx.store, &vn_id)
            .await?;
        m.fabric
            .create_external_ip_attachment(&CreateExternalIpAttachmentRequest {
                attachment_id: rec.id.clone(),
                virtual_network_id: vn_id.clone(),
                external_address: address,
                target_ip: ip,
            })
            .await
    }
    .await;
    let status = att.status.get_or_insert_with(Default::default);
    status.external_ip_address = address.to_string();
    status.target_ip = ip.to_string();
    let mut next = rec.clone();
    let mut applied = true;
    let action = match created {
        Ok(()) => {
            att.set_state(pb::ExternalIpAttachment::READY);
            att.set_message(String::new());
            next.annotations
                .insert(VIRTUAL_NETWORK_ANNOTATION.to_string(), vn_id);
            Action::Done
        }
        Err(e) if e.is_transient() => {
            applied = false;
            let m = status_message(ctx, &rec, att.message(), &e).await;
            att.set_message(m);
            if att.state() == 0 {
                att.set_state(pb::ExternalIpAttachment::PENDING);
            }
            Action::Retry
        }
        Err(e) => {
            let m = status_message(ctx, &rec, att.message(), &e).await;
            att.set_state(pb::ExternalIpAttachment::FAILED);
            att.set_message(m);
            Action::Done
        }
    };
    if applied {
        save_applied(ctx, &rec, next, &att).await?;
    } else {
        save(ctx, &rec, next, &att).await?;
    }
    Ok(action)
}

/// Points the attachment's target field at `target` (an id, or the awaited name) and records
/// the target's name.
fn set_target(att: &mut pb::ExternalIpAttachment, target: String, name: String) {
    let spec = att.spec.get_or_insert_with(Default::default);
    if !spec.compute_instance.is_empty() {
        spec.compute_instance = target;
    } else if !spec.baremetal_instance.is_empty() {
        spec.baremetal_instance = target;
    } else if !spec.cluster.is_empty() {
        spec.cluster = target;
    }
    att.status.get_or_insert_with(Default::default).target_name = name;
}

/// Not (or no longer) programmable: a previously programmed DNAT is removed first, then the
/// attachment shows PENDING with `message`.
async fn pending(
    ctx: &ReconcileCtx,
    rec: &Record,
    mut att: pb::ExternalIpAttachment,
    message: String,
) -> Result<Action, ReconcileError> {
    let spec = att.spec.clone().unwrap_or_default();
    if rec.annotations.contains_key(VIRTUAL_NETWORK_ANNOTATION) {
        if let Err(e) = undo(ctx, rec, &spec).await {
            let m = status_message(ctx, rec, att.message(), &e).await;
            return waiting(ctx, rec, att, m).await;
        }
        let mut next = rec.clone();
        next.annotations.remove(VIRTUAL_NETWORK_ANNOTATION);
        att.set_state(pb::ExternalIpAttachment::PENDING);
        att.set_message(message);
        if let Some(s) = att.status.as_mut() {
            s.external_ip_address.clear();
            s.target_ip.clear();
        }
        save(ctx, rec, next, &att).await?;
        return Ok(Action::Retry);
    }
    if att.state() != pb::ExternalIpAttachment::PENDING {
        att.set_state(pb::ExternalIpAttachment::PENDING);
    }
    waiting(ctx, rec, att, message).await
}

/// Removes the DNAT wherever it was programmed. Nothing to do when it never was, or when its
/// VirtualNetwork (and with it the router) is gone.
async fn undo(
    ctx: &ReconcileCtx,
    rec: &Record,
    spec: &pb::ExternalIpAttachmentSpec,
) -> Result<(), OpError> {
    let vn_id = match rec.annotations.get(VIRTUAL_NETWORK_ANNOTATION) {
        Some(v) => v.clone(),
        None => match ctx.targets.resolve(&*ctx.store, spec).await {
            Ok(Target::Known {
                virtual_network, ..
            }) => virtual_network,
            Ok(Target::Waiting(_)) => return Ok(()),
            Err(e) => return Err(OpError::transient(format!("store: {e}"))),
        },
    };
    let vn_exists = ctx
        .store
        .get(&vn_id)
        .await
        .map_err(|e| OpError::transient(format!("store: {e}")))?
        .is_some_and(|r| r.kind == Kind::VirtualNetwork);
    if !vn_exists {
        return Ok(());
    }
    let (_, m) = ctx
        .dispatcher
        .for_virtual_network(&*ctx.store, &vn_id)
        .await?;
    m.fabric
        .delete_external_ip_attachment(&DeleteExternalIpAttachmentRequest {
            attachment_id: rec.id.clone(),
            virtual_network_id: vn_id,
        })
        .await
}
