//! Watching a collection: the objects a List would return, then one event per committed change,
//! fed by the store's change feed (in-process on SQLite, LISTEN/NOTIFY across replicas on
//! PostgreSQL). Same filter, tenant scope and visibility as List.
//!
//! Semantics (those of Kubernetes watches): an object that starts matching is ADDED, a matching
//! object that changes is MODIFIED, one that is deleted or stops matching is DELETED with the
//! last state this watch saw. When the feed overflows (a slow client), the watch re-lists and
//! reports the difference, so a client never misses the final state of an object. A client that
//! reconnects gets a fresh first batch: there is no resume token to keep.
//!
//! A watch ends when the credential that opened it ends (revoked, expired, its tenant deleted:
//! see `auth::stream`), with UNAUTHENTICATED as its last item; every open watch holds a slot
//! under the per-token and per-tenant caps (`watch_slots`) until it ends.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use osac_model::{Kind, Scope};
use osac_store::{Change, ListQuery};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::auth::{Authenticated, tokens};
use crate::error::ApiResult;
use crate::service::{MAX_LIMIT, Service};
use crate::watch_slots::WatchSlot;

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEventType {
    /// New, or newly matching the filter (also every object of the first batch).
    Added,
    /// Changed and still matching.
    Modified,
    /// Gone, or no longer matching.
    Deleted,
}

impl WatchEventType {
    /// The wire name: `ADDED`, `MODIFIED`, `DELETED`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One event of a watch: the type and the object as the API renders it.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    pub kind: WatchEventType,
    pub object: Value,
}

impl WatchEvent {
    /// The REST form `{"type": "...", "object": {...}}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({"type": self.kind.as_str(), "object": self.object})
    }
}

/// Events waiting for a slow client before the watch stops reading the feed.
const BUFFER: usize = 256;

/// A running watch: events arrive on the receiver; an error ends it; dropping it stops the watch.
pub type WatchReceiver = mpsc::Receiver<ApiResult<WatchEvent>>;

impl Service {
    /// Starts watching a collection. Errors of the request itself (authorization, a bad filter,
    /// the watch caps) are returned here; a store error, or the end of the credential, later
    /// arrives as the last item.
    pub async fn watch(
        self: &Arc<Self>,
        who: &Authenticated,
        surface: Scope,
        kind: Kind,
        filter: &str,
    ) -> ApiResult<WatchReceiver> {
        self.authorize(&who.caller, surface, kind, false)?;
        let slot = self.take_watch_slots(who, 1)?.pop();
        self.start_watch(who, surface, kind, filter, None, slot)
            .await
    }

    /// Takes `n` watch slots of `who` at once (see `watch_slots`): a console stream takes one
    /// per collection before it starts any.
    pub fn take_watch_slots(&self, who: &Authenticated, n: usize) -> ApiResult<Vec<WatchSlot>> {
        self.watch_slots.take(self.watch_limits, who, n)
    }

    /// Like [`Service::watch`], holding a slot taken with [`Service::take_watch_slots`];
    /// `synced` fires once every event of the first batch is queued on the receiver (events
    /// read after it fired may already be later changes). The console uses it to know when its
    /// picture is complete.
    pub async fn watch_reporting_sync(
        self: &Arc<Self>,
        who: &Authenticated,
        surface: Scope,
        kind: Kind,
        filter: &str,
        slot: WatchSlot,
    ) -> ApiResult<(WatchReceiver, oneshot::Receiver<()>)> {
        let (synced, on_synced) = oneshot::channel();
        let rx = self
            .start_watch(who, surface, kind, filter, Some(synced), Some(slot))
            .await?;
        Ok((rx, on_synced))
    }

