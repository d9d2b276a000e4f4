//! Shared harness of the integration tests: a real server in-process on a random port with a
//! fresh database (SQLite in a tempdir; PostgreSQL when `OSAC_TEST_DATABASE_URL` is set), REST
//! clients for the provider admin and for tenants, and polling helpers.

#![allow(dead_code)]

pub mod pki;
mod workloads;

pub use workloads::*;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use osac_api::Service;
use osac_api::auth::AuthConfig;
use osac_backends::provision::SimProvisioner;
use osac_backends::{DriverContext, Registry, SimFabric};
use osac_client::Method;
use osac_controller::{ControllerConfig, Controllers, Dispatcher};
use osac_server::{RunningServer, ServerConfig};
use osac_store::Store;
use serde_json::{Value, json};
use tempfile::TempDir;

/// Public (tenant) API prefix.
pub const PUB: &str = "/api/fulfillment/v1";
/// Private (provider) API prefix.
pub const PRIV: &str = "/api/private/v1";

/// How long a wait may take before the test fails.
/// Filter for lists of what a test made: everything but the tenant's default networking.
pub const NOT_DEFAULT: &str = "!has(this.metadata.labels[\"osac.openshift.io/default\"])";

/// How long the helpers wait for a state.
pub const WAIT: Duration = Duration::from_secs(20);

/// The database a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Controller settings that keep the suite fast: quick retries. The periodic resync is an
/// hour away, so every test converges by change notifications alone (a missed wake fails it).
pub fn controller_config() -> ControllerConfig {
    ControllerConfig {
        workers: 4,
        resync_interval: Duration::from_secs(3600),
        backoff_base: Duration::from_millis(10),
        backoff_cap: Duration::from_millis(200),
        ..ControllerConfig::default()
    }
}

/// A fresh database: a SQLite file in the test's tempdir, or a new PostgreSQL database.
pub struct TestDb {
    pub url: String,
    /// (server URL to connect to for DROP, database name)
    postgres: Option<(String, String)>,
}

impl TestDb {
    /// None when the backend is PostgreSQL and `OSAC_TEST_DATABASE_URL` is not set.
    pub async fn new(backend: Backend, dir: &Path) -> Option<TestDb> {
        match backend {
            Backend::Sqlite => Some(TestDb {
                url: format!("sqlite://{}", dir.join("osac.db").display()),
                postgres: None,
            }),
            Backend::Postgres => {
                let Ok(base) = std::env::var("OSAC_TEST_DATABASE_URL") else {
                    eprintln!("OSAC_TEST_DATABASE_URL is not set: skipping the PostgreSQL variant");
                    return None;
                };
                let name = format!("osac_t_{}", uuid::Uuid::new_v4().simple());
                let mut conn = connect_pg(&base).await;
                sqlx::query(&format!("CREATE DATABASE {name}"))
                    .execute(&mut conn)
                    .await
                    .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
                let url = with_database(&base, &name);
                Some(TestDb {
                    url,
                    postgres: Some((base, name)),
                })
            }
        }
    }
}

/// The PostgreSQL database goes with the test, also when it fails (best effort; `WITH (FORCE)`
/// ends the connections of a server that is still running).
impl Drop for TestDb {
    fn drop(&mut self) {
        let Some((base, name)) = self.postgres.take() else {
            return;
        };
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                let mut conn = connect_pg(&base).await;
                if let Err(e) = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&mut conn)
                    .await
                {
                    eprintln!("cannot drop test database {name}: {e}");
                }
            });
        });
        let _ = dropped.join();
    }
}

async fn connect_pg(url: &str) -> sqlx::PgConnection {
    use sqlx::Connection;
    sqlx::PgConnection::connect(url)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
}

/// Replaces the database name of a PostgreSQL URL.
fn with_database(url: &str, name: &str) -> String {
    let (main, query) = match url.split_once('?') {
        Some((m, q)) => (m, Some(q)),
        None => (url, None),
    };
    let scheme_end = main.find("://").map_or(0, |i| i + 3);
    let base = match main[scheme_end..].find('/') {
        Some(i) => &main[..scheme_end + i],
        None => main,
    };
    match query {
        Some(q) => format!("{base}/{name}?{q}"),
        None => format!("{base}/{name}"),
    }
}

