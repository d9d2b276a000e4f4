//! The fabric finalizer ([`FABRIC_FINALIZER`]): how a reconciler keeps an object until what it
//! programmed in managers and provisioners is undone. Every reconciler of a kind that holds
//! such state runs through [`reconcile`], which turns the stored record into one [`Event`] and
//! runs the matching branch.
//!
//! # The contract
//!
//! - **When the finalizer is added.** By the API, in the same write that creates an object of
//!   a kind with fabric state ([`osac_model::Kind::needs_fabric_finalizer`]): no apply can run
//!   before it is there, so nothing is ever programmed for an object that could vanish
//!   without an undo. The controller never adds it. An object stored without it (a kind with
//!   no fabric state, or a row written straight to the store) is applied like any other and,
//!   once deleted, simply goes: nothing of ours is recorded against it.
//! - **Which branch runs.** Decided on every reconcile from the stored record alone
//!   ([`Event::of`]): not deleted ⇒ [`Event::Apply`]; deleted and holding the finalizer ⇒
//!   [`Event::Cleanup`]; deleted without it ⇒ [`Event::Released`], and nothing runs (our part
//!   is done; another finalizer still keeps the row).
//! - **When it is removed.** Only after the cleanup reports that everything is undone
//!   ([`Cleanup::Done`]): [`reconcile`] drops it from the record the cleanup last wrote, and
//!   the store removes the row in that same write when no finalizer is left (with the
//!   `Deleted` event). A cleanup that must give something back in the transaction that
//!   removes the row (an ExternalIP's pool capacity, a workload's hosts) drops it itself with
//!   [`release_in`] and reports [`Cleanup::Released`].
//! - **When the undo fails.** The finalizer stays, so the row, and with it the record of what
//!   to undo, survives. [`undone`] (objects) and the workloads' `Work::delete_failed` show the
//!   failure: transient ⇒ `*_DELETING` with the message and [`Action::Retry`] (the runtime's
//!   per-object exponential backoff); permanent ⇒ `*_DELETE_FAILED` where the kind has that
//!   state (else `*_DELETING`) and a slow retry every `backoff_cap`, in case an operator fixed
//!   the cause. [`undone`] also counts the failure in [`DELETE_FAILURES_ANNOTATION`]: the
//!   cleanup of a deleted workload gives up on an auto-provisioned object after
//!   `cleanup_retry_limit` of them and labels it orphaned.
//! - **Retries.** Nothing retries inside a reconcile. A cleanup that has to wait for other
//!   objects (a tenant's teardown waits for what the tenant owns) reports [`Cleanup::NotYet`]
//!   with when to look again; the finalizer stays. A finalizer write that loses an
//!   optimistic-locking race fails the reconcile with a conflict: the object is requeued and
//!   the cleanup runs again.
//! - **Idempotency.** Apply and cleanup may run any number of times for the same stored
//!   state: after a crash between a manager call and the finalizer removal, after a conflict,
//!   after an apply that stopped half-way or never ran at all. Managers treat undoing what is
//!   not there as success, so a repeated cleanup converges.
//! - **The cleanup finalizer comes first.** A deleted workload that still holds
//!   [`osac_model::defaults::CLEANUP_FINALIZER`] has its auto-provisioned ExternalIPs and
//!   attachments removed first (see `cleanup`); its own [`Event::Cleanup`] runs only once that
//!   finalizer is gone.

use std::future::Future;

use osac_backends::OpError;
use osac_model::FABRIC_FINALIZER;
use osac_store::{Record, StoreError, Tx};

use super::{Action, Object, ReconcileCtx, ReconcileError, save, write};

pub use osac_model::annotations::DELETE_FAILURES_ANNOTATION;

/// What a reconcile of an object must do, from its deletion mark and finalizers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// The object is live: make managers match its spec.
    Apply,
    /// The object is deleted and holds our finalizer: undo what was programmed for it.
    Cleanup,
    /// The object is deleted and our finalizer is gone (or was never there): nothing to do.
    Released,
}

impl Event {
    /// The event of a stored record.
    pub(crate) fn of(rec: &Record) -> Event {
        match (rec.deleted_at.is_some(), holds(rec)) {
            (false, _) => Event::Apply,
            (true, true) => Event::Cleanup,
            (true, false) => Event::Released,
        }
    }
}

