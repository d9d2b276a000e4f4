//! Event: read-only records written by the server (state transitions, onboarding, cleanup,
//! refused requests). Clients list and get them; every write is refused.

use osac_store::Record;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};

fn read_only(verb: &str) -> ApiError {
    ApiError::denied(format!(
        "events are recorded by the server and cannot be {verb}"
    ))
}

/// Refuses creation (PERMISSION_DENIED): only the server records events.
pub fn create() -> ApiResult<Value> {
    Err(read_only("created"))
}

/// Refuses updates (PERMISSION_DENIED): events are immutable.
pub fn update() -> ApiResult<()> {
    Err(read_only("updated"))
}

/// Refuses deletion (PERMISSION_DENIED): events expire after the server's TTL.
pub fn check_delete(_rec: &Record) -> ApiResult<()> {
    Err(read_only(
        "deleted; they expire after the server's event TTL",
    ))
}
