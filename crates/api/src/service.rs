//! The service layer shared by REST and gRPC: authorization, tenant scoping, one store
//! transaction per write, and dispatch to the per-kind rules in `resources`. A create enters as
//! the proto message of its kind ([`Object`]); REST's JSON bodies are parsed into it, or kept as
//! the changes of an update, at this layer's JSON edge (`write_json`). Replies are the rendered
//! objects; GET and LIST also answer with JSON text (`read_json`, REST) and with messages
//! (`read_message`, gRPC).

use std::sync::Arc;

use chrono::Utc;
use osac_backends::Registry;
use osac_model::quota::QuotaLimits;
use osac_model::{Access, Kind, Scope};
use osac_store::{ListQuery, Record, Store, Tx};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::auth::{Authenticator, Caller, Role};
use crate::error::{ApiError, ApiResult, Code};
use crate::object::{UserMetadata, body_of, to_object, user_metadata};
use crate::request::{RequestCtx, name_taken, not_found, set_state, validate_metadata};
use crate::resources;
use crate::resources::insert_new;
use crate::typed::Object;
pub use read_message::MessagePage;

mod filter_names;
#[cfg(test)]
mod json_tests;
#[cfg(test)]
mod message_tests;
mod read_json;
mod read_message;
#[cfg(test)]
mod test_support;
mod write_json;
#[cfg(test)]
mod write_tests;

/// List parameters as received.
#[derive(Debug, Clone, Default)]
pub struct ListParams {
    pub offset: i64,
    pub limit: i64,
    pub filter: String,
    pub order: String,
}

/// How an update applies its body.
#[derive(Debug, Clone, Copy, Default)]
pub struct UpdateOptions<'a> {
    /// Comma-separated field paths to change; None = every field present in the body.
    pub mask: Option<&'a str>,
    /// Fail with ABORTED unless `metadata.version` in the body is current.
    pub lock: bool,
}

/// A page of objects.
#[derive(Debug, Clone)]
pub struct ListResult {
    pub total: i64,
    pub items: Vec<Value>,
}

/// Default and maximum page sizes.
pub const DEFAULT_LIMIT: i64 = 100;
/// Largest page a list returns.
pub const MAX_LIMIT: i64 = 1000;

/// The API service.
pub struct Service {
    pub store: Arc<dyn Store>,
    pub registry: Arc<Registry>,
    pub auth: Arc<Authenticator>,
    /// Set when the server shuts down: open watches end so a graceful shutdown can finish.
    closing: tokio::sync::watch::Sender<bool>,
    /// Provider default quotas: a tenant's limit where its `spec.quotas` sets none.
    quota_defaults: QuotaLimits,
    /// Tenants' network snapshots for the reachability explainer.
    pub(crate) network_snapshots: crate::reachability::snapshots::NetworkSnapshots,
    /// Caps on open watches (see `watch_slots`).
    pub(crate) watch_limits: crate::watch_slots::WatchLimits,
    /// Watches open now, per credential and tenant.
    pub(crate) watch_slots: Arc<crate::watch_slots::WatchSlots>,
    /// Which refused creates get an event (coalesced per tenant and quota).
    refusals: crate::refusals::RefusalEvents,
}

impl Service {
    /// The service over a store, the manager registry and an authenticator.
    pub fn new(store: Arc<dyn Store>, registry: Arc<Registry>, auth: Arc<Authenticator>) -> Self {
        let network_snapshots =
            crate::reachability::snapshots::NetworkSnapshots::new(store.subscribe());
        Self {
            store,
            registry,
            auth,
            closing: tokio::sync::watch::Sender::new(false),
            quota_defaults: QuotaLimits::default(),
            network_snapshots,
            watch_limits: Default::default(),
            watch_slots: Default::default(),
            refusals: Default::default(),
        }
    }

    /// The same service with other caps on open watches (server configuration).
    pub fn with_watch_limits(mut self, limits: crate::watch_slots::WatchLimits) -> Self {
        self.watch_limits = limits;
        self
    }

    /// The same service with other provider default quotas (server configuration).
    pub fn with_quota_defaults(mut self, defaults: QuotaLimits) -> Self {
        self.quota_defaults = defaults;
        self
    }

    /// The provider default quotas in force.
    pub fn quota_defaults(&self) -> &QuotaLimits {
        &self.quota_defaults
    }

