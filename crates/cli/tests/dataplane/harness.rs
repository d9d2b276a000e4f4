//! The dataplane suite's harness: one real server in-process on the `linux` managers (SQLite,
//! its own state directory, transit range, hosting clusters and external pool, so it can share
//! the machine with other dataplane users), driven through the `osac` binary like a user, and
//! probes that send real packets from inside the machine namespaces.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use osac_api::auth::{AuthConfig, Caller, Role, ensure_admin_token};
use osac_controller::ControllerConfig;
use osac_linux::LinuxSettings;
use osac_linux::names::machine_ns;
use osac_model::{Kind, Scope};
use osac_server::dataplane::{FabricChoice, LINUX_FABRIC, LINUX_K8S};
use osac_server::{RunningServer, ServerConfig};
use serde_json::{Value, json};

use crate::osac_cli;

/// External pool of this suite (TEST-NET-2-like benchmark range, unlikely to be used by others).
pub const POOL_CIDR: &str = "198.18.7.0/24";
/// Transit range: its first address is the external gateway in `osac-ext`.
pub const TRANSIT: &str = "100.127.0.0/16";
/// The external gateway address (an "internet host" for NAT checks).
pub const EXT_GATEWAY: &str = "100.127.0.1";
/// Namespace of the external network.
pub const EXT_NS: &str = osac_linux::names::EXT_NS;

/// A workload's attachment to the tenant's `default-ipv4` subnet in no security group: a
/// closed port (only DHCP, ARP and neighbour discovery pass).
pub const IN_NO_GROUP: &[&str] = &[
    "--network-attachment",
    "subnet=default-ipv4,security-groups=",
];
/// A workload's attachment to the tenant's `default-ipv4` subnet in the wide-open group
/// `open` (see [`Dp::open_group`]).
pub const IN_GROUP_OPEN: &[&str] = &[
    "--network-attachment",
    "subnet=default-ipv4,security-groups=open",
];
/// A workload's attachment to the tenant's `default-ipv4` subnet in security group `web`.
pub const IN_GROUP_WEB: &[&str] = &[
    "--network-attachment",
    "subnet=default-ipv4,security-groups=web",
];

/// Whether the suite can run here; under CI it must (a skip would hide a broken dataplane).
pub async fn can_run() -> bool {
    match osac_linux::preflight().await {
        Ok(()) => true,
        Err(e) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("the dataplane suite must run under CI but cannot: {e}");
            }
            eprintln!("skipping the dataplane suite: {e}");
            false
        }
    }
}

/// A workload as the tests see it.
#[derive(Debug, Clone)]
#[allow(dead_code)] // name and nics: for failure messages and multi-NIC scenarios
pub struct Machine {
    pub name: String,
    pub id: String,
    /// Its namespace.
    pub ns: String,
    /// Primary address.
    pub ip: IpAddr,
    /// Primary MAC.
    pub mac: String,
    /// Primary interface inside the namespace.
    pub ifname: String,
    /// The external address, if any.
    pub external_ip: Option<IpAddr>,
    /// (interface, address) of every attachment.
    pub nics: Vec<(String, String)>,
}

/// The running suite environment.
pub struct Dp {
    /// The server; `None` only while [`Dp::restart`] replaces it or after [`Dp::stop`]
    /// (a restart scenario needs a new one on the same database and state directory).
    server: tokio::sync::RwLock<Option<RunningServer>>,
    /// The dataplane settings the server runs with (a restart reuses them).
    pub settings: LinuxSettings,
    pub dir: tempfile::TempDir,
    pub admin: String,
    /// Namespaces this suite created (the scope of its garbage collection).
    pub created: Mutex<BTreeSet<String>>,
    /// Every machine the scenarios made, in order (later scenarios check earlier ones).
    pub machines: Mutex<Vec<Machine>>,
}

/// MAC prefix of this suite's inventory hosts (dev hosts use `0e:00`).
pub const HOST_MAC_PREFIX: &str = "0e:d9";

/// The hosting clusters of this suite (their namespaces are the suite's own).
pub const HOSTING_CLUSTERS: [&str; 2] = ["dp-a", "dp-b"];

/// Where the suite records the machine namespaces it made, so a later run can sweep what an
/// aborted run left behind.
fn record_file() -> std::path::PathBuf {
    std::env::temp_dir().join("osac-dataplane-suite.namespaces")
}

