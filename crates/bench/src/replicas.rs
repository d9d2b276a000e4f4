//! `--replicas N`: N `osac server --dev` processes on one fresh PostgreSQL database; workloads
//! (ComputeInstance + ExternalIPAttachment) created round-robin through all of them; the time
//! until every attachment is READY, once undisturbed and once with one replica killed
//! (`kill -9`) half-way through the creates.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use sqlx::Connection;

use osac_client::{Method, TlsOptions};

use crate::api::{Api, Polls, client, id_of};
use crate::load;
use crate::report::{Goal, Line, Report, thousands};

const PRIV: &str = "/api/private/v1";
const PUB: &str = "/api/fulfillment/v1";

/// What the replica run needs.
pub struct Settings {
    /// The `osac` binary the replicas run.
    pub osac: PathBuf,
    /// A PostgreSQL URL whose server may get a new database per run.
    pub database_url: String,
    pub replicas: usize,
    pub workloads: usize,
    pub clients: usize,
}

/// One `osac server --dev` process.
struct Replica {
    child: Child,
    url: String,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_replica(osac: &Path, db: &str, dir: &Path) -> Result<Replica> {
    std::fs::create_dir_all(dir)?;
    let log = std::fs::File::create(dir.join("server.log"))?;
    let mut child = Command::new(osac)
        .args([
            "server",
            "--dev",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            db,
        ])
        // The run measures throughput, not the tenant limits.
        .args([
            "--default-quota",
            "external_ips=unlimited,compute_instances=unlimited",
        ])
        // Every benchmark client connects from 127.0.0.1.
        .args(["--max-connections-per-address", "4096"])
        .arg("--data-dir")
        .arg(dir)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot run {}", osac.display()))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let url = loop {
        let Some(Ok(line)) = lines.next() else {
            bail!("replica exited; see {}", dir.join("server.log").display());
        };
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
        }
    };
    std::thread::spawn(move || for _ in lines.by_ref() {});
    Ok(Replica { child, url })
}

