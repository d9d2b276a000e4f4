//! Tenant quotas through the CLI: set at creation and by update, shown with their usage, and a
//! create over a quota fails with the quota named.

mod common;

use common::readme::WAIT;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quotas_are_set_shown_and_enforced_through_the_cli() {
    let env = common::start().await;
    let admin = env.admin.clone();
    let create = "admin create tenant --name acme --quota subnets=3 --quota clusters=unlimited";
    env.ok_line(&admin, create, WAIT).await;
    let t = env
        .json(&admin, &["admin", "get", "tenant", "acme", "-o", "json"])
        .await;
    assert_eq!(t["spec"]["quotas"]["subnets"], 3, "{t}");
    assert_eq!(t["status"]["usage"]["subnets"]["used"], 2, "{t}");
    assert_eq!(t["status"]["usage"]["subnets"]["limit"], 3, "{t}");
    assert_eq!(t["status"]["usage"]["clusters"]["limit"], u32::MAX, "{t}");
    let yaml = env
        .ok(&admin, &["admin", "get", "tenant", "acme", "-o", "yaml"])
        .await;
    assert!(yaml.contains("usage:"), "{yaml}");
    let described = env
        .ok(&admin, &["admin", "describe", "tenant", "acme"])
        .await;
    assert!(described.contains("quotas"), "{described}");
    assert!(described.contains("usage"), "{described}");

    let token = env.token("acme", "tenant-admin").await;
    env.ok(
        &token,
        &[
            "create",
            "subnet",
            "--name",
            "third",
            "--virtual-network",
            "default",
            "--cidr",
            "10.0.50.0/24",
        ],
    )
    .await;
    let err = env
        .fails(
            &token,
            &[
                "create",
                "subnet",
                "--name",
                "fourth",
                "--virtual-network",
                "default",
                "--cidr",
                "10.0.51.0/24",
            ],
        )
        .await;
    assert!(
        err.contains("quota subnets of tenant 'acme' exceeded: limit 3, in use 3"),
        "{err}"
    );

    // Raise one quota, reset another to the provider default.
    let update = "admin update tenant acme --quota subnets=4,clusters=default";
    env.ok_line(&admin, update, &[]).await;
    let t = env
        .json(&admin, &["admin", "get", "tenant", "acme", "-o", "json"])
        .await;
    assert_eq!(t["spec"]["quotas"]["subnets"], 4, "{t}");
    assert!(t["spec"]["quotas"].get("clusters").is_none(), "{t}");
    assert_eq!(
        t["status"]["usage"]["clusters"]["limit"],
        osac_model::quota::Quota::Clusters.default_limit(),
        "{t}"
    );
    let err = env
        .fails(
            &admin,
            &["admin", "update", "tenant", "acme", "--quota", "subnet=4"],
        )
        .await;
    assert!(err.contains("'subnet' is not a quota"), "{err}");
}
