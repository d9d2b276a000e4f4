//! The rendered rows of ports, security groups and external access converged into a real
//! northbound database (no root needed): references resolved to the right rows, memberships
//! kept exact, a missing group refused with nothing written, NAT rules added and removed one by
//! one. Without the OVN packages the tests say so and pass, except under CI.

mod common;

use std::collections::BTreeSet;

use common::{Db, db};
use osac_backends::types::{
    ApplySecurityGroupRequest, CreateExternalIpAttachmentRequest, CreateNatGatewayRequest,
    CreateNetworkAttachmentRequest, CreateSubnetRequest, CreateVirtualNetworkRequest,
    PortAddresses, Protocol, SecurityRule,
};
use osac_ovn::nb::{self, ConvergeError, Row, Scope};
use osac_ovn::render::{self, external, port, security};
use osac_ovsdb::datum;
use serde_json::Value;

fn none() -> Scope {
    Scope::Keys(BTreeSet::new())
}

async fn converge(db: &Db, rows: Vec<Row>) -> nb::Changes {
    nb::converge(&db.client, &rows, &none())
        .await
        .expect("converge")
}

async fn network(db: &Db) {
    let vn = render::virtual_network(&CreateVirtualNetworkRequest {
        virtual_network_id: "v1".into(),
        tenant: "t1".into(),
        ipv4_cidr: Some("10.0.0.0/16".parse().unwrap()),
        ipv6_cidr: None,
    });
    converge(db, vec![vn.router, vn.ports]).await;
    let subnet = render::subnet(
        &CreateSubnetRequest {
            subnet_id: "s1".into(),
            virtual_network_id: "v1".into(),
            ipv4_cidr: Some("10.0.1.0/24".parse().unwrap()),
            ipv6_cidr: None,
            vip_cidr: None,
        },
        "t1",
        7,
    );
    converge(db, subnet.all()).await;
}

fn group(id: &str, port: u16) -> Row {
    security::security_group(
        &ApplySecurityGroupRequest {
            security_group_id: id.into(),
            virtual_network_id: "v1".into(),
            ingress: vec![SecurityRule {
                protocol: Protocol::Tcp,
                port_from: Some(port),
                port_to: Some(port),
                cidr: "10.0.0.0/16".parse().unwrap(),
            }],
            egress: vec![],
        },
        "t1",
    )
}

fn attachment(id: &str, primary: bool, groups: &[&str]) -> CreateNetworkAttachmentRequest {
    CreateNetworkAttachmentRequest {
        attachment_id: id.into(),
        host: "hv1".into(),
        interface: "eth0".into(),
        mac_address: "0a:00:00:00:00:01".into(),
        subnet_id: "s1".into(),
        virtual_network_id: "v1".into(),
        security_groups: groups.iter().map(|g| g.to_string()).collect(),
        primary,
        allowed_addresses: vec![],
    }
}

fn v4(ip: &str) -> PortAddresses {
    PortAddresses {
        ipv4_address: Some(ip.parse().unwrap()),
        ipv6_address: None,
    }
}

/// The row of `table` whose `external_ids:osac-id` is `key`.
async fn row(db: &Db, table: &str, key: &str) -> Value {
    db.rows(table)
        .await
        .into_iter()
        .find(|r| datum::string_map_items(&r["external_ids"]).get(nb::ID_KEY) == Some(&key.into()))
        .unwrap_or_else(|| panic!("no {table} {key}"))
}

async fn uuid(db: &Db, table: &str, key: &str) -> String {
    datum::as_uuid(&row(db, table, key).await["_uuid"])
        .unwrap()
        .to_string()
}

/// The ports (UUIDs) of the port group keyed `key`.
async fn members(db: &Db, key: &str) -> Vec<String> {
    datum::uuid_set_items(&row(db, "Port_Group", key).await["ports"])
}

