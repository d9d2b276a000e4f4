//! `osac-bench --tls-compare`: the cost of TLS. In one run, two servers are started one after
//! the other with the same settings and a fresh SQLite database each, one serving plain HTTP
//! and one TLS (rustls, ring; a certificate made here with rcgen). Against each: VirtualNetwork
//! creates via REST (throughput, latency) and GETs of the created objects by id (p50/p99), with
//! the same number of keep-alive clients. Printed: both results and TLS / plain (goal: TLS
//! create throughput ≥ 0.8× plain).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use osac_api::TransportConfig;
use osac_api::auth::AuthConfig;
use osac_api::tls::TlsConfig;
use osac_controller::ControllerConfig;
use osac_server::ServerConfig;
use rand::Rng;
use serde_json::json;

use osac_client::TlsOptions;

use crate::api::{Polls, client, id_of};
use crate::load;
use crate::report::{Goal, Line, Report, thousands};

const VNS: &str = "/api/fulfillment/v1/virtual_networks";

/// What to run.
pub struct Settings {
    pub clients: usize,
    pub creates: usize,
    pub gets: usize,
    pub workers: usize,
    pub phase: Duration,
}

/// One mode's numbers.
struct Measured {
    create_rate: f64,
    create_p50: f64,
    create_p99: f64,
    get_rate: f64,
    get_p50: f64,
    get_p99: f64,
}

/// A CA and a server certificate for 127.0.0.1, written into `dir`; returns (CA file, config).
fn certificates(dir: &Path) -> Result<(PathBuf, TlsConfig)> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};
    let mut ca = CertificateParams::default();
    ca.distinguished_name
        .push(DnType::CommonName, "osac-bench CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca.self_signed(&ca_key)?;
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()])?;
    leaf.subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse()?));
    let key = KeyPair::generate()?;
    let cert = leaf.signed_by(&key, &ca_cert, &ca_key)?;
    let (cert_path, key_path) = (dir.join("server.crt"), dir.join("server.key"));
    std::fs::write(&cert_path, cert.pem())?;
    std::fs::write(&key_path, key.serialize_pem())?;
    let ca_path = dir.join("ca.crt");
    std::fs::write(&ca_path, ca_cert.pem())?;
    Ok((
        ca_path,
        TlsConfig {
            cert: cert_path,
            key: key_path,
            client_ca: None,
        },
    ))
}

async fn measure(s: &Settings, tls: Option<(PathBuf, TlsConfig)>) -> Result<Measured> {
    let tmp = tempfile::Builder::new()
        .prefix("osac-bench-tls-")
        .tempdir()?;
    let tokens = tmp.path().join("tokens.json");
    let admin_token = osac_api::auth::ensure_admin_token(&tokens)?;
    let ca_file = tls.as_ref().map(|(ca, _)| ca.clone());
    let server = osac_server::start(ServerConfig {
        listen: "127.0.0.1:0".parse()?,
        database_url: format!("sqlite://{}", tmp.path().join("osac.db").display()),
        auth: AuthConfig::TokenFile(tokens),
        managers_dir: None,
        controller: ControllerConfig {
            workers: s.workers,
            ..ControllerConfig::default()
        },
        ip_discovery_timeout: ServerConfig::DEFAULT_IP_DISCOVERY_TIMEOUT,
        fabric: Default::default(),
        sim_latency: Default::default(),
        transport: TransportConfig {
            tls: tls.map(|(_, t)| t),
            // Every benchmark client connects from 127.0.0.1.
            max_connections_per_address: osac_api::listen::DEFAULT_MAX_CONNECTIONS,
            ..TransportConfig::default()
        },
        limits: osac_server::LimitsConfig {
            default_quotas: osac_model::quota::QuotaLimits::unlimited(),
            ..Default::default()
        },
    })
    .await
    .context("starting the server")?;
    osac_server::dev::bootstrap(&server.service)
        .await
        .map_err(|e| anyhow::anyhow!("dev bootstrap: {e:?}"))?;
    let trust = TlsOptions {
        ca_file,
        insecure_skip_verify: false,
    };
    let admin = client(&server.url(), &admin_token, s.clients * 2, trust)?;
    admin
        .post_path(
            "/api/private/v1/tenants",
            &json!({"metadata": {"name": "bench"}}),
        )
        .await?;
    let token = admin
        .post_path(
            "/api/private/v1/tokens",
            &json!({"tenant": "bench", "role": "tenant-admin"}),
        )
        .await?;
    let api = admin.with_token(token["token"].as_str().context("no token minted")?);
    admin.wait_class_and_tenant_ready("bench").await?;

    let n = s.creates;
    let creator = api.clone();
    let created = load::run(n, s.clients, move |i| {
        let api = creator.clone();
        let body = json!({
            "metadata": {"name": format!("tls-vn-{i}")},
            "spec": {"ipv4_cidr": "10.0.0.0/16"}
        });
        async move { id_of(&api.post_path(VNS, &body).await?) }
    })
    .await;
    if let Some(e) = &created.first_error {
        bail!("{} of {n} creates failed: {e}", created.errors);
    }
    let (create_rate, create_p50, create_p99) = (
        created.rate(),
        created.latencies.pct(0.5),
        created.latencies.pct(0.99),
    );
    let ids: Arc<Vec<String>> = Arc::new(created.ok().collect());
    let getter = api.clone();
    let got = load::run_for(s.gets, s.clients, Some(s.phase), move |_| {
        let api = getter.clone();
        let ids = ids.clone();
        let id = ids[rand::rng().random_range(0..ids.len())].clone();
        async move { Ok(api.get_path(&format!("{VNS}/{id}")).await.map(drop)?) }
    })
    .await;
    if let Some(e) = &got.first_error {
        bail!("{} GETs failed: {e}", got.errors);
    }
    server.shutdown().await;
    Ok(Measured {
        create_rate,
        create_p50,
        create_p99,
        get_rate: got.rate(),
        get_p50: got.latencies.pct(0.5),
        get_p99: got.latencies.pct(0.99),
    })
}

