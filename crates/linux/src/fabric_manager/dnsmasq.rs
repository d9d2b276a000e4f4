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
//! reported as an operation failure ([`health`]), never left to a silent wait for a lease —
//! read from dnsmasq's own lines only, never from text a client sent ([`problem_in_log`]).
//! dnsmasq logs no DHCP transaction (`quiet-dhcp`), and each log is kept under [`LOG_CAP`]
//! ([`bound_logs`]).

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

    fn all(&self) -> [PathBuf; 5] {
        [
            self.conf.clone(),
            self.leases.clone(),
            self.pid.clone(),
            self.log.clone(),
            self.log.with_extension("log.1"),
        ]
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

/// dnsmasq's own lines: `<time> dnsmasq[<pid>]: <message>` (`dnsmasq-dhcp[…]` lines are
/// about DHCP traffic and may quote what a client sent). The message, if `l` is one.
fn own_message(l: &str) -> Option<&str> {
    let (tag, message) = l.split_once("]: ")?;
    let name = tag.rsplit_once('[')?.0.rsplit(' ').next()?;
    (name == "dnsmasq").then_some(message)
}

/// Whether `l` is a DHCP line whose message starts with `prefix` (dnsmasq's own words).
fn dhcp_message_starts(l: &str, prefix: &str) -> bool {
    l.split_once("dnsmasq-dhcp[")
        .and_then(|(_, rest)| rest.split_once("]: "))
        .is_some_and(|(_, m)| m.starts_with(prefix))
}

/// The log since dnsmasq's last start (the whole log if it has none).
fn since_last_start(log: &str) -> &str {
    let mut at = 0;
    let mut start = None;
    for l in log.split_inclusive('\n') {
        if own_message(l).is_some_and(|m| m.starts_with("started, version")) {
            start = Some(at);
        }
        at += l.len();
    }
    start.map_or(log, |at| &log[at..])
}

/// What dnsmasq logged as a problem since its last start (`None`: nothing): one of its own
/// lines (tag `dnsmasq`, never `dnsmasq-dhcp`) whose message *begins* with a sign that it
/// could not read, open or bind something. The log is dnsmasq's own (`log-facility`), so the
/// text names the cause ("bad dynamic directory …: Permission denied"). Text a client
/// controls (a DECLINE's message, a host name) only ever appears inside a `dnsmasq-dhcp`
/// line's message — dnsmasq keeps only its printable characters, so it can neither begin a
/// line nor a message — and is never read as a problem, nor repeated in one.
pub fn problem_in_log(log: &str) -> Option<String> {
    const SIGNS: [&str; 10] = [
        "bad dynamic directory",
        "cannot access",
        "failed to load",
        "failed to access",
        "failed to open",
        "failed to read",
        "failed to create",
        "cannot read",
        "cannot open",
        "bad dhcp-host",
    ];
    since_last_start(log).lines().find_map(|l| {
        let m = own_message(l)?;
        let lower = m.to_ascii_lowercase();
        SIGNS
            .iter()
            .any(|s| lower.starts_with(s))
            .then(|| m.trim().to_string())
    })
}

/// Log size beyond which [`bound_log`] cuts a dnsmasq log.
pub const LOG_CAP: u64 = 256 * 1024;

/// Keeps a dnsmasq log under `cap` bytes: a longer one is moved to `<log>.1` (replacing the
/// previous one) and the log restarts with what [`health`] reads — dnsmasq's own lines since
/// its last start, at most 16 KiB of them. dnsmasq appends (`O_APPEND`), so it writes on at
/// the new end. Returns whether it cut.
pub async fn bound_log(log: &Path, cap: u64) -> Result<bool, LinuxError> {
    use tokio::io::AsyncWriteExt;
    let len = match tokio::fs::metadata(log).await {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io_err(log, e)),
    };
    if len <= cap {
        return Ok(false);
    }
    let bytes = tokio::fs::read(log).await.map_err(|e| io_err(log, e))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut kept = String::new();
    for l in since_last_start(&text)
        .lines()
        .filter(|l| own_message(l).is_some())
    {
        if kept.len() + l.len() + 1 > 16 * 1024 {
            break;
        }
        kept.push_str(l);
        kept.push('\n');
    }
    let old = log.with_extension("log.1");
    tokio::fs::write(&old, &bytes)
        .await
        .map_err(|e| io_err(&old, e))?;
    let mut f = tokio::fs::OpenOptions::new()
        .append(true)
        .open(log)
        .await
        .map_err(|e| io_err(log, e))?;
    f.set_len(0).await.map_err(|e| io_err(log, e))?;
    f.write_all(kept.as_bytes())
        .await
        .map_err(|e| io_err(log, e))?;
    // A tokio file hands a write to a background thread: without the flush it may not have
    // reached the file when this returns (or ever, when the file is dropped first).
    f.flush().await.map_err(|e| io_err(log, e))?;
    Ok(true)
}

