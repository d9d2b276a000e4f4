//! The fabric contract's conformance suite (the one sim, exec and linux pass) against the `ovn`
//! driver on a northbound database of its own (no root needed), and what the driver adds: the
//! database is its state (a new driver on the same database knows everything), and the rows
//! it wrote are gone with the objects.

mod common;

use std::sync::Arc;

use osac_backends::conformance::fabric_suite;
use osac_backends::{Capability, DriverConfig, FabricManager, Registration, Role};
use osac_ovn::{OvnFabric, OvnSettings};

fn registration() -> Registration {
    Registration {
        name: "ovn-fabric".into(),
        role: Role::Fabric,
        description: "test".into(),
        capabilities: [Capability::Ipv4, Capability::Ipv6, Capability::DualStack]
            .into_iter()
            .collect(),
        driver: DriverConfig::Ovn(serde_yaml_ng::Value::Null),
        hosting_clusters: Vec::new(),
    }
}

fn settings(db: &common::Db) -> OvnSettings {
    let yaml = format!(
        "northbound: unix:{}\nprovider_network: osac-provider\ntransit_cidr: 100.64.0.0/24\nprovider_gateway: 100.64.0.1\ngateway_chassis: [hv1]\n",
        db.dir.path().join("nb.sock").display()
    );
    serde_yaml_ng::from_str(&yaml).unwrap()
}

#[tokio::test]
async fn the_ovn_fabric_passes_the_conformance_suite_and_keeps_its_state_in_the_database() {
    let Some(db) = common::db().await else {
        return;
    };
    let fabric = Arc::new(
        OvnFabric::open(registration(), settings(&db))
            .await
            .expect("open"),
    );
    let manager: Arc<dyn FabricManager> = fabric.clone();
    fabric_suite(manager, "c1").await.unwrap();

    // Everything the suite created was deleted: no row of ours is left but the provider
    // network's switch, and the records of where the host ports are now (parked, detached).
    for table in [
        "Logical_Router",
        "Logical_Switch",
        "Port_Group",
        "NAT",
        "Address_Set",
    ] {
        let rows = db.rows(table).await;
        let ours: Vec<_> = rows
            .iter()
            .filter(|r| r["name"].as_str() != Some("osac-pn-osac-provider"))
            .filter(|r| {
                let ids = osac_ovsdb::datum::string_map_items(&r["external_ids"]);
                !ids.get("osac-id")
                    .is_some_and(|k| k.starts_with("record:port/"))
            })
            .collect();
        assert!(ours.is_empty(), "{table} still holds {ours:?}");
    }

    // A second run while a first driver's objects exist, read back by a new driver.
    let manager: Arc<dyn FabricManager> = fabric.clone();
    let vn = osac_backends::CreateVirtualNetworkRequest {
        virtual_network_id: "kept".into(),
        tenant: "t".into(),
        ipv4_cidr: Some("10.9.0.0/16".parse().unwrap()),
        ipv6_cidr: None,
    };
    manager.create_virtual_network(&vn).await.unwrap();
    let subnet = osac_backends::CreateSubnetRequest {
        subnet_id: "kept-s".into(),
        virtual_network_id: "kept".into(),
        ipv4_cidr: Some("10.9.1.0/24".parse().unwrap()),
        ipv6_cidr: None,
        vip_cidr: None,
    };
    let made = manager.create_subnet(&subnet).await.unwrap();
    drop(manager);
    drop(fabric);
    let again = OvnFabric::open(registration(), settings(&db))
        .await
        .expect("reopen");
    let state = again.state().await;
    assert_eq!(state.vn("kept").map(|v| v.tenant.as_str()), Some("t"));
    assert_eq!(
        state.subnet("kept-s").map(|s| s.segment_id),
        Some(made.segment_id)
    );
    // The reopened driver refuses what the first one would: an overlapping sibling.
    let overlapping = osac_backends::CreateSubnetRequest {
        subnet_id: "other".into(),
        ipv4_cidr: Some("10.9.1.128/25".parse().unwrap()),
        ..subnet
    };
    let err = again.create_subnet(&overlapping).await.unwrap_err();
    assert!(err.to_string().contains("overlaps"), "{err}");
    db.stop().await;
}

