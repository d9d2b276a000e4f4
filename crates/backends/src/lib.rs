//! `osac-backends`: the networking manager contract of osac-net (roles, operations, failures
//! as values), the registry of managers loaded from a config directory (one registration file
//! per manager), the preconditions every driver applies ([`checks`]), the fabric model every
//! fabric driver plans its operations on ([`fabric_model`]), and the drivers that
//! implement the contract here: `sim` (in-process, deterministic, persisted) and `exec` (a
//! command per operation). The `linux` driver (crate `osac-linux`) implements the same
//! [`FabricManager`] and [`K8sManager`] traits on the local kernel.
//!
//! Controllers use [`Registry`] to find managers (an `Arc<dyn FabricManager>` or
//! `Arc<dyn K8sManager>` by name) and call their typed methods; failures come back as
//! [`OpError`] values.

#![warn(missing_docs)]

pub mod checks;
#[cfg(feature = "testing")]
pub mod conformance;
pub mod contract;
pub mod exec;
pub mod fabric_model;
pub mod fence;
pub mod net;
pub mod provision;
pub mod registration;
pub mod registry;
pub mod sim;
pub mod types;

pub use contract::{
    BackendFailure, Capability, FabricLayer, FabricManager, FabricRequest, K8sLayer, K8sManager,
    K8sRequest, OpError, OpFuture, Operation, Request, Role, UnknownOperation,
};
pub use exec::{EXIT_TEMPFAIL, ExecManager, WireResponse};
pub use osac_model::MacAddress;
pub use registration::{DriverConfig, ExecConfig, Registration, RegistrationError};
pub use registry::{DriverContext, DriverFactory, Registry, RegistryError, RoleManager};
pub use sim::{
    FailureKind, MemorySimState, MissedRecords, SharedBatch, SimError, SimFabric, SimK8s,
    SimManager, SimStateStore,
};
pub use types::*;
