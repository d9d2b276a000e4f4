//! The REST client of osac-net, one for every Rust caller of the API: the `osac` CLI, the
//! benchmark and the server's integration tests.
//!
//! [`Api`] sends JSON with the caller's bearer token over HTTP or HTTPS ([`TlsOptions`]: a CA
//! file instead of the system roots, or no verification at all), pages through lists, opens
//! watches ([`EventStream`]), and turns every failure into a [`ClientError`]: the server's
//! `{"code","message"}` for a refusal, or what kept the request from an answer (unreachable,
//! TLS handshake, timeout).

mod api;
mod error;
pub mod tls;
mod watch;

pub use api::{Api, ListQuery, MAX_PAGE, Options, Page, Reply, Warned, api_root, warning_text};
pub use error::{ClientError, api_error};
pub use reqwest::{Method, StatusCode, Url};
pub use tls::{INSECURE_WARNING, TlsOptions, TlsSetupError};
pub use watch::{EventStream, WatchEvent};