    pub(crate) fn authorize(
        &self,
        caller: &Caller,
        surface: Scope,
        kind: Kind,
        write: bool,
    ) -> ApiResult<()> {
        let denied = || {
            ApiError::denied(format!(
                "role {:?} may not {} {}",
                caller.role,
                if write { "modify" } else { "read" },
                kind.collection()
            ))
        };
        let managed_privately = || {
            ApiError::not_found(format!(
                "{} is managed through the private API",
                kind.collection()
            ))
        };
        match surface {
            Scope::Provider => {
                if !caller.is_provider() {
                    return Err(ApiError::denied(
                        "the private API is for provider administrators",
                    ));
                }
                if kind.access(Scope::Provider) == Access::None {
                    return Err(ApiError::not_found(format!(
                        "{} is not a provider collection",
                        kind.collection()
                    )));
                }
            }
            Scope::Tenant => match kind.access(Scope::Tenant) {
                // Tenants read classes, pools, host types and templates; the inventory and
                // the tenants themselves are the provider's business.
                Access::None => return Err(managed_privately()),
                Access::ReadOnly if write => return Err(managed_privately()),
                Access::ReadOnly => {}
                Access::ReadWrite => {
                    if !caller.is_provider() && caller.tenant.is_none() {
                        return Err(denied());
                    }
                    if write && caller.role == Role::TenantUser && !kind.tenant_user_may_write() {
                        return Err(ApiError::denied(format!(
                            "role tenant-user may not change {}: they are the tenant admin's",
                            kind.collection()
                        )));
                    }
                }
            },
        }
        Ok(())
    }

    /// Tenant scope of a call: Some(tenant) restricts, None = every tenant (provider view).
    pub(crate) fn scope(caller: &Caller, kind: Kind) -> Option<String> {
        match kind.scope() {
            Scope::Provider => Some(String::new()),
            Scope::Tenant => caller
                .tenant
                .clone()
                .or_else(|| (!caller.is_provider()).then(String::new)),
        }
    }

    /// Ends every open watch (server shutdown); watches started later end at once.
    pub fn close_watches(&self) {
        self.closing.send_replace(true);
    }

    /// Resolves when [`Service::close_watches`] was called.
    pub(crate) fn closing(&self) -> tokio::sync::watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// Creates an object from its proto message (as gRPC receives it; REST parses its body
    /// into one with [`Service::create_json`]); the reply is the rendered object.
    pub async fn create(&self, caller: &Caller, surface: Scope, obj: Object) -> ApiResult<Value> {
        let rec = self.create_record(caller, surface, obj).await?;
        self.render_full(surface, &rec).await
    }

    /// [`Service::create`] with the reply as the proto message `M` of the kind (gRPC).
    pub async fn create_message<M: DeserializeOwned>(
        &self,
        caller: &Caller,
        surface: Scope,
        obj: Object,
    ) -> ApiResult<M> {
        let rec = self.create_record(caller, surface, obj).await?;
        self.message_of(surface, &rec).await
    }

    /// The record [`Service::create`] stored.
    async fn create_record(
        &self,
        caller: &Caller,
        surface: Scope,
        obj: Object,
    ) -> ApiResult<Record> {
        let kind = obj.kind();
        self.authorize(caller, surface, kind, true)?;
        let meta = obj.user_metadata();
        let tenant = owning_tenant(caller, kind, &meta)?;
        obj.check_bounds()?;
        self.insert(caller, obj, meta, tenant).await
    }

