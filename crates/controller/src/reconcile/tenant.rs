//! Tenant: READY once its default networking is ready. Creating the defaults is a later issue;
//! [`DefaultNetworking`] is the seam it plugs into, and [`NotConfigured`] the no-op used now.

use async_trait::async_trait;
use osac_model::pb;
use osac_store::{Record, Store, StoreError};

use super::{Action, Ctx, Object, ReconcileError, decode, finalize, has_finalizer, save};

super::object!(pb::Tenant, pb::TenantStatus,
    pending: pb::TenantState::Pending, ready: pb::TenantState::Ready,
    failed: pb::TenantState::Failed, deleting: pb::TenantState::Deleting,
    delete_failed: None);

/// Condition type reported on tenants.
pub const DEFAULT_NETWORKING_READY: &str = "TENANT_CONDITION_TYPE_DEFAULT_NETWORKING_READY";

/// The outcome of the default-networking step, as the tenant's condition shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultNetworkingStatus {
    /// TRUE: ready (tenant READY); FALSE: failed (tenant FAILED); UNKNOWN: in progress.
    pub status: pb::ConditionStatus,
    /// CamelCase reason, e.g. `SubnetProvisioningFailed`.
    pub reason: String,
    /// Human message naming the resource.
    pub message: String,
}

/// Checks (and later: drives) a tenant's default networking. Follows the reconciler contract:
/// idempotent, reads the store, never blocks.
#[async_trait]
pub trait DefaultNetworking: Send + Sync {
    /// The condition for `tenant`.
    async fn status(
        &self,
        store: &dyn Store,
        tenant: &Record,
    ) -> Result<DefaultNetworkingStatus, StoreError>;
}

/// No default networking configured yet: the condition is TRUE with reason `NotConfigured`.
pub struct NotConfigured;

#[async_trait]
impl DefaultNetworking for NotConfigured {
    async fn status(
        &self,
        _store: &dyn Store,
        _tenant: &Record,
    ) -> Result<DefaultNetworkingStatus, StoreError> {
        Ok(DefaultNetworkingStatus {
            status: pb::ConditionStatus::True,
            reason: "NotConfigured".to_string(),
            message: "default networking is not configured for this deployment".to_string(),
        })
    }
}

fn now() -> pbjson_types::Timestamp {
    let t = chrono::Utc::now();
    pbjson_types::Timestamp {
        seconds: t.timestamp(),
        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

pub(crate) async fn reconcile(ctx: &Ctx, rec: Record) -> Result<Action, ReconcileError> {
    if rec.deleted_at.is_some() {
        return if has_finalizer(&rec) {
            finalize(ctx, &rec).await
        } else {
            Ok(Action::Done)
        };
    }
    let mut tenant: pb::Tenant = decode(&rec)?;
    let step = ctx.default_networking.status(&*ctx.store, &rec).await?;
    let (state, message) = match step.status {
        pb::ConditionStatus::True => (pb::Tenant::READY, String::new()),
        pb::ConditionStatus::False => (pb::Tenant::FAILED, step.message.clone()),
        _ => (pb::Tenant::PENDING, step.message.clone()),
    };
    let status = tenant.status.get_or_insert_with(Default::default);
    let previous = status
        .conditions
        .iter()
        .position(|c| c.r#type == DEFAULT_NETWORKING_READY);
    let transition = match previous.map(|i| &status.conditions[i]) {
        Some(c) if c.status == step.status as i32 => c.last_transition_time,
        _ => Some(now()),
    };
    let condition = pb::Condition {
        r#type: DEFAULT_NETWORKING_READY.to_string(),
        status: step.status as i32,
        reason: step.reason,
        message: step.message,
        last_transition_time: transition,
    };
    match previous {
        Some(i) => status.conditions[i] = condition,
        None => status.conditions.push(condition),
    }
    tenant.set_state(state);
    tenant.set_message(message);
    save(ctx, &rec, rec.clone(), &tenant).await?;
    Ok(if state == pb::Tenant::READY {
        Action::Done
    } else {
        Action::Retry
    })
}
