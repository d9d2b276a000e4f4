//! A provider registers an OVN deployment by configuration (a `driver: ovn` file naming its
//! northbound database), and a tenant's VirtualNetwork, subnet and security group become
//! northbound rows through the API: no code change, no manager-specific API.

use std::path::{Path, PathBuf};

use osac_ovn::nb;
use osac_ovn::sandbox::{self, NB_SCHEMA};
use osac_ovsdb::{Client, op};
use serde_json::json;

use crate::common::*;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/managers")
}

/// The names of the rows of `table`.
async fn names(nb: &Client, table: &str) -> Vec<String> {
    let r = nb
        .transact(
            nb::DATABASE,
            vec![op::select(table, vec![], Some(&["name"]))],
        )
        .await
        .unwrap();
    r[0]["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|row| row["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ovn_manager_registered_by_a_file_programs_the_northbound_database() {
    if let Some(missing) = sandbox::missing_tools() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the OVN test must run under CI but cannot: missing {missing}"
        );
        eprintln!("skipped: missing {missing}");
        return;
    }
    let db_dir = tempfile::tempdir().unwrap();
    let address = sandbox::serve_database(db_dir.path(), "nb", NB_SCHEMA)
        .await
        .unwrap();
    let managers = tempfile::tempdir().unwrap();
    for file in ["sim-fabric.yaml", "sim-k8s.yaml"] {
        std::fs::copy(examples().join(file), managers.path().join(file)).unwrap();
    }
    std::fs::write(
        managers.path().join("ovn-fabric.yaml"),
        format!(
            "name: ovn-fabric\nrole: fabric\ndescription: OVN\ncapabilities: [ipv4, ipv6, dual_stack]\ndriver: ovn\novn:\n  northbound: {address}\n  provider_network: physnet\n  transit_cidr: 100.64.0.0/24\n  provider_gateway: 100.64.0.1\n  gateway_chassis: [hv1]\n  resync_seconds: 1\n"
        ),
    )
    .unwrap();
    let s = TestServer::with_class(managers.path(), "ovn-class", "ovn-fabric").await;

    let t = s.tenant("acme").await;
    let vn = t
        .create(
            "virtual_networks",
            json!({"metadata": {"name": "net"}, "spec": {"network_class": "ovn-class", "ipv4_cidr": "10.5.0.0/16"}}),
        )
        .await;
    t.wait("virtual_networks", "net", "VIRTUAL_NETWORK_STATE_READY")
        .await;
    let subnet = t
        .create(
            "subnets",
            json!({"metadata": {"name": "s1"}, "spec": {"virtual_network": "net", "ipv4_cidr": "10.5.1.0/24"}}),
        )
        .await;
    let ready = t.wait("subnets", "s1", "SUBNET_STATE_READY").await;
    assert!(!ready["status"]["segment_id"].is_null(), "{ready}");
    let sg = t
        .create(
            "security_groups",
            json!({"metadata": {"name": "web"}, "spec": {"virtual_network": "net",
                "ingress": [{"protocol": "PROTOCOL_TCP", "port_from": 443, "port_to": 443, "ipv4_cidr": "0.0.0.0/0"}]}}),
        )
        .await;
    t.wait("security_groups", "web", "SECURITY_GROUP_STATE_READY")
        .await;

    let (client, _) = Client::connect(&address).await.unwrap();
    let routers = names(&client, "Logical_Router").await;
    assert!(
        routers.contains(&format!("osac-vn-{}", id(&vn))),
        "{routers:?}"
    );
    let switches = names(&client, "Logical_Switch").await;
    assert!(
        switches.contains(&format!("osac-sn-{}", id(&subnet))),
        "{switches:?}"
    );
    let groups = names(&client, "Port_Group").await;
    assert!(
        groups.contains(&osac_ovn::render::security::security_group_name(&id(&sg))),
        "{groups:?}"
    );

    // A port group deleted by hand (its ACLs go with it) is put back by the drift check, and
    // the provider sees an event on the class saying so.
    let group = osac_ovn::render::security::security_group_name(&id(&sg));
    client
        .transact(
            nb::DATABASE,
            vec![op::delete(
                "Port_Group",
                vec![op::cond("name", "==", json!(group))],
            )],
        )
        .await
        .unwrap();
    assert!(!names(&client, "Port_Group").await.contains(&group));
    let class = s
        .admin
        .get(&format!("{PRIV}/network_classes/ovn-class"))
        .await
        .ok();
    let filter = format!(
        "this.spec.object_id == \"{}\" && this.spec.reason == \"FabricDriftRepaired\"",
        id(&class)
    );
    let start = std::time::Instant::now();
    let event = loop {
        let listed = s.admin.list("events", &[("filter", &filter)]).await.ok();
        if let Some(ev) = listed["items"].as_array().and_then(|a| a.first()) {
            break ev.clone();
        }
        assert!(
            start.elapsed() < WAIT,
            "no FabricDriftRepaired event: {listed}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(event["spec"]["type"], "EVENT_TYPE_WARNING", "{event}");
    let message = event["spec"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("fabric manager 'ovn-fabric' put back") && message.contains("Port_Group"),
        "{message}"
    );
    assert!(names(&client, "Port_Group").await.contains(&group));
    // Backend detail stays the provider's: the tenant lists no such event.
    let seen = t.list("events", &[("filter", &filter)]).await.ok();
    assert_eq!(seen["items"].as_array().map_or(0, Vec::len), 0, "{seen}");

    // Deleting the subnet removes its switch.
    t.delete(&format!("{PUB}/subnets/{}", id(&subnet))).await;
    t.wait_gone(PUB, "subnets", &id(&subnet)).await;
    let switches = names(&client, "Logical_Switch").await;
    assert!(
        !switches.contains(&format!("osac-sn-{}", id(&subnet))),
        "{switches:?}"
    );
    drop(client);
    sandbox::stop_database(db_dir.path(), "nb").await;
}
