//! Coordination of several replicas sharing one database: who is alive, which replica holds
//! the lease of each controller shard, and the fencing token that makes a write under a lost
//! lease fail. Only stores that several processes can share implement it (PostgreSQL); an
//! embedded SQLite store has exactly one process, which owns everything.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::Result;

/// Number of controller shards (the same in every replica of a deployment): objects fall into
/// shards by a hash of their id, and each shard has one lease.
pub const SHARDS: i32 = 64;

/// What a replica says about itself when it joins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaInfo {
    /// Unique per process start.
    pub id: String,
    /// Human name (`host:pid`).
    pub name: String,
    /// Where it serves the API.
    pub address: String,
    /// Whether it drives the local kernel's dataplane (the linux fabric).
    pub dataplane: bool,
}

/// A registered replica as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaRow {
    pub info: ReplicaInfo,
    pub started_at: DateTime<Utc>,
    /// Its registration lapses then unless renewed.
    pub expires_at: DateTime<Utc>,
    /// `expires_at` is in the future (by the database's clock).
    pub live: bool,
}

/// One shard's lease as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardLease {
    pub shard: i32,
    /// The replica holding it (None: released).
    pub owner: Option<String>,
    /// Fencing token: grows each time the shard changes hands.
    pub fence: i64,
    pub expires_at: DateTime<Utc>,
    /// Held and not expired (by the database's clock).
    pub live: bool,
}

/// A lease held: the shard and the fencing token it was acquired with.
pub type Held = (i32, i64);

/// Replica registration and shard leases. Times are the database's (`now()`), so replicas on
/// machines with skewed clocks still agree on who holds what.
#[async_trait]
pub trait Leases: Send + Sync {
    /// Registers `me` (serialised with every other join) and returns the OTHER live replicas,
    /// as seen at that moment, so the caller can refuse a configuration that must run alone.
    async fn join(&self, me: &ReplicaInfo, ttl: Duration) -> Result<Vec<ReplicaRow>>;
    /// Renews `me`'s registration and returns every live replica (`me` included).
    async fn heartbeat(&self, me: &ReplicaInfo, ttl: Duration) -> Result<Vec<ReplicaRow>>;
    /// Extends the leases `me` still holds among `shards` (an expired lease is not renewed: it
    /// must be acquired again, with a new fencing token). Returns what is held now.
    async fn renew(&self, me: &str, shards: &[i32], ttl: Duration) -> Result<Vec<Held>>;
    /// Takes those of `shards` that nobody holds (released or expired), each with the next
    /// fencing token. Returns what was taken.
    async fn acquire(&self, me: &str, shards: &[i32], ttl: Duration) -> Result<Vec<Held>>;
    /// Gives up `shards` at once (another replica may take them immediately).
    async fn release(&self, me: &str, shards: &[i32]) -> Result<()>;
    /// Releases everything `me` holds and marks it gone (graceful shutdown).
    async fn leave(&self, me: &str) -> Result<()>;
    /// Every registered replica, live or recently gone, oldest first.
    async fn replicas(&self) -> Result<Vec<ReplicaRow>>;
    /// Every shard lease, by shard.
    async fn shard_leases(&self) -> Result<Vec<ShardLease>>;
}
