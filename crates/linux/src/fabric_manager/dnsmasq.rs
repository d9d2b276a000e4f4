//! One dnsmasq per subnet, in the router namespace: files under `<state_dir>/dnsmasq/`,
//! started daemonised. Host entries live in a `dhcp-hostsdir`, one file per port replaced by
//! write-then-rename: dnsmasq adds new entries itself (inotify). We never send SIGHUP (dnsmasq
//! 2.90 crashed re-reading a `dhcp-hostsfile` on SIGHUP); a removed or changed entry, which
//! inotify cannot retract, restarts the process instead (leases survive in the lease file).
//!
//! dnsmasq opens its configuration, lease, pid and log files as root, then drops to `nobody`
//! and only then reads the hosts directory: that one lives under
//! [`LinuxSettings::dhcp_hosts_root`], a directory every user may traverse, so the state
//! directory may stay private. What dnsmasq logs as a problem after its last start is
//! reported as an operation failure ([`health`]), never left to a silent wait for a lease.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::cmd::{self, CmdError};
use crate::config::LinuxSettings;
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
    /// The files of `subnet_id`: host entries under the settings' hosts root, the rest under
    /// `<state_dir>/dnsmasq/`.
    pub fn of(settings: &LinuxSettings, subnet_id: &str) -> Self {
        let dir = settings.state_dir.join("dnsmasq");
        let h = short_hash(subnet_id);
        DnsmasqFiles {
            conf: dir.join(format!("{h}.conf")),
            hosts: settings.dhcp_hosts_root().join(format!("{h}.hosts.d")),
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

/// Creates the hosts root (mode 0755 for every directory it creates) and checks that dnsmasq,
/// once unprivileged, can reach it: every directory above it must be traversable by others
/// and the root itself readable. The error names the directory that is not and what to do.
pub fn ensure_hosts_root(settings: &LinuxSettings) -> Result<(), LinuxError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let root = settings.dhcp_hosts_root();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(&root)
        .map_err(|e| io_err(&root, e))?;
    let mode = |p: &Path| -> Result<u32, LinuxError> {
        Ok(std::fs::metadata(p)
            .map_err(|e| io_err(p, e))?
            .permissions()
            .mode())
    };
    let refuse = |dir: &Path, mode: u32, need: &str| {
        LinuxError::Preflight(format!(
            "dnsmasq reads DHCP host entries from {} after dropping its privileges, but {} has \
             mode {:04o} ({need}); set `dhcp_hosts_dir` in the linux manager settings to a \
             directory every user may traverse (e.g. under /run), or give {} mode o+x",
            root.display(),
            dir.display(),
            mode & 0o7777,
            dir.display()
        ))
    };
    let own = mode(&root)?;
    if own & 0o005 != 0o005 {
        return Err(refuse(&root, own, "others may not read and search it"));
    }
    for dir in root.ancestors().skip(1) {
        let m = mode(dir)?;
        if m & 0o001 == 0 {
            return Err(refuse(dir, m, "others may not traverse it"));
        }
    }
    Ok(())
}

/// What dnsmasq logged as a problem since its last start (`None`: nothing): a line of its log
/// after the last "started" line that says it could not read, open or bind something. The
/// log is dnsmasq's own (`log-facility`), so the text names the cause ("bad dynamic directory
/// …: Permission denied").
pub fn problem_in_log(log: &str) -> Option<String> {
    const SIGNS: [&str; 9] = [
        "bad dynamic directory",
        "permission denied",
        "failed to access",
        "failed to open",
        "failed to read",
        "failed to create listening socket",
        "cannot read",
        "cannot open",
        "bad dhcp-host",
    ];
    let since_start = log
        .rsplit_once(": started, version")
        .map_or(log, |(_, rest)| rest);
    since_start
        .lines()
        .find(|l| {
            let l = l.to_ascii_lowercase();
            SIGNS.iter().any(|s| l.contains(s))
        })
        .map(|l| {
            // "Dec  1 18:51:58 dnsmasq[7294]: bad dynamic …" → "bad dynamic …"
            l.split_once("]: ").map_or(l, |(_, m)| m).trim().to_string()
        })
}

/// The last 64 KiB of dnsmasq's log (it only grows, by one line per problem or start).
async fn log_tail(files: &DnsmasqFiles) -> String {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let Ok(mut f) = tokio::fs::File::open(&files.log).await else {
        return String::new();
    };
    let len = f.metadata().await.map(|m| m.len()).unwrap_or(0);
    let _ = f
        .seek(std::io::SeekFrom::Start(len.saturating_sub(64 * 1024)))
        .await;
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf).await;
    String::from_utf8_lossy(&buf).into_owned()
}

