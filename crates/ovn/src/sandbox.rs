//! A complete OVN deployment under one directory: the central part (northbound and southbound
//! `ovsdb-server`s, `ovn-northd`) and hypervisors ([`Hypervisor`]) joined by an underlay
//! bridge in its own namespace.
//!
//! Layout of `dir`: `nb.db`, `nb.sock`, `sb.db`, `sb.sock`, `northd.*`, and one folder per
//! hypervisor. The databases are kept across restarts (the northbound database is the state a
//! driver programs); daemons left running by an earlier start are stopped first. Network
//! namespaces are named `<prefix>-ul` (the underlay), `<prefix>-hv<N>` and, with a provider
//! network, `<prefix>-pr` (the provider network: a Linux bridge [`PROVIDER_BRIDGE`] every
//! hypervisor's `br-provider` is joined to, where a test puts the outside world's addresses);
//! the prefix must not start with `osac-` (the linux fabric's garbage collection owns those
//! names).

mod hypervisor;
mod tracer;

use std::ffi::OsStr;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use osac_ovsdb::Address;

use crate::cmd::{self, CmdError};
pub use hypervisor::Hypervisor;
pub use tracer::Tracer;

/// The OVN northbound schema of the Debian package `ovn-central`.
pub const NB_SCHEMA: &str = "/usr/share/ovn/ovn-nb.ovsschema";
/// The OVN southbound schema.
pub const SB_SCHEMA: &str = "/usr/share/ovn/ovn-sb.ovsschema";
/// The Open vSwitch configuration schema.
pub const VSWITCH_SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";
/// Where Debian installs `ovs-vswitchd` (not on `PATH`).
pub const OVS_VSWITCHD: &str = "/usr/lib/openvswitch-switch/ovs-vswitchd";
/// The underlay's bridge in the underlay namespace.
const UNDERLAY_BRIDGE: &str = "ul";
/// The provider network's bridge in the provider namespace.
pub const PROVIDER_BRIDGE: &str = "pr";

/// What to start.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Where databases, sockets, logs and pid files go.
    pub dir: PathBuf,
    /// Namespace prefix (`<prefix>-ul`, `<prefix>-hv1`…); short, not `osac-…`.
    pub prefix: String,
    /// How many hypervisors (chassis `hv1`, `hv2`…).
    pub hypervisors: usize,
    /// The name of a provider network (a `localnet` port's `network_name`) to map on every
    /// hypervisor to its bridge `br-provider`, joined to the provider namespace; none if None.
    pub provider_network: Option<String>,
}

/// A sandbox that could not start or stop.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A tool failed.
    #[error(transparent)]
    Command(#[from] CmdError),
    /// A file of the sandbox could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// What is needed is not installed.
    #[error(
        "OVN is not installed: missing {0} (Debian packages ovn-central, ovn-host, openvswitch-switch, ethtool)"
    )]
    Missing(String),
    /// The configuration breaks a rule.
    #[error("invalid sandbox configuration: {0}")]
    Invalid(String),
}

/// A running sandbox.
#[derive(Debug)]
pub struct Sandbox {
    config: SandboxConfig,
    /// False for a central-only sandbox ([`Sandbox::start_central`]): no namespaces.
    namespaces: bool,
    nb: Address,
    sb: Address,
    hypervisors: Vec<Hypervisor>,
}

/// Whether program `bin` is on `PATH`.
fn on_path(bin: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(bin).is_file()))
}

/// What is missing of the OVN and Open vSwitch programs and schemas (enough for a database of
/// our own, [`serve_database`]), if anything.
pub fn missing_tools() -> Option<String> {
    let mut missing: Vec<String> = [
        "ovsdb-tool",
        "ovsdb-server",
        "ovs-vsctl",
        "ovn-northd",
        "ovn-controller",
        "ovn-trace",
        "ovn-nbctl",
        "ovn-sbctl",
    ]
    .into_iter()
    .filter(|b| !on_path(b))
    .map(str::to_string)
    .collect();
    for file in [NB_SCHEMA, SB_SCHEMA, VSWITCH_SCHEMA, OVS_VSWITCHD] {
        if !Path::new(file).exists() {
            missing.push(file.to_string());
        }
    }
    (!missing.is_empty()).then(|| missing.join(", "))
}

