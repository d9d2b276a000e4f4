//! `osac-bench`: starts the osac-net server in-process (sim fabric) and measures what issue 2
//! asks for, printing one report line per measure with its goal, PASS/MISS and ratios:
//!
//! 1. the raw store insert rate (32 writers, one insert per transaction, a subnet-shaped row);
//! 2. the REST subnet create rate (32 keep-alive clients, each subnet in its own READY VN), its
//!    ratio to (1), and the create latency p50/p99;
//! 3. GET p99 and label-filtered LIST p99 with 100,000 objects stored (bulk-loaded through the
//!    store, measured through REST);
//! 4. the time for 10,000 subnets to reach READY;
//! 5. the process RSS (the server runs in this process) at 100,000 objects;
//! 6. (issue 3) 2,000 ComputeInstances, each with an ExternalIPAttachment: creates/s, time until
//!    every attachment is READY, end-to-end workloads/s and the controllers' phase durations;
//! 7. (issue 4) single-call creation: 1,000 VMs each created in one call with an automatic
//!    external IP in a fresh tenant's default networking, the time until every attachment is
//!    READY, then the time after deleting them until the pool's capacity is back.
//!
//! See docs/benchmarks.md.

/// Progress on stderr (the report goes to stdout).
macro_rules! progress {
    ($($t:tt)*) => { eprintln!("[osac-bench] {}", format!($($t)*)) };
}

mod api;
mod load;
mod metrics;
mod replicas;
mod report;
mod single_call;
mod store;
mod tls_compare;
mod workloads;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use osac_api::auth::AuthConfig;
use osac_controller::ControllerConfig;
use osac_server::{RunningServer, ServerConfig};
use osac_store::Store;
use rand::Rng;
use serde_json::json;

use crate::api::{Api, id_of};
use crate::load::Latencies;
use crate::report::{Goal, Line, Report, thousands};