    async fn start_watch(
        self: &Arc<Self>,
        who: &Authenticated,
        surface: Scope,
        kind: Kind,
        filter: &str,
        synced: Option<oneshot::Sender<()>>,
        slot: Option<WatchSlot>,
    ) -> ApiResult<WatchReceiver> {
        self.authorize(&who.caller, surface, kind, false)?;
        let filter = self
            .with_reference_ids(&who.caller, surface, kind, filter)
            .await?;
        let watcher = Watcher {
            service: Arc::clone(self),
            surface,
            kind,
            tenant: Self::scope(&who.caller, kind),
            filter: Self::effective_filter(surface, kind, &filter)?,
            seen: HashMap::new(),
            synced,
            who: who.clone(),
            _slot: slot,
        };
        // Subscribe before the first list: a change committed in between is seen twice, never
        // missed.
        let feed = self.store.subscribe();
        let (tx, rx) = mpsc::channel(BUFFER);
        // The watcher's log lines carry the request's id (the request span).
        tokio::spawn(tracing::Instrument::in_current_span(watcher.run(feed, tx)));
        Ok(rx)
    }
}

struct Watcher {
    service: Arc<Service>,
    surface: Scope,
    kind: Kind,
    tenant: Option<String>,
    filter: String,
    /// Last state sent of every object the client currently knows, by id.
    seen: HashMap<String, Value>,
    /// Told once the first batch is queued (see [`Service::watch_reporting_sync`]).
    synced: Option<oneshot::Sender<()>>,
    /// The credential the watch was opened with, checked again while it runs.
    who: Authenticated,
    /// Its place under the watch caps, freed when the watcher ends.
    _slot: Option<WatchSlot>,
}

