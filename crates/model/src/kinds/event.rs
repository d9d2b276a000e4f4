//! Event: a read-only record of something that happened to another object (server-written,
//! expires after a TTL); no state, no controller.

use crate::Scope;
use crate::kinds::KindSpec;

/// The facts about Events. An event names its object by id without referencing it: no
/// deletion protection, no wake-ups, and the object may be gone. Events are never updated (the
/// API refuses every change), so no field is immutable.
pub const SPEC: KindSpec = KindSpec {
    display_name: "Event",
    collection: "events",
    singular: "event",
    plural: "events",
    aliases: &["ev"],
    scope: Scope::Tenant,
    state_prefix: None,
    initial_state: "PENDING",
    immutable_fields: &[],
    set_once_fields: &[],
    references: &[],
    tenant_user_may_write: false,
    needs_fabric_finalizer: false,
    reconciled: false,
};