/// Removes what earlier (possibly aborted) runs of this suite left in the kernel, and only
/// that: router namespaces on the suite's transit range, its hosting clusters' namespaces,
/// recorded machine namespaces (with their dnsmasq processes), and the suite pool's routes in
/// the external namespace. Leftovers would collide with this run (same transit addresses).
pub async fn sweep() {
    let mut scope: BTreeSet<String> = HOSTING_CLUSTERS
        .iter()
        .map(|c| osac_linux::names::hosting_ns(c))
        .collect();
    if let Ok(text) = std::fs::read_to_string(record_file()) {
        scope.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(String::from),
        );
    }
    let all = osac_linux::cmd::list_netns().await.unwrap_or_default();
    let transit = TRANSIT.trim_end_matches("0.0/16");
    for ns in all
        .iter()
        .filter(|n| n.starts_with(osac_linux::names::ROUTER_NS_PREFIX))
    {
        let out = Command::new("ip")
            .args([
                "-n",
                ns,
                "-4",
                "-o",
                "addr",
                "show",
                "dev",
                osac_linux::names::UPLINK_IF,
            ])
            .output();
        if out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(&format!(" {transit}"))) {
            scope.insert(ns.clone());
        }
    }
    // Machine namespaces of the suite's hosts (MACs 0e:d9:…), also from runs before the record.
    let machines: Vec<&String> = all
        .iter()
        .filter(|n| n.starts_with(osac_linux::names::MACHINE_NS_PREFIX) && !scope.contains(*n))
        .collect();
    for ns in machines {
        let out = Command::new("ip").args(["-n", ns, "-o", "link"]).output();
        let mac = format!(" {HOST_MAC_PREFIX}:");
        if out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(&mac)) {
            scope.insert(ns.clone());
        }
    }
    let scope: Vec<String> = scope.into_iter().filter(|n| all.contains(n)).collect();
    if !scope.is_empty() {
        match osac_linux::fabric_manager::gc_among(&osac_linux::OwnedSet::default(), Some(&scope))
            .await
        {
            Ok(r) => eprintln!(
                "dataplane sweep: removed {} namespaces, killed {} dnsmasq",
                r.namespaces.len(),
                r.processes.len()
            ),
            Err(e) => eprintln!("dataplane sweep failed: {e}"),
        }
    }
    let _ = Command::new("ip")
        .args(["-n", EXT_NS, "route", "flush", "root", POOL_CIDR])
        .output();
    // Neighbour entries of removed routers' transit addresses (re-used by this run's).
    let _ = Command::new("ip")
        .args(["-n", EXT_NS, "neigh", "flush", "to", TRANSIT])
        .output();
    let _ = std::fs::remove_file(record_file());
}

pub async fn start() -> Dp {
    sweep().await;
    // A private data directory (mode 0700, as `mktemp -d` or a systemd StateDirectory give):
    // dnsmasq, once unprivileged, reads its host entries from the settings' hosts root.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod 0700");
    let tokens = dir.path().join("tokens.json");
    let admin = ensure_admin_token(&tokens).expect("admin token");
    let settings = LinuxSettings {
        state_dir: dir.path().join("dataplane"),
        transit_ipv4_cidr: TRANSIT.parse().expect("cidr"),
        transit_ipv6_cidr: "fd00:6f73:6163:fffd::/64".parse().expect("cidr"),
        hosting_clusters: HOSTING_CLUSTERS.iter().map(|c| c.to_string()).collect(),
        // The suite sweeps only its own leftovers ([`sweep`]); start-up garbage collection is
        // turned on for one restart ([`Dp::restart_collecting_garbage`]).
        gc_on_start: false,
        ..LinuxSettings::default()
    };
    let server = start_server(&dir, &settings).await;
    bootstrap(&server).await;
    Dp {
        server: tokio::sync::RwLock::new(Some(server)),
        settings,
        dir,
        admin,
        created: Mutex::new(BTreeSet::new()),
        machines: Mutex::new(Vec::new()),
    }
}

