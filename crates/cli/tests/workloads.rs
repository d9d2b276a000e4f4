//! The `osac` binary driven end to end against a real in-process server (SQLite, sim fabric,
//! sim provisioners): the documented CLI flow for the workloads (docs/workloads.md), as a new user would type it — a
//! VM, a two-NIC bare-metal server (primary on data-0) and a three-node cluster reached through
//! an ExternalIPAttachment to its API endpoint, all reaching RUNNING/READY, then deleted.

mod common;

use common::readme::{
    API_IP, C1, C1_API, MY_NET, MY_SG, MY_SUBNET, MY_SUBNET_B, MY_VM, S1, WAIT, WAIT_60S,
};
use common::{items, start, str_at};
use serde_json::Value;

/// The last line of a `--wait` output is the final state.
fn assert_waited(out: &str, label: &str, state: &str) {
    assert!(
        out.lines().next().unwrap_or_default().contains("created"),
        "{out}"
    );
    let last = out.lines().last().unwrap_or_default();
    assert_eq!(last, format!("{label}: {state}"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workload_flow_through_the_cli() {
    let env = start().await;
    let admin = env.admin.clone();

    // Inventory: the dev hosts, plus one added the way a provider would.
    let hosts = items(
        &env.json(&admin, &["admin", "get", "hosts", "-o", "json"])
            .await,
    );
    let pool_count = |hs: &[Value], pool: &str| {
        hs.iter()
            .filter(|h| str_at(h, "/spec/pool") == pool)
            .count()
    };
    assert!(pool_count(&hosts, "baremetal") >= 1, "{hosts:?}");
    assert!(pool_count(&hosts, "caas") >= 3, "{hosts:?}");
    let add_host = "admin create host --name extra-1 --host-type bm-standard \
        --interface data-0=02:aa:00:00:00:01,data-1=02:aa:00:00:00:02 \
        --interface mgmt-0=02:aa:00:00:00:03,bmc-0=02:aa:00:00:00:04 --pool baremetal";
    env.ok_line(&admin, add_host, WAIT).await;
    let table = env.ok(&admin, &["admin", "get", "hosts"]).await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "ID",
            "STATE",
            "TYPE",
            "POOL",
            "ASSIGNED-TO",
            "MESSAGE"
        ]
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("extra-1 ") && l.contains("FREE") && l.contains("bm-standard")),
        "{table}"
    );

    // A tenant and its network.
    env.ok(
        &admin,
        &["admin", "create", "tenant", "--name", "acme", "--wait"],
    )
    .await;
    let token = env.token("acme", "tenant-admin").await;
    let err = env.fails(&token, &["get", "hosts"]).await;
    assert!(err.contains("osac admin get host"), "{err}");
    for line in [MY_NET, MY_SUBNET, MY_SUBNET_B, MY_SG] {
        env.ok_line(&token, line, WAIT).await;
    }

    // A VM, in the documented `osac create computeinstance` form.
    let out = env.ok_line(&token, MY_VM, WAIT_60S).await;
    assert_waited(&out, "computeinstance/my-vm", "RUNNING");

    // A two-NIC bare-metal server, primary on data-0.
    let out = env.ok_line(&token, S1, WAIT_60S).await;
    assert_waited(&out, "baremetalinstance/s1", "RUNNING");

    // A three-node cluster, and external access to its API endpoint.
    let out = env.ok_line(&token, C1, WAIT_60S).await;
    assert_waited(&out, "cluster/c1", "READY");
    env.ok_line(&token, API_IP, WAIT).await;
    let out = env.ok_line(&token, C1_API, WAIT_60S).await;
    assert_waited(&out, "externalipattachment/c1-api", "READY");

    // What the objects say.
    let vm = env
        .json(&token, &["get", "computeinstance", "my-vm", "-o", "json"])
        .await;
    let vm_ip = str_at(&vm, "/status/internal_ip_address").to_string();
    assert!(vm_ip.starts_with("10.0.1."), "{vm}");
    let statuses = vm["status"]["compute_network_attachment_statuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(statuses.len(), 1, "{vm}");
    assert_eq!(str_at(&statuses[0], "/ip_address"), vm_ip);

    let bm = env
        .json(&token, &["get", "baremetalinstance", "s1", "-o", "json"])
        .await;
    let nics = bm["status"]["network_attachment_statuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let nic = |name: &str| {
        nics.iter()
            .find(|n| str_at(n, "/interface") == name)
            .cloned()
            .unwrap_or_else(|| panic!("no status for {name}: {bm}"))
    };
    let (d0, d1) = (nic("data-0"), nic("data-1"));
    assert!(str_at(&d0, "/ip_address").starts_with("10.0.1."), "{bm}");
    assert!(str_at(&d1, "/ip_address").starts_with("10.0.2."), "{bm}");
    assert_eq!(d0["primary"], true, "{bm}");
    assert_ne!(d1["primary"], true, "{bm}");
    assert!(!str_at(&bm, "/status/host").is_empty(), "{bm}");

    let cluster = env
        .json(&token, &["get", "cluster", "c1", "-o", "json"])
        .await;
    let api = str_at(&cluster, "/status/api_endpoint").to_string();
    let ingress = str_at(&cluster, "/status/ingress_endpoint").to_string();
    assert!(
        api.starts_with("10.0.1.") && ingress.starts_with("10.0.1."),
        "{cluster}"
    );
    assert_ne!(api, ingress);
    let agents = cluster["status"]["node_sets"]["workers"]["agents"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(agents.len(), 3, "{cluster}");
    for a in &agents {
        assert!(str_at(a, "/ip_address").starts_with("10.0.1."), "{cluster}");
    }

    let eip = env
        .json(&token, &["get", "externalip", "api-ip", "-o", "json"])
        .await;
    let address = str_at(&eip, "/status/address").to_string();
    assert!(address.starts_with("203.0.113."), "{eip}");
    let att = env
        .json(
            &token,
            &["get", "externalipattachment", "c1-api", "-o", "json"],
        )
        .await;
    assert_eq!(str_at(&att, "/status/target_ip"), api, "{att}");
    assert_eq!(
        str_at(&att, "/status/external_ip_address"),
        address,
        "{att}"
    );

    // The tables show the discovered addresses and endpoints (a cluster's external address is
    // that of the READY attachment to its API endpoint).
    let table = env.ok(&token, &["get", "computeinstances"]).await;
    let row = table
        .lines()
        .find(|l| l.starts_with("my-vm "))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        row.contains("RUNNING") && row.contains(&vm_ip) && row.contains("my-subnet"),
        "{table}"
    );
    let single = env.ok(&token, &["get", "computeinstance", "my-vm"]).await;
    assert_eq!(single.lines().count(), 2, "{single}");
    assert!(single.contains(&vm_ip), "{single}");
    let table = env.ok(&token, &["get", "baremetalinstances"]).await;
    let ips = format!(
        "data-0={},data-1={}",
        str_at(&d0, "/ip_address"),
        str_at(&d1, "/ip_address")
    );
    assert!(table.contains(&ips) && table.contains("RUNNING"), "{table}");
    let table = env.ok(&token, &["get", "clusters"]).await;
    let row: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with("c1 "))
        .unwrap_or_else(|| panic!("{table}"))
        .split_whitespace()
        .collect();
    assert_eq!(
        row[2..7],
        [
            "READY",
            api.as_str(),
            ingress.as_str(),
            "3/3",
            // The address of the API endpoint's attachment, labelled with its endpoint.
            format!("api={address}").as_str()
        ],
        "{table}"
    );
    let yaml = env
        .ok(&token, &["get", "cluster", "c1", "-o", "yaml"])
        .await;
    assert!(yaml.contains(&format!("api_endpoint: {api}")), "{yaml}");

    // The inventory shows what is in use: one bare-metal host, three caas agents.
    let hosts = items(
        &env.json(&admin, &["admin", "get", "hosts", "-o", "json"])
            .await,
    );
    let in_use = |pool: &str| {
        hosts
            .iter()
            .filter(|h| {
                str_at(h, "/spec/pool") == pool && str_at(h, "/status/state") != "HOST_STATE_FREE"
            })
            .count()
    };
    assert_eq!(in_use("baremetal"), 1, "{hosts:?}");
    assert_eq!(in_use("caas"), 3, "{hosts:?}");

    // Deletion frees everything again.
    for (kind, name) in [
        ("externalipattachment", "c1-api"),
        ("cluster", "c1"),
        ("baremetalinstance", "s1"),
        ("computeinstance", "my-vm"),
    ] {
        env.ok(
            &token,
            &["delete", kind, name, "--wait", "--timeout", "60s"],
        )
        .await;
    }
    // Every host is FREE again.
    env.until(&admin, &["admin", "get", "hosts"], |v| {
        items(v)
            .iter()
            .all(|h| str_at(h, "/status/state") == "HOST_STATE_FREE")
    })
    .await;
    env.ok(&admin, &["admin", "delete", "host", "extra-1", "--wait"])
        .await;
    env.server.shutdown().await;
}
