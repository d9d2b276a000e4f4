//! The harness shared by the CLI end-to-end tests: a real server in-process (SQLite, sim
//! managers and provisioner, dev bootstrap) and the `osac` binary run against it.
#![allow(dead_code)]

#[path = "../support/osac_cli.rs"]
mod osac_cli;
pub mod readme;

use std::process::Output;
use std::time::Duration;

use osac_api::auth::{AuthConfig, ensure_admin_token};
use osac_controller::ControllerConfig;
use osac_server::{RunningServer, ServerConfig};
use serde_json::Value;

/// The items of `osac get KINDS -o json` (an array; tolerate a list object).
pub fn items(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a.clone(),
        other => other["items"].as_array().cloned().unwrap_or_default(),
    }
}

/// The string at JSON pointer `ptr` in `v` ("" when absent or not a string).
pub fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

pub struct Env {
    pub server: RunningServer,
    pub dir: tempfile::TempDir,
    pub admin: String,
}

pub async fn start() -> Env {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.json");
    let admin = ensure_admin_token(&tokens).expect("admin token");
    let server = osac_server::start(ServerConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        database_url: format!("sqlite://{}", dir.path().join("osac.db").display()),
        auth: AuthConfig::TokenFile(tokens),
        managers_dir: None,
        controller: ControllerConfig {
            workers: 4,
            resync_interval: Duration::from_secs(3600),
            backoff_base: Duration::from_millis(50),
            backoff_cap: Duration::from_secs(1),
            ..ControllerConfig::default()
        },
        ip_discovery_timeout: ServerConfig::DEFAULT_IP_DISCOVERY_TIMEOUT,
        fabric: Default::default(),
        sim_latency: Default::default(),
        limits: Default::default(),
        transport: Default::default(),
    })
    .await
    .expect("server starts");
    osac_server::dev::bootstrap(&server.service)
        .await
        .expect("bootstrap");
    Env { server, dir, admin }
}

impl Env {
    /// Runs `osac` with the given token on a blocking thread (the server runs on this runtime).
    pub async fn osac(&self, token: &str, args: &[&str]) -> Output {
        let config = self.dir.path().join("cli-config.json");
        osac_cli::run(self.server.url(), token, config, args).await
    }

    pub async fn ok(&self, token: &str, args: &[&str]) -> String {
        let out = self.osac(token, args).await;
        osac_cli::stdout_of_success(args, &out)
    }

    /// Runs `osac LINE FLAGS…`, which must succeed: `line` is a command line as typed (split
    /// at spaces; see [`readme`]), `flags` what the test adds, e.g. [`readme::WAIT`].
    pub async fn ok_line(&self, token: &str, line: &str, flags: &[&str]) -> String {
        let mut args: Vec<&str> = line.split_whitespace().collect();
        args.extend_from_slice(flags);
        self.ok(token, &args).await
    }

    /// Runs `osac` where it must fail; returns its stderr.
    pub async fn fails(&self, token: &str, args: &[&str]) -> String {
        let out = self.osac(token, args).await;
        assert!(
            !out.status.success(),
            "osac {args:?} succeeded: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// `osac admin create tenant NAME --wait`, then a tenant-admin token for it.
    pub async fn tenant_admin(&self, tenant: &str) -> String {
        let admin = self.admin.clone();
        self.ok(
            &admin,
            &["admin", "create", "tenant", "--name", tenant, "--wait"],
        )
        .await;
        self.token(tenant, "tenant-admin").await
    }

    /// `osac admin create token --tenant TENANT --role ROLE` (printed alone).
    pub async fn token(&self, tenant: &str, role: &str) -> String {
        let admin = self.admin.clone();
        self.ok(
            &admin,
            &[
                "admin", "create", "token", "--tenant", tenant, "--role", role,
            ],
        )
        .await
    }

    pub async fn json(&self, token: &str, args: &[&str]) -> Value {
        let text = self.ok(token, args).await;
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("osac {args:?} printed non-JSON ({e}): {text}"))
    }

    /// Polls `osac get …` (as JSON) until `done` holds (30 s at most).
    pub async fn until(&self, token: &str, args: &[&str], done: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        loop {
            let v = self.json(token, &all).await;
            if done(&v) {
                return v;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out on {args:?}: {v}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
