//! Ordered cleanup of a deleted workload's auto-provisioned resources (the ExternalIPs and
//! attachments the API created with it, labelled auto-provisioned for it). While the
//! workload holds the cleanup finalizer, each pass looks at what is left and takes the next
//! step: delete the auto-provisioned attachments and wait until they are gone (DNAT removed),
//! then delete the auto-provisioned ExternalIPs and wait until they are gone (address and pool
//! capacity released), then drop the finalizer so the workload's own deprovisioning runs.
//! Manual ExternalIPs and attachments, and the tenant's defaults, are never touched.
//!
//! A step whose object keeps failing its undo (counted on the object by
//! [`super::finalizer::DELETE_FAILURES_ANNOTATION`]) is given up after `cleanup_retry_limit` failures:
//! what is left is labelled `osac.openshift.io/orphaned: "true"` (listed by
//! `osac admin orphans`) and the workload is let go. Idempotent; reads only the store.

use chrono::Utc;
use osac_model::defaults::{AUTO_PROVISIONED_FOR_LABEL, CLEANUP_FINALIZER, ORPHANED_LABEL};
use osac_model::{Kind, defaults};
use osac_store::{ListQuery, Record};
use serde_json::{Value, json};

use super::finalizer::delete_failures;
use super::{Action, ReconcileCtx, ReconcileError, describe, write};
use osac_store::events;

/// Whether a deleted workload still has its cleanup to do.
pub(crate) fn pending(rec: &Record) -> bool {
    rec.deleted_at.is_some() && rec.finalizers.iter().any(|f| f == CLEANUP_FINALIZER)
}

/// The auto-provisioned objects of `kind` created for `workload`, deleted or not.
async fn leftovers(
    ctx: &ReconcileCtx,
    workload: &Record,
    kind: Kind,
) -> Result<Vec<Record>, ReconcileError> {
    let found = ctx
        .store
        .list_items(&ListQuery {
            tenant: Some(workload.tenant.clone()),
            filter: format!(
                "this.metadata.labels[{}] == {}",
                json!(AUTO_PROVISIONED_FOR_LABEL),
                json!(workload.id)
            ),
            limit: 100,
            ..ListQuery::all(kind)
        })
        .await?;
    Ok(found)
}

/// Marks an object deleted (DELETING); its own controller undoes it and removes the row.
pub(crate) fn mark_deleting(rec: &mut Record) {
    rec.deleted_at = Some(Utc::now());
    let state = rec
        .body
        .pointer("/status/state")
        .and_then(Value::as_str)
        .and_then(|s| {
            s.find("_STATE_")
                .map(|i| format!("{}_STATE_DELETING", &s[..i]))
        });
    if let (Some(state), Some(status)) = (
        state,
        rec.body.get_mut("status").and_then(Value::as_object_mut),
    ) {
        status.insert("state".into(), json!(state));
    }
}

/// Starts the deletion of a (locked, live) object inside `tx` on behalf of a controller, with
/// the `Deleting` event saying `why`; the object's own controller then undoes it.
pub(crate) async fn request_delete(
    tx: &mut dyn osac_store::Tx,
    mut current: Record,
    why: String,
) -> Result<(), ReconcileError> {
    mark_deleting(&mut current);
    tx.update(&current).await?;
    let event = events::for_record(&current, false, events::REASON_DELETING, why);
    events::record(tx, event).await?;
    Ok(())
}

/// Starts the deletion of every live object of `objs` (skipping ExternalIPs that something
/// other than this workload's auto attachments still consumes).
async fn delete_all(
    ctx: &ReconcileCtx,
    workload: &Record,
    objs: &[Record],
) -> Result<(), ReconcileError> {
    for obj in objs.iter().filter(|o| o.deleted_at.is_none()) {
        let mut tx = ctx.store.begin_shared().await?;
        let Some(current) = tx.lock(&obj.id).await? else {
            continue;
        };
        if current.deleted_at.is_some() {
            continue;
        }
        if current.kind == Kind::ExternalIp && consumed(&mut *tx, &current.id).await? {
            continue;
        }
        let why = format!("deleted by the cleanup of {}", describe(workload));
        request_delete(&mut *tx, current, why).await?;
        tx.commit().await?;
    }
    Ok(())
}

