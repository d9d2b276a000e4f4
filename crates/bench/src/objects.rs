//! Measures 3 and 5: bulk-load objects through the store, then GET and label-filtered LIST
//! latency through REST and the process RSS at that size.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use osac_store::Store;
use rand::Rng;
use serde_json::json;

use crate::api::{Polls, id_of};
use crate::load::{self, Latencies};
use crate::process_stats::Mem;
use crate::report::{Goal, Line, Report, thousands};
use crate::store;
use crate::{
    Args, Env, SN_FAILED, SN_READY, SUBNETS, VN_FAILED, VN_READY, VNS, label_filter, state_filter,
};

/// The controllers' queue depth and reconcile count, read from the process's Prometheus
/// registry (the server is in-process).
pub(crate) fn controller_activity() -> (i64, u64) {
    let mut depth = 0;
    let mut total = 0;
    for family in prometheus::gather() {
        match family.name() {
            "osac_reconcile_queue_depth" => {
                depth += family
                    .get_metric()
                    .iter()
                    .map(|m| m.get_gauge().get_value() as i64)
                    .sum::<i64>();
            }
            "osac_reconcile_total" => {
                total += family
                    .get_metric()
                    .iter()
                    .map(|m| m.get_counter().get_value() as u64)
                    .sum::<u64>();
            }
            _ => {}
        }
    }
    (depth, total)
}