/// A running test server with its database, token file and provider-admin client.
pub struct TestServer {
    server: Option<RunningServer>,
    paused: Option<PausedServer>,
    pub db: TestDb,
    pub dir: TempDir,
    pub token_file: PathBuf,
    pub managers_dir: Option<PathBuf>,
    /// Used by the next [`TestServer::restart`] (default: the server default, 300 s).
    pub ip_discovery_timeout: Duration,
    /// Provider limits of the server (default: the built-in default quotas).
    pub limits: osac_server::LimitsConfig,
    pub base: Base,
    pub admin: Api,
}

/// The service of a stopped server, still answering REST, with no controllers running.
struct PausedServer {
    service: Arc<Service>,
    stop: tokio::sync::oneshot::Sender<()>,
    http: tokio::task::JoinHandle<()>,
}

impl TestServer {
    /// A server on SQLite with the dev provider objects READY.
    pub async fn sqlite() -> TestServer {
        Self::start(Backend::Sqlite)
            .await
            .expect("SQLite is always available")
    }

    /// A server on `backend` with the dev provider objects READY (None: backend unavailable).
    pub async fn start(backend: Backend) -> Option<TestServer> {
        let s = Self::start_bare(backend, None).await?;
        s.bootstrap().await;
        Some(s)
    }

    /// A server without provider objects; `managers_dir` None = the dev registry.
    pub async fn start_bare(backend: Backend, managers_dir: Option<PathBuf>) -> Option<TestServer> {
        Self::start_with(backend, managers_dir, osac_server::LimitsConfig::default()).await
    }

    /// A server on `backend` with these provider limits, the dev provider objects READY.
    pub async fn start_with_limits(
        backend: Backend,
        limits: osac_server::LimitsConfig,
    ) -> Option<TestServer> {
        let s = Self::start_with(backend, None, limits).await?;
        s.bootstrap().await;
        Some(s)
    }

    async fn start_with(
        backend: Backend,
        managers_dir: Option<PathBuf>,
        limits: osac_server::LimitsConfig,
    ) -> Option<TestServer> {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = TestDb::new(backend, dir.path()).await?;
        let token_file = dir.path().join("tokens.json");
        let admin_token = osac_api::auth::ensure_admin_token(&token_file).expect("admin token");
        let ip_discovery_timeout = ServerConfig::DEFAULT_IP_DISCOVERY_TIMEOUT;
        let server = launch(
            &db.url,
            &token_file,
            managers_dir.clone(),
            ip_discovery_timeout,
            &limits,
        )
        .await;
        let base: Base = Arc::new(RwLock::new(server.url()));
        let admin = Api::new(&base, Some(&admin_token));
        Some(TestServer {
            server: Some(server),
            paused: None,
            db,
            dir,
            token_file,
            managers_dir,
            ip_discovery_timeout,
            limits,
            base,
            admin,
        })
    }

    /// The running server.
    pub fn server(&self) -> &RunningServer {
        self.server.as_ref().expect("server is running")
    }

    /// The shared service layer (of the running or the paused server).
    pub fn service(&self) -> Arc<Service> {
        match (&self.server, &self.paused) {
            (Some(s), _) => s.service.clone(),
            (None, Some(p)) => p.service.clone(),
            _ => panic!("server is stopped"),
        }
    }

    /// The store of the running or paused server.
    pub fn store(&self) -> Arc<dyn Store> {
        self.service().store.clone()
    }

    /// The simulated fabric of the running server.
    pub fn sim_fabric(&self) -> Arc<SimFabric> {
        self.server()
            .registry
            .sim_fabric("sim-fabric")
            .expect("dev registry has sim-fabric")
    }

    /// The simulated provisioner of the running server.
    pub fn provisioner(&self) -> Arc<SimProvisioner> {
        self.server().provisioner.clone()
    }

    /// Starts a bootstrapped SQLite server on the managers of `managers_dir` with a READY
    /// NetworkClass `class` (not the default) on fabric manager `fabric_manager`.
    pub async fn with_class(
        managers_dir: &std::path::Path,
        class: &str,
        fabric_manager: &str,
    ) -> TestServer {
        let s = TestServer::start_bare(Backend::Sqlite, Some(managers_dir.to_path_buf()))
            .await
            .unwrap();
        s.bootstrap().await;
        s.admin
            .post(
                &format!("{PRIV}/network_classes"),
                serde_json::json!({
                    "metadata": {"name": class}, "title": class, "fabric_manager": fabric_manager,
                    "spec": {"defaults": {"virtual_network_ipv4_cidr": "10.9.0.0/16", "subnet_ipv4_cidr": "10.9.1.0/24", "enable_nat_gateway": false}}
                }),
            )
            .await
            .ok();
        s.admin
            .wait_for_state(PRIV, "network_classes", class, "NETWORK_CLASS_STATE_READY")
            .await;
        s
    }

