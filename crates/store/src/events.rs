//! Events: read-only records of what happened to an object (state transitions, onboarding
//! steps, cleanup, refused requests), listable by users and pruned after a TTL.
//!
//! Bounds: events live [`DEFAULT_EVENT_TTL`] (`--event-ttl-seconds`), and each tenant keeps at
//! most its newest [`DEFAULT_MAX_EVENTS_PER_TENANT`] (`--max-events-per-tenant`): the pruner
//! removes the oldest beyond the cap on every pass. A tenant's events go with its row.
//!
//! An event is one cheap row of kind [`Kind::Event`]: no name, no labels, no references (it
//! names its object by id only, so it never protects or wakes anything). Writers that already
//! hold a transaction insert it there with [`record`] (no extra commit); writers whose own
//! transaction was rolled back (a refused request) use [`record_now`].

use std::sync::Arc;
use std::time::Duration;

use crate::{ListQuery, Record, Store, StoreError, Tx, Write, WriteSet};
use chrono::Utc;
use osac_model::{Kind, Scope};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

/// Default lifetime of an event (as in Kubernetes): long enough to explain what just
/// happened, short enough that the table stays small under heavy churn.
pub const DEFAULT_EVENT_TTL: Duration = Duration::from_secs(3600);

/// Reason of the event recorded when an object is created through the API.
pub const REASON_CREATED: &str = "Created";
/// Reason of the event recorded when deletion of an object is requested.
pub const REASON_DELETING: &str = "Deleting";
/// Reason of the event recorded when an object's row is finally removed.
pub const REASON_DELETED: &str = "Deleted";

/// An event to record: about which object, normal or warning, why (CamelCase) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    /// Tenant that may see the event ("" = provider only).
    pub tenant: String,
    /// Kind of the object the event is about.
    pub object_kind: Kind,
    /// Id of that object.
    pub object_id: String,
    /// Name of that object ("" when unnamed).
    pub object_name: String,
    /// WARNING (something failed or needs attention) rather than NORMAL.
    pub warning: bool,
    /// CamelCase reason, e.g. `Ready`, `ExternalIPPoolExhausted`.
    pub reason: String,
    /// Human explanation.
    pub message: String,
}

impl NewEvent {
    /// A NORMAL event about an object identified by its parts.
    pub fn normal(
        tenant: impl Into<String>,
        object_kind: Kind,
        object_id: impl Into<String>,
        object_name: impl Into<String>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            tenant: tenant.into(),
            object_kind,
            object_id: object_id.into(),
            object_name: object_name.into(),
            warning: false,
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// A WARNING event about an object identified by its parts.
    pub fn warning(
        tenant: impl Into<String>,
        object_kind: Kind,
        object_id: impl Into<String>,
        object_name: impl Into<String>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            warning: true,
            ..Self::normal(tenant, object_kind, object_id, object_name, reason, message)
        }
    }

    /// The stored row of this event (tenant events of provider objects are provider-only).
    pub fn to_record(&self) -> Record {
        // A tenant sees the events of its own Tenant object; other provider objects' events
        // are the provider's.
        let tenant = match (self.object_kind, self.object_kind.scope()) {
            (Kind::Tenant, _) | (_, Scope::Tenant) => self.tenant.clone(),
            (_, Scope::Provider) => String::new(),
        };
        let mut spec = Map::with_capacity(6);
        spec.insert("object_kind".into(), json!(self.object_kind.display_name()));
        spec.insert("object_id".into(), json!(self.object_id));
        if !self.object_name.is_empty() {
            spec.insert("object_name".into(), json!(self.object_name));
        }
        spec.insert(
            "type".into(),
            json!(if self.warning {
                "EVENT_TYPE_WARNING"
            } else {
                "EVENT_TYPE_NORMAL"
            }),
        );
        spec.insert("reason".into(), json!(self.reason));
        if !self.message.is_empty() {
            spec.insert("message".into(), json!(self.message));
        }
        let mut rec = Record::new(
            Kind::Event,
            tenant,
            json!({ "spec": Value::Object(spec), "status": {} }),
        );
        rec.creator = "system".to_string();
        rec
    }
}

