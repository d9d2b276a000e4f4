//! Running the OVN, Open vSwitch and iproute2 tools: one command, its output, and a typed
//! failure naming the command line and its stderr.

use std::ffi::OsStr;
use std::path::Path;

use tokio::process::Command;

/// A tool that could not run or failed.
#[derive(Debug, thiserror::Error)]
pub enum CmdError {
    /// The program could not be started (not installed, not executable).
    #[error("cannot run {command}: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// The program ran and failed.
    #[error("{command} failed ({status}): {stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// What it wrote to stderr.
        stderr: String,
    },
}

/// A command line for messages.
fn line(program: &str, args: &[&OsStr]) -> String {
    let mut s = program.to_string();
    for a in args {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `program args…` with the environment variables `env` (optionally inside network
/// namespace `ns`) and returns its stdout.
pub(crate) async fn run(
    ns: Option<&str>,
    env: &[(&str, &Path)],
    program: &str,
    args: &[&OsStr],
) -> Result<String, CmdError> {
    let mut c = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, program]);
            c
        }
        None => Command::new(program),
    };
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.kill_on_drop(true);
    let command = line(program, args);
    let out = c.output().await.map_err(|source| CmdError::Spawn {
        command: command.clone(),
        source,
    })?;
    if !out.status.success() {
        return Err(CmdError::Failed {
            command,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Shorthand for [`run`] with string arguments.
pub(crate) async fn run_str(
    ns: Option<&str>,
    env: &[(&str, &Path)],
    program: &str,
    args: &[&str],
) -> Result<String, CmdError> {
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    run(ns, env, program, &args).await
}

/// `ip` with `args` (in namespace `ns` when given, via `ip -n`).
pub(crate) async fn ip(ns: Option<&str>, args: &[&str]) -> Result<String, CmdError> {
    let mut all: Vec<&str> = Vec::with_capacity(args.len() + 2);
    if let Some(ns) = ns {
        all.extend(["-n", ns]);
    }
    all.extend_from_slice(args);
    run_str(None, &[], "ip", &all).await
}
