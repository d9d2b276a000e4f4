//! A short-lived cache of stored token rows, so a request does not read its token row on every
//! call (the tenant is still read every time: `tokens::caller_of`).
//!
//! Rules (what a revocation still guarantees):
//! - An entry lives at most [`TOKEN_CACHE_TTL`]; the token's expiry and its tenant are checked
//!   on every request, cached or not.
//! - A revocation is announced on the change feed in the transaction that removes the token
//!   rows (also to the other replicas, on PostgreSQL); the announcement empties the cache, and
//!   the process that revoked also empties it before answering — the revoked secret fails on
//!   its next request here, and on another replica as soon as the notice arrives. A lagging or
//!   closed feed empties the cache.
//! - Only rows that exist are cached: an unknown secret is looked up every time (a token minted
//!   a moment ago works at once).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use osac_store::Store;
use tokio::sync::broadcast::error::RecvError;

use super::tokens::{NAMESPACE, StoredToken};

/// How long a token row is trusted without reading the store again.
pub const TOKEN_CACHE_TTL: Duration = Duration::from_secs(1);

/// Entries kept at most; a full cache is emptied (correctness never depends on an entry).
const MAX_ENTRIES: usize = 10_000;

/// Token rows by the hash of their secret, with the instant each stops being trusted.
#[derive(Default)]
pub(crate) struct TokenCache {
    entries: Mutex<HashMap<String, (StoredToken, Instant)>>,
}

impl TokenCache {
    /// The cache, emptied by revocation notices on the store's change feed for as long as it
    /// lives.
    pub(crate) fn watching(store: &dyn Store) -> Arc<Self> {
        let cache = Arc::new(TokenCache::default());
        tokio::spawn(forget_revoked(Arc::downgrade(&cache), store.subscribe()));
        cache
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, (StoredToken, Instant)>> {
        // A poisoned map only holds cache entries: start from what is there.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The token row of a secret's hash, if read recently.
    pub(crate) fn get(&self, key: &str) -> Option<StoredToken> {
        let mut entries = self.lock();
        match entries.get(key) {
            Some((token, until)) if *until > Instant::now() => Some(token.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Remembers a row read from the store.
    pub(crate) fn put(&self, key: String, token: StoredToken) {
        let mut entries = self.lock();
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(key, (token, Instant::now() + TOKEN_CACHE_TTL));
    }

    /// Forgets every entry (after a revocation).
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }
}

async fn forget_revoked(
    cache: Weak<TokenCache>,
    mut feed: tokio::sync::broadcast::Receiver<osac_store::Change>,
) {
    loop {
        let received = feed.recv().await;
        let Some(cache) = cache.upgrade() else {
            return;
        };
        match received {
            Ok(change) if change.kind == NAMESPACE => cache.clear(),
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => cache.clear(),
            Err(RecvError::Closed) => {
                cache.clear();
                return;
            }
        }
    }
}
