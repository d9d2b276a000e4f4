//! Integration tests: the real server in-process on a random port, driven over REST and gRPC.

mod common;
mod provider;