/// An event about a stored object (its tenant, kind, id and name; a Tenant's events belong to
/// that tenant).
pub fn for_record(
    rec: &Record,
    warning: bool,
    reason: impl Into<String>,
    message: impl Into<String>,
) -> NewEvent {
    let tenant = match (rec.kind, rec.name.as_deref()) {
        (Kind::Tenant, Some(name)) => name.to_string(),
        _ => rec.tenant.clone(),
    };
    NewEvent {
        tenant,
        object_kind: rec.kind,
        object_id: rec.id.clone(),
        object_name: rec.name.clone().unwrap_or_default(),
        warning,
        reason: reason.into(),
        message: message.into(),
    }
}

/// Inserts an event in the caller's transaction: it exists exactly when the caller's writes do.
pub async fn record(tx: &mut dyn Tx, ev: NewEvent) -> Result<(), StoreError> {
    tx.insert(&ev.to_record()).await.map(|_| ())
}

/// Records an event on its own (a write set of the group commit, sharing its commit with
/// concurrent writers), for outcomes whose own transaction was rolled back (a refused
/// request). Failures are logged, never returned: an event is not worth failing the caller
/// for.
pub async fn record_now(store: &dyn Store, ev: NewEvent) {
    let result = store
        .apply(WriteSet::of(vec![Write::Insert(ev.to_record())]))
        .await;
    if let Err(e) = result {
        tracing::warn!(
            kind = %ev.object_kind,
            id = %ev.object_id,
            reason = %ev.reason,
            error = %e,
            "could not record event"
        );
    }
}

/// The state part of a stored state enum name: `SUBNET_STATE_DELETE_FAILED` → `DELETE_FAILED`.
pub fn short_state(state: &str) -> &str {
    state.rsplit_once("_STATE_").map_or(state, |(_, s)| s)
}

/// The CamelCase event reason of a state: `SUBNET_STATE_DELETE_FAILED` → `DeleteFailed`.
pub fn state_reason(state: &str) -> String {
    let mut out = String::with_capacity(state.len());
    for word in short_state(state).split('_').filter(|w| !w.is_empty()) {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(chars.map(|c| c.to_ascii_lowercase()));
        }
    }
    out
}

/// Whether entering `state` deserves a WARNING (a failure).
pub fn is_warning_state(state: &str) -> bool {
    matches!(short_state(state), "FAILED" | "DELETE_FAILED")
}