/// What is missing of what a [`Sandbox`] needs — [`missing_tools`] and `ethtool`, which turns
/// checksum offload off on the veths the userspace datapath reads — if anything.
pub fn missing_sandbox_tools() -> Option<String> {
    let missing: Vec<String> = missing_tools()
        .into_iter()
        .chain((!on_path("ethtool")).then(|| "ethtool".to_string()))
        .collect();
    (!missing.is_empty()).then(|| missing.join(", "))
}

impl Sandbox {
    /// Starts (or restarts) the sandbox described by `config`.
    pub async fn start(config: SandboxConfig) -> Result<Sandbox, SandboxError> {
        if let Some(missing) = missing_sandbox_tools() {
            return Err(SandboxError::Missing(missing));
        }
        if config.prefix.is_empty()
            || config.prefix.starts_with("osac-")
            || config.prefix.len() > 10
            || !config
                .prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err(SandboxError::Invalid(format!(
                "prefix '{}' must be 1–10 letters, digits or '-', not starting with 'osac-'",
                config.prefix
            )));
        }
        if !(1..=200).contains(&config.hypervisors) {
            return Err(SandboxError::Invalid(
                "hypervisors must be between 1 and 200".into(),
            ));
        }
        let dir = config.dir.clone();
        std::fs::create_dir_all(&dir).map_err(|source| SandboxError::Io {
            path: dir.clone(),
            source,
        })?;
        let mut sandbox = Sandbox {
            namespaces: true,
            nb: Address::Unix(dir.join("nb.sock")),
            sb: Address::Unix(dir.join("sb.sock")),
            hypervisors: (1..=config.hypervisors)
                .map(|i| Hypervisor::new(&config, i))
                .collect(),
            config,
        };
        sandbox.stop().await;
        start_database(&dir, "nb", NB_SCHEMA).await?;
        start_database(&dir, "sb", SB_SCHEMA).await?;
        start_northd(&dir, &sandbox.nb, &sandbox.sb).await?;
        let ul = sandbox.underlay_ns();
        cmd::ip(None, &["netns", "add", &ul]).await?;
        cmd::ip(
            Some(&ul),
            &["link", "add", UNDERLAY_BRIDGE, "type", "bridge"],
        )
        .await?;
        cmd::ip(Some(&ul), &["link", "set", UNDERLAY_BRIDGE, "up"]).await?;
        let provider = sandbox.provider_namespace();
        if let Some(pr) = &provider {
            cmd::ip(None, &["netns", "add", pr]).await?;
            cmd::ip(Some(pr), &["link", "set", "lo", "up"]).await?;
            cmd::ip(
                Some(pr),
                &["link", "add", PROVIDER_BRIDGE, "type", "bridge"],
            )
            .await?;
            cmd::ip(Some(pr), &["link", "set", PROVIDER_BRIDGE, "up"]).await?;
            hypervisor::disable_checksum_offload(pr, PROVIDER_BRIDGE).await?;
        }
        let mapping = provider
            .as_deref()
            .zip(sandbox.config.provider_network.as_deref());
        for hv in &mut sandbox.hypervisors {
            hv.start(&ul, UNDERLAY_BRIDGE, &sandbox.sb).await?;
            if let Some((pr, network)) = mapping {
                hv.connect_provider(pr, PROVIDER_BRIDGE, network).await?;
            }
        }
        Ok(sandbox)
    }

    /// Starts (or restarts) only the central part in `dir`: the northbound and southbound
    /// databases and `ovn-northd`, no hypervisor and no namespace, so no root is needed.
    /// Enough for `ovn-trace` ([`Sandbox::trace`]), which evaluates the logical flows
    /// `ovn-northd` compiles without any port being bound to a chassis.
    pub async fn start_central(dir: PathBuf) -> Result<Sandbox, SandboxError> {
        if let Some(missing) = missing_tools() {
            return Err(SandboxError::Missing(missing));
        }
        std::fs::create_dir_all(&dir).map_err(|source| SandboxError::Io {
            path: dir.clone(),
            source,
        })?;
        let sandbox = Sandbox {
            namespaces: false,
            nb: Address::Unix(dir.join("nb.sock")),
            sb: Address::Unix(dir.join("sb.sock")),
            hypervisors: Vec::new(),
            config: SandboxConfig {
                dir: dir.clone(),
                prefix: String::new(),
                hypervisors: 0,
                provider_network: None,
            },
        };
        sandbox.stop().await;
        start_database(&dir, "nb", NB_SCHEMA).await?;
        start_database(&dir, "sb", SB_SCHEMA).await?;
        start_northd(&dir, &sandbox.nb, &sandbox.sb).await?;
        Ok(sandbox)
    }

    /// Waits until `ovn-northd` has compiled what the northbound database holds now into the
    /// southbound database's logical flows (`ovn-nbctl --wait=sb sync`).
    pub async fn wait_southbound(&self) -> Result<(), SandboxError> {
        let db = format!("--db={}", self.nb);
        cmd::run_str(
            None,
            &[],
            "ovn-nbctl",
            &[&db, "--timeout=60", "--wait=sb", "sync"],
        )
        .await?;
        Ok(())
    }

    /// The provider network's namespace (its bridge is [`PROVIDER_BRIDGE`]), if configured.
    pub fn provider_namespace(&self) -> Option<String> {
        self.config
            .provider_network
            .as_ref()
            .map(|_| format!("{}-pr", self.config.prefix))
    }

    /// The northbound database's socket.
    pub fn nb(&self) -> &Address {
        &self.nb
    }

    /// The southbound database's socket.
    pub fn sb(&self) -> &Address {
        &self.sb
    }

    /// The hypervisors, `hv1` first.
    pub fn hypervisors(&self) -> &[Hypervisor] {
        &self.hypervisors
    }

    /// The hypervisor whose chassis is `chassis`.
    pub fn hypervisor(&self, chassis: &str) -> Option<&Hypervisor> {
        self.hypervisors.iter().find(|h| h.chassis() == chassis)
    }

    /// What `ovn-trace` says the logical flows do with `microflow` (an OVN expression such as
    /// `inport == "p1" && eth.src == … && ip4.src == … && tcp.dst == 22`) entering logical
    /// datapath `datapath`, with the connection-tracking states `ct` (e.g. `["new"]`; without
    /// them OVN assumes `est|trk`): an oracle independent of the packets. A packet delivered to
    /// port `P` shows `output("P")` / `/* output to "P" */` in the text.
    pub async fn trace(
        &self,
        datapath: &str,
        microflow: &str,
        ct: &[&str],
    ) -> Result<String, SandboxError> {
        let db = format!("--db={}", self.sb);
        let mut args: Vec<String> = vec![db, "--minimal".into()];
        args.extend(ct.iter().map(|c| format!("--ct={c}")));
        args.push(datapath.into());
        args.push(microflow.into());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Ok(cmd::run_str(None, &[], "ovn-trace", &args).await?)
    }

    /// Starts an `ovn-trace` daemon on the southbound database, for many traces: no fork and
    /// no database read per trace. Its connection-tracking states `ct` are shared by all its
    /// traces, in order ([`Tracer`]). [`Sandbox::stop`] stops it.
    pub async fn start_tracer(&self, ct: &[&str]) -> Result<Tracer, SandboxError> {
        Tracer::start(&self.config.dir, &self.sb.to_string(), ct).await
    }

    fn underlay_ns(&self) -> String {
        format!("{}-ul", self.config.prefix)
    }

    /// Stops every daemon and removes the namespaces; the databases stay on disk. Best
    /// effort: what is already gone is skipped.
    pub async fn stop(&self) {
        for hv in &self.hypervisors {
            hv.stop().await;
        }
        let dir = &self.config.dir;
        for name in ["trace", "northd", "nb", "sb"] {
            kill_pidfile(&dir.join(format!("{name}.pid"))).await;
        }
        if !self.namespaces {
            return;
        }
        let _ = cmd::ip(None, &["netns", "del", &self.underlay_ns()]).await;
        if let Some(pr) = self.provider_namespace() {
            let _ = cmd::ip(None, &["netns", "del", &pr]).await;
        }
    }
}