fn admin_token(dir: &Path) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(dir.join("dev-credentials.json"))
            && let Ok(v) = serde_json::from_str::<Value>(&text)
            && let Some(t) = v["admin_token"].as_str()
        {
            return Ok(t.to_string());
        }
        if Instant::now() > deadline {
            bail!("no dev credentials in {}", dir.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `base/name` with the database name replaced.
fn with_database(base: &str, name: &str) -> String {
    let path_start = base.find("://").map_or(0, |i| i + 3);
    match base[path_start..].rfind('/') {
        Some(i) => format!("{}/{name}", &base[..path_start + i]),
        None => format!("{base}/{name}"),
    }
}

/// Both runs, reported side by side.
pub async fn run(s: &Settings, report: &mut Report) -> Result<()> {
    let calm = one_run(s, false).await?;
    let killed = one_run(s, true).await?;
    let n = thousands(s.workloads as f64);
    report.lines.push(Line {
        id: "R".into(),
        what: format!("{n} workloads via {} replicas (PG), all READY", s.replicas),
        shown: format!("{:.1} s", calm.as_secs_f64()),
        value: calm.as_secs_f64(),
        goal: Goal::None,
        goal_text: "(reference)".into(),
        note: format!(
            "{} workloads/s",
            thousands(s.workloads as f64 / calm.as_secs_f64())
        ),
    });
    report.lines.push(Line {
        id: "".into(),
        what: "  same, one replica kill -9'd half-way".into(),
        shown: format!("{:.1} s", killed.as_secs_f64()),
        value: killed.as_secs_f64() / calm.as_secs_f64(),
        goal: Goal::None,
        goal_text: "(reference)".into(),
        note: format!(
            "{:.2}× the undisturbed run; +{:.1} s",
            killed.as_secs_f64() / calm.as_secs_f64(),
            killed.as_secs_f64() - calm.as_secs_f64()
        ),
    });
    Ok(())
}

/// One run on a fresh database: time from the first create until every attachment is READY.
async fn one_run(s: &Settings, kill: bool) -> Result<Duration> {
    let name = format!("osac_bench_r_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(&s.database_url).await?;
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await?;
    let db = with_database(&s.database_url, &name);
    let outcome = timed_run(s, &db, kill).await;
    let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&mut conn)
        .await;
    outcome
}

async fn timed_run(s: &Settings, db: &str, kill: bool) -> Result<Duration> {
    let tmp = tempfile::Builder::new().prefix("osac-bench-r-").tempdir()?;
    let mut replicas = Vec::new();
    for i in 0..s.replicas.max(1) {
        replicas.push(Some(start_replica(
            &s.osac,
            db,
            &tmp.path().join(format!("r{i}")),
        )?));
    }
    let token = admin_token(&tmp.path().join("r0"))?;
    let urls: Vec<String> = replicas.iter().flatten().map(|r| r.url.clone()).collect();
    let admin = client(&urls[0], &token, s.clients, TlsOptions::default())?;
    // Tenant, VN, subnets, security group, pool-backed ExternalIPs (untimed).
    admin.wait_class_and_tenant_ready("").await.ok();
    admin
        .post_path(
            &format!("{PRIV}/tenants"),
            &json!({"metadata": {"name": "bench"}}),
        )
        .await?;
    admin.wait_class_and_tenant_ready("bench").await?;
    let minted = admin
        .post_path(
            &format!("{PRIV}/tokens"),
            &json!({"tenant": "bench", "role": "tenant-admin"}),
        )
        .await?;
    let tenant_token = minted["token"].as_str().context("no token")?.to_string();
    let apis: Vec<Api> = urls
        .iter()
        .map(|u| client(u, &tenant_token, s.clients, TlsOptions::default()))
        .collect::<Result<_>>()?;
    let t = apis[0].clone();
    let pool = crate::workloads::pool_cidr(s.workloads);
    admin
        .post_path(&format!("{PRIV}/external_ip_pools"), &json!({"metadata": {"name": "bench-pool"}, "spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": [pool]}}))
        .await?;
    let vn = id_of(
        &t.post_path(
            &format!("{PUB}/virtual_networks"),
            &json!({"metadata": {"name": "bench"}, "spec": {"ipv4_cidr": "10.0.0.0/16"}}),
        )
        .await?,
    )?;
    let k = crate::workloads::subnet_count(s.workloads, 4);
    let mut subnets = Vec::new();
    for i in 0..k {
        let body = json!({"metadata": {"name": format!("bench-{i}")}, "spec": {"virtual_network": vn, "ipv4_cidr": format!("10.0.{}.0/21", i * 8)}});
        subnets.push(id_of(
            &t.post_path(&format!("{PUB}/subnets"), &body).await?,
        )?);
    }
    let ready = |what: &str, state: &str| {
        (
            format!("this.status.state == \"{what}_STATE_{state}\""),
            format!("this.status.state == \"{what}_STATE_FAILED\""),
        )
    };
    let (ok, bad) = ready("SUBNET", "READY");
    t.wait_count(
        &format!("{PUB}/subnets"),
        &ok,
        &bad,
        k as i64 + 2,
        Duration::from_secs(120),
    )
    .await?;
    let apis = Arc::new(apis);
    let eip_apis = apis.clone();
    let eips = load::run(s.workloads, s.clients, move |i| {
        let api = eip_apis[i % eip_apis.len()].clone();
        async move {
            let body =
                json!({"metadata": {"name": format!("eip-{i}")}, "spec": {"pool": "bench-pool"}});
            id_of(&api.post_path(&format!("{PUB}/external_ips"), &body).await?)
        }
    })
    .await;
    if let Some(e) = &eips.first_error {
        eprintln!(
            "[replicas] {} ExternalIP creates failed, e.g. {e}",
            eips.errors
        );
    }
    let eips: Arc<Vec<String>> = Arc::new(eips.ok().collect());
    let (ok, bad) = ready("EXTERNAL_IP", "ALLOCATED");
    t.wait_count(
        &format!("{PUB}/external_ips"),
        &ok,
        &bad,
        eips.len() as i64,
        Duration::from_secs(300),
    )
    .await?;

    // The timed run: VM + attachment per workload, round-robin over the replicas.
    let n = eips.len();
    let subnets = Arc::new(subnets);
    let start = Instant::now();
    let first_half = {
        let (apis, eips, subnets) = (apis.clone(), eips.clone(), subnets.clone());
        load::run(n / 2, s.clients, move |i| {
            let api = apis[i % apis.len()].clone();
            workload(api, eips.clone(), subnets.clone(), i)
        })
    }
    .await;
    let mut alive: Vec<usize> = (0..apis.len()).collect();
    if kill && apis.len() > 1 {
        // The replica that took the first creates of this half goes.
        let victim = 0;
        if let Some(r) = replicas[victim].take() {
            let _ = Command::new("kill")
                .args(["-9", &r.child.id().to_string()])
                .status();
            drop(r);
        }
        alive.retain(|i| *i != victim);
    }
    let alive = Arc::new(alive);
    let second_half = {
        let (apis, eips, subnets, alive) =
            (apis.clone(), eips.clone(), subnets.clone(), alive.clone());
        load::run(n - n / 2, s.clients, move |i| {
            let api = apis[alive[i % alive.len()]].clone();
            workload(api, eips.clone(), subnets.clone(), n / 2 + i)
        })
    }
    .await;
    let created =
        first_half.results.iter().flatten().count() + second_half.results.iter().flatten().count();
    let watcher = &apis[alive[0]];
    let (ok, bad) = ready("EXTERNAL_IP_ATTACHMENT", "READY");
    watcher
        .wait_count(
            &format!("{PUB}/external_ip_attachments"),
            &ok,
            &bad,
            created as i64,
            Duration::from_secs(600),
        )
        .await?;
    let took = start.elapsed();
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for i in alive.iter() {
        // On the API port the metrics need a provider-admin token.
        let on = Api::new(&urls[*i], &token)?;
        let reply = on.send(Method::GET, on.url_of("/metrics")?, None).await?;
        if !reply.status.is_success() {
            bail!("GET {}/metrics: HTTP {}", urls[*i], reply.status);
        }
        add_buckets(&mut buckets, &reply.text);
    }
    if let Some((count, p99, within)) = summarise(&buckets) {
        eprintln!(
            "[replicas] change notifications between replicas: {count}, p99 ≤ {:.1} ms, {:.2} % within 100 ms",
            p99 * 1e3,
            within * 100.0
        );
    }
    eprintln!(
        "[replicas] {} replicas{}: {created} workloads READY in {:.1} s",
        apis.len(),
        if kill { ", one killed half-way" } else { "" },
        took.as_secs_f64()
    );
    Ok(took)
}

/// Workload `i` (a VM and an ExternalIPAttachment) through `api`.
async fn workload(
    api: Api,
    eips: Arc<Vec<String>>,
    subnets: Arc<Vec<String>>,
    i: usize,
) -> Result<()> {
    let vm = json!({"metadata": {"name": format!("vm-{i}")}, "spec": {"template": "small", "compute_network_attachments": [{"subnet": subnets[i % subnets.len()]}]}});
    let vm = id_of(
        &api.post_path(&format!("{PUB}/compute_instances"), &vm)
            .await?,
    )?;
    let att = json!({"metadata": {"name": format!("att-{i}")}, "spec": {"external_ip": eips[i], "compute_instance": vm}});
    id_of(
        &api.post_path(&format!("{PUB}/external_ip_attachments"), &att)
            .await?,
    )?;
    Ok(())
}

/// Adds the cumulative buckets of `osac_change_feed_delay_seconds` in a `/metrics` text.
fn add_buckets(into: &mut Vec<(f64, f64)>, text: &str) {
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("osac_change_feed_delay_seconds_bucket{le=\"") else {
            continue;
        };
        let Some((le, count)) = rest.split_once("\"} ") else {
            continue;
        };
        let le = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().unwrap_or(f64::NAN)
        };
        let count: f64 = count.trim().parse().unwrap_or(0.0);
        match into.iter_mut().find(|(b, _)| *b == le) {
            Some(slot) => slot.1 += count,
            None => into.push((le, count)),
        }
    }
    into.sort_by(|a, b| a.0.total_cmp(&b.0));
}

/// (notifications, upper bound of the p99 bucket, fraction within 100 ms).
fn summarise(buckets: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let p99 = buckets.iter().find(|(_, c)| *c >= 0.99 * total)?.0;
    let within = buckets
        .iter()
        .filter(|(le, _)| *le <= 0.1)
        .map(|(_, c)| *c)
        .fold(0.0, f64::max);
    Some((total, p99, within / total))
}
