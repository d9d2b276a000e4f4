use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;

use super::cloudevent::{Closing, seconds_text};
use super::*;

fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000 + secs, 0).single().unwrap()
}

#[test]
fn only_usable_objects_accrue_and_deletion_request_stops_them() {
    let ready =
        json!({"spec": {"virtual_network": "vn1"}, "status": {"state": "SUBNET_STATE_READY"}});
    let pending = json!({"status": {"state": "SUBNET_STATE_PENDING"}});
    assert_eq!(
        signature(Kind::Subnet, &ready, false).as_deref(),
        Some("vn=vn1")
    );
    assert_eq!(signature(Kind::Subnet, &pending, false), None);
    assert_eq!(signature(Kind::Subnet, &ready, true), None);
    // Not a metered kind.
    let vm = json!({"status": {"state": "COMPUTE_INSTANCE_STATE_RUNNING"}});
    assert_eq!(signature(Kind::ComputeInstance, &vm, false), None);
}

#[test]
fn an_attachment_changes_the_external_ip_signature() {
    let free = json!({"status": {"state": "EXTERNAL_IP_STATE_ALLOCATED", "attached": false}});
    let used = json!({"status": {"state": "EXTERNAL_IP_STATE_ALLOCATED", "attached": true}});
    let a = signature(Kind::ExternalIp, &free, false);
    let b = signature(Kind::ExternalIp, &used, false);
    assert_ne!(a, b);
    assert_eq!(transition(a.as_deref(), b.as_deref()), Transition::Reopen);
}

#[test]
fn transitions() {
    assert_eq!(transition(None, None), Transition::Keep);
    assert_eq!(transition(None, Some("x")), Transition::Open);
    assert_eq!(transition(Some("x"), Some("x")), Transition::Keep);
    assert_eq!(transition(Some("x"), None), Transition::Close);
    assert_eq!(transition(Some("x"), Some("y")), Transition::Reopen);
}

#[test]
fn group_by_is_checked_and_names_the_parameter() {
    assert_eq!(
        Dimension::parse_list("tenant, kind").unwrap(),
        vec![Dimension::Tenant, Dimension::Kind]
    );
    assert_eq!(Dimension::parse_list("").unwrap(), vec![]);
    let e = Dimension::parse_list("tenant,colour").unwrap_err();
    assert_eq!(e.field, "group_by");
    assert!(e.message.contains("colour"));
    assert_eq!(
        Dimension::parse_list("kind,kind").unwrap_err().field,
        "group_by"
    );
    assert_eq!("bytes".parse::<Meter>().unwrap_err().field, "meter");
}

#[test]
fn ip_families() {
    assert_eq!(
        ip_family(Kind::Subnet, &json!({"spec": {"ipv4_cidr": "10.0.0.0/24"}})),
        "ipv4"
    );
    assert_eq!(
        ip_family(
            Kind::Subnet,
            &json!({"spec": {"ipv4_cidr": "10.0.0.0/24", "ipv6_cidr": "fd00::/64"}})
        ),
        "dual"
    );
    assert_eq!(
        ip_family(
            Kind::ExternalIp,
            &json!({"status": {"address": "2001:db8::1"}})
        ),
        "ipv6"
    );
    assert_eq!(
        ip_family(
            Kind::ExternalIp,
            &json!({"status": {"address": "192.0.2.1"}})
        ),
        "ipv4"
    );
}

fn dims(tenant: &str, kind: &str, object: &str, attached: &str) -> Dimensions {
    Dimensions {
        tenant: tenant.into(),
        kind: kind.into(),
        object: object.into(),
        attached: attached.into(),
        ..Default::default()
    }
}

fn row(id: &str, d: Dimensions, from: i64, to: Option<i64>) -> IntervalRow {
    IntervalRow {
        interval_id: id.into(),
        dims: d,
        started_at: at(from),
        ended_at: to.map(at),
    }
}

