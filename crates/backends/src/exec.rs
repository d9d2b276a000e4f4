//! The `exec` driver: runs a configured command per operation so a provider can plug in any
//! backend (Ansible, Netris, Neutron…) without touching our code. The exec provisioner
//! ([`crate::provision::ExecProvisioner`]) runs its program through the same machinery.
//!
//! Protocol: `command args... <operation>`, request JSON on stdin, result JSON on stdout (empty
//! = `{}`); exit 0 = success, 75 (EX_TEMPFAIL) = transient, anything else = permanent; the
//! message is the last non-empty stderr line. A call that outlives `timeout_seconds` is killed
//! (with its process group) and is transient.
//!
//! The exec driver implements [`crate::FabricManager`] and [`crate::K8sManager`] through their
//! generic layers: every request is encoded the same way, and its response read back with
//! [`WireResponse`]. This is the only place where requests and responses are JSON.
//!
//! Every failure of a program is backend detail ([`OpError::Backend`]): its stderr and our
//! messages about it (the command's path, its exit code, its malformed output) are for the
//! provider; tenants see a plain message with a reference instead.

use std::io;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::contract::{FabricLayer, FabricRequest, K8sLayer, K8sRequest, OpError, Request};
use crate::registration::{DriverConfig, ExecConfig, Registration};
use crate::types::{AllocateExternalIpResponse, CreateSubnetResponse, PortAddresses};

/// Exit code meaning "try again later" (sysexits.h EX_TEMPFAIL).
pub const EXIT_TEMPFAIL: i32 = 75;

/// Cap on what we read from a child's stdout/stderr, so a runaway script cannot exhaust memory.
const MAX_OUTPUT_BYTES: u64 = 64 * 1024 * 1024;

/// Building an exec manager from a registration that is not `driver: exec`.
#[derive(Debug, thiserror::Error)]
#[error("registration '{name}' uses driver '{driver}', not 'exec'")]
pub struct NotExecDriver {
    /// Registration name.
    pub name: String,
    /// Its driver.
    pub driver: &'static str,
}

impl NotExecDriver {
    /// The exec settings of registration `name` with driver `driver`, or the refusal.
    pub fn exec_config(name: &str, driver: &DriverConfig) -> Result<ExecConfig, NotExecDriver> {
        match driver {
            DriverConfig::Exec(c) => Ok(c.clone()),
            other => Err(NotExecDriver {
                name: name.to_string(),
                driver: other.kind(),
            }),
        }
    }
}

/// A manager implemented by an external command.
pub struct ExecManager {
    registration: Registration,
    config: ExecConfig,
}

impl ExecManager {
    /// Binds a `driver: exec` registration.
    pub fn new(registration: Registration) -> Result<Self, NotExecDriver> {
        let config = NotExecDriver::exec_config(&registration.name, &registration.driver)?;
        Ok(ExecManager {
            registration,
            config,
        })
    }

    /// The configuration this manager was registered with.
    pub fn registration(&self) -> &Registration {
        &self.registration
    }

    /// The exec settings in use.
    pub fn config(&self) -> &ExecConfig {
        &self.config
    }

    /// Runs the program for one request: the request encoded on stdin, the result decoded
    /// from stdout. A result that does not decode is a permanent backend failure (the program
    /// broke the contract; retrying will not fix it).
    async fn run<R: Request>(&self, request: &R) -> Result<R::Response, OpError> {
        let op = R::OPERATION;
        let body = serde_json::to_value(request)
            .map_err(|e| OpError::permanent(format!("cannot encode {op} request: {e}")))?;
        let invocation = ExecInvocation {
            name: &self.registration.name,
            role: self.registration.role.as_str(),
            config: &self.config,
        };
        let result = invocation.run(op.as_str(), &body).await?;
        R::Response::from_wire(result).map_err(|e| {
            OpError::backend_permanent(format!(
                "manager '{}' returned a malformed {op} response: {e}",
                self.registration.name
            ))
            .in_operation(op.as_str())
        })
    }
}

/// What an operation answers, read from the JSON result a program printed.
pub trait WireResponse: Sized + Send + 'static {
    /// Decodes the result (`{}` when the program printed nothing).
    fn from_wire(result: serde_json::Value) -> Result<Self, serde_json::Error>;
}

/// Operations whose result is `{}` accept any result.
impl WireResponse for () {
    fn from_wire(_result: serde_json::Value) -> Result<(), serde_json::Error> {
        Ok(())
    }
}

macro_rules! wire_responses {
    ($($t:ty),*) => {
        $(
            impl WireResponse for $t {
                fn from_wire(result: serde_json::Value) -> Result<Self, serde_json::Error> {
                    serde_json::from_value(result)
                }
            }
        )*
    };
}

wire_responses!(
    CreateSubnetResponse,
    AllocateExternalIpResponse,
    PortAddresses
);

/// One registered program and who it runs for: what the `exec` drivers (managers and the
/// provisioner) share. The protocol is the one in the module docs.
pub(crate) struct ExecInvocation<'a> {
    /// Registration name (`OSAC_MANAGER`).
    pub name: &'a str,
    /// Registration role (`OSAC_ROLE`).
    pub role: &'a str,
    /// The program and its settings.
    pub config: &'a ExecConfig,
}

