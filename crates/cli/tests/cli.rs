//! The `osac` binary driven end to end against a real in-process server (SQLite, sim fabric):
//! the CLI flow for the networking resources (create, get, update, label, delete), as a new user would type it.

mod common;

use common::readme::{MY_NAT, MY_NET, MY_SG, MY_SUBNET, NAT_IP, WAIT};
use common::{items, start, str_at};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn networking_flow_through_the_cli() {
    let env = start().await;
    let admin = env.admin.clone();
    env.ok(&admin, &["admin", "create", "tenant", "--name", "acme"])
        .await;
    let token = env.token("acme", "tenant-admin").await;
    assert!(token.starts_with("osac_"), "token printed alone: {token}");

    for line in [MY_NET, MY_SUBNET, MY_SG, NAT_IP, MY_NAT] {
        env.ok_line(&token, line, WAIT).await;
    }

    let subnet = env
        .json(&token, &["get", "subnet", "my-subnet", "-o", "json"])
        .await;
    assert_eq!(subnet["status"]["state"], "SUBNET_STATE_READY");
    assert_eq!(subnet["status"]["ipv4_gateway"], "10.0.1.1");
    let nat = env
        .json(&token, &["get", "natgateway", "my-nat", "-o", "json"])
        .await;
    assert_eq!(nat["status"]["state"], "NAT_GATEWAY_STATE_READY");
    let eip = env
        .json(&token, &["get", "externalip", "nat-ip", "-o", "json"])
        .await;
    assert_eq!(eip["status"]["address"], nat["status"]["address"]);
    assert_eq!(eip["status"]["attached"], true);

    let table = env.ok(&token, &["get", "subnets"]).await;
    assert!(
        table.contains("my-subnet") && table.contains("READY") && table.contains("10.0.1.0/24"),
        "{table}"
    );

    // An overlapping subnet is refused with the rule in the message, and nothing is created.
    let err = env
        .fails(
            &token,
            &[
                "create",
                "subnet",
                "--virtual-network",
                "my-net",
                "--cidr",
                "10.0.1.0/25",
                "--name",
                "clash",
            ],
        )
        .await;
    assert!(
        err.contains("overlaps with existing subnet 'my-subnet'")
            && err.contains("INVALID_ARGUMENT"),
        "{err}"
    );
    let listed = env.json(&token, &["get", "subnets", "-o", "json"]).await;
    let names: Vec<String> = items(&listed)
        .iter()
        .map(|i| str_at(i, "/metadata/name").to_string())
        .collect();
    // The tenant's default subnets (onboarding) and the one made here.
    assert_eq!(names, vec!["default-ipv4", "default-ipv6", "my-subnet"]);

    // Rules are mutable; the filter flag narrows lists.
    env.ok(
        &token,
        &[
            "update",
            "security-group",
            "my-sg",
            "--ingress",
            "protocol:tcp,port:22,source:10.0.0.0/8",
        ],
    )
    .await;
    let sg = env
        .json(&token, &["get", "security-group", "my-sg", "-o", "json"])
        .await;
    assert_eq!(sg["spec"]["ingress"][0]["port_from"], 22);
    let filtered = env
        .ok(
            &token,
            &[
                "get",
                "subnets",
                "--filter",
                "this.metadata.name == \"nope\"",
                "-o",
                "name",
            ],
        )
        .await;
    assert!(filtered.is_empty(), "{filtered}");

    // Deletion protection, then ordered deletes with --wait.
    let err = env
        .fails(&token, &["delete", "virtualnetwork", "my-net"])
        .await;
    assert!(err.contains("FAILED_PRECONDITION"), "{err}");
    for (kind, name) in [
        ("natgateway", "my-nat"),
        ("externalip", "nat-ip"),
        ("security-group", "my-sg"),
        ("subnet", "my-subnet"),
        ("virtualnetwork", "my-net"),
    ] {
        env.ok(&token, &["delete", kind, name, "--wait"]).await;
    }
    let pools = env
        .json(
            &admin,
            &["admin", "get", "pool", "external-pool-1", "-o", "json"],
        )
        .await;
    // Everything but the tenant's default NAT address is back.
    assert_eq!(
        pools["status"]["available"], "253",
        "capacity returned: {pools}"
    );

    // A tenant token cannot use the private API; a bad token is refused.
    env.fails(&token, &["admin", "get", "tenants"]).await;
    let err = env.fails("osac_not_a_token", &["get", "subnets"]).await;
    assert!(err.contains("UNAUTHENTICATED"), "{err}");
    env.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admin_managers_lists_the_registry() {
    let env = start().await;
    let out = env.ok(&env.admin.clone(), &["admin", "managers"]).await;
    assert!(
        out.contains("sim-fabric") && out.contains("sim-k8s") && out.contains("fabric"),
        "{out}"
    );
    env.server.shutdown().await;
}

/// `osac admin create token --expires-in`, `osac admin get tokens`, `osac admin delete token`:
/// the list never shows the secret, and a revoked token is refused at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_through_the_cli() {
    let env = start().await;
    let admin = env.admin.clone();
    env.ok(&admin, &["admin", "create", "tenant", "--name", "acme"])
        .await;
    let token = env
        .ok(
            &admin,
            &[
                "admin",
                "create",
                "token",
                "--tenant",
                "acme",
                "--role",
                "tenant-user",
                "--subject",
                "carol",
                "--expires-in",
                "24h",
            ],
        )
        .await;
    let token = token.trim().to_string();
    assert!(token.starts_with("osac_"), "token printed alone: {token}");
    env.ok(&token, &["get", "virtualnetworks"]).await;

    let table = env.ok(&admin, &["admin", "get", "tokens"]).await;
    assert!(
        table.contains("carol") && table.contains("tenant-user"),
        "{table}"
    );
    assert!(!table.contains(&token), "secret in the table");
    let listed: Value = serde_json::from_str(
        &env.ok(&admin, &["admin", "get", "tokens", "-o", "json"])
            .await,
    )
    .unwrap();
    let carol = items(&listed)
        .iter()
        .find(|t| t["subject"] == "carol")
        .expect("carol listed")
        .clone();
    assert_eq!(carol["tenant"], "acme");
    assert!(carol["expires"].is_string(), "{carol}");
    assert!(carol.get("token").is_none(), "{carol}");
    let id = carol["id"].as_str().unwrap().to_string();

    // A tenant cannot list tokens; bad input names the field.
    env.fails(&token, &["admin", "get", "tokens"]).await;
    let bad = env
        .fails(
            &admin,
            &[
                "admin",
                "create",
                "token",
                "--tenant",
                "acme",
                "--role",
                "tenant-user",
                "--expires-in",
                "soon",
            ],
        )
        .await;
    assert!(bad.contains("expires_in"), "{bad}");

    let revoked = env.ok(&admin, &["admin", "delete", "token", &id]).await;
    assert!(revoked.contains(&id), "{revoked}");
    let refused = env.fails(&token, &["get", "virtualnetworks"]).await;
    assert!(refused.contains("UNAUTHENTICATED"), "{refused}");
    let listed = env
        .ok(&admin, &["admin", "get", "tokens", "-o", "id"])
        .await;
    assert!(!listed.contains(&id));
    env.server.shutdown().await;
}