    /// Creates the dev provider objects and waits until they are READY.
    pub async fn bootstrap(&self) {
        osac_server::dev::bootstrap(&self.service())
            .await
            .expect("bootstrap");
        self.admin
            .wait_for_state(
                PRIV,
                "network_classes",
                "default",
                "NETWORK_CLASS_STATE_READY",
            )
            .await;
        self.admin
            .wait_for_state(
                PRIV,
                "external_ip_pools",
                "external-pool-1",
                "EXTERNAL_IP_POOL_STATE_READY",
            )
            .await;
    }

    /// Creates a tenant and returns a tenant-admin client for it.
    pub async fn tenant(&self, name: &str) -> Api {
        self.admin
            .post(
                &format!("{PRIV}/tenants"),
                json!({"metadata": {"name": name}}),
            )
            .await
            .ok();
        self.client_for(name, "tenant-admin").await
    }

    /// Mints a token for `tenant` with `role` and returns a client using it.
    pub async fn client_for(&self, tenant: &str, role: &str) -> Api {
        let r = self
            .admin
            .post(
                &format!("{PRIV}/tokens"),
                json!({"tenant": tenant, "role": role, "subject": format!("{tenant}-{role}")}),
            )
            .await
            .ok();
        let token = r["token"].as_str().expect("token").to_string();
        Api::new(&self.base, Some(&token))
    }

    /// A client without a token.
    pub fn anonymous(&self) -> Api {
        Api::new(&self.base, None)
    }

    /// A client with an arbitrary token.
    pub fn with_token(&self, token: &str) -> Api {
        Api::new(&self.base, Some(token))
    }

    /// Base URL of the current server.
    pub fn url(&self) -> String {
        self.base.read().expect("base").clone()
    }

    /// Stops the server (controllers included); the database stays.
    pub async fn stop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown().await;
        }
        if let Some(p) = self.paused.take() {
            let _ = p.stop.send(());
            let _ = p.http.await;
        }
    }

    /// Starts a new server on the same database and token file (clients follow it).
    pub async fn restart(&mut self) {
        self.stop().await;
        let server = launch(
            &self.db.url,
            &self.token_file,
            self.managers_dir.clone(),
            self.ip_discovery_timeout,
            &self.limits,
        )
        .await;
        *self.base.write().expect("base") = server.url();
        self.server = Some(server);
    }

    /// Stops the controllers and serves the same service's REST API without them; returns
    /// controllers of the test's own, not yet running, so failures can be injected for objects
    /// created now before anything reconciles them. [`TestServer::restart`] ends the pause.
    pub async fn pause(&mut self) -> OwnControllers {
        let server = self.server.take().expect("server is running");
        let service = server.service.clone();
        server.shutdown().await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        *self.base.write().expect("base") =
            format!("http://{}", listener.local_addr().expect("addr"));
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let app = osac_api::rest::router(service.clone());
        let http = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await;
        });
        let controllers = OwnControllers::new(service.store.clone()).await;
        self.paused = Some(PausedServer {
            service,
            stop,
            http,
        });
        controllers
    }

    /// Another server (replica) on the same database, with its own listener and controllers.
    pub async fn replica(&self) -> RunningServer {
        self.try_replica()
            .await
            .unwrap_or_else(|e| panic!("server start on {}: {e}", self.db.url))
    }

    /// Like [`TestServer::replica`], returning a refused start as its message.
    pub async fn try_replica(&self) -> Result<RunningServer, String> {
        let no_file = self.dir.path().join("replica-tokens.json");
        try_launch(
            &self.db.url,
            &no_file,
            self.managers_dir.clone(),
            self.ip_discovery_timeout,
            &self.limits,
        )
        .await
    }

    /// Stops the server; dropping `self` then drops the test database.
    pub async fn finish(mut self) {
        self.stop().await;
    }
}