impl ExecInvocation<'_> {
    fn describe(&self, op: &str) -> String {
        format!("{} {op}", self.config.command.display())
    }

    /// Runs `<command> <args...> <op>` with `request` on stdin; see the module docs.
    pub(crate) async fn run(
        &self,
        op: &str,
        request: &serde_json::Value,
    ) -> Result<serde_json::Value, OpError> {
        self.run_program(op, request)
            .await
            .map_err(|e| e.in_operation(op))
    }

    async fn run_program(
        &self,
        op: &str,
        request: &serde_json::Value,
    ) -> Result<serde_json::Value, OpError> {
        let body = serde_json::to_vec(request)
            .map_err(|e| OpError::permanent(format!("cannot encode {op} request: {e}")))?;
        let mut cmd = Command::new(&self.config.command);
        cmd.args(&self.config.args)
            .arg(op)
            .envs(&self.config.env)
            .env("OSAC_MANAGER", self.name)
            .env("OSAC_ROLE", self.role)
            .env("OSAC_OPERATION", op)
            .current_dir(&self.config.working_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // Own process group, so a timeout can kill the whole tree (playbooks fork a lot).
        #[cfg(unix)]
        cmd.process_group(0);

        let mut child = cmd.spawn().map_err(|e| {
            let msg = format!("cannot run {}: {e}", self.describe(op));
            match e.kind() {
                io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied => {
                    OpError::backend_permanent(msg)
                }
                _ => OpError::backend_transient(msg),
            }
        })?;
        let pid = child.id();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();

        let io = async {
            let write = async move {
                if let Some(mut s) = stdin {
                    // A command that does not read its stdin is fine: ignore EPIPE.
                    let _ = s.write_all(&body).await;
                    let _ = s.shutdown().await;
                }
            };
            let (_, out, err, status) =
                tokio::join!(write, read_all(stdout), read_all(stderr), child.wait());
            (out, err, status)
        };
        let timeout = Duration::from_secs(self.config.timeout_seconds);
        let outcome = tokio::time::timeout(timeout, io).await;
        let (out, err, status) = match outcome {
            Ok(done) => done,
            Err(_) => {
                kill_tree(pid).await;
                let _ = child.start_kill();
                let _ = child.wait().await;
                tracing::warn!(registration = %self.name, %op, "exec program timed out");
                return Err(OpError::backend_transient(format!(
                    "{} timed out after {}s",
                    self.describe(op),
                    self.config.timeout_seconds
                )));
            }
        };
        let status = status.map_err(|e| {
            OpError::backend_transient(format!("waiting for {} failed: {e}", self.describe(op)))
        })?;
        let err = err.unwrap_or_default();
        let stderr_text = String::from_utf8_lossy(&err);
        if !stderr_text.trim().is_empty() {
            tracing::debug!(registration = %self.name, %op, stderr = %stderr_text, "exec program stderr");
        }
        let message = last_line(&stderr_text);
        match status.code() {
            Some(0) => {
                let out = out.map_err(|e| {
                    OpError::backend_transient(format!("reading output of {}: {e}", self.describe(op)))
                })?;
                if out.iter().all(u8::is_ascii_whitespace) {
                    return Ok(serde_json::json!({}));
                }
                serde_json::from_slice(&out).map_err(|e| {
                    OpError::backend_permanent(format!(
                        "{} printed invalid JSON on stdout: {e}",
                        self.describe(op)
                    ))
                })
            }
            Some(EXIT_TEMPFAIL) => Err(OpError::backend_transient(message.unwrap_or_else(|| {
                format!(
                    "{} exited with code {EXIT_TEMPFAIL} (temporary failure) and no message on stderr",
                    self.describe(op)
                )
            }))),
            Some(code) => Err(OpError::backend_permanent(message.unwrap_or_else(|| {
                format!(
                    "{} exited with code {code} and no message on stderr",
                    self.describe(op)
                )
            }))),
            None => Err(OpError::backend_transient(message.unwrap_or_else(|| {
                format!("{} was killed ({})", self.describe(op), signal_of(status))
            }))),
        }
    }
}

async fn read_all<R: AsyncRead + Unpin>(r: Option<R>) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    if let Some(r) = r {
        r.take(MAX_OUTPUT_BYTES).read_to_end(&mut buf).await?;
    }
    Ok(buf)
}

fn last_line(text: &str) -> Option<String> {
    text.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .map(str::to_string)
}

#[cfg(unix)]
fn signal_of(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    status
        .signal()
        .map_or_else(|| "no exit code".to_string(), |s| format!("signal {s}"))
}

#[cfg(not(unix))]
fn signal_of(_status: ExitStatus) -> String {
    "no exit code".to_string()
}

/// Best effort: SIGKILL the child's process group (its pid, see `process_group(0)`).
async fn kill_tree(pid: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = pid {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
    }
    #[cfg(not(unix))]
    let _ = pid;
}

#[async_trait]
impl FabricLayer for ExecManager {
    fn registration(&self) -> &Registration {
        &self.registration
    }

    async fn call<R: FabricRequest>(&self, request: &R) -> Result<R::Response, OpError> {
        self.run(request).await
    }
}

#[async_trait]
impl K8sLayer for ExecManager {
    fn registration(&self) -> &Registration {
        &self.registration
    }

    async fn call<R: K8sRequest>(&self, request: &R) -> Result<R::Response, OpError> {
        self.run(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_non_empty_line() {
        assert_eq!(last_line("a\nb\n\n  \n"), Some("b".into()));
        assert_eq!(last_line("\n \n"), None);
    }
}
