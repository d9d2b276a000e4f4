//! The walk over a message finds what `check_object` finds on the message's JSON form: the
//! same violation (field and message, of several the same one) or none.

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::*;
use crate::bounds::{
    MAX_ANNOTATIONS, MAX_LABELS, MAX_LIST_ITEMS, MAX_TEMPLATE_PARAMETERS_BYTES, check_object,
};
use crate::pb;

/// Parses `body` into `T` and checks the message both ways: the walk must agree with
/// `check_object` on the message's JSON form. Returns the violation found.
fn agree<T: DeserializeOwned + Serialize>(body: Value) -> Option<Invalid> {
    let msg: T = serde_json::from_value(body.clone()).expect("a valid message");
    let json = serde_json::to_value(&msg).expect("a JSON form");
    let expected = check_object(&json).err();
    let found = match check_message(&msg) {
        Ok(()) => None,
        Err(MessageError::Invalid(invalid)) => Some(invalid),
        Err(e) => panic!("unexpected {e}"),
    };
    assert_eq!(found, expected, "for {body}");
    found
}

fn map(n: usize, value: Value) -> Value {
    Value::Object((0..n).map(|i| (format!("k{i}"), value.clone())).collect())
}

fn long(n: usize) -> String {
    "x".repeat(n)
}

#[test]
fn within_limits_nothing_is_found() {
    let body = json!({
        "id": "sg-1",
        "metadata": {"name": "web", "labels": {"a": "b"}, "annotations": {"example.com/x": "y"}},
        "spec": {"virtual_network": "vn", "ingress": [{"protocol": "PROTOCOL_TCP", "port_from": 22, "port_to": 22, "ipv4_cidr": "0.0.0.0/0"}]},
        "status": {"state": "SECURITY_GROUP_STATE_READY", "message": long(MAX_STRING_BYTES + 1)}
    });
    assert_eq!(agree::<pb::SecurityGroup>(body), None);
}

#[test]
fn metadata_limits() {
    let e = agree::<pb::Subnet>(json!({"metadata": {"labels": map(MAX_LABELS + 1, json!("v"))}}));
    assert_eq!(e.map(|e| e.field).as_deref(), Some("metadata.labels"));
    let e = agree::<pb::Subnet>(
        json!({"metadata": {"annotations": map(MAX_ANNOTATIONS + 1, json!("v"))}}),
    );
    assert_eq!(e.map(|e| e.field).as_deref(), Some("metadata.annotations"));
    let e = agree::<pb::Subnet>(json!({"metadata": {"annotations": {"bad key": "v"}}}));
    assert!(e.is_some_and(|e| e.field.contains("bad key")));
    // Metadata is reported before the rest of the object.
    let e = agree::<pb::Subnet>(json!({
        "metadata": {"annotations": {"bad key": "v"}},
        "spec": {"virtual_network": long(MAX_STRING_BYTES + 1)}
    }));
    assert!(e.is_some_and(|e| e.field.contains("bad key")));
}

#[test]
fn strings_lists_and_their_own_limits() {
    let e = agree::<pb::HostType>(json!({"description": long(MAX_STRING_BYTES + 1)}));
    assert_eq!(e.map(|e| e.field).as_deref(), Some("description"));
    let e = agree::<pb::ExternalIpPool>(
        json!({"spec": {"cidrs": vec!["10.0.0.0/24"; MAX_LIST_ITEMS + 1]}}),
    );
    assert!(e.is_some_and(|e| e.field == "spec.cidrs" && e.message.contains("257 entries")));
    let rule = json!({"protocol": "PROTOCOL_ALL", "ipv4_cidr": "0.0.0.0/0"});
    let e = agree::<pb::SecurityGroup>(json!({"spec": {"egress": vec![rule.clone(); 201]}}));
    assert!(e.is_some_and(|e| e.message.contains("201 egress rules")));
    let mut long_rule = rule.clone();
    long_rule["ipv4_cidr"] = json!(long(MAX_STRING_BYTES + 1));
    let e =
        agree::<pb::SecurityGroup>(json!({"spec": {"ingress": [rule.clone(), long_rule.clone()]}}));
    assert_eq!(
        e.map(|e| e.field).as_deref(),
        Some("spec.ingress[1].ipv4_cidr")
    );
    // The count of a list comes before its items.
    let e = agree::<pb::SecurityGroup>(json!({"spec": {"ingress": vec![long_rule; 201]}}));
    assert_eq!(e.map(|e| e.field).as_deref(), Some("spec.ingress"));
    let sgs: Vec<String> = (0..17).map(|i| format!("sg{i}")).collect();
    let e = agree::<pb::ComputeInstance>(json!({"spec": {
        "compute_network_attachments": [{"subnet": "s"}, {"subnet": "s", "security_groups": sgs}]
    }}));
    assert_eq!(
        e.map(|e| e.field).as_deref(),
        Some("spec.compute_network_attachments[1].security_groups")
    );
    let e = agree::<pb::Tenant>(json!({"spec": {"domains": vec!["a.example"; 33]}}));
    assert!(e.is_some_and(|e| e.message.contains("33 domains")));
}