async fn launch(
    database_url: &str,
    token_file: &Path,
    managers_dir: Option<PathBuf>,
    ip_discovery_timeout: Duration,
    limits: &osac_server::LimitsConfig,
) -> RunningServer {
    try_launch(
        database_url,
        token_file,
        managers_dir,
        ip_discovery_timeout,
        limits,
    )
    .await
    .unwrap_or_else(|e| panic!("server start on {database_url}: {e}"))
}

async fn try_launch(
    database_url: &str,
    token_file: &Path,
    managers_dir: Option<PathBuf>,
    ip_discovery_timeout: Duration,
    limits: &osac_server::LimitsConfig,
) -> Result<RunningServer, String> {
    osac_server::start(ServerConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        database_url: database_url.to_string(),
        auth: AuthConfig::TokenFile(token_file.to_path_buf()),
        managers_dir,
        controller: controller_config(),
        ip_discovery_timeout,
        fabric: Default::default(),
        sim_latency: Default::default(),
        limits: limits.clone(),
        transport: Default::default(),
    })
    .await
    .map_err(|e| format!("{e:?}"))
}

/// Controllers run by the test itself over a store whose server is stopped: failures can be
/// injected for an object *before* any controller sees it (a running server would race).
pub struct OwnControllers {
    pub registry: Arc<Registry>,
    pub provisioner: Arc<SimProvisioner>,
    shutdown: tokio::sync::watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
    store: Arc<dyn Store>,
}

impl OwnControllers {
    /// Opens the dev registry over `store` (sim state persisted in it), not yet running.
    pub async fn new(store: Arc<dyn Store>) -> OwnControllers {
        // Sim state kept in the store's key/value table, as the server keeps it.
        let state = osac_server::sim_state_in(store.clone());
        let ctx = DriverContext::new(state.clone());
        let registry = Arc::new(Registry::sim_dev(&ctx).await.expect("dev registry"));
        let provisioner = SimProvisioner::open(state).await.expect("sim provisioner");
        let (shutdown, _) = tokio::sync::watch::channel(false);
        OwnControllers {
            registry,
            provisioner,
            shutdown,
            task: None,
            store,
        }
    }

    pub fn sim_fabric(&self) -> Arc<SimFabric> {
        self.registry.sim_fabric("sim-fabric").expect("sim-fabric")
    }

    /// Starts reconciling.
    pub fn run(&mut self) {
        let controllers = Controllers::new(
            self.store.clone(),
            Dispatcher::new(self.registry.clone()),
            controller_config(),
        )
        .with_provisioner(self.provisioner.clone());
        let rx = self.shutdown.subscribe();
        self.task = Some(tokio::spawn(controllers.run(rx)));
    }

    /// Stops and waits for the controllers.
    pub async fn stop(mut self) {
        let _ = self.shutdown.send(true);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

/// A REST response: status and JSON body (Null when the body is not JSON).
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub body: Value,
    pub text: String,
}

impl Resp {
    /// Asserts a 200 and returns the body.
    #[track_caller]
    pub fn ok(self) -> Value {
        assert_eq!(
            self.status, 200,
            "expected 200, got {}: {}",
            self.status, self.text
        );
        self.body
    }

    /// Asserts an error response: HTTP status, `code`, and that the message contains every
    /// fragment. Returns the message.
    #[track_caller]
    pub fn err(&self, status: u16, code: &str, fragments: &[&str]) -> String {
        assert_eq!(
            self.status, status,
            "expected {status} {code}, got {}: {}",
            self.status, self.text
        );
        assert_eq!(self.body["code"], code, "wrong code in {}", self.text);
        assert!(
            self.body.get("details").is_some_and(Value::is_array),
            "error body without details: {}",
            self.text
        );
        let msg = self.body["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        for f in fragments {
            assert!(msg.contains(f), "message {msg:?} does not contain {f:?}");
        }
        msg
    }
}

/// Where the test's server currently listens (shared by every client of one [`TestServer`],
/// so clients follow restarts).
pub type Base = Arc<RwLock<String>>;

/// The shared REST client ([`osac_client::Api`]) aimed at the test's current server, with an
/// optional bearer token, answering [`Resp`]s that the tests assert on.
#[derive(Clone)]
pub struct Api {
    client: osac_client::Api,
    base: Base,
    pub token: Option<String>,
}

impl Api {
    pub fn new(base: &Base, token: Option<&str>) -> Api {
        let url = base.read().expect("base").clone();
        let options = osac_client::Options {
            max_idle_per_host: Some(256),
            ..Default::default()
        };
        let client = osac_client::Api::with_options(&url, token.unwrap_or_default(), &options)
            .expect("client");
        Api {
            client,
            base: base.clone(),
            token: token.map(str::to_string),
        }
    }

