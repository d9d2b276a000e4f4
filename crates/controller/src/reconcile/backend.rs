//! Tenant-safe status messages of manager failures.
//!
//! A manager failure that carries backend detail ([`OpError::Backend`]: an exec program's
//! stderr, a kernel tool's command line, an I/O error with a path) never reaches a tenant. The
//! object's `status.message` (and a workload's condition) says instead, e.g.
//! "the network backend could not create the subnet; the provider has been notified
//! (reference 1a2b3c4d)", and the detail goes to the server log and to a provider-only WARNING
//! event (reason `BackendFailure`, stored without a tenant, so tenants' event lists and watches
//! never show it) carrying the same reference. The reference is derived from the object and
//! the detail: the same failure repeated keeps its message (no rewrite, no new event).
//!
//! Messages our own code writes for the object's owner ([`OpError::Transient`] and
//! [`OpError::Permanent`]) are shown as they are.

use osac_backends::{OpError, Operation};
use osac_store::Record;

use super::ReconcileCtx;
use osac_store::events;

/// Reason of the provider-only event that carries a backend failure's detail.
pub const REASON_BACKEND_FAILURE: &str = "BackendFailure";

/// The message a tenant may read for `err` about `rec`. For backend detail, the first time
/// this message replaces `current` (the object's message now), the detail is logged and
/// recorded in a provider-only event.
pub(crate) async fn status_message(
    ctx: &ReconcileCtx,
    rec: &Record,
    current: &str,
    err: &OpError,
) -> String {
    let OpError::Backend(failure) = err else {
        return err.message().to_string();
    };
    let reference = reference(&rec.id, &failure.detail);
    let message = plain_message(failure.operation.as_deref(), &reference);
    if current != message {
        let operation = failure.operation.as_deref().unwrap_or("");
        tracing::warn!(
            kind = %rec.kind,
            id = %rec.id,
            tenant = %rec.tenant,
            %reference,
            operation,
            transient = failure.transient,
            detail = %failure.detail,
            "backend failure (tenant sees reference {reference})"
        );
        let mut ev = events::for_record(
            rec,
            true,
            REASON_BACKEND_FAILURE,
            provider_detail(rec, operation, &reference, &failure.detail),
        );
        ev.tenant = String::new();
        events::record_now(ctx.store.as_ref(), ev).await;
    }
    message
}

/// What the tenant reads instead of backend detail.
pub(crate) fn plain_message(operation: Option<&str>, reference: &str) -> String {
    let (backend, what) = match operation {
        Some(op) => {
            let backend = if op.parse::<Operation>().is_ok() {
                "the network backend"
            } else {
                "the provisioning backend"
            };
            let what = match op.split_once('_') {
                Some((verb, object)) => {
                    format!("could not {verb} the {}", object.replace('_', " "))
                }
                None => format!("could not {op}"),
            };
            (backend, what)
        }
        None => ("the backend", "failed".to_string()),
    };
    format!("{backend} {what}; the provider has been notified (reference {reference})")
}

/// The provider-only event message: the detail with what it is about.
fn provider_detail(rec: &Record, operation: &str, reference: &str, detail: &str) -> String {
    let tenant = if rec.tenant.is_empty() {
        String::new()
    } else {
        format!(" of tenant '{}'", rec.tenant)
    };
    let op = if operation.is_empty() {
        String::new()
    } else {
        format!(" {operation}")
    };
    format!(
        "reference {reference}: {} '{}'{tenant}:{op} failed: {detail}",
        rec.kind,
        rec.label()
    )
}

/// A short stable reference of one failure of one object (FNV-1a, 8 hex digits).
fn reference(id: &str, detail: &str) -> String {
    let h = super::fnv1a(id.bytes().chain([0u8]).chain(detail.bytes()));
    format!("{:08x}", (h >> 32) as u32 ^ (h as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_messages_name_the_step_not_the_detail() {
        assert_eq!(
            plain_message(Some("create_subnet"), "0badcafe"),
            "the network backend could not create the subnet; the provider has been notified (reference 0badcafe)"
        );
        assert_eq!(
            plain_message(Some("boot_vm"), "1"),
            "the provisioning backend could not boot the vm; the provider has been notified (reference 1)"
        );
        assert!(plain_message(None, "2").starts_with("the backend failed;"));
        assert_eq!(reference("a", "x"), reference("a", "x"));
        assert_ne!(reference("a", "x"), reference("a", "y"));
        assert_eq!(reference("a", "x").len(), 8);
    }
}
