//! Converging the rows of ours in a real northbound database (`ovsdb-server` with the OVN
//! schema; no root needed): the difference only, repairs of changes made behind our back, and
//! rows of others never touched. Without the OVN packages the tests say so and pass, except
//! under CI, where they must run.

use std::collections::BTreeSet;

mod common;

use common::{NB, db};
use osac_ovn::nb::{self, Row, Scope};
use osac_ovsdb::{datum, op};
use serde_json::json;

fn port(name: &str, mac_ip: &str) -> Row {
    Row::new(
        "Logical_Switch_Port",
        format!("port:{name}"),
        op::row([
            ("name", json!(name)),
            ("addresses", datum::string_set([mac_ip])),
        ]),
    )
}

fn switch(key: &str, ports: &[Row]) -> Row {
    let mut s = Row::new(
        "Logical_Switch",
        key,
        op::row([("name", json!(format!("osac-{key}")))]),
    )
    .with_external_id("osac-tenant", "t1");
    for p in ports {
        s = s.with_child("ports", p.clone());
    }
    s
}

fn all_switches() -> Scope {
    Scope::All(BTreeSet::from(["Logical_Switch"]))
}

#[tokio::test]
async fn converge_writes_the_difference_only_and_puts_back_what_was_changed_by_hand() {
    let Some(db) = db().await else { return };
    let c = &db.client;
    let wanted = vec![switch(
        "s1",
        &[
            port("p1", "0a:00:00:00:00:01 10.0.0.1"),
            port("p2", "0a:00:00:00:00:02 10.0.0.2"),
        ],
    )];
    let first = nb::converge(c, &wanted, &all_switches()).await.unwrap();
    assert_eq!(first.inserted.len(), 3, "{first:?}");
    let again = nb::converge(c, &wanted, &all_switches()).await.unwrap();
    assert!(again.is_empty(), "nothing to change, yet: {again:?}");

    // Someone else's switch, and someone else's port on our switch.
    let ours = db.uuid_of("Logical_Switch", "osac-s1").await;
    c.transact(
        NB,
        vec![
            op::insert("Logical_Switch", op::row([("name", json!("theirs"))]), None),
            op::insert(
                "Logical_Switch_Port",
                op::row([("name", json!("their-port"))]),
                Some("tp"),
            ),
            op::mutate(
                "Logical_Switch",
                op::by_uuid(&ours),
                vec![op::mutation(
                    "ports",
                    "insert",
                    datum::set([datum::named_uuid("tp")]),
                )],
            ),
        ],
    )
    .await
    .unwrap();
    let p2 = db.uuid_of("Logical_Switch_Port", "p2").await;
    // Behind our back: p2 removed from the switch (and so from the database), the name changed.
    c.transact(
        NB,
        vec![
            op::mutate(
                "Logical_Switch",
                op::by_uuid(&ours),
                vec![op::mutation(
                    "ports",
                    "delete",
                    datum::set([datum::uuid(&p2)]),
                )],
            ),
            op::update(
                "Logical_Switch",
                op::by_uuid(&ours),
                op::row([("name", json!("renamed"))]),
            ),
        ],
    )
    .await
    .unwrap();
    assert!(!db.names("Logical_Switch_Port").await.contains("p2"));
    let repair = nb::converge(c, &wanted, &all_switches()).await.unwrap();
    assert_eq!(
        repair.inserted,
        ["Logical_Switch_Port:port:p2"],
        "{repair:?}"
    );
    assert_eq!(repair.updated, ["Logical_Switch:s1"], "{repair:?}");
    assert_eq!(
        db.names("Logical_Switch_Port").await,
        BTreeSet::from(["p1".into(), "p2".into(), "their-port".into()])
    );
    assert!(db.names("Logical_Switch").await.contains("osac-s1"));

    // p1 no longer wanted: only it goes.
    let fewer = vec![switch("s1", &[port("p2", "0a:00:00:00:00:02 10.0.0.2")])];
    let shrink = nb::converge(c, &fewer, &all_switches()).await.unwrap();
    assert_eq!(
        shrink.deleted,
        ["Logical_Switch_Port:port:p1"],
        "{shrink:?}"
    );
    assert_eq!(
        db.names("Logical_Switch_Port").await,
        BTreeSet::from(["p2".into(), "their-port".into()])
    );

    // Nothing wanted: our switch goes, theirs stays.
    let none = nb::converge(c, &[], &all_switches()).await.unwrap();
    assert_eq!(none.deleted, ["Logical_Switch:s1"], "{none:?}");
    assert_eq!(
        db.names("Logical_Switch").await,
        BTreeSet::from(["theirs".into()])
    );
    db.stop().await;
}

