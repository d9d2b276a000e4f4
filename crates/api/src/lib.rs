//! The osac-net API: one service layer (authorization, tenancy, validation, one transaction per
//! write) behind two transports, REST (axum) and gRPC (tonic). Which store, managers and
//! dataplane serve it is decided by the composition root (`osac-server`), not here.

pub mod access;
pub mod allowed_methods;
pub mod auth;
pub mod console;
pub mod default_label;
pub mod deprecation;
pub mod error;
pub mod grpc;
pub mod health;
pub mod listen;
pub mod metrics;
pub mod object;
pub mod object_json;
pub mod openapi;
#[cfg(target_os = "linux")]
mod process_metrics;
pub mod quota;
pub mod reachability;
mod refusals;
pub mod replicas;
pub mod request;
pub mod reserved;
pub mod resources;
pub mod rest;
pub mod service;
pub mod tls;
pub mod token_service;
pub mod typed;
pub mod usage;
pub mod watch;
pub mod watch_slots;

pub use error::{ApiError, ApiResult, Code};
pub use listen::TransportConfig;
pub use service::Service;
