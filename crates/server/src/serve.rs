//! `osac server`: runs the control plane (REST + gRPC + controllers).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::dataplane::FabricChoice;
use crate::{ServerConfig, dev};
use anyhow::{Context, bail};
use osac_api::TransportConfig;
use osac_api::auth::{AuthConfig, JwtConfig};
use osac_api::tls::TlsConfig;
use osac_controller::ControllerConfig;

/// Flags of `osac server`.
#[derive(Debug, clap::Args)]
pub struct ServerArgs {
    /// Boot a ready environment: SQLite, simulated fabric and k8s managers, a default
    /// NetworkClass, an ExternalIPPool, a bare-metal HostType and an admin token.
    #[arg(long)]
    pub dev: bool,
    /// Where the embedded database, tokens and dev credentials live.
    #[arg(long, env = "OSAC_DATA_DIR", default_value = ".osac-dev")]
    pub data_dir: PathBuf,
    /// Address to listen on (REST and gRPC share it).
    #[arg(long, env = "OSAC_LISTEN", default_value = "127.0.0.1:8000")]
    pub listen: SocketAddr,
    /// `postgres://…` for PostgreSQL; default: SQLite file `<data-dir>/osac.db`.
    #[arg(long, env = "OSAC_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Legacy token file, imported into the store once at start and then renamed
    /// `<file>.migrated`; default `<data-dir>/tokens.json`.
    #[arg(long, env = "OSAC_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// JWKS `https://` URL or file: authenticate JWTs of an identity provider instead of
    /// store tokens (needs --jwt-issuer and --jwt-audience).
    #[arg(long, env = "OSAC_JWKS")]
    pub jwks: Option<String>,
    /// Required JWT issuer (`iss`); mandatory with --jwks.
    #[arg(long, env = "OSAC_JWT_ISSUER")]
    pub jwt_issuer: Option<String>,
    /// Required JWT audience (`aud`); mandatory with --jwks.
    #[arg(long, env = "OSAC_JWT_AUDIENCE")]
    pub jwt_audience: Option<String>,
    /// Seconds of clock skew allowed when checking a JWT's `exp` and `nbf`: a token is
    /// refused from `exp` + leeway on, and before `nbf` − leeway
    #[arg(long, env = "OSAC_JWT_LEEWAY_SECONDS", default_value_t = JwtConfig::DEFAULT_LEEWAY.as_secs(),
          value_parser = clap::value_parser!(u64).range(0..=300))]
    pub jwt_leeway_seconds: u64,
    /// PEM file of the CA that signs the JWKS server's certificate (only it is trusted then);
    /// default: the system roots.
    #[arg(long, env = "OSAC_JWKS_CA_FILE")]
    pub jwks_ca_file: Option<PathBuf>,
    /// Directory of manager registrations (`*.yaml`); dev mode uses the built-in sim managers.
    #[arg(long, env = "OSAC_MANAGERS_DIR")]
    pub managers_dir: Option<PathBuf>,
    /// Dev-mode managers: `sim` (in-process, no privileges), `linux` (a real dataplane of
    /// network namespaces, bridges, nftables and dnsmasq on this machine; needs root) or `ovn`
    /// (an OVN sandbox under `<data-dir>/ovn` with two hypervisors; needs root)
    #[arg(long, value_enum, env = "OSAC_FABRIC", default_value = "sim")]
    pub fabric: FabricArg,
    /// With `--fabric ovn`: program this existing OVN's northbound database (`unix:PATH`,
    /// `tcp:HOST:PORT`, a comma-separated list for a cluster) instead of starting a sandbox;
    /// machines are then simulated
    #[arg(long, env = "OSAC_OVN_NORTHBOUND", value_name = "ADDR")]
    pub ovn_northbound: Option<String>,
    /// Reconcile workers: reconciles of different objects run at once. A reconcile spends
    /// most of its time waiting (for a commit, a manager), so there are many more workers
    /// than cores; on PostgreSQL more writes in flight also share each status statement
    /// (docs/benchmarks.md, "64 reconcile workers").
    #[arg(long, default_value_t = 64)]
    pub workers: usize,
    /// Seconds between full resyncs of every object (at start everything at once; later
    /// passes are spread over the interval).
    #[arg(long, default_value_t = 300)]
    pub resync_seconds: u64,
    /// Seconds a cluster waits for its agents' DHCP leases before it shows the
    /// NetworkingIPDiscoveryTimeout condition (it keeps retrying)
    #[arg(long, default_value_t = ServerConfig::DEFAULT_IP_DISCOVERY_TIMEOUT.as_secs())]
    pub ip_discovery_timeout_seconds: u64,
    /// Milliseconds every operation of the simulated managers takes (their backend's
    /// latency): for trying timeouts, load and replica failover with realistic timing
    #[arg(long, default_value_t = 0)]
    pub sim_latency_ms: u64,
    /// Failed undo attempts of one auto-provisioned object after which a workload's cleanup
    /// gives up and labels the leftovers orphaned (`osac admin orphans`)
    #[arg(long, default_value_t = ControllerConfig::default().cleanup_retry_limit)]
    pub cleanup_retry_limit: u32,
    /// Log lines as human-readable `text` or one JSON object per line (`json`), on stderr
    #[arg(long, value_enum, env = "OSAC_LOG_FORMAT", default_value = "text")]
    pub log_format: LogFormat,
    /// Seconds events are kept before they are pruned
    #[arg(long, default_value_t = osac_store::events::DEFAULT_EVENT_TTL.as_secs())]
    pub event_ttl_seconds: u64,
    /// NATS server URL (`nats://host:4222`, `tls://…`): publish the metering records
    /// (CloudEvents) from the store's outbox to NATS JetStream (docs/metering-export.md);
    /// without it nothing is published and the usage API works as ever
    #[arg(long, env = "OSAC_METERING_NATS", value_name = "URL")]
    pub metering_nats: Option<String>,
    /// JetStream stream of the metering records, created when missing (with --metering-nats)
    #[arg(long, env = "OSAC_METERING_NATS_STREAM", value_name = "NAME",
          default_value = osac_metering_export::ExportConfig::DEFAULT_STREAM)]
    pub metering_nats_stream: String,
    /// Subject prefix of the metering records: each is published on
    /// `PREFIX.<CloudEvent type without org.osac.metering>` (with --metering-nats)
    #[arg(long, env = "OSAC_METERING_NATS_SUBJECT", value_name = "PREFIX",
          default_value = osac_metering_export::ExportConfig::DEFAULT_SUBJECT_PREFIX)]
    pub metering_nats_subject: String,
    /// Seconds between metering usage records (one CloudEvent per open interval)
    #[arg(long, default_value_t = osac_controller::metering::DEFAULT_USAGE_RECORD_INTERVAL.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub metering_record_seconds: u64,
    /// Days closed usage intervals are kept before they are pruned (open ones never are)
    #[arg(long, default_value_t = osac_controller::metering::DEFAULT_USAGE_RETENTION.as_secs() / 86_400, value_parser = clap::value_parser!(u64).range(1..))]
    pub metering_retention_days: u64,
    /// PEM certificate chain: serve REST and gRPC over TLS (needs --tls-key). The file is
    /// re-read when it changes (rotation without restart)
    #[arg(long, env = "OSAC_TLS_CERT", value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert
    #[arg(long, env = "OSAC_TLS_KEY", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// PEM CA certificates: require client certificates signed by one of them (mTLS)
    #[arg(
        long,
        env = "OSAC_TLS_CLIENT_CA",
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub tls_client_ca: Option<PathBuf>,
    /// Dev mode with TLS: the CA that signed --tls-cert, written to dev-credentials.json as
    /// `ca_file` for `osac login --dev-credentials`
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub dev_ca_file: Option<PathBuf>,
    /// Connections served at once; further connections wait in the listen backlog
    #[arg(long, env = "OSAC_MAX_CONNECTIONS", default_value_t = osac_api::listen::DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_connections: usize,
    /// Connections served at once from one client address (an IPv6 client is its /64);
    /// further ones are closed when accepted. Behind a proxy or load balancer every client has
    /// its address: raise this to --max-connections there
    #[arg(long, env = "OSAC_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = osac_api::listen::DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_connections_per_address: usize,
    /// Seconds a connection may go without a request in flight (from accept, TLS handshake
    /// included, to its first request head; from each response's end to the next) before it
    /// is closed; open watch streams count as requests in flight
    #[arg(long, env = "OSAC_IDLE_TIMEOUT_SECONDS", default_value_t = osac_api::listen::DEFAULT_IDLE_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub idle_timeout_seconds: u64,
    /// Also serve `/healthz`, `/readyz` and `/metrics` on this address, plain HTTP and without
    /// a token, apart from the API's connection caps (for probes and Prometheus; keep it
    /// internal). On the API port `/metrics` needs a provider-admin token
    #[arg(long, env = "OSAC_METRICS_LISTEN", value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Seconds a request may take until its response starts (504 / DEADLINE_EXCEEDED); event
    /// streams (watch) are not cut
    #[arg(long, env = "OSAC_REQUEST_TIMEOUT_SECONDS", default_value_t = osac_api::listen::DEFAULT_REQUEST_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout_seconds: u64,
    /// Provider default quotas, `name=value[,name=value…]` (value a number or `unlimited`):
    /// a tenant's limit where its own spec.quotas sets none. Names: virtual_networks, subnets,
    /// security_groups, security_group_rules, external_ips, compute_instances,
    /// baremetal_instances, clusters; unnamed ones keep the built-in default (docs/limits.md)
    #[arg(long, env = "OSAC_DEFAULT_QUOTA", value_parser = parse_default_quota, default_value = "")]
    pub default_quota: osac_model::quota::QuotaLimits,
    /// Watches one token (or JWT subject) may hold open at once; a console stream counts one
    /// per collection. Beyond it a watch is refused with 429 / RESOURCE_EXHAUSTED
    #[arg(long, env = "OSAC_MAX_WATCHES_PER_TOKEN", default_value_t = osac_api::watch_slots::DEFAULT_MAX_WATCHES_PER_TOKEN,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_watches_per_token: usize,
    /// Watches all of one tenant's credentials may hold open at once (as --max-watches-per-token)
    #[arg(long, env = "OSAC_MAX_WATCHES_PER_TENANT", default_value_t = osac_api::watch_slots::DEFAULT_MAX_WATCHES_PER_TENANT,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_watches_per_tenant: usize,
    /// Events kept per tenant: beyond it the oldest are removed at the next prune pass
    #[arg(long, env = "OSAC_MAX_EVENTS_PER_TENANT", default_value_t = osac_store::events::DEFAULT_MAX_EVENTS_PER_TENANT,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_events_per_tenant: usize,
    /// Seconds between two readings of the dataplane's NAT byte counters (bandwidth
    /// metering); 0 turns it off
    #[arg(long, env = "OSAC_METERING_TRAFFIC_INTERVAL", default_value_t = ControllerConfig::default().traffic_interval.as_secs())]
    pub metering_traffic_interval_seconds: u64,
}