#[tokio::test]
async fn a_scoped_converge_looks_only_at_its_keys() {
    let Some(db) = db().await else { return };
    let c = &db.client;
    let both = vec![switch("a", &[]), switch("b", &[])];
    nb::converge(c, &both, &all_switches()).await.unwrap();
    let only_a = Scope::Keys(BTreeSet::from([("Logical_Switch", "a".to_string())]));
    let changes = nb::converge(c, &[], &only_a).await.unwrap();
    assert_eq!(changes.deleted, ["Logical_Switch:a"]);
    assert_eq!(
        db.names("Logical_Switch").await,
        BTreeSet::from(["osac-b".into()])
    );
    db.stop().await;
}

#[tokio::test]
async fn subnets_add_their_gateways_to_the_router_and_one_removed_leaves_the_others() {
    use osac_backends::types::{CreateSubnetRequest, CreateVirtualNetworkRequest};
    use osac_ovn::render;

    let Some(db) = db().await else { return };
    let c = &db.client;
    let vn = CreateVirtualNetworkRequest {
        virtual_network_id: "v1".into(),
        tenant: "t1".into(),
        ipv4_cidr: Some("10.0.0.0/16".parse().unwrap()),
        ipv6_cidr: None,
    };
    nb::converge(
        c,
        &[render::virtual_network(&vn).router],
        &Scope::Keys(BTreeSet::new()),
    )
    .await
    .unwrap();
    for (i, id) in ["s1", "s2"].into_iter().enumerate() {
        let rows = render::subnet(
            &CreateSubnetRequest {
                subnet_id: id.into(),
                virtual_network_id: "v1".into(),
                ipv4_cidr: Some(format!("10.0.{}.0/24", i + 1).parse().unwrap()),
                ipv6_cidr: None,
                vip_cidr: None,
            },
            "t1",
            100 + i64::try_from(i).unwrap(),
        );
        nb::converge(c, &rows.all(), &Scope::Keys(BTreeSet::new()))
            .await
            .unwrap();
    }
    assert_eq!(
        db.names("Logical_Router_Port").await,
        BTreeSet::from(["osac-lrp-s1".into(), "osac-lrp-s2".into()])
    );
    assert_eq!(
        db.rows("DHCP_Options").await.len(),
        4,
        "primary and secondary IPv4 options per subnet"
    );

    // Subnet s1 goes: its gateway port leaves the router, its switch and DHCP options go.
    let detached = nb::detach(
        c,
        ("Logical_Router", &render::router_key("v1")),
        "ports",
        ("Logical_Router_Port", &render::gateway_key("s1")),
    )
    .await
    .unwrap();
    assert!(detached);
    let s1 = Scope::Keys(BTreeSet::from([
        ("Logical_Switch", render::switch_key("s1")),
        ("DHCP_Options", render::dhcp4_key("s1")),
        ("DHCP_Options", render::dhcp4_secondary_key("s1")),
    ]));
    let gone = nb::converge(c, &[], &s1).await.unwrap();
    assert_eq!(gone.deleted.len(), 3, "{gone:?}");
    assert_eq!(
        db.names("Logical_Router_Port").await,
        BTreeSet::from(["osac-lrp-s2".into()])
    );
    assert_eq!(
        db.names("Logical_Switch").await,
        BTreeSet::from([render::switch_name("s2")])
    );
    assert_eq!(
        db.names("Logical_Switch_Port").await,
        BTreeSet::from([render::switch_router_port_name("s2")])
    );
    db.stop().await;
}

fn group(key: &str) -> Row {
    Row::new(
        "Port_Group",
        key,
        op::row([("name", json!(format!("pg_{key}")))]),
    )
}

