//! `osac-bench`: starts the osac-net server in-process (sim fabric) and measures the control
//! plane's throughput goals (listed with their numbers in docs/benchmarks.md), printing one
//! report line per measure with its goal, PASS/MISS and ratios:
//!
//! 1. the raw store insert rate (32 writers, one insert per transaction, a subnet-shaped row);
//! 2. the REST subnet create rate (32 keep-alive clients, each subnet in its own READY VN), its
//!    ratio to (1), and the create latency p50/p99;
//! 3. GET p99 and label-filtered LIST p99 with 100,000 objects stored (bulk-loaded through the
//!    store, measured through REST);
//! 4. the time for 10,000 subnets to reach READY;
//! 5. the process RSS (the server runs in this process) at 100,000 objects;
//! 6. 2,000 ComputeInstances, each with an ExternalIPAttachment: creates/s, time until
//!    every attachment is READY, end-to-end workloads/s and the controllers' phase durations;
//! 7. single-call creation: 1,000 VMs each created in one call with an automatic
//!    external IP in a fresh tenant's default networking, the time until every attachment is
//!    READY, then the time after deleting them until the pool's capacity is back.
//!
//! Separate runs: `--tls-compare`, `--replicas`, and `--ovn` (the `ovn` fabric driver at 5,000
//! ports against a bare northbound ovsdb-server).
//!
//! See docs/benchmarks.md.

/// Progress on stderr (the report goes to stdout).
macro_rules! progress {
    ($($t:tt)*) => { eprintln!("[osac-bench] {}", format!($($t)*)) };
}

/// The allocator of the `osac` binary, so that the in-process server measures like it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod api;
mod console;
mod explain;
mod load;
mod metrics;
mod objects;
mod ovn;
mod process_stats;
mod replicas;
mod report;
mod single_call;
mod store;
mod subnets;
mod tls_compare;
mod workloads;

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use osac_api::auth::AuthConfig;
use osac_controller::ControllerConfig;
use osac_server::{RunningServer, ServerConfig};
use rand::Rng;
use serde_json::json;

use osac_client::TlsOptions;

use crate::api::{Api, Polls};
use crate::objects::objects_phase;
use crate::process_stats::{Mem, loadavg, mib, proc_status_kib};
use crate::report::{Goal, Line, Report, thousands};
use crate::subnets::{create_phase, ready_phase};

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
    #[arg(long, default_value_t = 64)]
    workers: usize,
    /// Seconds between full resyncs of every object (same default as `osac server`).
    #[arg(long, default_value_t = 300)]
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
    /// Skip measure 7 (single-call creation).
    #[arg(long)]
    skip_single_call: bool,
    /// Turn the store's metering off (no usage intervals, no outbox rows): measure M compares
    /// runs of the same binary with and without it (docs/benchmarks.md).
    #[arg(long)]
    no_metering: bool,
    /// Also time the web console's first paint of measure 7's tenant (1,000 VMs with their
    /// ExternalIPs) and of measure 8's (1,000 VMs, 200 security groups) (needs Chromium and
    /// chromedriver: Debian packages chromium, chromium-driver).
    #[arg(long)]
    console_first_paint: bool,
    /// Run measure 8, the reachability explainer (a tenant of --explain-vms VMs and
    /// --explain-groups security groups, then --explain-requests explain calls).
    #[arg(long)]
    explain: bool,
    /// VMs of the explainer's tenant (measure 8).
    #[arg(long, default_value_t = 1_000)]
    explain_vms: usize,
    /// Security groups of the explainer's tenant (measure 8).
    #[arg(long, default_value_t = 200)]
    explain_groups: usize,
    /// Explain requests timed (measure 8).
    #[arg(long, default_value_t = 2_000)]
    explain_requests: usize,
    /// Concurrent clients of the timed explain requests (measure 8): a latency measure, so
    /// fewer than --clients (which still create the tenant).
    #[arg(long, default_value_t = 4)]
    explain_clients: usize,
    /// Longest time one GET or LIST measurement may take (no request starts after it).
    #[arg(long, default_value_t = 60)]
    phase_seconds: u64,
    /// Refresh the database's planner statistics (`ANALYZE`) before each timed run. Off by
    /// default: the server keeps its statistics itself, and the default run measures the
    /// server as it is. See docs/benchmarks.md.
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
    /// Only run the `ovn` driver measure: `--ovn-ports` network attachments, security group
    /// changes, ExternalIPAttachments and full resyncs against a bare northbound ovsdb-server
    /// started here (skipped when the OVN tools are missing): see docs/benchmarks.md.
    #[arg(long)]
    ovn: bool,
    /// Network attachments of --ovn.
    #[arg(long, default_value_t = 5_000)]
    ovn_ports: usize,
    /// With --ovn: run again with every operation reading every row of ours, to compare.
    #[arg(long)]
    ovn_full_reads: bool,
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
    if args.ovn {
        let settings = ovn::Settings {
            ports: args.ovn_ports,
            full_reads: args.ovn_full_reads,
        };
        ovn::run(&settings, &mut report).await?;
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
                "osac-server in-process, sim fabric + sim k8s, {} reconcile workers, resync {} s, metering {}",
                args.workers,
                args.resync_seconds,
                if args.no_metering { "off" } else { "on" }
            ),
        ),
    ];
    if args.no_metering {
        osac_store::metering::disable_for_benchmark();
    }
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
            ..Default::default()
        },
        // Every benchmark client connects from 127.0.0.1: the one address may use every slot.
        transport: osac_api::TransportConfig {
            max_connections_per_address: osac_api::listen::DEFAULT_MAX_CONNECTIONS,
            ..Default::default()
        },
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
    let admin = api::client(
        &server.url(),
        &admin_token,
        args.clients * 2,
        TlsOptions::default(),
    )?;
    admin
        .post_path(
            "/api/private/v1/tenants",
            &json!({"metadata": {"name": tenant}}),
        )
        .await?;
    let token = admin
        .post_path(
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
        let result = create_phase(args, env, raw_rate, report).await;
        after_run(report, result, "2", "subnet create via REST", "create");
    }
    if !args.skip_ready {
        let result = ready_phase(args, env, report).await;
        let what = format!("{} subnets to READY", thousands(args.ready as f64));
        after_run(report, result, "4", &what, "READY");
    }
    if !args.skip_workloads {
        let result = workloads::workloads_phase(args, env, report).await;
        let what = format!(
            "{} VMs with an ExternalIPAttachment",
            thousands(args.workloads as f64)
        );
        after_run(report, result, "6", &what, "workload");
    }
    if !args.skip_single_call {
        let result = single_call::single_call_phase(args, env, report).await;
        let what = format!(
            "{} single-call VM creates",
            thousands(args.single_call as f64)
        );
        after_run(report, result, "7", &what, "single-call");
    }
    if args.explain
        && let Err(e) = explain::explain_phase(args, env, report).await
    {
        failed(report, "8", "reachability explain", &e);
    }
    if !args.skip_objects
        && let Err(e) = objects_phase(args, env, report).await
    {
        failed(report, "3", "GET/LIST at 100k objects", &e);
    }
    Ok(())
}

/// After run `id` (`what` it measures; `run` names it in the memory detail): its failure if
/// it failed (see [`failed`]), then the process's memory.
fn after_run(report: &mut Report, result: Result<()>, id: &str, what: &str, run: &str) {
    if let Err(e) = result {
        failed(report, id, what, &e);
    }
    report
        .details
        .push(format!("memory, after the {run} run: {}", Mem::now()));
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
