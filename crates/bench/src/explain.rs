//! Measure 8: the reachability explainer. A fresh tenant with `--explain-vms` ComputeInstances
//! (default 1,000) and `--explain-groups` SecurityGroups (default 200, random TCP/UDP/ICMP
//! rules), all created through REST on the sim fabric; then `--explain-requests` explain
//! requests over REST between random pairs of VMs (and some from the internet), closed loop
//! with `--explain-clients` clients (default 4). Goal: p99 ≤ 50 ms.
//!
//! [`setup_tenant`] is public so other measures (e.g. a console's first paint) can reuse the
//! same tenant.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rand::Rng;
use serde_json::{Value, json};

use crate::api::{Api, Polls};
use crate::load;
use crate::report::{Goal, Line, Report};
use crate::{Args, Env};

const TENANTS: &str = "/api/private/v1/tenants";
const TOKENS: &str = "/api/private/v1/tokens";
const VNS: &str = "/api/fulfillment/v1/virtual_networks";
const SUBNETS: &str = "/api/fulfillment/v1/subnets";
const SGS: &str = "/api/fulfillment/v1/security_groups";
const VMS: &str = "/api/fulfillment/v1/compute_instances";
const EXPLAIN: &str = "/api/fulfillment/v1/reachability:explain";
/// Goal (docs/benchmarks.md): explain latency p99, ms.
pub const GOAL_P99_MS: f64 = 50.0;
/// Subnets of the bench VN (10.20.<4k>.0/22 each: room for 250 VMs apiece).
const SUBNET_SIZE: usize = 250;

/// A tenant populated for the explainer (and other whole-tenant reads).
pub struct ExplainTenant {
    /// The tenant's name.
    pub tenant: String,
    /// A tenant-admin client.
    pub api: Api,
    /// The VMs' names.
    pub vms: Vec<String>,
    /// The security groups' names.
    pub groups: Vec<String>,
}

/// Polls until `n` objects of `path` are in `state`.
async fn wait_all(api: &Api, path: &str, state: &str, n: usize, timeout: Duration) -> Result<()> {
    let ok = format!("this.status.state == \"{state}\"");
    let failed = "this.status.state.endsWith(\"FAILED\")";
    api.wait_count(path, &ok, failed, n as i64, timeout)
        .await
        .with_context(|| format!("waiting for {n} {state}"))?;
    Ok(())
}

fn random_rule(rng: &mut impl Rng) -> Value {
    let peer = match rng.random_range(0..3) {
        0 => "0.0.0.0/0".to_string(),
        1 => format!("10.20.{}.0/24", rng.random_range(0..16)),
        _ => "10.20.0.0/16".to_string(),
    };
    match rng.random_range(0..4) {
        0 => json!({"protocol": "PROTOCOL_ICMP", "ipv4_cidr": peer}),
        1 => {
            let from = rng.random_range(1..60_000);
            json!({"protocol": "PROTOCOL_UDP", "port_from": from, "port_to": from + rng.random_range(0..100), "ipv4_cidr": peer})
        }
        _ => {
            json!({"protocol": "PROTOCOL_TCP", "port_from": rng.random_range(1..10_000), "ipv4_cidr": peer})
        }
    }
}

/// Creates tenant `name` with one VN (10.20.0.0/16), subnets of 250 VMs, `groups` security
/// groups (5 ingress and 2 egress random rules each) and `vms` VMs (1-3 groups each), all
/// through REST, and waits until every VM is RUNNING.
pub async fn setup_tenant(
    admin: &Api,
    name: &str,
    vms: usize,
    groups: usize,
    clients: usize,
    timeout: Duration,
) -> Result<ExplainTenant> {
    admin
        .post_path(TENANTS, &json!({"metadata": {"name": name}}))
        .await?;
    let named = |state: &str| {
        format!("this.metadata.name == \"{name}\" && this.status.state == \"TENANT_STATE_{state}\"")
    };
    admin
        .wait_count(TENANTS, &named("READY"), &named("FAILED"), 1, timeout)
        .await?;
    let token = admin
        .post_path(TOKENS, &json!({"tenant": name, "role": "tenant-admin"}))
        .await?;
    let api = admin.with_token(token["token"].as_str().context("no token minted")?);
    api.post_path(
        VNS,
        &json!({"metadata": {"name": "explain"}, "spec": {"ipv4_cidr": "10.20.0.0/16"}}),
    )
    .await?;
    let existing = api.count(SUBNETS, "").await?;
    let subnets = vms.div_ceil(SUBNET_SIZE).max(1);
    if subnets > 60 {
        bail!(
            "--explain-vms {vms}: at most {} VMs fit the bench VN",
            60 * SUBNET_SIZE
        );
    }
    for s in 0..subnets {
        api.post_path(
            SUBNETS,
            &json!({"metadata": {"name": format!("explain-{s}")}, "spec": {"virtual_network": "explain", "ipv4_cidr": format!("10.20.{}.0/22", s * 4)}}),
        )
        .await?;
    }
    let all = usize::try_from(existing).unwrap_or(0) + subnets;
    wait_all(&api, SUBNETS, "SUBNET_STATE_READY", all, timeout).await?;
    let group_api = api.clone();
    let run = load::run(groups, clients, move |i| {
        let api = group_api.clone();
        let mut rng = rand::rng();
        let ingress: Vec<Value> = (0..5).map(|_| random_rule(&mut rng)).collect();
        let egress: Vec<Value> = (0..2).map(|_| random_rule(&mut rng)).collect();
        let body = json!({"metadata": {"name": format!("g{i}")}, "spec": {"virtual_network": "explain", "ingress": ingress, "egress": egress}});
        async move { Ok(api.post_path(SGS, &body).await.map(drop)?) }
    })
    .await;
    if let Some(e) = run.first_error {
        bail!("creating security groups: {e}");
    }
    let vm_api = api.clone();
    let run = load::run(vms, clients, move |i| {
        let api = vm_api.clone();
        let mut rng = rand::rng();
        let sgs: Vec<String> = (0..rng.random_range(1..=3))
            .map(|_| format!("g{}", rng.random_range(0..groups.max(1))))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let sgs = if groups == 0 { vec![] } else { sgs };
        let body = json!({"metadata": {"name": format!("x{i}")}, "spec": {"template": "small",
            "compute_network_attachments": [{"subnet": format!("explain-{}", i / SUBNET_SIZE), "security_groups": sgs}]}});
        async move { Ok(api.post_path(VMS, &body).await.map(drop)?) }
    })
    .await;
    if let Some(e) = run.first_error {
        bail!("creating VMs: {e}");
    }
    wait_all(&api, VMS, "COMPUTE_INSTANCE_STATE_RUNNING", vms, timeout).await?;
    Ok(ExplainTenant {
        tenant: name.to_string(),
        api,
        vms: (0..vms).map(|i| format!("x{i}")).collect(),
        groups: (0..groups).map(|i| format!("g{i}")).collect(),
    })
}

