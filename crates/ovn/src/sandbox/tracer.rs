//! `ovn-trace` as a daemon: it reads the southbound database once (and follows its changes)
//! and answers `trace` requests on its control socket (JSON-RPC, what `ovs-appctl` speaks),
//! so that tracing many packets costs neither a fork nor a database read each.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::{SandboxError, daemon_args, kill_pidfile};
use crate::cmd::{self, CmdError};

/// A running `ovn-trace` daemon of a sandbox ([`super::Sandbox::start_tracer`]).
#[derive(Debug)]
pub struct Tracer {
    dir: PathBuf,
    control: PathBuf,
}

const NAME: &str = "trace";

impl Tracer {
    /// Starts the daemon on southbound database `sb` with the connection-tracking states `ct`
    /// (as `--ct`). The daemon hands them out in order to the connection-tracking steps of
    /// all its traces together, never starting over (OVN 23.03), then assumes `est|trk`
    /// (its output then says "use --ct to customize"): give one per step of every trace to
    /// come. Returns once it has read the database.
    pub(super) async fn start(dir: &Path, sb: &str, ct: &[&str]) -> Result<Tracer, SandboxError> {
        let control = dir.join(format!("{NAME}.ctl"));
        kill_pidfile(&dir.join(format!("{NAME}.pid"))).await;
        let mut args = vec![
            format!("--db={sb}"),
            format!("--unixctl={}", control.display()),
        ];
        args.extend(ct.iter().map(|c| format!("--ct={c}")));
        args.extend(daemon_args(dir, NAME));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cmd::run_str(None, &[("OVN_RUNDIR", dir)], "ovn-trace", &args).await?;
        Ok(Tracer {
            dir: dir.to_path_buf(),
            control,
        })
    }

    /// What the logical flows do with `microflow` entering logical datapath `datapath`, as
    /// `ovn-trace --minimal` prints it (see [`super::Sandbox::trace`]).
    pub async fn trace(&self, datapath: &str, microflow: &str) -> Result<String, SandboxError> {
        let failed = |stderr: String| {
            SandboxError::Command(CmdError::Failed {
                command: format!("ovn-trace daemon: trace --minimal {datapath} '{microflow}'"),
                status: "error".into(),
                stderr,
            })
        };
        let io = |source: std::io::Error| SandboxError::Io {
            path: self.control.clone(),
            source,
        };
        let mut stream = UnixStream::connect(&self.control).await.map_err(io)?;
        let request = json!({
            "id": 0,
            "method": "trace",
            "params": ["--minimal", datapath, microflow],
        });
        stream
            .write_all(request.to_string().as_bytes())
            .await
            .map_err(io)?;
        let mut buffer = Vec::new();
        let reply: Value = loop {
            let mut chunk = [0u8; 16 * 1024];
            let n = stream.read(&mut chunk).await.map_err(io)?;
            if n == 0 {
                return Err(failed("the daemon closed the connection".into()));
            }
            buffer.extend_from_slice(&chunk[..n]);
            match serde_json::from_slice(&buffer) {
                Ok(v) => break v,
                Err(e) if e.is_eof() => continue,
                Err(e) => return Err(failed(format!("unreadable reply: {e}"))),
            }
        };
        match (&reply["result"], &reply["error"]) {
            (Value::String(text), Value::Null) => Ok(text.clone()),
            (_, error) => Err(failed(error.to_string())),
        }
    }

    /// Stops the daemon.
    pub async fn stop(&self) {
        kill_pidfile(&self.dir.join(format!("{NAME}.pid"))).await;
    }
}
