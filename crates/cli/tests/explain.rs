//! `osac explain reach` against a real in-process server (SQLite, sim fabric): a tenant's
//! default networking (the dev class's default security group allows tcp 22 and 443 and ICMP
//! in, everything out), a VM exposed through an automatic ExternalIPAttachment and one not.

mod common;

use common::start;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn explain_reach_prints_the_verdict_the_path_and_the_deciding_rule() {
    let env = start().await;
    let token = env.tenant_admin("acme").await;
    for args in [
        &[
            "create",
            "computeinstance",
            "--template",
            "small",
            "--external-ip-attachment",
            "--name",
            "vm1",
            "--wait",
        ][..],
        &[
            "create",
            "computeinstance",
            "--template",
            "small",
            "--name",
            "vm2",
            "--wait",
        ][..],
    ] {
        env.ok(&token, args).await;
    }
    env.until(&token, &["get", "externalipattachments"], |v: &Value| {
        let items = match v {
            Value::Array(a) => a.clone(),
            other => other["items"].as_array().cloned().unwrap_or_default(),
        };
        !items.is_empty()
            && items
                .iter()
                .all(|a| a["status"]["state"] == "EXTERNAL_IP_ATTACHMENT_STATE_READY")
    })
    .await;

    let out = env
        .ok(
            &token,
            &[
                "explain",
                "reach",
                "--from",
                "internet",
                "--to",
                "computeinstance/vm1",
                "--port",
                "443",
            ],
        )
        .await;
    assert!(
        out.starts_with(
            "REACHABLE: SecurityGroup 'default' ingress rule 2: tcp 443 from 0.0.0.0/0\n"
        ),
        "{out}"
    );
    assert!(out.lines().any(|l| l.contains(" dnat ")), "{out}");

    let out = env
        .ok(
            &token,
            &[
                "explain",
                "reach",
                "--from",
                "vm/vm1",
                "--to",
                "vm/vm2",
                "--protocol",
                "tcp",
                "--port",
                "8080",
            ],
        )
        .await;
    assert!(
        out.starts_with(
            "BLOCKED: no ingress rule of SecurityGroups 'default' allows tcp/8080 from 10."
        ),
        "{out}"
    );

    let v = env
        .json(
            &token,
            &[
                "explain", "reach", "--from", "internet", "--to", "vm/vm2", "--port", "22", "-o",
                "json",
            ],
        )
        .await;
    assert_eq!(v["verdict"], "REACHABILITY_VERDICT_BLOCKED", "{v}");
    assert_eq!(
        v["deciding"],
        "no ExternalIPAttachment makes ComputeInstance 'vm2' reachable from the internet"
    );

    let out = env
        .osac(
            &token,
            &[
                "explain", "reach", "--from", "vm/vm1", "--to", "vm/ghost", "--port", "22",
            ],
        )
        .await;
    assert!(!out.status.success(), "an unknown VM is an error");
}
