//! The `sim` driver: an in-process, deterministic, unprivileged fabric and k8s manager that
//! keeps the tables a real backend would (segments, leases, NAT, ACLs, overlays), persists them
//! write-through one small record per object (all records an operation — or a batch of
//! concurrent operations — changes in one store transaction, see [`engine`]), and supports
//! failure injection for tests.
//!
//! Layout: `fabric` is the driver of the fabric manager role ([`SimFabric`] over the
//! [fabric model](crate::fabric_model)), `k8s` the driver of the k8s manager role ([`SimK8s`]), [`provisioner`] the sim
//! provisioner, and `engine` how all three run and persist operations. "Fabric" names only
//! the manager role here.

pub(crate) mod engine;
mod fabric;
mod k8s;
pub mod provisioner;
mod traffic;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use serde::de::DeserializeOwned;

use crate::contract::{OpError, Operation, Request, Role};
use crate::registration::Registration;

pub use crate::fabric_model::PortLocation;
pub use fabric::{DEFAULT_FABRIC_NAMESPACE, SimFabric};
pub use k8s::{DEFAULT_K8S_NAMESPACE, SimK8s, SimOverlay};

/// Where the sim keeps its tables so a restart does not lose them. Records are small JSON
/// strings keyed per object inside a namespace; the server implements this over its database.
#[async_trait]
pub trait SimStateStore: Send + Sync {
    /// Every `(key, value)` of a namespace (called once when a sim manager opens).
    async fn load_all(&self, namespace: &str) -> Result<Vec<(String, String)>, String>;
    /// Insert or replace one record.
    async fn put(&self, namespace: &str, key: &str, value: &str) -> Result<(), String>;
    /// Remove one record; removing a missing record succeeds.
    async fn delete(&self, namespace: &str, key: &str) -> Result<(), String>;
    /// Puts (`Some(value)`) or removes (`None`) several records, in order, as ONE transaction:
    /// all or nothing, one commit. The sim engines write every batch of changes through this,
    /// so an operation never persists half its records and concurrent operations share a
    /// commit. The default writes one record at a time (not atomic); stores that have
    /// transactions override it.
    async fn put_many(
        &self,
        namespace: &str,
        changes: &[(String, Option<String>)],
    ) -> Result<(), String> {
        for (key, value) in changes {
            match value {
                Some(v) => self.put(namespace, key, v).await?,
                None => self.delete(namespace, key).await?,
            }
        }
        Ok(())
    }
    /// Whether other processes write the same namespaces (then every batch goes through
    /// [`SimStateStore::exclusive`]).
    fn shared(&self) -> bool {
        false
    }
    /// A locked write batch after catching up from generation `seen`; only called when
    /// [`SimStateStore::shared`].
    async fn exclusive(&self, namespace: &str, _seen: i64) -> Result<Box<dyn SharedBatch>, String> {
        Err(format!("namespace {namespace} is not shared"))
    }
    /// A shared batch's fast path, tried before [`SimStateStore::exclusive`]: if the namespace
    /// is still at generation `seen` and every one of `fences` still holds, writes `changes`
    /// (journalled as generation `seen + 1`; nothing when empty) and returns the namespace's
    /// generation afterwards. Otherwise writes nothing and returns None (the writer then
    /// takes the locked path). The default always returns None.
    async fn write_current(
        &self,
        _namespace: &str,
        _seen: i64,
        _fences: &[crate::fence::Fence],
        _changes: &[(String, Option<String>)],
    ) -> Result<Option<i64>, String> {
        Ok(None)
    }
}

/// What other processes wrote to a shared namespace since the generation a writer last saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MissedRecords {
    /// Records put (`Some`) or removed (`None`), in order.
    Changes(Vec<(String, Option<String>)>),
    /// Every record of the namespace as it is now (the writer fell too far behind).
    Everything(Vec<(String, String)>),
}

