//! The composition root of osac-net: everything that decides *which* store, managers,
//! provisioners and dataplane run, and wires them to the controllers and the API.
//!
//! - [`server`]: [`start`] builds one listening server (REST + gRPC + controllers) from a
//!   [`ServerConfig`]; `osac server` and the integration tests use it (the tests start it
//!   in-process on a random port).
//! - [`serve`]: the `osac server` command line ([`ServerArgs`]) turned into a [`ServerConfig`].
//! - [`dataplane`]: the real Linux dataplane (`osac-linux`) plugged in as driver factory,
//!   provisioner and garbage collector — the only place the API side meets the kernel.
//! - [`ovn`]: the `ovn` driver (`osac-ovn`) plugged in as driver factory of `driver: ovn`
//!   registrations; [`ovn_dev`]: dev mode on an OVN sandbox (`--fabric ovn`).
//! - [`metering`]: the metering export (`--metering-nats`): the store's outbox of CloudEvents
//!   published to NATS JetStream.
//! - [`dev`]: the `--dev` environment (a default NetworkClass, pools, host inventory, an admin
//!   token).
//!
//! The crates below it never depend on it: `osac-api` serves requests without knowing which
//! backends exist, and the `osac` client can be built without this crate.

pub mod dataplane;
pub mod dev;
pub mod metering;
pub mod ovn;
pub mod ovn_dev;
pub mod serve;
pub mod server;

pub use serve::{LogFormat, ServerArgs, run};
pub use server::{LimitsConfig, RunningServer, ServerConfig, ServerError, sim_state_in, start};