/// Measure 8.
pub async fn explain_phase(args: &Args, env: &Env, report: &mut Report) -> Result<()> {
    let timeout = Duration::from_secs(args.ready_timeout);
    progress!(
        "8/8 explain: a tenant with {} VMs and {} security groups through REST (untimed)…",
        args.explain_vms,
        args.explain_groups
    );
    let setup = Instant::now();
    let t = setup_tenant(
        &env.admin,
        &format!("{}-explain", env.tenant),
        args.explain_vms,
        args.explain_groups,
        args.clients,
        timeout,
    )
    .await?;
    let setup = setup.elapsed();
    let n = args.explain_requests;
    progress!(
        "8/8 explain: timing {n} explain requests with {} clients…",
        args.clients
    );
    let vms = std::sync::Arc::new(t.vms.clone());
    let api = t.api.clone();
    let run = load::run(n, args.explain_clients, move |i| {
        let api = api.clone();
        let vms = vms.clone();
        let mut rng = rand::rng();
        let (a, b) = (
            vms[rng.random_range(0..vms.len())].clone(),
            vms[rng.random_range(0..vms.len())].clone(),
        );
        let from = if i % 10 == 0 {
            json!({"internet": true})
        } else {
            json!({"compute_instance": a})
        };
        let (protocol, port) = match i % 3 {
            0 => ("PROTOCOL_ICMP", 0),
            1 => ("PROTOCOL_UDP", rng.random_range(1..60_000)),
            _ => ("PROTOCOL_TCP", rng.random_range(1..10_000)),
        };
        let body = json!({"source": from, "destination": {"compute_instance": b}, "protocol": protocol, "port": port});
        async move {
            let r = api.post_path(EXPLAIN, &body).await?;
            Ok(r["verdict"] == "REACHABILITY_VERDICT_REACHABLE")
        }
    })
    .await;
    if let Some(e) = &run.first_error {
        bail!("explain failed ({} errors): {e}", run.errors);
    }
    let reachable = run.results.iter().filter(|r| **r == Some(true)).count();
    let p99 = run.latencies.pct(0.99);
    report.lines.push(Line {
        id: "8".into(),
        what: format!(
            "explain p99 ({} VMs, {} SGs, {} clients)",
            args.explain_vms, args.explain_groups, args.explain_clients
        ),
        shown: format!("{p99:.1} ms"),
        value: p99,
        goal: Goal::AtMost(GOAL_P99_MS),
        goal_text: format!("≤ {GOAL_P99_MS} ms"),
        note: format!(
            "p50 {:.1} ms; {:.0} req/s; {reachable} of {n} REACHABLE",
            run.latencies.pct(0.5),
            run.rate()
        ),
    });
    if args.console_first_paint {
        let contents = format!("{} VMs, {} SGs", t.vms.len(), t.groups.len());
        report
            .lines
            .push(crate::console::first_paint_line(&t.api, &contents).await?);
    }
    report.details.push(format!(
        "[explain] tenant {} ({} VMs, {} groups) set up in {:.1} s; latency {}",
        t.tenant,
        t.vms.len(),
        t.groups.len(),
        setup.as_secs_f64(),
        run.latencies.summary()
    ));
    Ok(())
}
