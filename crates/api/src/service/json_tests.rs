//! The JSON-text read path replies exactly what the value read path replies (as parsed JSON),
//! for every kind, surface and caller: objects, not-found and refusals, list pages (filters,
//! orders, paging, totals, empty pages) and list errors.

use osac_model::{Kind, Scope};
use serde_json::{Value, json};

use super::test_support::{callers, seed, service};
use super::{ListParams, Service};
use crate::auth::Caller;
use crate::error::ApiResult;

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
    seed(s.store.as_ref(), body).await;
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
    seed(s.store.as_ref(), body).await;
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
