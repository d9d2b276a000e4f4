//! The machines' DHCP clients: which interfaces of which machine namespaces run one, and the
//! supervisor that keeps that true. A machine namespace runs a client on every interface unless
//! it is powered off (a wiped bare-metal server): that covers VMs and servers the provisioner
//! booted and idle cluster agents, which are pre-booted and must get a lease as soon as the
//! fabric moves their port from the parking network to a subnet.
//!
//! The power state lives in the kernel (the alias of the namespace's `lo`), so it survives a
//! restart of the server like the namespaces themselves.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::MachinePlace;
use crate::cmd::{self, CmdError};
use crate::dhcp::packet::parse_mac;
use crate::dhcp::{
    Client6Config, ClientConfig, Dhcp6Client, DhcpClient, InterfaceStatus, Timing, netns, ra,
};

/// Alias of a powered-off machine's `lo`.
pub const POWER_OFF_ALIAS: &str = "osac-power-off";

/// One link of a machine namespace as `ip -j link show` reports it.
#[derive(Debug, Clone, Deserialize)]
pub struct MachineLink {
    /// Interface name.
    pub ifname: String,
    /// MAC address.
    #[serde(default)]
    pub address: Option<String>,
    /// `ip link set … alias` text.
    #[serde(default)]
    pub ifalias: Option<String>,
}

