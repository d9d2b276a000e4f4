//! A tenant is known by its id: the provider deletes tenant `gamma` and creates a new tenant
//! of the same name; the new customer must see nothing of the old one through any read path,
//! and the old customer's credentials and streams nothing of the new one.
//!
//! Rule under attack: when a tenant's row is removed, every event still carrying its name goes
//! in the same transaction, and its own `Deleted` event is the provider's
//! (`teardown` in crates/controller/src/reconcile/tenant.rs, `events::deleted`). With the
//! `remove_tenant_events` call removed, the new `gamma` listed the old tenant's events (the old
//! objects' `Created`/`Deleted`, the old Tenant's) and this test failed at "the new gamma sees
//! old objects" (the events' object ids); with the Tenant's `Deleted` event left to the tenant,
//! it failed at "sees the old tenant's events" (`Tenant 'gamma' was deleted`). Tokens and streams are keyed by the tenant's
//! id (`tokens::caller_of`, `auth::stream`): see streams.rs for the streams.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::both_backends;
use crate::common::*;

/// Every id and name the tenant can read, over the collections a tenant lists.
async fn visible(api: &Api) -> (HashSet<String>, Vec<String>) {
    let mut ids = HashSet::new();
    let mut texts = Vec::new();
    for c in [
        "virtual_networks",
        "subnets",
        "security_groups",
        "external_ips",
        "external_ip_attachments",
        "nat_gateways",
        "events",
    ] {
        let page = api.list(c, &[("limit", "1000")]).await.ok();
        for item in page["items"].as_array().cloned().unwrap_or_default() {
            if let Some(id) = item["id"].as_str() {
                ids.insert(id.to_string());
            }
            texts.push(item.to_string());
        }
    }
    (ids, texts)
}

both_backends!(a_new_tenant_of_an_old_name_sees_nothing_of_the_old);

async fn a_new_tenant_of_an_old_name_sees_nothing_of_the_old(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let old = s.tenant("gamma").await;
    let old_tenant = s.admin.get(&format!("{PRIV}/tenants/gamma")).await.ok();
    let old_tenant_id = id(&old_tenant);
    let vn = old.ready_vn("old-gamma-net", "10.0.0.0/16").await;
    let sg = old
        .create(
            "security_groups",
            json!({"metadata": {"name": "old-gamma-private-sg",
                                "annotations": {"note": "old-gamma-secret"}},
                   "spec": {"virtual_network": id(&vn)}}),
        )
        .await;
    let (mut old_ids, _) = visible(&old).await;
    old_ids.insert(old_tenant_id.clone());
    assert!(old_ids.contains(&id(&sg)));
    let old_events = old.list("events", &[]).await.ok();
    assert!(
        old_events["total"].as_i64().unwrap_or(0) > 0,
        "{old_events}"
    );

    s.admin.delete(&format!("{PRIV}/tenants/gamma")).await.ok();
    s.admin.wait_gone(PRIV, "tenants", "gamma").await;

    let new = s.tenant("gamma").await;
    let new_tenant = s.admin.get(&format!("{PRIV}/tenants/gamma")).await.ok();
    assert_ne!(id(&new_tenant), old_tenant_id, "a new tenant");
    // Let the new tenant's defaults settle so its own events exist too.
    s.admin
        .wait_for_state(PRIV, "tenants", "gamma", "TENANT_STATE_READY")
        .await;
    let (ids, texts) = visible(&new).await;
    let leaked: Vec<&String> = ids.intersection(&old_ids).collect();
    assert!(
        leaked.is_empty(),
        "the new gamma sees old objects: {leaked:?}"
    );
    for text in &texts {
        assert!(
            !text.contains("old-gamma") && !old_ids.iter().any(|i| text.contains(i.as_str())),
            "the new gamma sees the old tenant's events: {text}"
        );
    }
    // Reads by the old names and ids are 404.
    new.get(&format!("{PUB}/security_groups/old-gamma-private-sg"))
        .await
        .err(404, "NOT_FOUND", &[]);
    new.get(&format!("{PUB}/security_groups/{}", id(&sg)))
        .await
        .err(404, "NOT_FOUND", &[]);
    // Usage counts only the new tenant's objects.
    let usage = &new_tenant_usage(&s).await["virtual_networks"]["used"];
    assert_eq!(usage, &json!(1), "the new tenant's default network only");
    // The old token works for nothing.
    old.get(&format!("{PUB}/virtual_networks"))
        .await
        .err(401, "UNAUTHENTICATED", &[]);
    s.finish().await;
}

async fn new_tenant_usage(s: &TestServer) -> Value {
    s.admin
        .wait_until(&format!("{PRIV}/tenants/gamma"), "usage", |t| {
            t["status"]["usage"].is_object()
        })
        .await["status"]["usage"]
        .clone()
}
