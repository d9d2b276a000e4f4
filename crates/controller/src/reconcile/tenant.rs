//! Tenant: READY once every object of its default networking is READY (ALLOCATED for the NAT
//! address), FAILED when one of them failed. The API creates the defaults in the tenant's
//! transaction; [`LabelledDefaults`] reports on them as the `DefaultNetworkingReady`
//! condition. A deleted tenant (refused by the API while it has
//! workloads) removes everything it owns, consumers first, then goes, with every event that
//! still carries its name (in the transaction that removes its row).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use osac_model::defaults::{DEFAULT_KINDS, DEFAULT_LABEL, TENANT_TEARDOWN_ORDER, failure_reason};
use osac_model::pb;
use osac_store::{ListQuery, Record, Store, StoreError};

use super::cleanup::request_delete;
use super::conditions::{condition, set_status};
use super::finalizer::{self, Cleanup, Event};
use super::{Action, Object, ReconcileCtx, ReconcileError, decode, describe, save};
use osac_store::events;

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

/// Checks a tenant's default networking. Follows the reconciler contract: idempotent, reads
/// the store, never blocks.
#[async_trait]
pub trait DefaultNetworking: Send + Sync {
    /// The condition for `tenant`.
    async fn status(
        &self,
        store: &dyn Store,
        tenant: &Record,
    ) -> Result<DefaultNetworkingStatus, StoreError>;
}

/// For tests of tenants in isolation: the condition is always TRUE with reason `NotConfigured`.
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

/// The default: the tenant's objects labelled `osac.openshift.io/default: "true"` decide. All
/// READY (ALLOCATED for the NAT address) ⇒ TRUE; one FAILED ⇒ FALSE with the kind's reason and
/// a message naming it; otherwise UNKNOWN naming what is awaited. A tenant without defaults
/// (no default NetworkClass when it was created) has nothing to wait for: TRUE, `NoDefaults`.
pub struct LabelledDefaults;

fn state_suffix(rec: &Record) -> String {
    let state = rec
        .body
        .pointer("/status/state")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("PENDING");
    events::short_state(state).to_string()
}

fn status_message(rec: &Record) -> String {
    rec.body
        .pointer("/status/message")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_string()
}

#[async_trait]
impl DefaultNetworking for LabelledDefaults {
    async fn status(
        &self,
        store: &dyn Store,
        tenant: &Record,
    ) -> Result<DefaultNetworkingStatus, StoreError> {
        let name = tenant.name.clone().unwrap_or_default();
        let mut found = 0;
        let mut waiting = Vec::new();
        for kind in DEFAULT_KINDS {
            let page = store
                .list(&ListQuery {
                    tenant: Some(name.clone()),
                    filter: format!("this.metadata.labels[\"{DEFAULT_LABEL}\"] == \"true\""),
                    ..ListQuery::all(kind)
                })
                .await?;
            for rec in page.items {
                found += 1;
                let state = state_suffix(&rec);
                match state.as_str() {
                    "READY" | "ALLOCATED" => {}
                    "FAILED" | "DELETE_FAILED" => {
                        let why = status_message(&rec);
                        return Ok(DefaultNetworkingStatus {
                            status: pb::ConditionStatus::False,
                            reason: failure_reason(kind).to_string(),
                            message: format!(
                                "default {} failed{}",
                                describe(&rec),
                                if why.is_empty() {
                                    String::new()
                                } else {
                                    format!(": {why}")
                                }
                            ),
                        });
                    }
                    _ => waiting.push(format!("{} ({state})", describe(&rec))),
                }
            }
        }
        Ok(if found == 0 {
            DefaultNetworkingStatus {
                status: pb::ConditionStatus::True,
                reason: "NoDefaults".to_string(),
                message: "the tenant has no default networking (no default NetworkClass when it was created)".to_string(),
            }
        } else if waiting.is_empty() {
            DefaultNetworkingStatus {
                status: pb::ConditionStatus::True,
                reason: "DefaultNetworkingReady".to_string(),
                message: format!("{found} default networking resources are ready"),
            }
        } else {
            DefaultNetworkingStatus {
                status: pb::ConditionStatus::Unknown,
                reason: "DefaultNetworkingProvisioning".to_string(),
                message: format!("waiting for {}", waiting.join(", ")),
            }
        })
    }
}

/// Tenants whose defaults are still settling, by name: any change to an object of such a
/// tenant wakes it (its defaults do not reference it by id).
#[derive(Clone, Default)]
pub struct TenantWatch(Arc<Mutex<HashMap<String, String>>>);

impl TenantWatch {
    fn set(&self, name: &str, id: Option<&str>) {
        if let Ok(mut map) = self.0.lock() {
            match id {
                Some(id) => {
                    map.insert(name.to_string(), id.to_string());
                }
                None => {
                    map.remove(name);
                }
            }
        }
    }

