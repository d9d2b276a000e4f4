//! What the service's unit tests share: a service on an in-memory store, objects of every kind
//! for two tenants and the provider, and callers of every role.

use std::sync::Arc;

use chrono::Utc;
use osac_model::{Kind, Scope};
use osac_store::{Record, Store};
use serde_json::Value;

use super::Service;
use crate::auth::{AuthConfig, Authenticator, Caller, Role};

/// A service on an empty in-memory store, with no tokens and no managers.
pub(super) async fn service() -> Service {
    let store = osac_store::open("sqlite::memory:").await.expect("store");
    let auth = Authenticator::new(
        &AuthConfig::TokenFile("/nonexistent/osac-service-tests-tokens.json".into()),
        store.clone(),
    )
    .await
    .expect("authenticator");
    Service::new(
        store,
        Arc::new(osac_backends::Registry::new()),
        Arc::new(auth),
    )
}

/// Objects of every kind: provider objects and objects of tenants `t1` and `t2`, with labels,
/// annotations (one internal), finalizers, one being deleted; a name two tenants share.
pub(super) async fn seed(store: &dyn Store, body: fn(Kind, usize) -> Value) {
    let mut tx = store.begin().await.expect("begin");
    for kind in Kind::ALL {
        let tenants: &[&str] = match kind.scope() {
            Scope::Provider => &[""],
            Scope::Tenant => &["t1", "t2"],
        };
        for tenant in tenants {
            for n in 0..3 {
                let mut rec = Record::new(kind, *tenant, body(kind, n));
                let owner = if tenant.is_empty() { "p" } else { tenant };
                rec.name = Some(format!("{owner}-{}-{n}", kind.collection()));
                rec.creator = "someone".into();
                rec.labels
                    .insert("colour".into(), ["red", "blue"][n % 2].into());
                rec.annotations.insert("note".into(), format!("{n}"));
                rec.annotations.insert(
                    osac_model::annotations::APPLIED_SPEC_ANNOTATION.into(),
                    "internal".into(),
                );
                rec.finalizers = vec!["osac.io/test".into()];
                if n == 2 {
                    rec.deleted_at = Some(Utc::now());
                }
                tx.insert(&rec).await.expect("insert");
            }
        }
        if kind.scope() == Scope::Tenant {
            for tenant in ["t1", "t2"] {
                let mut rec = Record::new(kind, tenant, body(kind, 7));
                rec.name = Some(format!("shared-{}", kind.collection()));
                tx.insert(&rec).await.expect("insert");
            }
        }
    }
    tx.commit().await.expect("commit");
}

/// Callers of every role on both surfaces, one of a tenant that has no objects.
pub(super) fn callers() -> Vec<(Caller, Scope)> {
    let tenant = |t: &str, role| Caller {
        subject: format!("{t}-user"),
        tenant: Some(t.into()),
        role,
    };
    let provider = Caller {
        subject: "admin".into(),
        tenant: None,
        role: Role::ProviderAdmin,
    };
    vec![
        (provider.clone(), Scope::Provider),
        (provider, Scope::Tenant),
        (tenant("t1", Role::TenantAdmin), Scope::Tenant),
        (tenant("t1", Role::TenantUser), Scope::Tenant),
        (tenant("t1", Role::TenantAdmin), Scope::Provider),
        (tenant("t3", Role::TenantAdmin), Scope::Tenant),
    ]
}