/// `status.state` of a stored body ("" when unset).
fn state_of(body: &Value) -> &str {
    body.get("status")
        .and_then(|s| s.get("state"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The event for a state change between two versions of an object, if its state changed:
/// reason = the new state in CamelCase, message = the new status message or "state A → B".
pub fn transition(before: &Record, after: &Record) -> Option<NewEvent> {
    if after.kind == Kind::Event {
        return None;
    }
    let (old, new) = (state_of(&before.body), state_of(&after.body));
    if old == new || new.is_empty() {
        return None;
    }
    let message_of = |r: &Record| {
        r.body
            .get("status")
            .and_then(|s| s.get("message"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (old_message, new_message) = (message_of(before), message_of(after));
    // A message left over from the previous state would mislead; then say what changed.
    let message = if !new_message.is_empty() && new_message != old_message {
        new_message
    } else {
        let from = if old.is_empty() {
            "UNSPECIFIED"
        } else {
            short_state(old)
        };
        format!("state {from} → {}", short_state(new))
    };
    Some(for_record(
        after,
        is_warning_state(new),
        state_reason(new),
        message,
    ))
}

/// The `Deleted` event of an object whose row is gone. A Tenant's is the provider's: nothing
/// of a removed tenant stays visible to a new tenant of the same name.
pub fn deleted(rec: &Record) -> NewEvent {
    let mut ev = for_record(
        rec,
        false,
        REASON_DELETED,
        format!("{} '{}' was deleted", rec.kind, rec.label()),
    );
    if rec.kind == Kind::Tenant {
        ev.tenant = String::new();
    }
    ev
}

/// Default of `--max-events-per-tenant`: events kept per tenant; beyond it the oldest go.
pub const DEFAULT_MAX_EVENTS_PER_TENANT: usize = 2000;

/// Events removed per transaction when trimming or removing a tenant's events.
const TRIM_BATCH: i64 = 1000;

/// Removes the oldest events of `tenant` beyond `cap`; returns how many.
pub async fn trim_tenant(store: &dyn Store, tenant: &str, cap: usize) -> Result<u64, StoreError> {
    let cap = i64::try_from(cap).unwrap_or(i64::MAX);
    let mut removed = 0u64;
    loop {
        let count = store
            .list(&ListQuery {
                tenant: Some(tenant.to_string()),
                limit: 1,
                ..ListQuery::all(Kind::Event)
            })
            .await?
            .total;
        let excess = count.saturating_sub(cap);
        if excess <= 0 {
            return Ok(removed);
        }
        // Oldest first: a list's order is insertion order.
        let mut tx = store.begin().await?;
        let oldest = tx
            .list(&ListQuery {
                tenant: Some(tenant.to_string()),
                limit: excess.min(TRIM_BATCH),
                ..ListQuery::all(Kind::Event)
            })
            .await?;
        for ev in &oldest.items {
            remove_event(&mut *tx, &ev.id).await?;
        }
        tx.commit().await?;
        removed += oldest.items.len() as u64;
        if oldest.items.is_empty() {
            return Ok(removed);
        }
    }
}

/// Removes one event; one already gone (the pruner of another replica, or its expiry) is fine.
async fn remove_event(tx: &mut dyn Tx, id: &str) -> Result<(), StoreError> {
    match tx.remove(id).await {
        Err(StoreError::NotFound(_)) => Ok(()),
        other => other,
    }
}

/// Brings every tenant's events down to `cap` ([`trim_tenant`]); returns how many went.
pub async fn trim(store: &dyn Store, cap: usize) -> Result<u64, StoreError> {
    let mut removed = 0u64;
    let mut offset = 0i64;
    loop {
        let page = store
            .list(&ListQuery {
                offset,
                ..ListQuery::all(Kind::Tenant)
            })
            .await?;
        for tenant in &page.items {
            if let Some(name) = tenant.name.as_deref() {
                removed += trim_tenant(store, name, cap).await?;
            }
        }
        offset += page.items.len() as i64;
        if page.items.is_empty() || offset >= page.total {
            return Ok(removed);
        }
    }
}

/// Removes every event of the tenant named `tenant` inside `tx` (the transaction that removes
/// the tenant's row: a new tenant of the same name starts with none); returns how many.
pub async fn remove_tenant_events(tx: &mut dyn Tx, tenant: &str) -> Result<u64, StoreError> {
    if tenant.is_empty() {
        return Ok(0);
    }
    let mut removed = 0u64;
    loop {
        let page = tx
            .list(&ListQuery {
                tenant: Some(tenant.to_string()),
                limit: TRIM_BATCH,
                ..ListQuery::all(Kind::Event)
            })
            .await?;
        for ev in &page.items {
            remove_event(tx, &ev.id).await?;
        }
        removed += page.items.len() as u64;
        if (page.items.len() as i64) < TRIM_BATCH {
            return Ok(removed);
        }
    }
}

/// Removes events older than `ttl`, at most `batch` per statement, until none is left;
/// returns how many were removed.
pub async fn prune(store: &dyn Store, ttl: Duration, batch: i64) -> Result<u64, StoreError> {
    let age = chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::MAX);
    let cutoff = Utc::now()
        .checked_sub_signed(age)
        .unwrap_or(chrono::DateTime::<Utc>::MIN_UTC);
    let batch = batch.max(1);
    let mut removed = 0u64;
    loop {
        let n = store.prune_events(cutoff, batch).await?;
        removed += n;
        if n < batch.unsigned_abs() {
            return Ok(removed);
        }
    }
}

/// Events removed per statement by the pruner: small enough not to hold the (SQLite) write
/// lock for long.
const PRUNE_BATCH: i64 = 1000;

/// Prunes expired events, and each tenant's beyond `cap_per_tenant`, every `interval` until
/// shutdown (the controller runtime spawns it).
pub async fn prune_loop(
    store: Arc<dyn Store>,
    ttl: Duration,
    cap_per_tenant: usize,
    interval: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(10)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if *shutdown.borrow() {
            return;
        }
        tokio::select! {
            _ = ticker.tick() => {
                match prune(&*store, ttl, PRUNE_BATCH).await {
                    Ok(0) => {}
                    Ok(n) => tracing::debug!(removed = n, "pruned expired events"),
                    Err(e) => tracing::warn!(error = %e, "pruning events failed"),
                }
                match trim(&*store, cap_per_tenant).await {
                    Ok(0) => {}
                    Ok(n) => tracing::debug!(removed = n, cap = cap_per_tenant, "trimmed tenants' events to their cap"),
                    Err(e) => tracing::warn!(error = %e, "trimming tenants' events failed"),
                }
            }
            changed = shutdown.changed() => if changed.is_err() { return },
        }
    }
}

/// The event a write of `next` over `before` implies: `Deleted` when the write removes the row
/// (deleted, no finalizers left: see [`Tx::update`]), else a state transition, if any.
fn implied_event(before: &Record, next: &Record) -> Option<NewEvent> {
    if next.deleted_at.is_some() && next.finalizers.is_empty() {
        Some(deleted(next))
    } else {
        transition(before, next)
    }
}

/// Writes `next` in `tx` like [`Tx::update`] and records the event the write implies: a state
/// transition relative to `before`, or `Deleted` when the write removes the row.
pub async fn update(
    tx: &mut dyn Tx,
    before: &Record,
    next: &Record,
) -> Result<Option<Record>, StoreError> {
    let written = tx.update(next).await?;
    if let Some(ev) = implied_event(before, next) {
        record(tx, ev).await?;
    }
    Ok(written)
}

/// Like [`update`], as a write set of its own committed with concurrent ones
/// ([`Store::apply`], group commit): the status write of a reconcile. Returns the record as
/// written (None: the write removed the row).
pub async fn apply_update(
    store: &dyn Store,
    before: &Record,
    next: &Record,
) -> Result<Option<Record>, StoreError> {
    apply_update_with(store, before, next, Vec::new()).await
}

/// [`apply_update`], also recording `extra` events in the same write set (what the write
/// means besides its state change, e.g. a phase that completed).
pub async fn apply_update_with(
    store: &dyn Store,
    before: &Record,
    next: &Record,
    extra: Vec<NewEvent>,
) -> Result<Option<Record>, StoreError> {
    let mut writes = vec![Write::Update(next.clone())];
    if let Some(ev) = implied_event(before, next) {
        writes.push(Write::Insert(ev.to_record()));
    }
    writes.extend(extra.iter().map(|ev| Write::Insert(ev.to_record())));
    let applied = store.apply(WriteSet::of(writes)).await?;
    Ok(applied.into_iter().next().flatten())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_reasons_are_camel_case() {
        assert_eq!(state_reason("SUBNET_STATE_READY"), "Ready");
        assert_eq!(state_reason("SUBNET_STATE_DELETE_FAILED"), "DeleteFailed");
        assert_eq!(state_reason("EXTERNAL_IP_STATE_ALLOCATED"), "Allocated");
        assert_eq!(state_reason("COMPUTE_INSTANCE_STATE_RUNNING"), "Running");
        assert_eq!(state_reason("NAT_GATEWAY_STATE_DELETING"), "Deleting");
        assert_eq!(state_reason("PENDING"), "Pending");
    }

    #[test]
    fn failures_are_warnings() {
        assert!(is_warning_state("SUBNET_STATE_FAILED"));
        assert!(is_warning_state("SECURITY_GROUP_STATE_DELETE_FAILED"));
        assert!(!is_warning_state("SUBNET_STATE_READY"));
        assert!(!is_warning_state("SUBNET_STATE_DELETING"));
    }

    fn subnet(state: &str, message: &str) -> Record {
        let mut r = Record::new(
            Kind::Subnet,
            "t1",
            json!({"status": {"state": state, "message": message}}),
        );
        r.name = Some("s".into());
        r
    }

    #[test]
    fn transition_only_when_state_changes() {
        let a = subnet("SUBNET_STATE_PENDING", "");
        let mut b = a.clone();
        b.body = json!({"status": {"state": "SUBNET_STATE_READY"}});
        let ev = transition(&a, &b).expect("state changed");
        assert_eq!(ev.reason, "Ready");
        assert_eq!(ev.message, "state PENDING → READY");
        assert!(!ev.warning);
        assert_eq!(ev.tenant, "t1");
        assert!(transition(&b, &b).is_none());
        let c = subnet("SUBNET_STATE_FAILED", "segment refused");
        let ev = transition(&b, &c).expect("state changed");
        assert!(ev.warning);
        assert_eq!(ev.message, "segment refused");
    }

    #[test]
    fn provider_object_events_are_provider_only() {
        let ev = NewEvent::normal("t1", Kind::ExternalIpPool, "id", "p", "Ready", "");
        assert_eq!(ev.to_record().tenant, "");
        let ev = NewEvent::warning("t1", Kind::Subnet, "id", "s", "Failed", "x");
        let rec = ev.to_record();
        assert_eq!(rec.tenant, "t1");
        assert_eq!(rec.body["spec"]["type"], "EVENT_TYPE_WARNING");
        assert_eq!(rec.body["spec"]["object_kind"], "Subnet");
        assert!(rec.name.is_none() && rec.labels.is_empty());
    }

    /// The pruner keeps each tenant at its cap, newest first, and leaves tenants under it alone
    /// (with the `trim` call taken out of `prune_loop` this failed with "not trimmed").
    #[tokio::test]
    async fn the_pruner_trims_each_tenant_to_its_cap() {
        let store: Arc<dyn Store> = Arc::new(
            crate::SqliteStore::connect("sqlite::memory:")
                .await
                .expect("in-memory store"),
        );
        let mut tx = store.begin().await.expect("begin");
        for name in ["loud", "quiet"] {
            let mut t = Record::new(Kind::Tenant, "", json!({"spec": {}}));
            t.name = Some(name.into());
            tx.insert(&t).await.expect("tenant");
        }
        tx.commit().await.expect("commit");
        for i in 0..30 {
            record_now(
                &*store,
                NewEvent::normal("loud", Kind::Subnet, "", "s", "Noise", format!("{i}")),
            )
            .await;
        }
        for i in 0..3 {
            record_now(
                &*store,
                NewEvent::normal("quiet", Kind::Subnet, "", "s", "Noise", format!("{i}")),
            )
            .await;
        }
        let (stop, shutdown) = watch::channel(false);
        let pruner = tokio::spawn(prune_loop(
            store.clone(),
            DEFAULT_EVENT_TTL,
            10,
            Duration::from_millis(20),
            shutdown,
        ));
        let events_of = |tenant: &'static str| {
            let store = store.clone();
            async move {
                store
                    .list(&ListQuery {
                        tenant: Some(tenant.into()),
                        ..ListQuery::all(Kind::Event)
                    })
                    .await
                    .expect("list")
                    .items
            }
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while events_of("loud").await.len() > 10 {
            assert!(std::time::Instant::now() < deadline, "not trimmed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let kept: Vec<String> = events_of("loud")
            .await
            .iter()
            .map(|e| {
                e.body["spec"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        let newest: Vec<String> = (20..30).map(|i| i.to_string()).collect();
        assert_eq!(kept, newest, "the newest stay");
        assert_eq!(events_of("quiet").await.len(), 3);
        let _ = stop.send(true);
        let _ = pruner.await;
    }
}
