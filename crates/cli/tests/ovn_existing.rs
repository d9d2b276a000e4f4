//! Dev mode on an OVN that already runs (`osac server --dev --fabric ovn --ovn-northbound
//! ADDR`, no root): no sandbox starts, the `ovn` managers program that northbound database,
//! and the machines are simulated. A tenant's single-call VM becomes RUNNING with an address
//! and is a logical switch port there, bound to a chassis of its hosting cluster. Without the
//! OVN packages it skips with a reason, except under `CI=true`, where it fails.

#[path = "support/osac_cli.rs"]
mod osac_cli;

use std::time::Duration;

use osac_api::auth::{AuthConfig, ensure_admin_token};
use osac_controller::ControllerConfig;
use osac_ovn::sandbox::{self, NB_SCHEMA};
use osac_ovsdb::{Client, datum, op};
use osac_server::ServerConfig;
use osac_server::dataplane::FabricChoice;
use osac_server::ovn_dev::{HOSTING_CLUSTERS, OvnDev};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_mode_on_an_existing_northbound_database_programs_it_without_a_sandbox() {
    if let Some(missing) = sandbox::missing_tools() {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "the OVN test must run under CI but cannot: missing {missing}"
        );
        eprintln!("skipped: missing {missing}");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let db_dir = dir.path().join("nb");
    std::fs::create_dir_all(&db_dir).expect("db dir");
    let address = sandbox::serve_database(&db_dir, "nb", NB_SCHEMA)
        .await
        .expect("a northbound database");
    let admin = ensure_admin_token(&dir.path().join("tokens.json")).expect("admin token");
    let server = osac_server::start(ServerConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        database_url: format!("sqlite://{}", dir.path().join("osac.db").display()),
        auth: AuthConfig::TokenFile(dir.path().join("tokens.json")),
        managers_dir: None,
        controller: ControllerConfig {
            workers: 4,
            backoff_base: Duration::from_millis(100),
            backoff_cap: Duration::from_secs(2),
            ..ControllerConfig::default()
        },
        ip_discovery_timeout: ServerConfig::DEFAULT_IP_DISCOVERY_TIMEOUT,
        fabric: FabricChoice::Ovn(OvnDev {
            dir: dir.path().join("ovn"),
            prefix: "ovnx".into(),
            northbound: Some(address.to_string()),
        }),
        sim_latency: Default::default(),
        limits: Default::default(),
        transport: Default::default(),
    })
    .await
    .expect("the server starts on an existing northbound database");
    assert!(
        server.ovn_sandbox.is_none(),
        "no sandbox with --ovn-northbound"
    );
    osac_server::dev::bootstrap(&server.service)
        .await
        .expect("dev bootstrap");

    let config = dir.path().join("cli-config.json");
    let url = server.url();
    let osac = |token: String, args: Vec<&'static str>| {
        let (url, config) = (url.clone(), config.clone());
        async move {
            let out = osac_cli::run(url, &token, config, &args).await;
            osac_cli::stdout_of_success(&args, &out)
        }
    };
    osac(
        admin.clone(),
        vec!["admin", "create", "tenant", "--name", "acme"],
    )
    .await;
    let token = osac(
        admin.clone(),
        vec![
            "admin",
            "create",
            "token",
            "--tenant",
            "acme",
            "--role",
            "tenant-admin",
        ],
    )
    .await;
    osac(
        token.clone(),
        vec![
            "create",
            "computeinstance",
            "--template",
            "small",
            "--name",
            "vm1",
            "--wait",
            "--timeout",
            "120s",
        ],
    )
    .await;
    let text = osac(
        token.clone(),
        vec!["get", "computeinstance", "vm1", "-o", "json"],
    )
    .await;
    let vm: Value = serde_json::from_str(&text).expect("json");
    let ip = vm["status"]["compute_network_attachment_statuses"][0]["ip_address"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!ip.is_empty(), "the VM has an address: {vm}");

    // The VM is a port of the northbound database, with its address, bound to a chassis of
    // a hosting cluster.
    let (nb, _) = Client::connect(&address).await.expect("northbound");
    let reply = nb
        .transact(
            osac_ovn::nb::DATABASE,
            vec![op::select(
                "Logical_Switch_Port",
                vec![],
                Some(&["name", "addresses", "options"]),
            )],
        )
        .await
        .expect("select");
    let rows = reply[0]["rows"].as_array().cloned().unwrap_or_default();
    let port = rows
        .iter()
        .find(|r| {
            datum::string_set_items(&r["addresses"])
                .iter()
                .any(|a| a.split(' ').any(|w| w == ip))
        })
        .unwrap_or_else(|| panic!("no port holds {ip}: {rows:?}"));
    let chassis = datum::string_map_items(&port["options"])
        .get("requested-chassis")
        .cloned()
        .unwrap_or_default();
    assert!(
        HOSTING_CLUSTERS.iter().any(|(_, c)| *c == chassis),
        "bound to '{chassis}': {port}"
    );
    drop(nb);
    server.shutdown().await;
    sandbox::stop_database(&db_dir, "nb").await;
}
