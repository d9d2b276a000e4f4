//! Measures 2 and 4: subnet creates through REST (rate and latency against the raw store
//! rate), and the time for many subnets to reach READY.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::json;

use crate::api::{Polls, id_of};
use crate::load;
use crate::report::{Goal, Line, Report, thousands};
use crate::{Args, Env, SN_FAILED, SN_READY, SUBNETS, VN_FAILED, VN_READY, VNS, state_filter};

/// Creates `n` VirtualNetworks (10.0.0.0/16) labelled `bench=label` and waits until all are
/// READY. Returns their ids in order.
pub(crate) async fn create_vns(
    args: &Args,
    env: &Env,
    label: &str,
    n: usize,
    report: &mut Report,
) -> Result<Vec<String>> {
    let api = env.api.clone();
    let label_owned = label.to_string();
    let run = load::run(n, args.clients, move |i| {
        let api = api.clone();
        let body = json!({
            "metadata": {"name": format!("{label_owned}-vn-{i}"), "labels": {"bench": label_owned}},
            "spec": {"ipv4_cidr": "10.0.0.0/16"}
        });
        async move { id_of(&api.post_path(VNS, &body).await?) }
    })
    .await;
    if let Some(e) = &run.first_error {
        bail!("{} of {n} VirtualNetwork creates failed: {e}", run.errors);
    }
    let rate = run.rate();
    let lat = run.latencies.summary();
    let created = run.elapsed;
    let waited = env
        .api
        .wait_count(
            VNS,
            &state_filter(label, VN_READY),
            &state_filter(label, VN_FAILED),
            n as i64,
            Duration::from_secs(args.ready_timeout),
        )
        .await?;
    report.details.push(format!(
        "[{label}] {n} VirtualNetworks created in {:.2} s ({} /s; {lat}); all READY {:.2} s later",
        created.as_secs_f64(),
        thousands(rate),
        waited.as_secs_f64()
    ));
    Ok(run.ok().collect())
}

