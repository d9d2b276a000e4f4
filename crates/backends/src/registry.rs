//! The registry of managers, loaded from a config directory (one YAML file per manager) or
//! filled programmatically (dev mode, tests). NetworkClass validation asks it which managers
//! exist, for which role, and with which capabilities.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::contract::{Capability, FabricManager, K8sManager, Role};
use crate::exec::{ExecManager, NotExecDriver};
use crate::provision::{ProvisionerRegistration, RegistrationFile};
use crate::registration::{DriverConfig, Registration, RegistrationError, is_dns_label};
use crate::sim::{MemorySimState, SimError, SimFabric, SimK8s, SimManager, SimStateStore};

/// A started manager as the trait object of its role: what the registry holds.
#[derive(Clone)]
pub enum RoleManager {
    /// A manager of role fabric.
    Fabric(Arc<dyn FabricManager>),
    /// A manager of role k8s.
    K8s(Arc<dyn K8sManager>),
}

impl RoleManager {
    /// The configuration the manager was registered with.
    pub fn registration(&self) -> &Registration {
        match self {
            RoleManager::Fabric(m) => m.registration(),
            RoleManager::K8s(m) => m.registration(),
        }
    }

    /// The role whose operations the manager serves.
    pub fn role(&self) -> Role {
        match self {
            RoleManager::Fabric(_) => Role::Fabric,
            RoleManager::K8s(_) => Role::K8s,
        }
    }
}

/// Starts managers of a driver this crate does not implement itself (`linux` lives in
/// `osac-linux`, which depends on this crate, so it plugs in through the context).
#[async_trait::async_trait]
pub trait DriverFactory: Send + Sync {
    /// Starts the manager of `registration` (its [`DriverConfig`] carries the settings), as
    /// the trait object of the registration's role.
    async fn start(&self, registration: Registration) -> Result<RoleManager, String>;
}

/// What drivers need from the process.
#[derive(Clone)]
pub struct DriverContext {
    /// Where `sim` managers persist their tables.
    pub sim_state: Arc<dyn SimStateStore>,
    /// When set, every `sim` fabric registration uses this engine (so tests and dev tooling
    /// can inspect it); otherwise each opens its own in namespace `sim-fabric/<name>`.
    pub sim_fabric: Option<Arc<SimFabric>>,
    /// Same for `sim` k8s registrations (own namespace: `sim-k8s/<name>`).
    pub sim_k8s: Option<Arc<SimK8s>>,
    /// Factories of drivers implemented outside this crate, by driver name (`linux`).
    pub factories: BTreeMap<String, Arc<dyn DriverFactory>>,
    /// How long every `sim` manager operation takes (a simulated backend's latency).
    pub sim_latency: std::time::Duration,
}

impl DriverContext {
    /// A context persisting sim state in `sim_state`, with per-registration engines.
    pub fn new(sim_state: Arc<dyn SimStateStore>) -> Self {
        DriverContext {
            sim_state,
            sim_fabric: None,
            sim_k8s: None,
            factories: BTreeMap::new(),
            sim_latency: std::time::Duration::ZERO,
        }
    }

    /// A context whose sim state lives in memory only (tests, throwaway runs).
    pub fn in_memory() -> Self {
        Self::new(Arc::new(MemorySimState::new()))
    }

    /// Shares one fabric engine between all sim fabric registrations.
    pub fn with_sim_fabric(mut self, engine: Arc<SimFabric>) -> Self {
        self.sim_fabric = Some(engine);
        self
    }

    /// Lets registrations with driver `driver` (e.g. `linux`) start through `factory`.
    pub fn with_driver_factory(mut self, driver: &str, factory: Arc<dyn DriverFactory>) -> Self {
        self.factories.insert(driver.to_string(), factory);
        self
    }

    /// Shares one k8s engine between all sim k8s registrations.
    pub fn with_sim_k8s(mut self, engine: Arc<SimK8s>) -> Self {
        self.sim_k8s = Some(engine);
        self
    }
}