    /// The create of an authorized object within the size limits, owned by `tenant`: the
    /// metadata rules, then the insert in one transaction; the committed record.
    async fn insert(
        &self,
        caller: &Caller,
        obj: Object,
        meta: UserMetadata,
        tenant: String,
    ) -> ApiResult<Record> {
        let kind = obj.kind();
        crate::reserved::check_create(kind, &meta.labels, &meta.annotations)?;
        validate_metadata(kind, &meta)?;
        let mut tx = self.store.begin_shared().await?;
        if has_kind_wide_rules(kind) {
            tx.lock_kind(kind).await?;
        }
        let mut locked_tenant = None;
        if kind.scope() == Scope::Tenant {
            // The tenant's row stays share-locked until commit: a concurrent tenant delete
            // either sees this object or makes this create fail. (Quota counts are ordered by
            // their own lock.)
            match resources::tenant::lock_live(tx.as_mut(), &tenant).await {
                Ok(t) => locked_tenant = Some(t),
                // A token of a deleted tenant must not create objects nobody owns.
                Err(e)
                    if e.code == Code::NotFound
                        && !(caller.is_provider() && caller.tenant.is_none()) =>
                {
                    return Err(ApiError::denied(format!(
                        "the tenant of this token, '{tenant}', does not exist"
                    )));
                }
                Err(e) => return Err(e),
            }
        }
        let mut cx = RequestCtx::new(tx.as_mut(), caller, tenant.clone(), &self.registry);
        cx.quota_defaults = self.quota_defaults;
        if let Some(t) = &locked_tenant {
            cx.tenant_limits = Some((
                tenant.clone(),
                crate::quota::limits_of(&self.quota_defaults, t)?,
            ));
            cx.tenant_id = Some(t.id.clone());
        }
        let inserted = match insert_new(&mut cx, obj).await {
            Ok(rec) => resources::external_ip::reserve_in_pools(&mut cx)
                .await
                .map(|()| rec),
            Err(e) => Err(e),
        };
        let rec = match inserted {
            Ok(rec) => rec,
            Err(e) => {
                drop(tx);
                if e.code == Code::ResourceExhausted {
                    let tenant_key = locked_tenant.as_ref().map_or(tenant.as_str(), |t| &t.id);
                    self.record_refusal(&tenant, tenant_key, kind, &meta, &e)
                        .await;
                }
                return Err(e);
            }
        };
        crate::default_label::check(tx.as_mut(), caller, &rec, None).await?;
        tx.commit().await?;
        Ok(rec)
    }

    /// Records the event of a create refused for lack of capacity (a quota, an address pool),
    /// coalesced: one per tenant, reason and quota per interval (see `refusals`).
    async fn record_refusal(
        &self,
        tenant: &str,
        tenant_key: &str,
        kind: Kind,
        meta: &UserMetadata,
        e: &ApiError,
    ) {
        let (reason, what) = if crate::quota::is_quota_error(e) {
            // "quota <name> of tenant …": one window per quota.
            let quota = e.message.split_whitespace().nth(1).unwrap_or_default();
            ("QuotaExceeded", quota.to_string())
        } else {
            ("ExternalIPPoolExhausted", kind.collection().to_string())
        };
        let Some(unrecorded) = self
            .refusals
            .admit(&format!("{tenant_key}/{reason}/{what}"))
        else {
            return;
        };
        let event = osac_store::events::NewEvent::warning(
            tenant,
            kind,
            "",
            meta.name.clone().unwrap_or_default(),
            reason,
            crate::refusals::with_count(&e.message, unrecorded),
        );
        osac_store::events::record_now(&*self.store, event).await;
    }

    /// Reads one object by id or name.
    pub async fn get(
        &self,
        caller: &Caller,
        surface: Scope,
        kind: Kind,
        key: &str,
    ) -> ApiResult<Value> {
        self.authorize(caller, surface, kind, false)?;
        let scope = Self::scope(caller, kind);
        let rec = self.find(kind, scope.as_deref(), key).await?;
        if surface == Scope::Tenant && !resources::publicly_visible(kind, &rec) {
            return Err(not_found(kind, key));
        }
        self.render_full(surface, &rec).await
    }

    /// Lists objects.
    pub async fn list(
        &self,
        caller: &Caller,
        surface: Scope,
        kind: Kind,
        p: ListParams,
    ) -> ApiResult<ListResult> {
        let query = self.list_query(caller, surface, kind, p).await?;
        let page = self.store.list(&query).await?;
        let mut items = Vec::with_capacity(page.items.len());
        for r in &page.items {
            items.push(self.render_full(surface, r).await?);
        }
        Ok(ListResult {
            total: page.total,
            items,
        })
    }