/// Whether a live NAT gateway or attachment consumes this ExternalIP.
async fn consumed(tx: &mut dyn osac_store::Tx, eip_id: &str) -> Result<bool, ReconcileError> {
    for r in tx.referrers(eip_id).await? {
        if matches!(r.source_kind, Kind::NatGateway | Kind::ExternalIpAttachment)
            && tx.get(&r.source).await?.is_some()
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// One pass of the cleanup of `rec` (a deleted workload holding the cleanup finalizer).
pub(crate) async fn reconcile(ctx: &ReconcileCtx, rec: &Record) -> Result<Action, ReconcileError> {
    let limit = ctx.config.cleanup_retry_limit;
    for (kind, step) in [
        (Kind::ExternalIpAttachment, "CleanupExternalIPAttachments"),
        (Kind::ExternalIp, "CleanupExternalIPs"),
    ] {
        let left = leftovers(ctx, rec, kind).await?;
        if left.is_empty() {
            continue;
        }
        let stuck: Vec<&Record> = left
            .iter()
            .filter(|o| delete_failures(o) >= limit)
            .collect();
        if !stuck.is_empty() {
            let what = stuck.iter().map(|o| describe(o)).collect::<Vec<_>>();
            return give_up(ctx, rec, &what.join(", ")).await;
        }
        let fresh = left.iter().any(|o| o.deleted_at.is_none());
        delete_all(ctx, rec, &left).await?;
        if fresh {
            let message = format!(
                "deleting {} auto-provisioned {} of {}",
                left.len(),
                kind.collection(),
                describe(rec)
            );
            events::record_now(&*ctx.store, events::for_record(rec, false, step, message)).await;
        }
        // Attachments wake their workload when they change or go; ExternalIPs do not
        // reference it, so their removal is polled.
        return Ok(if kind == Kind::ExternalIp {
            Action::After(ctx.config.backoff_base)
        } else {
            Action::Retry
        });
    }
    release(
        ctx,
        rec,
        "CleanupCompleted",
        "auto-provisioned resources removed".into(),
        false,
    )
    .await
}

/// Gives up after the retry limit: labels what is left orphaned and lets the workload go.
async fn give_up(ctx: &ReconcileCtx, rec: &Record, stuck: &str) -> Result<Action, ReconcileError> {
    let mut orphans = Vec::new();
    for kind in [Kind::ExternalIpAttachment, Kind::ExternalIp] {
        for obj in leftovers(ctx, rec, kind).await? {
            let mut tx = ctx.store.begin_shared().await?;
            if let Some(mut current) = tx.lock(&obj.id).await? {
                current
                    .labels
                    .insert(ORPHANED_LABEL.to_string(), "true".to_string());
                orphans.push(describe(&current));
                tx.update(&current).await?;
                tx.commit().await?;
            }
        }
    }
    let message = format!(
        "cleanup gave up after {} failed attempts on {stuck}; left orphaned (label {}): {}",
        ctx.config.cleanup_retry_limit,
        defaults::ORPHANED_LABEL,
        orphans.join(", ")
    );
    tracing::warn!(workload = %rec.id, %message, "cleanup gave up");
    release(ctx, rec, "CleanupOrphaned", message, true).await
}

/// Drops the cleanup finalizer; the workload's own deprovisioning follows in the next run
/// (`Action::Again`: the finalizer write does not wake the workload by itself).
async fn release(
    ctx: &ReconcileCtx,
    rec: &Record,
    reason: &str,
    message: String,
    warning: bool,
) -> Result<Action, ReconcileError> {
    let mut next = rec.clone();
    next.finalizers.retain(|f| f != CLEANUP_FINALIZER);
    write(ctx, rec, next).await?;
    events::record_now(
        &*ctx.store,
        events::for_record(rec, warning, reason, message),
    )
    .await;
    Ok(Action::Again)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mark_deleting_keeps_the_kind_prefix() {
        let mut rec = Record::new(
            Kind::ExternalIpAttachment,
            "t",
            json!({"spec": {}, "status": {"state": "EXTERNAL_IP_ATTACHMENT_STATE_READY"}}),
        );
        mark_deleting(&mut rec);
        assert!(rec.deleted_at.is_some());
        assert_eq!(
            rec.body["status"]["state"],
            "EXTERNAL_IP_ATTACHMENT_STATE_DELETING"
        );
    }
}
