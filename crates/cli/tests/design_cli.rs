//! The command lines of the OSAC networking designs, run as written against a real server:
//! a pool scoped to a NetworkClass with `--cidrs`, an attachment with `--target-endpoint`, and
//! security-group rules added and removed one at a time.

mod common;

use common::readme::{MY_NET, MY_SG, MY_SUBNET};
use common::start;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_designs_command_lines_run_as_written() {
    let env = start().await;
    let admin = env.admin.clone();
    env.ok(
        &admin,
        &[
            "admin",
            "create",
            "externalippool",
            "--network-class",
            "default",
            "--cidrs",
            "198.51.100.0/28,192.0.2.0/28",
            "--ip-family",
            "ipv4",
            "--name",
            "external-pool-2",
        ],
    )
    .await;
    let pool = env
        .json(
            &admin,
            &["admin", "get", "pool", "external-pool-2", "-o", "json"],
        )
        .await;
    let class = env
        .json(
            &admin,
            &["admin", "get", "networkclass", "default", "-o", "json"],
        )
        .await;
    assert_eq!(pool["spec"]["network_class"], class["id"]);
    assert_eq!(
        pool["spec"]["cidrs"],
        serde_json::json!(["198.51.100.0/28", "192.0.2.0/28"])
    );

    // A provider admin onboards with the design's spelling.
    env.ok(&admin, &["create", "tenant", "--name", "acme-corp"])
        .await;
    env.until(&admin, &["admin", "get", "tenant", "acme-corp"], |v| {
        v["status"]["state"] == "TENANT_STATE_READY"
    })
    .await;
    let token = env.tenant_admin("acme").await;
    // The label shorthand of the designs and kubectl.
    let defaults = env
        .json(
            &token,
            &[
                "get",
                "subnets",
                "--filter",
                r#"labels["osac.openshift.io/default"]="true""#,
                "-o",
                "json",
            ],
        )
        .await;
    let names: Vec<&str> = defaults
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s["metadata"]["name"].as_str())
                .collect()
        })
        .or_else(|| {
            defaults["items"].as_array().map(|a| {
                a.iter()
                    .filter_map(|s| s["metadata"]["name"].as_str())
                    .collect()
            })
        })
        .unwrap_or_default();
    assert!(names.contains(&"default-ipv4"), "{defaults}");
    let rule = "protocol:tcp,port:8080,source:0.0.0.0/0";
    let ingress =
        |v: &serde_json::Value| v["spec"]["ingress"].as_array().cloned().unwrap_or_default();
    let before = env
        .json(&token, &["get", "security-group", "default", "-o", "json"])
        .await;
    for _ in 0..2 {
        // Adding a rule that exists is a no-op.
        env.ok(
            &token,
            &["update", "security-group", "default", "--add-ingress", rule],
        )
        .await;
    }
    let added = env
        .json(&token, &["get", "security-group", "default", "-o", "json"])
        .await;
    assert_eq!(ingress(&added).len(), ingress(&before).len() + 1, "{added}");
    assert!(
        ingress(&added)
            .iter()
            .any(|r| r["port_from"] == 8080 && r["protocol"] == "PROTOCOL_TCP"),
        "{added}"
    );
    let out = env
        .osac(
            &token,
            &[
                "update",
                "security-group",
                "default",
                "--remove-ingress",
                "protocol:udp,port:9999,source:0.0.0.0/0",
            ],
        )
        .await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--remove-ingress") && stderr.contains("is not among the ingress rules"),
        "{stderr}"
    );
    env.ok(
        &token,
        &[
            "update",
            "security-group",
            "default",
            "--remove-ingress",
            rule,
        ],
    )
    .await;
    let removed = env
        .json(&token, &["get", "security-group", "default", "-o", "json"])
        .await;
    assert_eq!(ingress(&removed), ingress(&before));

    env.ok(
        &token,
        &[
            "create",
            "cluster",
            "--template",
            "ocp",
            "--node-set",
            "workers=bm-standard,size=1",
            "--name",
            "my-cluster",
            "--wait",
        ],
    )
    .await;
    env.ok(
        &token,
        &["create", "externalip", "--name", "my-ip", "--wait"],
    )
    .await;
    env.ok(
        &token,
        &[
            "create",
            "externalipattachment",
            "--externalip",
            "my-ip",
            "--cluster",
            "my-cluster",
            "--target-endpoint",
            "api",
            "--name",
            "api-att",
            "--wait",
        ],
    )
    .await;
    let att = env
        .json(
            &token,
            &["get", "externalipattachment", "api-att", "-o", "json"],
        )
        .await;
    assert_eq!(
        att["spec"]["target_endpoint"],
        "EXTERNAL_IP_ATTACHMENT_ENDPOINT_API"
    );
    assert_eq!(att["status"]["state"], "EXTERNAL_IP_ATTACHMENT_STATE_READY");
}

