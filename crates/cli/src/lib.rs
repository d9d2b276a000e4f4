//! The `osac` command-line client, as a library so that `main.rs` (and tests) can drive it.

pub mod client;