/// The links of namespace `ns` (empty when it does not exist).
pub async fn machine_links(ns: &str) -> Result<Vec<MachineLink>, CmdError> {
    match cmd::ip(Some(ns), &["-j", "link", "show"]).await {
        Ok(out) if out.trim().is_empty() => Ok(Vec::new()),
        Ok(out) => serde_json::from_str(&out).map_err(|e| CmdError::Failed {
            command: format!("ip -n {ns} -j link show"),
            status: "unparsable output".into(),
            stderr: e.to_string(),
        }),
        Err(e) if e.is_not_found() => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Whether the machine's `lo` carries the power-off mark.
pub fn is_powered_off(links: &[MachineLink]) -> bool {
    links
        .iter()
        .any(|l| l.ifname == "lo" && l.ifalias.as_deref() == Some(POWER_OFF_ALIAS))
}

/// Marks the machine powered off (`off`) or on.
pub async fn set_power(ns: &str, off: bool) -> Result<(), CmdError> {
    let alias = if off { POWER_OFF_ALIAS } else { "" };
    cmd::ip(Some(ns), &["link", "set", "dev", "lo", "alias", alias])
        .await
        .map(|_| ())
}

/// The two clients (DHCPv4 and DHCPv6) of one interface.
struct Pair {
    v4: DhcpClient,
    v6: Dhcp6Client,
}

impl Pair {
    fn is_running(&self) -> bool {
        self.v4.is_running() && self.v6.is_running()
    }

    fn stop(self, flush: bool) {
        self.v4.stop(flush);
        self.v6.stop(flush);
    }
}

/// The running clients, by (namespace, interface): a DHCPv4 and a DHCPv6 client each.
pub struct Clients {
    timing: Timing,
    running: Mutex<BTreeMap<(String, String), Pair>>,
}

impl Clients {
    /// No clients yet; new ones use `timing`.
    pub fn new(timing: Timing) -> Self {
        Clients {
            timing,
            running: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), Pair>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts the clients (both families) on `ns`/`ifname` unless they run (finished ones
    /// are replaced).
    pub fn ensure(&self, ns: &str, ifname: &str, mac: &str) -> std::io::Result<()> {
        let mac_bytes = parse_mac(mac).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("bad MAC '{mac}'"))
        })?;
        let key = (ns.to_string(), ifname.to_string());
        let mut running = self.lock();
        if let Some(c) = running.get(&key)
            && c.is_running()
            && c.v4.config().mac == mac_bytes
        {
            return Ok(());
        }
        let stale = running.remove(&key);
        drop(running);
        let start_v4 = || {
            DhcpClient::start(ClientConfig {
                netns: ns.to_string(),
                ifname: ifname.to_string(),
                mac: mac_bytes,
                hostname: None,
                timing: self.timing,
            })
        };
        let start_v6 = || {
            Dhcp6Client::start(Client6Config {
                netns: ns.to_string(),
                ifname: ifname.to_string(),
                mac: mac_bytes,
                timing: self.timing,
            })
        };
        // Only the client that ended is replaced (same MAC): the other keeps its lease.
        let pair = match stale {
            Some(Pair { v4, v6 }) if v4.config().mac == mac_bytes => Pair {
                v4: if v4.is_running() { v4 } else { start_v4()? },
                v6: if v6.is_running() { v6 } else { start_v6()? },
            },
            stale => {
                if let Some(c) = stale {
                    c.stop(false);
                }
                Pair {
                    v4: start_v4()?,
                    v6: start_v6()?,
                }
            }
        };
        self.lock().insert(key, pair);
        Ok(())
    }

    /// Stops every client of namespace `ns` (blocking: joins the threads); `flush` removes
    /// their addresses and routes.
    pub fn stop_ns(&self, ns: &str, flush: bool) {
        let mine: Vec<Pair> = {
            let mut running = self.lock();
            let keys: Vec<_> = running.keys().filter(|(n, _)| n == ns).cloned().collect();
            keys.iter().filter_map(|k| running.remove(k)).collect()
        };
        for c in mine {
            c.stop(flush);
        }
    }

    /// Stops every client (the server is shutting down; addresses stay). In parallel: each
    /// stop waits for its client's next socket poll, so one after the other a restart would
    /// take ~0.4 s per machine.
    pub fn stop_all(&self) {
        let all: Vec<Pair> = std::mem::take(&mut *self.lock()).into_values().collect();
        std::thread::scope(|s| {
            for c in all {
                s.spawn(move || c.stop(false));
            }
        });
    }

    /// Namespaces with at least one client.
    pub fn namespaces(&self) -> BTreeSet<String> {
        self.lock().keys().map(|(n, _)| n.clone()).collect()
    }

    /// Whether `ns`/`ifname` has a running client.
    pub fn is_running(&self, ns: &str, ifname: &str) -> bool {
        self.lock()
            .get(&(ns.to_string(), ifname.to_string()))
            .is_some_and(Pair::is_running)
    }

    /// The status of the clients of `ns`/`ifname` (both families), if it has them.
    pub fn status(&self, ns: &str, ifname: &str) -> Option<InterfaceStatus> {
        self.lock()
            .get(&(ns.to_string(), ifname.to_string()))
            .map(|p| InterfaceStatus {
                v4: p.v4.status(),
                v6: p.v6.status(),
            })
    }
}

/// How often a namespace that already runs clients is looked at again (new interfaces).
const REINSPECT: Duration = Duration::from_secs(30);

/// The machines a provisioner serves (VM instance ids and inventory host ids). Machine
/// namespaces of other processes on the same host (another server, tests, benchmarks) must not
/// get our DHCP clients: they would take leases and threads that are not ours.
#[async_trait::async_trait]
pub trait MachineScope: Send + Sync {
    /// The machine keys this provisioner serves; `None` when unknown right now (the
    /// supervisor then starts nothing new).
    async fn machine_keys(&self) -> Option<BTreeSet<String>>;
}

/// Keeps every powered-on machine namespace in scope running clients; see the module docs.
pub struct Supervisor {
    clients: Arc<Clients>,
    inspected: BTreeMap<String, Instant>,
    scope: Option<Arc<dyn MachineScope>>,
    place: Arc<dyn MachinePlace>,
}

impl Supervisor {
    /// A supervisor of `clients` for the machines of `scope` (every machine namespace of
    /// the host when `None`).
    pub fn new(
        clients: Arc<Clients>,
        scope: Option<Arc<dyn MachineScope>>,
        place: Arc<dyn MachinePlace>,
    ) -> Self {
        Supervisor {
            clients,
            inspected: BTreeMap::new(),
            scope,
            place,
        }
    }

    /// One pass: stops clients of namespaces that are gone, starts clients on interfaces of
    /// powered-on namespaces. Returns the namespaces it started clients in.
    pub async fn pass(&mut self) -> Vec<String> {
        self.place.sync().await;
        let existing: BTreeSet<String> = netns::list(self.place.prefix()).into_iter().collect();
        let gone: Vec<String> = self
            .clients
            .namespaces()
            .into_iter()
            .filter(|ns| !existing.contains(ns))
            .collect();
        for ns in gone {
            tracing::debug!(%ns, "machine namespace gone: stopping its DHCP clients");
            stop_ns_blocking(&self.clients, &ns, false).await;
        }
        self.inspected.retain(|ns, _| existing.contains(ns));
        let with_clients = self.clients.namespaces();
        let mut started = Vec::new();
        let in_scope: Option<BTreeSet<String>> = match &self.scope {
            None => None,
            Some(scope) => match scope.machine_keys().await {
                Some(keys) => Some(keys.iter().map(|k| self.place.namespace(k)).collect()),
                None => return started,
            },
        };
        for ns in existing {
            if in_scope.as_ref().is_some_and(|s| !s.contains(&ns)) {
                continue;
            }
            let fresh = self
                .inspected
                .get(&ns)
                .is_some_and(|t| t.elapsed() < REINSPECT);
            if with_clients.contains(&ns) && fresh {
                continue;
            }
            self.inspected.insert(ns.clone(), Instant::now());
            if self.inspect(&ns).await {
                started.push(ns);
            }
        }
        started
    }

    async fn inspect(&self, ns: &str) -> bool {
        let links = match machine_links(ns).await {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(%ns, error = %e, "cannot list machine links");
                return false;
            }
        };
        if is_powered_off(&links) {
            return false;
        }
        let missing: Vec<&MachineLink> = links
            .iter()
            .filter(|l| l.ifname != "lo" && l.address.is_some())
            .filter(|l| !self.clients.is_running(ns, &l.ifname))
            .collect();
        if missing.is_empty() {
            return false;
        }
        // Primary unknown here: a single interface is primary, a multi-homed machine keeps
        // what its boot set (see `dhcp::ra`).
        if let Err(e) = ra::configure_async(ns, BTreeMap::new()).await {
            tracing::warn!(%ns, error = %e, "cannot configure IPv6 router advertisements");
        }
        let mut started = false;
        for l in missing {
            let Some(mac) = &l.address else { continue };
            match self.clients.ensure(ns, &l.ifname, mac) {
                Ok(()) => started = true,
                Err(e) => {
                    tracing::warn!(%ns, ifname = %l.ifname, error = %e, "cannot start DHCP client")
                }
            }
        }
        started
    }
}

/// [`Clients::stop_ns`] off the async runtime (joining client threads blocks briefly).
pub async fn stop_ns_blocking(clients: &Arc<Clients>, ns: &str, flush: bool) {
    let clients = clients.clone();
    let ns = ns.to_string();
    let _ = tokio::task::spawn_blocking(move || clients.stop_ns(&ns, flush)).await;
}
