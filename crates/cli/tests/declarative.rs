//! The README's flows typed without `--wait` between the steps: every create is accepted while
//! what it depends on is still being provisioned (the tenant's default networking, a new
//! network, subnet, group, ExternalIP, workload) and everything converges by itself.

mod common;

use common::readme::{
    API_IP, C1, C1_API, MY_NAT, MY_NET, MY_SG, MY_SUBNET, MY_SUBNET_B, MY_VM, NAT_IP, S1, VM1,
};
use common::start;
use serde_json::Value;

fn state(v: &Value) -> &str {
    v["status"]["state"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_readme_flows_need_no_wait_between_steps() {
    let env = start().await;
    let admin = env.admin.clone();
    env.ok(&admin, &["admin", "create", "tenant", "--name", "acme"])
        .await;
    let token = env.token("acme", "tenant-admin").await;
    let steps = [
        // Single-call creation on the default networking being made right now.
        VM1,
        // A network of its own, and workloads on it.
        MY_NET,
        MY_SUBNET,
        MY_SUBNET_B,
        MY_SG,
        NAT_IP,
        MY_NAT,
        MY_VM,
        S1,
        C1,
        API_IP,
        C1_API,
    ];
    for step in steps {
        env.ok_line(&token, step, &[]).await;
    }
    for (kind, name, done) in [
        ("subnet", "my-subnet-b", "SUBNET_STATE_READY"),
        ("securitygroup", "my-sg", "SECURITY_GROUP_STATE_READY"),
        ("natgateway", "my-nat", "NAT_GATEWAY_STATE_READY"),
        ("computeinstance", "vm1", "COMPUTE_INSTANCE_STATE_RUNNING"),
        ("computeinstance", "my-vm", "COMPUTE_INSTANCE_STATE_RUNNING"),
        (
            "baremetalinstance",
            "s1",
            "BARE_METAL_INSTANCE_STATE_RUNNING",
        ),
        ("cluster", "c1", "CLUSTER_STATE_READY"),
        (
            "externalipattachment",
            "c1-api",
            "EXTERNAL_IP_ATTACHMENT_STATE_READY",
        ),
    ] {
        env.until(&token, &["get", kind, name], |v| state(v) == done)
            .await;
    }
    let tenant = env
        .until(&admin, &["admin", "get", "tenant", "acme"], |v| {
            state(v) == "TENANT_STATE_READY"
        })
        .await;
    assert_eq!(state(&tenant), "TENANT_STATE_READY");
}