/// Starts (or restarts) the server on the suite's database and state directory.
pub async fn start_server(dir: &tempfile::TempDir, settings: &LinuxSettings) -> RunningServer {
    osac_server::start(ServerConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        database_url: format!("sqlite://{}", dir.path().join("osac.db").display()),
        auth: AuthConfig::TokenFile(dir.path().join("tokens.json")),
        managers_dir: None,
        controller: ControllerConfig {
            workers: 4,
            resync_interval: Duration::from_secs(10),
            backoff_base: Duration::from_millis(100),
            backoff_cap: Duration::from_secs(2),
            // Bandwidth metering reads the counters every second (scenarios_metering).
            traffic_interval: Duration::from_secs(1),
            ..ControllerConfig::default()
        },
        ip_discovery_timeout: ServerConfig::DEFAULT_IP_DISCOVERY_TIMEOUT,
        fabric: FabricChoice::Linux(settings.clone()),
        sim_latency: Default::default(),
        limits: Default::default(),
        transport: Default::default(),
    })
    .await
    .expect("the linux server starts")
}

/// The dev objects, with this suite's own external pool.
async fn bootstrap(server: &RunningServer) {
    let admin = Caller {
        subject: "dataplane-suite".into(),
        tenant: None,
        role: Role::ProviderAdmin,
    };
    let mut objects = vec![
        (
            Kind::NetworkClass,
            osac_server::dev::default_class_for(LINUX_FABRIC, LINUX_K8S, "dataplane suite"),
        ),
        (
            Kind::ExternalIpPool,
            json!({"metadata": {"name": "dp-pool"}, "spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": [POOL_CIDR]}}),
        ),
        (
            Kind::HostType,
            json!({
                "metadata": {"name": "bm-standard"},
                "interfaces": [
                    {"name": "data-0", "role": "fabric"},
                    {"name": "data-1", "role": "fabric"},
                    {"name": "mgmt-0", "role": "management"},
                    {"name": "bmc-0", "role": "lifecycle"}
                ]
            }),
        ),
    ];
    // Hosts with MACs of their own (dev hosts use 0e:00:…; ours 0e:d9:…).
    for (kind, mut host) in osac_server::dev::dev_hosts() {
        if let Some(ifs) = host["spec"]["interfaces"].as_array_mut() {
            for i in ifs {
                let mac = i["mac_address"].as_str().unwrap_or_default().replacen(
                    "0e:00",
                    HOST_MAC_PREFIX,
                    1,
                );
                i["mac_address"] = json!(mac);
            }
        }
        objects.push((kind, host));
    }
    for (kind, obj) in objects {
        let created = server
            .service
            .create_json(&admin, Scope::Provider, kind, obj)
            .await
            .unwrap_or_else(|e| panic!("bootstrap {kind:?}: {e}"));
        // Hosts get machine namespaces (their ports parked) as soon as they exist.
        if kind == Kind::Host
            && let Some(id) = created["id"].as_str()
        {
            record(&machine_ns(id));
        }
    }
}

/// Appends a namespace to the suite's record (see [`record_file`]).
pub fn record(ns: &str) {
    use std::io::Write as _;
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(record_file())
        .and_then(|mut f| writeln!(f, "{ns}"));
}

