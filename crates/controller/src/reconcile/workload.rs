//! What the workload reconcilers (ComputeInstance, BareMetalInstance, Cluster) share: the
//! record being worked on and its status writes, the phases' conditions, the provisioner
//! steps, the external address and phase timing. Their network phase (subnets, fabric ports,
//! DHCP discovery) is in `network_phase`, host reservation in `host`. See
//! `docs/workloads.md`.
//!
//! # How a workload reconcile runs
//!
//! Every reconcile walks the phases from the first one. A phase whose condition is TRUE *for the
//! current spec* is skipped; the others run (every manager and provisioner call is idempotent).
//! "For the current spec" is the [`APPLIED_SPEC_ANNOTATION`]: on workloads it holds the hash of
//! the spec the status and conditions describe, written with every status write. A spec change
//! (security groups of an attachment) therefore re-runs every phase once. Store-side steps
//! (host reservation, VIP allocation, final assignment) write the workload in the same
//! transaction as the hosts / under the subnet lock, so a crash between two steps leaves either
//! both or neither.
//!
//! A phase step returns a [`Step`]: what the next phase needs, or [`Halt`] once it wrote why
//! the workload stops there (waiting, failed) with the action the runtime should take.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use osac_backends::OpError;
use osac_backends::provision::Provisioner;
use osac_model::{Kind, pb};
use osac_store::events::NewEvent;
use osac_store::{Record, Tx};
use serde::Serialize;

use super::backend::status_message;
use super::conditions::{is_true, set_condition};
use super::finalizer::{self, Cleanup};
use super::host::set_host_state;
use super::{
    APPLIED_SPEC_ANNOTATION, Action, Object, ReconcileCtx, ReconcileError, decode, settled,
    spec_hash,
};
use crate::metrics;

/// Condition types (docs/workloads.md).
pub(crate) const INVENTORY_ASSIGNED: &str = "InventoryAssigned";
pub(crate) const NETWORKING_CONFIGURED: &str = "NetworkingConfigured";
pub(crate) const PROVISIONED: &str = "Provisioned";
pub(crate) const PROVISIONING_COMPLETE: &str = "ProvisioningComplete";
pub(crate) const IP_DISCOVERY_COMPLETE: &str = "IPDiscoveryComplete";
pub(crate) const IP_DISCOVERY_TIMEOUT: &str = "NetworkingIPDiscoveryTimeout";
pub(crate) const READY: &str = "Ready";

/// The message of a workload waiting for a provisioner that is not configured.
pub(crate) const NO_PROVISIONER: &str =
    "waiting for a provisioner: none is configured in this deployment";

/// The outcome of a phase step: the value the next phase needs, or why the reconcile ends
/// here.
pub(crate) type Step<T> = Result<T, Halt>;

/// Why a workload reconcile ends before its last phase.
#[derive(Debug)]
pub(crate) enum Halt {
    /// A phase wrote why it cannot go on (waiting, failed); the runtime acts on this.
    Status(Action),
    /// The store failed.
    Error(ReconcileError),
}

impl From<ReconcileError> for Halt {
    fn from(e: ReconcileError) -> Self {
        Halt::Error(e)
    }
}

impl From<osac_store::StoreError> for Halt {
    fn from(e: osac_store::StoreError) -> Self {
        Halt::Error(e.into())
    }
}

/// Ends a phase step with what a status write (`wait`, `failed`) returned.
pub(crate) fn stop<T>(written: Result<Action, ReconcileError>) -> Step<T> {
    Err(match written {
        Ok(action) => Halt::Status(action),
        Err(e) => Halt::Error(e),
    })
}

/// The reconcile's result once the phases ran: converged, or where they halted.
pub(crate) fn outcome(phases: Step<()>) -> Result<Action, ReconcileError> {
    match phases {
        Ok(()) => Ok(Action::Done),
        Err(Halt::Status(action)) => Ok(action),
        Err(Halt::Error(e)) => Err(e),
    }
}

/// A workload kind's proto type.
pub(crate) trait Workload: Object + Serialize {
    const KIND: Kind;
    fn conditions(&self) -> &[pb::Condition];
    fn conditions_mut(&mut self) -> &mut Vec<pb::Condition>;
    /// `status.external_ip_address`.
    fn external_ip_address_mut(&mut self) -> &mut String;
}