#[tokio::test]
async fn ports_reference_their_dhcp_options_and_are_in_exactly_their_groups() {
    let Some(db) = db().await else { return };
    network(&db).await;
    converge(&db, vec![group("web", 80), group("sql", 5432)]).await;

    let p1 = port::port(
        &attachment("a1", true, &["web"]),
        &v4("10.0.1.5"),
        &[],
        "t1",
    );
    converge(&db, vec![p1.clone()]).await;
    let again = converge(&db, vec![p1]).await;
    assert!(again.is_empty(), "nothing to change, yet: {again:?}");
    let a1 = uuid(&db, "Logical_Switch_Port", &port::port_key("a1")).await;
    let lsp = row(&db, "Logical_Switch_Port", &port::port_key("a1")).await;
    assert_eq!(
        datum::as_uuid(&lsp["dhcpv4_options"]),
        Some(
            uuid(&db, "DHCP_Options", &render::dhcp4_key("s1"))
                .await
                .as_str()
        ),
        "a primary port gets the options with the router"
    );
    let switch = row(&db, "Logical_Switch", &render::switch_key("s1")).await;
    assert!(datum::uuid_set_items(&switch["ports"]).contains(&a1));
    let vn_group = security::network_port_group_key("v1");
    assert_eq!(members(&db, &vn_group).await, std::slice::from_ref(&a1));
    assert_eq!(
        members(&db, &security::security_group_key("web")).await,
        std::slice::from_ref(&a1)
    );
    assert!(
        members(&db, &security::security_group_key("sql"))
            .await
            .is_empty()
    );

    // Its groups change: it leaves web, joins sql, stays in the network's group.
    let moved = port::port(
        &attachment("a1", true, &["sql"]),
        &v4("10.0.1.5"),
        &[],
        "t1",
    );
    converge(&db, vec![moved]).await;
    assert!(
        members(&db, &security::security_group_key("web"))
            .await
            .is_empty()
    );
    assert_eq!(
        members(&db, &security::security_group_key("sql")).await,
        std::slice::from_ref(&a1)
    );
    assert_eq!(members(&db, &vn_group).await, std::slice::from_ref(&a1));

    // A group's rules change: its ACLs are replaced, its members stay.
    converge(&db, vec![group("sql", 3306)]).await;
    assert_eq!(
        members(&db, &security::security_group_key("sql")).await,
        std::slice::from_ref(&a1)
    );
    let acls: Vec<String> = db
        .rows("ACL")
        .await
        .iter()
        .filter_map(|a| a["match"].as_str().map(str::to_string))
        .filter(|m| m.contains("tcp.dst"))
        .collect();
    assert_eq!(acls.len(), 2, "{acls:?}");
    assert!(
        acls.iter().any(|m| m.ends_with("tcp.dst == 3306")),
        "{acls:?}"
    );
    assert!(
        !acls.iter().any(|m| m.ends_with("tcp.dst == 5432")),
        "{acls:?}"
    );

    // A secondary port: the options without the router.
    let p2 = port::port(&attachment("a2", false, &[]), &v4("10.0.1.6"), &[], "t1");
    converge(&db, vec![p2]).await;
    let lsp2 = row(&db, "Logical_Switch_Port", &port::port_key("a2")).await;
    assert_eq!(
        datum::as_uuid(&lsp2["dhcpv4_options"]),
        Some(
            uuid(&db, "DHCP_Options", &render::dhcp4_secondary_key("s1"))
                .await
                .as_str()
        )
    );

    // A group that does not exist: refused, nothing written.
    let before = db.rows("Logical_Switch_Port").await.len();
    let bad = port::port(
        &attachment("a3", true, &["nope"]),
        &v4("10.0.1.7"),
        &[],
        "t1",
    );
    let err = nb::converge(&db.client, &[bad], &none()).await.unwrap_err();
    assert!(
        matches!(&err, ConvergeError::MissingReference { key, .. } if key == "sg:nope"),
        "{err}"
    );
    assert_eq!(db.rows("Logical_Switch_Port").await.len(), before);

    // The port detached from its switch: gone, and from its groups with it.
    let gone = nb::detach(
        &db.client,
        ("Logical_Switch", &render::switch_key("s1")),
        "ports",
        ("Logical_Switch_Port", &port::port_key("a1")),
    )
    .await
    .unwrap();
    assert!(gone);
    assert!(!members(&db, &vn_group).await.contains(&a1));
    db.stop().await;
}