impl Watcher {
    async fn run(
        mut self,
        mut feed: broadcast::Receiver<Change>,
        tx: mpsc::Sender<ApiResult<WatchEvent>>,
    ) {
        let mut closing = self.service.closing();
        if let Err(e) = self.resync(&tx).await {
            let _ = tx.send(Err(e)).await;
            return;
        }
        if let Some(synced) = self.synced.take() {
            let _ = synced.send(());
        }
        let mut recheck =
            tokio::time::interval_at(tokio::time::Instant::now() + RECHECK_EVERY, RECHECK_EVERY);
        recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let expiry = until(self.who.expires);
        tokio::pin!(expiry);
        let mut expired = false;
        loop {
            let outcome = tokio::select! {
                _ = tx.closed() => return,
                () = server_closing(&mut closing) => return,
                () = &mut expiry, if !expired => {
                    expired = true;
                    self.credential_holds(false).await
                }
                _ = recheck.tick() => self.credential_holds(false).await,
                change = feed.recv() => match change {
                    Ok(change) if is_trust_change(&change) => {
                        match self.credential_holds(change.kind == tokens::NAMESPACE).await {
                            Ok(_) if self.concerns(&change) => self.changed(&change.id, &tx).await,
                            other => other,
                        }
                    }
                    Ok(change) if self.concerns(&change) => self.changed(&change.id, &tx).await,
                    Ok(_) => Ok(true),
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        match self.credential_holds(true).await {
                            Ok(_) => self.resync(&tx).await,
                            Err(e) => Err(e),
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            };
            match outcome {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => {
                    // The error is the stream's last item; a client that stopped reading does
                    // not keep the watcher (its slot, its feed) alive for long: after a second
                    // the stream just ends.
                    let _ = tokio::time::timeout(FINAL_SEND, tx.send(Err(e))).await;
                    return;
                }
            }
        }
    }

    /// Ok(true) while the watch's credential holds (see `auth::stream`); the error that ends
    /// the stream otherwise.
    async fn credential_holds(&self, fresh: bool) -> ApiResult<bool> {
        self.service.auth.recheck(&self.who, fresh).await?;
        Ok(true)
    }

    fn concerns(&self, change: &Change) -> bool {
        change.kind == self.kind.collection()
            && self.tenant.as_ref().is_none_or(|t| *t == change.tenant)
    }

    fn query(&self, filter: String, offset: i64) -> ListQuery {
        ListQuery {
            kind: self.kind,
            tenant: self.tenant.clone(),
            filter,
            order: String::new(),
            offset,
            limit: MAX_LIMIT,
        }
    }

    /// Lists every matching object and sends what differs from what the client knows.
    /// `Ok(false)` = the client went away.
    async fn resync(&mut self, tx: &mpsc::Sender<ApiResult<WatchEvent>>) -> ApiResult<bool> {
        let mut current = Vec::new();
        loop {
            let query = self.query(self.filter.clone(), current.len() as i64);
            let page = self.service.store.list(&query).await?;
            let done = page.items.len() < MAX_LIMIT as usize;
            current.extend(page.items);
            if done {
                break;
            }
        }
        let mut gone: HashMap<String, Value> = std::mem::take(&mut self.seen);
        for rec in &current {
            let object = self.service.render(self.surface, rec);
            let kind = match gone.remove(&rec.id) {
                None => Some(WatchEventType::Added),
                Some(old) if old != object => Some(WatchEventType::Modified),
                Some(_) => None,
            };
            self.seen.insert(rec.id.clone(), object.clone());
            if let Some(kind) = kind
                && !send(tx, kind, object).await
            {
                return Ok(false);
            }
        }
        for (_, object) in gone {
            if !send(tx, WatchEventType::Deleted, object).await {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Re-reads one changed object through the filter and reports how it changed for the client.
    async fn changed(
        &mut self,
        id: &str,
        tx: &mpsc::Sender<ApiResult<WatchEvent>>,
    ) -> ApiResult<bool> {
        // Ids are server-generated UUIDs; quoting is safe.
        let by_id = format!("this.id == \"{}\"", id.replace(['"', '\\'], ""));
        let filter = if self.filter.is_empty() {
            by_id
        } else {
            format!("({}) && {by_id}", self.filter)
        };
        let page = self.service.store.list(&self.query(filter, 0)).await?;
        let now = page
            .items
            .first()
            .map(|rec| self.service.render(self.surface, rec));
        let event = match (self.seen.remove(id), now) {
            (None, None) => None,
            (Some(old), None) => Some((WatchEventType::Deleted, old)),
            (None, Some(new)) => {
                self.seen.insert(id.to_string(), new.clone());
                Some((WatchEventType::Added, new))
            }
            (Some(old), Some(new)) => {
                self.seen.insert(id.to_string(), new.clone());
                (old != new).then_some((WatchEventType::Modified, new))
            }
        };
        Ok(match event {
            Some((kind, object)) => send(tx, kind, object).await,
            None => true,
        })
    }
}

/// How often a watch checks its credential again without a change telling it to (a token
/// cache entry lives a second: a revocation or deletion the feed did not bring ends the stream
/// within a few seconds).
const RECHECK_EVERY: Duration = Duration::from_secs(2);

/// How long the final error waits for room in a slow client's buffer.
const FINAL_SEND: Duration = Duration::from_secs(1);

/// A change that can end a credential: a token revocation, or a write of a tenant.
fn is_trust_change(change: &Change) -> bool {
    change.kind == tokens::NAMESPACE || change.kind == Kind::Tenant.collection()
}

/// Resolves at `at` (never when None).
async fn until(at: Option<chrono::DateTime<chrono::Utc>>) {
    match at {
        Some(at) => {
            let left = (at - chrono::Utc::now()).to_std().unwrap_or_default();
            // Past the instant, so the check that follows sees it expired.
            tokio::time::sleep(left + Duration::from_millis(50)).await;
        }
        None => std::future::pending().await,
    }
}

/// Resolves once the server shuts down.
async fn server_closing(closing: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = closing.wait_for(|closed| *closed).await.map(|_| ());
}

async fn send(
    tx: &mpsc::Sender<ApiResult<WatchEvent>>,
    kind: WatchEventType,
    object: Value,
) -> bool {
    tx.send(Ok(WatchEvent { kind, object })).await.is_ok()
}