/// The design's bare-metal line: `--template` names a provider BareMetalTemplate (dev mode
/// has `bcm_h100`), which supplies the HostType. Tenants list templates; the provider creates
/// them with `osac admin create baremetaltemplate`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_baremetal_instance_from_a_template_as_written() {
    let env = start().await;
    let admin = env.admin.clone();
    let token = env.tenant_admin("acme").await;
    for line in [MY_NET, MY_SUBNET, MY_SG] {
        env.ok_line(&token, line, &[]).await;
    }
    env.ok(
        &token,
        &[
            "create",
            "baremetalinstance",
            "--template",
            "bcm_h100",
            "--network-attachment",
            "interface=data-0,subnet=my-subnet,security-groups=my-sg",
            "--name",
            "my-server",
        ],
    )
    .await;
    let template = env
        .json(
            &token,
            &["get", "baremetaltemplate", "bcm_h100", "-o", "json"],
        )
        .await;
    let host_type = env
        .json(&token, &["get", "hosttype", "bm-standard", "-o", "json"])
        .await;
    let server = env
        .until(&token, &["get", "baremetalinstance", "my-server"], |v| {
            v["status"]["state"] == "BARE_METAL_INSTANCE_STATE_RUNNING"
        })
        .await;
    assert_eq!(server["spec"]["template"], template["id"], "{server}");
    assert_eq!(server["spec"]["host_type"], host_type["id"], "{server}");
    assert_eq!(
        server["spec"]["network_attachments"][0]["interface"],
        "data-0"
    );

    // The provider adds a template; tenants see both in a table.
    env.ok(
        &admin,
        &[
            "admin",
            "create",
            "baremetaltemplate",
            "--name",
            "bm_small",
            "--host-type",
            "bm-standard",
            "--title",
            "Small server",
            "--description",
            "a small one",
        ],
    )
    .await;
    let table = env.ok(&token, &["get", "baremetaltemplates"]).await;
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.contains("NAME") && header.contains("HOST-TYPE") && header.contains("TITLE"),
        "{table}"
    );
    assert!(
        table.lines().any(|l| l.contains("bm_small")
            && l.contains("bm-standard")
            && l.contains("Small server")),
        "{table}"
    );
    assert!(table.contains("bcm_h100"), "{table}");
    let admin_table = env
        .ok(&admin, &["admin", "get", "baremetaltemplates"])
        .await;
    assert!(admin_table.contains("bm_small"), "{admin_table}");
    // Tenants cannot write templates.
    let out = env
        .osac(&token, &["delete", "baremetaltemplate", "bm_small"])
        .await;
    assert!(!out.status.success());
}

/// The provider's bare-metal flavor and a tenant server of it: `osac admin create
/// baremetalinstancetype` with its network ports and serving HostType, then `osac create
/// baremetalinstance --instance-type` with an SSH key file, user data and a run strategy;
/// changing the restart trigger with `osac update` is accepted, the image is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_baremetal_instance_of_a_type_as_written() {
    let env = start().await;
    let admin = env.admin.clone();
    let token = env.tenant_admin("acme").await;
    for line in [MY_NET, MY_SUBNET, MY_SG] {
        env.ok_line(&token, line, &[]).await;
    }
    env.ok(
        &admin,
        &[
            "admin",
            "create",
            "baremetalinstancetype",
            "--name",
            "gpu",
            "--port",
            "data-0:fabric:ethernet:100",
            "--port",
            "data-1:fabric:ethernet:100",
            "--port",
            "bmc-0:lifecycle:ethernet:1",
            "--host-type",
            "bm-standard",
            "--title",
            "GPU server",
        ],
    )
    .await;
    let table = env.ok(&token, &["get", "baremetalinstancetypes"]).await;
    assert!(
        table.lines().any(|l| l.contains("gpu")
            && l.contains("GPU server")
            && l.contains("data-0:fabric:ethernet:100G")
            && l.contains("bm-standard")),
        "{table}"
    );
    let dir = std::env::temp_dir().join(format!("osac-bmit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBfYvH0mCVjGkdrZ5ZKZQ1S1nNv3UQtbyH5oEi4pb0mV me@laptop";
    let key_file = dir.join("id_ed25519.pub");
    let user_data_file = dir.join("user-data");
    std::fs::write(&key_file, format!("{key}\n")).unwrap();
    std::fs::write(&user_data_file, "#cloud-config\nhostname: gpu-1\n").unwrap();
    env.ok(
        &token,
        &[
            "create",
            "baremetalinstance",
            "--instance-type",
            "gpu",
            "--image",
            "rhel-9.4",
            "--ssh-public-key-file",
            key_file.to_str().unwrap_or_default(),
            "--user-data-file",
            user_data_file.to_str().unwrap_or_default(),
            "--run-strategy",
            "always",
            "--network-attachment",
            "interface=data-1,subnet=my-subnet,security-groups=my-sg",
            "--name",
            "gpu-1",
        ],
    )
    .await;
    std::fs::remove_dir_all(&dir).ok();
    let gpu = env
        .json(
            &token,
            &["get", "baremetalinstancetype", "gpu", "-o", "json"],
        )
        .await;
    let server = env
        .until(&token, &["get", "baremetalinstance", "gpu-1"], |v| {
            v["status"]["state"] == "BARE_METAL_INSTANCE_STATE_RUNNING"
        })
        .await;
    assert_eq!(server["spec"]["instance_type"], gpu["id"], "{server}");
    assert_eq!(server["spec"]["ssh_public_key"], key, "{server}");
    assert_eq!(
        server["spec"]["user_data"],
        "#cloud-config\nhostname: gpu-1\n"
    );
    assert_eq!(
        server["spec"]["run_strategy"],
        "BARE_METAL_RUN_STRATEGY_ALWAYS"
    );
    // A port the type lacks is refused, naming the type.
    let out = env
        .osac(
            &token,
            &[
                "create",
                "baremetalinstance",
                "--instance-type",
                "gpu",
                "--network-attachment",
                "interface=mgmt-0,subnet=my-subnet",
                "--name",
                "gpu-2",
            ],
        )
        .await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("BareMetalInstanceType 'gpu' has no interface 'mgmt-0'"),
        "{err}"
    );
    // Tenants cannot write types.
    let out = env
        .osac(&token, &["delete", "baremetalinstancetype", "gpu"])
        .await;
    assert!(!out.status.success());
}