/// Waits until the controllers' queue is empty and no reconcile ran for a second.
/// Returns how long that took and how many reconciles ran since `before` (a reconcile count).
pub(crate) async fn controllers_idle(timeout: Duration, before: u64) -> Result<(Duration, u64)> {
    let start = Instant::now();
    let mut last = (i64::MAX, u64::MAX);
    let mut quiet = 0;
    loop {
        let now = controller_activity();
        if now.0 == 0 && now.1 == last.1 {
            quiet += 1;
            if quiet >= 4 {
                return Ok((start.elapsed(), now.1 - before));
            }
        } else {
            quiet = 0;
        }
        last = now;
        if start.elapsed() > timeout {
            bail!(
                "controllers still busy after {timeout:?}: queue depth {}",
                now.0
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Measures 3 and 5: bulk-load up to `objects` objects, then GET/LIST through REST and RSS.
pub(crate) async fn objects_phase(args: &Args, env: &Env, report: &mut Report) -> Result<()> {
    let store: Arc<dyn Store> = env.server.store.clone();
    // Templates: one VN and one subnet created through the API and READY, copied by the load.
    progress!("3/5 objects: creating the templates…");
    let vn = id_of(&env.api.post_path(VNS, &json!({"metadata": {"name": "template-vn", "labels": {"bench": "template"}}, "spec": {"ipv4_cidr": "10.0.0.0/16"}})).await?)?;
    env.api
        .wait_count(
            VNS,
            &state_filter("template", VN_READY),
            &state_filter("template", VN_FAILED),
            1,
            Duration::from_secs(60),
        )
        .await?;
    env.api
        .post_path(SUBNETS, &json!({"metadata": {"name": "template-sn", "labels": {"bench": "template"}}, "spec": {"virtual_network": vn, "ipv4_cidr": "10.0.1.0/24"}}))
        .await?;
    env.api
        .wait_count(
            SUBNETS,
            &state_filter("template", SN_READY),
            &state_filter("template", SN_FAILED),
            1,
            Duration::from_secs(60),
        )
        .await?;
    let vn_template = store.get(&vn).await?.context("template VN vanished")?;
    let sn_list = env
        .api
        .list_where(SUBNETS, &label_filter("template"), 1)
        .await?;
    let sn_id = sn_list["items"][0]["id"]
        .as_str()
        .context("template subnet not listed")?
        .to_string();
    let sn_template = store
        .get(&sn_id)
        .await?
        .context("template subnet vanished")?;

    let existing = store::count_all(&*store).await?;
    let to_load = (args.objects as i64 - existing).max(0) as usize;
    progress!(
        "3/5 objects: {existing} objects stored; bulk-loading {to_load} more through the store…"
    );
    let (_, reconciles_before) = controller_activity();
    let bulk = store::bulk_load(
        store.clone(),
        &vn_template,
        &sn_template,
        to_load,
        args.load_batch,
        args.load_writers,
    )
    .await?;
    let stored = store::count_all(&*store).await?;
    report.details.push(format!(
        "[objects] bulk-loaded {} VirtualNetworks + {} subnets in {:.2} s ({} obj/s, {} per transaction); {} objects stored",
        bulk.vns,
        bulk.subnets,
        bulk.elapsed.as_secs_f64(),
        thousands((bulk.vns + bulk.subnets) as f64 / bulk.elapsed.as_secs_f64().max(1e-9)),
        args.load_batch,
        thousands(stored as f64)
    ));
    report
        .details
        .push(format!("memory, after the bulk load: {}", Mem::now()));
    env.analyze(args, report, "after the bulk load").await?;
    progress!("3/5 objects: waiting for the controllers to go idle after the load…");
    let (settle, reconciles) =
        controllers_idle(Duration::from_secs(args.ready_timeout), reconciles_before).await?;
    report.details.push(format!(
        "[objects] controllers idle {:.2} s after the load ({} reconciles during load and settling: the settled copies need no writes)",
        settle.as_secs_f64(),
        thousands(reconciles as f64)
    ));
    // The copies must have been left alone (applied-spec hash matched).
    for id in bulk
        .sample_ids
        .iter()
        .step_by((bulk.sample_ids.len() / 20).max(1))
    {
        if let Some(r) = store.get(id).await?
            && r.version != 1
        {
            report.warnings.push(format!(
                "bulk subnet {id} was rewritten by a controller (version {})",
                r.version
            ));
            break;
        }
    }
    if bulk.sample_ids.is_empty() || bulk.groups == 0 {
        report.warnings.push(format!(
            "only {} objects bulk-loaded: GET/LIST run against what exists",
            bulk.subnets
        ));
    }
    report.details.push(format!(
        "memory, controllers idle at {} objects: {}",
        thousands(stored as f64),
        Mem::now()
    ));
    let get_ids = if bulk.sample_ids.is_empty() {
        vec![sn_id.clone()]
    } else {
        bulk.sample_ids.clone()
    };
    let groups = bulk.groups.max(1);

    let limit = Some(Duration::from_secs(args.phase_seconds));
    // GET: random bulk subnets.
    let get_ids = Arc::new(get_ids);
    let gets = |n: usize, pace: load::Pace| {
        let api = env.api.clone();
        let ids = get_ids.clone();
        load::drive(n, pace, limit, move |_| {
            let api = api.clone();
            let id = ids[rand::rng().random_range(0..ids.len())].clone();
            async move {
                let v = api.get_path(&format!("{SUBNETS}/{id}")).await?;
                if v["id"] != json!(id) {
                    bail!("GET {id} returned {v}");
                }
                Ok(())
            }
        })
    };
    // LIST: a random group of exactly GROUP_SIZE subnets out of all stored objects.
    let full_groups = bulk.groups;
    let lists = |n: usize, pace: load::Pace| {
        let api = env.api.clone();
        load::drive(n, pace, limit, move |_| {
            let api = api.clone();
            let g = rand::rng().random_range(0..groups);
            let filter = format!("this.metadata.labels[\"bench-group\"] == \"g{g}\"");
            async move {
                let v = api.list_where(SUBNETS, &filter, 100).await?;
                let size = v["items"].as_array().map_or(0, Vec::len);
                if full_groups > 0 && size != store::GROUP_SIZE {
                    bail!(
                        "LIST {filter} returned {size} items, expected {}",
                        store::GROUP_SIZE
                    );
                }
                Ok(())
            }
        })
    };
    let pace = args
        .read_rate
        .map_or(load::Pace::Clients(args.clients), load::Pace::Rate);
    let (many, one) = (load::Pace::Clients(args.clients), load::Pace::Clients(1));
    progress!(
        "3/5 objects: warm-up, {} GETs {}, then with 1 client…",
        args.gets,
        pace.describe()
    );
    let _ = gets(args.gets.min(500), many).await;
    let g = gets(args.gets, pace).await;
    let g1 = gets(args.gets.div_ceil(5), one).await;
    let after_gets = Mem::now();
    report
        .details
        .push(format!("memory, after the GETs: {after_gets}"));
    progress!(
        "3/5 objects: warm-up, {} LISTs {}, then with 1 client…",
        args.lists,
        pace.describe()
    );
    let _ = lists(args.lists.min(100), many).await;
    let l = lists(args.lists, pace).await;
    let l1 = lists(args.lists.div_ceil(5), one).await;
    for (what, run) in [
        ("GET", &g.errors),
        ("LIST", &l.errors),
        ("GET (1 client)", &g1.errors),
        ("LIST (1 client)", &l1.errors),
    ] {
        if *run > 0 {
            report
                .warnings
                .push(format!("{run} {what} requests failed"));
        }
    }
    if let Some(e) = g.first_error.as_ref().or(l.first_error.as_ref()) {
        report.warnings.push(format!("first GET/LIST error: {e}"));
    }
    let objects = thousands(stored as f64);
    push_latency(
        report,
        "3",
        &format!("GET p99 at {objects} objects ({})", pace.describe()),
        &g.latencies,
        5.0,
        g.rate(),
    );
    push_latency(
        report,
        "",
        &format!(
            "LIST p99, label filter → {} of {objects} ({})",
            store::GROUP_SIZE,
            pace.describe()
        ),
        &l.latencies,
        50.0,
        l.rate(),
    );
    report.details.push(format!(
        "[objects] GET,  {}: {}; {} req/s",
        pace.describe(),
        g.latencies.summary(),
        thousands(g.rate())
    ));
    report.details.push(format!(
        "[objects] LIST, {}: {}; {} req/s",
        pace.describe(),
        l.latencies.summary(),
        thousands(l.rate())
    ));
    report.details.push(format!(
        "[objects] GET,  1 client:  {}",
        g1.latencies.summary()
    ));
    report.details.push(format!(
        "[objects] LIST, 1 client:  {}",
        l1.latencies.summary()
    ));

    // 5. RSS with the objects stored, after they were read.
    let end = Mem::now();
    report
        .details
        .push(format!("memory, after the LISTs: {end}"));
    let rss = end.rss_mib();
    report.lines.push(Line {
        id: "5".into(),
        what: format!("server RSS at {objects} objects (VmRSS)"),
        shown: format!("{rss:.0} MiB"),
        value: rss,
        goal: Goal::AtMost(300.0),
        goal_text: "≤ 300 MiB".into(),
        note: format!(
            "whole process, after GET+LIST; {:.0} MiB before the LISTs",
            after_gets.rss_mib()
        ),
    });
    Ok(())
}

pub(crate) fn push_latency(
    report: &mut Report,
    id: &str,
    what: &str,
    lat: &Latencies,
    goal_ms: f64,
    rate: f64,
) {
    report.lines.push(Line {
        id: id.into(),
        what: what.into(),
        shown: format!("{:.2} ms", lat.pct(0.99)),
        value: lat.pct(0.99),
        goal: Goal::AtMost(goal_ms),
        goal_text: format!("≤ {goal_ms} ms"),
        note: format!("p50 {:.2} ms, {} req/s", lat.pct(0.5), thousands(rate)),
    });
}
