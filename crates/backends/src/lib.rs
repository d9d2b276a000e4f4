//! `osac-backends`: the networking manager contract of osac-net (roles, operations, failures
//! as values), the registry of managers loaded from a config directory (one registration file
//! per manager), the preconditions every driver applies ([`checks`]), and the drivers that
//! implement the contract here: `sim` (in-process, deterministic, persisted) and `exec` (a
//! command per operation). The `linux` driver (crate `osac-linux`) implements the same
//! [`Manager`] trait on the local kernel.
//!
//! Controllers use [`Registry`] to find managers and the typed [`FabricClient`] /
//! [`K8sClient`] to call them; failures come back as [`OpError`] values.

#![warn(missing_docs)]

pub mod checks;
pub mod client;
#[cfg(feature = "testing")]
pub mod conformance;
pub mod contract;
pub mod exec;
pub mod fence;
pub mod net;
pub mod provision;
pub mod registration;
pub mod registry;
pub mod sim;
pub mod types;

pub use client::{FabricClient, K8sClient};
pub use contract::{
    BackendFailure, Capability, Driver, Manager, OpError, Operation, Role, UnknownOperation,
    ensure_role,
};
pub use exec::{EXIT_TEMPFAIL, ExecManager};
pub use osac_model::MacAddress;
pub use registration::{DriverConfig, ExecConfig, Registration, RegistrationError};
pub use registry::{DriverContext, DriverFactory, Registry, RegistryError};
pub use sim::{
    FailureKind, MemorySimState, MissedRecords, SharedBatch, SimError, SimFabric, SimK8s,
    SimManager, SimStateStore,
};
pub use types::*;
