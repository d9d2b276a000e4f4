//! The OVN dataplane through the API (root): a server in dev mode on OVN (`--fabric ovn`: an
//! OVN sandbox of two hypervisors and a provider network under its data directory, the `ovn`
//! fabric and k8s managers, machines plugged into the hypervisors and configured by OVN's DHCP)
//! is driven through the `osac` binary like a user, and real packets check what the API
//! promises: VMs of one subnet on different hypervisors talk; the default security group lets
//! TCP 22 in and not 8080; a forged source address is dropped; another tenant's VM is
//! unreachable; an ExternalIP reaches its VM from the provider network and the NAT gateway
//! carries outbound traffic; a bare-metal server gets its address by DHCP and talks to a VM; a
//! cluster's API VIP answers. Without root or OVN it skips with a reason, except under
//! `CI=true`, where it fails.

#[path = "support/osac_cli.rs"]
mod osac_cli;

use std::net::{IpAddr, SocketAddr};
use std::process::Command;
use std::time::Duration;

use osac_api::auth::{AuthConfig, ensure_admin_token};
use osac_controller::ControllerConfig;
use osac_linux::names::short_hash;
use osac_linux::probe::{self, Listener};
use osac_ovn::Hypervisor;
use osac_server::dataplane::FabricChoice;
use osac_server::ovn_dev::{OvnDev, PROVIDER_GATEWAY};
use osac_server::{RunningServer, ServerConfig};
use serde_json::Value;

/// The sandbox's namespace prefix (`OVNT` style: never `osac-`, which the linux fabric owns).
const PREFIX: &str = "ovnt";
/// How long a probe that must fail waits.
const WAIT: Duration = Duration::from_secs(3);

async fn can_run() -> bool {
    let dev = dev(std::path::Path::new("/nonexistent"));
    match osac_server::ovn_dev::preflight(&dev).await {
        Ok(()) => true,
        Err(e) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("the OVN dataplane test must run under CI but cannot: {e}");
            }
            eprintln!("skipping the OVN dataplane test: {e}");
            false
        }
    }
}

fn dev(dir: &std::path::Path) -> OvnDev {
    OvnDev {
        dir: dir.join("ovn"),
        prefix: PREFIX.into(),
        northbound: None,
    }
}

async fn start_server(dir: &std::path::Path) -> RunningServer {
    osac_server::start(ServerConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        database_url: format!("sqlite://{}", dir.join("osac.db").display()),
        auth: AuthConfig::TokenFile(dir.join("tokens.json")),
        managers_dir: None,
        controller: ControllerConfig {
            workers: 4,
            resync_interval: Duration::from_secs(10),
            backoff_base: Duration::from_millis(100),
            backoff_cap: Duration::from_secs(2),
            ..ControllerConfig::default()
        },
        ip_discovery_timeout: ServerConfig::DEFAULT_IP_DISCOVERY_TIMEOUT,
        fabric: FabricChoice::Ovn(dev(dir)),
        sim_latency: Default::default(),
        limits: Default::default(),
        transport: Default::default(),
    })
    .await
    .expect("the server starts on an OVN sandbox")
}

/// The server and what drives it.
struct Env {
    server: RunningServer,
    dir: tempfile::TempDir,
    admin: String,
}

/// A machine as the test sees it.
#[derive(Debug, Clone)]
struct Machine {
    name: String,
    ns: String,
    ip: IpAddr,
    ifname: String,
}

impl Env {
    async fn ok(&self, token: &str, args: &[&str]) -> String {
        let config = self.dir.path().join("cli-config.json");
        let out = osac_cli::run(self.server.url(), token, config, args).await;
        osac_cli::stdout_of_success(args, &out)
    }