/// Whether the subnet's dnsmasq runs without a logged problem; the error carries dnsmasq's own
/// words. `just_started`: give a fresh process a moment (50 ms at most) to read its host
/// entries first; a problem it logs later is reported by the next operation on the subnet or
/// lease query, which all check again.
pub async fn health(files: &DnsmasqFiles, just_started: bool) -> Result<(), LinuxError> {
    let attempts = if just_started { 6 } else { 1 };
    for attempt in 0..attempts {
        if attempt > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let log = log_tail(files).await;
        if let Some(problem) = problem_in_log(&log) {
            return Err(LinuxError::Dhcp(problem));
        }
        // It has read its host entries (only logged when there are some): nothing to wait for.
        let read = format!("read {}", files.hosts.display());
        if log
            .rsplit_once(": started, version")
            .is_some_and(|(_, since)| since.contains(&read))
        {
            break;
        }
    }
    if running_pid(files).await.is_none() {
        let log = log_tail(files).await;
        let last = log.lines().last().unwrap_or("no log").to_string();
        return Err(LinuxError::Dhcp(format!(
            "dnsmasq is not running (last log line: {last})"
        )));
    }
    Ok(())
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
/// bound to was re-created, its configuration changed or host entries were retracted), and so
/// does a logged problem. Then checks its [`health`].
pub async fn ensure_running(
    ns: &str,
    files: &DnsmasqFiles,
    restart: bool,
) -> Result<(), LinuxError> {
    if running_pid(files).await.is_some() {
        // A process that logged a problem gets a fresh start: the cause may have been fixed.
        if !restart && health(files, false).await.is_ok() {
            return Ok(());
        }
        stop(files).await?;
    }
    let conf = format!("--conf-file={}", files.conf.display());
    if let Err(e) = cmd::in_ns(ns, "dnsmasq", &[&conf], None).await {
        // dnsmasq explains a start-up failure on stderr: keep only its own first line.
        let text = e.to_string();
        let why = text
            .lines()
            .find_map(|l| l.split_once("dnsmasq: ").map(|(_, m)| m.to_string()))
            .unwrap_or(text);
        return Err(LinuxError::Dhcp(format!("dnsmasq did not start: {why}")));
    }
    health(files, true).await
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_logged_after_the_last_start_is_reported_in_dnsmasqs_words() {
        let log = "Dec  1 18:51:58 dnsmasq[7294]: started, version 2.90 DNS disabled\n\
            Dec  1 18:51:58 dnsmasq-dhcp[7294]: DHCP, sockets bound exclusively to interface br0\n\
            Dec  1 18:51:58 dnsmasq[7294]: bad dynamic directory /x/h.d: Permission denied\n";
        assert_eq!(
            problem_in_log(log).as_deref(),
            Some("bad dynamic directory /x/h.d: Permission denied")
        );
        let restarted = format!(
            "{log}Dec  1 18:52:05 dnsmasq[7608]: started, version 2.90 DNS disabled\n\
             Dec  1 18:52:05 dnsmasq-dhcp[7608]: read /y/h.d/a\n\
             Dec  1 18:52:07 dnsmasq-dhcp[7608]: DHCPDISCOVER(br0) 02:00:00:00:00:09 no address available\n"
        );
        assert_eq!(problem_in_log(&restarted), None, "fixed by the restart");
        assert_eq!(problem_in_log(""), None);
    }
}