impl Dp {
    /// The running server (its store, registry, provisioner).
    pub async fn server(&self) -> tokio::sync::RwLockReadGuard<'_, RunningServer> {
        tokio::sync::RwLockReadGuard::map(self.server.read().await, |s| {
            s.as_ref().expect("the suite's server is running")
        })
    }

    /// Shuts the server down and starts a new one on the same database and state directory,
    /// like an operator restarting the process (it listens on a new port; [`Dp::osac`]
    /// follows), with start-up garbage collection on as in production: it removes every `osac-`
    /// namespace this store does not own (the kernel tests never run beside this suite: see
    /// `.config/nextest.toml`).
    pub async fn restart_collecting_garbage(&self) {
        let settings = LinuxSettings {
            gc_on_start: true,
            ..self.settings.clone()
        };
        self.restart_with(&settings).await;
    }

    /// Restarts the server on the same database and dataplane, without garbage collection.
    pub async fn restart(&self) {
        let settings = self.settings.clone();
        self.restart_with(&settings).await;
    }

    async fn restart_with(&self, settings: &LinuxSettings) {
        let mut slot = self.server.write().await;
        let started = std::time::Instant::now();
        if let Some(old) = slot.take() {
            old.shutdown().await;
        }
        let stopped = started.elapsed();
        *slot = Some(start_server(&self.dir, settings).await);
        eprintln!(
            "    server stopped in {stopped:.1?}, started in {:.1?}",
            started.elapsed() - stopped
        );
    }

    /// Shuts the server down for good (the end of the suite).
    pub async fn stop(&self) {
        if let Some(s) = self.server.write().await.take() {
            s.shutdown().await;
        }
    }

    /// Runs `osac` with `token`.
    pub async fn osac(&self, token: &str, args: &[&str]) -> std::process::Output {
        let config = self.dir.path().join("cli-config.json");
        osac_cli::run(self.server().await.url(), token, config, args).await
    }

    /// Runs `osac`, which must succeed; returns stdout.
    pub async fn ok(&self, token: &str, args: &[&str]) -> String {
        let out = self.osac(token, args).await;
        osac_cli::stdout_of_success(args, &out)
    }

    /// `osac … -o json`.
    pub async fn json(&self, token: &str, args: &[&str]) -> Value {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["-o", "json"]);
        let text = self.ok(token, &all).await;
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("osac {args:?}: not JSON ({e}): {text}"))
    }

    /// A fresh tenant with its default network READY; returns a tenant-admin token.
    pub async fn tenant(&self, name: &str) -> String {
        self.ok(&self.admin, &["admin", "create", "tenant", "--name", name])
            .await;
        let token = self
            .ok(
                &self.admin,
                &[
                    "admin",
                    "create",
                    "token",
                    "--tenant",
                    name,
                    "--role",
                    "tenant-admin",
                ],
            )
            .await;
        for _ in 0..300 {
            let subnets = self.json(&token, &["get", "subnets"]).await;
            let ready = items(&subnets)
                .iter()
                .filter(|s| s["metadata"]["name"] == "default-ipv4")
                .any(|s| s["status"]["state"] == "SUBNET_STATE_READY");
            if ready {
                return token;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("tenant {name}: default subnet not READY");
    }

    /// Creates VirtualNetwork `name` with `cidr` and waits until it is READY.
    pub async fn virtual_network(&self, token: &str, name: &str, cidr: &str) {
        let args = [
            "create",
            "virtualnetwork",
            "--cidr",
            cidr,
            "--name",
            name,
            "--wait",
        ];
        self.ok(token, &args).await;
    }

    /// Creates subnet `name` of VirtualNetwork `vn` with `cidrs` and waits until it is READY.
    pub async fn subnet(&self, token: &str, vn: &str, name: &str, cidrs: &[&str]) {
        let mut args = vec!["create", "subnet", "--virtual-network", vn, "--name", name];
        for c in cidrs {
            args.extend(["--cidr", c]);
        }
        args.push("--wait");
        self.ok(token, &args).await;
    }

    /// Creates security group `name` in `vn` with `ingress` rules (`protocol:…,port:…,source:…`)
    /// and waits until it is READY.
    pub async fn security_group(&self, token: &str, vn: &str, name: &str, ingress: &[&str]) {
        let mut args = vec![
            "create",
            "security-group",
            "--virtual-network",
            vn,
            "--name",
            name,
        ];
        for r in ingress {
            args.extend(["--ingress", r]);
        }
        args.push("--wait");
        self.ok(token, &args).await;
    }

    /// Creates security group `name` in VirtualNetwork `vn` allowing everything in and out
    /// (both families): how a port is opened wide.
    pub async fn open_group(&self, token: &str, vn: &str, name: &str) {
        let mut args = vec![
            "create",
            "security-group",
            "--virtual-network",
            vn,
            "--name",
            name,
        ];
        for (flag, rule) in [
            ("--ingress", "protocol:all,source:0.0.0.0/0"),
            ("--ingress", "protocol:all,source:::/0"),
            ("--egress", "protocol:all,destination:0.0.0.0/0"),
            ("--egress", "protocol:all,destination:::/0"),
        ] {
            args.extend([flag, rule]);
        }
        args.push("--wait");
        self.ok(token, &args).await;
    }

    /// Creates VirtualNetwork `vn` (`cidr`) with subnet `{vn}-s` (`subnet_cidr`) and the
    /// open group `open-{vn}`, then VM `vm` attached to that subnet with that group; waits
    /// for each to be ready.
    pub async fn vm_in_new_network(
        &self,
        token: &str,
        vn: &str,
        cidr: &str,
        subnet_cidr: &str,
        vm: &str,
    ) -> Machine {
        let (subnet, group) = (format!("{vn}-s"), format!("open-{vn}"));
        self.virtual_network(token, vn, cidr).await;
        self.subnet(token, vn, &subnet, &[subnet_cidr]).await;
        self.open_group(token, vn, &group).await;
        let attachment = format!("subnet={subnet},security-groups={group}");
        self.vm(token, vm, &["--network-attachment", &attachment])
            .await
    }

    /// Creates a VM (single call) and waits until it runs.
    pub async fn vm(&self, token: &str, name: &str, extra: &[&str]) -> Machine {
        let mut args = vec![
            "create",
            "computeinstance",
            "--template",
            "small",
            "--name",
            name,
            "--wait",
            "--timeout",
            "180s",
        ];
        args.extend_from_slice(extra);
        self.ok(token, &args).await;
        self.vm_named(token, name).await
    }

    /// An existing running VM, once its DHCP client configured it.
    pub async fn vm_named(&self, token: &str, name: &str) -> Machine {
        let v = self.json(token, &["get", "computeinstance", name]).await;
        let id = v["id"].as_str().expect("id").to_string();
        let m = self.machine(
            name,
            &id,
            &v,
            "compute_network_attachment_statuses",
            machine_ns(&id),
        );
        self.made(settled(m).await)
    }

    /// Records a ready machine in [`Dp::machines`].
    fn made(&self, m: Machine) -> Machine {
        self.machines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(m.clone());
        m
    }

    /// Creates a bare-metal instance and waits until it is ready.
    pub async fn bm(&self, token: &str, name: &str, extra: &[&str]) -> Machine {
        let mut args = vec![
            "create",
            "baremetalinstance",
            "--host-type",
            "bm-standard",
            "--name",
            name,
            "--wait",
            "--timeout",
            "180s",
        ];
        args.extend_from_slice(extra);
        self.ok(token, &args).await;
        let v = self.json(token, &["get", "baremetalinstance", name]).await;
        let host = v["status"]["host"].as_str().expect("host").to_string();
        let id = v["id"].as_str().expect("id").to_string();
        let m = self.machine(
            name,
            &id,
            &v,
            "network_attachment_statuses",
            machine_ns(&host),
        );
        self.made(settled(m).await)
    }

    fn machine(&self, name: &str, id: &str, v: &Value, statuses: &str, ns: String) -> Machine {
        let fresh = self
            .created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(ns.clone());
        if fresh {
            record(&ns);
        }
        let st = &v["status"];
        let list = st[statuses].as_array().cloned().unwrap_or_default();
        let primary = list
            .iter()
            .find(|a| a["primary"] == true)
            .or(list.first())
            .unwrap_or_else(|| panic!("{name}: no attachment status in {v}"));
        let ip = primary["ip_address"].as_str().unwrap_or_default();
        Machine {
            name: name.to_string(),
            id: id.to_string(),
            ns,
            ip: ip
                .parse()
                .unwrap_or_else(|_| panic!("{name}: bad ip '{ip}' in {v}")),
            mac: primary["mac_address"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            ifname: primary["interface"].as_str().unwrap_or("eth0").to_string(),
            external_ip: st["external_ip_address"]
                .as_str()
                .and_then(|s| s.parse().ok()),
            nics: list
                .iter()
                .map(|a| {
                    (
                        a["interface"].as_str().unwrap_or_default().to_string(),
                        a["ip_address"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect(),
        }
    }
}

/// `m` once its DHCP client has configured it: the API reports a machine running when
/// dnsmasq leased its address, a moment before the client applied address and routes.
async fn settled(m: Machine) -> Machine {
    let (ns, ifname, ip) = (m.ns.clone(), m.ifname.clone(), m.ip.to_string());
    let ready = blocking(move || {
        for _ in 0..300 {
            let addrs = Command::new("ip")
                .args(["-n", &ns, "-o", "addr", "show", "dev", &ifname])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
                .unwrap_or_default();
            let has_addr = addrs.contains(&format!(" {ip}/"));
            if has_addr && !osac_linux::probe::default_routes(&ns).is_empty() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    })
    .await;
    assert!(
        ready,
        "{}: {} not configured by DHCP in {}",
        m.name, m.ip, m.ns
    );
    m
}

/// The `items` of a list (or the array itself).
pub fn items(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a.clone(),
        other => other["items"].as_array().cloned().unwrap_or_default(),
    }
}

/// Runs a blocking probe off the runtime.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("probe thread")
}