    /// The store query of a caller's list: authorized, checked, scoped to what the caller may
    /// see (tenant, public filter), names compared with reference fields replaced by ids, with
    /// the page bounded.
    pub(crate) async fn list_query(
        &self,
        caller: &Caller,
        surface: Scope,
        kind: Kind,
        p: ListParams,
    ) -> ApiResult<ListQuery> {
        self.authorize(caller, surface, kind, false)?;
        if p.limit < 0 || p.offset < 0 {
            return Err(ApiError::invalid("offset and limit must not be negative"));
        }
        if p.limit > MAX_LIMIT {
            return Err(ApiError::invalid(format!(
                "limit: at most {MAX_LIMIT} objects per page (page with offset)"
            )));
        }
        let limit = if p.limit == 0 { DEFAULT_LIMIT } else { p.limit };
        let filter = self
            .with_reference_ids(caller, surface, kind, &p.filter)
            .await?;
        let filter = Self::effective_filter(surface, kind, &filter)?;
        osac_model::bounds::check_query("order", &p.order)?;
        if !p.order.trim().is_empty() {
            let terms = osac_model::filter::parse_order(&p.order)
                .map_err(|e| ApiError::invalid(format!("order: {e}")))?;
            if surface == Scope::Tenant {
                resources::check_public_paths(kind, "order", terms.iter().map(|t| &t.path))?;
            }
        }
        Ok(ListQuery {
            kind,
            tenant: Self::scope(caller, kind),
            filter,
            order: p.order,
            offset: p.offset,
            limit,
        })
    }

    /// The caller's filter, checked, combined with what the surface may show of the kind.
    pub(crate) fn effective_filter(surface: Scope, kind: Kind, filter: &str) -> ApiResult<String> {
        osac_model::bounds::check_query("filter", filter)?;
        let mut filter = filter.trim().to_string();
        if !filter.is_empty() {
            let expr = osac_model::filter::parse_filter(&filter).map_err(|e| {
                let hint = osac_model::filter::label_shorthand(&filter)
                    .map(|f| format!(" (the filter language writes this as {f})"))
                    .unwrap_or_default();
                ApiError::invalid(format!("filter: {e}{hint}"))
            })?;
            if surface == Scope::Tenant {
                // Tenants filter only on what they can see of provider objects.
                resources::check_public_paths(kind, "filter", expr.paths())?;
            }
        }
        if surface == Scope::Tenant
            && let Some(extra) = resources::public_filter(kind)
        {
            filter = if filter.is_empty() {
                extra.to_string()
            } else {
                format!("({extra}) && ({filter})")
            };
        }
        Ok(filter)
    }

    /// Updates the mutable fields of an object from its proto message (as gRPC receives it;
    /// REST's partial bodies go through [`Service::update_json`]). The message is applied to
    /// the stored object in its JSON form, field by field, so it is written as JSON once here.
    /// The reply is the rendered object.
    pub async fn update(
        &self,
        caller: &Caller,
        surface: Scope,
        key: &str,
        body: Object,
        how: UpdateOptions<'_>,
    ) -> ApiResult<Value> {
        let rec = self.update_record(caller, surface, key, body, how).await?;
        self.render_full(surface, &rec).await
    }

    /// [`Service::update`] with the reply as the proto message `M` of the kind (gRPC).
    pub async fn update_message<M: DeserializeOwned>(
        &self,
        caller: &Caller,
        surface: Scope,
        key: &str,
        body: Object,
        how: UpdateOptions<'_>,
    ) -> ApiResult<M> {
        let rec = self.update_record(caller, surface, key, body, how).await?;
        self.message_of(surface, &rec).await
    }

    /// The record [`Service::update`] stored.
    async fn update_record(
        &self,
        caller: &Caller,
        surface: Scope,
        key: &str,
        body: Object,
        how: UpdateOptions<'_>,
    ) -> ApiResult<Record> {
        let kind = body.kind();
        self.authorize(caller, surface, kind, true)?;
        self.apply_update(caller, kind, key, body.request_json()?, how)
            .await
    }