/// Benchmark of the osac-net control plane (server started in-process, simulated fabric).
#[derive(Parser, Debug, Clone)]
#[command(name = "osac-bench", version)]
struct Args {
    /// Database: `sqlite://PATH` or `postgres://…` (use a fresh database). Default: SQLite in a
    /// temporary directory.
    #[arg(long, env = "OSAC_BENCH_DATABASE_URL")]
    database_url: Option<String>,
    /// Concurrent HTTP clients (and raw store writers).
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Raw store inserts to time (measure 1).
    #[arg(long, default_value_t = 10_000)]
    raw_inserts: usize,
    /// Open loop for measure 2: start this many subnet creates per second (whatever the server
    /// does) instead of `--clients` closed-loop clients, so create latency is measured below
    /// saturation.
    #[arg(long)]
    rate: Option<f64>,
    /// Open loop for measure 3: GETs and LISTs started per second instead of `--clients`.
    #[arg(long)]
    read_rate: Option<f64>,
    /// Subnets to create through REST, each in its own VirtualNetwork (measure 2).
    #[arg(long, default_value_t = 5_000)]
    creates: usize,
    /// Objects stored while GET/LIST and RSS are measured (measures 3 and 5).
    #[arg(long, default_value_t = 100_000)]
    objects: usize,
    /// GET requests to time at 100k objects.
    #[arg(long, default_value_t = 5_000)]
    gets: usize,
    /// Label-filtered LIST requests to time at 100k objects.
    #[arg(long, default_value_t = 1_000)]
    lists: usize,
    /// Subnets that must reach READY (measure 4).
    #[arg(long, default_value_t = 10_000)]
    ready: usize,
    /// Subnets per VirtualNetwork in the READY run (non-overlapping /24s of a /16).
    #[arg(long, default_value_t = 10)]
    ready_per_vn: usize,
    /// Seconds to wait for objects to become READY before giving up.
    #[arg(long, default_value_t = 300)]
    ready_timeout: u64,
    /// Objects per transaction in the bulk load.
    #[arg(long, default_value_t = 1_000)]
    load_batch: usize,
    /// Concurrent bulk-load transactions (SQLite serialises them anyway).
    #[arg(long, default_value_t = 4)]
    load_writers: usize,
    /// Reconcile workers of the in-process server (same default as `osac server`).
    #[arg(long, default_value_t = 8)]
    workers: usize,
    /// Seconds between full resyncs of every object (same default as `osac server`).
    #[arg(long, default_value_t = 60)]
    resync_seconds: u64,
    /// Skip measure 1 (the create ratio is then not judged).
    #[arg(long)]
    skip_raw: bool,
    /// Skip measure 2.
    #[arg(long)]
    skip_create: bool,
    /// Skip measure 4.
    #[arg(long)]
    skip_ready: bool,
    /// Skip the 100k-object load and measures 3 and 5.
    #[arg(long)]
    skip_objects: bool,
    /// Workloads (ComputeInstance + ExternalIP + ExternalIPAttachment) of measure 6.
    #[arg(long, default_value_t = 2_000)]
    workloads: usize,
    /// /21 subnets (one VN) the workloads' VMs are spread over (more if they do not fit).
    #[arg(long, default_value_t = 4)]
    workload_subnets: usize,
    /// Skip measure 6.
    #[arg(long)]
    skip_workloads: bool,
    /// VMs created in one call each (no attachments, auto external IP) in measure 7.
    #[arg(long, default_value_t = 1_000)]
    single_call: usize,
    /// Skip measure 7 (single-call creation, issue 4).
    #[arg(long)]
    skip_single_call: bool,
    /// Longest time one GET or LIST measurement may take (no request starts after it).
    #[arg(long, default_value_t = 60)]
    phase_seconds: u64,
    /// Refresh the database's planner statistics (`ANALYZE`) before each timed run. Off by
    /// default: the server does not do it itself, and the default run measures the server as it
    /// is. See docs/benchmarks.md.
    #[arg(long)]
    analyze: bool,
    /// Keep the temporary directory (SQLite database, token file) and print its path.
    #[arg(long)]
    keep: bool,
    /// Only compare TLS with plain HTTP (VirtualNetwork creates and GETs against a plain and a
    /// TLS server, SQLite): see docs/benchmarks.md.
    #[arg(long)]
    tls_compare: bool,
    /// VirtualNetwork creates per mode of --tls-compare.
    #[arg(long, default_value_t = 5_000)]
    tls_creates: usize,
    /// GETs per mode of --tls-compare.
    #[arg(long, default_value_t = 50_000)]
    tls_gets: usize,
    /// Only run the replica measure: this many `osac server --dev` processes on a fresh
    /// PostgreSQL database (from --database-url) each, `--workloads` workloads created
    /// round-robin through them, undisturbed and then with one replica killed half-way.
    #[arg(long)]
    replicas: Option<usize>,
    /// The `osac` binary the replicas run (default: next to this benchmark).
    #[arg(long)]
    osac_bin: Option<std::path::PathBuf>,
    /// Log filter for the server's logs (stderr), e.g. `info` or `osac_store=debug`.
    #[arg(long, env = "RUST_LOG", default_value = "warn")]
    log: String,
}

const VNS: &str = "/api/fulfillment/v1/virtual_networks";
const SUBNETS: &str = "/api/fulfillment/v1/subnets";
const VN_READY: &str = "VIRTUAL_NETWORK_STATE_READY";
const VN_FAILED: &str = "VIRTUAL_NETWORK_STATE_FAILED";
const SN_READY: &str = "SUBNET_STATE_READY";
const SN_FAILED: &str = "SUBNET_STATE_FAILED";

fn main() -> Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&args.log).unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(bench(args))?;
    println!("{}", report.render());
    Ok(())
}