/// Runs both modes and reports them.
pub async fn run(s: &Settings, report: &mut Report) -> Result<()> {
    let dir = tempfile::Builder::new()
        .prefix("osac-bench-pki-")
        .tempdir()?;
    let tls = certificates(dir.path())?;
    eprintln!(
        "tls-compare: plain HTTP, {} creates + {} GETs, {} clients…",
        s.creates, s.gets, s.clients
    );
    let plain = measure(s, None).await.context("plain HTTP")?;
    eprintln!(
        "tls-compare: TLS, {} creates + {} GETs, {} clients…",
        s.creates, s.gets, s.clients
    );
    let secure = measure(s, Some(tls)).await.context("TLS")?;
    let ratio = secure.create_rate / plain.create_rate;
    report.header.push((
        "tls-compare".into(),
        format!(
            "{} clients, {} VirtualNetwork creates and {} GETs per mode, SQLite, HTTP/1.1 keep-alive",
            s.clients, s.creates, s.gets
        ),
    ));
    for (id, name, m) in [("T1", "plain HTTP", &plain), ("T2", "TLS", &secure)] {
        report.lines.push(Line {
            id: id.into(),
            what: format!("{name}: VN create / GET throughput"),
            shown: format!(
                "{} /s / {} /s",
                thousands(m.create_rate),
                thousands(m.get_rate)
            ),
            value: f64::NAN,
            goal: Goal::None,
            goal_text: "-".into(),
            note: String::new(),
        });
        report.lines.push(Line {
            id: String::new(),
            what: format!("  {name}: create p50 / p99, GET p50 / p99"),
            shown: format!(
                "{:.1} / {:.1} ms, {:.2} / {:.2} ms",
                m.create_p50, m.create_p99, m.get_p50, m.get_p99
            ),
            value: f64::NAN,
            goal: Goal::None,
            goal_text: "-".into(),
            note: String::new(),
        });
    }
    report.lines.push(Line {
        id: "T3".into(),
        what: "TLS / plain create throughput".into(),
        shown: format!("{ratio:.2}×"),
        value: ratio,
        goal: Goal::AtLeast(0.8),
        goal_text: "≥ 0.8×".into(),
        note: format!(
            "GET throughput {:.2}×, GET p99 {:.2} vs {:.2} ms",
            secure.get_rate / plain.get_rate,
            secure.get_p99,
            plain.get_p99
        ),
    });
    Ok(())
}