/// Bounds every dnsmasq log under `<state_dir>/dnsmasq/` ([`bound_log`] at [`LOG_CAP`]) every
/// few seconds, until `alive` says the fabric is gone.
pub async fn bound_logs(settings: &LinuxSettings, alive: impl Fn() -> bool) {
    let dir = settings.state_dir.join("dnsmasq");
    while alive() {
        if let Ok(mut rd) = tokio::fs::read_dir(&dir).await {
            while let Ok(Some(e)) = rd.next_entry().await {
                let path = e.path();
                if path.extension().is_some_and(|x| x == "log")
                    && let Err(err) = bound_log(&path, LOG_CAP).await
                {
                    tracing::warn!(error = %err, "cannot bound a dnsmasq log");
                }
            }
        }
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    }
}

/// The last 64 KiB of dnsmasq's log.
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
        if since_last_start(&log)
            .lines()
            .any(|l| dhcp_message_starts(l, &read))
        {
            break;
        }
    }
    if running_pid(files).await.is_none() {
        // Only dnsmasq's own last line: the log's last line may quote a client.
        let log = log_tail(files).await;
        let last = log
            .lines()
            .rev()
            .find_map(own_message)
            .unwrap_or("none")
            .trim()
            .to_string();
        return Err(LinuxError::Dhcp(format!(
            "dnsmasq is not running (its last own log line: {last}; log: {})",
            files.log.display()
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
        match tokio::fs::remove_file(&f).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&f, e)),
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

    #[test]
    fn what_a_client_sends_is_never_a_problem() {
        // A DECLINE's message (sanitised by dnsmasq: printable characters only) quoting a
        // problem and a whole forged line.
        let log = "Dec  1 18:51:58 dnsmasq[7294]: started, version 2.90 DNS disabled\n\
            Dec  1 18:52:07 dnsmasq-dhcp[7294]: DHCPDECLINE(br0) 10.0.1.5 02:00:00:00:00:05 \
            permission denied Dec  1 18:52:07 dnsmasq[7294]: bad dynamic directory /x: \
            Permission denied\n\
            Dec  1 18:52:07 dnsmasq-dhcp[7294]: bad dynamic directory /x: Permission denied\n\
            Dec  1 18:52:08 dnsmasq[7294]: exiting on receipt of SIGTERM\n";
        assert_eq!(problem_in_log(log), None);
        // Nor is a client's forged start line a new start.
        let forged = "Dec  1 18:51:58 dnsmasq[7294]: started, version 2.90 DNS disabled\n\
            Dec  1 18:51:58 dnsmasq[7294]: bad dynamic directory /x/h.d: Permission denied\n\
            Dec  1 18:52:07 dnsmasq-dhcp[7294]: DHCPDECLINE(br0) 10.0.1.5 02:00:00:00:00:05 \
            Dec  1 18:51:58 dnsmasq[7294]: started, version 2.90 DNS disabled\n";
        assert!(problem_in_log(forged).is_some());
    }

    #[tokio::test]
    async fn a_log_over_its_cap_keeps_only_dnsmasqs_lines_since_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("s.log");
        let mut text = String::from(
            "Dec  1 18:50:00 dnsmasq[1]: started, version 2.90 DNS disabled\n\
             Dec  1 18:51:58 dnsmasq[7]: started, version 2.90 DNS disabled\n\
             Dec  1 18:51:58 dnsmasq[7]: bad dynamic directory /x/h.d: Permission denied\n",
        );
        for n in 0..2000 {
            text.push_str(&format!(
                "Dec  1 18:52:07 dnsmasq-dhcp[7]: DHCPDECLINE(br0) 10.0.1.5 02:00:00:00:00:05 n{n}\n"
            ));
        }
        tokio::fs::write(&log, &text).await.unwrap();
        assert!(!bound_log(&log, 1 << 20).await.unwrap(), "under the cap");
        assert!(bound_log(&log, 4096).await.unwrap());
        let kept = tokio::fs::read_to_string(&log).await.unwrap();
        assert_eq!(
            kept,
            "Dec  1 18:51:58 dnsmasq[7]: started, version 2.90 DNS disabled\n\
             Dec  1 18:51:58 dnsmasq[7]: bad dynamic directory /x/h.d: Permission denied\n"
        );
        assert!(
            problem_in_log(&kept).is_some(),
            "health still sees the problem"
        );
        let old = tokio::fs::read_to_string(log.with_extension("log.1"))
            .await
            .unwrap();
        assert_eq!(old, text, "the cut log is kept once");
    }
}
