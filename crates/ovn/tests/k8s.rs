//! The k8s role of the `ovn` driver on a northbound database of its own (no root needed): the
//! k8s conformance suite (the one sim, exec and linux pass), overlays recorded in the database
//! (a new manager knows them; the fabric role's drift repair leaves them alone), the hosting
//! clusters' chassis checked at start, and a VM's port bound to a chassis of its hosting
//! cluster.

mod common;

use std::sync::Arc;

use osac_backends::conformance::k8s_suite;
use osac_backends::{
    Capability, CreateNetworkAttachmentRequest, CreateSubnetOverlayRequest, CreateSubnetRequest,
    CreateVirtualNetworkRequest, DriverConfig, FabricManager, K8sManager, Registration, Role,
};
use osac_ovn::{OvnFabric, OvnK8s, OvnSettings};

fn registration(role: Role) -> Registration {
    Registration {
        name: format!("ovn-{role}"),
        role,
        description: "test".into(),
        capabilities: [Capability::Ipv4].into_iter().collect(),
        driver: DriverConfig::Ovn(serde_yaml_ng::Value::Null),
        hosting_clusters: match role {
            Role::K8s => vec!["hc-a".into(), "hc-b".into()],
            Role::Fabric => Vec::new(),
        },
    }
}

fn settings(db: &common::Db, chassis: &str) -> OvnSettings {
    let yaml = format!(
        "northbound: unix:{}\nprovider_network: osac-provider\ntransit_cidr: 100.64.0.0/24\nprovider_gateway: 100.64.0.1\ngateway_chassis: [hv1]\nchassis:\n{chassis}",
        db.dir.path().join("nb.sock").display()
    );
    serde_yaml_ng::from_str(&yaml).unwrap()
}

const CHASSIS: &str = "  hc-a: [hv1]\n  hc-b: [hv2, hv3]\n  '*': [hv4]\n";

#[tokio::test]
async fn the_ovn_k8s_role_passes_the_conformance_suite_and_records_overlays_in_the_database() {
    let Some(db) = common::db().await else {
        return;
    };
    let k8s = Arc::new(
        OvnK8s::open(registration(Role::K8s), settings(&db, CHASSIS))
            .await
            .expect("open"),
    );
    let manager: Arc<dyn K8sManager> = k8s.clone();
    k8s_suite(manager, "k1").await.unwrap();

    // An overlay with its VIP range, read back by a new manager on the same database.
    let overlay = CreateSubnetOverlayRequest {
        subnet_id: "s".into(),
        segment_id: 42,
        hosting_cluster: "hc-b".into(),
        ipv4_cidr: Some("10.1.1.0/24".parse().unwrap()),
        ipv6_cidr: None,
        vip_cidr: Some("10.1.1.240/28".parse().unwrap()),
    };
    k8s.create_subnet_overlay(&overlay).await.unwrap();
    let again = OvnK8s::open(registration(Role::K8s), settings(&db, CHASSIS))
        .await
        .expect("reopen");
    assert_eq!(again.overlay("s", "hc-b").await, Some(overlay.clone()));
    // The VIP range is in the overlay's row.
    let rows = db.rows("Address_Set").await;
    let row = rows
        .iter()
        .find(|r| {
            osac_ovsdb::datum::string_map_items(&r["external_ids"]).get("osac-id")
                == Some(&"overlay:hc-b/s".to_string())
        })
        .expect("the overlay's row");
    assert_eq!(
        osac_ovsdb::datum::string_set_items(&row["addresses"]),
        vec!["10.1.1.240/28".to_string()]
    );
    // The segment is taken on that cluster: another subnet on it is refused, and changes
    // nothing.
    let other = CreateSubnetOverlayRequest {
        subnet_id: "other".into(),
        ..overlay.clone()
    };
    let err = again.create_subnet_overlay(&other).await.unwrap_err();
    assert!(err.to_string().contains("already bridged"), "{err}");
    assert_eq!(again.overlay("other", "hc-b").await, None);

    // The fabric role's drift repair does not touch the k8s role's rows.
    let fabric = OvnFabric::open(registration(Role::Fabric), settings(&db, CHASSIS))
        .await
        .expect("fabric");
    fabric.resync().await.unwrap();
    let reopened = OvnK8s::open(registration(Role::K8s), settings(&db, CHASSIS))
        .await
        .expect("reopen after a resync");
    assert_eq!(reopened.overlay("s", "hc-b").await, Some(overlay));
    db.stop().await;
}

#[tokio::test]
async fn a_hosting_cluster_without_chassis_is_refused_at_start() {
    let Some(db) = common::db().await else {
        return;
    };
    let err = OvnK8s::open(registration(Role::K8s), settings(&db, "  hc-a: [hv1]\n"))
        .await
        .err()
        .expect("refused");
    assert!(
        err.to_string()
            .contains("hosting cluster 'hc-b' has no chassis"),
        "{err}"
    );
    db.stop().await;
}

#[tokio::test]
async fn ports_are_bound_on_a_chassis_of_their_hosting_cluster_or_host() {
    let Some(db) = common::db().await else {
        return;
    };
    let fabric = OvnFabric::open(registration(Role::Fabric), settings(&db, CHASSIS))
        .await
        .expect("fabric");
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
    let port = |id: &str, host: &str, interface: &str, mac: &str| CreateNetworkAttachmentRequest {
        attachment_id: id.into(),
        host: host.into(),
        interface: interface.into(),
        mac_address: mac.into(),
        subnet_id: "s".into(),
        virtual_network_id: "v".into(),
        security_groups: Vec::new(),
        primary: true,
        allowed_addresses: Vec::new(),
    };
    for (id, host, interface, mac) in [
        ("vm-a/0", "hc-a", "vm-a/eth0", "02:00:00:00:00:01"),
        ("vm-b/0", "hc-b", "vm-b/eth0", "02:00:00:00:00:02"),
        ("vm-b/1", "hc-b", "vm-b/eth1", "02:00:00:00:00:03"),
        ("bm", "server-1", "data-0", "0e:00:00:00:00:01"),
    ] {
        fabric
            .create_network_attachment(&port(id, host, interface, mac))
            .await
            .unwrap();
    }
    let chassis_of = |rows: &[serde_json::Value], name: &str| {
        rows.iter()
            .find(|r| r["name"] == name)
            .map(|r| osac_ovsdb::datum::string_map_items(&r["options"]))
            .and_then(|o| o.get("requested-chassis").cloned())
            .unwrap_or_default()
    };
    let rows = db.rows("Logical_Switch_Port").await;
    assert_eq!(chassis_of(&rows, "osac-p-vm-a/0"), "hv1");
    let b0 = chassis_of(&rows, "osac-p-vm-b/0");
    assert!(["hv2", "hv3"].contains(&b0.as_str()), "{b0}");
    assert_eq!(
        chassis_of(&rows, "osac-p-vm-b/1"),
        b0,
        "a VM's NICs share a chassis"
    );
    assert_eq!(
        chassis_of(&rows, "osac-p-bm"),
        "hv4",
        "an unlisted host: the '*' chassis"
    );
    db.stop().await;
}
