//! The reconciler runtime: change feed + periodic resync → work queue → N workers.
//! See the crate documentation for the contract reconcilers follow.

use std::sync::Arc;
use std::time::{Duration, Instant};

use osac_backends::provision::Provisioner;
use osac_model::Kind;
use osac_store::{Change, Store};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::dispatch::Dispatcher;
use crate::fenced_provisioner::FencedProvisioner;
use crate::fenced_store::{FencedStore, track_own_writes};
use crate::metrics;
use crate::ownership::{Claim, Ownership};
use crate::queue::{Queue, Schedule};
use crate::reconcile::external_ip_attachment::TargetResolver;
use crate::reconcile::targets::WorkloadTargets;
use crate::reconcile::tenant::{DefaultNetworking, LabelledDefaults, TenantWatch};
use crate::reconcile::{self, Action, ReconcileCtx, ReconcileError};
use crate::replica::{ReplicaConfig, lease_loop};

/// Tuning of the runtime.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Reconciles running in parallel (different objects only).
    pub workers: usize,
    /// Every object is looked at again at least this often, change or not.
    pub resync_interval: Duration,
    /// First retry delay after a failure; doubles per consecutive failure.
    pub backoff_base: Duration,
    /// Longest retry delay; also the slow retry of DELETE_FAILED objects.
    pub backoff_cap: Duration,
    /// Failed undo attempts of one auto-provisioned object after which a workload's cleanup
    /// gives up, labels the leftovers orphaned and lets the workload go.
    pub cleanup_retry_limit: u32,
    /// How long events are kept (default one hour, as in Kubernetes).
    pub event_ttl: Duration,
    /// How often expired events are pruned (and each tenant's trimmed to its cap).
    pub event_prune_interval: Duration,
    /// Events kept per tenant, newest first (`--max-events-per-tenant`).
    pub max_events_per_tenant: usize,
    /// How often the fabric managers' NAT byte counters are read and recorded (bandwidth
    /// metering); zero turns it off.
    pub traffic_interval: Duration,
    /// Period of the metering usage records (`--metering-record-seconds`).
    pub usage_record_interval: Duration,
    /// How long closed usage intervals are kept (`--metering-retention-days`).
    pub usage_retention: Duration,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            workers: 4,
            resync_interval: Duration::from_secs(300),
            backoff_base: Duration::from_millis(500),
            backoff_cap: Duration::from_secs(300),
            cleanup_retry_limit: 8,
            event_ttl: osac_store::events::DEFAULT_EVENT_TTL,
            event_prune_interval: Duration::from_secs(60),
            max_events_per_tenant: osac_store::events::DEFAULT_MAX_EVENTS_PER_TENANT,
            traffic_interval: Duration::from_secs(60),
            usage_record_interval: crate::metering::DEFAULT_USAGE_RECORD_INTERVAL,
            usage_retention: crate::metering::DEFAULT_USAGE_RETENTION,
        }
    }
}

/// Default of [`Controllers::with_ip_discovery_timeout`].
pub const DEFAULT_IP_DISCOVERY_TIMEOUT: Duration = Duration::from_secs(300);

/// The controllers of one process.
pub struct Controllers {
    ctx: ReconcileCtx,
    queue: Arc<Queue>,
    ownership: Ownership,
    replica: Option<ReplicaConfig>,
}

/// Pokes the queue of running [`Controllers`] (e.g. the API after a write it wants handled
/// before the feed delivers it).
#[derive(Clone)]
pub struct Handle {
    queue: Arc<Queue>,
}

impl Handle {
    /// Reconciles `id` soon (right after its current run if one is in progress).
    pub fn enqueue(&self, kind: Kind, id: &str) {
        self.queue.add(id, Some(kind));
    }
}

impl Controllers {
    /// Controllers over `store`, calling managers through `dispatcher`.
    pub fn new(store: Arc<dyn Store>, dispatcher: Dispatcher, config: ControllerConfig) -> Self {
        let queue = Arc::new(Queue::new(config.backoff_base, config.backoff_cap));
        Controllers {
            ctx: ReconcileCtx {
                store: Arc::new(FencedStore(store)),
                dispatcher,
                config,
                targets: Arc::new(WorkloadTargets),
                default_networking: Arc::new(LabelledDefaults),
                tenant_watch: TenantWatch::default(),
                provisioner: None,
                ip_discovery_timeout: DEFAULT_IP_DISCOVERY_TIMEOUT,
            },
            queue,
            ownership: Ownership::alone(),
            replica: None,
        }
    }

