//! Measure 7: single-call creation. A fresh tenant gets its default networking at
//! onboarding; then N VMs are created in ONE call each — no attachments (the server fills in
//! the default subnet and security group) and `auto_external_ip_attachment` (the server creates
//! an ExternalIP and an ExternalIPAttachment in the same transaction). Measured: create
//! throughput and latency, the time until every auto-provisioned attachment is READY
//! (end-to-end workloads/s), then, after deleting the N VMs, the time until the pool's
//! `available` is back to its value before the creates and until the VMs are gone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::api::{Api, Polls, id_of};
use crate::load;
use crate::metrics::Histograms;
use crate::report::{Goal, Line, Report, thousands};
use crate::workloads::ReadyTiming;
use crate::{Args, Env};

const VMS: &str = "/api/fulfillment/v1/compute_instances";
const EIPS: &str = "/api/fulfillment/v1/external_ips";
const ATTACHMENTS: &str = "/api/fulfillment/v1/external_ip_attachments";
const POOLS: &str = "/api/private/v1/external_ip_pools";
const TENANTS: &str = "/api/private/v1/tenants";
const TOKENS: &str = "/api/private/v1/tokens";
const CLASSES: &str = "/api/private/v1/network_classes";
const LABEL: &str = "single-call";
const ATT_READY: &str = "this.status.state == \"EXTERNAL_IP_ATTACHMENT_STATE_READY\"";
const ATT_FAILED: &str = "this.status.state == \"EXTERNAL_IP_ATTACHMENT_STATE_FAILED\"";
/// Goal (docs/benchmarks.md): end-to-end single-call workloads per second.
pub const GOAL_PER_S: f64 = 400.0;
/// Goal (docs/benchmarks.md): seconds from the first delete until the pool's capacity is back.
pub const GOAL_RELEASE_S: f64 = 10.0;
/// How often the bench polls while waiting.
const POLL: Duration = Duration::from_millis(100);

/// The run's own pool, in the benchmarking range but apart from the workload run's
/// (198.18.0.0/…): at least a /19, larger for big runs, so it stays the pool with the most
/// `available` (the server's automatic choice) through the run.
pub fn pool_cidr(n: usize) -> String {
    let mut prefix = 19u32;
    while prefix > 16 && (1usize << (32 - prefix)) < n + 4096 {
        prefix -= 1;
    }
    format!("198.19.0.0/{prefix}")
}

/// The default IPv4 subnet a tenant needs for `n` VMs, when the dev class's /24 (about 238
/// VM addresses after the gateway and the VIP block) is too small: the smallest prefix inside
/// the default VN's 10.0.0.0/16 with room for `n` plus a margin.
pub fn default_subnet_cidr(n: usize) -> Option<String> {
    if n <= 200 {
        return None;
    }
    let mut prefix = 24u32;
    while prefix > 17 && (1usize << (32 - prefix)) < n + 256 {
        prefix -= 1;
    }
    Some(format!("10.0.0.0/{prefix}"))
}

