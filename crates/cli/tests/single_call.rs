//! Single-call creation as a new tenant types it: onboarding, then
//! `osac create computeinstance --template small --external-ip-attachment --name vm1 --wait`
//! (and a bare-metal server and a cluster the same way) — RUNNING with external addresses,
//! with no networking flags at all — then deleting each returns the pool to where it was.
//! `osac admin orphans` lists what a cleanup gave up on.

mod common;

use std::time::{Duration, Instant};

use common::readme::{VM1, WAIT};
use common::{Env, items, start, str_at};
use osac_backends::{FailureKind, Operation};
use serde_json::Value;

async fn pool_available(env: &Env) -> i64 {
    let pool = env
        .json(
            &env.admin,
            &["admin", "get", "pool", "external-pool-1", "-o", "json"],
        )
        .await;
    str_at(&pool, "/status/available")
        .parse()
        .unwrap_or_else(|_| pool["status"]["available"].as_i64().unwrap_or(-1))
}

/// The ExternalIPAttachments made automatically for the workload with id `owner` (by
/// `--external-ip-attachment`), as `osac get externalipattachments --filter …` lists them.
async fn auto_attachments(env: &Env, token: &str, owner: &str) -> Vec<Value> {
    let filter =
        format!("this.metadata.labels[\"osac.openshift.io/auto-provisioned-for\"] == \"{owner}\"");
    items(
        &env.json(
            token,
            &[
                "get",
                "externalipattachments",
                "--filter",
                &filter,
                "-o",
                "json",
            ],
        )
        .await,
    )
}

async fn gone(env: &Env, token: &str, args: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while env.osac(token, args).await.status.success() {
        assert!(Instant::now() < deadline, "{args:?} never went away");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_tenant_gets_reachable_workloads_in_one_command() {
    let env = start().await;
    let token = env.tenant_admin("acme").await;
    let before = pool_available(&env).await;

    let out = env.ok_line(&token, VM1, WAIT).await;
    assert!(
        out.lines().last().unwrap_or_default().contains("RUNNING"),
        "{out}"
    );
    let vm = env
        .until(&token, &["get", "computeinstance", "vm1"], |v| {
            !str_at(v, "/status/external_ip_address").is_empty()
        })
        .await;
    assert!(
        str_at(&vm, "/status/internal_ip_address").starts_with("10.0.1."),
        "{vm}"
    );

    let out = env
        .ok(
            &token,
            &[
                "create",
                "baremetalinstance",
                "--host-type",
                "bm-standard",
                "--external-ip-attachment",
                "--name",
                "bm1",
                "--wait",
            ],
        )
        .await;
    assert!(
        out.lines().last().unwrap_or_default().contains("RUNNING"),
        "{out}"
    );
    env.until(&token, &["get", "baremetalinstance", "bm1"], |v| {
        !str_at(v, "/status/external_ip_address").is_empty()
    })
    .await;

    let out = env
        .ok(
            &token,
            &[
                "create",
                "cluster",
                "--template",
                "ocp",
                "--node-set",
                "workers=bm-standard,size=1",
                "--external-ip-attachment",
                "--name",
                "c1",
                "--wait",
            ],
        )
        .await;
    assert!(
        out.lines().last().unwrap_or_default().contains("READY"),
        "{out}"
    );
    let c = env
        .json(&token, &["get", "cluster", "c1", "-o", "json"])
        .await;
    let auto = auto_attachments(&env, &token, str_at(&c, "/id")).await;
    assert_eq!(auto.len(), 2, "API and INGRESS: {auto:?}");
    assert_eq!(pool_available(&env).await, before - 4);

    for (kind, name) in [
        ("computeinstance", "vm1"),
        ("baremetalinstance", "bm1"),
        ("cluster", "c1"),
    ] {
        env.ok(&token, &["delete", kind, name]).await;
    }
    for (kind, name) in [
        ("computeinstance", "vm1"),
        ("baremetalinstance", "bm1"),
        ("cluster", "c1"),
    ] {
        gone(&env, &token, &["get", kind, name]).await;
    }
    assert_eq!(pool_available(&env).await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admin_orphans_lists_what_a_cleanup_gave_up_on() {
    let env = start().await;
    let admin = env.admin.clone();
    let token = env.tenant_admin("acme").await;
    assert_eq!(
        env.ok(&admin, &["admin", "orphans"]).await,
        "no orphaned objects"
    );
    env.ok_line(&token, VM1, WAIT).await;
    let vm = env
        .json(&token, &["get", "computeinstance", "vm1", "-o", "json"])
        .await;
    let att = auto_attachments(&env, &token, str_at(&vm, "/id"))
        .await
        .remove(0);
    env.server
        .registry
        .sim_fabric("sim-fabric")
        .expect("sim fabric")
        .inject_failure(
            Operation::DeleteExternalIpAttachment,
            str_at(&att, "/id"),
            u32::MAX,
            FailureKind::Transient,
        );
    env.ok(&token, &["delete", "computeinstance", "vm1"]).await;
    gone(&env, &token, &["get", "computeinstance", "vm1"]).await;
    let table = env.ok(&admin, &["admin", "orphans"]).await;
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "header, attachment, address: {table}");
    assert!(lines[0].starts_with("KIND"), "{table}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(str_at(&att, "/id")) && l.contains("acme")),
        "{table}"
    );
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("KIND") || l.contains(str_at(&vm, "/id"))),
        "every orphan names the workload it was for: {table}"
    );
}