    /// Base URL of the current server.
    pub fn base(&self) -> String {
        self.base.read().expect("base").clone()
    }

    /// Sends a raw request body.
    pub async fn send_raw(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> Resp {
        let url = osac_client::Url::parse(&format!("{}{path}", self.base()))
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        let reply = self
            .client
            .send(method, url, body)
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        let body = reply.json().unwrap_or(Value::Null);
        Resp {
            status: reply.status.as_u16(),
            body,
            text: reply.text,
        }
    }

    /// Sends `method` to `path` with an optional JSON body.
    pub async fn send(&self, method: Method, path: &str, body: Option<Value>) -> Resp {
        self.send_raw(method, path, body.map(|b| b.to_string().into_bytes()))
            .await
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send_raw(Method::GET, path, None).await
    }
    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.send_raw(Method::POST, path, Some(body.to_string().into_bytes()))
            .await
    }
    pub async fn patch(&self, path: &str, body: Value) -> Resp {
        self.send_raw(Method::PATCH, path, Some(body.to_string().into_bytes()))
            .await
    }
    pub async fn delete(&self, path: &str) -> Resp {
        self.send_raw(Method::DELETE, path, None).await
    }

    /// PATCHes `path` with `{"spec": {field: value}}` and checks the update is refused because
    /// `spec.<field>` is immutable.
    pub async fn refuses_spec_change(&self, path: &str, field: &str, value: Value) {
        self.patch(path, json!({"spec": {field: value}})).await.err(
            400,
            "INVALID_ARGUMENT",
            &[&format!("spec.{field}"), "immutable"],
        );
    }

    /// `POST {PUB}/{collection}` asserting success.
    pub async fn create(&self, collection: &str, body: Value) -> Value {
        let r = self.post(&format!("{PUB}/{collection}"), body).await;
        assert_eq!(
            r.status, 200,
            "create {collection}: {} {}",
            r.status, r.text
        );
        r.body
    }

    /// Lists a collection of the public API with raw query parameters.
    pub async fn list(&self, collection: &str, query: &[(&str, &str)]) -> Resp {
        let url =
            reqwest::Url::parse_with_params(&format!("{}{PUB}/{collection}", self.base()), query)
                .expect("url");
        let path = format!("{}?{}", url.path(), url.query().unwrap_or_default());
        self.get(&path).await
    }

