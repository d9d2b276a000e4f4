//! The proto-message replies (gRPC GET, LIST and the reply to a write) are exactly the messages
//! the value path decodes to, for every kind, surface and caller: objects with every part of
//! the envelope, not-found and refusals, list pages and list errors.

use std::fmt::Debug;

use osac_model::{Kind, Scope, pb};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::read_message::from_value;
use super::test_support::{callers, seed, service};
use super::{ListParams, Service};

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
    seed(&*s.store, body).await;
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
