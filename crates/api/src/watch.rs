//! Watching a collection: the objects a List would return, then one event per committed change,
//! fed by the store's change feed (in-process on SQLite, LISTEN/NOTIFY across replicas on
//! PostgreSQL). Same filter, tenant scope and visibility as List.
//!
//! Semantics (those of Kubernetes watches): an object that starts matching is ADDED, a matching
//! object that changes is MODIFIED, one that is deleted or stops matching is DELETED with the
//! last state this watch saw. When the feed overflows (a slow client), the watch re-lists and
//! reports the difference, so a client never misses the final state of an object. A client that
//! reconnects gets a fresh first batch: there is no resume token to keep.

use std::collections::HashMap;
use std::sync::Arc;

use osac_model::{Kind, Scope};
use osac_store::{Change, ListQuery};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::auth::Caller;
use crate::error::ApiResult;
use crate::service::{MAX_LIMIT, Service};

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
    /// Starts watching a collection. Errors of the request itself (authorization, a bad filter)
    /// are returned here; a store error later arrives as the last item.
    pub async fn watch(
        self: &Arc<Self>,
        caller: &Caller,
        surface: Scope,
        kind: Kind,
        filter: &str,
    ) -> ApiResult<WatchReceiver> {
        self.start_watch(caller, surface, kind, filter, None).await
    }

    /// Like [`Service::watch`]; `synced` fires once every event of the first batch is queued on
    /// the receiver (events read after it fired may already be later changes). The console uses
    /// it to know when its picture is complete.
    pub async fn watch_reporting_sync(
        self: &Arc<Self>,
        caller: &Caller,
        surface: Scope,
        kind: Kind,
        filter: &str,
    ) -> ApiResult<(WatchReceiver, oneshot::Receiver<()>)> {
        let (synced, on_synced) = oneshot::channel();
        let rx = self
            .start_watch(caller, surface, kind, filter, Some(synced))
            .await?;
        Ok((rx, on_synced))
    }

    async fn start_watch(
        self: &Arc<Self>,
        caller: &Caller,
        surface: Scope,
        kind: Kind,
        filter: &str,
        synced: Option<oneshot::Sender<()>>,
    ) -> ApiResult<WatchReceiver> {
        self.authorize(caller, surface, kind, false)?;
        let watcher = Watcher {
            service: Arc::clone(self),
            surface,
            kind,
            tenant: Self::scope(caller, kind),
            filter: Self::effective_filter(surface, kind, filter)?,
            seen: HashMap::new(),
            synced,
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
        loop {
            let outcome = tokio::select! {
                _ = tx.closed() => return,
                () = server_closing(&mut closing) => return,
                change = feed.recv() => match change {
                    Ok(change) if self.concerns(&change) => self.changed(&change.id, &tx).await,
                    Ok(_) => Ok(true),
                    Err(broadcast::error::RecvError::Lagged(_)) => self.resync(&tx).await,
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            };
            match outcome {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            }
        }
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
