//! Running the kernel tools (`ip`, `nft`, `sysctl`, `dnsmasq`, `conntrack`) as child processes
//! with typed errors. Namespaced commands use `ip -n` or `ip netns exec`, so no async worker
//! thread ever changes its own namespace.

use std::process::Stdio;

use serde::Deserialize;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

mod compact;
pub use compact::compact;

/// A tool that could not be run or exited with an error.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CmdError {
    /// The program could not be started (missing, not executable).
    #[error("cannot run {program}: {message}")]
    Spawn {
        /// Program name.
        program: String,
        /// OS error text.
        message: String,
    },
    /// The program ran and failed.
    #[error("{command} failed ({status}): {stderr}")]
    Failed {
        /// The command line, for the operator.
        command: String,
        /// Exit status text.
        status: String,
        /// Trimmed standard error.
        stderr: String,
    },
}

impl CmdError {
    /// Whether the failure says the object does not exist (deletes treat that as success).
    pub fn is_not_found(&self) -> bool {
        match self {
            CmdError::Failed { stderr, .. } => {
                let s = stderr.to_ascii_lowercase();
                s.contains("cannot find device")
                    || s.contains("no such file or directory")
                    || s.contains("does not exist")
                    || s.contains("no such process")
                    || s.contains("not found")
                    || s.contains("no such device")
            }
            CmdError::Spawn { .. } => false,
        }
    }
}

