//! One dnsmasq per subnet, in the router namespace: files under `<state_dir>/dnsmasq/`,
//! started daemonised. Host entries live in a `dhcp-hostsdir`, one file per port replaced by
//! write-then-rename: dnsmasq adds new entries itself (inotify). We never send SIGHUP (dnsmasq
//! 2.90 crashed re-reading a `dhcp-hostsfile` on SIGHUP); a removed or changed entry, which
//! inotify cannot retract, restarts the process instead (leases survive in the lease file).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::cmd::{self, CmdError};
use crate::error::LinuxError;
use crate::names::short_hash;

/// The files of one subnet's dnsmasq.
#[derive(Debug, Clone)]
pub struct DnsmasqFiles {
    /// Configuration.
    pub conf: PathBuf,
    /// Host entries (`dhcp-hostsdir`: one file per port, named after its MAC).
    pub hosts: PathBuf,
    /// Lease file.
    pub leases: PathBuf,
    /// Pid file.
    pub pid: PathBuf,
    /// dnsmasq's own log (warnings and errors), for diagnosis.
    pub log: PathBuf,
}

impl DnsmasqFiles {
    /// The files of `subnet_id` under `state_dir`.
    pub fn of(state_dir: &Path, subnet_id: &str) -> Self {
        let dir = state_dir.join("dnsmasq");
        let h = short_hash(subnet_id);
        DnsmasqFiles {
            conf: dir.join(format!("{h}.conf")),
            hosts: dir.join(format!("{h}.hosts.d")),
            leases: dir.join(format!("{h}.leases")),
            pid: dir.join(format!("{h}.pid")),
            log: dir.join(format!("{h}.log")),
        }
    }

    fn all(&self) -> [&PathBuf; 4] {
        [&self.conf, &self.leases, &self.pid, &self.log]
    }

    /// Every host entry of the hosts directory, sorted, one per line (for inspection).
    pub fn host_entries(&self) -> String {
        let mut lines: Vec<String> = std::fs::read_dir(&self.hosts)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .flat_map(|t| t.lines().map(String::from).collect::<Vec<_>>())
            .collect();
        lines.sort();
        lines.join("\n")
    }
}

/// The hosts-directory file name of a port's entry (its MAC without separators).
pub fn host_file_name(mac: &str) -> String {
    mac.chars()
        .filter(char::is_ascii_hexdigit)
        .collect::<String>()
        .to_ascii_lowercase()
}

/// What [`sync_hosts`] changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HostsChange {
    /// New entries were written (dnsmasq reads them by itself).
    pub added: bool,
    /// Entries were removed or rewritten (dnsmasq must be restarted to forget the old ones).
    pub retracted: bool,
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

/// Makes the hosts directory hold exactly `wanted` (file name → entry): new and changed files
/// are written beside the directory and renamed in, so dnsmasq never reads half a file.
pub async fn sync_hosts(
    files: &DnsmasqFiles,
    wanted: &BTreeMap<String, String>,
) -> Result<HostsChange, LinuxError> {
    let dir = &files.hosts;
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(|e| io_err(dir, e))?;
    let mut change = HostsChange::default();
    let mut existing = BTreeMap::new();
    let mut rd = tokio::fs::read_dir(dir).await.map_err(|e| io_err(dir, e))?;
    while let Some(e) = rd.next_entry().await.map_err(|e| io_err(dir, e))? {
        let name = e.file_name().to_string_lossy().to_string();
        let text = tokio::fs::read_to_string(e.path())
            .await
            .unwrap_or_default();
        existing.insert(name, text);
    }
    for (name, old) in &existing {
        let keep = wanted.get(name).is_some_and(|w| entry_text(w) == *old);
        if !keep {
            let path = dir.join(name);
            match tokio::fs::remove_file(&path).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err(&path, e)),
            }
            change.retracted = true;
        }
    }
    let parent = dir.parent().unwrap_or(dir);
    let stem = dir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    for (name, entry) in wanted {
        let text = entry_text(entry);
        if existing.get(name) == Some(&text) {
            continue;
        }
        let tmp = parent.join(format!(".{stem}-{name}.tmp"));
        tokio::fs::write(&tmp, &text)
            .await
            .map_err(|e| io_err(&tmp, e))?;
        let path = dir.join(name);
        tokio::fs::rename(&tmp, &path)
            .await
            .map_err(|e| io_err(&path, e))?;
        change.added = true;
    }
    Ok(change)
}

fn entry_text(entry: &str) -> String {
    format!("{entry}\n")
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
/// bound to was re-created, its configuration changed or host entries were retracted).
pub async fn ensure_running(
    ns: &str,
    files: &DnsmasqFiles,
    restart: bool,
) -> Result<(), LinuxError> {
    if running_pid(files).await.is_some() {
        if restart {
            stop(files).await?;
        } else {
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
        // A successor binds the same DHCP sockets: wait for the exit, then insist.
        for attempt in 0..100 {
            if gone(pid).await {
                break;
            }
            if attempt == 50 {
                let _ = cmd::run("kill", &["-KILL", &pid.to_string()], None).await;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

/// Whether process `pid` has exited (a zombie nobody reaped counts as exited).
async fn gone(pid: u32) -> bool {
    match tokio::fs::read_to_string(format!("/proc/{pid}/stat")).await {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Stops dnsmasq and removes its files.
pub async fn remove(files: &DnsmasqFiles) -> Result<(), LinuxError> {
    stop(files).await?;
    match tokio::fs::remove_dir_all(&files.hosts).await {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(&files.hosts, e)),
    }
    for f in files.all() {
        match tokio::fs::remove_file(f).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(f, e)),
        }
    }
    Ok(())
}