/// Parses `--default-quota` over the built-in defaults.
fn parse_default_quota(text: &str) -> Result<osac_model::quota::QuotaLimits, String> {
    let mut limits = osac_model::quota::QuotaLimits::default();
    limits
        .apply_overrides("--default-quota", text)
        .map_err(|e| e.to_string())?;
    Ok(limits)
}

/// How `osac server` writes its log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Which dev-mode managers `osac server` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FabricArg {
    /// Simulated fabric, hosting clusters and provisioner.
    Sim,
    /// The real dataplane on this machine (root).
    Linux,
    /// OVN: a sandbox of OVN and Open vSwitch daemons (root), or `--ovn-northbound`.
    Ovn,
}

/// Runs the server until Ctrl-C / SIGTERM.
pub async fn run(args: ServerArgs) -> anyhow::Result<()> {
    if !args.dev && args.managers_dir.is_none() {
        bail!(
            "no managers configured: pass --managers-dir DIR (see examples/managers) or use --dev"
        );
    }
    if args.fabric == FabricArg::Linux && !args.dev {
        bail!(
            "--fabric linux selects the dev-mode managers; without --dev, register `driver: linux` managers in --managers-dir (see README, \"Real dataplane\")"
        );
    }
    if args.fabric == FabricArg::Ovn && !args.dev {
        bail!(
            "--fabric ovn selects the dev-mode managers; without --dev, register `driver: ovn` managers in --managers-dir (see docs/ovn.md)"
        );
    }
    if args.ovn_northbound.is_some() && args.fabric != FabricArg::Ovn {
        bail!("--ovn-northbound is for --fabric ovn");
    }
    let metering = args
        .metering_nats
        .as_deref()
        .map(|url| {
            crate::metering::export_config(
                url,
                &args.metering_nats_stream,
                &args.metering_nats_subject,
            )
        })
        .transpose()?;
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("cannot create data dir {}", args.data_dir.display()))?;
    let database_url = args
        .database_url
        .clone()
        .unwrap_or_else(|| format!("sqlite://{}", args.data_dir.join("osac.db").display()));
    let token_file = args
        .token_file
        .clone()
        .unwrap_or_else(|| args.data_dir.join("tokens.json"));
    let auth = match &args.jwks {
        Some(jwks) => AuthConfig::Jwt(JwtConfig {
            ca_file: args.jwks_ca_file.clone(),
            leeway: Duration::from_secs(args.jwt_leeway_seconds),
            ..JwtConfig::new(
                jwks.clone(),
                args.jwt_issuer.clone(),
                args.jwt_audience.clone(),
            )
        }),
        None => AuthConfig::TokenFile(token_file.clone()),
    };
    let controller = ControllerConfig {
        workers: args.workers,
        resync_interval: Duration::from_secs(args.resync_seconds),
        cleanup_retry_limit: args.cleanup_retry_limit,
        event_ttl: Duration::from_secs(args.event_ttl_seconds),
        usage_record_interval: Duration::from_secs(args.metering_record_seconds),
        usage_retention: Duration::from_secs(args.metering_retention_days.saturating_mul(86_400)),
        max_events_per_tenant: args.max_events_per_tenant,
        traffic_interval: Duration::from_secs(args.metering_traffic_interval_seconds),
        ..ControllerConfig::default()
    };
    let server = crate::start(ServerConfig {
        listen: args.listen,
        database_url,
        auth,
        managers_dir: args.managers_dir.clone(),
        controller,
        ip_discovery_timeout: Duration::from_secs(args.ip_discovery_timeout_seconds),
        sim_latency: Duration::from_millis(args.sim_latency_ms),
        fabric: match args.fabric {
            FabricArg::Sim => FabricChoice::Sim,
            FabricArg::Linux => FabricChoice::Linux(osac_linux_settings(&args.data_dir)),
            FabricArg::Ovn => FabricChoice::Ovn(crate::ovn_dev::OvnDev {
                dir: std::fs::canonicalize(&args.data_dir)
                    .unwrap_or_else(|_| args.data_dir.clone())
                    .join("ovn"),
                prefix: "ovnd".into(),
                northbound: args.ovn_northbound.clone(),
            }),
        },
        transport: TransportConfig {
            tls: match (&args.tls_cert, &args.tls_key) {
                (Some(cert), Some(key)) => Some(TlsConfig {
                    cert: cert.clone(),
                    key: key.clone(),
                    client_ca: args.tls_client_ca.clone(),
                }),
                _ => None,
            },
            max_connections: args.max_connections,
            max_connections_per_address: args.max_connections_per_address,
            request_timeout: Duration::from_secs(args.request_timeout_seconds),
            idle_timeout: Duration::from_secs(args.idle_timeout_seconds),
            metrics_listen: args.metrics_listen,
        },
        limits: crate::LimitsConfig {
            default_quotas: args.default_quota,
            watches: osac_api::watch_slots::WatchLimits {
                per_token: args.max_watches_per_token,
                per_tenant: args.max_watches_per_tenant,
            },
        },
    })
    .await
    .map_err(|e| anyhow::anyhow!("{}", error_chain(&e)))?;
    let export = match metering {
        Some(config) => {
            let started = crate::metering::start_export(
                server.store.clone(),
                config,
                server.shutdown_handle().subscribe(),
            );
            match started {
                Ok(task) => Some(task),
                Err(e) => {
                    server.shutdown().await;
                    bail!(e);
                }
            }
        }
        None => None,
    };
    let url = server.url();
    if args.dev {
        dev::bootstrap(&server.service)
            .await
            .map_err(|e| anyhow::anyhow!("dev bootstrap failed: {e}"))?;
        if args.jwks.is_none() {
            let creds = args.data_dir.join("dev-credentials.json");
            let token = dev::admin_token(&server.service, &creds)
                .await
                .map_err(|e| anyhow::anyhow!("cannot mint the dev admin token: {e}"))?;
            let mut creds_json = serde_json::json!({"url": url, "admin_token": token});
            if let Some(ca) = &args.dev_ca_file {
                let ca = std::fs::canonicalize(ca)
                    .with_context(|| format!("--dev-ca-file {}", ca.display()))?;
                creds_json["ca_file"] = serde_json::json!(ca);
            }
            dev::write_credentials(&creds, &creds_json)
                .with_context(|| format!("cannot write {}", creds.display()))?;
            print_next_steps(&url, &creds);
        }
    }
    if let Some(at) = server.metrics_addr {
        println!("metrics, health and readiness on http://{at} (/metrics, /healthz, /readyz)");
    }
    println!("osac-net listening on {url} (REST + gRPC); Ctrl-C to stop");
    let stop = server.shutdown_handle();
    tokio::spawn(async move {
        wait_for_signal().await;
        let _ = stop.send(true);
    });
    server.wait().await;
    if let Some(export) = export {
        let _ = export.await;
    }
    Ok(())
}

