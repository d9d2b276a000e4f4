//! `osac events`: a tenant reads what happened to its subnet, as a table and as JSON.

mod common;

use std::time::{Duration, Instant};

use common::start;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_for_a_subnet() {
    let env = start().await;
    let token = env.tenant_admin("acme").await;
    env.ok(
        &token,
        &[
            "create",
            "virtualnetwork",
            "--cidr",
            "10.0.0.0/16",
            "--name",
            "net",
            "--wait",
        ],
    )
    .await;
    env.ok(
        &token,
        &[
            "create",
            "subnet",
            "--virtual-network",
            "net",
            "--cidr",
            "10.0.1.0/24",
            "--name",
            "web",
            "--wait",
        ],
    )
    .await;

    // The Ready event is written with the READY status, so it is there once --wait returned;
    // poll anyway in case the wait saw the state through another path.
    let deadline = Instant::now() + Duration::from_secs(30);
    let events = loop {
        let v: Value = env
            .json(&token, &["events", "--for", "subnet/web", "-o", "json"])
            .await;
        let items = common::items(&v);
        if items.iter().any(|e| e["spec"]["reason"] == "Ready") {
            break items;
        }
        assert!(Instant::now() < deadline, "no Ready event: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        events.iter().all(|e| e["spec"]["object_name"] == "web"),
        "only the subnet's events: {events:?}"
    );
    assert_eq!(events[0]["spec"]["reason"], "Created", "{events:?}");

    let table = env.ok(&token, &["events", "--for", "sn/web"]).await;
    let mut lines = table.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["TIME", "TYPE", "REASON", "OBJECT", "MESSAGE"]);
    let rows: Vec<&str> = lines.collect();
    assert!(
        rows.iter()
            .any(|l| l.contains("Normal") && l.contains("Created") && l.contains("Subnet/web")),
        "{table}"
    );
    assert!(
        rows.iter()
            .any(|l| l.contains("Ready") && l.contains("Subnet/web")),
        "{table}"
    );

    // Without --for: the tenant's latest events, including the network's.
    let all = env.ok(&token, &["events"]).await;
    assert!(all.contains("VirtualNetwork/net"), "{all}");

    // An unknown object is an error naming it.
    let out = env.osac(&token, &["events", "--for", "subnet/nope"]).await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nope"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `osac events --watch` ends with the stream's final error once its token is revoked: a stream
/// does not outlive its credential (removing the watch's credential re-check in
/// crates/api/src/watch.rs left this command running past the 5 s deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_watch_ends_when_its_token_is_revoked() {
    let env = start().await;
    let token = env.tenant_admin("acme").await;
    let tokens = env
        .json(&env.admin, &["admin", "get", "tokens", "-o", "json"])
        .await;
    let id = common::items(&tokens)
        .iter()
        .find(|t| t["tenant"] == "acme")
        .and_then(|t| t["id"].as_str().map(str::to_string))
        .expect("acme's token");
    let watch = async {
        let out = env.osac(&token, &["events", "--watch"]).await;
        (out, Instant::now())
    };
    let revoke = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        env.ok(&env.admin, &["admin", "delete", "token", &id]).await;
        Instant::now()
    };
    let (ended, revoked) =
        tokio::join!(tokio::time::timeout(Duration::from_secs(20), watch), revoke);
    let (out, ended_at) =
        ended.expect("osac events --watch still running 20 s after the revocation");
    assert!(
        ended_at.duration_since(revoked) < Duration::from_secs(5),
        "ended {:?} after the revocation",
        ended_at.duration_since(revoked)
    );
    assert!(
        !out.status.success(),
        "the end of a stream's credential is an error"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("UNAUTHENTICATED") || stderr.contains("no longer valid"),
        "{stderr}"
    );
}