    /// Runs as one of several replicas sharing the store: reconciles only the shards whose
    /// lease it holds (see [`crate::replica`]); [`crate::replica::join`] must have succeeded.
    pub fn with_replica(mut self, config: ReplicaConfig) -> Self {
        self.ownership = Ownership::replica(&config.info.id);
        self.replica = Some(config);
        self
    }

    /// What this process owns (for readiness and the replica listing).
    pub fn ownership(&self) -> Ownership {
        self.ownership.clone()
    }

    /// Sets the provisioner that boots VMs, installs bare-metal servers and builds clusters.
    /// Without one, workloads stop before their provisioning phase with a message saying so.
    pub fn with_provisioner(mut self, provisioner: Arc<dyn Provisioner>) -> Self {
        self.ctx.provisioner = Some(Arc::new(FencedProvisioner(provisioner)));
        self
    }

    /// How long a cluster waits for its agents' DHCP leases before it shows the
    /// `NetworkingIPDiscoveryTimeout` condition (it keeps retrying); default 300 s.
    pub fn with_ip_discovery_timeout(mut self, timeout: Duration) -> Self {
        self.ctx.ip_discovery_timeout = timeout;
        self
    }

    /// Replaces how ExternalIPAttachment targets (workloads) are resolved to an IP (the
    /// default, [`WorkloadTargets`], reads the workloads from the store).
    pub fn with_target_resolver(mut self, targets: Arc<dyn TargetResolver>) -> Self {
        self.ctx.targets = targets;
        self
    }

    /// Replaces the tenant default-networking step.
    pub fn with_default_networking(mut self, step: Arc<dyn DefaultNetworking>) -> Self {
        self.ctx.default_networking = step;
        self
    }

    /// A handle to enqueue objects while [`Controllers::run`] runs.
    pub fn handle(&self) -> Handle {
        Handle {
            queue: self.queue.clone(),
        }
    }

    /// Reconciles `id` soon.
    pub fn enqueue(&self, kind: Kind, id: &str) {
        self.queue.add(id, Some(kind));
    }

    /// Runs until `shutdown` becomes true (or its sender is dropped); reconciles in progress
    /// finish first. Dropping the returned future stops the workers at once (a reconcile
    /// already in flight still completes on its own; optimistic locking keeps that safe).
    pub async fn run(self, shutdown: watch::Receiver<bool>) {
        let Controllers {
            ctx,
            queue,
            ownership,
            replica,
        } = self;
        let ctx = Arc::new(ctx);
        // Subscribe before the first listing so no change falls between the two.
        let feed = ctx.store.subscribe();
        let mut tasks = JoinSet::new();
        tasks.spawn(crate::resync::resync_loop(
            ctx.clone(),
            queue.clone(),
            shutdown.clone(),
        ));
        tasks.spawn(osac_store::events::prune_loop(
            ctx.store.clone(),
            ctx.config.event_ttl,
            ctx.config.max_events_per_tenant,
            ctx.config.event_prune_interval,
            shutdown.clone(),
        ));
        tasks.spawn(crate::metering::metering_loop(
            ctx.store.clone(),
            ownership.clone(),
            ctx.config.usage_record_interval,
            ctx.config.usage_retention,
            shutdown.clone(),
        ));
        tasks.spawn(crate::drift::drift_loop(
            ctx.clone(),
            ownership.clone(),
            shutdown.clone(),
        ));
        tasks.spawn(crate::traffic::traffic_loop(
            ctx.clone(),
            ownership.clone(),
            ctx.config.traffic_interval,
            shutdown.clone(),
        ));
        tasks.spawn(feed_loop(
            ctx.clone(),
            queue.clone(),
            feed,
            shutdown.clone(),
        ));
        if let Some(config) = replica {
            tasks.spawn(lease_loop(
                ctx.store.clone(),
                ownership.clone(),
                config,
                queue.clone(),
                shutdown.clone(),
            ));
        }
        for _ in 0..ctx.config.workers.max(1) {
            tasks.spawn(worker(
                ctx.clone(),
                queue.clone(),
                ownership.clone(),
                shutdown.clone(),
            ));
        }
        tracing::info!(workers = ctx.config.workers.max(1), "controllers started");
        while tasks.join_next().await.is_some() {}
        tracing::info!("controllers stopped");
    }
}