#[tokio::test]
async fn the_uplink_and_nat_rules_join_the_router_and_leave_it_one_by_one() {
    let Some(db) = db().await else { return };
    network(&db).await;
    let provider = external::ProviderNetwork {
        network_name: "physnet".into(),
        transit_cidr: "172.31.0.0/24".parse().unwrap(),
        gateway: "172.31.0.1".parse().unwrap(),
        ipv6: None,
    };
    converge(&db, vec![external::provider_switch(&provider)]).await;
    let up = external::uplink(
        "v1",
        "t1",
        &provider,
        &["172.31.0.2".parse().unwrap()],
        &["hv1"],
        &["10.0.0.0/16".parse().unwrap()],
        &[],
    );
    let nat = external::nat_gateway(
        &CreateNatGatewayRequest {
            nat_gateway_id: "n1".into(),
            virtual_network_id: "v1".into(),
            external_address: "203.0.113.10".parse().unwrap(),
            source_cidrs: vec!["10.0.0.0/16".parse().unwrap()],
        },
        "t1",
    );
    let dnat = external::external_ip_attachment(
        &CreateExternalIpAttachmentRequest {
            attachment_id: "e1".into(),
            virtual_network_id: "v1".into(),
            external_address: "203.0.113.11".parse().unwrap(),
            target_ip: "10.0.1.5".parse().unwrap(),
        },
        "t1",
    );
    let sources = ["10.0.0.0/16".parse().unwrap()];
    let default_egress =
        external::source_nat("v1", "t1", &sources, &["172.31.0.2".parse().unwrap()]);
    converge(
        &db,
        vec![
            up.router.clone(),
            up.provider_port.clone(),
            up.guard.clone(),
            default_egress.clone(),
        ],
    )
    .await;
    let snat = || async {
        db.rows("NAT")
            .await
            .into_iter()
            .find(|n| n["type"] == "snat")
            .expect("snat")
    };
    assert_eq!(snat().await["external_ip"], "172.31.0.2");
    let all = vec![up.router, up.provider_port, up.guard, nat, dnat];
    converge(&db, all.clone()).await;
    assert!(converge(&db, all).await.is_empty());
    assert_eq!(
        snat().await["external_ip"],
        "203.0.113.10",
        "the NAT gateway took the prefix's row"
    );
    let router = row(&db, "Logical_Router", &render::router_key("v1")).await;
    assert_eq!(datum::uuid_set_items(&router["nat"]).len(), 2);
    assert_eq!(
        datum::uuid_set_items(&router["ports"]).len(),
        2,
        "the subnet's gateway and the uplink"
    );
    assert_eq!(db.rows("Gateway_Chassis").await.len(), 1);
    let provider_switch = row(
        &db,
        "Logical_Switch",
        &external::provider_switch_key("physnet"),
    )
    .await;
    assert_eq!(datum::uuid_set_items(&provider_switch["ports"]).len(), 2);

    let detached = nb::detach(
        &db.client,
        ("Logical_Router", &render::router_key("v1")),
        "nat",
        ("NAT", &external::external_ip_attachment_key("e1")),
    )
    .await
    .unwrap();
    assert!(detached);
    let nats = db.rows("NAT").await;
    assert_eq!(nats.len(), 1);
    assert_eq!(nats[0]["type"], "snat");
    // The NAT gateway deleted: the transit address again.
    converge(&db, vec![default_egress]).await;
    assert_eq!(snat().await["external_ip"], "172.31.0.2");
    assert_eq!(db.rows("NAT").await.len(), 1);
    db.stop().await;
}
