//! Measure 6: N ComputeInstances, each with an ExternalIPAttachment, created by the
//! concurrent clients; the time until every attachment is READY, and where the controllers
//! spent their time (`osac_workload_phase_duration_seconds`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::json;

use crate::api::{Polls, id_of};
use crate::load::{self, Latencies};
use crate::metrics::Histograms;
use crate::report::{Goal, Line, Report, thousands};
use crate::{Args, Env, SN_FAILED, SN_READY, SUBNETS, VN_FAILED, VN_READY, VNS, state_filter};

const SGS: &str = "/api/fulfillment/v1/security_groups";
const EIPS: &str = "/api/fulfillment/v1/external_ips";
const VMS: &str = "/api/fulfillment/v1/compute_instances";
const ATTACHMENTS: &str = "/api/fulfillment/v1/external_ip_attachments";
const POOLS: &str = "/api/private/v1/external_ip_pools";
const LABEL: &str = "workloads";
/// Usable VM addresses of one /21 subnet, with a margin for the reserved ones.
const PER_SUBNET: usize = 2_000;
/// The most /21 subnets that fit in the VN's /16.
const MAX_SUBNETS: usize = 32;
/// Goal (docs/benchmarks.md): end-to-end workloads per second.
pub const GOAL_PER_S: f64 = 400.0;

/// The /21 subnets of the run: at least `wanted`, enough for `n` VMs, at most 32.
pub fn subnet_count(n: usize, wanted: usize) -> usize {
    wanted.max(n.div_ceil(PER_SUBNET)).clamp(1, MAX_SUBNETS)
}

/// The smallest pool CIDR in 198.18.0.0/15 (the benchmarking range) holding `n` addresses plus
/// a margin, but at least a /20.
pub fn pool_cidr(n: usize) -> String {
    let mut prefix = 20u32;
    while prefix > 15 && (1usize << (32 - prefix)) < n + 256 {
        prefix -= 1;
    }
    format!("198.18.0.0/{prefix}")
}

fn named(name: &str, state: &str) -> String {
    format!("this.metadata.name == \"{name}\" && this.status.state == \"{state}\"")
}

/// Latencies of the three requests of one workload.
struct Timed {
    vm: Duration,
    attachment: Duration,
}

