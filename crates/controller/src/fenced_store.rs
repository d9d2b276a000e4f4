//! The store as reconciles see it: every write transaction a reconcile opens (and every write
//! set it submits to the group commit) first checks the shard lease it runs under
//! ([`osac_backends::fence`]), so a replica that lost the lease writes nothing. Reads by id and
//! referrer lookups may be answered from the store's cache ([`Store::get_cached`]); other
//! reads, and writes outside a reconcile, pass through unchanged.
//!
//! It also notes the last version of the reconciled object that the reconcile's write sets
//! wrote ([`track_own_writes`]): the queue then knows that the change this write causes is the
//! reconcile's own (see `queue.rs`). Writes through a transaction are not noted, so their change
//! runs the object again, as any change does.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use async_trait::async_trait;
use osac_model::Kind;
use osac_store::{
    Applied, Change, FenceToken, KvBatch, Leases, ListQuery, Page, PageText, Record, RecordText,
    Reference, Result, StateCount, Store, StoreError, Tx, WriteSet,
};
use tokio::sync::broadcast;

/// The object a reconcile runs for, and the last version of it its write sets wrote (0: none).
struct OwnWrites {
    id: String,
    last_version: AtomicI64,
}

tokio::task_local! {
    static OWN_WRITES: OwnWrites;
}

/// Runs `reconcile` (of object `id`) noting its write sets' versions of that object; returns its
/// output and the last version written, if any.
pub(crate) async fn track_own_writes<F: Future>(
    id: String,
    reconcile: F,
) -> (F::Output, Option<i64>) {
    let own = OwnWrites {
        id,
        last_version: AtomicI64::new(0),
    };
    let (out, own) = OWN_WRITES
        .scope(own, async {
            let out = reconcile.await;
            let last = OWN_WRITES.with(|o| o.last_version.load(Ordering::Relaxed));
            (out, last)
        })
        .await;
    (out, (own > 0).then_some(own))
}

/// Notes the versions of the reconciled object among `applied` (outside a reconcile: nothing).
fn note_own_writes(applied: &Applied) {
    let _ = OWN_WRITES.try_with(|own| {
        for rec in applied.iter().flatten().filter(|r| r.id == own.id) {
            own.last_version.fetch_max(rec.version, Ordering::Relaxed);
        }
    });
}

/// Opens a transaction with `begin`, first checking the lease of the running reconcile.
async fn fenced(
    begin: impl std::future::Future<Output = Result<Box<dyn Tx>>>,
) -> Result<Box<dyn Tx>> {
    let fence = osac_backends::fence::current();
    if let Some(f) = &fence
        && !f.holds_locally()
    {
        return Err(StoreError::Fenced(f.shard));
    }
    let mut tx = begin.await?;
    if let Some(f) = fence {
        tx.fence(f.shard, &f.replica, f.token).await?;
    }
    Ok(tx)
}

/// Wraps the process's store for the controllers.
pub(crate) struct FencedStore(pub Arc<dyn Store>);

