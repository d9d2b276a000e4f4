//! The proto-message replies (gRPC GET, LIST and the reply to a write) are exactly the messages
//! the value path decodes to, for every kind, surface and caller: objects with every part of
//! the envelope, not-found and refusals, list pages and list errors.

use std::fmt::Debug;
use std::sync::Arc;

use chrono::Utc;
use osac_model::{Kind, Scope, pb};
use osac_store::{Record, Store};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::read_message::from_value;
use super::{ListParams, Service};
use crate::auth::{AuthConfig, Authenticator, Caller, Role};

async fn service() -> Service {
    let store = osac_store::open("sqlite::memory:").await.expect("store");
    let auth = Authenticator::new(
        &AuthConfig::TokenFile("/nonexistent/osac-message-tests-tokens.json".into()),
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

/// A body every kind's message accepts: its state, and for a pool a family and (for some)
/// a counter, as proto-JSON leaves zeros out.
fn body(kind: Kind, n: usize) -> Value {
    let mut body = json!({});
    if let Some(prefix) = kind.state_prefix() {
        body["status"] = json!({"state": format!("{prefix}_{}", kind.initial_state())});
    }
    if kind == Kind::ExternalIpPool {
        body["spec"] = json!({"ip_family": "IP_FAMILY_IPV4", "cidrs": ["192.0.2.0/28"]});
        body["status"] = json!({"state": "EXTERNAL_IP_POOL_STATE_READY"});
        if n.is_multiple_of(2) {
            body["status"]["available"] = json!("5");
        }
    }
    body
}

/// Objects of every kind: provider objects and objects of tenants `t1` and `t2`, with labels,
/// annotations (one internal), finalizers, one being deleted; a name two tenants share.
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

/// Every GET and LIST of `kind` by every caller: the message path equals the value path
/// decoded; returns how many objects were compared.
async fn same_replies<M: DeserializeOwned + PartialEq + Debug>(s: &Service, kind: Kind) -> usize {
    let mut compared = 0;
    let everything = s
        .store
        .list(&osac_store::ListQuery::all(kind))
        .await
        .expect("every object");
    // The reply to a write, from the record: what the rendered object decodes to.
    for rec in &everything.items {
        for surface in [Scope::Provider, Scope::Tenant] {
            let old = from_value::<M>(s.render_full(surface, rec).await.expect("renders"))
                .expect("decodes");
            let new = s.message_of::<M>(surface, rec).await.expect("a message");
            assert_eq!(
                new, old,
                "reply to a write of {kind:?} {} on {surface:?}",
                rec.id
            );
            compared += 1;
        }
    }
    let mut keys: Vec<String> = everything.items.into_iter().map(|r| r.id).collect();
    keys.extend(["t1-x".into(), format!("shared-{}", kind.collection())]);
    keys.push(format!("t1-{}-0", kind.collection()));
    for (caller, surface) in callers() {
        for key in &keys {
            let old = match s.get(&caller, surface, kind, key).await {
                Ok(v) => Ok(from_value::<M>(v).expect("decodes")),
                Err(e) => Err(format!("{:?}: {}", e.code, e.message)),
            };
            let new = s
                .get_message::<M>(&caller, surface, kind, key)
                .await
                .map_err(|e| format!("{:?}: {}", e.code, e.message));
            assert_eq!(new, old, "GET {kind:?} {key} by {caller:?} on {surface:?}");
            compared += usize::from(old.is_ok());
        }
        for (filter, order, offset, limit) in [
            ("", "", 0, 0),
            (
                "this.metadata.labels[\"colour\"] == \"red\"",
                "this.metadata.name desc",
                0,
                2,
            ),
            ("", "", 2, 1),
            ("this.no.such.field ==", "", 0, 0),
        ] {
            let p = ListParams {
                offset,
                limit,
                filter: filter.into(),
                order: order.into(),
            };
            let old = match s.list(&caller, surface, kind, p.clone()).await {
                Ok(page) => Ok((
                    page.total,
                    page.items
                        .into_iter()
                        .map(|v| from_value::<M>(v).expect("decodes"))
                        .collect::<Vec<_>>(),
                )),
                Err(e) => Err(format!("{:?}: {}", e.code, e.message)),
            };
            let new = s
                .list_messages::<M>(&caller, surface, kind, p)
                .await
                .map(|page| (page.total, page.items))
                .map_err(|e| format!("{:?}: {}", e.code, e.message));
            assert_eq!(
                new, old,
                "LIST {kind:?} {filter} by {caller:?} on {surface:?}"
            );
            compared += old.map_or(0, |(_, items)| items.len());
        }
    }
    compared
}

#[tokio::test]
async fn messages_are_those_of_the_value_path_for_every_kind_and_caller() {
    let s = service().await;
    seed(&*s.store).await;
    let mut compared = 0;
    compared += same_replies::<pb::NetworkClass>(&s, Kind::NetworkClass).await;
    compared += same_replies::<pb::ExternalIpPool>(&s, Kind::ExternalIpPool).await;
    compared += same_replies::<pb::HostType>(&s, Kind::HostType).await;
    compared += same_replies::<pb::BareMetalTemplate>(&s, Kind::BareMetalTemplate).await;
    compared += same_replies::<pb::Host>(&s, Kind::Host).await;
    compared += same_replies::<pb::Tenant>(&s, Kind::Tenant).await;
    compared += same_replies::<pb::VirtualNetwork>(&s, Kind::VirtualNetwork).await;
    compared += same_replies::<pb::Subnet>(&s, Kind::Subnet).await;
    compared += same_replies::<pb::SecurityGroup>(&s, Kind::SecurityGroup).await;
    compared += same_replies::<pb::ExternalIp>(&s, Kind::ExternalIp).await;
    compared += same_replies::<pb::ComputeInstance>(&s, Kind::ComputeInstance).await;
    compared += same_replies::<pb::BareMetalInstance>(&s, Kind::BareMetalInstance).await;
    compared += same_replies::<pb::Cluster>(&s, Kind::Cluster).await;
    compared += same_replies::<pb::ExternalIpAttachment>(&s, Kind::ExternalIpAttachment).await;
    compared += same_replies::<pb::NatGateway>(&s, Kind::NatGateway).await;
    compared += same_replies::<pb::Event>(&s, Kind::Event).await;
    // Objects were found and compared, not only refusals.
    assert!(compared > 500, "{compared} objects compared");
}