/// The tunnel address of hypervisor `index` (1-based) on the underlay.
fn encap_ip(index: usize) -> Ipv4Addr {
    let i = u32::try_from(index).unwrap_or(1);
    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 254, 0, 0)) + i)
}

/// Creates database `name` from `schema` unless present and serves it on `<dir>/<name>.sock`
/// (an `ovsdb-server` of its own, stopped by [`stop_database`]); returns the socket's address.
pub async fn serve_database(dir: &Path, name: &str, schema: &str) -> Result<Address, SandboxError> {
    start_database(dir, name, schema).await?;
    Ok(Address::Unix(dir.join(format!("{name}.sock"))))
}

/// Stops the `ovsdb-server` of database `name` started by [`serve_database`].
pub async fn stop_database(dir: &Path, name: &str) {
    kill_pidfile(&dir.join(format!("{name}.pid"))).await;
}

async fn start_database(dir: &Path, name: &str, schema: &str) -> Result<(), SandboxError> {
    let db = dir.join(format!("{name}.db"));
    if !db.exists() {
        cmd::run(
            None,
            &[],
            "ovsdb-tool",
            &[OsStr::new("create"), db.as_os_str(), OsStr::new(schema)],
        )
        .await?;
    }
    let remote = format!(
        "--remote=punix:{}",
        dir.join(format!("{name}.sock")).display()
    );
    let args = daemon_args(dir, name);
    let mut all: Vec<&OsStr> = vec![db.as_os_str(), OsStr::new(&remote)];
    all.extend(args.iter().map(OsStr::new));
    cmd::run(None, &[("OVS_RUNDIR", dir)], "ovsdb-server", &all).await?;
    Ok(())
}