/// Measure 2: subnet creates through REST, each in its own READY VirtualNetwork.
pub(crate) async fn create_phase(
    args: &Args,
    env: &Env,
    raw_rate: Option<f64>,
    report: &mut Report,
) -> Result<()> {
    let n = args.creates;
    progress!("2/5 create: {n} VirtualNetworks (untimed), waiting for READY…");
    let vns = Arc::new(create_vns(args, env, "create", n, report).await?);
    env.analyze(args, report, "before the subnet creates")
        .await?;
    let pace = args
        .rate
        .map_or(load::Pace::Clients(args.clients), load::Pace::Rate);
    progress!(
        "2/5 create: timing {n} subnet creates, {}…",
        pace.describe()
    );
    let api = env.api.clone();
    let run = load::drive(n, pace, None, move |i| {
        let api = api.clone();
        let body = json!({
            "metadata": {"name": format!("create-sn-{i}"), "labels": {"bench": "create"}},
            "spec": {"virtual_network": vns[i], "ipv4_cidr": "10.0.1.0/24"}
        });
        async move { id_of(&api.post_path(SUBNETS, &body).await?) }
    })
    .await;
    if let Some(e) = &run.first_error {
        report.warnings.push(format!(
            "{} of {n} subnet creates failed, e.g. {e}",
            run.errors
        ));
    }
    let rate = run.rate();
    let ok = run.results.iter().filter(|r| r.is_some()).count();
    match raw_rate.filter(|_| matches!(pace, load::Pace::Clients(_))) {
        Some(raw) => report.lines.push(Line {
            id: "2".into(),
            what: format!("subnet create via REST ({}, own VN each)", pace.describe()),
            shown: format!("{} /s = {:.2}× raw", thousands(rate), rate / raw),
            value: rate / raw,
            goal: Goal::AtLeast(0.25),
            goal_text: "≥ 0.25× raw".into(),
            note: format!(
                "{} creates in {:.2} s",
                thousands(ok as f64),
                run.elapsed.as_secs_f64()
            ),
        }),
        None => report.lines.push(Line {
            id: "2".into(),
            what: format!("subnet create via REST ({}, own VN each)", pace.describe()),
            shown: format!("{} /s", thousands(rate)),
            value: f64::NAN,
            goal: Goal::AtLeast(0.25),
            goal_text: "≥ 0.25× raw".into(),
            note: match pace {
                load::Pace::Rate(_) => "open loop: the rate is what was offered".into(),
                load::Pace::Clients(_) => "raw rate not measured (--skip-raw)".into(),
            },
        }),
    }
    report.lines.push(Line {
        id: "".into(),
        what: "  create latency p50 / p99".into(),
        shown: format!(
            "{:.1} / {:.1} ms",
            run.latencies.pct(0.5),
            run.latencies.pct(0.99)
        ),
        value: run.latencies.pct(0.99),
        goal: Goal::AtMost(20.0),
        goal_text: "p99 ≤ 20 ms".into(),
        note: format!("max {:.1} ms", run.latencies.max()),
    });
    report.details.push(format!(
        "[create] subnet create latency: {}",
        run.latencies.summary()
    ));
    // Let the controllers finish these before the next phase, so phases do not overlap.
    let t = Instant::now();
    env.api
        .wait_count(
            SUBNETS,
            &state_filter("create", SN_READY),
            &state_filter("create", SN_FAILED),
            ok as i64,
            Duration::from_secs(args.ready_timeout),
        )
        .await?;
    report.details.push(format!(
        "[create] all {ok} subnets READY {:.2} s after the last create returned",
        t.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// Measure 4: `ready` subnets created through REST (spread over VNs), time until all READY.
pub(crate) async fn ready_phase(args: &Args, env: &Env, report: &mut Report) -> Result<()> {
    let n = args.ready;
    let per_vn = args.ready_per_vn.clamp(1, 255);
    let n_vn = n.div_ceil(per_vn);
    progress!("4/5 ready: {n_vn} VirtualNetworks (untimed), waiting for READY…");
    let vns = Arc::new(create_vns(args, env, "ready", n_vn, report).await?);
    env.analyze(args, report, "before the READY run").await?;
    progress!("4/5 ready: creating {n} subnets ({per_vn} per VN) and waiting until all are READY…");
    let start = Instant::now();
    let api = env.api.clone();
    let creating = tokio::spawn(load::run(n, args.clients, move |i| {
        let api = api.clone();
        // Round-robin over the VNs: consecutive creates land in different VNs.
        let (vn, third) = (i % n_vn, 1 + i / n_vn);
        let body = json!({
            "metadata": {"name": format!("ready-sn-{i}"), "labels": {"bench": "ready"}},
            "spec": {"virtual_network": vns[vn], "ipv4_cidr": format!("10.0.{third}.0/24")}
        });
        async move { id_of(&api.post_path(SUBNETS, &body).await?) }
    }));
    let run = creating.await?;
    let created_after = start.elapsed();
    if let Some(e) = &run.first_error {
        report.warnings.push(format!(
            "{} of {n} READY-run subnet creates failed, e.g. {e}",
            run.errors
        ));
    }
    let ok = run.results.iter().filter(|r| r.is_some()).count();
    let wait = env
        .api
        .wait_count(
            SUBNETS,
            &state_filter("ready", SN_READY),
            &state_filter("ready", SN_FAILED),
            ok as i64,
            Duration::from_secs(args.ready_timeout),
        )
        .await;
    let total = start.elapsed();
    wait?;
    report.lines.push(Line {
        id: "4".into(),
        what: format!("{} subnets to READY (sim fabric)", thousands(ok as f64)),
        shown: format!("{:.1} s", total.as_secs_f64()),
        value: total.as_secs_f64(),
        goal: Goal::AtMost(15.0),
        goal_text: "≤ 15 s".into(),
        note: format!("creates done at {:.1} s", created_after.as_secs_f64()),
    });
    report.details.push(format!(
        "[ready] {ok} subnet creates in {:.2} s ({} /s; {}); all READY at {:.2} s (first create → last READY)",
        created_after.as_secs_f64(),
        thousands(run.rate()),
        run.latencies.summary(),
        total.as_secs_f64()
    ));
    Ok(())
}
