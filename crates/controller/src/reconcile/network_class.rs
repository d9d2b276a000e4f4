//! NetworkClass: nothing to program (capabilities are computed by the API at creation), so it
//! is READY as soon as the controller sees it.

use osac_model::pb;
use osac_store::Record;

use super::{Action, Object, ReconcileCtx, ReconcileError, decode, finalize, has_finalizer, save};

// A NetworkClass has no DELETING state; deletion only drops a finalizer, so PENDING stands in.
super::object!(pb::NetworkClass, pb::NetworkClassStatus,
    pending: pb::NetworkClassState::Pending, ready: pb::NetworkClassState::Ready,
    failed: pb::NetworkClassState::Failed, deleting: pb::NetworkClassState::Pending,
    delete_failed: None);

pub(crate) async fn reconcile(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    if rec.deleted_at.is_some() {
        return if has_finalizer(&rec) {
            finalize(ctx, &rec).await
        } else {
            Ok(Action::Done)
        };
    }
    let mut class: pb::NetworkClass = decode(&rec)?;
    if class.state() != pb::NetworkClass::READY || !class.message().is_empty() {
        class.set_state(pb::NetworkClass::READY);
        class.set_message(String::new());
        save(ctx, &rec, rec.clone(), &class).await?;
    }
    Ok(Action::Done)
}
