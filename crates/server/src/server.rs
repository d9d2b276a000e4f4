//! Wires store, managers, controllers and both transports into one listening server; used by
//! `osac server` and by the integration tests (which start it in-process on a random port).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use axum::Router;
use axum::routing::get;
use std::time::Duration;

use osac_backends::provision::{ExecProvisioner, Provisioner, SimProvisioner};
use osac_backends::{DriverContext, Registry, SimStateStore};
use osac_controller::{
    ControllerConfig, Controllers, DEFAULT_IP_DISCOVERY_TIMEOUT, Dispatcher, ReplicaConfig,
};
use osac_linux::provision::LinuxProvisioner;
use osac_store::Store;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::dataplane::{self, FabricChoice};
use crate::ovn_dev;
use osac_api::auth::{AuthConfig, Authenticator};
use osac_api::listen::{self, TransportConfig};
use osac_api::service::Service;
use osac_api::{access, console, grpc, health, metrics, rest};

/// How to run the server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// `sqlite://…` or `postgres://…`.
    pub database_url: String,
    pub auth: AuthConfig,
    /// Manager registrations directory; None = the dev registry (sim fabric + sim k8s).
    pub managers_dir: Option<PathBuf>,
    pub controller: ControllerConfig,
    /// How long a cluster waits for its agents' DHCP leases before it shows the
    /// `NetworkingIPDiscoveryTimeout` condition (it keeps retrying).
    pub ip_discovery_timeout: Duration,
    /// Dev registry on simulated or real (linux, root) managers; with `managers_dir` the
    /// registrations decide: a `role: provisioner` file chooses the provisioner, else any
    /// `linux` manager brings the linux provisioner.
    pub fabric: FabricChoice,
    /// How long every operation of the `sim` managers takes (default none): a simulated
    /// backend's latency, for trying timeouts, load and failover with realistic timing.
    pub sim_latency: Duration,
    /// TLS, connection limits and the metrics listener (default: plain HTTP, 4096 connections,
    /// 256 per client address, 5 s idle, 30 s to a response, no metrics listener).
    pub transport: TransportConfig,
    /// What tenants may consume (provider default quotas).
    pub limits: LimitsConfig,
}

/// Limits the provider puts on tenants.
#[derive(Debug, Clone, Default)]
pub struct LimitsConfig {
    /// Each tenant's limit where its own `spec.quotas` sets none (built-in defaults: see
    /// [`osac_model::quota::Quota::default_limit`]).
    pub default_quotas: osac_model::quota::QuotaLimits,
    /// Caps on open watches per token and per tenant.
    pub watches: osac_api::watch_slots::WatchLimits,
}

