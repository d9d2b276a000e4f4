//! One dnsmasq per subnet, in the router namespace: files under `<state_dir>/dnsmasq/`,
//! started daemonised, reloaded with SIGHUP when host entries change.

use std::path::{Path, PathBuf};

use crate::cmd::{self, CmdError};
use crate::error::LinuxError;
use crate::names::short_hash;

/// The files of one subnet's dnsmasq.
#[derive(Debug, Clone)]
pub struct DnsmasqFiles {
    /// Configuration.
    pub conf: PathBuf,
    /// Host entries (`dhcp-hostsfile`).
    pub hosts: PathBuf,
    /// Lease file.
    pub leases: PathBuf,
    /// Pid file.
    pub pid: PathBuf,
}

impl DnsmasqFiles {
    /// The files of `subnet_id` under `state_dir`.
    pub fn of(state_dir: &Path, subnet_id: &str) -> Self {
        let dir = state_dir.join("dnsmasq");
        let h = short_hash(subnet_id);
        DnsmasqFiles {
            conf: dir.join(format!("{h}.conf")),
            hosts: dir.join(format!("{h}.hosts")),
            leases: dir.join(format!("{h}.leases")),
            pid: dir.join(format!("{h}.pid")),
        }
    }

    fn all(&self) -> [&PathBuf; 4] {
        [&self.conf, &self.hosts, &self.leases, &self.pid]
    }
}

fn io_err(path: &Path, e: std::io::Error) -> LinuxError {
    LinuxError::State {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Writes `text` to `path` when it differs; returns whether it changed.
pub async fn write_if_changed(path: &Path, text: &str) -> Result<bool, LinuxError> {
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| io_err(dir, e))?;
    }
    if tokio::fs::read_to_string(path).await.ok().as_deref() == Some(text) {
        return Ok(false);
    }
    let tmp = path.with_extension("tmp");
    tokio::fs::write(&tmp, text)
        .await
        .map_err(|e| io_err(&tmp, e))?;
    tokio::fs::rename(&tmp, path)
        .await
        .map_err(|e| io_err(path, e))?;
    Ok(true)
}

/// The pid of the running dnsmasq of these files (checked against `/proc`).
pub async fn running_pid(files: &DnsmasqFiles) -> Option<u32> {
    let pid: u32 = tokio::fs::read_to_string(&files.pid)
        .await
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let cmdline = tokio::fs::read(format!("/proc/{pid}/cmdline")).await.ok()?;
    let cmdline = String::from_utf8_lossy(&cmdline);
    cmdline
        .contains(&*files.conf.to_string_lossy())
        .then_some(pid)
}

/// Starts dnsmasq in `ns` unless running; `restart` forces a fresh process (the bridge it was
/// bound to was re-created). Sends SIGHUP otherwise when `reload`.
pub async fn ensure_running(
    ns: &str,
    files: &DnsmasqFiles,
    restart: bool,
    reload: bool,
) -> Result<(), LinuxError> {
    if let Some(pid) = running_pid(files).await {
        if restart {
            stop(files).await?;
        } else {
            if reload {
                let _ = cmd::run("kill", &["-HUP", &pid.to_string()], None).await;
            }
            return Ok(());
        }
    }
    let conf = format!("--conf-file={}", files.conf.display());
    cmd::in_ns(ns, "dnsmasq", &[&conf], None).await?;
    Ok(())
}

/// Stops the subnet's dnsmasq (if running).
pub async fn stop(files: &DnsmasqFiles) -> Result<(), LinuxError> {
    if let Some(pid) = running_pid(files).await {
        match cmd::run("kill", &[&pid.to_string()], None).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(CmdError::Failed { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        for _ in 0..50 {
            if tokio::fs::metadata(format!("/proc/{pid}")).await.is_err() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

/// Stops dnsmasq and removes its files.
pub async fn remove(files: &DnsmasqFiles) -> Result<(), LinuxError> {
    stop(files).await?;
    for f in files.all() {
        match tokio::fs::remove_file(f).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(f, e)),
        }
    }
    Ok(())
}