macro_rules! workload {
    ($ty:ty, $status:ty, $kind:expr) => {
        impl crate::reconcile::workload::Workload for $ty {
            const KIND: osac_model::Kind = $kind;
            fn conditions(&self) -> &[osac_model::pb::Condition] {
                self.status
                    .as_ref()
                    .map_or(&[], |s| s.conditions.as_slice())
            }
            fn conditions_mut(&mut self) -> &mut Vec<osac_model::pb::Condition> {
                &mut self
                    .status
                    .get_or_insert_with(<$status>::default)
                    .conditions
            }
            fn external_ip_address_mut(&mut self) -> &mut String {
                &mut self
                    .status
                    .get_or_insert_with(<$status>::default)
                    .external_ip_address
            }
        }
    };
}
pub(crate) use workload;

/// The workload being reconciled: the stored record (follows every write), the decoded body
/// being changed, and the annotations to write with it.
pub(crate) struct Work<T> {
    pub rec: Record,
    pub obj: T,
    pub annotations: BTreeMap<String, String>,
    /// The stored conditions describe the current spec.
    fresh: bool,
    /// Events to record with the next status write (see [`phase_event`]).
    events: Vec<NewEvent>,
}

/// The design's event for a phase condition that changes to `ok` with `reason` on a workload
/// of `kind`, recorded with the status write that sets it: `NetworkingResolved` /
/// `NetworkingResolutionFailed` (warning) for a machine's networking phase, `AgentsSelected`
/// for a cluster's inventory phase. Other transitions have only the state events.
pub(crate) fn phase_event(
    kind: Kind,
    condition: &str,
    ok: bool,
    reason: &str,
) -> Option<(&'static str, bool)> {
    let machine = matches!(kind, Kind::ComputeInstance | Kind::BareMetalInstance);
    match (condition, ok) {
        (NETWORKING_CONFIGURED, true) if machine => Some(("NetworkingResolved", false)),
        (NETWORKING_CONFIGURED, false) if machine && reason == FAILED_REASON => {
            Some(("NetworkingResolutionFailed", true))
        }
        (INVENTORY_ASSIGNED, true) if kind == Kind::Cluster => Some(("AgentsSelected", false)),
        _ => None,
    }
}

/// The reason of a condition whose phase failed for good.
const FAILED_REASON: &str = "Failed";

impl<T: Workload> Work<T> {
    pub fn new(rec: Record, obj: T) -> Self {
        let fresh = rec.annotations.get(APPLIED_SPEC_ANNOTATION) == Some(&spec_hash(&rec.body));
        Work {
            annotations: rec.annotations.clone(),
            rec,
            obj,
            fresh,
            events: Vec::new(),
        }
    }

    /// The workload's id.
    pub fn id(&self) -> &str {
        &self.rec.id
    }

    /// Whether a phase is already done for the current spec.
    pub fn done(&self, kind: &str) -> bool {
        self.fresh && is_true(self.obj.conditions(), kind)
    }