    /// Polls `{prefix}/{collection}/{key}` until `status.state == state`; returns the object.
    pub async fn wait_for_state(
        &self,
        prefix: &str,
        collection: &str,
        key: &str,
        state: &str,
    ) -> Value {
        let start = Instant::now();
        loop {
            let r = self.get(&format!("{prefix}/{collection}/{key}")).await;
            if r.status == 200 && r.body["status"]["state"] == state {
                return r.body;
            }
            assert!(
                start.elapsed() < WAIT,
                "{collection}/{key} did not reach {state}; last: {} {}",
                r.status,
                r.text
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Polls until the object is gone (404).
    pub async fn wait_gone(&self, prefix: &str, collection: &str, key: &str) {
        let start = Instant::now();
        loop {
            let r = self.get(&format!("{prefix}/{collection}/{key}")).await;
            if r.status == 404 {
                return;
            }
            assert!(
                start.elapsed() < WAIT,
                "{collection}/{key} was not deleted; last: {} {}",
                r.status,
                r.text
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Polls until `pred` holds for the object.
    pub async fn wait_until(&self, path: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let r = self.get(path).await;
            if r.status == 200 && pred(&r.body) {
                return r.body;
            }
            assert!(
                start.elapsed() < WAIT,
                "{path}: timed out waiting for {what}; last: {} {}",
                r.status,
                r.text
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Public-API wait for a state.
    pub async fn wait(&self, collection: &str, key: &str, state: &str) -> Value {
        self.wait_for_state(PUB, collection, key, state).await
    }

    /// Creates a READY VirtualNetwork.
    pub async fn ready_vn(&self, name: &str, cidr: &str) -> Value {
        let vn = self
            .create(
                "virtual_networks",
                json!({"metadata": {"name": name}, "spec": {"ipv4_cidr": cidr}}),
            )
            .await;
        self.wait(
            "virtual_networks",
            vn["id"].as_str().expect("id"),
            "VIRTUAL_NETWORK_STATE_READY",
        )
        .await
    }

    /// Creates a READY subnet.
    pub async fn ready_subnet(&self, name: &str, vn: &str, cidr: &str) -> Value {
        let s = self.create("subnets", subnet_body(name, vn, cidr)).await;
        self.wait(
            "subnets",
            s["id"].as_str().expect("id"),
            "SUBNET_STATE_READY",
        )
        .await
    }

    /// Creates an ALLOCATED ExternalIP from `pool` (empty = automatic choice).
    pub async fn allocated_eip(&self, name: &str, pool: &str) -> Value {
        let mut spec = json!({});
        if !pool.is_empty() {
            spec["pool"] = json!(pool);
        }
        let e = self
            .create(
                "external_ips",
                json!({"metadata": {"name": name}, "spec": spec}),
            )
            .await;
        self.wait(
            "external_ips",
            e["id"].as_str().expect("id"),
            "EXTERNAL_IP_STATE_ALLOCATED",
        )
        .await
    }

    /// Creates a READY SecurityGroup allowing SSH.
    pub async fn ready_sg(&self, name: &str, vn: &str) -> Value {
        let sg = self
            .create(
                "security_groups",
                json!({"metadata": {"name": name}, "spec": {"virtual_network": vn, "ingress": [
                    {"protocol": "PROTOCOL_TCP", "port_from": 22, "port_to": 22, "ipv4_cidr": "0.0.0.0/0"}
                ]}}),
            )
            .await;
        self.wait(
            "security_groups",
            sg["id"].as_str().expect("id"),
            "SECURITY_GROUP_STATE_READY",
        )
        .await
    }

    /// Deletes the tenant's (unused) default networking and waits until it is gone, for tests
    /// about lists and isolation that want a tenant owning only what they create.
    pub async fn drop_defaults(&self) {
        for (collection, name) in [
            ("nat_gateways", "default"),
            ("external_ips", "default-nat"),
            ("security_groups", "default"),
            ("subnets", "default-ipv4"),
            ("subnets", "default-ipv6"),
            ("virtual_networks", "default"),
        ] {
            let r = self.delete(&format!("{PUB}/{collection}/{name}")).await;
            assert!(
                r.status == 200 || r.status == 404,
                "delete {collection}/{name}: {} {}",
                r.status,
                r.text
            );
            self.wait_gone(PUB, collection, name).await;
        }
    }

    /// The number of objects in a public collection that the test made: the tenant's default
    /// networking (label `osac.openshift.io/default`) and auto-provisioned objects are not
    /// counted. [`Api::count_all`] counts everything.
    pub async fn count(&self, collection: &str) -> i64 {
        self.list(collection, &[("filter", NOT_DEFAULT)]).await.ok()["total"]
            .as_i64()
            .expect("total")
    }

    /// The number of objects in a public collection (`total` of an unfiltered list).
    pub async fn count_all(&self, collection: &str) -> i64 {
        self.list(collection, &[]).await.ok()["total"]
            .as_i64()
            .expect("total")
    }
}

/// `id` of an object.
pub fn id(v: &Value) -> String {
    v["id"].as_str().expect("object has an id").to_string()
}

/// A status counter (int64 as a JSON string).
pub fn counter(v: &Value, field: &str) -> i64 {
    match &v["status"][field] {
        Value::String(s) => s.parse().expect("int64 string"),
        Value::Number(n) => n.as_i64().expect("int"),
        Value::Null => 0,
        other => panic!("status.{field} is {other}"),
    }
}

/// Generates `sqlite` and `postgres` test variants of `async fn $name(Backend)`; the
/// PostgreSQL one passes trivially when `OSAC_TEST_DATABASE_URL` is unset.
#[macro_export]
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        $(mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::common::Backend::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name($crate::common::Backend::Postgres).await
            }
        })*
    };
}

/// The condition of `kind_type` in an object's status, if any.
pub fn condition<'a>(obj: &'a Value, kind_type: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind_type)
}