/// Loading or querying the registry failed.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The config directory cannot be listed.
    #[error("cannot read manager directory {}: {source}", dir.display())]
    ReadDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A registration file cannot be read.
    #[error("cannot read manager registration {}: {source}", file.display())]
    ReadFile {
        /// The file.
        file: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A registration file is invalid.
    #[error("invalid manager registration {}: {source}", file.display())]
    Invalid {
        /// The file.
        file: PathBuf,
        /// Why.
        source: RegistrationError,
    },
    /// The driver could not be started for a registration.
    #[error("cannot start manager '{name}' ({origin}): {message}")]
    Driver {
        /// Registration name.
        name: String,
        /// File or "programmatic".
        origin: String,
        /// Why.
        message: String,
    },
    /// Two registrations with one name.
    #[error("manager '{name}' is registered twice: {first} and {second}")]
    Duplicate {
        /// The name.
        name: String,
        /// Where it was registered first.
        first: String,
        /// Where it was registered again.
        second: String,
    },
    /// More than one `role: provisioner` file.
    #[error(
        "only one provisioner may be registered, but {first} and {second} both have role provisioner"
    )]
    TwoProvisioners {
        /// Where the first one was registered.
        first: String,
        /// Where the second one was registered.
        second: String,
    },
    /// A programmatic registration with a bad name.
    #[error("manager name '{0}' is not a DNS label")]
    InvalidName(String),
    /// A NetworkClass names a manager nobody registered.
    #[error("manager '{0}' is not registered")]
    NotRegistered(String),
    /// A manager serves another role than its registration names.
    #[error(
        "manager '{name}' is registered for role {registered}, but its driver serves role {serves}"
    )]
    DriverRole {
        /// The name.
        name: String,
        /// The role of its registration.
        registered: Role,
        /// The role whose operations the driver implements.
        serves: Role,
    },
    /// A NetworkClass names a manager of the other role.
    #[error("manager '{name}' is registered for role {registered}, not {wanted}")]
    WrongRole {
        /// The name.
        name: String,
        /// Its role.
        registered: Role,
        /// The role asked for.
        wanted: Role,
    },
}

/// The managers of this process, by name.
#[derive(Default, Clone)]
pub struct Registry {
    managers: BTreeMap<String, RoleManager>,
    origins: BTreeMap<String, String>,
    sim_fabrics: BTreeMap<String, Arc<SimFabric>>,
    sim_k8s: BTreeMap<String, Arc<SimK8s>>,
    provisioner: Option<ProvisionerRegistration>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("managers", &self.origins)
            .finish()
    }
}

const PROGRAMMATIC: &str = "programmatic";

