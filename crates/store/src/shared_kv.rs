//! Driver records that several replicas write: each write batch runs under the namespace's
//! cross-process lock, after catching up on what other replicas wrote since the generation the
//! writer last saw, and is journalled under the next generation.

use async_trait::async_trait;

use crate::Result;

/// What other replicas wrote since the generation a writer last saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missed {
    /// The records they put (`Some`) or removed (`None`), in order.
    Changes(Vec<(String, Option<String>)>),
    /// The journal no longer reaches back that far: the whole namespace as it is now.
    Everything(Vec<(String, String)>),
}

/// One locked write batch of a shared namespace (see [`crate::Store::kv_exclusive`]). Dropping
/// it without `commit` rolls back and releases the lock.
#[async_trait]
pub trait KvBatch: Send {
    /// The namespace's generation while the lock is held.
    fn generation(&self) -> i64;
    /// What other writers changed since the generation given to `kv_exclusive`.
    fn take_missed(&mut self) -> Missed;
    /// Whether `replica` still holds shard `shard` with fencing token `token` — checked inside
    /// this batch's transaction and kept locked until it ends, so a batch made for a reconcile
    /// whose lease was lost writes nothing.
    async fn fence_holds(&mut self, shard: i32, replica: &str, token: i64) -> Result<bool>;
    /// Writes `changes` (journalled under the next generation) and releases the lock; returns
    /// the namespace's generation afterwards (unchanged when `changes` is empty).
    async fn commit(self: Box<Self>, changes: &[(String, Option<String>)]) -> Result<i64>;
}
