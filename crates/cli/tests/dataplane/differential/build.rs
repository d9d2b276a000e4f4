//! Builds a [`Plan`] through the `osac` CLI like a user (tenants in parallel, each tenant's
//! workloads in parallel), then resolves the rules' peers to real addresses and sets them.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::topology::{
    GroupPlan, Peer, Plan, Proto, RulePlan, TenantPlan, WorkloadKind, WorkloadPlan,
};
use crate::harness::{Dp, Machine, POOL_CIDR, items};

#[derive(Debug, Clone)]
pub struct Built {
    pub tenants: Vec<BuiltTenant>,
}

#[derive(Debug, Clone)]
pub struct BuiltTenant {
    pub plan: TenantPlan,
    pub token: String,
    /// NAT gateway address per VN (index as in the plan).
    pub nat: Vec<Option<IpAddr>>,
    pub workloads: Vec<BuiltWorkload>,
}

#[derive(Debug, Clone)]
pub struct BuiltWorkload {
    pub plan: WorkloadPlan,
    pub machine: Machine,
    pub external_ip: Option<IpAddr>,
}

/// Free hosts bare-metal servers can take.
pub async fn free_hosts(dp: &Dp) -> usize {
    let hosts = dp.json(&dp.admin, &["admin", "get", "hosts"]).await;
    items(&hosts)
        .iter()
        .filter(|h| {
            h["status"]["assigned_to"]
                .as_str()
                .unwrap_or_default()
                .is_empty()
        })
        .filter(|h| h["spec"]["pool"] == "baremetal")
        .count()
}

pub async fn build(dp: &Arc<Dp>, plan: &Plan) -> Built {
    let mut tasks = Vec::new();
    for t in &plan.tenants {
        let (dp, t) = (dp.clone(), t.clone());
        tasks.push(tokio::spawn(async move { build_tenant(&dp, t).await }));
    }
    let mut tenants = Vec::new();
    for task in tasks {
        tenants.push(
            task.await
                .unwrap_or_else(|e| panic!("building a tenant: {e}")),
        );
    }
    let built = Built { tenants };
    let mut tasks = Vec::new();
    for t in &built.tenants {
        for g in &t.plan.groups {
            if g.name == "default" {
                continue;
            }
            let (dp, token, args) = (dp.clone(), t.token.clone(), group_update(g, &built));
            let name = g.name.clone();
            tasks.push(tokio::spawn(async move {
                let refs: Vec<&str> = args.iter().map(String::as_str).collect();
                dp.ok(&token, &refs).await;
                wait_applied(&dp, &token, &name).await;
            }));
        }
    }
    for task in tasks {
        task.await.unwrap_or_else(|e| panic!("setting rules: {e}"));
    }
    built
}

async fn build_tenant(dp: &Arc<Dp>, plan: TenantPlan) -> BuiltTenant {
    let token = dp.tenant(&plan.name).await;
    let t = token.as_str();
    for vn in &plan.vns {
        if !vn.is_default {
            dp.virtual_network(t, &vn.name, &vn.cidr).await;
        }
        for (name, cidr) in &vn.subnets {
            dp.subnet(t, &vn.name, name, &[cidr]).await;
        }
        match (vn.is_default, vn.nat_gateway) {
            (true, false) => {
                dp.ok(t, &["delete", "natgateway", "default", "--wait"])
                    .await;
            }
            (false, true) => {
                let eip = format!("nat-{}", vn.name);
                dp.ok(t, &["create", "externalip", "--name", &eip, "--wait"])
                    .await;
                dp.ok(
                    t,
                    &[
                        "create",
                        "natgateway",
                        "--virtual-network",
                        &vn.name,
                        "--externalip",
                        &eip,
                        "--name",
                        &eip,
                        "--wait",
                    ],
                )
                .await;
            }
            _ => {}
        }
    }
    for g in plan.groups.iter().filter(|g| g.name != "default") {
        dp.security_group(t, &g.vn, &g.name, &[]).await;
    }
    let gws = dp.json(t, &["get", "natgateways"]).await;
    let mut nat = Vec::new();
    for vn in &plan.vns {
        let id = vn_id(dp, t, &vn.name).await;
        let gw = items(&gws).into_iter().find(|g| {
            let on = g["spec"]["virtual_network"].as_str().unwrap_or_default();
            on == vn.name || Some(on) == id.as_deref()
        });
        nat.push(gw.and_then(|g| nat_address(&g)));
    }
    let mut tasks = Vec::new();
    for w in &plan.workloads {
        let (dp, token, w) = (dp.clone(), token.clone(), w.clone());
        tasks.push(tokio::spawn(
            async move { build_workload(&dp, &token, w).await },
        ));
    }
    let mut workloads = Vec::new();
    for task in tasks {
        workloads.push(
            task.await
                .unwrap_or_else(|e| panic!("building a workload: {e}")),
        );
    }
    BuiltTenant {
        plan,
        token,
        nat,
        workloads,
    }
}