    /// The id of the watching tenant named `tenant`, if any.
    pub(crate) fn watcher(&self, tenant: &str) -> Option<String> {
        if tenant.is_empty() {
            return None;
        }
        self.0.lock().ok().and_then(|m| m.get(tenant).cloned())
    }
}

pub(crate) async fn reconcile(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    if Event::of(&rec) == Event::Released {
        let name = rec.name.clone().unwrap_or_default();
        ctx.tenant_watch.set(&name, None);
    }
    finalizer::reconcile(ctx, rec, |rec| apply(ctx, rec), |rec| teardown(ctx, rec)).await
}

/// The tenant's state follows its default networking ([`DEFAULT_NETWORKING_READY`]).
async fn apply(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    let name = rec.name.clone().unwrap_or_default();
    let mut tenant: pb::Tenant = decode(&rec)?;
    let step = ctx.default_networking.status(&*ctx.store, &rec).await?;
    let (state, message) = match step.status {
        pb::ConditionStatus::True => (pb::Tenant::READY, String::new()),
        pb::ConditionStatus::False => (pb::Tenant::FAILED, step.message.clone()),
        _ => (pb::Tenant::PENDING, step.message.clone()),
    };
    let conditions = &mut tenant
        .status
        .get_or_insert_with(Default::default)
        .conditions;
    let changed = condition(conditions, DEFAULT_NETWORKING_READY).map(|c| c.status)
        != Some(step.status as i32);
    set_status(
        conditions,
        DEFAULT_NETWORKING_READY,
        step.status,
        &step.reason,
        step.message.clone(),
    );
    tenant.set_state(state);
    tenant.set_message(message);
    save(ctx, &rec, rec.clone(), &tenant).await?;
    if changed {
        let event = match step.status {
            pb::ConditionStatus::True => Some(("DefaultNetworkingReady", false)),
            pb::ConditionStatus::False => Some(("DefaultNetworkingFailed", true)),
            _ => None,
        };
        if let Some((reason, warning)) = event {
            let ev = events::for_record(&rec, warning, reason, step.message.clone());
            events::record_now(&*ctx.store, ev).await;
        }
    }
    Ok(match state {
        s if s == pb::Tenant::READY => {
            ctx.tenant_watch.set(&name, None);
            Action::Done
        }
        s if s == pb::Tenant::FAILED => {
            ctx.tenant_watch.set(&name, Some(&rec.id));
            Action::Retry
        }
        _ => {
            ctx.tenant_watch.set(&name, Some(&rec.id));
            Action::After(Duration::from_secs(2))
        }
    })
}

/// One pass of a deleted tenant's teardown: the first tier of [`TENANT_TEARDOWN_ORDER`] that
/// still has objects is deleted (their controllers undo them) and waited for; when nothing is
/// left the tenant goes.
async fn teardown(ctx: &ReconcileCtx, rec: Record) -> Result<Cleanup, ReconcileError> {
    let name = rec.name.clone().unwrap_or_default();
    ctx.tenant_watch.set(&name, Some(&rec.id));
    for tier in TENANT_TEARDOWN_ORDER {
        let mut left = Vec::new();
        for kind in tier.iter().copied() {
            let page = ctx
                .store
                .list(&ListQuery {
                    tenant: Some(name.clone()),
                    limit: 1000,
                    ..ListQuery::all(kind)
                })
                .await?;
            left.extend(page.items);
        }
        if left.is_empty() {
            continue;
        }
        for obj in left.iter().filter(|o| o.deleted_at.is_none()) {
            let mut tx = ctx.store.begin_shared().await?;
            if let Some(current) = tx.lock(&obj.id).await?
                && current.deleted_at.is_none()
            {
                request_delete(&mut *tx, current, format!("deleted with Tenant '{name}'")).await?;
            }
            tx.commit().await?;
        }
        let mut tenant: pb::Tenant = decode(&rec)?;
        let first = &left[0];
        let detail = status_message(first);
        tenant.set_state(pb::Tenant::DELETING);
        tenant.set_message(format!(
            "deleting what the tenant owns: waiting for {} of {} (e.g. {} {}{})",
            left.len(),
            tier.iter()
                .map(|k| k.collection())
                .collect::<Vec<_>>()
                .join("/"),
            describe(first),
            state_suffix(first),
            if detail.is_empty() {
                String::new()
            } else {
                format!(": {detail}")
            }
        ));
        save(ctx, &rec, rec.clone(), &tenant).await?;
        return Ok(Cleanup::NotYet(Action::After(Duration::from_millis(500))));
    }
    ctx.tenant_watch.set(&name, None);
    // The row goes in the same transaction as every event still carrying the tenant's name:
    // a new tenant of the same name starts with none of the old one's records.
    let mut tx = ctx.store.begin_shared().await?;
    let Some(current) = tx.lock(&rec.id).await? else {
        return Ok(Cleanup::Released);
    };
    events::remove_tenant_events(&mut *tx, &name).await?;
    finalizer::release_in(&mut *tx, &current).await?;
    tx.commit().await?;
    Ok(Cleanup::Released)
}