    /// The update of an authorized caller: `body` (the JSON form of the changes, its
    /// `metadata` well-typed) applied to the stored object under the mask, checked, stored;
    /// the committed record.
    async fn apply_update(
        &self,
        caller: &Caller,
        kind: Kind,
        key: &str,
        body: Value,
        how: UpdateOptions<'_>,
    ) -> ApiResult<Record> {
        let UpdateOptions { mask, lock } = how;
        let scope = Self::scope(caller, kind);
        let meta = user_metadata(&body);
        validate_metadata(kind, &meta)?;
        let mut tx = self.store.begin_shared().await?;
        if has_kind_wide_rules(kind) {
            tx.lock_kind(kind).await?;
        }
        let found = find_in_tx(tx.as_mut(), kind, scope.as_deref(), key).await?;
        if kind == Kind::SecurityGroup {
            // A group of a tenant being deleted is not changed any more (the rule quota's
            // count is ordered by its own lock, in `quota::check_rules_update`).
            resources::tenant::lock_live(tx.as_mut(), &found.tenant).await?;
        }
        let current = tx
            .lock(&found.id)
            .await?
            .ok_or_else(|| not_found(kind, key))?;
        if lock {
            match meta.version {
                Some(v) if v == current.version => {}
                Some(v) => {
                    return Err(ApiError::new(
                        Code::Aborted,
                        format!(
                            "{} '{}' changed: version {v} is stale (current {})",
                            kind,
                            current.label(),
                            current.version
                        ),
                    ));
                }
                None => {
                    return Err(ApiError::invalid(
                        "metadata.version is required with lock=true",
                    ));
                }
            }
        }
        if current.deleted_at.is_some() {
            return Err(ApiError::precondition(format!(
                "{} '{}' is being deleted",
                kind,
                current.label()
            )));
        }
        let old_obj = to_object(&current, true);
        let mut new_obj = osac_model::update::apply(&old_obj, &body, mask)?;
        osac_model::bounds::check_object(&new_obj)?;
        let mut cx = RequestCtx::new(tx.as_mut(), caller, current.tenant.clone(), &self.registry);
        resources::canonicalize_update(&mut cx, kind, &current, &mut new_obj).await?;
        osac_model::update::check_immutable(kind, &old_obj, &new_obj)?;
        let new_meta = user_metadata(&new_obj);
        validate_metadata(kind, &new_meta)?;
        if kind == Kind::Tenant {
            resources::tenant::check_rename(&current, new_meta.name.as_deref())?;
        }
        let mut next = current.clone();
        next.name = new_meta.name.clone();
        next.labels = crate::reserved::merge_update(
            kind,
            "metadata.labels",
            &current.labels,
            new_meta.labels,
        )?;
        next.annotations = crate::reserved::merge_update(
            kind,
            "metadata.annotations",
            &current.annotations,
            new_meta.annotations,
        )?;
        for (k, v) in &current.annotations {
            if crate::object::is_internal_annotation(k) {
                next.annotations.insert(k.clone(), v.clone());
            }
        }
        let mut new_body = body_of(&new_obj);
        let mut cx = RequestCtx::new(tx.as_mut(), caller, current.tenant.clone(), &self.registry);
        cx.quota_defaults = self.quota_defaults;
        resources::prepare_update(&mut cx, kind, &current, &mut new_body).await?;
        crate::quota::check_rules_update(&mut cx, &current, &new_body).await?;
        next.body = new_body;
        let updated = tx
            .update(&next)
            .await
            .map_err(|e| name_taken(e, kind, &new_meta.name, &current.tenant))?
            .ok_or_else(|| not_found(kind, key))?;
        crate::default_label::check(tx.as_mut(), caller, &updated, Some(&current)).await?;
        tx.commit().await?;
        Ok(updated)
    }

    /// Starts the two-phase deletion of an object (idempotent).
    pub async fn delete(
        &self,
        caller: &Caller,
        surface: Scope,
        kind: Kind,
        key: &str,
    ) -> ApiResult<()> {
        self.authorize(caller, surface, kind, true)?;
        let scope = Self::scope(caller, kind);
        let mut tx = self.store.begin_shared().await?;
        let found = find_in_tx(tx.as_mut(), kind, scope.as_deref(), key).await?;
        let current = tx
            .lock(&found.id)
            .await?
            .ok_or_else(|| not_found(kind, key))?;
        if current.deleted_at.is_some() {
            return Ok(());
        }
        let mut cx = RequestCtx::new(tx.as_mut(), caller, current.tenant.clone(), &self.registry);
        resources::check_delete(&mut cx, &current).await?;
        let mut next = current.clone();
        next.deleted_at = Some(Utc::now());
        set_state(&mut next.body, kind, "DELETING");
        // With its `Deleting` (or, when no finalizer holds it, `Deleted`) event.
        let gone = osac_store::events::update(tx.as_mut(), &current, &next)
            .await?
            .is_none();
        if gone {
            let mut cx =
                RequestCtx::new(tx.as_mut(), caller, current.tenant.clone(), &self.registry);
            resources::after_remove(&mut cx, &current).await?;
        }
        tx.commit().await?;
        // A tenant being deleted takes its tokens with it.
        if kind == Kind::Tenant {
            self.revoke_tenant_tokens(&current.id).await;
        }
        Ok(())
    }