    /// Sets a condition; a change that the design names (see [`phase_event`]) is recorded as
    /// an event with the next status write.
    pub fn set(&mut self, kind: &str, ok: bool, reason: &str, message: impl Into<String>) {
        let message = message.into();
        let status = if ok {
            pb::ConditionStatus::True
        } else {
            pb::ConditionStatus::False
        } as i32;
        let changed = !self
            .obj
            .conditions()
            .iter()
            .any(|c| c.r#type == kind && c.status == status && c.reason == reason);
        if changed && let Some((name, warning)) = phase_event(T::KIND, kind, ok, reason) {
            self.note(name, warning, message.clone());
        }
        set_condition(self.obj.conditions_mut(), kind, ok, reason, message);
    }

    /// Records an event about the workload with the next status write.
    pub fn note(&mut self, reason: &str, warning: bool, message: impl Into<String>) {
        let event = osac_store::events::for_record(&self.rec, warning, reason, message);
        self.events.push(event);
    }

    /// The record to write: body, annotations and the spec hash the status describes.
    fn next(&self) -> Result<Record, ReconcileError> {
        let mut next = self.rec.clone();
        next.encode(&self.obj)?;
        next.annotations = self.annotations.clone();
        let hash = spec_hash(&next.body);
        next.annotations
            .insert(APPLIED_SPEC_ANNOTATION.to_string(), hash);
        Ok(next)
    }

    /// Writes the workload inside `tx` when something changed; returns the written record
    /// (set it with [`Work::written`] after the commit).
    pub async fn write_in(&self, tx: &mut dyn Tx) -> Result<Option<Record>, ReconcileError> {
        let next = self.next()?;
        if next == self.rec {
            return Ok(None);
        }
        let written = osac_store::events::update(tx, &self.rec, &next).await?;
        for event in &self.events {
            osac_store::events::record(tx, event.clone()).await?;
        }
        Ok(written)
    }

    /// Records a committed write.
    pub fn written(&mut self, rec: Option<Record>) {
        if let Some(r) = rec {
            self.rec = r;
            self.fresh = true;
            self.events.clear();
        }
    }

    /// Writes the workload when something changed.
    pub async fn write(&mut self, ctx: &ReconcileCtx) -> Result<(), ReconcileError> {
        let started = Instant::now();
        let next = self.next()?;
        if next == self.rec {
            return Ok(());
        }
        let events = self.events.clone();
        let written =
            osac_store::events::apply_update_with(ctx.store.as_ref(), &self.rec, &next, events)
                .await?;
        self.events.clear();
        self.written(written);
        metrics::workload_phase(T::KIND.collection(), "status_write", started.elapsed());
        Ok(())
    }

    /// A phase cannot proceed yet: its condition is FALSE with `reason`, the message says
    /// why, and the runtime looks again per `action`.
    pub async fn wait(
        &mut self,
        ctx: &ReconcileCtx,
        phase: &str,
        reason: &str,
        message: String,
        action: Action,
    ) -> Result<Action, ReconcileError> {
        self.set(phase, false, reason, message.clone());
        if self.obj.state() == 0 {
            self.obj.set_state(T::PENDING);
        }
        self.obj.set_message(message);
        self.write(ctx).await?;
        Ok(action)
    }

    /// A phase step failed. Transient: condition FALSE (`Retrying`), message, back off.
    /// Permanent: FAILED with the message until the spec changes.
    pub async fn failed(
        &mut self,
        ctx: &ReconcileCtx,
        phase: &str,
        err: OpError,
    ) -> Result<Action, ReconcileError> {
        let m = status_message(ctx, &self.rec, self.obj.message(), &err).await;
        if err.is_transient() {
            return self.wait(ctx, phase, "Retrying", m, Action::Retry).await;
        }
        self.set(phase, false, FAILED_REASON, m.clone());
        self.obj.set_state(T::FAILED);
        self.obj.set_message(m);
        self.write(ctx).await?;
        Ok(Action::Done)
    }

    /// A delete step failed: shown like [`finalizer::undo_failed`] (DELETING, DELETE_FAILED
    /// when permanent and the kind has it, with the message), and the cleanup is not done.
    pub async fn delete_failed(
        &mut self,
        ctx: &ReconcileCtx,
        err: OpError,
    ) -> Result<Cleanup, ReconcileError> {
        let (state, action) = finalizer::undo_failure_outcome::<T>(ctx, &err);
        let m = status_message(ctx, &self.rec, self.obj.message(), &err).await;
        self.obj.set_state(state);
        self.obj.set_message(m);
        self.write(ctx).await?;
        Ok(Cleanup::NotYet(action))
    }

    /// Writes the workload inside `tx`, commits, and records how long `phase` took since
    /// `started` (store-side phases: host reservation, VIP allocation, final assignment).
    pub async fn commit_in(
        &mut self,
        mut tx: Box<dyn Tx>,
        phase: &'static str,
        started: Instant,
    ) -> Result<(), ReconcileError> {
        let written = self.write_in(&mut *tx).await?;
        tx.commit().await?;
        self.written(written);
        metrics::workload_phase(T::KIND.collection(), phase, started.elapsed());
        Ok(())
    }

    /// A converged workload: only its external address (from ExternalIPAttachments) may
    /// change.
    pub async fn refresh_external_ip(
        &mut self,
        ctx: &ReconcileCtx,
        external: String,
    ) -> Result<Action, ReconcileError> {
        let current = self.obj.external_ip_address_mut();
        if *current != external {
            *current = external;
            self.write(ctx).await?;
        }
        Ok(Action::Done)
    }

    /// The last phase: READY, and the hosts ASSIGNED to the workload in the same transaction.
    pub async fn ready_with_hosts(
        &mut self,
        ctx: &ReconcileCtx,
        hosts: &[&str],
    ) -> Result<Action, ReconcileError> {
        self.obj.set_state(T::READY);
        self.obj.set_message(String::new());
        let started = Instant::now();
        let mut tx = ctx.store.begin_shared().await?;
        for h in hosts {
            set_host_state(&mut *tx, h, self.id(), pb::HostState::Assigned).await?;
        }
        self.commit_in(tx, "assign", started).await?;
        Ok(Action::Done)
    }
}
/// Runs one phase step and records its duration.
pub(crate) async fn timed<F: Future>(kind: Kind, phase: &'static str, f: F) -> F::Output {
    let start = Instant::now();
    let out = f.await;
    metrics::workload_phase(kind.collection(), phase, start.elapsed());
    out
}

/// The provisioner for `phase`; without one the workload waits in that phase, saying so.
pub(crate) async fn provisioner<T: Workload>(
    ctx: &ReconcileCtx,
    w: &mut Work<T>,
    phase: &str,
) -> Step<Arc<dyn Provisioner>> {
    match ctx.provisioner.clone() {
        Some(p) => Ok(p),
        None => {
            let m = NO_PROVISIONER.to_string();
            stop(w.wait(ctx, phase, "NoProvisioner", m, Action::Retry).await)
        }
    }
}

/// The provisioner's undo of a workload (`deprovision`), timed as `deprovisioning`. Without a
/// provisioner, a workload whose `provisioned` condition is TRUE waits for one (`what` says
/// for what); one never provisioned has nothing to undo.
pub(crate) async fn deprovision<T, F, Fut>(
    ctx: &ReconcileCtx,
    w: &mut Work<T>,
    provisioned: &str,
    what: &str,
    deprovision: F,
) -> Result<Option<Cleanup>, ReconcileError>
where
    T: Workload,
    F: FnOnce(Arc<dyn Provisioner>) -> Fut,
    Fut: Future<Output = Result<(), OpError>>,
{
    match ctx.provisioner.clone() {
        Some(p) => match timed(T::KIND, "deprovisioning", deprovision(p)).await {
            Ok(()) => Ok(None),
            Err(e) => Ok(Some(w.delete_failed(ctx, e).await?)),
        },
        None if is_true(w.obj.conditions(), provisioned) => {
            let m = format!("waiting for a provisioner to {what}: none is configured");
            Ok(Some(w.delete_failed(ctx, OpError::transient(m)).await?))
        }
        None => Ok(None),
    }
}

/// The apply of a VM or a bare-metal instance: once settled it only follows the ExternalIP
/// attached to it through `target_field`; otherwise its `phases` run.
pub(crate) async fn apply_machine<T: Workload>(
    ctx: &ReconcileCtx,
    rec: Record,
    target_field: &str,
    phases: impl AsyncFnOnce(&ReconcileCtx, &mut Work<T>) -> Step<()>,
) -> Result<Action, ReconcileError> {
    let obj: T = decode(&rec)?;
    let mut w = Work::new(rec, obj);
    if settled(&w.rec, &w.obj) {
        let external = external_ip_of(ctx, w.id(), target_field, None).await?;
        return w.refresh_external_ip(ctx, external).await;
    }
    outcome(phases(ctx, &mut w).await)
}

/// The address of the READY ExternalIPAttachment targeting the workload through `field`
/// (`spec.compute_instance`, `spec.baremetal_instance`, `spec.cluster`), at `endpoint` when
/// given (a cluster's API endpoint); the lowest attachment id wins; "" when none.
pub(crate) async fn external_ip_of(
    ctx: &ReconcileCtx,
    workload_id: &str,
    field: &str,
    endpoint: Option<pb::ExternalIpAttachmentEndpoint>,
) -> Result<String, ReconcileError> {
    let mut found: Vec<(String, String)> = Vec::new();
    for r in ctx.store.referrers(workload_id).await? {
        if r.source_kind != Kind::ExternalIpAttachment || r.field != field {
            continue;
        }
        let Some(rec) = ctx.store.get(&r.source).await? else {
            continue;
        };
        if rec.deleted_at.is_some() {
            continue;
        }
        let att: pb::ExternalIpAttachment = rec.decode()?;
        if let Some(want) = endpoint
            && att.spec.as_ref().map(|s| s.target_endpoint) != Some(want as i32)
        {
            continue;
        }
        let Some(status) = att.status else { continue };
        if status.state == pb::ExternalIpAttachmentState::Ready as i32
            && !status.external_ip_address.is_empty()
        {
            found.push((rec.id.clone(), status.external_ip_address));
        }
    }
    found.sort();
    Ok(found.into_iter().next().map(|(_, a)| a).unwrap_or_default())
}

/// The undo is complete: frees the workload's hosts and drops its finalizer in one
/// transaction (the row goes when no finalizer is left).
pub(crate) async fn release_with_hosts(
    ctx: &ReconcileCtx,
    rec: &Record,
    hosts: &[String],
) -> Result<Cleanup, ReconcileError> {
    let start = Instant::now();
    let mut tx = ctx.store.begin_shared().await?;
    for h in hosts {
        set_host_state(&mut *tx, h, &rec.id, pb::HostState::Free).await?;
    }
    finalizer::release_in(&mut *tx, rec).await?;
    tx.commit().await?;
    metrics::workload_phase(rec.kind.collection(), "release_hosts", start.elapsed());
    Ok(Cleanup::Released)
}