    async fn json(&self, token: &str, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let text = self.ok(token, &all).await;
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("osac {args:?}: {e}: {text}"))
    }

    /// A tenant with its default network READY; a tenant-admin token.
    async fn tenant(&self, name: &str) -> String {
        self.ok(&self.admin, &["admin", "create", "tenant", "--name", name])
            .await;
        let args = [
            "admin",
            "create",
            "token",
            "--tenant",
            name,
            "--role",
            "tenant-admin",
        ];
        let token = self.ok(&self.admin, &args).await;
        for _ in 0..300 {
            let subnets = self.json(&token, &["get", "subnets"]).await;
            if items(&subnets).iter().any(|s| {
                s["metadata"]["name"] == "default-ipv4"
                    && s["status"]["state"] == "SUBNET_STATE_READY"
            }) {
                return token;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("tenant {name}: default subnet not READY");
    }

    /// A VM (single call), once its DHCP client configured it.
    async fn vm(&self, token: &str, name: &str, extra: &[&str]) -> Machine {
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
        let v = self.json(token, &["get", "computeinstance", name]).await;
        let id = v["id"].as_str().expect("id");
        let m = machine(name, &v, "compute_network_attachment_statuses", id);
        settled(m).await
    }

    /// A bare-metal instance, once its DHCP client configured it.
    async fn bm(&self, token: &str, name: &str) -> Machine {
        let args = [
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
        self.ok(token, &args).await;
        let v = self.json(token, &["get", "baremetalinstance", name]).await;
        let host = v["status"]["host"].as_str().expect("host");
        settled(machine(name, &v, "network_attachment_statuses", host)).await
    }
}

/// The namespace of machine `key` (the dev provisioner's: `<prefix>m-<hash>`).
fn machine_ns(key: &str) -> String {
    format!("{PREFIX}m-{}", short_hash(key))
}

fn machine(name: &str, v: &Value, statuses: &str, key: &str) -> Machine {
    let list = v["status"][statuses]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let primary = list
        .iter()
        .find(|a| a["primary"] == true)
        .or(list.first())
        .unwrap_or_else(|| panic!("{name}: no attachment status in {v}"));
    let ip = primary["ip_address"].as_str().unwrap_or_default();
    Machine {
        name: name.into(),
        ns: machine_ns(key),
        ip: ip
            .parse()
            .unwrap_or_else(|_| panic!("{name}: bad ip '{ip}' in {v}")),
        ifname: primary["interface"].as_str().unwrap_or("eth0").into(),
    }
}

/// `m` once its DHCP client applied its address and default route (from OVN's DHCP server).
async fn settled(m: Machine) -> Machine {
    let (ns, ifname, want) = (m.ns.clone(), m.ifname.clone(), format!("{}/", m.ip));
    let ready = blocking(move || {
        for _ in 0..300 {
            let configured = probe::ipv4_addrs(&ns, &ifname)
                .iter()
                .any(|a| a.starts_with(&want));
            if configured && !probe::default_routes(&ns).is_empty() {
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

fn items(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a.clone(),
        other => other["items"].as_array().cloned().unwrap_or_default(),
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("probe thread")
}

/// The hypervisor (`hv1`, `hv2`) whose `br-int` holds interface `ifname` of namespace `ns`.
fn hypervisor_of(ns: &str, ifname: &str) -> Option<String> {
    let dev = Hypervisor::port_device(&format!("{ns}/{ifname}"));
    ["hv1", "hv2"].into_iter().map(String::from).find(|hv| {
        Command::new("ip")
            .args(["-n", &format!("{PREFIX}-{hv}"), "link", "show", &dev])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// A ping that must work (a fresh path may take a few seconds).
async fn pings(from: &str, to: IpAddr) -> bool {
    let from = from.to_string();
    blocking(move || probe::ping_until(&from, to, Duration::from_secs(20))).await
}

/// One ping that must fail.
async fn ping_once(from: &str, to: IpAddr) -> bool {
    let from = from.to_string();
    blocking(move || probe::ping(&from, to, WAIT)).await
}

async fn listen(ns: &str, ip: IpAddr, port: u16) -> Listener {
    let ns = ns.to_string();
    blocking(move || Listener::tcp(&ns, SocketAddr::new(ip, port)))
        .await
        .unwrap_or_else(|e| panic!("listener on {ip}:{port}: {e}"))
}

/// Whether a TCP handshake from `from` completes, tried `tries` times.
async fn connects(from: &str, to: IpAddr, port: u16, tries: usize) -> bool {
    for _ in 0..tries {
        let f = from.to_string();
        let ok = blocking(move || probe::tcp_connects(&f, SocketAddr::new(to, port), WAIT))
            .await
            .unwrap_or(false);
        if ok {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    false
}

/// The peers `l` accepted (waiting a moment for the first).
async fn peers(l: std::sync::Arc<Listener>) -> Vec<IpAddr> {
    blocking(move || {
        let until = std::time::Instant::now() + WAIT;
        loop {
            let seen = l.peer_ips();
            if !seen.is_empty() || std::time::Instant::now() > until {
                return seen;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })
    .await
}

/// Runs `cmd` in namespace `ns`; whether it succeeded.
fn in_ns(ns: &str, cmd: &[&str]) -> bool {
    Command::new("ip")
        .args(["netns", "exec", ns])
        .args(cmd)
        .output()
        .is_ok_and(|o| o.status.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_api_drives_ovn_and_packets_do_what_it_promises() {
    if !can_run().await {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let admin = ensure_admin_token(&dir.path().join("tokens.json")).expect("admin token");
    let server = start_server(dir.path()).await;
    osac_server::dev::bootstrap(&server.service)
        .await
        .expect("dev bootstrap");
    let sandbox = server
        .ovn_sandbox
        .clone()
        .expect("the dev server runs a sandbox");
    let env = std::sync::Arc::new(Env { server, dir, admin });
    let outcome = tokio::spawn(scenarios(env.clone())).await;
    let Ok(env) = std::sync::Arc::try_unwrap(env) else {
        panic!("the scenarios still hold the server");
    };
    let Env { server, dir, .. } = env;
    server.shutdown().await;
    // A restart on the same data dir: the sandbox restarts on the same northbound database,
    // the managers read their records back, the machines are plugged again and DHCP
    // configures them.
    let after_restart = match &outcome {
        Ok((from, to)) => {
            let server = start_server(dir.path()).await;
            let works = pings(from, *to).await;
            server.shutdown().await;
            Some(works)
        }
        Err(_) => None,
    };
    // Stopped already unless the server's shutdown did not get that far.
    sandbox.stop().await;
    sweep_machines();
    drop(dir);
    match outcome {
        Err(e) => std::panic::resume_unwind(e.into_panic()),
        Ok(_) => assert_eq!(after_restart, Some(true), "VMs ping again after a restart"),
    }
}

/// The scenarios; returns a VM's namespace and another VM's address (for the restart).
async fn scenarios(env: std::sync::Arc<Env>) -> (String, IpAddr) {
    let provider_ns = format!("{PREFIX}-pr");
    let outside: IpAddr = PROVIDER_GATEWAY.parse().expect("ip");

    // Two VMs of one subnet on different hypervisors (the hosting cluster, hence the
    // chassis, follows from a VM's id: VMs are made until both hypervisors have one).
    let t = env.tenant("ovn-a").await;
    let mut by_hv: std::collections::BTreeMap<String, Machine> = Default::default();
    for n in 0..8 {
        let extra: &[&str] = if n == 0 {
            &["--external-ip-attachment"]
        } else {
            &[]
        };
        let m = env.vm(&t, &format!("vm{n}"), extra).await;
        let hv =
            hypervisor_of(&m.ns, &m.ifname).unwrap_or_else(|| panic!("{}: not plugged", m.name));
        by_hv.entry(hv).or_insert(m);
        if by_hv.len() == 2 {
            break;
        }
    }
    assert_eq!(by_hv.len(), 2, "VMs on both hypervisors: {by_hv:?}");
    let a1 = by_hv.remove("hv1").expect("a VM on hv1");
    let a2 = by_hv.remove("hv2").expect("a VM on hv2");
    assert!(
        pings(&a1.ns, a2.ip).await,
        "{} pings {} across hypervisors",
        a1.name,
        a2.name
    );
    assert!(
        pings(&a2.ns, a1.ip).await,
        "{} pings {} across hypervisors",
        a2.name,
        a1.name
    );

    // The default group lets TCP 22 in, not 8080.
    let _l22 = listen(&a2.ns, a2.ip, 22).await;
    let _l8080 = listen(&a2.ns, a2.ip, 8080).await;
    assert!(connects(&a1.ns, a2.ip, 22, 5).await, "tcp/22 is allowed");
    assert!(
        !connects(&a1.ns, a2.ip, 8080, 1).await,
        "tcp/8080 is not allowed"
    );

    // A forged source address is dropped (port security), the real one passes.
    assert!(in_ns(
        &a1.ns,
        &["ip", "addr", "add", "10.0.1.250/32", "dev", &a1.ifname]
    ));
    let a2ip = a2.ip.to_string();
    assert!(
        !in_ns(
            &a1.ns,
            &["ping", "-c", "2", "-W", "2", "-I", "10.0.1.250", &a2ip]
        ),
        "a ping from a forged source address got an answer"
    );
    assert!(in_ns(&a1.ns, &["ping", "-c", "1", "-W", "3", &a2ip]));
    assert!(in_ns(
        &a1.ns,
        &["ip", "addr", "del", "10.0.1.250/32", "dev", &a1.ifname]
    ));

    // The ExternalIP of the first VM reaches it from the provider network, client address
    // kept; its outbound traffic leaves with the NAT gateway's address.
    let vm0 = env.json(&t, &["get", "computeinstance", "vm0"]).await;
    let ext: IpAddr = vm0["status"]["external_ip_address"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("vm0 has no external address: {vm0}"));
    let vm0_ns = machine_ns(vm0["id"].as_str().expect("id"));
    let any: IpAddr = "0.0.0.0".parse().expect("ip");
    let inbound = std::sync::Arc::new(listen(&vm0_ns, any, 443).await);
    assert!(
        connects(&provider_ns, ext, 443, 10).await,
        "the provider reaches {ext}:443"
    );
    assert_eq!(
        peers(inbound.clone()).await,
        vec![outside],
        "the VM sees the client's address"
    );
    let gws = env.json(&t, &["get", "natgateways"]).await;
    let nat_ip: IpAddr = items(&gws)
        .first()
        .and_then(|g| {
            g["status"]["address"]
                .as_str()
                .or(g["status"]["external_ip_address"].as_str())
        })
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no NAT gateway address in {gws}"));
    // A VM without an ExternalIP (one with it leaves with its own external address).
    let plain = if a1.ns == vm0_ns { &a2 } else { &a1 };
    let outbound = std::sync::Arc::new(listen(&provider_ns, outside, 7100).await);
    assert!(
        connects(&plain.ns, outside, 7100, 10).await,
        "outbound to the provider"
    );
    assert_eq!(
        peers(outbound).await,
        vec![nat_ip],
        "the provider sees the NAT gateway's address"
    );

    // Another tenant's VM is unreachable both ways.
    let tb = env.tenant("ovn-b").await;
    env.ok(
        &tb,
        &[
            "create",
            "virtualnetwork",
            "--cidr",
            "10.9.0.0/16",
            "--name",
            "bn",
            "--wait",
        ],
    )
    .await;
    env.ok(
        &tb,
        &[
            "create",
            "subnet",
            "--virtual-network",
            "bn",
            "--cidr",
            "10.9.1.0/24",
            "--name",
            "bs",
            "--wait",
        ],
    )
    .await;
    let b1 = env
        .vm(&tb, "b1", &["--network-attachment", "subnet=bs"])
        .await;
    assert!(
        !ping_once(&a1.ns, b1.ip).await,
        "tenant a reaches tenant b's VM"
    );
    assert!(
        !ping_once(&b1.ns, a1.ip).await,
        "tenant b reaches tenant a's VM"
    );
    assert!(
        !connects(&b1.ns, a2.ip, 22, 1).await,
        "tenant b opens tcp/22 on tenant a's VM"
    );

    // A bare-metal server gets its address from OVN's DHCP and talks to a VM.
    let bm = env.bm(&t, "bm1").await;
    assert!(pings(&bm.ns, a1.ip).await, "the server pings a VM");
    assert!(
        connects(&bm.ns, a2.ip, 22, 5).await,
        "the server opens tcp/22 on a VM"
    );

    // A cluster's API VIP answers, on the agent that holds it.
    env.ok(
        &t,
        &[
            "create",
            "cluster",
            "--template",
            "ocp",
            "--node-set",
            "workers=bm-standard,size=2",
            "--name",
            "c1",
            "--wait",
            "--timeout",
            "180s",
        ],
    )
    .await;
    let c = env.json(&t, &["get", "cluster", "c1"]).await;
    let api: IpAddr = c["status"]["api_endpoint"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no API endpoint in {c}"));
    let mut hosts = Vec::new();
    for set in c["status"]["node_sets"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
    {
        for a in set["agents"].as_array().into_iter().flatten() {
            hosts.push(a["host"].as_str().unwrap_or_default().to_string());
        }
    }
    let want = format!("{api}/32");
    let holder = blocking(move || {
        for _ in 0..100 {
            if let Some(ns) = hosts
                .iter()
                .map(|h| machine_ns(h))
                .find(|ns| probe::ipv4_addrs(ns, "data-0").contains(&want))
            {
                return Some(ns);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    })
    .await
    .unwrap_or_else(|| panic!("no agent of c1 holds the API VIP {api}"));
    let api_listener = std::sync::Arc::new(listen(&holder, api, 443).await);
    if !connects(&a1.ns, api, 443, 10).await {
        let nb = format!("unix:{}", env.dir.path().join("ovn/nb.sock").display());
        let sh = |args: &[&str]| {
            Command::new(args[0])
                .args(&args[1..])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
                .unwrap_or_default()
        };
        eprintln!(
            "=== API VIP {api} unreachable from {} ===\nholder {holder}:\n{}\n{}:\n{}\nnorthbound ports:\n{}",
            a1.ns,
            sh(&["ip", "-n", &holder, "addr"]),
            a1.ns,
            sh(&["ip", "-n", &a1.ns, "neigh"]),
            sh(&[
                "ovn-nbctl",
                "--db",
                &nb,
                "--columns=name,addresses,port_security,options",
                "list",
                "Logical_Switch_Port"
            ]),
        );
        panic!("a VM reaches the cluster's API VIP {api}");
    }
    assert_eq!(
        peers(api_listener).await,
        vec![a1.ip],
        "the API VIP's agent accepted it"
    );
    (a1.ns, a2.ip)
}

/// Removes every machine namespace of this test's prefix (the servers and agents too).
fn sweep_machines() {
    let out = Command::new("ip").args(["netns", "list"]).output();
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    for line in text.lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        if name.starts_with(&format!("{PREFIX}m-")) {
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
    }
}
