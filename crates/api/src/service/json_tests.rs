//! The JSON-text read path replies exactly what the value read path replies (as parsed JSON),
//! for every kind, surface and caller: objects, not-found and refusals, list pages (filters,
//! orders, paging, totals, empty pages) and list errors.

use std::sync::Arc;

use chrono::Utc;
use osac_model::{Kind, Scope};
use osac_store::{Record, Store};
use serde_json::{Value, json};

use super::{ListParams, Service};
use crate::auth::{AuthConfig, Authenticator, Caller, Role};
use crate::error::ApiResult;

async fn service() -> Service {
    let store = osac_store::open("sqlite::memory:").await.expect("store");
    let auth = Authenticator::new(
        &AuthConfig::TokenFile("/nonexistent/osac-json-tests-tokens.json".into()),
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

/// A body with nested values, fields tenants must not see of provider objects, and (for a
/// pool) counters left out as proto-JSON leaves out zeros.
fn body(kind: Kind, n: usize) -> Value {
    let mut body = json!({
        "spec": {"nested": {"list": [1, 2.5, null, {"deep": "ünïcødé \"q\""}]}, "n": n},
        "status": {"message": format!("object {n}")},
        "title": format!("title {n}"),
    });
    if let Some(prefix) = kind.state_prefix() {
        body["status"]["state"] = json!(format!("{prefix}_READY"));
    }
    if kind == Kind::ExternalIpPool {
        body["spec"]["ip_family"] = json!("IP_FAMILY_IPV4");
        if n.is_multiple_of(2) {
            body["status"]["available"] = json!("5");
        }
    }
    body
}

/// Stores objects of every kind: provider objects, and objects of tenants `t1` and `t2`;
/// with labels, finalizers, an internal annotation, one being deleted.
async fn seed(store: &dyn Store) {
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
        // Same name in two tenants: an ambiguous name for the provider.
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

fn callers() -> Vec<(Caller, Scope)> {
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

/// A reply or refusal, comparable between the two paths: parsed JSON, or (code, message).
fn outcome(r: ApiResult<String>) -> Result<Value, String> {
    r.map(|text| serde_json::from_str(&text).expect("reply is JSON"))
        .map_err(|e| format!("{:?}: {}", e.code, e.message))
}

async fn old_get(
    s: &Service,
    c: &Caller,
    surface: Scope,
    kind: Kind,
    key: &str,
) -> ApiResult<String> {
    Ok(s.get(c, surface, kind, key).await?.to_string())
}

async fn new_get(
    s: &Service,
    c: &Caller,
    surface: Scope,
    kind: Kind,
    key: &str,
) -> ApiResult<String> {
    Ok(s.get_json(c, surface, kind, key).await?.get().to_string())
}

async fn old_list(
    s: &Service,
    c: &Caller,
    surface: Scope,
    kind: Kind,
    p: ListParams,
) -> ApiResult<String> {
    let page = s.list(c, surface, kind, p).await?;
    Ok(json!({"size": page.items.len(), "total": page.total, "items": page.items}).to_string())
}

async fn new_list(
    s: &Service,
    c: &Caller,
    surface: Scope,
    kind: Kind,
    p: ListParams,
) -> ApiResult<String> {
    let page = s.list_json(c, surface, kind, p).await?;
    Ok(page.to_json())
}

fn params(offset: i64, limit: i64, filter: &str, order: &str) -> ListParams {
    ListParams {
        offset,
        limit,
        filter: filter.into(),
        order: order.into(),
    }
}

#[tokio::test]
async fn gets_reply_as_the_value_path_for_every_kind_and_caller() {
    let s = service().await;
    seed(s.store.as_ref()).await;
    let mut compared_objects = 0;
    for kind in Kind::ALL {
        let all = s
            .store
            .list(&osac_store::ListQuery::all(kind))
            .await
            .expect("list");
        let mut keys: Vec<String> = all.items.iter().map(|r| r.id.clone()).collect();
        keys.extend(all.items.iter().filter_map(|r| r.name.clone()));
        keys.extend(["no-such-object".to_string(), String::new()]);
        for (caller, surface) in callers() {
            for key in &keys {
                let old = outcome(old_get(&s, &caller, surface, kind, key).await);
                let new = outcome(new_get(&s, &caller, surface, kind, key).await);
                assert_eq!(new, old, "{kind} {key} as {caller:?} on {surface:?}");
                compared_objects += usize::from(old.is_ok());
            }
        }
    }
    assert!(
        compared_objects > 100,
        "only {compared_objects} objects were readable"
    );
}

#[tokio::test]
async fn lists_reply_as_the_value_path_for_every_kind_and_caller() {
    let s = service().await;
    seed(s.store.as_ref()).await;
    let pages = || {
        [
            params(0, 0, "", ""),
            params(1, 1, "", ""),
            params(0, 2, "", "this.metadata.name desc"),
            params(0, 0, "this.metadata.labels.colour == \"red\"", ""),
            params(
                1,
                1,
                "this.metadata.labels.colour == \"red\"",
                "this.metadata.name",
            ),
            params(0, 0, "this.metadata.name == \"nobody\"", ""),
            params(500, 10, "", ""),
            params(0, 0, "this.spec.n == 1", ""),
            params(0, 0, "this.status.available > 0", ""),
            params(0, 0, "this.spec ==", ""),
            params(-1, 0, "", ""),
            params(0, 0, "", "this.spec.n desc"),
        ]
    };
    let mut nonempty_pages = 0;
    for kind in Kind::ALL {
        for (caller, surface) in callers() {
            for p in pages() {
                let what = format!("{kind} {p:?} as {caller:?} on {surface:?}");
                let old = outcome(old_list(&s, &caller, surface, kind, p.clone()).await);
                let new = outcome(new_list(&s, &caller, surface, kind, p).await);
                assert_eq!(new, old, "{what}");
                if let Ok(page) = &old
                    && page["size"].as_u64() > Some(0)
                {
                    nonempty_pages += 1;
                }
            }
        }
    }
    assert!(
        nonempty_pages > 100,
        "only {nonempty_pages} pages had items"
    );
}

#[test]
fn kinds_with_computed_or_trimmed_replies_are_not_rendered_verbatim() {
    use crate::resources::{public_fields, rendered_verbatim};
    for kind in Kind::ALL {
        if public_fields(kind).is_some() {
            assert!(!rendered_verbatim(kind, Scope::Tenant), "{kind}");
        }
    }
    for surface in [Scope::Provider, Scope::Tenant] {
        assert!(!rendered_verbatim(Kind::Tenant, surface));
        assert!(!rendered_verbatim(Kind::ExternalIpPool, surface));
        assert!(rendered_verbatim(Kind::Subnet, surface));
    }
}
