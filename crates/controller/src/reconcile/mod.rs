//! One reconciler per kind, each in the file named for its kind (what it asks of which manager
//! is read there), and the helpers they share: status writes under optimistic locking, the
//! applied-spec hash, failure handling, and the finalizer that holds a deleted object until
//! its undo succeeded ([`finalizer`]). The workload reconcilers (ComputeInstance,
//! BareMetalInstance, Cluster) also share [`workload`] (phases and status writes),
//! [`network_phase`] (ports, subnets, DHCP discovery) and the host inventory in [`host`].

pub mod backend;
pub mod baremetal_instance;
pub(crate) mod cleanup;
pub mod cluster;
mod cluster_urls;
pub mod compute_instance;
pub(crate) mod conditions;
pub mod external_ip;
pub mod external_ip_attachment;
pub mod external_ip_pool;
pub(crate) mod finalizer;
pub mod host;
pub mod nat_gateway;
pub mod network_class;
pub(crate) mod network_phase;
pub mod security_group;
pub mod subnet;
pub mod targets;
pub mod tenant;
pub mod virtual_network;
pub(crate) mod workload;

pub use finalizer::DELETE_FAILURES_ANNOTATION;

use std::sync::Arc;
use std::time::Duration;

use osac_backends::OpError;
use osac_model::Kind;
use osac_store::{Record, Store, StoreError};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::dispatch::Dispatcher;
use crate::runtime::ControllerConfig;

pub use osac_model::annotations::{APPLIED_SPEC_ANNOTATION, VIRTUAL_NETWORK_ANNOTATION};

/// Why a reconcile could not finish; the runtime backs off and retries.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The store failed or refused the write (a version conflict just means "requeue").
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The reconcile task panicked (a bug); the object is retried with backoff.
    #[error("reconcile of {0} panicked")]
    Panicked(String),
}

impl ReconcileError {
    /// Whether this is an optimistic-locking conflict (someone wrote the object meanwhile).
    pub fn is_conflict(&self) -> bool {
        matches!(self, ReconcileError::Store(StoreError::Conflict { .. }))
    }
}

/// What the runtime should do after a successful reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Converged.
    Done,
    /// Not converged, and nothing to wait for: a step was written and the next one follows
    /// in a new run at once (its own write does not wake it: "Done means converged").
    Again,
    /// Look again after this delay.
    After(Duration),
    /// Not converged (waiting for a dependency or a transient failure): back off and retry.
    Retry,
}

/// Everything a reconcile may use: the store, the managers, and the replaceable steps (target
/// resolution, default networking, provisioning).
pub(crate) struct ReconcileCtx {
    pub store: Arc<dyn Store>,
    pub dispatcher: Dispatcher,
    pub config: ControllerConfig,
    pub targets: Arc<dyn external_ip_attachment::TargetResolver>,
    pub default_networking: Arc<dyn tenant::DefaultNetworking>,
    /// Tenants waiting for their defaults, woken by changes to their objects.
    pub tenant_watch: tenant::TenantWatch,
    /// Boots VMs, installs bare-metal servers, builds clusters (None: workloads wait).
    pub provisioner: Option<Arc<dyn osac_backends::provision::Provisioner>>,
    /// When a cluster shows `NetworkingIPDiscoveryTimeout`.
    pub ip_discovery_timeout: Duration,
}

/// Reconciles one stored object.
pub(crate) async fn reconcile(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    if rec.deleted_at.is_some() && rec.finalizers.is_empty() {
        // Deleted without finalizers: writing it back removes the row.
        osac_store::events::apply_update(ctx.store.as_ref(), &rec, &rec).await?;
        return Ok(Action::Done);
    }
    if cleanup::pending(&rec) {
        return cleanup::reconcile(ctx, &rec).await;
    }
    match rec.kind {
        Kind::NetworkClass => network_class::reconcile(ctx, rec).await,
        Kind::ExternalIpPool => external_ip_pool::reconcile(ctx, rec).await,
        Kind::Tenant => tenant::reconcile(ctx, rec).await,
        Kind::VirtualNetwork => virtual_network::reconcile(ctx, rec).await,
        Kind::Subnet => subnet::reconcile(ctx, rec).await,
        Kind::SecurityGroup => security_group::reconcile(ctx, rec).await,
        Kind::ExternalIp => external_ip::reconcile(ctx, rec).await,
        Kind::ExternalIpAttachment => external_ip_attachment::reconcile(ctx, rec).await,
        Kind::NatGateway => nat_gateway::reconcile(ctx, rec).await,
        // Events are records: nothing to converge.
        Kind::HostType | Kind::BareMetalTemplate | Kind::BareMetalInstanceType | Kind::Event => {
            Ok(Action::Done)
        }
        Kind::Host => host::reconcile(ctx, rec).await,
        Kind::ComputeInstance => compute_instance::reconcile(ctx, rec).await,
        Kind::BareMetalInstance => baremetal_instance::reconcile(ctx, rec).await,
        Kind::Cluster => cluster::reconcile(ctx, rec).await,
    }
}