/// A kB figure of /proc/self/status (VmRSS, VmHWM).
fn proc_status_kib(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Memory of this process, attributed as far as the allocators tell.
struct Mem {
    rss_kib: Option<u64>,
    /// Bytes SQLite has allocated (page caches of every connection, statements, schema).
    sqlite: i64,
    /// Bytes glibc malloc has handed out and not got back (includes `sqlite`).
    heap_used: usize,
    /// Bytes glibc malloc holds free inside its arenas (fragmentation, not returned to the OS).
    heap_free: usize,
}

impl Mem {
    fn now() -> Self {
        // SAFETY: both read process-wide counters and take no pointers.
        let sqlite = unsafe { libsqlite3_sys::sqlite3_memory_used() };
        let (heap_used, heap_free) = heap();
        Self {
            rss_kib: proc_status_kib("VmRSS"),
            sqlite,
            heap_used,
            heap_free,
        }
    }

    fn rss_mib(&self) -> f64 {
        mib(self.rss_kib)
    }
}

impl std::fmt::Display for Mem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = |b: f64| b / 1048576.0;
        write!(
            f,
            "RSS {:.0} MiB; malloc in use {:.0} MiB (of which SQLite {:.0} MiB), malloc free but held {:.0} MiB",
            self.rss_mib(),
            m(self.heap_used as f64),
            m(self.sqlite as f64),
            m(self.heap_free as f64)
        )
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn heap() -> (usize, usize) {
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    let mi = unsafe { libc::mallinfo2() };
    (mi.uordblks + mi.hblkhd, mi.fordblks)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn heap() -> (usize, usize) {
    (0, 0)
}

/// The 1, 5 and 15 minute load averages.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|t| t.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn mib(kib: Option<u64>) -> f64 {
    kib.map_or(f64::NAN, |k| k as f64 / 1024.0)
}

/// The server's URL with any password hidden.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

struct Env {
    /// The tenant's client.
    api: Api,
    /// The admin's client (private API).
    admin: Api,
    server: RunningServer,
    database_url: String,
    /// The bench tenant's name (measure 7 makes its own tenant from it).
    tenant: String,
}

impl Env {
    /// With `--analyze`: `ANALYZE` on a connection of our own, so the planner knows the
    /// current table sizes before a timed run.
    async fn analyze(&self, args: &Args, report: &mut Report, when: &str) -> Result<()> {
        if !args.analyze {
            return Ok(());
        }
        use sqlx::Connection;
        let t = Instant::now();
        if self.database_url.starts_with("postgres") {
            let mut c = sqlx::PgConnection::connect(&self.database_url).await?;
            sqlx::query("ANALYZE").execute(&mut c).await?;
            c.close().await?;
        } else {
            let opts: sqlx::sqlite::SqliteConnectOptions = self.database_url.parse()?;
            let mut c =
                sqlx::SqliteConnection::connect_with(&opts.busy_timeout(Duration::from_secs(30)))
                    .await?;
            sqlx::query("ANALYZE").execute(&mut c).await?;
            c.close().await?;
        }
        report.details.push(format!(
            "--analyze: ANALYZE {when} took {:.2} s",
            t.elapsed().as_secs_f64()
        ));
        Ok(())
    }
}

async fn bench(args: Args) -> Result<Report> {
    let mut report = Report::default();
    if args.tls_compare {
        let settings = tls_compare::Settings {
            clients: args.clients,
            creates: args.tls_creates,
            gets: args.tls_gets,
            workers: args.workers,
            phase: Duration::from_secs(args.phase_seconds),
        };
        tls_compare::run(&settings, &mut report).await?;
        return Ok(report);
    }
    if let Some(replicas) = args.replicas {
        let database_url = args
            .database_url
            .clone()
            .filter(|u| u.starts_with("postgres"))
            .context("--replicas needs --database-url postgres://…")?;
        let osac = match &args.osac_bin {
            Some(p) => p.clone(),
            None => std::env::current_exe()?.with_file_name("osac"),
        };
        let settings = replicas::Settings {
            osac,
            database_url,
            replicas,
            workloads: args.workloads,
            clients: args.clients,
        };
        replicas::run(&settings, &mut report).await?;
        return Ok(report);
    }
    let tmp = tempfile::Builder::new().prefix("osac-bench-").tempdir()?;
    let database_url = args
        .database_url
        .clone()
        .unwrap_or_else(|| format!("sqlite://{}", tmp.path().join("osac.db").display()));
    let sqlite = !database_url.starts_with("postgres");
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let rss_start = proc_status_kib("VmRSS");
    report.header = vec![
        (
            "database".into(),
            format!(
                "{} — {}",
                if sqlite { "SQLite" } else { "PostgreSQL" },
                redact(&database_url)
            ),
        ),
        (
            "machine".into(),
            format!(
                "{cpus} CPUs visible; server, controllers and clients share this one process ({} build)",
                if cfg!(debug_assertions) {
                    "DEBUG: numbers not meaningful"
                } else {
                    "release"
                }
            ),
        ),
        (
            "clients".into(),
            format!(
                "{} concurrent HTTP/1.1 keep-alive clients (reqwest); {} raw store writers",
                args.clients, args.clients
            ),
        ),
        (
            "server".into(),
            format!(
                "osac-api in-process, sim fabric + sim k8s, {} reconcile workers, resync {} s",
                args.workers, args.resync_seconds
            ),
        ),
    ];
    let load_start = loadavg();
    let tenant = format!("bench-{:06x}", rand::rng().random_range(0..0xff_ffff));

    // 1. Raw store inserts, on the same database, before the server starts (so the controllers
    //    neither see nor compete with them); removed afterwards.
    let mut raw_rate = None;
    if !args.skip_raw {
        progress!(
            "1/5 raw store inserts: {} with {} writers…",
            args.raw_inserts,
            args.clients
        );
        let store = osac_store::open(&database_url)
            .await
            .context("opening the store")?;
        let run = store::raw_inserts(
            store.clone(),
            &format!("{tenant}-raw"),
            args.raw_inserts,
            args.clients,
        )
        .await;
        if let Some(e) = &run.first_error {
            bail!("raw inserts failed ({} errors): {e}", run.errors);
        }
        let rate = run.rate();
        raw_rate = Some(rate);
        report.lines.push(Line {
            id: "1".into(),
            what: format!("raw store insert ({} writers, 1 insert/tx)", args.clients),
            shown: format!("{} obj/s", thousands(rate)),
            value: rate,
            goal: Goal::None,
            goal_text: "(reference)".into(),
            note: format!(
                "{} inserts in {:.2} s",
                thousands(run.results.len() as f64),
                run.elapsed.as_secs_f64()
            ),
        });
        report.details.push(format!(
            "raw insert latency (incl. waiting for the write lock): {}",
            run.latencies.summary()
        ));
        let ids: Vec<String> = run.ok().collect();
        store::remove_all(&*store, &ids, 1000)
            .await
            .context("removing the raw rows")?;
        drop(store);
    }

    // The server.
    progress!("starting the server on {}…", redact(&database_url));
    let tokens = tmp.path().join("tokens.json");
    let admin_token = osac_api::auth::ensure_admin_token(&tokens)?;
    let server = osac_server::start(ServerConfig {
        listen: "127.0.0.1:0".parse()?,
        database_url: database_url.clone(),
        auth: AuthConfig::TokenFile(tokens.clone()),
        managers_dir: None,
        controller: ControllerConfig {
            workers: args.workers,
            resync_interval: Duration::from_secs(args.resync_seconds),
            ..ControllerConfig::default()
        },
        ip_discovery_timeout: ServerConfig::DEFAULT_IP_DISCOVERY_TIMEOUT,
        fabric: Default::default(),
        sim_latency: Default::default(),
        // Benchmarks measure the control plane, not the provider's limits.
        limits: osac_server::LimitsConfig {
            default_quotas: osac_model::quota::QuotaLimits::unlimited(),
        },
        transport: Default::default(),
    })
    .await
    .context("starting the server")?;
    let rss_server = proc_status_kib("VmRSS");
    report
        .details
        .push(format!("memory, server started: {}", Mem::now()));
    osac_server::dev::bootstrap(&server.service)
        .await
        .map_err(|e| anyhow::anyhow!("dev bootstrap: {e:?}"))?;
    let admin = Api::new(&server.url(), &admin_token, args.clients * 2)?;
    admin
        .post(
            "/api/private/v1/tenants",
            &json!({"metadata": {"name": tenant}}),
        )
        .await?;
    let token = admin
        .post(
            "/api/private/v1/tokens",
            &json!({"tenant": tenant, "role": "tenant-admin"}),
        )
        .await?;
    let token = token["token"]
        .as_str()
        .context("no token minted")?
        .to_string();
    // The default NetworkClass and the tenant must be READY before VirtualNetworks can be made.
    admin.wait_class_and_tenant_ready(&tenant).await?;
    let env = Env {
        api: admin.with_token(&token),
        admin,
        server,
        database_url: database_url.clone(),
        tenant: tenant.clone(),
    };
    report.header.push(("tenant".into(), tenant.clone()));

    let result = phases(&args, &env, raw_rate, &mut report).await;
    let rss_end = proc_status_kib("VmRSS");
    let hwm = proc_status_kib("VmHWM");
    progress!("stopping the server…");
    env.server.shutdown().await;
    result?;
    report.header.push((
        "load".into(),
        format!(
            "1/5/15-min load average {load_start} at the start, {} at the end (other work on the machine skews the figures)",
            loadavg()
        ),
    ));
    report.details.push(format!(
        "process RSS: {:.0} MiB at start, {:.0} MiB with the server started, {:.0} MiB at the end; peak (VmHWM) {:.0} MiB",
        mib(rss_start),
        mib(rss_server),
        mib(rss_end),
        mib(hwm)
    ));
    if sqlite && let Ok(m) = std::fs::metadata(tmp.path().join("osac.db")) {
        report.details.push(format!(
            "SQLite file: {:.0} MiB (plus WAL)",
            m.len() as f64 / 1048576.0
        ));
    }
    if args.keep {
        let kept = tmp.keep();
        report.details.push(format!("kept {}", kept.display()));
    }
    Ok(report)
}

async fn phases(args: &Args, env: &Env, raw_rate: Option<f64>, report: &mut Report) -> Result<()> {
    // A failed run is reported (MISS) and the next one still runs.
    if !args.skip_create {
        if let Err(e) = create_phase(args, env, raw_rate, report).await {
            failed(report, "2", "subnet create via REST", &e);
        }
        report
            .details
            .push(format!("memory, after the create run: {}", Mem::now()));
    }
    if !args.skip_ready {
        if let Err(e) = ready_phase(args, env, report).await {
            failed(
                report,
                "4",
                &format!("{} subnets to READY", thousands(args.ready as f64)),
                &e,
            );
        }
        report
            .details
            .push(format!("memory, after the READY run: {}", Mem::now()));
    }
    if !args.skip_workloads {
        if let Err(e) = workloads::workloads_phase(args, env, report).await {
            failed(
                report,
                "6",
                &format!(
                    "{} VMs with an ExternalIPAttachment",
                    thousands(args.workloads as f64)
                ),
                &e,
            );
        }
        report
            .details
            .push(format!("memory, after the workload run: {}", Mem::now()));
    }
    if !args.skip_single_call {
        if let Err(e) = single_call::single_call_phase(args, env, report).await {
            failed(
                report,
                "7",
                &format!(
                    "{} single-call VM creates (issue 4)",
                    thousands(args.single_call as f64)
                ),
                &e,
            );
        }
        report
            .details
            .push(format!("memory, after the single-call run: {}", Mem::now()));
    }
    if !args.skip_objects
        && let Err(e) = objects_phase(args, env, report).await
    {
        failed(report, "3", "GET/LIST at 100k objects", &e);
    }
    Ok(())
}

/// A run that could not finish: a MISS line and the error among the warnings.
fn failed(report: &mut Report, id: &str, what: &str, e: &anyhow::Error) {
    progress!("run {id} failed: {e:#}");
    report.lines.push(Line {
        id: id.into(),
        what: what.into(),
        shown: "did not finish".into(),
        value: f64::INFINITY,
        goal: Goal::AtMost(0.0),
        goal_text: "see warnings".into(),
        note: String::new(),
    });
    report
        .warnings
        .push(format!("run {id} ({what}) failed: {e:#}"));
}

fn label_filter(value: &str) -> String {
    format!("this.metadata.labels[\"bench\"] == \"{value}\"")
}

fn state_filter(value: &str, state: &str) -> String {
    format!(
        "{} && this.status.state == \"{state}\"",
        label_filter(value)
    )
}

/// Creates `n` VirtualNetworks (10.0.0.0/16) labelled `bench=label` and waits until all are
/// READY. Returns their ids in order.
async fn create_vns(
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
        async move { id_of(&api.post(VNS, &body).await?) }
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
async fn create_phase(
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
        async move { id_of(&api.post(SUBNETS, &body).await?) }
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
async fn ready_phase(args: &Args, env: &Env, report: &mut Report) -> Result<()> {
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
        async move { id_of(&api.post(SUBNETS, &body).await?) }
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

/// The controllers' queue depth and reconcile count, read from the process's Prometheus
/// registry (the server is in-process).
fn controller_activity() -> (i64, u64) {
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
async fn controllers_idle(timeout: Duration, before: u64) -> Result<(Duration, u64)> {
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
async fn objects_phase(args: &Args, env: &Env, report: &mut Report) -> Result<()> {
    let store: Arc<dyn Store> = env.server.store.clone();
    // Templates: one VN and one subnet created through the API and READY, copied by the load.
    progress!("3/5 objects: creating the templates…");
    let vn = id_of(&env.api.post(VNS, &json!({"metadata": {"name": "template-vn", "labels": {"bench": "template"}}, "spec": {"ipv4_cidr": "10.0.0.0/16"}})).await?)?;
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
        .post(SUBNETS, &json!({"metadata": {"name": "template-sn", "labels": {"bench": "template"}}, "spec": {"virtual_network": vn, "ipv4_cidr": "10.0.1.0/24"}}))
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
    let sn_list = env.api.list(SUBNETS, &label_filter("template"), 1).await?;
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
                let v = api.get(&format!("{SUBNETS}/{id}")).await?;
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
                let v = api.list(SUBNETS, &filter, 100).await?;
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

fn push_latency(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords_only() {
        assert_eq!(
            redact("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(
            redact("postgres://postgres@127.0.0.1/db"),
            "postgres://postgres@127.0.0.1/db"
        );
        assert_eq!(redact("sqlite:///tmp/x.db"), "sqlite:///tmp/x.db");
    }

    #[test]
    fn reads_proc_status() {
        assert!(proc_status_kib("VmRSS").is_some_and(|k| k > 0));
        assert_eq!(proc_status_kib("NoSuchKey"), None);
    }

    #[test]
    fn args_parse_with_defaults() {
        let a = Args::try_parse_from(["osac-bench", "--skip-ready", "--creates", "10"]).unwrap();
        assert_eq!(
            (a.clients, a.creates, a.objects, a.ready),
            (32, 10, 100_000, 10_000)
        );
        assert!(a.skip_ready && !a.skip_raw);
        assert!(a.workloads == 2_000 && !a.skip_workloads);
        assert!(a.single_call == 1_000 && !a.skip_single_call);
        let a = Args::try_parse_from(["osac-bench", "--skip-single-call", "--single-call", "50"])
            .unwrap();
        assert!(a.single_call == 50 && a.skip_single_call);
    }
}