pub async fn workloads_phase(args: &Args, env: &Env, report: &mut Report) -> Result<()> {
    let n = args.workloads;
    if n == 0 {
        return Ok(());
    }
    let api = &env.api;
    let timeout = Duration::from_secs(args.ready_timeout);
    let k = subnet_count(n, args.workload_subnets);
    if n > k * PER_SUBNET {
        bail!("{n} workloads do not fit in {k} /21 subnets");
    }
    progress!("6/6 workloads: VN, {k} /21 subnets, a security group and a pool (untimed)…");
    let setup = Instant::now();
    let vn = id_of(
        &api.post_path(
            VNS,
            &json!({"metadata": {"name": "wl-vn", "labels": {"bench": LABEL}}, "spec": {"ipv4_cidr": "10.0.0.0/16"}}),
        )
        .await?,
    )?;
    api.wait_count(
        VNS,
        &state_filter(LABEL, VN_READY),
        &state_filter(LABEL, VN_FAILED),
        1,
        timeout,
    )
    .await?;
    let mut subnets = Vec::with_capacity(k);
    for j in 0..k {
        let body = json!({
            "metadata": {"name": format!("wl-sn-{j}"), "labels": {"bench": LABEL}},
            "spec": {"virtual_network": vn, "ipv4_cidr": format!("10.0.{}.0/21", 8 * j)}
        });
        subnets.push(id_of(&api.post_path(SUBNETS, &body).await?)?);
    }
    let sg = id_of(
        &api.post_path(
            SGS,
            &json!({"metadata": {"name": "wl-sg", "labels": {"bench": LABEL}}, "spec": {"virtual_network": vn, "ingress": [
                {"protocol": "PROTOCOL_TCP", "port_from": 22, "port_to": 22, "ipv4_cidr": "0.0.0.0/0"}
            ]}}),
        )
        .await?,
    )?;
    let cidr = pool_cidr(n);
    let pool_name = "bench-workloads";
    env.admin
        .post_path(
            POOLS,
            &json!({"metadata": {"name": pool_name}, "spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": [cidr]}}),
        )
        .await?;
    api.wait_count(
        SUBNETS,
        &state_filter(LABEL, SN_READY),
        &state_filter(LABEL, SN_FAILED),
        k as i64,
        timeout,
    )
    .await?;
    api.wait_count(
        SGS,
        &state_filter(LABEL, "SECURITY_GROUP_STATE_READY"),
        &state_filter(LABEL, "SECURITY_GROUP_STATE_FAILED"),
        1,
        timeout,
    )
    .await?;
    env.admin
        .wait_count(
            POOLS,
            &named(pool_name, "EXTERNAL_IP_POOL_STATE_READY"),
            &named(pool_name, "EXTERNAL_IP_POOL_STATE_FAILED"),
            1,
            timeout,
        )
        .await?;

    // The ExternalIPs, untimed: an attachment needs its ExternalIP ALLOCATED.
    progress!("6/6 workloads: {n} ExternalIPs from {cidr} (untimed), waiting for ALLOCATED…");
    let eip_api = api.clone();
    let eips = load::run(n, args.clients, move |i| {
        let api = eip_api.clone();
        let body = json!({
            "metadata": {"name": format!("wl-eip-{i}"), "labels": {"bench": LABEL}},
            "spec": {"pool": pool_name}
        });
        async move { id_of(&api.post_path(EIPS, &body).await?) }
    })
    .await;
    if let Some(e) = &eips.first_error {
        bail!("{} of {n} ExternalIP creates failed: {e}", eips.errors);
    }
    let eip_created = eips.elapsed;
    let eip_rate = eips.rate();
    let eip_wait = api
        .wait_count(
            EIPS,
            &state_filter(LABEL, "EXTERNAL_IP_STATE_ALLOCATED"),
            &state_filter(LABEL, "EXTERNAL_IP_STATE_FAILED"),
            n as i64,
            timeout,
        )
        .await?;
    let eips: Arc<Vec<String>> = Arc::new(eips.ok().collect());
    report.details.push(format!(
        "[workloads] setup (untimed, {:.1} s): VN 10.0.0.0/16, {k} /21 subnets, 1 security group, pool {cidr}; {n} ExternalIPs created in {:.2} s ({} /s), all ALLOCATED {:.2} s later",
        setup.elapsed().as_secs_f64(),
        eip_created.as_secs_f64(),
        thousands(eip_rate),
        eip_wait.as_secs_f64()
    ));
    env.analyze(args, report, "before the workload run").await?;

    // The timed run.
    let phases_before = Histograms::now("osac_workload_phase_duration_seconds", &["kind", "phase"]);
    let reconciles_before = Histograms::now("osac_reconcile_duration_seconds", &["kind"]);
    progress!(
        "6/6 workloads: timing {n} × (ComputeInstance + ExternalIPAttachment) with {} clients until every attachment is READY…",
        args.clients
    );
    let txs_before = osac_store::write_transactions();
    let groups_before = osac_store::group_commits();
    let busy_before = osac_store::group_commit_busy();
    let start = Instant::now();
    let run_api = api.clone();
    let subnets = Arc::new(subnets);
    let run = load::run(n, args.clients, move |i| {
        let api = run_api.clone();
        let vm = json!({
            "metadata": {"name": format!("wl-vm-{i}"), "labels": {"bench": LABEL}},
            "spec": {"template": "small", "compute_network_attachments": [
                {"subnet": subnets[i % subnets.len()], "security_groups": [sg]}
            ]}
        });
        let eip = eips[i].clone();
        async move {
            let t = Instant::now();
            let vm = id_of(&api.post_path(VMS, &vm).await?)?;
            let vm_took = t.elapsed();
            let t = Instant::now();
            let body = json!({
                "metadata": {"name": format!("wl-att-{i}"), "labels": {"bench": LABEL}},
                "spec": {"external_ip": eip, "compute_instance": vm}
            });
            id_of(&api.post_path(ATTACHMENTS, &body).await?)?;
            Ok(Timed {
                vm: vm_took,
                attachment: t.elapsed(),
            })
        }
    })
    .await;
    let created_after = start.elapsed();
    if let Some(e) = &run.first_error {
        report.warnings.push(format!(
            "{} of {n} workload creates failed, e.g. {e}",
            run.errors
        ));
    }
    let ok = run.results.iter().filter(|r| r.is_some()).count();
    let wait = api
        .wait_count(
            ATTACHMENTS,
            &state_filter(LABEL, "EXTERNAL_IP_ATTACHMENT_STATE_READY"),
            &state_filter(LABEL, "EXTERNAL_IP_ATTACHMENT_STATE_FAILED"),
            ok as i64,
            timeout,
        )
        .await;
    let total = start.elapsed();
    let busy = osac_store::group_commit_busy().saturating_sub(busy_before);
    let txs = osac_store::write_transactions().saturating_sub(txs_before);
    let groups = osac_store::group_commits();
    let (group_commits, group_sets) = (
        groups.0.saturating_sub(groups_before.0),
        groups.1.saturating_sub(groups_before.1),
    );
    let phases = Histograms::now("osac_workload_phase_duration_seconds", &["kind", "phase"])
        .since(&phases_before);
    let reconciles =
        Histograms::now("osac_reconcile_duration_seconds", &["kind"]).since(&reconciles_before);
    wait?;
    let running = api
        .count(VMS, &state_filter(LABEL, "COMPUTE_INSTANCE_STATE_RUNNING"))
        .await
        .unwrap_or(-1);

    let (vm_lat, att_lat): (Vec<_>, Vec<_>) = run
        .results
        .iter()
        .flatten()
        .map(|t| (t.vm, t.attachment))
        .unzip();
    let (vm_lat, att_lat) = (Latencies::new(vm_lat), Latencies::new(att_lat));
    let timing = ReadyTiming {
        ok,
        created_after,
        total,
    };
    let count = thousands(ok as f64);
    timing.push_create_line(
        report,
        "6",
        format!(
            "{count} VM + ExternalIPAttachment creates ({} cl.)",
            args.clients
        ),
        format!(
            "{count} workloads (2 POSTs each) in {:.2} s",
            created_after.as_secs_f64()
        ),
    );
    timing.push_ready_lines(
        report,
        &format!("{count} attachments"),
        "workloads",
        GOAL_PER_S,
    );
    let per_workload = txs as f64 / (ok.max(1)) as f64;
    report.lines.push(Line {
        id: "".into(),
        what: "  write transactions per workload".into(),
        shown: format!("{per_workload:.1}"),
        value: per_workload,
        goal: Goal::AtMost(3.0),
        goal_text: "≤ 3".into(),
        note: format!(
            "{} committed (objects, events, driver records), creates included; group commits carried {:.1} write sets each",
            thousands(txs as f64),
            group_sets as f64 / group_commits.max(1) as f64
        ),
    });
    report.lines.push(Line {
        id: "".into(),
        what: "  VM create latency p50 / p99".into(),
        shown: format!("{:.1} / {:.1} ms", vm_lat.pct(0.5), vm_lat.pct(0.99)),
        value: vm_lat.pct(0.99),
        goal: Goal::None,
        goal_text: "(reference)".into(),
        note: format!("max {:.1} ms", vm_lat.max()),
    });
    report.details.push(format!(
        "[workloads] {}; {running} VMs RUNNING then",
        timing.summary("workloads", "attachments")
    ));
    report.details.push(format!(
        "[workloads] group committer busy {:.3} s of the {:.3} s run ({:.0} %), {:.0} µs per workload",
        busy.as_secs_f64(),
        total.as_secs_f64(),
        100.0 * busy.as_secs_f64() / total.as_secs_f64().max(1e-9),
        1e6 * busy.as_secs_f64() / ok.max(1) as f64
    ));
    report.details.push(format!(
        "[workloads] ComputeInstance create latency: {}",
        vm_lat.summary()
    ));
    report.details.push(format!(
        "[workloads] ExternalIPAttachment create latency: {}",
        att_lat.summary()
    ));
    let phases = phases.by_total();
    if let Some((slowest, _, _, _)) = phases.first() {
        let by_mean = phases
            .iter()
            .max_by(|a, b| a.3.total_cmp(&b.3))
            .map(|p| p.0.clone())
            .unwrap_or_default();
        report.details.push(format!(
            "[workloads] slowest phase: {slowest} by total time, {by_mean} by mean (osac_workload_phase_duration_seconds during the timed run; totals add up the time of all {} workers)",
            args.workers
        ));
    }
    for (key, count, sum, mean) in &phases {
        report.details.push(format!(
            "[workloads]   phase {key:<40} {count:>6} × mean {:>8.2} ms = total {:>8.2} s",
            mean * 1000.0,
            sum
        ));
    }
    for (key, count, sum, mean) in reconciles.by_total() {
        report.details.push(format!(
            "[workloads]   reconcile {key:<36} {count:>6} × mean {:>8.2} ms = total {:>8.2} s",
            mean * 1000.0,
            sum
        ));
    }
    Ok(())
}

