//! The README's flows typed without `--wait` between the steps: every create is accepted while
//! what it depends on is still being provisioned (the tenant's default networking, a new
//! network, subnet, group, ExternalIP, workload) and everything converges by itself.

mod common;

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
    let steps: Vec<Vec<&str>> = vec![
        // Single-call creation on the default networking being made right now.
        vec![
            "create",
            "computeinstance",
            "--template",
            "small",
            "--external-ip-attachment",
            "--name",
            "vm1",
        ],
        vec![
            "create",
            "virtualnetwork",
            "--cidr",
            "10.0.0.0/16",
            "--name",
            "my-net",
        ],
        vec![
            "create",
            "subnet",
            "--virtual-network",
            "my-net",
            "--cidr",
            "10.0.1.0/24",
            "--name",
            "my-subnet",
        ],
        vec![
            "create",
            "subnet",
            "--virtual-network",
            "my-net",
            "--cidr",
            "10.0.2.0/24",
            "--name",
            "my-subnet-b",
        ],
        vec![
            "create",
            "security-group",
            "--virtual-network",
            "my-net",
            "--name",
            "my-sg",
            "--ingress",
            "protocol:tcp,port:443,source:0.0.0.0/0",
        ],
        vec!["create", "externalip", "--name", "nat-ip"],
        vec![
            "create",
            "natgateway",
            "--virtual-network",
            "my-net",
            "--externalip",
            "nat-ip",
            "--name",
            "my-nat",
        ],
        vec![
            "create",
            "computeinstance",
            "--template",
            "ocp_virt_vm",
            "--network-attachment",
            "subnet=my-subnet,security-groups=my-sg",
            "--name",
            "my-vm",
        ],
        vec![
            "create",
            "baremetalinstance",
            "--host-type",
            "bm-standard",
            "--network-attachment",
            "interface=data-0,subnet=my-subnet,primary",
            "--network-attachment",
            "interface=data-1,subnet=my-subnet-b",
            "--name",
            "s1",
        ],
        vec![
            "create",
            "cluster",
            "--template",
            "ocp_4_17_small",
            "--network-attachment",
            "subnet=my-subnet",
            "--node-set",
            "workers=bm-standard,size=3",
            "--name",
            "c1",
        ],
        vec![
            "create",
            "externalip",
            "--pool",
            "external-pool-1",
            "--name",
            "api-ip",
        ],
        vec![
            "create",
            "externalipattachment",
            "--externalip",
            "api-ip",
            "--cluster",
            "c1",
            "--endpoint",
            "api",
            "--name",
            "c1-api",
        ],
    ];
    for step in &steps {
        env.ok(&token, step).await;
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