async fn vn_id(dp: &Dp, token: &str, name: &str) -> Option<String> {
    let v = dp.json(token, &["get", "virtualnetwork", name]).await;
    v["id"].as_str().map(String::from)
}

fn nat_address(g: &Value) -> Option<IpAddr> {
    g["status"]["address"]
        .as_str()
        .or(g["status"]["external_ip_address"].as_str())
        .and_then(|s| s.parse().ok())
}

async fn build_workload(dp: &Dp, token: &str, w: WorkloadPlan) -> BuiltWorkload {
    let attachment = format!("subnet={},security-groups={}", w.subnet, w.groups.join(";"));
    let machine = match w.kind {
        WorkloadKind::Vm => {
            dp.vm(token, &w.name, &["--network-attachment", &attachment])
                .await
        }
        WorkloadKind::BareMetal => {
            dp.bm(token, &w.name, &["--network-attachment", &attachment])
                .await
        }
    };
    let mut external_ip = None;
    if w.external_ip {
        let eip = format!("eip-{}", w.name);
        dp.ok(token, &["create", "externalip", "--name", &eip, "--wait"])
            .await;
        let target = match w.kind {
            WorkloadKind::Vm => "--compute-instance",
            WorkloadKind::BareMetal => "--baremetal-instance",
        };
        dp.ok(
            token,
            &[
                "create",
                "externalipattachment",
                "--externalip",
                &eip,
                target,
                &w.name,
                "--name",
                &eip,
                "--wait",
            ],
        )
        .await;
        let a = dp.json(token, &["get", "externalipattachment", &eip]).await;
        external_ip = a["status"]["external_ip_address"]
            .as_str()
            .and_then(|s| s.parse().ok());
        assert!(
            external_ip.is_some(),
            "{}: attachment {eip} has no address: {a}",
            w.name
        );
    }
    BuiltWorkload {
        plan: w,
        machine,
        external_ip,
    }
}

/// `osac update securitygroup` replacing both rule lists with the group's resolved rules.
fn group_update(g: &GroupPlan, built: &Built) -> Vec<String> {
    let mut args: Vec<String> = vec!["update".into(), "securitygroup".into(), g.name.clone()];
    if g.ingress.is_empty() {
        args.push("--clear-ingress".into());
    }
    for r in &g.ingress {
        args.extend(["--ingress".into(), rule_spec(r, "source", built)]);
    }
    if g.egress.is_empty() {
        args.push("--clear-egress".into());
    }
    for r in &g.egress {
        args.extend(["--egress".into(), rule_spec(r, "destination", built)]);
    }
    args
}

/// A rule as the CLI takes it, e.g. `protocol:tcp,port:80-443,source:10.0.1.2/32`.
pub fn rule_spec(r: &RulePlan, peer_key: &str, built: &Built) -> String {
    let mut s = format!("protocol:{}", r.proto.cli());
    if let (Some((a, b)), Proto::Tcp | Proto::Udp) = (r.ports, r.proto) {
        s.push_str(&format!(",port:{a}-{b}"));
    }
    s.push_str(&format!(",{peer_key}:{}", peer_cidr(&r.peer, built)));
    s
}

fn peer_cidr(p: &Peer, built: &Built) -> String {
    match p {
        Peer::Cidr(c) => c.clone(),
        Peer::Workload(t, w) => format!("{}/32", built.tenants[*t].workloads[*w].machine.ip),
        Peer::NatGateway(t, v) => match built.tenants[*t].nat[*v] {
            Some(ip) => format!("{ip}/32"),
            None => built.tenants[*t].plan.vns[*v].cidr.clone(),
        },
        Peer::ExternalIp(t, w) => match built.tenants[*t].workloads[*w].external_ip {
            Some(ip) => format!("{ip}/32"),
            None => POOL_CIDR.to_string(),
        },
    }
}

/// Waits until the group's current rules are programmed: its record carries the controller's
/// applied-spec mark of the current spec (the state stays READY during an update).
async fn wait_applied(dp: &Dp, token: &str, name: &str) {
    let id = dp.json(token, &["get", "securitygroup", name]).await["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for _ in 0..300 {
        let rec = dp.server().await.store.get(&id).await.ok().flatten();
        if let Some(rec) = rec
            && rec
                .annotations
                .get(osac_controller::APPLIED_SPEC_ANNOTATION)
                == Some(&osac_controller::spec_hash(&rec.body))
            && rec.body["status"]["state"] == "SECURITY_GROUP_STATE_READY"
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("security group {name}: rules not applied in 60 s");
}