/// How far one cleanup pass got.
#[derive(Debug)]
pub(crate) enum Cleanup {
    /// Everything is undone: drop the finalizer from this record (the latest the cleanup
    /// wrote, so the write does not conflict with the cleanup's own).
    Done(Box<Record>),
    /// Everything is undone and the cleanup dropped the finalizer itself ([`release_in`]).
    Released,
    /// Not undone yet (a step failed and is shown on the object, or the cleanup waits for
    /// other objects): the finalizer stays and the runtime looks again per the action.
    NotYet(Action),
}

impl Cleanup {
    /// [`Cleanup::Done`] with the record to drop the finalizer from.
    pub(crate) fn done(latest: Record) -> Self {
        Cleanup::Done(Box::new(latest))
    }
}

/// Runs `apply` or `cleanup` for `rec` according to its [`Event`], and drops the finalizer
/// once the cleanup reports [`Cleanup::Done`]. See the module documentation for the contract.
pub(crate) async fn reconcile<A, AF, C, CF>(
    ctx: &ReconcileCtx,
    rec: Record,
    apply: A,
    cleanup: C,
) -> Result<Action, ReconcileError>
where
    A: FnOnce(Record) -> AF,
    AF: Future<Output = Result<Action, ReconcileError>>,
    C: FnOnce(Record) -> CF,
    CF: Future<Output = Result<Cleanup, ReconcileError>>,
{
    match Event::of(&rec) {
        Event::Apply => apply(rec).await,
        Event::Released => Ok(Action::Done),
        Event::Cleanup => match cleanup(rec).await? {
            Cleanup::Done(latest) => {
                release(ctx, &latest).await?;
                Ok(Action::Done)
            }
            Cleanup::Released => Ok(Action::Done),
            Cleanup::NotYet(action) => Ok(action),
        },
    }
}

/// The cleanup outcome of an undo made of manager calls: done, or the failure shown on `obj`
/// ([`undo_failed`]) with the retry it implies.
pub(crate) async fn undone<T: Object>(
    ctx: &ReconcileCtx,
    rec: Record,
    obj: T,
    undo: Result<(), OpError>,
) -> Result<Cleanup, ReconcileError> {
    match undo {
        Ok(()) => Ok(Cleanup::done(rec)),
        Err(e) => Ok(Cleanup::NotYet(undo_failed(ctx, &rec, obj, e).await?)),
    }
}

/// An undo step failed. Transient: DELETING with the message, retry with backoff. Permanent:
/// DELETE_FAILED (where the kind has it) with the message, retried every `backoff_cap` in case
/// an operator fixed the cause. Either way the failure is counted in
/// [`DELETE_FAILURES_ANNOTATION`].
pub(crate) async fn undo_failed<T: Object>(
    ctx: &ReconcileCtx,
    rec: &Record,
    mut obj: T,
    err: OpError,
) -> Result<Action, ReconcileError> {
    let (state, action) = undo_failure_outcome::<T>(ctx, &err);
    let message = super::backend::status_message(ctx, rec, obj.message(), &err).await;
    obj.set_state(state);
    obj.set_message(message);
    let mut next = rec.clone();
    next.annotations.insert(
        DELETE_FAILURES_ANNOTATION.to_string(),
        (delete_failures(rec) + 1).to_string(),
    );
    save(ctx, rec, next, &obj).await?;
    Ok(action)
}

/// The state an undo failure shows and when the cleanup runs again: transient ⇒ DELETING,
/// with backoff; permanent ⇒ DELETE_FAILED (where the kind has it), every `backoff_cap`.
pub(crate) fn undo_failure_outcome<T: Object>(ctx: &ReconcileCtx, err: &OpError) -> (i32, Action) {
    if err.is_transient() {
        (T::DELETING, Action::Retry)
    } else {
        (
            T::DELETE_FAILED.unwrap_or(T::DELETING),
            Action::After(ctx.config.backoff_cap),
        )
    }
}