/// Dev-mode dataplane settings: defaults, with the fabric's state next to the database (the
/// store and the allocations must survive together).
fn osac_linux_settings(data_dir: &std::path::Path) -> osac_linux::LinuxSettings {
    let dir = std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
    osac_linux::LinuxSettings {
        state_dir: dir.join("dataplane"),
        ..Default::default()
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        if let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

fn print_next_steps(url: &str, creds: &std::path::Path) {
    println!(
        "\nDev environment ready at {url}. Credentials: {}\n\nTry, in another terminal:\n  osac login --dev-credentials {}\n  osac admin create tenant --name acme --wait\n  export OSAC_TOKEN=$(osac admin create token --tenant acme --role tenant-admin)\n  osac create virtualnetwork --cidr 10.0.0.0/16 --name my-net --wait\n  osac create subnet --virtual-network my-net --cidr 10.0.1.0/24 --name my-subnet --wait\n  osac create security-group --virtual-network my-net --name my-sg --ingress \"protocol:tcp,port:443,source:0.0.0.0/0\"\n  osac create externalip --name nat-ip --wait\n  osac create natgateway --virtual-network my-net --externalip nat-ip --name my-nat --wait\n  osac get subnets\n  osac create computeinstance --template ocp_virt_vm --network-attachment subnet=my-subnet --name my-vm --wait\n  osac create cluster --template ocp_4_17_small --network-attachment subnet=my-subnet --node-set workers=bm-standard,size=3 --name c1 --wait\n  osac get computeinstances; osac get clusters\n\nWeb console: {url}/console (sign in with admin_token or a tenant's token)\n",
        creds.display(),
        creds.display()
    );
}

#[cfg(test)]
mod tests {
    use osac_model::quota::{Quota, UNLIMITED};

    use super::{ServerArgs, parse_default_quota};
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ServerArgs,
    }

    #[test]
    fn connection_metrics_and_jwt_time_flags() {
        let d = Cli::try_parse_from(["osac"]).expect("defaults").args;
        assert_eq!(
            (
                d.max_connections_per_address,
                d.idle_timeout_seconds,
                d.metrics_listen,
                d.jwt_leeway_seconds
            ),
            (256, 5, None, 30)
        );
        let a = Cli::try_parse_from([
            "osac",
            "--max-connections-per-address",
            "8",
            "--idle-timeout-seconds",
            "2",
            "--metrics-listen",
            "127.0.0.1:9464",
            "--jwt-leeway-seconds",
            "0",
        ])
        .expect("valid")
        .args;
        assert_eq!(
            (
                a.max_connections_per_address,
                a.idle_timeout_seconds,
                a.metrics_listen,
                a.jwt_leeway_seconds
            ),
            (8, 2, Some("127.0.0.1:9464".parse().unwrap()), 0)
        );
        for bad in [
            ["--max-connections-per-address", "0"],
            ["--idle-timeout-seconds", "0"],
            ["--jwt-leeway-seconds", "301"],
            ["--metrics-listen", "localhost"],
        ] {
            let e = Cli::try_parse_from(["osac", bad[0], bad[1]])
                .err()
                .unwrap_or_else(|| panic!("{bad:?} accepted"));
            assert!(e.to_string().contains(bad[0]), "{e}");
        }
    }

    #[test]
    fn metering_export_flags() {
        let d = Cli::try_parse_from(["osac"]).expect("defaults").args;
        assert_eq!(
            (
                d.metering_nats,
                d.metering_nats_stream.as_str(),
                d.metering_nats_subject.as_str()
            ),
            (None, "OSAC_METERING", "osac.metering")
        );
        let a = Cli::try_parse_from([
            "osac",
            "--metering-nats",
            "nats://127.0.0.1:4222",
            "--metering-nats-stream",
            "BILLING",
            "--metering-nats-subject",
            "billing.net",
        ])
        .expect("valid")
        .args;
        assert_eq!(
            (
                a.metering_nats.as_deref(),
                a.metering_nats_stream.as_str(),
                a.metering_nats_subject.as_str()
            ),
            (Some("nats://127.0.0.1:4222"), "BILLING", "billing.net")
        );
    }

    #[test]
    fn default_quota_flag() {
        let d = parse_default_quota("").expect("empty = built-in defaults");
        assert_eq!(d.get(Quota::Subnets), Quota::Subnets.default_limit());
        let d = parse_default_quota("subnets=200, clusters=unlimited").expect("valid");
        assert_eq!(d.get(Quota::Subnets), 200);
        assert_eq!(d.get(Quota::Clusters), UNLIMITED);
        let e = parse_default_quota("subnet=1").expect_err("unknown quota");
        assert!(
            e.contains("--default-quota") && e.contains("'subnet' is not a quota"),
            "{e}"
        );
    }
}
