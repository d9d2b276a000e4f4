//! What can go wrong talking to an OVSDB server.

use std::io;

/// A failed call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The connection could not be opened.
    #[error("cannot connect to {address}: {source}")]
    Connect {
        /// The address tried.
        address: String,
        /// Why.
        source: io::Error,
    },
    /// The connection is closed (by the server, the network, or a protocol error on it); every
    /// call pending on it, and every later one, fails with this.
    #[error("the OVSDB connection is closed: {0}")]
    Disconnected(String),
    /// The server answered the call with an error (e.g. an unknown method or database).
    #[error("OVSDB {method} failed: {error}{}", details.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Rpc {
        /// The method called.
        method: String,
        /// The server's error string.
        error: String,
        /// The server's details, when given.
        details: Option<String>,
    },
    /// A transaction was refused: nothing of it was applied. `operation` is the index of the
    /// operation that failed (None for a failure of the commit as a whole).
    #[error("OVSDB transaction refused: {error}{}{}",
        operation.map(|i| format!(" at operation {i}")).unwrap_or_default(),
        details.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Transaction {
        /// Which operation failed.
        operation: Option<usize>,
        /// The server's error string (`constraint violation`, `referential integrity violation`…).
        error: String,
        /// The server's details, when given.
        details: Option<String>,
    },
    /// The other side sent something that is not the protocol.
    #[error("OVSDB protocol error: {0}")]
    Protocol(String),
}

impl Error {
    /// Whether calling again on a new connection may succeed (the connection was lost).
    pub fn is_disconnect(&self) -> bool {
        matches!(self, Error::Disconnected(_) | Error::Connect { .. })
    }
}
