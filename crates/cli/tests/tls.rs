//! The CLI over https: `osac login --ca-file` is remembered and used by later calls, a client
//! without the CA is refused, `--insecure-skip-tls-verify` warns every time, `osac version`, and
//! `osac server --dev --tls-cert/--tls-key/--dev-ca-file` writes an https URL and the CA into
//! dev-credentials.json. A self-signed certificate made by `openssl req -x509` (CA:TRUE) works
//! as its own `--ca-file`, host name still checked.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use osac_api::TransportConfig;
use osac_api::auth::{AuthConfig, ensure_admin_token};
use osac_api::tls::TlsConfig;
use osac_server::{RunningServer, ServerConfig};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};

const WARNING: &str = "the server's identity is NOT checked";

/// Writes `ca.pem`, `server.crt`, `server.key` (localhost, 127.0.0.1) into `dir`.
fn write_pki(dir: &Path) {
    let mut ca = CertificateParams::default();
    ca.distinguished_name
        .push(DnType::CommonName, "cli test CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    leaf.subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &ca_cert, &ca_key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).unwrap();
    std::fs::write(dir.join("server.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("server.key"), key.serialize_pem()).unwrap();
}

async fn tls_server(dir: &Path) -> (RunningServer, String) {
    write_pki(dir);
    serve_tls(dir).await
}

/// A server with `dir/server.crt` and `dir/server.key`, and its admin token.
async fn serve_tls(dir: &Path) -> (RunningServer, String) {
    let tokens = dir.join("tokens.json");
    let admin = ensure_admin_token(&tokens).unwrap();
    let server = osac_server::start(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        database_url: format!("sqlite://{}", dir.join("osac.db").display()),
        auth: AuthConfig::TokenFile(tokens),
        managers_dir: None,
        controller: Default::default(),
        ip_discovery_timeout: ServerConfig::DEFAULT_IP_DISCOVERY_TIMEOUT,
        fabric: Default::default(),
        sim_latency: Default::default(),
        transport: TransportConfig {
            tls: Some(TlsConfig {
                cert: dir.join("server.crt"),
                key: dir.join("server.key"),
                client_ca: None,
            }),
            ..TransportConfig::default()
        },
        limits: Default::default(),
    })
    .await
    .expect("server starts");
    (server, admin)
}

/// Runs `osac` with only `config` as its configuration (no OSAC_URL/OSAC_TOKEN).
async fn osac(config: &Path, args: &[&str]) -> Output {
    let config = config.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_osac"))
            .args(&args)
            .env("OSAC_CONFIG", config)
            .env_remove("OSAC_URL")
            .env_remove("OSAC_TOKEN")
            .env_remove("OSAC_CA_FILE")
            .env_remove("RUST_LOG")
            .output()
            .expect("run osac")
    })
    .await
    .expect("join")
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn ok(args: &[&str], out: &Output) -> String {
    let (stdout, stderr) = text(out);
    assert!(
        out.status.success(),
        "osac {args:?} failed:\n{stdout}\n{stderr}"
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_over_https() {
    let dir = tempfile::tempdir().unwrap();
    let (server, admin) = tls_server(dir.path()).await;
    let url = server.url();
    assert!(url.starts_with("https://"), "{url}");
    let ca = dir.path().join("ca.pem");
    let ca = ca.to_str().unwrap();

    // Login with the CA file; later calls use it without being told.
    let config = dir.path().join("with-ca.json");
    let login = ["login", "--url", &url, "--token", &admin, "--ca-file", ca];
    ok(&login, &osac(&config, &login).await);
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert!(
        saved["ca_file"].as_str().unwrap().ends_with("ca.pem"),
        "{saved}"
    );
    let create = ["admin", "create", "tenant", "--name", "acme"];
    ok(&create, &osac(&config, &create).await);
    let get = ["admin", "get", "tenants"];
    let listed = ok(&get, &osac(&config, &get).await);
    assert!(listed.contains("acme"), "{listed}");
    let version = ["version"];
    let printed = ok(&version, &osac(&config, &version).await);
    let v = env!("CARGO_PKG_VERSION");
    assert!(
        printed.contains(&format!("Client version: {v}")),
        "{printed}"
    );
    assert!(
        printed.contains(&format!("Server version: {v} ({url})")),
        "{printed}"
    );

    // Without the CA (system roots only) the server is not trusted.
    let bare = dir.path().join("no-ca.json");
    let login = ["login", "--url", &url, "--token", &admin];
    let (_, stderr) = text(&osac(&bare, &login).await);
    assert!(!stderr.contains(WARNING), "{stderr}");
    let out = osac(&bare, &get).await;
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "untrusted server accepted");
    assert!(stderr.to_lowercase().contains("certificate"), "{stderr}");

    // --insecure-skip-tls-verify works and warns, as a global flag and remembered by login.
    let insecure_get = ["admin", "get", "tenants", "--insecure-skip-tls-verify"];
    let out = osac(&bare, &insecure_get).await;
    ok(&insecure_get, &out);
    assert!(text(&out).1.contains(WARNING), "{}", text(&out).1);
    assert!(text(&out).1.contains("read your token"), "{}", text(&out).1);
    let insecure = dir.path().join("insecure.json");
    let login = [
        "login",
        "--url",
        &url,
        "--token",
        &admin,
        "--insecure-skip-tls-verify",
    ];
    let out = osac(&insecure, &login).await;
    ok(&login, &out);
    assert!(text(&out).1.contains(WARNING), "{}", text(&out).1);
    let out = osac(&insecure, &get).await;
    ok(&get, &out);
    assert!(
        text(&out).1.contains(WARNING),
        "every use warns: {}",
        text(&out).1
    );
    server.shutdown().await;
}

/// Kills the dev server this test started when the test ends (also on failure).
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_server_with_tls_writes_https_credentials() {
    let dir = tempfile::tempdir().unwrap();
    write_pki(dir.path());
    let data = dir.path().join("data");
    let p = |f: &str| -> PathBuf { dir.path().join(f) };
    let _server = Child(
        Command::new(env!("CARGO_BIN_EXE_osac"))
            .args(["server", "--dev", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data)
            .arg("--tls-cert")
            .arg(p("server.crt"))
            .arg("--tls-key")
            .arg(p("server.key"))
            .arg("--dev-ca-file")
            .arg(p("ca.pem"))
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("osac server --dev"),
    );
    let creds = data.join("dev-credentials.json");
    let start = Instant::now();
    let written: serde_json::Value = loop {
        if let Ok(t) = std::fs::read_to_string(&creds)
            && let Ok(v) = serde_json::from_str(&t)
        {
            break v;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no dev credentials"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        written["url"]
            .as_str()
            .unwrap()
            .starts_with("https://127.0.0.1:"),
        "{written}"
    );
    assert!(
        written["ca_file"].as_str().unwrap().ends_with("ca.pem"),
        "{written}"
    );
    let config = dir.path().join("cli.json");
    let login = ["login", "--dev-credentials", creds.to_str().unwrap()];
    ok(&login, &osac(&config, &login).await);
    let get = ["admin", "get", "networkclasses"];
    let listed = ok(&get, &osac(&config, &get).await);
    assert!(listed.contains("default"), "{listed}");
}

/// Runs `openssl` with `args` in `dir`; None when openssl is not installed (then the test is
/// skipped, except under CI, where it must run).
fn openssl(dir: &Path, args: &[&str]) -> Option<()> {
    match Command::new("openssl").args(args).current_dir(dir).output() {
        Ok(out) => {
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            Some(())
        }
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("the openssl certificate test must run under CI but cannot: {e}")
        }
        Err(e) => {
            eprintln!("skipping the openssl certificate test: openssl: {e}");
            None
        }
    }
}

/// A self-signed certificate the usual way (OpenSSL's defaults make it CA:TRUE) for the
/// names of `san`, as `dir/{name}.crt` and `dir/{name}.key`.
fn openssl_self_signed(dir: &Path, name: &str, san: &str) -> Option<()> {
    let (crt, key) = (format!("{name}.crt"), format!("{name}.key"));
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "30",
            "-subj",
            "/CN=localhost",
            "-addext",
            san,
            "-keyout",
            &key,
            "-out",
            &crt,
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openssl_self_signed_certificate_is_its_own_ca_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    if openssl_self_signed(d, "server", "subjectAltName=DNS:localhost").is_none() {
        return;
    }
    let text_of = String::from_utf8_lossy(
        &Command::new("openssl")
            .args(["x509", "-noout", "-text", "-in", "server.crt"])
            .current_dir(d)
            .output()
            .expect("openssl x509")
            .stdout,
    )
    .to_string();
    assert!(
        text_of.contains("CA:TRUE"),
        "the usual certificate is a CA: {text_of}"
    );
    let (server, admin) = serve_tls(d).await;
    let port = server
        .url()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let by_name = format!("https://localhost:{port}");
    let crt = d.join("server.crt");
    let crt = crt.to_str().unwrap();

    // The certificate itself as the CA file: login and later calls work.
    let config = d.join("pinned.json");
    let login = [
        "login",
        "--url",
        &by_name,
        "--token",
        &admin,
        "--ca-file",
        crt,
    ];
    ok(&login, &osac(&config, &login).await);
    let get = ["admin", "get", "tenants"];
    ok(&get, &osac(&config, &get).await);

    // The host name is still checked: the certificate names localhost, not 127.0.0.1.
    let by_ip = d.join("by-ip.json");
    let login = [
        "login",
        "--url",
        &format!("https://127.0.0.1:{port}"),
        "--token",
        &admin,
        "--ca-file",
        crt,
    ];
    let _ = osac(&by_ip, &login).await;
    let out = osac(&by_ip, &get).await;
    assert!(
        !out.status.success(),
        "a certificate for localhost accepted for 127.0.0.1"
    );
    assert!(
        text(&out).1.to_lowercase().contains("certificate"),
        "{}",
        text(&out).1
    );

    // Another self-signed certificate in the CA file does not vouch for this one.
    openssl_self_signed(d, "other", "subjectAltName=DNS:localhost").expect("openssl");
    let other = d.join("other.crt");
    let wrong = d.join("wrong.json");
    let login = [
        "login",
        "--url",
        &by_name,
        "--token",
        &admin,
        "--ca-file",
        other.to_str().unwrap(),
    ];
    let _ = osac(&wrong, &login).await;
    let out = osac(&wrong, &get).await;
    assert!(
        !out.status.success(),
        "a certificate not in the CA file accepted"
    );
    server.shutdown().await;
}
