//! A short-lived cache of resolved store tokens, so a request does not read its token row and
//! its tenant on every call.
//!
//! Rules (what a revocation or a tenant deletion still guarantees):
//! - An entry lives at most [`TOKEN_CACHE_TTL`]; a token's own expiry is checked on every hit.
//! - A revocation is announced on the change feed in the transaction that removes the token
//!   rows (also to the other replicas, on PostgreSQL); the announcement empties the cache, and
//!   the process that revoked also empties it before answering — the revoked secret fails on
//!   its next request anywhere.
//! - A change to a Tenant object (deletion requested, row removed — seen on the change feed,
//!   also for changes made by other replicas on PostgreSQL) drops the entries of that tenant,
//!   so its tokens stop working as soon as the change is seen. A lagging feed empties the
//!   cache.
//! - Only successful resolutions are cached: an unknown secret is looked up every time (a
//!   token minted a moment ago works at once).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use osac_model::Kind;
use osac_store::Store;
use tokio::sync::broadcast::error::RecvError;

use super::Caller;

/// How long a resolved token is trusted without reading the store again.
pub const TOKEN_CACHE_TTL: Duration = Duration::from_secs(1);

/// Entries kept at most; a full cache is emptied (a flood of distinct valid tokens is rare,
/// and correctness never depends on an entry being present).
const MAX_ENTRIES: usize = 10_000;

struct Entry {
    caller: Caller,
    tenant_id: Option<String>,
    expires: Option<DateTime<Utc>>,
    until: Instant,
}

/// Resolved tokens by the hash of their secret.
#[derive(Default)]
pub(crate) struct TokenCache {
    entries: Mutex<HashMap<String, Entry>>,
}

impl TokenCache {
    /// The cache, kept current by the store's change feed for as long as it lives.
    pub(crate) fn watching(store: &dyn Store) -> Arc<Self> {
        let cache = Arc::new(TokenCache::default());
        let weak = Arc::downgrade(&cache);
        let feed = store.subscribe();
        tokio::spawn(forget_changed_tenants(weak, feed));
        cache
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // A poisoned map only holds cache entries: start from what is there.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The caller of a secret's hash, if resolved recently and not expired since.
    pub(crate) fn get(&self, key: &str) -> Option<Caller> {
        let mut entries = self.lock();
        let entry = entries.get(key)?;
        let now = Instant::now();
        if entry.until <= now || entry.expires.is_some_and(|e| e <= Utc::now()) {
            entries.remove(key);
            return None;
        }
        Some(entry.caller.clone())
    }

    /// Remembers a successful resolution.
    pub(crate) fn put(
        &self,
        key: String,
        caller: Caller,
        tenant_id: Option<String>,
        expires: Option<DateTime<Utc>>,
    ) {
        let mut entries = self.lock();
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        let until = Instant::now() + TOKEN_CACHE_TTL;
        entries.insert(
            key,
            Entry {
                caller,
                tenant_id,
                expires,
                until,
            },
        );
    }

    /// Forgets every entry (after a revocation).
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    /// Forgets the entries of one tenant (by id).
    fn forget_tenant(&self, tenant_id: &str) {
        self.lock()
            .retain(|_, e| e.tenant_id.as_deref() != Some(tenant_id));
    }
}

async fn forget_changed_tenants(
    cache: Weak<TokenCache>,
    mut feed: tokio::sync::broadcast::Receiver<osac_store::Change>,
) {
    loop {
        let received = feed.recv().await;
        let Some(cache) = cache.upgrade() else {
            return;
        };
        match received {
            Ok(change) if change.kind() == Some(Kind::Tenant) => cache.forget_tenant(&change.id),
            Ok(change) if change.kind == super::tokens::NAMESPACE => cache.clear(),
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => cache.clear(),
            Err(RecvError::Closed) => {
                // No more news about tenants: stop trusting the cache.
                cache.clear();
                return;
            }
        }
    }
}
