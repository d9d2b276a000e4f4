//! The crate's error type and its mapping onto contract failures.

use osac_backends::{OpError, Registration, Role};

use crate::cmd::CmdError;
use crate::config::SettingsError;

/// A `linux` manager of role `expected` runs only a registration of that role; then the
/// machine must pass [`crate::preflight`] with valid settings.
pub(crate) async fn ready_to_start(
    registration: &Registration,
    expected: Role,
    settings: &crate::LinuxSettings,
) -> Result<(), LinuxError> {
    if registration.role != expected {
        return Err(LinuxError::Role {
            name: registration.name.clone(),
            role: registration.role,
            expected,
        });
    }
    settings.validate()?;
    crate::preflight().await?;
    Ok(())
}

/// Why a `linux` manager could not start or a maintenance task failed.
#[derive(Debug, thiserror::Error)]
pub enum LinuxError {
    /// A kernel tool failed.
    #[error(transparent)]
    Cmd(#[from] CmdError),
    /// Reading or writing the state directory failed.
    #[error("state directory {path}: {message}")]
    State {
        /// File or directory.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A subnet's DHCP server (dnsmasq) reports a problem, in its own words.
    #[error("the subnet's DHCP server (dnsmasq) failed: {0}")]
    Dhcp(String),
    /// Invalid settings.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The machine cannot run the dataplane (not root, tools missing).
    #[error("the linux dataplane cannot run here: {0}")]
    Preflight(String),
    /// A registration of the wrong role.
    #[error("registration '{name}' has role {role}, but this manager serves role {expected}")]
    Role {
        /// Registration name.
        name: String,
        /// Its role.
        role: osac_backends::Role,
        /// The manager's role.
        expected: osac_backends::Role,
    },
}

/// Kernel tool failures (their command lines and output), state files (paths), dnsmasq's own
/// words and the machine's settings are backend detail: for the provider, never for tenants
/// ([`OpError::Backend`]).
impl From<CmdError> for OpError {
    fn from(e: CmdError) -> Self {
        // Kernel tool failures are retried: operations are idempotent and converge.
        OpError::backend_transient(e.to_string())
    }
}

impl From<LinuxError> for OpError {
    fn from(e: LinuxError) -> Self {
        match e {
            LinuxError::Settings(_) | LinuxError::Role { .. } => {
                OpError::backend_permanent(e.to_string())
            }
            other => OpError::backend_transient(other.to_string()),
        }
    }
}
