//! Creates and updates enter the service as proto messages (gRPC) or as JSON bodies parsed at
//! the REST edge: both store the same object and refuse with the same codes and messages, and
//! a caller who may not write a kind learns nothing about how its body would parse.

use osac_model::{Kind, Scope, pb};
use serde_json::{Value, json};

use super::UpdateOptions;
use super::test_support::service;
use crate::auth::{Caller, Role};
use crate::error::{ApiError, Code};
use crate::typed::Object;

fn admin() -> Caller {
    Caller {
        subject: "admin".into(),
        tenant: None,
        role: Role::ProviderAdmin,
    }
}

fn tenant_user() -> Caller {
    Caller {
        subject: "t1-user".into(),
        tenant: Some("t1".into()),
        role: Role::TenantUser,
    }
}

fn host_type(name: &str) -> Value {
    json!({
        "metadata": {"name": name, "labels": {"rack": "r1"}, "annotations": {"example.com/a": "b"}},
        "title": "Standard",
        "interfaces": [
            {"name": "eth0", "role": "fabric", "description": "uplink"},
            {"name": "eth1", "role": "storage"}
        ]
    })
}

/// The reply without what differs between two objects (id, name, timestamps).
fn comparable(mut reply: Value) -> Value {
    if let Some(o) = reply.as_object_mut() {
        o.remove("id");
    }
    if let Some(m) = reply.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("name");
        m.remove("creation_timestamp");
    }
    reply
}

fn refusal(r: Result<Value, ApiError>) -> (Code, String) {
    let e = r.expect_err("refused");
    (e.code, e.message)
}

#[tokio::test]
async fn a_message_and_its_json_body_create_the_same_object() {
    let s = service().await;
    let from_json = s
        .create_json(&admin(), Scope::Provider, Kind::HostType, host_type("a"))
        .await
        .expect("REST create");
    let message = Object::from_json(Kind::HostType, host_type("b")).expect("parses");
    let from_message = s
        .create(&admin(), Scope::Provider, message)
        .await
        .expect("gRPC create");
    assert_eq!(comparable(from_json.clone()), comparable(from_message));
    assert_eq!(from_json["interfaces"][1]["role"], "storage");
    assert_eq!(from_json["metadata"]["labels"]["rack"], "r1");
}

#[tokio::test]
async fn both_entries_refuse_with_the_same_code_and_message() {
    let s = service().await;
    let labels: serde_json::Map<String, Value> =
        (0..65).map(|i| (format!("k{i}"), json!("v"))).collect();
    let mut too_many = host_type("big");
    too_many["metadata"]["labels"] = Value::Object(labels);
    let mut bad_interface = host_type("bad");
    bad_interface["interfaces"][1]["name"] = json!("eth0");
    for body in [too_many, bad_interface] {
        let message = Object::from_json(Kind::HostType, body.clone()).expect("parses");
        let rest = refusal(
            s.create_json(&admin(), Scope::Provider, Kind::HostType, body)
                .await,
        );
        let grpc = refusal(s.create(&admin(), Scope::Provider, message).await);
        assert_eq!(rest.0, Code::InvalidArgument, "{}", rest.1);
        assert_eq!(rest, grpc);
    }
}

/// A message that has no JSON form (an enum number naming no value) is the client's error.
#[tokio::test]
async fn an_unknown_enum_number_is_invalid_argument_on_create_and_update() {
    let s = service().await;
    let pool = pb::ExternalIpPool {
        spec: Some(pb::ExternalIpPoolSpec {
            ip_family: 99,
            ..Default::default()
        }),
        ..Default::default()
    };
    let (code, message) = refusal(
        s.create(&admin(), Scope::Provider, Object::from(pool))
            .await,
    );
    assert_eq!(code, Code::InvalidArgument, "{message}");
    assert!(message.contains("Invalid variant 99"), "{message}");
    let class = pb::NetworkClass {
        id: "nc-1".into(),
        status: Some(pb::NetworkClassStatus {
            state: 99,
            ..Default::default()
        }),
        ..Default::default()
    };
    let (code, message) = refusal(
        s.update(
            &admin(),
            Scope::Provider,
            "nc-1",
            Object::from(class),
            UpdateOptions::default(),
        )
        .await,
    );
    assert_eq!(code, Code::InvalidArgument, "{message}");
}

/// Authorization comes before the body: a caller who may not write a kind gets the refusal of
/// the kind whatever the body holds (mutation-checked: parsing first made this INVALID_ARGUMENT).
#[tokio::test]
async fn a_caller_who_may_not_write_the_kind_is_refused_before_the_body_is_parsed() {
    let s = service().await;
    let garbage = json!({"no_such_field": 1, "spec": {"cidrs": 7}});
    let (code, message) = refusal(
        s.create_json(
            &tenant_user(),
            Scope::Tenant,
            Kind::ExternalIpPool,
            garbage.clone(),
        )
        .await,
    );
    assert_eq!(code, Code::NotFound, "{message}");
    assert!(
        message.contains("managed through the private API"),
        "{message}"
    );
    let (code, message) = refusal(
        s.create_json(&tenant_user(), Scope::Provider, Kind::HostType, garbage)
            .await,
    );
    assert_eq!(code, Code::PermissionDenied, "{message}");
}

#[tokio::test]
async fn an_update_message_changes_the_fields_it_holds() {
    let s = service().await;
    let created = s
        .create_json(&admin(), Scope::Provider, Kind::HostType, host_type("ht"))
        .await
        .expect("create");
    let key = created["id"].as_str().unwrap_or_default().to_string();
    let change = pb::HostType {
        id: key.clone(),
        title: "Large".into(),
        ..Default::default()
    };
    let updated = s
        .update(
            &admin(),
            Scope::Provider,
            &key,
            Object::from(change),
            UpdateOptions::default(),
        )
        .await
        .expect("update");
    assert_eq!(updated["title"], "Large");
    // Fields the message leaves at their default are not part of the change.
    assert_eq!(updated["interfaces"], created["interfaces"]);
    assert_eq!(updated["metadata"]["labels"], created["metadata"]["labels"]);
}
