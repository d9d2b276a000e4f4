//! Integration tests: the real server in-process on a random port with a fresh database,
//! driven over REST and gRPC. Database-sensitive tests also run on PostgreSQL when
//! `OSAC_TEST_DATABASE_URL` is set (a fresh database per test).

mod bounds;
mod common;
mod concurrency;
mod connections;
mod console;
mod defaults;
mod designs;
mod event_bounds;
mod events;
mod grpc;
mod hosts;
mod jwt;
mod lifecycle;
mod limits;
mod lists;
mod locks;
mod observability;
mod openapi;
mod ops;
mod ovn_manager;
mod promtool;
mod provider;
mod provisioner_exec;
mod quotas;
mod reachability;
mod read_json;
mod reference_filters;
mod renames;
mod restart;
mod status_messages;
mod stock_reflection;
mod streams;
mod tenancy;
mod tenant_reuse;
mod tls;
mod token_self_revocation;
mod tokens;
mod visibility;
mod watch;
mod workload_flows;
mod workloads;