    /// [`Service::render`] plus what is counted at read time (a Tenant's quota usage).
    pub(crate) async fn render_full(&self, surface: Scope, rec: &Record) -> ApiResult<Value> {
        let mut obj = self.render(surface, rec);
        if rec.kind == Kind::Tenant {
            crate::quota::add_usage(&*self.store, &self.quota_defaults, rec, &mut obj).await?;
        }
        Ok(obj)
    }

    pub(crate) fn render(&self, surface: Scope, rec: &Record) -> Value {
        let obj = to_object(rec, surface == Scope::Provider);
        match surface {
            Scope::Tenant => resources::public_view(rec.kind, obj),
            Scope::Provider => obj,
        }
    }

    async fn find(&self, kind: Kind, scope: Option<&str>, key: &str) -> ApiResult<Record> {
        if let Some(rec) = self.store.get(key).await?
            && rec.kind == kind
            && scope.is_none_or(|t| t == rec.tenant)
        {
            return Ok(rec);
        }
        if !may_be_name(key) {
            return Err(not_found(kind, key));
        }
        let page = self.store.list(&by_name(kind, scope, key)).await?;
        only_match(page.items, kind, key)
    }
}

/// Whether `key` could be an object name at all (letters, digits, '-', '_', '.'): anything
/// else names nothing, and is answered NOT_FOUND without building a name query from it.
pub(crate) fn may_be_name(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// The query of the objects of `kind` named `key` in `scope` (None: every tenant); two at
/// most, enough to tell a unique name from an ambiguous one.
pub(crate) fn by_name(kind: Kind, scope: Option<&str>, key: &str) -> ListQuery {
    ListQuery {
        kind,
        tenant: scope.map(str::to_string),
        filter: format!(
            "this.metadata.name == {}",
            serde_json::to_string(key).unwrap_or_default()
        ),
        order: String::new(),
        offset: 0,
        limit: 2,
    }
}

/// The one object a name lookup ([`by_name`]) found: NOT_FOUND for none, INVALID_ARGUMENT for
/// a name several tenants use.
pub(crate) fn only_match<T>(found: Vec<T>, kind: Kind, key: &str) -> ApiResult<T> {
    if found.len() > 1 {
        return Err(ApiError::invalid(format!(
            "name '{key}' matches objects in several tenants; use the id"
        )));
    }
    found.into_iter().next().ok_or_else(|| not_found(kind, key))
}

/// Finds an object by id or name inside a transaction.
pub async fn find_in_tx(
    tx: &mut dyn Tx,
    kind: Kind,
    scope: Option<&str>,
    key: &str,
) -> ApiResult<Record> {
    if let Some(rec) = tx.get(key).await?
        && rec.kind == kind
        && scope.is_none_or(|t| t == rec.tenant)
    {
        return Ok(rec);
    }
    if let Some(t) = scope {
        return tx
            .find_by_name(kind, t, key)
            .await?
            .ok_or_else(|| not_found(kind, key));
    }
    let filter = format!(
        "this.metadata.name == {}",
        serde_json::to_string(key).unwrap_or_default()
    );
    let page = tx
        .list(&ListQuery {
            kind,
            tenant: None,
            filter,
            order: String::new(),
            offset: 0,
            limit: 2,
        })
        .await?;
    match page.items.len() {
        1 => page
            .items
            .into_iter()
            .next()
            .ok_or_else(|| not_found(kind, key)),
        0 => Err(not_found(kind, key)),
        _ => Err(ApiError::invalid(format!(
            "name '{key}' matches objects in several tenants; use the id"
        ))),
    }
}

/// The tenant that owns an object `caller` creates: the caller's own, or for a provider admin
/// the one the object names ("" for provider objects).
fn owning_tenant(caller: &Caller, kind: Kind, meta: &UserMetadata) -> ApiResult<String> {
    match kind.scope() {
        Scope::Provider => Ok(String::new()),
        Scope::Tenant => match (&caller.tenant, &meta.tenant) {
            (Some(t), _) => Ok(t.clone()),
            (None, Some(t)) if caller.is_provider() => Ok(t.clone()),
            _ => Err(ApiError::invalid(
                "metadata.tenant is required when a provider admin creates a tenant object",
            )),
        },
    }
}

/// Kinds whose rules span every object of the kind (pool CIDRs never overlap, exactly one
/// default NetworkClass): their writes take the store's kind lock, which also orders
/// transactions of other processes sharing a PostgreSQL database.
fn has_kind_wide_rules(kind: Kind) -> bool {
    matches!(kind, Kind::NetworkClass | Kind::ExternalIpPool)
}