#[async_trait]
impl Store for FencedStore {
    async fn begin(&self) -> Result<Box<dyn Tx>> {
        fenced(self.0.begin()).await
    }
    async fn begin_shared(&self) -> Result<Box<dyn Tx>> {
        fenced(self.0.begin_shared()).await
    }
    async fn apply(&self, mut set: WriteSet) -> Result<Applied> {
        if let Some(f) = osac_backends::fence::current() {
            if !f.holds_locally() {
                return Err(StoreError::Fenced(f.shard));
            }
            set.fence = Some(FenceToken {
                shard: f.shard,
                replica: f.replica.clone(),
                token: f.token,
            });
        }
        let applied = self.0.apply(set).await?;
        note_own_writes(&applied);
        Ok(applied)
    }
    // Controllers read what the change feed keeps current (see `Store::get_cached`): a
    // change another replica made wakes them again once it arrives.
    async fn get(&self, id: &str) -> Result<Option<Record>> {
        self.0.get_cached(id).await
    }
    async fn list(&self, query: &ListQuery) -> Result<Page> {
        self.0.list(query).await
    }
    async fn list_items(&self, query: &ListQuery) -> Result<Vec<Record>> {
        self.0.list_items(query).await
    }
    async fn get_text(&self, id: &str) -> Result<Option<RecordText>> {
        self.0.get_text(id).await
    }
    async fn list_text(&self, query: &ListQuery) -> Result<PageText> {
        self.0.list_text(query).await
    }
    async fn referrers(&self, target: &str) -> Result<Vec<Reference>> {
        self.0.referrers_cached(target).await
    }
    async fn get_cached(&self, id: &str) -> Result<Option<Record>> {
        self.0.get_cached(id).await
    }
    async fn referrers_cached(&self, target: &str) -> Result<Vec<Reference>> {
        self.0.referrers_cached(target).await
    }
    async fn ids(&self, kind: Kind) -> Result<Vec<String>> {
        self.0.ids(kind).await
    }
    fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.0.subscribe()
    }
    async fn ping(&self) -> Result<()> {
        self.0.ping().await
    }
    async fn count_by_state(&self) -> Result<Vec<StateCount>> {
        self.0.count_by_state().await
    }
    async fn kv_load(&self, ns: &str) -> Result<Vec<(String, String)>> {
        self.0.kv_load(ns).await
    }
    async fn kv_get(&self, ns: &str, key: &str) -> Result<Option<String>> {
        self.0.kv_get(ns, key).await
    }
    async fn kv_put(&self, ns: &str, key: &str, value: &str) -> Result<()> {
        self.0.kv_put(ns, key, value).await
    }
    async fn kv_delete(&self, ns: &str, key: &str) -> Result<()> {
        self.0.kv_delete(ns, key).await
    }
    async fn outbox_peek(&self, limit: i64) -> Result<Vec<osac_store::OutboxEntry>> {
        self.0.outbox_peek(limit).await
    }
    async fn outbox_ack(&self, seqs: &[i64]) -> Result<u64> {
        self.0.outbox_ack(seqs).await
    }
    async fn outbox_len(&self) -> Result<i64> {
        self.0.outbox_len().await
    }
    async fn outbox_append(&self, events: &[osac_store::OutboxEvent]) -> Result<()> {
        self.0.outbox_append(events).await
    }
    async fn usage_intervals(
        &self,
        from: chrono::DateTime<chrono::Utc>,
        to: chrono::DateTime<chrono::Utc>,
        tenant: Option<&str>,
    ) -> Result<Vec<osac_model::metering::IntervalRow>> {
        self.0.usage_intervals(from, to, tenant).await
    }
    async fn record_usage(&self, end: chrono::DateTime<chrono::Utc>) -> Result<u64> {
        self.0.record_usage(end).await
    }
    async fn prune_usage(&self, before: chrono::DateTime<chrono::Utc>) -> Result<u64> {
        self.0.prune_usage(before).await
    }
    async fn record_traffic(
        &self,
        at: chrono::DateTime<chrono::Utc>,
        samples: &[osac_store::TrafficSample],
    ) -> Result<()> {
        self.0.record_traffic(at, samples).await
    }
    async fn traffic_usage(
        &self,
        from: chrono::DateTime<chrono::Utc>,
        to: chrono::DateTime<chrono::Utc>,
        tenant: Option<&str>,
    ) -> Result<Vec<osac_store::TrafficUsageRow>> {
        self.0.traffic_usage(from, to, tenant).await
    }
    async fn prune_events(&self, before: chrono::DateTime<chrono::Utc>, limit: i64) -> Result<u64> {
        self.0.prune_events(before, limit).await
    }
    async fn kv_write(&self, ns: &str, changes: &[(String, Option<String>)]) -> Result<()> {
        self.0.kv_write(ns, changes).await
    }
    fn leases(&self) -> Option<&dyn Leases> {
        self.0.leases()
    }
    async fn kv_exclusive(&self, ns: &str, seen: i64) -> Result<Option<Box<dyn KvBatch>>> {
        self.0.kv_exclusive(ns, seen).await
    }
    async fn kv_write_current(
        &self,
        ns: &str,
        seen: i64,
        fences: &[osac_store::Fence],
        changes: &[(String, Option<String>)],
    ) -> Result<Option<i64>> {
        self.0.kv_write_current(ns, seen, fences, changes).await
    }
}
