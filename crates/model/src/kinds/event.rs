//! Event: a read-only record of something that happened to another object (server-written,
//! expires after a TTL); no state, no controller.

use crate::Scope;
use crate::kinds::KindSpec;

/// The facts about Events. An event names its object by id without referencing it: no
/// deletion protection, no wake-ups, and the object may be gone. Events are never updated (the
/// API refuses every change), so no field is immutable.
pub const SPEC: KindSpec = KindSpec {
    aliases: &["ev"],
    reconciled: false,
    ..KindSpec::new("Event", "events", "event", "events", Scope::Tenant)
};