/// One write batch of a namespace several processes write (replicas sharing a database),
/// holding the namespace's cross-process lock until it commits or is dropped.
#[async_trait]
pub trait SharedBatch: Send {
    /// The namespace's generation while the lock is held.
    fn generation(&self) -> i64;
    /// What the other processes wrote since the generation given to
    /// [`SimStateStore::exclusive`].
    fn take_missed(&mut self) -> MissedRecords;
    /// Whether the shard lease behind an operation still holds (checked and locked inside the
    /// batch's transaction).
    async fn fence_holds(&mut self, fence: &crate::fence::Fence) -> Result<bool, String>;
    /// Writes the batch's records and releases the lock; returns the new generation.
    async fn commit(self: Box<Self>, changes: &[(String, Option<String>)]) -> Result<i64, String>;
}

/// In-memory [`SimStateStore`] for tests and throwaway dev runs; clones share the same data, so
/// "restarting" a sim over the same `MemorySimState` keeps its tables.
#[derive(Clone, Default)]
pub struct MemorySimState {
    data: Arc<Mutex<BTreeMap<String, BTreeMap<String, String>>>>,
}

impl MemorySimState {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn data(&self) -> MutexGuard<'_, BTreeMap<String, BTreeMap<String, String>>> {
        self.data.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of records in a namespace (tests check write-through granularity with it).
    pub fn len(&self, namespace: &str) -> usize {
        self.data().get(namespace).map_or(0, BTreeMap::len)
    }

    /// Whether a namespace holds no record.
    pub fn is_empty(&self, namespace: &str) -> bool {
        self.len(namespace) == 0
    }

    /// One raw record (for tests).
    pub fn get(&self, namespace: &str, key: &str) -> Option<String> {
        self.data().get(namespace)?.get(key).cloned()
    }
}

#[async_trait]
impl SimStateStore for MemorySimState {
    async fn load_all(&self, namespace: &str) -> Result<Vec<(String, String)>, String> {
        Ok(self
            .data()
            .get(namespace)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default())
    }

    async fn put(&self, namespace: &str, key: &str, value: &str) -> Result<(), String> {
        self.data()
            .entry(namespace.to_string())
            .or_default()
            .insert(key.to_string(), value.to_string());
        Ok(())
    }

    async fn delete(&self, namespace: &str, key: &str) -> Result<(), String> {
        if let Some(m) = self.data().get_mut(namespace) {
            m.remove(key);
        }
        Ok(())
    }

    async fn put_many(
        &self,
        namespace: &str,
        changes: &[(String, Option<String>)],
    ) -> Result<(), String> {
        let mut data = self.data();
        let records = data.entry(namespace.to_string()).or_default();
        for (key, value) in changes {
            match value {
                Some(v) => records.insert(key.clone(), v.clone()),
                None => records.remove(key),
            };
        }
        Ok(())
    }
}

/// Why a sim engine could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The state store failed to load.
    #[error("sim state store ({namespace}): {message}")]
    Store {
        /// Namespace being loaded.
        namespace: String,
        /// The store's message.
        message: String,
    },
    /// A stored record does not parse.
    #[error("sim state ({namespace}) record '{key}' is corrupt: {message}")]
    Corrupt {
        /// Namespace being loaded.
        namespace: String,
        /// Offending key.
        key: String,
        /// Parse error.
        message: String,
    },
    /// A sim manager was built with a registration of the other role.
    #[error("registration '{name}' has role {role}, but this sim engine serves role {engine}")]
    RoleMismatch {
        /// Registration name.
        name: String,
        /// Its role.
        role: Role,
        /// The engine's role.
        engine: Role,
    },
}

/// What an injected failure looks like to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Fails as [`OpError::Transient`].
    Transient,
    /// Fails as [`OpError::Permanent`].
    Permanent,
}

/// Failure injection and call counting shared by the sim engines.
#[derive(Default)]
struct Faults {
    rules: Mutex<HashMap<(Operation, String), (u32, FailureKind)>>,
    counts: Mutex<HashMap<Operation, u64>>,
}

impl Faults {
    fn inject(&self, op: Operation, object_id: &str, times: u32, kind: FailureKind) {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        if times == 0 {
            rules.remove(&(op, object_id.to_string()));
        } else {
            rules.insert((op, object_id.to_string()), (times, kind));
        }
    }

