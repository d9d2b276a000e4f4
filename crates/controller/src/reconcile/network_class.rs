//! NetworkClass: nothing to program (capabilities are computed by the API at creation), so it
//! is READY as soon as the controller sees it.

use osac_model::pb;
use osac_store::Record;

use super::finalizer::{self, Cleanup};
use super::{Action, Object, ReconcileCtx, ReconcileError, decode, save};

// A NetworkClass has no DELETING state; deletion only drops a finalizer, so PENDING stands in.
super::object!(pb::NetworkClass, pb::NetworkClassStatus,
    pending: pb::NetworkClassState::Pending, ready: pb::NetworkClassState::Ready,
    failed: pb::NetworkClassState::Failed, deleting: pb::NetworkClassState::Pending,
    delete_failed: None);

pub(crate) async fn reconcile(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    finalizer::reconcile(
        ctx,
        rec,
        |rec| apply(ctx, rec),
        // Nothing is programmed for a class.
        |rec| async { Ok(Cleanup::done(rec)) },
    )
    .await
}

async fn apply(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    let mut class: pb::NetworkClass = decode(&rec)?;
    if class.state() != pb::NetworkClass::READY || !class.message().is_empty() {
        class.set_state(pb::NetworkClass::READY);
        class.set_message(String::new());
        save(ctx, &rec, rec.clone(), &class).await?;
    }
    Ok(Action::Done)
}