/// Refusal of `name`, registered for `registered`, where a manager of role `wanted` is needed.
fn wrong_role(name: &str, registered: Role, wanted: Role) -> RegistryError {
    RegistryError::WrongRole {
        name: name.to_string(),
        registered,
        wanted,
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Loads every `*.yaml` / `*.yml` file of `dir` (not recursive; hidden files skipped), one
    /// registration per file, in file-name order.
    pub async fn load_dir(dir: &Path, ctx: &DriverContext) -> Result<Registry, RegistryError> {
        let mut files = Vec::new();
        let entries = std::fs::read_dir(dir).map_err(|source| RegistryError::ReadDir {
            dir: dir.to_path_buf(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| RegistryError::ReadDir {
                dir: dir.to_path_buf(),
                source,
            })?;
            let path = entry.path();
            let hidden = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_none_or(|n| n.starts_with('.'));
            let yaml = matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml")
            );
            if !hidden && yaml && path.is_file() {
                files.push(path);
            }
        }
        files.sort();
        let mut registry = Registry::new();
        for file in files {
            let text =
                std::fs::read_to_string(&file).map_err(|source| RegistryError::ReadFile {
                    file: file.clone(),
                    source,
                })?;
            let base = file.parent().unwrap_or(dir);
            let parsed = RegistrationFile::from_yaml(&text, base).map_err(|source| {
                RegistryError::Invalid {
                    file: file.clone(),
                    source,
                }
            })?;
            let origin = file.display().to_string();
            match parsed {
                RegistrationFile::Manager(registration) => {
                    registry.check_free(&registration.name, &origin)?;
                    registry.start(registration, ctx, origin).await?
                }
                RegistrationFile::Provisioner(provisioner) => {
                    registry.set_provisioner(provisioner, origin)?
                }
            }
        }
        Ok(registry)
    }

    /// The dev-mode registry: `sim-fabric` and `sim-k8s` (hosting clusters `hosting-a`,
    /// `hosting-b`), persisting through `ctx.sim_state` (or using its shared engines).
    pub async fn sim_dev(ctx: &DriverContext) -> Result<Registry, RegistryError> {
        let mut registry = Registry::new();
        for (name, role) in [("sim-fabric", Role::Fabric), ("sim-k8s", Role::K8s)] {
            registry
                .start(Registration::sim(name, role), ctx, PROGRAMMATIC.to_string())
                .await?;
        }
        Ok(registry)
    }

    /// Starts the driver of a registration and registers it (sim engines are opened or taken
    /// from `ctx`).
    pub async fn register(
        &mut self,
        registration: Registration,
        ctx: &DriverContext,
    ) -> Result<(), RegistryError> {
        if !is_dns_label(&registration.name) {
            return Err(RegistryError::InvalidName(registration.name));
        }
        self.check_free(&registration.name, PROGRAMMATIC)?;
        self.start(registration, ctx, PROGRAMMATIC.to_string())
            .await
    }

    async fn start(
        &mut self,
        registration: Registration,
        ctx: &DriverContext,
        origin: String,
    ) -> Result<(), RegistryError> {
        let name = registration.name.clone();
        let driver_error = |message: String| RegistryError::Driver {
            name: name.clone(),
            origin: origin.clone(),
            message,
        };
        let role = registration.role;
        let manager = match (&registration.driver, role) {
            (DriverConfig::Sim, Role::Fabric) => {
                let engine = match &ctx.sim_fabric {
                    Some(e) => e.clone(),
                    None => SimFabric::open_namespaced(
                        ctx.sim_state.clone(),
                        &format!("sim-fabric/{name}"),
                    )
                    .await
                    .map_err(|e| driver_error(e.to_string()))?,
                };
                self.sim_fabrics.insert(name.clone(), engine.clone());
                RoleManager::Fabric(Arc::new(
                    SimManager::fabric(registration, engine)
                        .map_err(|e: SimError| driver_error(e.to_string()))?
                        .with_latency(ctx.sim_latency),
                ))
            }
            (DriverConfig::Sim, Role::K8s) => {
                let engine = match &ctx.sim_k8s {
                    Some(e) => e.clone(),
                    None => {
                        SimK8s::open_namespaced(ctx.sim_state.clone(), &format!("sim-k8s/{name}"))
                            .await
                            .map_err(|e| driver_error(e.to_string()))?
                    }
                };
                self.sim_k8s.insert(name.clone(), engine.clone());
                RoleManager::K8s(Arc::new(
                    SimManager::k8s(registration, engine)
                        .map_err(|e: SimError| driver_error(e.to_string()))?
                        .with_latency(ctx.sim_latency),
                ))
            }
            (DriverConfig::Linux(_) | DriverConfig::Ovn(_), _) => {
                let kind = registration.driver.kind();
                let Some(factory) = ctx.factories.get(kind) else {
                    return Err(driver_error(
                        RegistrationError::DriverNotAvailable(kind.to_string()).to_string(),
                    ));
                };
                factory.start(registration).await.map_err(driver_error)?
            }
            (DriverConfig::Exec(_), _) => {
                let exec = Arc::new(
                    ExecManager::new(registration)
                        .map_err(|e: NotExecDriver| driver_error(e.to_string()))?,
                );
                match role {
                    Role::Fabric => RoleManager::Fabric(exec),
                    Role::K8s => RoleManager::K8s(exec),
                }
            }
        };
        if manager.role() != role {
            return Err(RegistryError::DriverRole {
                name,
                registered: role,
                serves: manager.role(),
            });
        }
        self.managers.insert(name.clone(), manager);
        self.origins.insert(name, origin);
        Ok(())
    }

    fn check_free(&self, name: &str, origin: &str) -> Result<(), RegistryError> {
        match self.origins.get(name) {
            Some(first) => Err(RegistryError::Duplicate {
                name: name.to_string(),
                first: first.clone(),
                second: origin.to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Records the provisioner registration (at most one; names are shared with managers).
    pub fn set_provisioner(
        &mut self,
        provisioner: ProvisionerRegistration,
        origin: String,
    ) -> Result<(), RegistryError> {
        if let Some(first) = &self.provisioner {
            return Err(RegistryError::TwoProvisioners {
                first: self.origin(&first.name).unwrap_or(PROGRAMMATIC).to_string(),
                second: origin,
            });
        }
        self.check_free(&provisioner.name, &origin)?;
        self.origins.insert(provisioner.name.clone(), origin);
        self.provisioner = Some(provisioner);
        Ok(())
    }

    /// The registered provisioner, if a `role: provisioner` file was loaded (the server then
    /// starts its driver; without one it keeps its default).
    pub fn provisioner(&self) -> Option<&ProvisionerRegistration> {
        self.provisioner.as_ref()
    }

    /// Registers an already-built manager (dev mode, tests, custom drivers); it must serve
    /// the role of its registration.
    pub fn insert(&mut self, manager: RoleManager) -> Result<(), RegistryError> {
        let registration = manager.registration();
        let name = registration.name.clone();
        if !is_dns_label(&name) {
            return Err(RegistryError::InvalidName(name));
        }
        if registration.role != manager.role() {
            return Err(RegistryError::DriverRole {
                registered: registration.role,
                serves: manager.role(),
                name,
            });
        }
        self.check_free(&name, PROGRAMMATIC)?;
        self.origins.insert(name.clone(), PROGRAMMATIC.to_string());
        self.managers.insert(name, manager);
        Ok(())
    }

    /// The manager registered under `name`.
    pub fn get(&self, name: &str) -> Option<RoleManager> {
        self.managers.get(name).cloned()
    }

    /// Every registration, sorted by name (`osac admin managers`).
    pub fn registrations(&self) -> Vec<&Registration> {
        self.managers.values().map(|m| m.registration()).collect()
    }

    /// Where a registration (manager or provisioner) came from: its file, or "programmatic".
    pub fn origin(&self, name: &str) -> Option<&str> {
        self.origins.get(name).map(String::as_str)
    }

    /// Number of registered managers.
    pub fn len(&self) -> usize {
        self.managers.len()
    }

    /// True when nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.managers.is_empty()
    }

    /// Checks a NetworkClass reference: `name` must be registered for `role`.
    pub fn check(&self, name: &str, role: Role) -> Result<&Registration, RegistryError> {
        let manager = self
            .managers
            .get(name)
            .ok_or_else(|| RegistryError::NotRegistered(name.to_string()))?;
        let registration = manager.registration();
        if registration.role != role {
            return Err(RegistryError::WrongRole {
                name: name.to_string(),
                registered: registration.role,
                wanted: role,
            });
        }
        Ok(registration)
    }

    /// What a NetworkClass with these managers supports: the intersection of their declared
    /// capabilities (the class then removes its `disable_capabilities`).
    pub fn class_capabilities(
        &self,
        fabric_manager: &str,
        k8s_manager: Option<&str>,
    ) -> Result<BTreeSet<Capability>, RegistryError> {
        let mut caps = self
            .check(fabric_manager, Role::Fabric)?
            .capabilities
            .clone();
        if let Some(k8s) = k8s_manager {
            let other = &self.check(k8s, Role::K8s)?.capabilities;
            caps.retain(|c| other.contains(c));
        }
        Ok(caps)
    }

    /// The fabric manager registered under `name` (a manager of the other role is refused).
    pub fn fabric(&self, name: &str) -> Result<Arc<dyn FabricManager>, RegistryError> {
        match self.get(name) {
            Some(RoleManager::Fabric(m)) => Ok(m),
            Some(RoleManager::K8s(_)) => Err(wrong_role(name, Role::K8s, Role::Fabric)),
            None => Err(RegistryError::NotRegistered(name.to_string())),
        }
    }

    /// The k8s manager registered under `name` (a manager of the other role is refused).
    pub fn k8s(&self, name: &str) -> Result<Arc<dyn K8sManager>, RegistryError> {
        match self.get(name) {
            Some(RoleManager::K8s(m)) => Ok(m),
            Some(RoleManager::Fabric(_)) => Err(wrong_role(name, Role::Fabric, Role::K8s)),
            None => Err(RegistryError::NotRegistered(name.to_string())),
        }
    }

    /// The sim fabric engine behind a registration loaded or registered through this registry
    /// (inspection and failure injection in tests and dev tooling).
    pub fn sim_fabric(&self, name: &str) -> Option<Arc<SimFabric>> {
        self.sim_fabrics.get(name).cloned()
    }

    /// The sim k8s engine behind a registration.
    pub fn sim_k8s(&self, name: &str) -> Option<Arc<SimK8s>> {
        self.sim_k8s.get(name).cloned()
    }
}