impl ServerConfig {
    /// Default of [`ServerConfig::ip_discovery_timeout`] (300 s).
    pub const DEFAULT_IP_DISCOVERY_TIMEOUT: Duration = DEFAULT_IP_DISCOVERY_TIMEOUT;
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot open the store")]
    Store(#[from] osac_store::StoreError),
    #[error("cannot load manager registrations")]
    Registry(#[from] osac_backends::RegistryError),
    #[error("cannot open the simulated provisioner")]
    Provisioner(#[from] osac_backends::SimError),
    #[error("cannot start the registered provisioner")]
    ExecProvisioner(#[from] osac_backends::exec::NotExecDriver),
    #[error("{0}")]
    Dataplane(String),
    #[error("cannot join the other replicas")]
    Replica(#[from] osac_controller::JoinError),
    #[error("cannot set up authentication")]
    Auth(#[from] osac_api::auth::AuthSetupError),
    #[error("cannot generate the OpenAPI document")]
    OpenApi(#[from] osac_api::openapi::OpenApiError),
    #[error("cannot build gRPC reflection")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("cannot load the TLS certificate")]
    Tls(#[from] osac_api::tls::TlsError),
    #[error("cannot listen on {addr}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// A started server.
pub struct RunningServer {
    pub addr: SocketAddr,
    /// Where `/healthz`, `/readyz` and `/metrics` are served apart from the API
    /// ([`TransportConfig::metrics_listen`]), if anywhere.
    pub metrics_addr: Option<SocketAddr>,
    pub store: Arc<dyn Store>,
    pub registry: Arc<Registry>,
    pub service: Arc<Service>,
    /// The simulated provisioner (persisted in the store), for tests to inject failures and
    /// inspect machines; the controllers use it unless a provisioner registration or a linux
    /// manager chose another.
    pub provisioner: Arc<SimProvisioner>,
    /// The provisioner of the real dataplane, when the provisioner registration says `linux`
    /// or, without one, a `linux` manager is registered (it is then the one the controllers
    /// use).
    pub linux_provisioner: Option<Arc<LinuxProvisioner>>,
    /// The OVN sandbox of `--fabric ovn` dev mode, stopped with the server.
    pub ovn_sandbox: Option<Arc<osac_ovn::Sandbox>>,
    tls: bool,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningServer {
    /// Base URL of the REST and gRPC endpoints.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Stops serving and the controllers, and waits for them.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        if let Some(p) = &self.linux_provisioner {
            p.shutdown().await;
        }
        if let Some(s) = &self.ovn_sandbox {
            s.stop().await;
        }
    }

    /// Resolves when the server stops (e.g. after shutdown by a signal).
    pub async fn wait(self) {
        for t in self.tasks {
            let _ = t.await;
        }
        if let Some(p) = &self.linux_provisioner {
            p.shutdown().await;
        }
        if let Some(s) = &self.ovn_sandbox {
            s.stop().await;
        }
    }

    /// A sender that stops the server when `true` is sent.
    pub fn shutdown_handle(&self) -> watch::Sender<bool> {
        self.shutdown.clone()
    }
}

/// Where the sim drivers persist their tables: the store's key/value table. Tests that run
/// controllers of their own over a server's store use the same.
pub fn sim_state_in(store: Arc<dyn Store>) -> Arc<dyn SimStateStore> {
    Arc::new(StoreSimState(store))
}

/// The sim drivers persist their tables in the store's key/value table.
struct StoreSimState(Arc<dyn Store>);

#[async_trait]
impl SimStateStore for StoreSimState {
    async fn load_all(&self, namespace: &str) -> Result<Vec<(String, String)>, String> {
        self.0.kv_load(namespace).await.map_err(|e| e.to_string())
    }
    async fn put(&self, namespace: &str, key: &str, value: &str) -> Result<(), String> {
        self.0
            .kv_put(namespace, key, value)
            .await
            .map_err(|e| e.to_string())
    }
    async fn delete(&self, namespace: &str, key: &str) -> Result<(), String> {
        self.0
            .kv_delete(namespace, key)
            .await
            .map_err(|e| e.to_string())
    }
    /// Replicas sharing a PostgreSQL database write the same sim tables.
    fn shared(&self) -> bool {
        self.0.leases().is_some()
    }
    async fn exclusive(
        &self,
        namespace: &str,
        seen: i64,
    ) -> Result<Box<dyn osac_backends::SharedBatch>, String> {
        match self.0.kv_exclusive(namespace, seen).await {
            Ok(Some(batch)) => Ok(Box::new(SharedKv(batch))),
            Ok(None) => Err(format!("namespace {namespace} is not shared")),
            Err(e) => Err(e.to_string()),
        }
    }
    async fn write_current(
        &self,
        namespace: &str,
        seen: i64,
        fences: &[osac_backends::fence::Fence],
        changes: &[(String, Option<String>)],
    ) -> Result<Option<i64>, String> {
        let fences: Vec<osac_store::Fence> = fences
            .iter()
            .map(|f| (f.shard, f.replica.clone(), f.token))
            .collect();
        self.0
            .kv_write_current(namespace, seen, &fences, changes)
            .await
            .map_err(|e| e.to_string())
    }
    /// One store transaction for all records of a sim batch.
    async fn put_many(
        &self,
        namespace: &str,
        changes: &[(String, Option<String>)],
    ) -> Result<(), String> {
        self.0
            .kv_write(namespace, changes)
            .await
            .map_err(|e| e.to_string())
    }
}

/// A sim batch of a namespace the replicas share, over the store's journalled batch.
struct SharedKv(Box<dyn osac_store::KvBatch>);

#[async_trait]
impl osac_backends::SharedBatch for SharedKv {
    fn generation(&self) -> i64 {
        self.0.generation()
    }
    fn take_missed(&mut self) -> osac_backends::MissedRecords {
        match self.0.take_missed() {
            osac_store::Missed::Changes(c) => osac_backends::MissedRecords::Changes(c),
            osac_store::Missed::Everything(e) => osac_backends::MissedRecords::Everything(e),
        }
    }
    async fn fence_holds(&mut self, fence: &osac_backends::fence::Fence) -> Result<bool, String> {
        self.0
            .fence_holds(fence.shard, &fence.replica, fence.token)
            .await
            .map_err(|e| e.to_string())
    }
    async fn commit(self: Box<Self>, changes: &[(String, Option<String>)]) -> Result<i64, String> {
        self.0.commit(changes).await.map_err(|e| e.to_string())
    }
}

/// Unknown paths: gRPC clients get UNIMPLEMENTED (as tonic would answer), everyone else a 404
/// with the JSON error body (tonic's catch-all would otherwise answer REST clients 200).
async fn no_route(req: axum::extract::Request) -> axum::response::Response {
    use axum::response::IntoResponse;
    let grpc = req
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/grpc"));
    if grpc {
        return tonic::Status::unimplemented(format!("unknown method {}", req.uri().path()))
            .into_http();
    }
    osac_api::error::ApiError::not_found(format!(
        "no route for {} {}",
        req.method(),
        req.uri().path()
    ))
    .into_response()
}

/// The metrics and health listener's routes: liveness, readiness and the metrics text, no
/// token (its address is the provider's to protect), anything else 404; each answers within
/// the request timeout like the API's.
fn ops_router<R, F>(store: Arc<dyn Store>, readyz: R, request_timeout: Duration) -> Router
where
    R: Fn() -> F + Clone + Send + Sync + 'static,
    F: std::future::Future<Output = (axum::http::StatusCode, String)> + Send + 'static,
{
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(move || metrics::render(store.clone())))
        .fallback(no_route)
        .layer(axum::middleware::from_fn_with_state(
            request_timeout,
            listen::request_timeout,
        ))
}

/// Opens everything and starts serving.
pub async fn start(config: ServerConfig) -> Result<RunningServer, ServerError> {
    // Before anything else: a broken certificate must not leave half a server behind.
    let tls = config
        .transport
        .tls
        .clone()
        .map(osac_api::tls::TlsReloader::load)
        .transpose()?;
    let store = osac_store::open(&config.database_url).await?;
    let sim_state = sim_state_in(store.clone());
    let ctx = crate::ovn::with_ovn(dataplane::with_linux(DriverContext {
        sim_latency: config.sim_latency,
        ..DriverContext::new(sim_state.clone())
    }));
    let provisioner = SimProvisioner::open(sim_state).await?;
    if let (None, FabricChoice::Linux(_)) = (&config.managers_dir, &config.fabric) {
        dataplane::preflight()
            .await
            .map_err(ServerError::Dataplane)?;
    }
    let ovn_dev = match (&config.managers_dir, &config.fabric) {
        (None, FabricChoice::Ovn(dev)) => {
            ovn_dev::preflight(dev)
                .await
                .map_err(ServerError::Dataplane)?;
            let settings = ovn_dev::settings(dev.northbound()).map_err(ServerError::Dataplane)?;
            let sandbox = match dev.northbound {
                Some(_) => None,
                None => Some(Arc::new(
                    ovn_dev::start_sandbox(dev)
                        .await
                        .map_err(ServerError::Dataplane)?,
                )),
            };
            Some((dev, settings, sandbox))
        }
        _ => None,
    };
    let ovn_sandbox = ovn_dev.as_ref().and_then(|(_, _, s)| s.clone());
    let registry = match (&config.managers_dir, &config.fabric, &ovn_dev) {
        (Some(dir), _, _) => Registry::load_dir(dir, &ctx).await,
        (None, _, Some((_, settings, _))) => ovn_dev::dev_registry(&ctx, settings).await,
        (None, FabricChoice::Linux(settings), _) => dataplane::dev_registry(&ctx, settings).await,
        (None, _, None) => Registry::sim_dev(&ctx).await,
    };
    let registry = match registry {
        Ok(r) => Arc::new(r),
        Err(e) => {
            if let Some(s) = &ovn_sandbox {
                s.stop().await;
            }
            return Err(e.into());
        }
    };
    // A `role: provisioner` registration decides; without one, linux managers bring the
    // linux provisioner, the dev OVN sandbox its machines' provisioner, and anything else the
    // simulated one.
    let registered_provisioner = registry.provisioner();
    let linux_provisioner = match (&ovn_dev, registered_provisioner.map(|r| &r.driver)) {
        (Some((dev, settings, Some(sandbox))), _) => Some(
            ovn_dev::provisioner(
                sandbox.clone(),
                settings.clone(),
                dev,
                dataplane::machine_scope(store.clone()),
            )
            .map_err(ServerError::Dataplane)?,
        ),
        (_, Some(driver)) => matches!(driver, osac_backends::DriverConfig::Linux(_)).then(|| {
            LinuxProvisioner::start(
                osac_linux::dhcp::Timing::default(),
                Some(dataplane::machine_scope(store.clone())),
            )
        }),
        (_, None) => dataplane::uses_linux(&registry).then(|| {
            LinuxProvisioner::start(
                osac_linux::dhcp::Timing::default(),
                Some(dataplane::machine_scope(store.clone())),
            )
        }),
    };
    let active_provisioner: Arc<dyn Provisioner> =
        match (&linux_provisioner, registered_provisioner) {
            (Some(p), _) => p.clone(),
            (None, Some(r)) if matches!(r.driver, osac_backends::DriverConfig::Exec(_)) => {
                Arc::new(ExecProvisioner::new(r.clone())?)
            }
            (None, _) => provisioner.clone(),
        };
    let auth = Arc::new(Authenticator::new(&config.auth, store.clone()).await?);
    let service = Arc::new(
        Service::new(store.clone(), registry.clone(), auth)
            .with_quota_defaults(config.limits.default_quotas)
            .with_watch_limits(config.limits.watches),
    );
    // Before anything can create kernel state (no listener, no controllers yet), so whatever
    // is not in the store now really is garbage.
    if dataplane::gc_on_start(&registry) {
        dataplane::collect_garbage_at_start(&service).await;
    }

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServerError::Listen {
            addr: config.listen,
            source,
        })?;
    let addr = listener
        .local_addr()
        .map_err(|source| ServerError::Listen {
            addr: config.listen,
            source,
        })?;

    let metrics_listener = match config.transport.metrics_listen {
        Some(at) => {
            let l = tokio::net::TcpListener::bind(at)
                .await
                .map_err(|source| ServerError::Listen { addr: at, source })?;
            let bound = l
                .local_addr()
                .map_err(|source| ServerError::Listen { addr: at, source })?;
            Some((l, bound))
        }
        None => None,
    };

    let controllers = Controllers::new(
        store.clone(),
        Dispatcher::new(registry.clone()),
        config.controller.clone(),
    )
    .with_provisioner(active_provisioner)
    .with_ip_discovery_timeout(config.ip_discovery_timeout);
    // On a store several processes can share, this process is one replica among them.
    let controllers = if store.leases().is_some() {
        let replica = ReplicaConfig::new(osac_store::ReplicaInfo {
            id: uuid::Uuid::new_v4().to_string(),
            name: osac_api::replicas::process_name(),
            address: addr.to_string(),
            dataplane: dataplane::uses_linux(&registry),
        });
        osac_controller::replica::join(&*store, &replica).await?;
        controllers.with_replica(replica)
    } else {
        controllers
    };
    let ownership = controllers.ownership();
    let ready_store = store.clone();
    let readyz = move || {
        let ownership = ownership.clone();
        osac_api::replicas::readyz(ready_store.clone(), move || {
            ownership
                .replica_id()
                .map(|id| (id, ownership.held().len()))
        })
    };
    let metrics_service = service.clone();
    metrics::register_process_metrics();
    let (shutdown, rx) = watch::channel(false);
    let (health, health_task) = health::start(store.clone(), rx.clone()).await;
    let openapi = axum::body::Bytes::from(osac_api::openapi::document_json(
        osac_proto::FILE_DESCRIPTOR_SET,
    )?);
    let app = Router::new()
        .merge(rest::router(service.clone()))
        .merge(console::router(service.clone()))
        .merge(
            Router::new()
                .route(dataplane::GC_PATH, axum::routing::post(dataplane::gc))
                .with_state(service.clone()),
        )
        .merge(
            grpc::routes(service.clone())?
                .add_service(health)
                .into_axum_router(),
        )
        .route("/healthz", get(|| async { "ok" }))
        // Unauthenticated, like the probes: which release answers (`osac version`).
        .route(
            "/version",
            get(|| async { axum::Json(serde_json::json!({"version": env!("CARGO_PKG_VERSION")})) }),
        )
        .route(
            osac_api::openapi::PATH,
            get(move || {
                let body = openapi.clone();
                async move {
                    (
                        [(axum::http::header::CONTENT_TYPE, "application/json")],
                        body,
                    )
                }
            }),
        )
        .route("/readyz", get(readyz.clone()))
        // The whole provider's figures: provider admins only on this port.
        .route(
            "/metrics",
            get(move |headers: axum::http::HeaderMap| {
                metrics::render_for_provider(metrics_service.clone(), headers)
            }),
        )
        .fallback(no_route)
        .layer(axum::middleware::from_fn_with_state(
            config.transport.request_timeout,
            listen::request_timeout,
        ))
        .layer(axum::middleware::from_fn(access::observe));

    let mut http_rx = rx.clone();
    let watched = service.clone();
    let transport = config.transport.clone();
    let serving_tls = tls.clone();
    let http = tokio::spawn(async move {
        let stop = async move {
            let _ = http_rx.wait_for(|v| *v).await;
        };
        // Watches stream until their client leaves; a graceful shutdown waits for them.
        let close_watches = move || watched.close_watches();
        listen::serve(listener, app, &transport, serving_tls, stop, close_watches).await;
    });
    let mut tasks = vec![http, health_task];
    let metrics_addr = metrics_listener.as_ref().map(|(_, a)| *a);
    if let Some((listener, _)) = metrics_listener {
        let ops = ops_router(store.clone(), readyz, config.transport.request_timeout);
        let mut ops_rx = rx.clone();
        let ops_transport = config.transport.for_metrics();
        tasks.push(tokio::spawn(async move {
            let stop = async move {
                let _ = ops_rx.wait_for(|v| *v).await;
            };
            listen::serve(listener, ops, &ops_transport, None, stop, || {}).await;
        }));
    }
    if let Some(tls) = &tls {
        tasks.push(tls.clone().spawn(rx.clone()));
    }
    let ctl = tokio::spawn(controllers.run(rx));
    tasks.push(ctl);
    tracing::info!(%addr, tls = tls.is_some(), "osac-net listening (REST + gRPC)");
    if let Some(at) = metrics_addr {
        tracing::info!(addr = %at, "metrics, health and readiness listening (plain HTTP, no token)");
    }
    Ok(RunningServer {
        addr,
        metrics_addr,
        store,
        registry,
        service,
        provisioner,
        linux_provisioner,
        ovn_sandbox,
        tls: tls.is_some(),
        shutdown,
        tasks,
    })
}