/// How a workload run (measures 6 and 7) went: `ok` workloads, all created after
/// `created_after` and all their attachments READY after `total` (both from the first create).
pub struct ReadyTiming {
    pub ok: usize,
    pub created_after: Duration,
    pub total: Duration,
}

impl ReadyTiming {
    /// Creates per second.
    pub fn create_rate(&self) -> f64 {
        self.ok as f64 / self.created_after.as_secs_f64().max(1e-9)
    }

    /// Workloads per second, first create to last READY.
    pub fn end_to_end_rate(&self) -> f64 {
        self.ok as f64 / self.total.as_secs_f64().max(1e-9)
    }

    /// The measure's first line: creates per second (a reference figure), with `what` was
    /// created and a `note` on how.
    pub fn push_create_line(&self, report: &mut Report, id: &str, what: String, note: String) {
        report.lines.push(Line {
            id: id.into(),
            what,
            shown: format!("{} /s", thousands(self.create_rate())),
            value: self.create_rate(),
            goal: Goal::None,
            goal_text: "(reference)".into(),
            note,
        });
    }

    /// The two lines that follow the create line: the time until the last of `attachments`
    /// was READY (reference: the run at `goal_per_s`), and `workloads`/s end to end against
    /// that goal.
    pub fn push_ready_lines(
        &self,
        report: &mut Report,
        attachments: &str,
        workloads: &str,
        goal_per_s: f64,
    ) {
        let (total, e2e) = (self.total.as_secs_f64(), self.end_to_end_rate());
        report.lines.push(Line {
            id: "".into(),
            what: format!("  {attachments} READY (first create → last READY)"),
            shown: format!("{total:.1} s"),
            value: total,
            goal: Goal::None,
            goal_text: format!("(≤ {:.0} s at goal)", self.ok as f64 / goal_per_s),
            note: format!("creates done at {:.1} s", self.created_after.as_secs_f64()),
        });
        report.lines.push(Line {
            id: "".into(),
            what: format!("  end-to-end {workloads}/s"),
            shown: format!("{} /s", thousands(e2e)),
            value: e2e,
            goal: Goal::AtLeast(goal_per_s),
            goal_text: format!("≥ {goal_per_s:.0} /s"),
            note: String::new(),
        });
    }

    /// The run in a sentence for the details: the `ok` `created` and when all their
    /// `attachments` were READY, with the rates.
    pub fn summary(&self, created: &str, attachments: &str) -> String {
        let ok = self.ok;
        format!(
            "{ok} {created} created in {:.2} s ({} /s); all {ok} {attachments} READY at {:.2} s ({} workloads/s end to end)",
            self.created_after.as_secs_f64(),
            thousands(self.create_rate()),
            self.total.as_secs_f64(),
            thousands(self.end_to_end_rate())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(subnet_count(2_000, 4), 4);
        assert_eq!(subnet_count(10_000, 4), 5);
        assert_eq!(subnet_count(1_000_000, 4), 32);
        assert_eq!(pool_cidr(2_000), "198.18.0.0/20");
        assert_eq!(pool_cidr(4_000), "198.18.0.0/19");
        assert_eq!(pool_cidr(10_000_000), "198.18.0.0/15");
    }
}