/// Whether reading only the rows a converge names or every row of ours, a switch listed with
/// fewer ports drops the ports of ours it no longer lists and keeps one added by hand, and a
/// port moved to another group of ours leaves the first while a foreign group keeps it.
#[tokio::test]
async fn keyed_and_full_reads_drop_what_is_no_longer_listed_and_keep_foreign_rows() {
    for reads in [nb::Reads::Touched, nb::Reads::Everything] {
        let Some(db) = db().await else { return };
        let c = &db.client;
        let none = Scope::Keys(BTreeSet::new());
        let ports = [port("p1", "m1"), port("p2", "m2"), port("p3", "m3")];
        let wanted = [switch("s", &ports), group("g1"), group("g2")];
        nb::converge_reading(c, &wanted, &none, reads)
            .await
            .unwrap();
        let switch_uuid = db.uuid_of("Logical_Switch", "osac-s").await;
        c.transact(
            NB,
            vec![
                op::insert(
                    "Logical_Switch_Port",
                    op::row([("name", json!("foreign"))]),
                    Some("f"),
                ),
                op::mutate(
                    "Logical_Switch",
                    op::by_uuid(&switch_uuid),
                    vec![op::mutation(
                        "ports",
                        "insert",
                        datum::set([datum::named_uuid("f")]),
                    )],
                ),
                op::insert("Port_Group", op::row([("name", json!("pg_foreign"))]), None),
            ],
        )
        .await
        .unwrap();

        let fewer = switch("s", &ports[..1]);
        let changes = nb::converge_reading(c, &[fewer], &none, reads)
            .await
            .unwrap();
        let deleted: BTreeSet<&str> = changes.deleted.iter().map(String::as_str).collect();
        assert_eq!(
            deleted,
            BTreeSet::from(["Logical_Switch_Port:port:p2", "Logical_Switch_Port:port:p3"]),
            "{reads:?}"
        );
        assert_eq!(
            db.names("Logical_Switch_Port").await,
            BTreeSet::from(["p1".into(), "foreign".into()]),
            "{reads:?}"
        );

        let in_group = |g: &str| port("p1", "m1").member_of("Port_Group", "ports", [g]);
        nb::converge_reading(c, &[in_group("g1")], &none, reads)
            .await
            .unwrap();
        let p1 = db.uuid_of("Logical_Switch_Port", "p1").await;
        let foreign = db.uuid_of("Port_Group", "pg_foreign").await;
        c.transact(
            NB,
            vec![op::mutate(
                "Port_Group",
                op::by_uuid(&foreign),
                vec![op::mutation(
                    "ports",
                    "insert",
                    datum::set([datum::uuid(&p1)]),
                )],
            )],
        )
        .await
        .unwrap();
        nb::converge_reading(c, &[in_group("g2")], &none, reads)
            .await
            .unwrap();
        for (name, holds) in [("pg_g1", false), ("pg_g2", true), ("pg_foreign", true)] {
            let rows = db.rows("Port_Group").await;
            let row = rows.iter().find(|r| r["name"] == name).expect(name);
            let members = datum::uuid_set_items(&row["ports"]);
            assert_eq!(members.contains(&p1), holds, "{name}, {reads:?}");
        }
        db.stop().await;
    }
}

/// A keyed converge costs the same round trips whatever else of ours the database holds: one
/// read and one write for a new port in a group.
#[tokio::test]
async fn a_keyed_converge_costs_two_transactions_however_many_rows_exist() {
    let Some(db) = db().await else { return };
    let c = &db.client;
    let none = Scope::Keys(BTreeSet::new());
    let many: Vec<Row> = (0..50).map(|i| port(&format!("q{i}"), "m")).collect();
    nb::converge(c, &[switch("s", &many), group("g")], &none)
        .await
        .unwrap();
    let before = c.transactions();
    let new = port("new", "m").member_of("Port_Group", "ports", ["g"]);
    let changes = nb::converge(c, &[new], &none).await.unwrap();
    assert_eq!(changes.inserted, ["Logical_Switch_Port:port:new"]);
    assert_eq!(c.transactions() - before, 2);
    db.stop().await;
}