async fn start_northd(dir: &Path, nb: &Address, sb: &Address) -> Result<(), SandboxError> {
    let (nb, sb) = (format!("--ovnnb-db={nb}"), format!("--ovnsb-db={sb}"));
    let mut args = vec![nb, sb];
    args.extend(daemon_args(dir, "northd"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cmd::run_str(None, &[("OVN_RUNDIR", dir)], "ovn-northd", &args).await?;
    Ok(())
}

/// The arguments every daemon of the sandbox takes: detached, its pid and log file named
/// after it in `dir`.
pub(crate) fn daemon_args(dir: &Path, name: &str) -> Vec<String> {
    vec![
        format!("--pidfile={}", dir.join(format!("{name}.pid")).display()),
        format!("--log-file={}", dir.join(format!("{name}.log")).display()),
        "--detach".into(),
        "--no-chdir".into(),
    ]
}

/// Stops the daemon whose pid file is `pidfile`, if it runs.
pub(crate) async fn kill_pidfile(pidfile: &Path) {
    let Ok(text) = std::fs::read_to_string(pidfile) else {
        return;
    };
    let pid = text.trim();
    if pid.is_empty() || !pid.chars().all(|c| c.is_ascii_digit()) {
        return;
    }
    let _ = cmd::run_str(None, &[], "kill", &[pid]).await;
    for _ in 0..50 {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let _ = std::fs::remove_file(pidfile);
}
