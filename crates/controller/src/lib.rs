//! `osac-controller`: the level-triggered reconcilers of osac-net (one per kind) and the dispatcher
//! that routes their operations to networking managers.
//!
//! # How it runs
//!
//! [`Controllers::run`] subscribes to the store's change feed, enqueues every object at start and
//! again every `resync_interval` (later passes spread over the interval: `resync.rs`), and runs `workers` reconciles in parallel from one work queue keyed
//! by object id. A change to object X enqueues X, every id X references (`Change::refs`) and every
//! object that references X (`Store::referrers`), so dependents wake when what they wait on
//! changes. The queue never runs two reconciles of one object at once: a change that arrives
//! during a reconcile marks the object dirty and it runs again right after — except the
//! change of the reconcile's own status write when that reconcile ends converged
//! (`Action::Done`): it already ran on that version (`queue.rs`). Failures back off
//! exponentially per object (`backoff_base` doubling up to `backoff_cap`, reset on success).
//!
//! # Several replicas
//!
//! On a store several processes share (PostgreSQL), each process is a replica
//! ([`Controllers::with_replica`], after [`replica::join`]): objects fall into
//! [`ownership::SHARDS`] shards by a hash of their id, and a replica reconciles only the shards
//! whose lease it holds ([`replica`] renews, releases and acquires them). Every reconcile runs
//! under its shard's fencing token ([`osac_backends::fence`]): its store transactions check the
//! token first (a write under a lost lease is refused), and manager and provisioner calls are
//! refused once the lease's local deadline has passed. Alone on its store, a process owns every
//! shard and nothing is fenced.
//!
//! # The reconciler contract
//!
//! Every reconciler (one per kind, in [`reconcile`]) obeys these rules; the runtime relies on
//! them for correctness after crashes, restarts and concurrent API writes:
//!
//! - **Idempotent.** A reconcile may run any number of times for the same stored state, also
//!   after a crash between a manager call and the status write; managers are idempotent too.
//! - **No hidden input.** Everything a reconcile needs is read from the store (and the manager
//!   registry); nothing is carried over in memory between runs, so a fresh process converges.
//! - **No internal retries.** A failed step returns (transient ⇒ back off, permanent ⇒ FAILED)
//!   and the runtime schedules the next attempt.
//! - **Never block on another object.** A missing precondition (parent not READY, address not
//!   allocated) is checked, reported in `status.message`, and the object is requeued; the
//!   change feed wakes it when the dependency changes.
//! - **Status is written only here**, with optimistic locking: a status write (with the event
//!   its state change implies) is a write set handed to [`osac_store::Store::apply`], which
//!   commits it together with concurrent ones (group commit on SQLite), all or nothing; a
//!   conflict just requeues. Writes happen only when something changed, so a converged object
//!   costs one read.
//! - **Done means converged.** A reconcile that returns `Action::Done` is not woken by its own
//!   status write (through `Store::apply`): one with more to do after a write carries on in
//!   the same run or returns `Again` (dropping the cleanup finalizer: the deprovisioning
//!   follows in the next run), `After` or `Retry`.
//! - **Managers are never called inside a store transaction** (a transaction may hold the only
//!   database connection the manager's own state store needs).
//! - **Deletion goes through the fabric finalizer** (`reconcile/finalizer.rs`): a deleted
//!   object holding it has its managers' state undone, and only a successful undo drops the
//!   finalizer (which removes the row); a failed undo keeps it and is retried.
//!
//! # Workloads
//!
//! ComputeInstances, BareMetalInstances and Clusters follow `docs/workloads.md`: phases with
//! conditions, each skipped once its condition is TRUE for the current spec, every step
//! idempotent; host reservation and cluster VIP allocation are store transactions that also
//! write the workload. Provisioning goes through the [`osac_backends::provision::Provisioner`]
//! given to [`Controllers::with_provisioner`] (none ⇒ workloads wait with a message). A host
//! that becomes FREE wakes the workloads of its HostType (they may be waiting for inventory).
//! Phase durations go to `osac_workload_phase_duration_seconds{kind, phase}`.
//!
//! # What the API layer does
//!
//! The API and the controllers do not call each other: both write through the store (with the
//! event recording of [`osac_store::events`] and the pool accounting of [`osac_store::pool`]),
//! and the change feed brings the API's writes here. At create the API stores the object with
//! its initial state (`*_PENDING`, ExternalIP `PENDING` with `spec.pool` filled in and the
//! pool's counters moved by [`osac_store::pool::adjust_pool`]) and, for kinds with
//! fabric state ([`osac_model::Kind::needs_fabric_finalizer`]), the finalizer
//! [`osac_model::FABRIC_FINALIZER`]. At delete it sets `deleted_at` and state `*_DELETING`; the
//! controller undoes the fabric state and removes the finalizer, which removes the row.

pub mod dispatch;
pub mod drift;
mod fenced_provisioner;
mod fenced_store;
pub mod metering;
mod metrics;
pub mod ownership;
mod queue;
pub mod reconcile;
pub mod replica;
mod resync;
pub mod runtime;
pub mod traffic;

pub use dispatch::{Dispatcher, Managers};
pub use ownership::{Ownership, SHARDS, shard_of};
pub use reconcile::cluster::agent_attachment_id;
pub use reconcile::compute_instance::{HOSTING_CLUSTER_ANNOTATION, hosting_cluster_for, vm_mac};
pub use reconcile::external_ip_attachment::{Binding, NoWorkloads, Target, TargetResolver};
pub use reconcile::host::{PARKED_ANNOTATION, parking_attachment_id};
pub use reconcile::targets::WorkloadTargets;
pub use reconcile::tenant::{
    DefaultNetworking, DefaultNetworkingStatus, LabelledDefaults, NotConfigured,
};
pub use reconcile::{
    APPLIED_SPEC_ANNOTATION, DELETE_FAILURES_ANNOTATION, ReconcileError,
    VIRTUAL_NETWORK_ANNOTATION, spec_hash,
};
pub use replica::{JoinError, ReplicaConfig};
pub use runtime::{ControllerConfig, Controllers, DEFAULT_IP_DISCOVERY_TIMEOUT, Handle};
