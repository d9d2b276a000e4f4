//! kubectl habits against a real in-process server: `-o json` of a list is a list object,
//! `KIND/NAME`, `-l/--selector`, `--sort-by`, `-o name`, and `get --help` listing the kinds.

mod common;

use common::{items, start, str_at};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lists_names_selectors_and_sorting() {
    let env = start().await;
    let token = env.tenant_admin("acme").await;
    for (name, cidr, labels) in [
        ("net-b", "10.9.0.0/16", "tier=web"),
        ("net-a", "10.10.0.0/16", "tier=db"),
        ("net-c", "10.11.0.0/16", "tier=web"),
    ] {
        env.ok(
            &token,
            &[
                "create",
                "virtualnetwork",
                "--name",
                name,
                "--cidr",
                cidr,
                "--label",
                labels,
            ],
        )
        .await;
    }
    let only_mine = r#"!has(this.metadata.labels["osac.openshift.io/default"])"#;

    // A list is a list object; one object stays the object.
    let listed = env
        .json(&token, &["get", "vns", "--filter", only_mine, "-o", "json"])
        .await;
    assert!(listed["items"].is_array(), "{listed}");
    assert_eq!(listed["total"], 3, "{listed}");
    let one = env.json(&token, &["get", "vn/net-a", "-o", "json"]).await;
    assert_eq!(one["metadata"]["name"], "net-a", "{one}");

    // -l with = and != (comma = and), combined with --filter; -o name.
    let web = env
        .ok(
            &token,
            &[
                "get",
                "vn",
                "-l",
                "tier=web",
                "--sort-by",
                ".metadata.name",
                "-o",
                "name",
            ],
        )
        .await;
    assert_eq!(web, "virtualnetwork/net-b\nvirtualnetwork/net-c");
    let not_web = env
        .json(
            &token,
            &[
                "get",
                "vn",
                "-l",
                "tier!=web",
                "--filter",
                only_mine,
                "-o",
                "json",
            ],
        )
        .await;
    let names: Vec<String> = items(&not_web)
        .iter()
        .map(|v| str_at(v, "/metadata/name").to_string())
        .collect();
    assert_eq!(names, ["net-a"]);
    let bad = env.fails(&token, &["get", "vn", "-l", "tier"]).await;
    assert!(bad.contains("KEY=VALUE"), "{bad}");

    // KIND/NAME for delete and describe too.
    let described = env.ok(&token, &["describe", "vn/net-c"]).await;
    assert!(described.contains("net-c"), "{described}");
    env.ok(&token, &["delete", "vn/net-b", "vn/net-c", "--wait"])
        .await;
    let left = env
        .ok(&token, &["get", "vn", "-l", "tier=web", "-o", "name"])
        .await;
    assert_eq!(left, "");

    // `get --help` lists the kinds.
    let help = env.ok(&token, &["get", "--help"]).await;
    for kind in [
        "virtualnetwork",
        "subnet",
        "securitygroup",
        "computeinstance",
    ] {
        assert!(help.contains(kind), "{kind} not in get --help:\n{help}");
    }
}