    fn clear(&self) {
        self.rules.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    fn count(&self, op: Operation) -> u64 {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts.get(&op).copied().unwrap_or(0)
    }

    /// Counts the call and fails it when a rule matches the request's primary id.
    fn enter<R: Request>(&self, request: &R) -> Result<(), OpError> {
        let op = R::OPERATION;
        *self
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(op)
            .or_insert(0) += 1;
        let id = request.primary_id();
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        let key = (op, id.to_string());
        let Some((remaining, kind)) = rules.get_mut(&key) else {
            return Ok(());
        };
        let kind = *kind;
        if *remaining != u32::MAX {
            *remaining -= 1;
            if *remaining == 0 {
                rules.remove(&key);
            }
        }
        let msg = format!("injected {} failure of {op} for '{id}'", kind_name(kind));
        Err(match kind {
            FailureKind::Transient => OpError::Transient(msg),
            FailureKind::Permanent => OpError::Permanent(msg),
        })
    }
}

fn kind_name(kind: FailureKind) -> &'static str {
    match kind {
        FailureKind::Transient => "transient",
        FailureKind::Permanent => "permanent",
    }
}

/// Every record of `namespace`, decoded, with its key (a record that does not decode makes the
/// namespace corrupt).
async fn load_records<R: DeserializeOwned>(
    store: &Arc<dyn SimStateStore>,
    namespace: &str,
) -> Result<Vec<(String, R)>, SimError> {
    let rows = store
        .load_all(namespace)
        .await
        .map_err(|message| SimError::Store {
            namespace: namespace.to_string(),
            message,
        })?;
    rows.into_iter()
        .map(|(key, value)| match serde_json::from_str(&value) {
            Ok(record) => Ok((key, record)),
            Err(e) => Err(SimError::Corrupt {
                namespace: namespace.to_string(),
                key,
                message: e.to_string(),
            }),
        })
        .collect()
}

/// A store failure during an operation is transient: the operation is idempotent, so the
/// caller's retry converges.
fn store_error(namespace: &str, message: String) -> OpError {
    OpError::transient(format!("sim state store ({namespace}): {message}"))
}

/// A registered `sim` manager: a registration bound to a (possibly shared) sim engine,
/// [`SimFabric`] for role fabric (a [`crate::FabricManager`]) or [`SimK8s`] for role k8s (a
/// [`crate::K8sManager`]).
pub struct SimManager<E> {
    registration: Registration,
    engine: Arc<E>,
    latency: std::time::Duration,
}

impl SimManager<SimFabric> {
    /// A fabric manager over `engine`; the registration must have role fabric.
    pub fn fabric(registration: Registration, engine: Arc<SimFabric>) -> Result<Self, SimError> {
        SimManager::bind(registration, Role::Fabric, engine)
    }
}

impl SimManager<SimK8s> {
    /// A k8s manager over `engine`; the registration must have role k8s. Overlays are only
    /// accepted for the registration's `hosting_clusters`.
    pub fn k8s(registration: Registration, engine: Arc<SimK8s>) -> Result<Self, SimError> {
        SimManager::bind(registration, Role::K8s, engine)
    }
}

impl<E> SimManager<E> {
    fn bind(registration: Registration, role: Role, engine: Arc<E>) -> Result<Self, SimError> {
        check_role(&registration, role)?;
        Ok(SimManager {
            registration,
            engine,
            latency: std::time::Duration::ZERO,
        })
    }

    /// Every operation takes `latency` before it runs (a simulated backend's response time).
    pub fn with_latency(mut self, latency: std::time::Duration) -> Self {
        self.latency = latency;
        self
    }

    /// The engine, for inspection and failure injection.
    pub fn engine(&self) -> &Arc<E> {
        &self.engine
    }

    /// Waits the simulated latency.
    async fn delay(&self) {
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
    }
}

fn check_role(registration: &Registration, engine: Role) -> Result<(), SimError> {
    if registration.role == engine {
        Ok(())
    } else {
        Err(SimError::RoleMismatch {
            name: registration.name.clone(),
            role: registration.role,
            engine,
        })
    }
}
