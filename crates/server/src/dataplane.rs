//! The real dataplane in the server: the `linux` driver factory for manager
//! registrations, the dev-mode registry on the linux managers (`osac server --dev --fabric
//! linux`), and the provider's garbage collection endpoint
//! (`POST /api/private/v1/dataplane:gc`, used by `osac admin dataplane gc`).
//!
//! Garbage collection runs in the server, which holds the store: it collects the ids the store
//! knows (VirtualNetworks, Subnets, ComputeInstances, Hosts, and the hosting clusters of the
//! registered k8s managers) and removes our kernel state that belongs to none of them.

use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use osac_backends::{
    Capability, DriverConfig, DriverContext, DriverFactory, Registration, Registry, RegistryError,
    Role, RoleManager,
};
use osac_linux::provision::MachineScope;
use osac_linux::{LinuxFabric, LinuxK8s, LinuxSettings, OwnedSet};
use osac_model::Kind;
use serde_json::{Value, json};

use osac_api::error::{ApiError, ApiResult};
use osac_api::service::Service;

/// Which managers and provisioner the dev registry uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum FabricChoice {
    /// In-process simulation (no privileges).
    #[default]
    Sim,
    /// The real dataplane on this machine's kernel (root), with these settings.
    Linux(LinuxSettings),
    /// OVN: a sandbox under a directory (root), or an existing deployment.
    Ovn(crate::ovn_dev::OvnDev),
}

/// Names of the dev-mode linux managers.
pub const LINUX_FABRIC: &str = "linux-fabric";
/// See [`LINUX_FABRIC`].
pub const LINUX_K8S: &str = "linux-k8s";

/// Starts `linux` registrations with the managers of `osac-linux`.
pub struct LinuxFactory;

#[async_trait]
impl DriverFactory for LinuxFactory {
    async fn start(&self, registration: Registration) -> Result<RoleManager, String> {
        let DriverConfig::Linux(value) = &registration.driver else {
            return Err(format!(
                "driver '{}' is not linux",
                registration.driver.kind()
            ));
        };
        let settings = LinuxSettings::from_yaml_value(Some(value)).map_err(|e| e.to_string())?;
        Ok(match registration.role {
            Role::Fabric => RoleManager::Fabric(Arc::new(
                LinuxFabric::new(registration, settings)
                    .await
                    .map_err(|e| e.to_string())?,
            )),
            Role::K8s => RoleManager::K8s(Arc::new(
                LinuxK8s::new(registration, settings)
                    .await
                    .map_err(|e| e.to_string())?,
            )),
        })
    }
}

/// A driver context that can start `linux` registrations.
pub fn with_linux(ctx: DriverContext) -> DriverContext {
    ctx.with_driver_factory("linux", Arc::new(LinuxFactory))
}

/// Checks root and tools before anything touches the kernel; the message says what to do.
pub async fn preflight() -> Result<(), String> {
    osac_linux::preflight()
        .await
        .map_err(|e| format!("--fabric linux cannot run here: {e}"))
}

fn registration(name: &str, role: Role, settings: &LinuxSettings) -> Result<Registration, String> {
    let value = serde_yaml_ng::to_value(settings).map_err(|e| e.to_string())?;
    Ok(Registration {
        name: name.to_string(),
        role,
        description: format!("real {role} dataplane on this machine's kernel (dev mode)"),
        // IPv4 first: dev mode declares what the dataplane tests prove.
        capabilities: [Capability::Ipv4, Capability::Ipv6, Capability::DualStack]
            .into_iter()
            .collect(),
        driver: DriverConfig::Linux(value),
        hosting_clusters: match role {
            Role::Fabric => Vec::new(),
            Role::K8s => settings.hosting_clusters.clone(),
        },
    })
}

/// The dev registry on the real dataplane: `linux-fabric` and `linux-k8s`.
pub async fn dev_registry(
    ctx: &DriverContext,
    settings: &LinuxSettings,
) -> Result<Registry, RegistryError> {
    registry_of(
        ctx,
        [(LINUX_FABRIC, Role::Fabric), (LINUX_K8S, Role::K8s)],
        |name, role| registration(name, role, settings),
    )
    .await
}

/// A dev registry of a fabric and a k8s manager (`managers`: name and role), each registered
/// as `registration` builds it; a registration that cannot be built is the driver's error.
pub async fn registry_of(
    ctx: &DriverContext,
    managers: [(&str, Role); 2],
    registration: impl Fn(&str, Role) -> Result<Registration, String>,
) -> Result<Registry, RegistryError> {
    let mut registry = Registry::new();
    for (name, role) in managers {
        let r = registration(name, role).map_err(|message| RegistryError::Driver {
            name: name.to_string(),
            origin: "programmatic".into(),
            message,
        })?;
        registry.register(r, ctx).await?;
    }
    Ok(registry)
}

/// Whether any registered manager uses the linux driver (then workloads use the linux
/// provisioner).
pub fn uses_linux(registry: &Registry) -> bool {
    registry
        .registrations()
        .iter()
        .any(|r| matches!(r.driver, DriverConfig::Linux(_)))
}