/// Runs `program args…` (optionally feeding `stdin`) and returns its standard output.
pub async fn run(program: &str, args: &[&str], stdin: Option<&str>) -> Result<String, CmdError> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| CmdError::Spawn {
        program: program.to_string(),
        message: e.to_string(),
    })?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .await
            .map_err(|e| CmdError::Spawn {
                program: program.to_string(),
                message: format!("writing stdin: {e}"),
            })?;
        drop(pipe);
    }
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| CmdError::Spawn {
            program: program.to_string(),
            message: e.to_string(),
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(CmdError::Failed {
            command: format!("{program} {}", args.join(" ")),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// `ip [-n ns] args…`.
pub async fn ip(ns: Option<&str>, args: &[&str]) -> Result<String, CmdError> {
    match ns {
        Some(ns) => {
            let mut all = vec!["-n", ns];
            all.extend_from_slice(args);
            run("ip", &all, None).await
        }
        None => run("ip", args, None).await,
    }
}

/// Like [`ip`], but "does not exist" counts as success (idempotent deletes).
pub async fn ip_ignore_missing(ns: Option<&str>, args: &[&str]) -> Result<(), CmdError> {
    match ip(ns, args).await {
        Ok(_) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Runs `program args…` inside namespace `ns` (`ip netns exec`).
pub async fn in_ns(
    ns: &str,
    program: &str,
    args: &[&str],
    stdin: Option<&str>,
) -> Result<String, CmdError> {
    let mut all = vec!["netns", "exec", ns, program];
    all.extend_from_slice(args);
    run("ip", &all, stdin).await
}

/// Applies an nft script atomically (`nft -f -`) inside `ns`, rewritten by [`compact`] into
/// the equivalent block forms so nft does not dump every chain of the namespace first (the
/// cost of a transaction would otherwise grow with the number of security groups).
pub async fn nft(ns: &str, script: &str) -> Result<(), CmdError> {
    in_ns(ns, "nft", &["-f", "-"], Some(&compact(script)))
        .await
        .map(|_| ())
}

/// Applies an nft script atomically when possible; when the transaction fails because map
/// elements already exist with other data or objects to delete are missing (a repair after a
/// crash or hand edits), applies it statement by statement instead: a conflicting
/// `add element` replaces the old element, a `delete` of something missing is skipped.
pub async fn nft_converge(ns: &str, script: &str) -> Result<(), CmdError> {
    let Err(first) = nft(ns, script).await else {
        return Ok(());
    };
    if !matches!(&first, CmdError::Failed { stderr, .. } if stderr.contains("File exists") || stderr.contains("No such file"))
    {
        return Err(first);
    }
    for stmt in script.lines().filter(|l| !l.trim().is_empty()) {
        match nft(ns, stmt).await {
            Ok(()) => {}
            Err(e) if stmt.starts_with("delete ") && e.is_not_found() => {}
            Err(CmdError::Failed { stderr, .. })
                if stderr.contains("File exists") && stmt.starts_with("add element ") =>
            {
                let Some(del) = element_delete_of(stmt) else {
                    return Err(first);
                };
                nft(ns, &format!("{del}\n{stmt}\n")).await?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// `add element <fam> <table> <map> { key : value }` → `delete element … { key }`.
pub fn element_delete_of(stmt: &str) -> Option<String> {
    let rest = stmt.strip_prefix("add element ")?;
    let (head, body) = rest.split_once('{')?;
    let key = body
        .split(" : ")
        .next()?
        .trim()
        .trim_end_matches('}')
        .trim();
    Some(format!("delete element {}{{ {key} }}", head))
}

/// Sets sysctls inside `ns` (`key=value` pairs).
pub async fn sysctl(ns: &str, settings: &[&str]) -> Result<(), CmdError> {
    let mut args = vec!["-q", "-w"];
    args.extend_from_slice(settings);
    in_ns(ns, "sysctl", &args, None).await.map(|_| ())
}

/// Every network namespace name (`ip netns list`).
pub async fn list_netns() -> Result<Vec<String>, CmdError> {
    let out = ip(None, &["netns", "list"]).await?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// Whether namespace `ns` exists (its entry in `/run/netns`, what `ip netns list` reads;
/// no process spawned: this runs on every operation).
pub async fn netns_exists(ns: &str) -> Result<bool, CmdError> {
    tokio::fs::try_exists(std::path::Path::new("/run/netns").join(ns))
        .await
        .map_err(|e| CmdError::Spawn {
            program: "stat /run/netns".into(),
            message: e.to_string(),
        })
}

/// Creates namespace `ns` (with `lo` up) unless it exists.
pub async fn ensure_netns(ns: &str) -> Result<(), CmdError> {
    if !std::path::Path::new("/run/netns").join(ns).exists() {
        match ip(None, &["netns", "add", ns]).await {
            Ok(_) => {}
            Err(CmdError::Failed { stderr, .. }) if stderr.contains("File exists") => {}
            Err(e) => return Err(e),
        }
    }
    ip(Some(ns), &["link", "set", "lo", "up"]).await.map(|_| ())
}

/// Deletes namespace `ns`, first killing processes that run in it (dnsmasq, clients), which
/// would otherwise keep it alive. A missing namespace is success.
pub async fn delete_netns(ns: &str) -> Result<(), CmdError> {
    if !netns_exists(ns).await? {
        return Ok(());
    }
    if let Ok(pids) = ip(None, &["netns", "pids", ns]).await {
        for pid in pids.split_whitespace() {
            let _ = run("kill", &["-9", pid], None).await;
        }
    }
    ip_ignore_missing(None, &["netns", "delete", ns]).await
}

/// One link as `ip -j link show` reports it.
#[derive(Debug, Clone, Deserialize)]
pub struct Link {
    /// Interface name.
    pub ifname: String,
    /// MAC address.
    #[serde(default)]
    pub address: Option<String>,
    /// Bridge it is enslaved to.
    #[serde(default)]
    pub master: Option<String>,
    /// Flags (`UP`, …).
    #[serde(default)]
    pub flags: Vec<String>,
    /// MTU.
    #[serde(default)]
    pub mtu: Option<u32>,
}

impl Link {
    /// Administratively up.
    pub fn is_up(&self) -> bool {
        self.flags.iter().any(|f| f == "UP")
    }
}

/// Every link of namespace `ns` (empty when the namespace does not exist).
pub async fn links(ns: &str) -> Result<Vec<Link>, CmdError> {
    match ip(Some(ns), &["-j", "link", "show"]).await {
        Ok(out) => parse_links(&out),
        Err(e) if e.is_not_found() => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// One link of `ns` by name.
pub async fn link(ns: &str, name: &str) -> Result<Option<Link>, CmdError> {
    match ip(Some(ns), &["-j", "link", "show", "dev", name]).await {
        Ok(out) => Ok(parse_links(&out)?.into_iter().next()),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

fn parse_links(out: &str) -> Result<Vec<Link>, CmdError> {
    if out.trim().is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str(out).map_err(|e| CmdError::Failed {
        command: "ip -j link show".into(),
        status: "unparsable output".into(),
        stderr: e.to_string(),
    })
}

/// Whether `program` can be found on PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ip_json() {
        let links = parse_links(
            r#"[{"ifindex":2,"ifname":"p1","flags":["BROADCAST","UP"],"mtu":1400,"address":"02:00:00:00:00:01","master":"b1"}]"#,
        )
        .unwrap();
        assert_eq!(links[0].ifname, "p1");
        assert!(links[0].is_up());
        assert_eq!(links[0].master.as_deref(), Some("b1"));
        assert!(parse_links("").unwrap().is_empty());
    }

    #[test]
    fn element_deletes_are_derived_from_adds() {
        assert_eq!(
            element_delete_of("add element inet t dnat4 { 1.2.3.4 : 10.0.0.2 }").as_deref(),
            Some("delete element inet t dnat4 { 1.2.3.4 }")
        );
        assert_eq!(
            element_delete_of("add element bridge osac ports { \"pabc\" : jump as-pabc }")
                .as_deref(),
            Some("delete element bridge osac ports { \"pabc\" }")
        );
        assert_eq!(element_delete_of("add rule inet t c drop"), None);
    }

    #[test]
    fn not_found_is_recognised() {
        let e = CmdError::Failed {
            command: "ip link del x".into(),
            status: "exit status: 1".into(),
            stderr: "Cannot find device \"x\"".into(),
        };
        assert!(e.is_not_found());
    }
}