async fn feed_loop(
    ctx: Arc<ReconcileCtx>,
    queue: Arc<Queue>,
    mut feed: tokio::sync::broadcast::Receiver<Change>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        if *shutdown.borrow() {
            return;
        }
        let received = tokio::select! {
            r = feed.recv() => r,
            changed = shutdown.changed() => {
                if changed.is_err() { return }
                continue;
            }
        };
        match received {
            Ok(change) => on_change(&ctx, &queue, change).await,
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(missed, "change feed lagged; resyncing everything");
                crate::resync::queue_everything(&ctx, &queue).await;
            }
            Err(RecvError::Closed) => {
                tracing::warn!("change feed closed; relying on periodic resync");
                return;
            }
        }
    }
}

/// Wakes the changed object, what it references and what references it.
async fn on_change(ctx: &ReconcileCtx, queue: &Queue, change: Change) {
    // Events wake nothing: nothing reconciles them (the feed carries them for watches); nor do
    // changes that are not about objects (a revoked token).
    let Some(kind) = change.kind().filter(|k| k.is_reconciled()) else {
        return;
    };
    let kind = Some(kind);
    if change.gone {
        queue.forget(&change.id);
    } else if let Some(k) = kind {
        queue.changed(&change.id, k, change.version);
    }
    // An ExternalIP's only reference is its pool, whose counters the transactions that add
    // and remove its addresses move exactly (`adjust_pool`); the pool's own recount is a
    // safety net, run on the pool's changes and at every resync. Waking the pool at each of
    // its addresses' writes would recount all of them every time.
    if kind != Some(Kind::ExternalIp) {
        for target in &change.refs {
            queue.add(target, None);
        }
    }
    if let Some(tenant) = ctx.tenant_watch.watcher(&change.tenant) {
        queue.add(&tenant, Some(Kind::Tenant));
    }
    // ExternalIPs do not depend on their pool's status, and a pool changes with every
    // reservation: waking all its addresses each time would be quadratic.
    if kind == Some(Kind::ExternalIpPool) {
        return;
    }
    if kind == Some(Kind::Host) && !change.gone {
        wake_inventory_waiters(ctx, queue, &change.id).await;
    }
    if kind.is_some_and(|k| !osac_model::refs::is_referenced(k)) {
        return;
    }
    // A new object's referrers are new too (made with it, or after it): each is woken by its
    // own creation, so there is nothing to look up — except the ExternalIPAttachments that
    // named a new workload before it existed (they hold its name).
    if change.version == Some(1) {
        if kind.is_some_and(|k| Kind::WORKLOADS.contains(&k)) {
            wake_forward_references(ctx, queue, &change.id).await;
        }
        return;
    }
    match ctx.store.referrers(&change.id).await {
        Ok(refs) => {
            for r in refs {
                queue.add(&r.source, Some(r.source_kind));
            }
        }
        Err(e) => tracing::warn!(id = %change.id, error = %e, "cannot list referrers"),
    }
}

/// A new workload wakes the ExternalIPAttachments whose target field holds its name (forward
/// references, indexed like ids). Those of other tenants wake too and find no workload of
/// that name in their own tenant.
async fn wake_forward_references(ctx: &ReconcileCtx, queue: &Queue, workload_id: &str) {
    let name = match ctx.store.get(workload_id).await {
        Ok(Some(w)) => w.name.unwrap_or_default(),
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(id = %workload_id, error = %e, "cannot read workload");
            return;
        }
    };
    if name.is_empty() {
        return;
    }
    match ctx.store.referrers(&name).await {
        Ok(refs) => {
            for r in refs {
                if r.source_kind == Kind::ExternalIpAttachment {
                    queue.add(&r.source, Some(r.source_kind));
                }
            }
        }
        Err(e) => tracing::warn!(name = %name, error = %e, "cannot list referrers"),
    }
}