/// Failed undo attempts recorded on `rec`.
pub(crate) fn delete_failures(rec: &Record) -> u32 {
    rec.annotations
        .get(DELETE_FAILURES_ANNOTATION)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Whether the record holds our finalizer.
pub(crate) fn holds(rec: &Record) -> bool {
    rec.finalizers.iter().any(|f| f == FABRIC_FINALIZER)
}

/// `rec` without our finalizer.
fn without(rec: &Record) -> Record {
    let mut next = rec.clone();
    next.finalizers.retain(|f| f != FABRIC_FINALIZER);
    next
}

/// Drops our finalizer from `rec` in a write of its own; the store removes the row when no
/// finalizer is left.
async fn release(ctx: &ReconcileCtx, rec: &Record) -> Result<(), ReconcileError> {
    write(ctx, rec, without(rec)).await?;
    Ok(())
}

/// Drops our finalizer from `rec` inside `tx` (with the event the write implies). Returns
/// whether the write removes the row (no finalizer left); false when there was nothing to drop.
pub(crate) async fn release_in(tx: &mut dyn Tx, rec: &Record) -> Result<bool, StoreError> {
    let next = without(rec);
    if next == *rec {
        return Ok(false);
    }
    Ok(osac_store::events::update(tx, rec, &next).await?.is_none())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use osac_backends::Registry;
    use osac_model::{Kind, pb};
    use osac_store::{SqliteStore, Store};
    use serde_json::json;

    use super::*;
    use crate::dispatch::Dispatcher;
    use crate::reconcile::external_ip_attachment::NoWorkloads;
    use crate::reconcile::tenant::{NotConfigured, TenantWatch};
    use crate::runtime::{ControllerConfig, DEFAULT_IP_DISCOVERY_TIMEOUT};

    async fn ctx() -> ReconcileCtx {
        let store: Arc<dyn Store> = Arc::new(
            SqliteStore::connect("sqlite::memory:")
                .await
                .expect("in-memory store"),
        );
        ReconcileCtx {
            store,
            dispatcher: Dispatcher::new(Arc::new(Registry::new())),
            config: ControllerConfig::default(),
            targets: Arc::new(NoWorkloads),
            default_networking: Arc::new(NotConfigured),
            tenant_watch: TenantWatch::default(),
            provisioner: None,
            ip_discovery_timeout: DEFAULT_IP_DISCOVERY_TIMEOUT,
        }
    }

    /// A stored subnet, deleted or not, holding `finalizers`.
    async fn subnet(ctx: &ReconcileCtx, deleted: bool, finalizers: &[&str]) -> Record {
        let mut rec = Record::new(
            Kind::Subnet,
            "t1",
            json!({"spec": {}, "status": {"state": "SUBNET_STATE_READY"}}),
        );
        rec.name = Some("s".into());
        rec.finalizers = finalizers.iter().map(|f| f.to_string()).collect();
        let mut tx = ctx.store.begin().await.expect("begin");
        let mut rec = tx.insert(&rec).await.expect("insert");
        if deleted {
            rec.deleted_at = Some(chrono::Utc::now());
            rec = tx.update(&rec).await.expect("update").expect("kept");
        }
        tx.commit().await.expect("commit");
        rec
    }

    async fn stored(ctx: &ReconcileCtx, id: &str) -> Option<Record> {
        ctx.store.get(id).await.expect("get")
    }

    /// Whether the stored row is still `rec` as written (same version and finalizers); None
    /// when it is gone.
    async fn unchanged(ctx: &ReconcileCtx, rec: &Record) -> Option<bool> {
        let now = stored(ctx, &rec.id).await?;
        Some(now.version == rec.version && now.finalizers == rec.finalizers)
    }

    /// Runs [`reconcile`] with an apply and a cleanup that note they ran; the cleanup undoes
    /// with `undo`.
    async fn run(
        ctx: &ReconcileCtx,
        rec: Record,
        undo: Result<(), OpError>,
    ) -> (Action, bool, bool) {
        let (applied, cleaned) = (AtomicBool::new(false), AtomicBool::new(false));
        let action = reconcile(
            ctx,
            rec,
            |_| async {
                applied.store(true, Ordering::SeqCst);
                Ok(Action::Done)
            },
            |rec| async {
                cleaned.store(true, Ordering::SeqCst);
                let obj: pb::Subnet = rec.decode()?;
                undone(ctx, rec, obj, undo).await
            },
        )
        .await
        .expect("reconcile");
        (action, applied.into_inner(), cleaned.into_inner())
    }

    #[test]
    fn events_follow_the_deletion_mark_and_the_finalizer() {
        let mut rec = Record::new(Kind::Subnet, "t1", json!({}));
        assert_eq!(Event::of(&rec), Event::Apply);
        rec.finalizers = vec![FABRIC_FINALIZER.to_string()];
        assert_eq!(Event::of(&rec), Event::Apply);
        rec.deleted_at = Some(chrono::Utc::now());
        assert_eq!(Event::of(&rec), Event::Cleanup);
        rec.finalizers = vec!["someone/else".to_string()];
        assert_eq!(Event::of(&rec), Event::Released);
    }

    #[tokio::test]
    async fn a_live_object_is_applied_and_keeps_its_finalizer() {
        let ctx = ctx().await;
        let rec = subnet(&ctx, false, &[FABRIC_FINALIZER]).await;
        let (action, applied, cleaned) = run(&ctx, rec.clone(), Ok(())).await;
        assert_eq!(action, Action::Done);
        assert!(applied && !cleaned);
        assert_eq!(unchanged(&ctx, &rec).await, Some(true));
    }

    #[tokio::test]
    async fn a_successful_cleanup_drops_the_finalizer_and_the_row_goes() {
        let ctx = ctx().await;
        let rec = subnet(&ctx, true, &[FABRIC_FINALIZER]).await;
        let (action, applied, cleaned) = run(&ctx, rec.clone(), Ok(())).await;
        assert_eq!(action, Action::Done);
        assert!(!applied && cleaned);
        assert_eq!(stored(&ctx, &rec.id).await, None);
    }

    #[tokio::test]
    async fn other_finalizers_keep_the_row_after_the_cleanup() {
        let ctx = ctx().await;
        let rec = subnet(&ctx, true, &[FABRIC_FINALIZER, "someone/else"]).await;
        run(&ctx, rec.clone(), Ok(())).await;
        let left = stored(&ctx, &rec.id).await.expect("row kept");
        assert_eq!(left.finalizers, vec!["someone/else".to_string()]);
        // Our part is done: the next pass runs nothing.
        let (action, applied, cleaned) = run(&ctx, left.clone(), Ok(())).await;
        assert_eq!((action, applied, cleaned), (Action::Done, false, false));
        assert_eq!(stored(&ctx, &rec.id).await, Some(left));
    }

    #[tokio::test]
    async fn a_transient_undo_failure_keeps_the_finalizer_and_backs_off() {
        let ctx = ctx().await;
        let rec = subnet(&ctx, true, &[FABRIC_FINALIZER]).await;
        let failed = Err(OpError::transient("fabric unreachable"));
        let (action, _, cleaned) = run(&ctx, rec.clone(), failed).await;
        assert!(cleaned);
        assert_eq!(action, Action::Retry);
        let left = stored(&ctx, &rec.id).await.expect("row kept");
        assert!(holds(&left));
        assert_eq!(left.body["status"]["state"], "SUBNET_STATE_DELETING");
        assert_eq!(left.body["status"]["message"], "fabric unreachable");
        assert_eq!(delete_failures(&left), 1);
        // The retry succeeds: the row goes.
        run(&ctx, left, Ok(())).await;
        assert_eq!(stored(&ctx, &rec.id).await, None);
    }

    #[tokio::test]
    async fn a_permanent_undo_failure_is_delete_failed_and_retried_slowly() {
        let ctx = ctx().await;
        let rec = subnet(&ctx, true, &[FABRIC_FINALIZER]).await;
        let failed = Err(OpError::permanent("segment in use"));
        let (action, _, _) = run(&ctx, rec.clone(), failed).await;
        assert_eq!(action, Action::After(ctx.config.backoff_cap));
        let left = stored(&ctx, &rec.id).await.expect("row kept");
        assert!(holds(&left));
        assert_eq!(left.body["status"]["state"], "SUBNET_STATE_DELETE_FAILED");
        let again = Err(OpError::permanent("segment in use"));
        run(&ctx, left, again).await;
        let left = stored(&ctx, &rec.id).await.expect("row kept");
        assert_eq!(delete_failures(&left), 2);
    }

    #[tokio::test]
    async fn a_cleanup_that_is_not_finished_keeps_the_finalizer() {
        let ctx = ctx().await;
        let rec = subnet(&ctx, true, &[FABRIC_FINALIZER]).await;
        let wait = Action::After(Duration::from_millis(500));
        let action = reconcile(
            &ctx,
            rec.clone(),
            |_| async { Ok(Action::Done) },
            |_| async move { Ok(Cleanup::NotYet(wait)) },
        )
        .await
        .expect("reconcile");
        assert_eq!(action, wait);
        assert_eq!(unchanged(&ctx, &rec).await, Some(true));
    }

    #[tokio::test]
    async fn release_in_reports_the_row_removal() {
        let ctx = ctx().await;
        let rec = subnet(&ctx, true, &[FABRIC_FINALIZER]).await;
        let mut tx = ctx.store.begin().await.expect("begin");
        assert!(release_in(&mut *tx, &rec).await.expect("release"));
        tx.commit().await.expect("commit");
        assert_eq!(stored(&ctx, &rec.id).await, None);
        let bare = subnet(&ctx, true, &["someone/else"]).await;
        let mut tx = ctx.store.begin().await.expect("begin");
        assert!(!release_in(&mut *tx, &bare).await.expect("nothing to drop"));
    }
}