#[test]
fn of_several_violations_the_one_of_the_smallest_key_is_reported() {
    let body = json!({
        "title": long(MAX_STRING_BYTES + 1),
        "description": long(MAX_STRING_BYTES + 2),
        "interfaces": [{"name": "eth0", "role": long(MAX_STRING_BYTES + 3)}]
    });
    let e = agree::<pb::HostType>(body);
    assert_eq!(e.map(|e| e.field).as_deref(), Some("description"));
    let e = agree::<pb::Cluster>(json!({"spec": {"node_sets": {
        "workers": {"host_type": long(MAX_STRING_BYTES + 1), "size": 2},
        "control": {"host_type": long(MAX_STRING_BYTES + 1), "size": 3},
        "infra": {"host_type": "std", "size": 1}
    }}}));
    assert_eq!(
        e.map(|e| e.field).as_deref(),
        Some("spec.node_sets.control.host_type")
    );
    let node_sets = map(33, json!({"host_type": "x", "size": 1}));
    let e = agree::<pb::Cluster>(json!({"spec": {"node_sets": node_sets}}));
    assert!(e.is_some_and(|e| e.message.contains("33 node sets")));
}

#[test]
fn template_parameters_are_bounded_as_json() {
    let fits = MAX_TEMPLATE_PARAMETERS_BYTES - r#"{"a":""}"#.len();
    let e =
        agree::<pb::BareMetalInstance>(json!({"spec": {"template_parameters": {"a": long(fits)}}}));
    assert_eq!(e, None);
    let e = agree::<pb::BareMetalInstance>(
        json!({"spec": {"template_parameters": {"a": long(fits + 1)}}}),
    );
    assert!(e.is_some_and(|e| e.message.contains("at most 16384 bytes")));
    let e = agree::<pb::BareMetalInstance>(json!({"spec": {"template_parameters": {
        "image": "rhel-9", "nested": {"list": [1, 2.5, null, true, {"deep": "ü \"q\""}]}, "n": 3
    }}}));
    assert_eq!(e, None);
    let e =
        agree::<pb::BareMetalTemplate>(json!({"spec": {"template_parameters": map(65, json!(1))}}));
    assert!(e.is_some_and(|e| e.message.contains("65 template parameters")));
    assert_eq!(
        agree::<pb::BareMetalTemplate>(json!({"spec": {"template_parameters": {}}})),
        None
    );
}

#[test]
fn a_message_without_a_json_form_is_unserializable() {
    let vn = pb::VirtualNetwork {
        status: Some(pb::VirtualNetworkStatus {
            state: 99,
            ..Default::default()
        }),
        ..Default::default()
    };
    let expected = serde_json::to_value(&vn)
        .expect_err("no JSON form")
        .to_string();
    assert_eq!(
        check_message(&vn),
        Err(MessageError::Unserializable(expected))
    );
}

#[test]
fn user_data_and_ssh_keys_have_limits_of_their_own() {
    use crate::kinds::baremetal_instance::{MAX_SSH_PUBLIC_KEY_BYTES, MAX_USER_DATA_BYTES};
    let spec = |field: &str, n: usize| json!({"spec": {field: long(n)}});
    // Longer than any other string may be, within their own limits.
    assert!(agree::<pb::BareMetalInstance>(spec("user_data", MAX_STRING_BYTES + 1)).is_none());
    assert!(agree::<pb::BareMetalInstance>(spec("ssh_public_key", MAX_STRING_BYTES + 1)).is_none());
    let e = agree::<pb::BareMetalInstance>(spec("user_data", MAX_USER_DATA_BYTES + 1));
    assert!(e.is_some_and(|e| e.field == "spec.user_data" && e.message.contains("at most 65536")));
    let e = agree::<pb::BareMetalInstance>(spec("ssh_public_key", MAX_SSH_PUBLIC_KEY_BYTES + 1));
    assert!(e.is_some_and(|e| e.field == "spec.ssh_public_key"));
    // Any other string keeps the common limit.
    let e = agree::<pb::BareMetalInstance>(spec("image", MAX_STRING_BYTES + 1));
    assert!(e.is_some_and(|e| e.field == "spec.image"));
}