/// A FREE host (new, or released by a workload) wakes the workloads of its HostType: those
/// waiting for inventory reserve it (nothing references a host before it is reserved).
async fn wake_inventory_waiters(ctx: &ReconcileCtx, queue: &Queue, host_id: &str) {
    let host = match ctx.store.get(host_id).await {
        Ok(Some(h)) if h.deleted_at.is_none() => h,
        Ok(_) => return,
        Err(e) => {
            tracing::warn!(id = %host_id, error = %e, "cannot read host");
            return;
        }
    };
    let free = osac_model::refs::string_at(&host.body, "status.state") == Some("HOST_STATE_FREE");
    let Some(host_type) = osac_model::refs::string_at(&host.body, "spec.host_type") else {
        return;
    };
    if !free || host_type.is_empty() {
        return;
    }
    match ctx.store.referrers(host_type).await {
        Ok(refs) => {
            for r in refs {
                if matches!(r.source_kind, Kind::BareMetalInstance | Kind::Cluster) {
                    queue.add(&r.source, Some(r.source_kind));
                }
            }
        }
        Err(e) => tracing::warn!(id = %host_type, error = %e, "cannot list referrers"),
    }
}

async fn worker(
    ctx: Arc<ReconcileCtx>,
    queue: Arc<Queue>,
    ownership: Ownership,
    mut shutdown: watch::Receiver<bool>,
) {
    while let Some(id) = queue.next(&mut shutdown).await {
        let start = Instant::now();
        let run = track_own_writes(id.clone(), run_one(ctx.clone(), queue.clone(), id.clone()));
        // A panicking reconcile must not take the worker (or the queue's running mark) with it.
        let task = match ownership.claim(&id) {
            // Another replica's object: it reconciles it (the feed woke us too).
            Claim::NotMine => {
                queue.done(&id, Schedule::Done, None);
                continue;
            }
            Claim::Alone => tokio::spawn(run),
            Claim::Leased(fence) => tokio::spawn(osac_backends::fence::scope(fence, run)),
        };
        let (kind, result, seen) = match task.await {
            Ok(((kind, result, read), written)) => (kind, result, read.max(written)),
            Err(e) => (
                None,
                Err(ReconcileError::Panicked(format!("{id}: {e}"))),
                None,
            ),
        };
        let label = kind.map_or("unknown", Kind::collection);
        let (outcome, schedule) = match &result {
            Ok(Action::Done) => ("ok", Schedule::Done),
            Ok(Action::Again) => ("requeue", Schedule::After(Duration::ZERO)),
            Ok(Action::After(d)) => ("requeue", Schedule::After(*d)),
            Ok(Action::Retry) => ("retry", Schedule::Backoff),
            Err(e) if e.is_conflict() => {
                tracing::debug!(%id, kind = label, "conflict; requeueing");
                ("conflict", Schedule::Backoff)
            }
            // The shard moved to another replica mid-way; it carries on there.
            Err(ReconcileError::Store(osac_store::StoreError::Fenced(_))) => {
                tracing::info!(%id, kind = label, "lease lost mid-reconcile; write refused");
                ("fenced", Schedule::Done)
            }
            Err(e) => {
                tracing::warn!(%id, kind = label, error = %e, "reconcile failed");
                ("error", Schedule::Backoff)
            }
        };
        metrics::reconcile_done(label, outcome, start.elapsed());
        queue.done(&id, schedule, seen);
    }
}

/// Reads the object and runs its reconciler; a gone object needs nothing. Returns the kind, the
/// outcome and the version read.
async fn run_one(
    ctx: Arc<ReconcileCtx>,
    queue: Arc<Queue>,
    id: String,
) -> (Option<Kind>, Result<Action, ReconcileError>, Option<i64>) {
    let rec = match ctx.store.get(&id).await {
        Ok(Some(rec)) => rec,
        Ok(None) => {
            queue.forget(&id);
            return (None, Ok(Action::Done), None);
        }
        Err(e) => return (None, Err(e.into()), None),
    };
    let kind = rec.kind;
    let version = rec.version;
    queue.learn(&id, kind);
    tracing::trace!(%id, %kind, version, "reconciling");
    (
        Some(kind),
        reconcile::reconcile(&ctx, rec).await,
        Some(version),
    )
}
