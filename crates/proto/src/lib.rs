//! Wire types of osac-net: one proto definition drives gRPC (prost/tonic) and REST JSON (pbjson).
//!
//! JSON follows the proto3 JSON mapping with the proto field names kept (snake_case), enums by
//! name, int64 as strings, unset fields omitted and unknown fields rejected.

#![allow(clippy::all, clippy::pedantic, missing_docs)]

/// Tenant-facing types and services (`osacnet.v1`).
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/osacnet.v1.rs"));
    include!(concat!(env!("OUT_DIR"), "/osacnet.v1.serde.rs"));
}

/// Provider-facing services (`osacnet.admin.v1`).
pub mod admin {
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/osacnet.admin.v1.rs"));
        include!(concat!(env!("OUT_DIR"), "/osacnet.admin.v1.serde.rs"));
    }
}

/// Encoded file descriptor set for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/osacnet_descriptor.bin"));
