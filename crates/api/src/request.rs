//! One write request as the per-kind rules see it: the open transaction, the caller, the tenant
//! and what the request has done so far ([`RequestCtx`]), and the helpers every write path uses
//! (metadata checks, initial state, the errors for a missing or taken name). The service opens
//! the transaction and builds the context; `resources` reads and extends it. This module depends
//! on neither, so the layers import downward only: service → resources → request.

use std::collections::HashMap;

use osac_backends::Registry;
use osac_model::Kind;
use osac_model::quota::QuotaLimits;
use osac_store::{StoreError, Tx};
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, Code};
use crate::object::UserMetadata;

/// What a per-kind rule needs while a write transaction is open.
pub struct RequestCtx<'a> {
    pub tx: &'a mut dyn Tx,
    pub caller: &'a Caller,
    /// Tenant that owns the object being written ("" for provider objects).
    pub tenant: String,
    pub registry: &'a Registry,
    /// Ids inserted earlier in this transaction (onboarding defaults, auto-provisioned
    /// ExternalIPs): they count as present in their initial state, so the objects created
    /// with them may reference them before they are reconciled.
    pub created: Vec<String>,
    /// Events (reason, message) about the object being created, recorded once it has an id.
    pub notes: Vec<(&'static str, String)>,
    /// Provider default quotas (set with `Service::with_quota_defaults`).
    pub quota_defaults: QuotaLimits,
    /// The quota limits of a tenant whose row this transaction already read (and locked), so
    /// the quota checks do not read it again.
    pub tenant_limits: Option<(String, QuotaLimits)>,
    /// The id of that tenant (quota locks are keyed by the tenant's id).
    pub tenant_id: Option<String>,
    /// Addresses taken from each ExternalIPPool by the ExternalIPs inserted in this
    /// transaction: reserved in the pools' counters as the transaction's last step
    /// (`resources::external_ip::reserve_in_pools`), so each pool row is locked only from
    /// then to the commit, not for the whole request.
    pub pool_reservations: std::collections::BTreeMap<String, i64>,
    /// Status the per-kind create rule chose for the object being created (an
    /// ExternalIPAttachment's `target_name`); the stored status starts from it.
    pub initial_status: Option<Value>,
}

impl<'a> RequestCtx<'a> {
    /// The context of a write by `caller` to objects of `tenant` ("" for provider objects).
    pub fn new(
        tx: &'a mut dyn Tx,
        caller: &'a Caller,
        tenant: String,
        registry: &'a Registry,
    ) -> Self {
        RequestCtx {
            tx,
            caller,
            tenant,
            registry,
            created: Vec::new(),
            notes: Vec::new(),
            quota_defaults: QuotaLimits::default(),
            tenant_limits: None,
            tenant_id: None,
            pool_reservations: Default::default(),
            initial_status: None,
        }
    }
}

/// Sets `status.state` of `body` to `{prefix}_{state}` for kinds with a state.
pub(crate) fn set_state(body: &mut Value, kind: Kind, state: &str) {
    let Some(prefix) = kind.state_prefix() else {
        return;
    };
    if let Some(obj) = body.as_object_mut() {
        let status = obj.entry("status").or_insert_with(|| json!({}));
        if let Some(s) = status.as_object_mut() {
            s.insert("state".into(), json!(format!("{prefix}_{state}")));
        }
    }
}

/// NOT_FOUND for a kind and the key the caller used.
pub fn not_found(kind: Kind, key: &str) -> ApiError {
    ApiError::not_found(format!("{} '{key}' does not exist", kind.display_name()))
}

/// ALREADY_EXISTS when an insert or rename hit the unique name of its kind and tenant.
pub(crate) fn name_taken(
    e: StoreError,
    kind: Kind,
    name: &Option<String>,
    tenant: &str,
) -> ApiError {
    match (&e, name) {
        (StoreError::AlreadyExists(c), Some(n))
            if c.contains("objects_name") || c.contains("UNIQUE") || c.contains("name") =>
        {
            let scope = if tenant.is_empty() {
                String::new()
            } else {
                format!(" in tenant '{tenant}'")
            };
            ApiError::new(
                Code::AlreadyExists,
                format!("{} named '{n}' already exists{scope}", kind.display_name()),
            )
        }
        _ => e.into(),
    }
}

/// Checks the user metadata of a write: the name rule of its kind, the label rules.
pub(crate) fn validate_metadata(kind: Kind, meta: &UserMetadata) -> ApiResult<()> {
    if let Some(n) = &meta.name {
        osac_model::labels::check_name_of(kind, "metadata.name", n)?;
    }
    let labels: HashMap<String, String> = meta.labels.clone().into_iter().collect();
    osac_model::labels::check_labels("metadata.labels", &labels)?;
    Ok(())
}