#[test]
fn intervals_are_clipped_to_the_period_and_grouped() {
    let rows = vec![
        row("e.1", dims("t1", "ExternalIP", "e", "false"), 0, Some(100)),
        row("e.2", dims("t1", "ExternalIP", "e", "true"), 100, None),
        row("s.1", dims("t2", "Subnet", "s", ""), -50, Some(30)),
    ];
    let q = UsageQuery {
        from: at(0),
        to: at(300),
        now: at(200),
        meter: None,
        group_by: vec![Dimension::Tenant, Dimension::Attached],
    };
    let groups = aggregate(&q, &rows, &[]);
    let totals: Vec<(Vec<&str>, i64)> = groups
        .iter()
        .map(|g| {
            (
                g.dimensions.values().map(String::as_str).collect(),
                g.resource_seconds(),
            )
        })
        .collect();
    // Open interval counts up to now (200), the subnet only from `from`.
    assert_eq!(
        totals,
        vec![
            (vec!["false", "t1"], 100),
            (vec!["true", "t1"], 100),
            (vec!["", "t2"], 30)
        ]
    );
    // A closed period answers the same whatever `now` is later.
    let closed = UsageQuery {
        to: at(150),
        now: at(10_000),
        ..q.clone()
    };
    let later = UsageQuery {
        now: at(20_000),
        ..closed.clone()
    };
    assert_eq!(
        aggregate(&closed, &rows, &[]),
        aggregate(&later, &rows, &[])
    );
}

#[test]
fn bandwidth_rows_take_the_dimensions_of_their_external_ip() {
    let rows = vec![row("e.1", dims("t1", "ExternalIP", "e", "true"), 0, None)];
    let bw = vec![BandwidthRow {
        tenant: "t1".into(),
        tenant_id: "t1-id".into(),
        kind: "external_ip_attachment".into(),
        object_id: "att".into(),
        external_ip_id: "e".into(),
        ingress_bytes: 10,
        egress_bytes: 20,
    }];
    let q = UsageQuery {
        from: at(0),
        to: at(10),
        now: at(10),
        meter: Some(Meter::Bandwidth),
        group_by: vec![Dimension::Object, Dimension::Attached],
    };
    let g = aggregate(&q, &rows, &bw);
    assert_eq!(g.len(), 1);
    assert_eq!(
        (g[0].resource_micros, g[0].ingress_bytes, g[0].egress_bytes),
        (0, 10, 20)
    );
    assert_eq!(g[0].dimensions["attached"], "true");
    let q = UsageQuery {
        meter: Some(Meter::Allocation),
        ..q
    };
    let g = aggregate(&q, &rows, &bw);
    assert_eq!((g[0].resource_seconds(), g[0].ingress_bytes), (10, 0));
}

#[test]
fn cloudevents_have_stable_ids_and_the_required_attributes() {
    let d = dims("t1", "ExternalIP", "e", "true");
    let opened = CloudEvent::opened("e.1", "external_ips", &d, at(0));
    let again = CloudEvent::opened("e.1", "external_ips", &d, at(0));
    assert_eq!(opened.id, again.id);
    let closing = Closing {
        ended_at: at(90),
        reason: "deleted".into(),
    };
    let closed = CloudEvent::closed("e.1", "external_ips", &d, at(0), &closing);
    assert_ne!(opened.id, closed.id);
    let j = closed.to_json();
    assert_eq!(j["specversion"], "1.0");
    assert_eq!(j["type"], "org.osac.metering.networking.v1.allocation");
    assert_eq!(j["subject"], "external_ips/e");
    assert_eq!(j["source"], SOURCE);
    assert_eq!(j["data"]["resource_seconds"], "90.000000");
    assert_eq!(j["data"]["dimensions"]["attached"], "true");
    let usage = CloudEvent::usage("e.1", "external_ips", &d, at(0), at(60), 5, 6);
    assert_eq!(
        usage.to_json()["type"],
        "org.osac.metering.networking.v1.usage"
    );
    assert_ne!(
        usage.id,
        CloudEvent::usage("e.1", "external_ips", &d, at(60), at(120), 0, 0).id
    );
    assert_eq!(seconds_text(-1_500_000), "-1.500000");
    for event in [&opened, &closed, &usage] {
        assert_eq!(
            event.to_text(),
            event.to_json().to_string(),
            "the payload is the document"
        );
    }
}
