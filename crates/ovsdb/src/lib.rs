//! A small client of the OVSDB management protocol (RFC 7047), the database protocol of Open
//! vSwitch and OVN: JSON-RPC 1.0 over a unix or TCP socket, or TLS
//! with a client certificate ([`Tls`]).
//!
//! - [`Address`] — where a server listens (`unix:PATH`, `tcp:HOST:PORT`, `ssl:HOST:PORT`); a clustered database
//!   is a comma-separated list of them.
//! - [`Client`] — one connection: [`Client::transact`] (a list of operations, atomically),
//!   [`Client::monitor`] (the current rows of some tables, then their changes as [`Update`]s),
//!   [`Client::call`] for any other method; [`Client::transactions`] counts the transactions sent. Echo requests of the server are answered by the
//!   connection itself, so an idle connection stays open.
//! - [`op`] builds operations and conditions, [`datum`] encodes and decodes OVSDB values
//!   (sets, maps, UUIDs).
//!
//! Failures are [`Error`] values: the server refused an operation ([`Error::Transaction`],
//! with the operation's own error and details), the connection is gone
//! ([`Error::Disconnected`]: every pending call gets it, none waits forever), or the other side
//! broke the protocol.

mod address;
mod client;
pub mod datum;
mod error;
mod framing;
pub mod op;
mod tls;

pub use address::{Address, AddressError};
pub use client::{Client, Update};
pub use error::Error;
pub use tls::{Tls, TlsError, TlsFiles};
