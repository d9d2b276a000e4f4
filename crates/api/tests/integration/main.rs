//! Integration tests: the real server in-process on a random port with a fresh database,
//! driven over REST and gRPC. Database-sensitive tests also run on PostgreSQL when
//! `OSAC_TEST_DATABASE_URL` is set (a fresh database per test).

mod common;
mod concurrency;
mod defaults;
mod events;
mod grpc;
mod hosts;
mod lifecycle;
mod limits;
mod lists;
mod openapi;
mod ops;
mod provider;
mod provisioner_exec;
mod restart;
mod tenancy;
mod tls;
mod watch;
mod workload_flows;
mod workloads;
