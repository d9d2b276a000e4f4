//! More command lines of the OSAC networking designs, run as written against a real server:
//! `--primary SUBNET` on a multi-NIC VM, the deprecation warnings of the old attachment field
//! and of the old bare-metal template alias, an attachment to a cluster that does not exist
//! yet, a cluster's two external addresses, and `osac delete tenant` for a provider admin.

mod common;

use common::readme::{MY_NET, MY_SG, MY_SUBNET, MY_SUBNET_B, MY_VM2};
use common::{start, str_at};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_designs_flags_run_as_written() {
    let env = start().await;
    let admin = env.admin.clone();
    env.ok(
        &admin,
        &["create", "tenant", "--name", "acme-corp", "--wait"],
    )
    .await;
    let token = env.token("acme-corp", "tenant-admin").await;
    for line in [MY_NET, MY_SUBNET, MY_SUBNET_B, MY_SG] {
        env.ok_line(&token, line, &[]).await;
    }

    // The PRD's multi-NIC line: the primary named by its subnet.
    let args: Vec<&str> = MY_VM2.split_whitespace().collect();
    let out = env.osac(&token, &args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr.contains("warning"),
        "the current field warns: {stderr}"
    );
    let vm = env
        .json(&token, &["get", "computeinstance", "my-vm2", "-o", "json"])
        .await;
    let subnet_b = env
        .json(&token, &["get", "subnet", "my-subnet-b", "-o", "json"])
        .await;
    let atts = &vm["spec"]["compute_network_attachments"];
    assert_eq!(atts[1]["subnet"], subnet_b["id"], "{vm}");
    assert_eq!(atts[1]["primary"], true, "{vm}");
    assert_ne!(atts[0]["primary"], true, "{vm}");
    let e = env
        .fails(
            &token,
            &[
                "create",
                "vm",
                "--template",
                "ocp_virt_vm",
                "--network-attachment",
                "subnet=my-subnet",
                "--primary",
                "elsewhere",
                "--name",
                "nope",
            ],
        )
        .await;
    assert!(
        e.contains("--primary: 'elsewhere' is not the subnet of any"),
        "{e}"
    );

    // The deprecated attachment field still works, and the CLI shows the server's warning.
    let file = env.dir.path().join("old-vm.json");
    let old = serde_json::json!({
        "metadata": {"name": "old-vm"},
        "spec": {"template": "ocp_virt_vm", "network_attachments": [{"subnet": "my-subnet"}]}
    });
    std::fs::write(&file, old.to_string()).expect("write old-vm.json");
    let path = file.to_string_lossy().into_owned();
    let out = env
        .osac(&token, &["create", "computeinstance", "-f", &path])
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: spec.network_attachments is deprecated")
            && stderr.contains("spec.compute_network_attachments"),
        "{stderr}"
    );
    let converted = env
        .json(&token, &["get", "computeinstance", "old-vm", "-o", "json"])
        .await;
    assert_eq!(
        converted["spec"]["compute_network_attachments"][0]["primary"], true,
        "{converted}"
    );

    // An attachment may name a cluster that does not exist yet; describe says what it awaits.
    env.ok(
        &token,
        &["create", "externalip", "--name", "future-ip", "--wait"],
    )
    .await;
    env.ok(
        &token,
        &[
            "create",
            "externalipattachment",
            "--externalip",
            "future-ip",
            "--cluster",
            "future-cluster",
            "--endpoint",
            "api",
            "--name",
            "future-api",
        ],
    )
    .await;
    env.until(
        &token,
        &["get", "externalipattachment", "future-api"],
        |v| str_at(v, "/status/message").contains("Cluster 'future-cluster' to be created"),
    )
    .await;
    let described = env
        .ok(&token, &["describe", "externalipattachment", "future-api"])
        .await;
    assert!(
        described.contains("State:     PENDING")
            && described.contains("Message:   waiting for Cluster 'future-cluster' to be created")
            && described.contains("target_name: future-cluster"),
        "{described}"
    );

    // A cluster with automatic ExternalIPs shows both of its external addresses.
    env.ok(
        &token,
        &[
            "create",
            "cluster",
            "--template",
            "ocp_4_17_small",
            "--node-set",
            "workers=bm-standard,size=1",
            "--external-ip-attachment",
            "--name",
            "c1",
            "--wait",
        ],
    )
    .await;
    let cluster = env
        .until(&token, &["get", "cluster", "c1"], |v| {
            !str_at(v, "/status/external_ip_address").is_empty()
                && !str_at(v, "/status/ingress_external_ip_address").is_empty()
        })
        .await;
    let (api, ingress) = (
        str_at(&cluster, "/status/external_ip_address"),
        str_at(&cluster, "/status/ingress_external_ip_address"),
    );
    assert_ne!(api, ingress, "{cluster}");
    let table = env.ok(&token, &["get", "clusters"]).await;
    assert!(
        table.contains(&format!("api={api},ingress={ingress}")),
        "{table}"
    );

    // The deprecated template alias of a bare-metal instance warns the same way.
    let file = env.dir.path().join("old-bm.json");
    let old = serde_json::json!({
        "metadata": {"name": "old-bm"},
        "spec": {"catalog_item": "bcm_h100", "network_attachments": [{"subnet": "my-subnet"}]}
    });
    std::fs::write(&file, old.to_string()).expect("write old-bm.json");
    let path = file.to_string_lossy().into_owned();
    let out = env
        .osac(&token, &["create", "baremetalinstance", "-f", &path])
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: spec.catalog_item is deprecated")
            && stderr.contains("spec.template"),
        "{stderr}"
    );

    // A provider admin deletes a tenant as it creates one.
    env.ok(
        &admin,
        &["create", "tenant", "--name", "beta-corp", "--wait"],
    )
    .await;
    env.ok(&admin, &["delete", "tenant", "beta-corp", "--wait"])
        .await;
    let e = env
        .fails(&admin, &["admin", "get", "tenant", "beta-corp"])
        .await;
    assert!(e.contains("NOT_FOUND") || e.contains("not found"), "{e}");
    // A tenant's own token still cannot.
    let e = env.fails(&token, &["delete", "tenant", "acme-corp"]).await;
    assert!(!e.is_empty());
}
