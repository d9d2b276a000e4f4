//! The shard lease a controller task acts under, so that what it asks of a manager can be
//! refused once another replica has taken the shard over.
//!
//! The controller runs each reconcile inside [`scope`]; callers of managers check
//! [`current`] (its local view: the lease's deadline on this machine's monotonic clock), and a
//! manager whose state lives in the shared database (the sim drivers) checks the fencing token
//! against the lease table inside the transaction that writes its state. Outside a scope (one
//! process owns everything, or code that is not a reconcile) nothing is fenced.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use crate::contract::OpError;

/// A held shard lease: the shard, the replica and the fencing token it was acquired with.
#[derive(Clone)]
pub struct Fence {
    /// The controller shard.
    pub shard: i32,
    /// The replica holding it.
    pub replica: String,
    /// The fencing token it was acquired with.
    pub token: i64,
    held: Arc<dyn Fn(i32, i64) -> bool + Send + Sync>,
}

impl fmt::Debug for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fence")
            .field("shard", &self.shard)
            .field("replica", &self.replica)
            .field("token", &self.token)
            .finish()
    }
}

impl Fence {
    /// A fence whose local validity is answered by `held(shard, token)`.
    pub fn new(
        shard: i32,
        replica: String,
        token: i64,
        held: Arc<dyn Fn(i32, i64) -> bool + Send + Sync>,
    ) -> Self {
        Fence {
            shard,
            replica,
            token,
            held,
        }
    }

    /// Whether this replica still holds the lease with this token, by its own clock (the
    /// deadline it keeps is shorter than the lease in the database).
    pub fn holds_locally(&self) -> bool {
        (self.held)(self.shard, self.token)
    }

    /// The error that replaces an operation refused for a lost lease (transient: the new
    /// owner retries it).
    pub fn lost(&self) -> OpError {
        OpError::transient(format!(
            "this replica no longer holds the lease of shard {}",
            self.shard
        ))
    }
}

tokio::task_local! {
    static CURRENT: Fence;
}

/// The fence of the running task, if it runs inside [`scope`].
pub fn current() -> Option<Fence> {
    CURRENT.try_with(Clone::clone).ok()
}

/// Runs `f` under `fence`.
pub async fn scope<F: Future>(fence: Fence, f: F) -> F::Output {
    CURRENT.scope(fence, f).await
}

/// Fails with the fence's error when the running task's lease is no longer held locally.
pub fn check() -> Result<(), OpError> {
    match current() {
        Some(f) if !f.holds_locally() => Err(f.lost()),
        _ => Ok(()),
    }
}