/// A proto object with a `status { state, message }` and its kind's state values.
pub(crate) trait Object: Serialize + DeserializeOwned {
    const PENDING: i32;
    /// READY (ALLOCATED for ExternalIPs).
    const READY: i32;
    const FAILED: i32;
    const DELETING: i32;
    /// Kinds with a DELETE_FAILED state show a permanent undo failure with it.
    const DELETE_FAILED: Option<i32>;

    fn state(&self) -> i32;
    fn set_state(&mut self, state: i32);
    fn message(&self) -> &str;
    fn set_message(&mut self, message: String);
}

macro_rules! object {
    ($ty:ty, $status:ty, pending: $p:expr, ready: $r:expr, failed: $f:expr, deleting: $d:expr, delete_failed: $df:expr) => {
        impl crate::reconcile::Object for $ty {
            const PENDING: i32 = $p as i32;
            const READY: i32 = $r as i32;
            const FAILED: i32 = $f as i32;
            const DELETING: i32 = $d as i32;
            const DELETE_FAILED: Option<i32> = $df;

            fn state(&self) -> i32 {
                self.status.as_ref().map_or(0, |s| s.state)
            }
            fn set_state(&mut self, state: i32) {
                self.status.get_or_insert_with(<$status>::default).state = state;
            }
            fn message(&self) -> &str {
                self.status.as_ref().map_or("", |s| s.message.as_str())
            }
            fn set_message(&mut self, message: String) {
                self.status.get_or_insert_with(<$status>::default).message = message;
            }
        }
    };
}
pub(crate) use object;

/// Decodes a record body; a body that does not decode is reported as a store corruption.
pub(crate) fn decode<T: DeserializeOwned>(rec: &Record) -> Result<T, ReconcileError> {
    Ok(rec.decode()?)
}

/// Writes `next` (same id and version as `read`) unless nothing changed, with the event of a
/// state change or of the row's removal in the same transaction. Returns whether a write
/// happened.
pub(crate) async fn write(
    ctx: &ReconcileCtx,
    read: &Record,
    next: Record,
) -> Result<bool, ReconcileError> {
    if *read == next {
        return Ok(false);
    }
    osac_store::events::apply_update(ctx.store.as_ref(), read, &next).await?;
    Ok(true)
}

/// Writes `obj` as the body of `next` (a changed copy of `rec`) unless nothing changed.
pub(crate) async fn save<T: Serialize>(
    ctx: &ReconcileCtx,
    rec: &Record,
    next: Record,
    obj: &T,
) -> Result<bool, ReconcileError> {
    encode_and_write(ctx, rec, next, obj, false).await
}

/// Like [`save`], and records that the (encoded) spec got its final outcome.
pub(crate) async fn save_applied<T: Serialize>(
    ctx: &ReconcileCtx,
    rec: &Record,
    next: Record,
    obj: &T,
) -> Result<bool, ReconcileError> {
    encode_and_write(ctx, rec, next, obj, true).await
}

async fn encode_and_write<T: Serialize>(
    ctx: &ReconcileCtx,
    rec: &Record,
    mut next: Record,
    obj: &T,
    applied: bool,
) -> Result<bool, ReconcileError> {
    next.encode(obj)?;
    if applied {
        mark_applied(&mut next);
    }
    write(ctx, rec, next).await
}

/// FNV-1a over `bytes`: stable hashes of ids and specs (the same in every process and
/// release, unlike `std`'s hasher).
pub(crate) use osac_model::hash::fnv1a64 as fnv1a;

/// Stable hash of the object's `spec` (FNV-1a over canonical JSON: keys sorted).
pub fn spec_hash(body: &Value) -> String {
    let mut text = String::new();
    canonical(body.get("spec").unwrap_or(&Value::Null), &mut text);
    format!("{:016x}", fnv1a(text.bytes()))
}

fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Whether the current spec already got a final outcome (READY or FAILED): nothing to do.
pub(crate) fn settled<T: Object>(rec: &Record, obj: &T) -> bool {
    (obj.state() == T::READY || obj.state() == T::FAILED)
        && rec.annotations.get(APPLIED_SPEC_ANNOTATION) == Some(&spec_hash(&rec.body))
}

/// Records that the current spec got its final outcome.
pub(crate) fn mark_applied(next: &mut Record) {
    let hash = spec_hash(&next.body);
    next.annotations
        .insert(APPLIED_SPEC_ANNOTATION.to_string(), hash);
}

/// Marks `obj` READY with the spec applied and writes it.
pub(crate) async fn succeeded<T: Object>(
    ctx: &ReconcileCtx,
    rec: &Record,
    mut obj: T,
) -> Result<Action, ReconcileError> {
    obj.set_state(T::READY);
    obj.set_message(String::new());
    save_applied(ctx, rec, rec.clone(), &obj).await?;
    Ok(Action::Done)
}

/// A precondition is not met: stay PENDING (or whatever non-final state it is in), say why,
/// and retry with backoff (the change feed usually wakes the object sooner).
pub(crate) async fn waiting<T: Object>(
    ctx: &ReconcileCtx,
    rec: &Record,
    mut obj: T,
    message: String,
) -> Result<Action, ReconcileError> {
    if obj.state() == 0 {
        obj.set_state(T::PENDING);
    }
    obj.set_message(message);
    save(ctx, rec, rec.clone(), &obj).await?;
    Ok(Action::Retry)
}

/// A create/apply step failed. Transient: keep the state, show the message, retry with backoff.
/// Permanent: FAILED with the manager's message, and no retry until the spec changes. Backend
/// detail is replaced by a plain message with a reference ([`backend::status_message`]).
pub(crate) async fn op_failed<T: Object>(
    ctx: &ReconcileCtx,
    rec: &Record,
    mut obj: T,
    err: OpError,
) -> Result<Action, ReconcileError> {
    let message = backend::status_message(ctx, rec, obj.message(), &err).await;
    if err.is_transient() {
        return waiting(ctx, rec, obj, message).await;
    }
    obj.set_state(T::FAILED);
    obj.set_message(message);
    save_applied(ctx, rec, rec.clone(), &obj).await?;
    Ok(Action::Done)
}

/// Parses the optional IPv4/IPv6 CIDR pair of a spec; a bad value is a permanent failure.
pub(crate) fn cidrs(
    what: &str,
    v4: &str,
    v6: &str,
) -> Result<osac_model::validate::DualCidrs, OpError> {
    osac_model::validate::DualCidrs::parse_optional("spec", v4, v6)
        .map_err(|e| OpError::permanent(format!("{what}: {e}")))
}

/// "VirtualNetwork 'net'" for messages.
pub(crate) fn describe(rec: &Record) -> String {
    format!("{} '{}'", rec.kind, rec.label())
}

/// Why an object waiting on `dep` must fail instead: `dep` FAILED (its state name ends in
/// `_STATE_FAILED`). The reason names the dependency and carries its own message.
pub(crate) fn failed_dependency(dep: &Record) -> Option<OpError> {
    let status = dep.body.get("status")?;
    let state = status.get("state").and_then(serde_json::Value::as_str)?;
    if !state.ends_with("_STATE_FAILED") {
        return None;
    }
    let why = status
        .get("message")
        .and_then(serde_json::Value::as_str)
        .filter(|m| !m.is_empty())
        .map(|m| format!(": {m}"))
        .unwrap_or_default();
    Some(OpError::permanent(format!(
        "{} is FAILED{why}",
        describe(dep)
    )))
}

/// Outcome of a precondition check.
pub(crate) enum Resolved<T> {
    /// Met: what the object needed.
    Ready(T),
    /// Not yet: the message says what the object waits for.
    Wait(String),
    /// Cannot work (permanent) or failed this time (transient).
    Failed(OpError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spec_hash_ignores_key_order_and_status() {
        let a = json!({"spec": {"a": 1, "b": [1, 2]}, "status": {"state": "X"}});
        let b = json!({"spec": {"b": [1, 2], "a": 1}});
        let c = json!({"spec": {"b": [2, 1], "a": 1}});
        assert_eq!(spec_hash(&a), spec_hash(&b));
        assert_ne!(spec_hash(&a), spec_hash(&c));
    }
}