/// An int64 the API renders as a JSON string (or a number).
fn int64(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// `status.available` of the pool.
async fn available(admin: &Api, pool: &str) -> Result<i64> {
    let p = admin.get_path(&format!("{POOLS}/{pool}")).await?;
    int64(p.pointer("/status/available"))
        .with_context(|| format!("pool {pool} has no status.available: {p}"))
}

/// Polls `done` every 100 ms until it returns true; fails after `timeout`.
async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut done: F) -> Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool>>,
{
    let start = Instant::now();
    loop {
        if done().await? {
            return Ok(start.elapsed());
        }
        if start.elapsed() > timeout {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Creates the run's pool and tenant (untimed except the onboarding, reported) and returns
/// (pool id, the tenant's client).
async fn setup(args: &Args, env: &Env, report: &mut Report) -> Result<(String, Api)> {
    let n = args.single_call;
    let admin = &env.admin;
    let timeout = Duration::from_secs(args.ready_timeout);
    let cidr = pool_cidr(n);
    let pool_name = "bench-pool";
    let pool = id_of(
        &admin
            .post_path(
                POOLS,
                &json!({"metadata": {"name": pool_name}, "spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": [cidr]}}),
            )
            .await?,
    )?;
    let named = |state: &str| {
        format!(
            "this.metadata.name == \"{pool_name}\" && this.status.state == \"EXTERNAL_IP_POOL_STATE_{state}\""
        )
    };
    admin
        .wait_count(POOLS, &named("READY"), &named("FAILED"), 1, timeout)
        .await?;

    // The default class's subnet must hold the run's VMs (tenants created from now on get it).
    let widened = match default_subnet_cidr(n) {
        Some(cidr) => {
            let class = admin.get_path(&format!("{CLASSES}/default")).await?;
            let mut defaults = class
                .pointer("/spec/defaults")
                .cloned()
                .context("the default NetworkClass has no spec.defaults")?;
            defaults["subnet_ipv4_cidr"] = json!(cidr);
            admin
                .patch_path(
                    &format!("{CLASSES}/default"),
                    "spec.defaults",
                    &json!({"spec": {"defaults": defaults}}),
                )
                .await
                .context("widening the default class's IPv4 subnet")?;
            format!("; default class subnet_ipv4_cidr widened to {cidr} for {n} VMs")
        }
        None => String::new(),
    };
    let tenant = format!("{}-sc", env.tenant);
    let onboarding = Instant::now();
    admin
        .post_path(TENANTS, &json!({"metadata": {"name": tenant}}))
        .await?;
    let named = |state: &str| {
        format!(
            "this.metadata.name == \"{tenant}\" && this.status.state == \"TENANT_STATE_{state}\""
        )
    };
    admin
        .wait_count(TENANTS, &named("READY"), &named("FAILED"), 1, timeout)
        .await
        .context("waiting for the tenant's default networking (made at tenant onboarding)")?;
    let onboarded = onboarding.elapsed();
    let token = admin
        .post_path(TOKENS, &json!({"tenant": tenant, "role": "tenant-admin"}))
        .await?;
    let token = token["token"].as_str().context("no token minted")?;
    report.details.push(format!(
        "[single-call] setup: pool {pool_name} = {cidr}{widened}; tenant {tenant} READY (default networking) {:.2} s after its create",
        onboarded.as_secs_f64()
    ));
    Ok((pool, admin.with_token(token)))
}

pub async fn single_call_phase(args: &Args, env: &Env, report: &mut Report) -> Result<()> {
    let n = args.single_call;
    if n == 0 {
        return Ok(());
    }
    let timeout = Duration::from_secs(args.ready_timeout);
    progress!("7/7 single-call: pool and a fresh tenant with default networking (untimed)…");
    let (pool, api) = setup(args, env, report).await?;
    let admin = &env.admin;
    let available_before = available(admin, &pool).await?;
    let eips_before = api.count(EIPS, "").await?;

    // Timed: N single-call creates, then every auto-provisioned attachment READY.
    let phases_before = Histograms::now("osac_workload_phase_duration_seconds", &["kind", "phase"]);
    let reconciles_before = Histograms::now("osac_reconcile_duration_seconds", &["kind"]);
    progress!(
        "7/7 single-call: timing {n} VM creates (one call each, auto external IP) with {} clients until every attachment is READY…",
        args.clients
    );
    let start = Instant::now();
    let run_api = api.clone();
    let run = load::run(n, args.clients, move |i| {
        let api = run_api.clone();
        let body = json!({
            "metadata": {"name": format!("sc-vm-{i}"), "labels": {"bench": LABEL}},
            "spec": {"template": "small", "auto_external_ip_attachment": true}
        });
        async move { id_of(&api.post_path(VMS, &body).await?) }
    })
    .await;
    let created_after = start.elapsed();
    let ok = run.results.iter().filter(|r| r.is_some()).count();
    if ok == 0 {
        bail!(
            "every single-call VM create failed, e.g. {} — this needs a server that provides single-call creation (default networking at tenant onboarding, attachments filled in from the defaults, auto_external_ip_attachment)",
            run.first_error.as_deref().unwrap_or("?")
        );
    }
    if let Some(e) = &run.first_error {
        report.warnings.push(format!(
            "{} of {n} single-call creates failed, e.g. {e}",
            run.errors
        ));
    }
    let wait = api
        .wait_count(ATTACHMENTS, ATT_READY, ATT_FAILED, ok as i64, timeout)
        .await;
    let total = start.elapsed();
    let phases = Histograms::now("osac_workload_phase_duration_seconds", &["kind", "phase"])
        .since(&phases_before);
    let reconciles =
        Histograms::now("osac_reconcile_duration_seconds", &["kind"]).since(&reconciles_before);
    wait.context("waiting for the auto-provisioned attachments to be READY")?;
    let vm_filter = format!("this.metadata.labels[\"bench\"] == \"{LABEL}\"");
    let running = api
        .count(
            VMS,
            &format!("{vm_filter} && this.status.state == \"COMPUTE_INSTANCE_STATE_RUNNING\""),
        )
        .await
        .unwrap_or(-1);
    let available_created = available(admin, &pool).await?;
    // The console is timed while the tenant holds its VMs; its line follows measure 7's.
    let console_line = if args.console_first_paint {
        Some(crate::console::first_paint_line(&api, &format!("{ok} workloads")).await?)
    } else {
        None
    };
    let create_lat = run.latencies.clone();
    let timing = ReadyTiming {
        ok,
        created_after,
        total,
    };

    // Deletes, then the pool's capacity back and the VMs gone.
    progress!(
        "7/7 single-call: deleting the {ok} VMs with {} clients, waiting for the pool's capacity…",
        args.clients
    );
    let ids: Arc<Vec<String>> = Arc::new(run.ok().collect());
    let del_start = Instant::now();
    let del_api = api.clone();
    let del_ids = ids.clone();
    let deletes = load::run(ids.len(), args.clients, move |i| {
        let api = del_api.clone();
        let path = format!("{VMS}/{}", del_ids[i]);
        async move { Ok(api.delete_path(&path).await.map(drop)?) }
    })
    .await;
    let deleted_after = del_start.elapsed();
    if let Some(e) = &deletes.first_error {
        report.warnings.push(format!(
            "{} of {} single-call deletes failed, e.g. {e}",
            deletes.errors,
            ids.len()
        ));
    }
    let pool_back = wait_until("the pool's available to return", timeout, || async {
        Ok(available(admin, &pool).await? >= available_before)
    })
    .await
    .map(|_| del_start.elapsed());
    let vms_gone = wait_until("the VMs to be gone", timeout, || async {
        Ok(api.count(VMS, &vm_filter).await? == 0)
    })
    .await
    .map(|_| del_start.elapsed());
    let available_after = available(admin, &pool).await?;
    let eips_after = api.count(EIPS, "").await?;
    let atts_after = api.count(ATTACHMENTS, "").await?;

    let count = thousands(ok as f64);
    timing.push_create_line(
        report,
        "7",
        format!(
            "{count} single-call VM creates, auto external IP ({} cl.)",
            args.clients
        ),
        format!(
            "{count} POSTs in {:.2} s; p50 {:.1} / p99 {:.1} ms",
            created_after.as_secs_f64(),
            create_lat.pct(0.5),
            create_lat.pct(0.99)
        ),
    );
    timing.push_ready_lines(
        report,
        &format!("{count} auto attachments"),
        "single-call workloads",
        GOAL_PER_S,
    );
    let (back_value, back_shown) = match &pool_back {
        Ok(d) => (d.as_secs_f64(), format!("{:.1} s", d.as_secs_f64())),
        Err(_) => (f64::INFINITY, "not back".into()),
    };
    report.lines.push(Line {
        id: "".into(),
        what: format!("  {count} deletes: pool `available` back (first delete →)"),
        shown: back_shown,
        value: back_value,
        goal: Goal::AtMost(GOAL_RELEASE_S),
        goal_text: format!("≤ {GOAL_RELEASE_S:.0} s"),
        note: format!(
            "deletes sent in {:.2} s; VMs gone at {}",
            deleted_after.as_secs_f64(),
            match &vms_gone {
                Ok(d) => format!("{:.1} s", d.as_secs_f64()),
                Err(_) => "never (timeout)".into(),
            }
        ),
    });
    report.lines.extend(console_line);
    report.details.push(format!(
        "[single-call] {}; {running} VMs RUNNING then",
        timing.summary("VMs", "auto-provisioned attachments")
    ));
    report.details.push(format!(
        "[single-call] create latency: {}",
        create_lat.summary()
    ));
    report.details.push(format!(
        "[single-call] delete latency: {} ({} /s)",
        deletes.latencies.summary(),
        thousands(deletes.rate())
    ));
    report.details.push(format!(
        "[single-call] pool available: {available_before} before the creates, {available_created} with the VMs ({} in use by them), {available_after} after the deletes; tenant ExternalIPs {eips_before} before, {eips_after} after; ExternalIPAttachments left {atts_after}",
        available_before - available_created
    ));
    for (key, count, sum, mean) in phases.by_total() {
        report.details.push(format!(
            "[single-call]   phase {key:<40} {count:>6} × mean {:>8.2} ms = total {:>8.2} s",
            mean * 1000.0,
            sum
        ));
    }
    for (key, count, sum, mean) in reconciles.by_total() {
        report.details.push(format!(
            "[single-call]   reconcile {key:<36} {count:>6} × mean {:>8.2} ms = total {:>8.2} s",
            mean * 1000.0,
            sum
        ));
    }
    if let Err(e) = pool_back {
        report.warnings.push(format!("single-call: {e:#}"));
    }
    if let Err(e) = vms_gone {
        report.warnings.push(format!("single-call: {e:#}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_sizes_stay_apart_from_the_workload_pool() {
        assert_eq!(pool_cidr(1_000), "198.19.0.0/19");
        assert_eq!(pool_cidr(5_000), "198.19.0.0/18");
        assert_eq!(pool_cidr(1_000_000), "198.19.0.0/16");
    }

    #[test]
    fn default_subnet_grows_with_the_run() {
        assert_eq!(default_subnet_cidr(50), None);
        assert_eq!(default_subnet_cidr(1_000).as_deref(), Some("10.0.0.0/21"));
        assert_eq!(
            default_subnet_cidr(1_000_000).as_deref(),
            Some("10.0.0.0/17")
        );
    }

    #[test]
    fn int64_reads_strings_and_numbers() {
        assert_eq!(int64(Some(&json!("42"))), Some(42));
        assert_eq!(int64(Some(&json!(7))), Some(7));
        assert_eq!(int64(Some(&json!(null))), None);
        assert_eq!(int64(None), None);
    }
}