/// Whether the server collects garbage at start-up: some linux manager is registered and none
/// of them turned `gc_on_start` off.
pub fn gc_on_start(registry: &Registry) -> bool {
    let linux: Vec<bool> = registry
        .registrations()
        .iter()
        .filter_map(|r| match &r.driver {
            DriverConfig::Linux(v) => {
                Some(LinuxSettings::from_yaml_value(Some(v)).is_ok_and(|s| s.gc_on_start))
            }
            _ => None,
        })
        .collect();
    !linux.is_empty() && linux.iter().all(|on| *on)
}

/// The start-up garbage collection: removes our kernel state that belongs to nothing in the store
/// (what a crash or a lost object left behind); the controllers' resync rebuilds what is
/// missing. Failures are logged, never fatal: the next `osac admin dataplane gc` retries.
pub async fn collect_garbage_at_start(service: &Service) {
    let owned = match owned_set(service).await {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(error = %e, "start-up garbage collection skipped: cannot read the store");
            return;
        }
    };
    match osac_linux::fabric_manager::gc_among(&owned, None).await {
        Ok(r) => tracing::info!(
            namespaces = ?r.namespaces,
            bridges = ?r.bridges,
            processes = ?r.processes,
            tables = ?r.tables,
            "start-up garbage collection done"
        ),
        Err(e) => tracing::warn!(error = %e, "start-up garbage collection failed"),
    }
}

/// The machines of this server's store (VM instance ids and inventory hosts): the only
/// machine namespaces its provisioner runs DHCP clients in.
pub fn machine_scope(store: Arc<dyn osac_store::Store>) -> Arc<dyn MachineScope> {
    Arc::new(StoreMachines(store))
}

struct StoreMachines(Arc<dyn osac_store::Store>);

#[async_trait]
impl MachineScope for StoreMachines {
    async fn machine_keys(&self) -> Option<std::collections::BTreeSet<String>> {
        let mut keys = std::collections::BTreeSet::new();
        for kind in [Kind::ComputeInstance, Kind::Host] {
            match self.0.ids(kind).await {
                Ok(ids) => keys.extend(ids),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot list machines for the DHCP supervisor");
                    return None;
                }
            }
        }
        Some(keys)
    }
}

/// What the store and the registry own: everything else of ours in the kernel is garbage.
pub async fn owned_set(service: &Service) -> ApiResult<OwnedSet> {
    let ids = |kind: Kind| {
        let store = service.store.clone();
        async move {
            store.ids(kind).await.map_err(|e| {
                ApiError::new(osac_api::error::Code::Unavailable, format!("store: {e}"))
            })
        }
    };
    let mut owned = OwnedSet {
        virtual_networks: ids(Kind::VirtualNetwork).await?.into_iter().collect(),
        subnets: ids(Kind::Subnet).await?.into_iter().collect(),
        machines: ids(Kind::ComputeInstance).await?.into_iter().collect(),
        hosting_clusters: Default::default(),
    };
    owned.machines.extend(ids(Kind::Host).await?);
    for r in service.registry.registrations() {
        owned
            .hosting_clusters
            .extend(r.hosting_clusters.iter().cloned());
    }
    Ok(owned)
}

/// Where [`gc`] is served (the private API).
pub const GC_PATH: &str = "/api/private/v1/dataplane:gc";

/// `POST /api/private/v1/dataplane:gc` — body optional: `{"scope": ["osac-…", …]}` limits the
/// collection to those namespaces (several deployments sharing one machine, e.g. tests).
pub async fn gc(State(s): State<Arc<Service>>, headers: HeaderMap, body: Bytes) -> Response {
    let result = async {
        let caller = s
            .auth
            .authenticate(headers.get("authorization").and_then(|v| v.to_str().ok()))
            .await?;
        osac_api::access::note_subject(&caller.subject);
        if !caller.is_provider() {
            return Err(ApiError::denied(
                "the private API is for provider administrators",
            ));
        }
        let scope: Option<Vec<String>> =
            if body.is_empty() {
                None
            } else {
                let v: Value = serde_json::from_slice(&body)
                    .map_err(|e| ApiError::invalid(format!("body is not JSON: {e}")))?;
                let Some(o) = v.as_object() else {
                    return Err(ApiError::invalid("body must be a JSON object"));
                };
                if let Some(k) = o.keys().find(|k| *k != "scope") {
                    return Err(ApiError::invalid(format!(
                        "body: unknown field '{k}' (only scope is taken)"
                    )));
                }
                match v.get("scope") {
                    None | Some(Value::Null) => None,
                    Some(list) => Some(serde_json::from_value(list.clone()).map_err(|_| {
                        ApiError::invalid("scope must be a list of namespace names")
                    })?),
                }
            };
        // The request is checked before the precondition, so a malformed one is a 400 on every
        // deployment.
        if !uses_linux(&s.registry) {
            return Err(ApiError::precondition(
                "no linux manager is registered: there is no real dataplane to collect",
            ));
        }
        let owned = owned_set(&s).await?;
        let report = osac_linux::fabric_manager::gc_among(&owned, scope.as_deref())
            .await
            .map_err(|e| {
                ApiError::new(
                    osac_api::error::Code::Unavailable,
                    format!("garbage collection failed: {e}"),
                )
            })?;
        Ok(json!({
            "namespaces": report.namespaces,
            "bridges": report.bridges,
            "processes": report.processes,
            "tables": report.tables,
        }))
    }
    .await;
    match result {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}
