//! Bodies of objects as tenants post them (subnets, workloads), and shortcuts creating workloads.

use serde_json::{Value, json};

use super::{Api, id};

/// A Subnet body: `cidr` (IPv4) in the VirtualNetwork `vn`.
pub fn subnet_body(name: &str, vn: &str, cidr: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"virtual_network": vn, "ipv4_cidr": cidr}})
}

/// A ComputeInstance body.
pub fn vm_body(name: &str, attachments: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": {"template": "small", "compute_network_attachments": attachments}})
}

/// A BareMetalInstance body of the dev host type `bm-standard`.
pub fn bm_body(name: &str, attachments: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": {"host_type": "bm-standard", "network_attachments": attachments}})
}

/// A Cluster body: one node set `workers` of `size` `bm-standard` hosts.
pub fn cluster_body(name: &str, subnet: &str, security_groups: Value, size: i32) -> Value {
    json!({"metadata": {"name": name}, "spec": {
        "template": "ocp",
        "node_sets": {"workers": {"host_type": "bm-standard", "size": size}},
        "network_attachment": {"subnet": subnet, "security_groups": security_groups}
    }})
}

impl Api {
    /// Creates a ComputeInstance `name` attached to `subnet` (default security groups).
    pub async fn create_vm(&self, name: &str, subnet: &str) -> Value {
        self.create(
            "compute_instances",
            vm_body(name, json!([{"subnet": subnet}])),
        )
        .await
    }

    /// Creates a BareMetalInstance `name` attached to `subnet` (default security groups).
    pub async fn create_bm(&self, name: &str, subnet: &str) -> Value {
        self.create(
            "baremetal_instances",
            bm_body(name, json!([{"subnet": subnet}])),
        )
        .await
    }

    /// Creates a ComputeInstance `name` attached to `subnet` and waits until it is RUNNING.
    pub async fn running_vm(&self, name: &str, subnet: &str) -> Value {
        self.create_running_vm(vm_body(name, json!([{"subnet": subnet}])))
            .await
    }

    /// Creates the ComputeInstance `body` and waits until it is RUNNING.
    pub async fn create_running_vm(&self, body: Value) -> Value {
        let vm = self.create("compute_instances", body).await;
        self.wait(
            "compute_instances",
            &id(&vm),
            "COMPUTE_INSTANCE_STATE_RUNNING",
        )
        .await
    }
}