#[tokio::test]
async fn rows_changed_or_deleted_behind_the_drivers_back_are_put_back_by_a_resync() {
    use osac_backends::{
        ApplySecurityGroupRequest, CreateNetworkAttachmentRequest, CreateSubnetRequest,
        CreateVirtualNetworkRequest, Protocol, SecurityRule,
    };
    use osac_ovsdb::{datum, op};
    use serde_json::json;

    let Some(db) = common::db().await else {
        return;
    };
    let fabric = OvnFabric::open(registration(), settings(&db))
        .await
        .expect("open");
    fabric
        .create_virtual_network(&CreateVirtualNetworkRequest {
            virtual_network_id: "v".into(),
            tenant: "t".into(),
            ipv4_cidr: Some("10.1.0.0/16".parse().unwrap()),
            ipv6_cidr: None,
        })
        .await
        .unwrap();
    fabric
        .create_subnet(&CreateSubnetRequest {
            subnet_id: "s".into(),
            virtual_network_id: "v".into(),
            ipv4_cidr: Some("10.1.1.0/24".parse().unwrap()),
            ipv6_cidr: None,
            vip_cidr: None,
        })
        .await
        .unwrap();
    let rule = SecurityRule {
        protocol: Protocol::Tcp,
        port_from: Some(22),
        port_to: Some(22),
        cidr: "0.0.0.0/0".parse().unwrap(),
    };
    fabric
        .apply_security_group(&ApplySecurityGroupRequest {
            security_group_id: "g".into(),
            virtual_network_id: "v".into(),
            ingress: vec![rule],
            egress: vec![],
        })
        .await
        .unwrap();
    fabric
        .create_network_attachment(&CreateNetworkAttachmentRequest {
            attachment_id: "a".into(),
            host: "hv1".into(),
            interface: "eth0".into(),
            mac_address: "02:00:00:00:00:0a".into(),
            subnet_id: "s".into(),
            virtual_network_id: "v".into(),
            security_groups: vec!["g".into()],
            primary: true,
            allowed_addresses: vec![],
        })
        .await
        .unwrap();
    assert!(
        fabric.resync().await.unwrap().is_empty(),
        "nothing drifted yet"
    );

    // By hand: the group's ACL removed, the switch renamed, the port deleted.
    let group = osac_ovn::render::security::security_group_name("g");
    let pg = db.uuid_of("Port_Group", &group).await;
    let sw = db.uuid_of("Logical_Switch", "osac-sn-s").await;
    let lsp = db.uuid_of("Logical_Switch_Port", "osac-p-a").await;
    db.client
        .transact(
            common::NB,
            vec![
                op::update(
                    "Port_Group",
                    op::by_uuid(&pg),
                    op::row([("acls", datum::set([]))]),
                ),
                op::mutate(
                    "Logical_Switch",
                    op::by_uuid(&sw),
                    vec![op::mutation(
                        "ports",
                        "delete",
                        datum::set([datum::uuid(&lsp)]),
                    )],
                ),
                op::update(
                    "Logical_Switch",
                    op::by_uuid(&sw),
                    op::row([("name", json!("renamed"))]),
                ),
            ],
        )
        .await
        .unwrap();
    assert!(!db.names("Logical_Switch_Port").await.contains("osac-p-a"));

    let repaired = fabric.resync().await.unwrap();
    assert!(!repaired.is_empty());
    assert!(db.names("Logical_Switch").await.contains("osac-sn-s"));
    assert!(db.names("Logical_Switch_Port").await.contains("osac-p-a"));
    let acls = db.rows("ACL").await;
    assert!(
        acls.iter()
            .any(|a| a["match"].as_str().is_some_and(|m| m.contains("22"))),
        "the group's rule is back: {acls:?}"
    );
    assert!(
        fabric.resync().await.unwrap().is_empty(),
        "a second resync changes nothing"
    );
    db.stop().await;
}

/// With an IPv6 transit prefix beside the IPv4 one, a router's uplink has an address in each,
/// its default egress translates each family to the address of that family, and a new driver
/// on the same database reads both addresses back (its resync finds nothing to change).
#[tokio::test]
async fn a_dual_stack_provider_network_gives_routers_an_uplink_address_of_each_family() {
    use osac_backends::CreateVirtualNetworkRequest;
    use osac_ovsdb::datum;

    let Some(db) = common::db().await else {
        return;
    };
    let mut settings = settings(&db);
    settings.provider.transit_ipv6_cidr = Some("fd00:64::/64".parse().unwrap());
    settings.provider.provider_ipv6_gateway = Some("fd00:64::1".parse().unwrap());
    let fabric = OvnFabric::open(registration(), settings.clone())
        .await
        .expect("open");
    fabric
        .create_virtual_network(&CreateVirtualNetworkRequest {
            virtual_network_id: "v".into(),
            tenant: "t".into(),
            ipv4_cidr: Some("10.1.0.0/16".parse().unwrap()),
            ipv6_cidr: Some("fd00:1::/48".parse().unwrap()),
        })
        .await
        .unwrap();
    let uplink = db
        .rows("Logical_Router_Port")
        .await
        .into_iter()
        .find(|r| r["name"] == "osac-lrp-up-v")
        .expect("the uplink port");
    let mut networks = datum::string_set_items(&uplink["networks"]);
    networks.sort();
    assert_eq!(networks, ["100.64.0.2/24", "fd00:64::2/64"]);
    let mut snat: Vec<(String, String)> = db
        .rows("NAT")
        .await
        .iter()
        .map(|r| {
            (
                r["logical_ip"].as_str().unwrap_or_default().to_string(),
                r["external_ip"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    snat.sort();
    assert_eq!(
        snat,
        [
            ("10.1.0.0/16".to_string(), "100.64.0.2".to_string()),
            ("fd00:1::/48".to_string(), "fd00:64::2".to_string())
        ]
    );
    drop(fabric);
    let again = OvnFabric::open(registration(), settings)
        .await
        .expect("reopen");
    let changes = again.resync().await.expect("resync");
    assert!(changes.is_empty(), "{changes:?}");
}
