//! The `linux` provisioner (the real dataplane's workloads): a VM, a bare-metal server or a cluster agent
//! is a machine namespace whose interfaces the fabric created (`create_network_attachment`
//! makes the veth "cable" with the inventory or generated MAC). "Booting" a machine runs our
//! DHCP client on every interface, so it is configured only by the fabric's DHCP. Deleting a
//! VM removes its namespace; wiping a server stops its clients, removes its addresses and marks
//! it powered off; a cluster's API and ingress VIPs are answered by one agent each. Power off
//! is the same mark (clients stopped, addresses removed), power on clears it; address
//! discovery reports what the machine's DHCP clients hold.
//!
//! A bare-metal server follows its request's run strategy: `always` boots it, `halted` powers
//! it off (no DHCP client, no address), `manual` boots it at the first call this provisioner
//! sees and leaves its power alone afterwards; a restart trigger different from the last call's
//! powers a running server off and boots it again. The last request per server is kept in
//! memory only: after a restart of the provisioner the next call counts as the first. A machine
//! namespace has no operating system to install: `image`, `ssh_public_key` and `user_data` are
//! accepted and not used.

pub mod machines;
pub mod place;
pub mod vip;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use osac_backends::OpError;
use osac_backends::provision::{
    BootVmRequest, DiscoveredNic, MachineRef, Nic, PowerState, ProvisionBareMetalRequest,
    ProvisionClusterRequest, Provisioner, RunStrategy,
};
use tokio::sync::Mutex;

use crate::dhcp::{Status, Timing, netns, ra};
use crate::names::machine_of;
pub use machines::MachineScope;
use machines::{Clients, Supervisor, machine_links, set_power, stop_ns_blocking};
pub use place::{FabricMachines, MachinePlace};

/// How often the supervisor looks for machine namespaces needing clients.
pub const SUPERVISE_EVERY: Duration = Duration::from_secs(1);

/// Boots machines by running DHCP clients in their namespaces. Dropping the last handle stops
/// the supervisor and every client (addresses stay, as on a crash).
pub struct LinuxProvisioner {
    clients: Arc<Clients>,
    /// Serialises operations with the supervisor's passes (a VM being deleted is not
    /// re-booted by a concurrent pass).
    ops: Arc<Mutex<Supervisor>>,
    /// VIP holders by cluster id (also recorded in the kernel, see [`vip`]).
    clusters: Mutex<BTreeMap<String, Vec<vip::Holder>>>,
    /// The last bare-metal request per host (run strategy and restart trigger), in memory.
    servers: Mutex<BTreeMap<String, ProvisionBareMetalRequest>>,
    /// Where the machines live.
    place: Arc<dyn MachinePlace>,
}

/// A failure of the machine's tools or files: backend detail, for the provider only.
fn transient(e: impl std::fmt::Display) -> OpError {
    OpError::backend_transient(e.to_string())
}

impl LinuxProvisioner {
    /// Starts the provisioner of the linux fabric's machines and its supervisor task (needs a
    /// tokio runtime); the supervisor serves the machines of `scope` (all machine namespaces
    /// when `None`).
    pub fn start(timing: Timing, scope: Option<Arc<dyn MachineScope>>) -> Arc<LinuxProvisioner> {
        Self::start_in(timing, scope, Arc::new(FabricMachines))
    }

    /// [`LinuxProvisioner::start`] for machines that live where `place` says.
    pub fn start_in(
        timing: Timing,
        scope: Option<Arc<dyn MachineScope>>,
        place: Arc<dyn MachinePlace>,
    ) -> Arc<LinuxProvisioner> {
        let clients = Arc::new(Clients::new(timing));
        let ops = Arc::new(Mutex::new(Supervisor::new(
            clients.clone(),
            scope,
            place.clone(),
        )));
        let p = Arc::new(LinuxProvisioner {
            clients,
            ops,
            clusters: Mutex::new(BTreeMap::new()),
            servers: Mutex::new(BTreeMap::new()),
            place,
        });
        let weak: Weak<LinuxProvisioner> = Arc::downgrade(&p);
        tokio::spawn(async move {
            loop {
                let Some(p) = weak.upgrade() else { return };
                p.ops.lock().await.pass().await;
                drop(p);
                tokio::time::sleep(SUPERVISE_EVERY).await;
            }
        });
        p
    }

    /// The DHCP client status (IPv4 lease and IPv6 address) of a machine interface (tests,
    /// dev tooling).
    pub fn client_status(
        &self,
        machine_key: &str,
        ifname: &str,
    ) -> Option<crate::dhcp::InterfaceStatus> {
        self.clients
            .status(&self.place.namespace(machine_key), ifname)
    }

    /// Stops every client (addresses stay); the supervisor ends with the last handle.
    pub async fn shutdown(&self) {
        let clients = self.clients.clone();
        let _ = tokio::task::spawn_blocking(move || clients.stop_all()).await;
    }

    /// Starts clients on the NICs of machine `key`; the fabric must have created them.
    async fn boot(&self, key: &str, nics: &[Nic]) -> Result<(), OpError> {
        self.place.prepare(key).await?;
        let ns = self.place.namespace(key);
        if !netns::exists(&ns) {
            return Err(OpError::transient(format!(
                "machine namespace {ns} does not exist yet (the fabric creates it with the ports)"
            )));
        }
        let links = machine_links(&ns).await.map_err(transient)?;
        for nic in nics {
            if !links.iter().any(|l| l.ifname == nic.name) {
                return Err(OpError::transient(format!(
                    "interface {} of machine {ns} does not exist yet",
                    nic.name
                )));
            }
        }
        set_power(&ns, false).await.map_err(transient)?;
        // IPv6 default route from RAs only on the primary NIC (the DHCPv4 router option
        // likewise only reaches primary ports).
        let primary: BTreeMap<String, bool> =
            nics.iter().map(|n| (n.name.clone(), n.primary)).collect();
        ra::configure_async(&ns, primary)
            .await
            .map_err(|e| OpError::backend_transient(format!("IPv6 RA settings of {ns}: {e}")))?;
        for nic in nics {
            self.clients
                .ensure(&ns, &nic.name, &nic.mac_address)
                .map_err(|e| {
                    OpError::backend_transient(format!("DHCP client on {}: {e}", nic.name))
                })?;
        }
        Ok(())
    }
}

/// The machine key of a power or discovery call: the instance id of a VM, the inventory host
/// of a bare-metal server (as the fabric names their namespaces).
fn machine_key(machine: &MachineRef) -> &str {
    match machine {
        MachineRef::Vm { instance_id } => instance_id,
        MachineRef::BareMetal { host_id, .. } => host_id,
    }
}

impl LinuxProvisioner {
    /// Powering off stops the machine's DHCP clients and removes their addresses (as a
    /// deprovisioned server); powering on clears the mark and the supervisor's next pass
    /// starts the clients again.
    async fn set_machine_power(
        &self,
        machine: &MachineRef,
        state: PowerState,
    ) -> Result<(), OpError> {
        let _guard = self.ops.lock().await;
        let ns = self.place.namespace(machine_key(machine));
        if !netns::exists(&ns) {
            return Err(OpError::permanent(format!(
                "cannot power {} {state:?}: its machine namespace {ns} does not exist",
                machine.instance_id()
            )));
        }
        match state {
            PowerState::Off => {
                set_power(&ns, true).await.map_err(transient)?;
                stop_ns_blocking(&self.clients, &ns, true).await;
                ra::disable_async(&ns).await.map_err(|e| {
                    OpError::backend_transient(format!("IPv6 RA settings of {ns}: {e}"))
                })
            }
            PowerState::On => set_power(&ns, false).await.map_err(transient),
        }
    }

    /// Every interface of the machine with the addresses its DHCP clients hold.
    async fn machine_addresses(&self, machine: &MachineRef) -> Result<Vec<DiscoveredNic>, OpError> {
        let ns = self.place.namespace(machine_key(machine));
        if !netns::exists(&ns) {
            return Ok(Vec::new());
        }
        let links = machine_links(&ns).await.map_err(transient)?;
        Ok(links
            .into_iter()
            .filter(|l| l.ifname != "lo")
            .filter_map(|l| {
                let mac_address = l.address?;
                let status = self.clients.status(&ns, &l.ifname).unwrap_or_default();
                Some(DiscoveredNic {
                    mac_address,
                    ipv4_address: match status.v4 {
                        Status::Bound(a) => Some(a.address),
                        _ => None,
                    },
                    ipv6_address: match status.v6 {
                        Status::Bound(a) => Some(a.address),
                        _ => None,
                    },
                })
            })
            .collect())
    }
}

impl Drop for LinuxProvisioner {
    fn drop(&mut self) {
        self.clients.stop_all();
    }
}

/// The machine key of a VM: the instance id (its ports are `<id>/<nic>` on the hosting
/// cluster).
fn vm_key(req: &BootVmRequest) -> String {
    let nic = req.nics.first().map_or("eth0", |n| n.name.as_str());
    machine_of(&req.hosting_cluster, &format!("{}/{nic}", req.instance_id)).0
}

#[async_trait]
impl Provisioner for LinuxProvisioner {
    async fn boot_vm(&self, req: &BootVmRequest) -> Result<(), OpError> {
        if req.nics.is_empty() {
            return Err(OpError::permanent("a VM needs at least one NIC"));
        }
        let _guard = self.ops.lock().await;
        self.boot(&vm_key(req), &req.nics).await
    }

    async fn delete_vm(&self, instance_id: &str) -> Result<(), OpError> {
        let _guard = self.ops.lock().await;
        let ns = self.place.namespace(instance_id);
        stop_ns_blocking(&self.clients, &ns, false).await;
        self.place.remove(instance_id).await
    }

    async fn provision_baremetal(&self, req: &ProvisionBareMetalRequest) -> Result<(), OpError> {
        let before = self.servers.lock().await.get(&req.host_id).cloned();
        let machine = MachineRef::BareMetal {
            instance_id: req.instance_id.clone(),
            host_id: req.host_id.clone(),
        };
        let restart = before
            .as_ref()
            .is_some_and(|b| b.restart_trigger != req.restart_trigger);
        match (req.run_strategy, &before) {
            (RunStrategy::Halted, _) => {
                let ns = self.place.namespace(&req.host_id);
                if !netns::exists(&ns) {
                    return Err(OpError::transient(format!(
                        "machine namespace {ns} does not exist yet (the fabric creates it with the ports)"
                    )));
                }
                self.set_machine_power(&machine, PowerState::Off).await?;
            }
            (RunStrategy::Manual, Some(_)) if !restart => {}
            _ => {
                if restart {
                    self.set_machine_power(&machine, PowerState::Off).await?;
                }
                let _guard = self.ops.lock().await;
                self.boot(&req.host_id, &req.nics).await?;
            }
        }
        self.servers
            .lock()
            .await
            .insert(req.host_id.clone(), req.clone());
        Ok(())
    }

    async fn deprovision_baremetal(
        &self,
        _instance_id: &str,
        host_id: &str,
    ) -> Result<(), OpError> {
        self.servers.lock().await.remove(host_id);
        let _guard = self.ops.lock().await;
        let ns = self.place.namespace(host_id);
        if !netns::exists(&ns) {
            return Ok(());
        }
        // Powered off first, so no supervisor pass restarts the clients.
        set_power(&ns, true).await.map_err(transient)?;
        stop_ns_blocking(&self.clients, &ns, true).await;
        // The kernel would keep learning routes from RAs otherwise (boot turns it back on).
        ra::disable_async(&ns)
            .await
            .map_err(|e| OpError::backend_transient(format!("IPv6 RA settings of {ns}: {e}")))?;
        Ok(())
    }

    async fn provision_cluster(&self, req: &ProvisionClusterRequest) -> Result<(), OpError> {
        if req.agents.is_empty() {
            return Err(OpError::permanent("a cluster needs at least one agent"));
        }
        let parse = |what: &str, v: &str| {
            v.parse::<IpAddr>()
                .map_err(|_| OpError::permanent(format!("{what} '{v}' is not an IP address")))
        };
        let api = parse("api_vip", &req.api_vip)?;
        let ingress = parse("ingress_vip", &req.ingress_vip)?;
        let mut agents = req.agents.clone();
        agents.sort_by(|a, b| a.host_id.cmp(&b.host_id));
        // MetalLB-style spread: the API on the first agent, ingress on the second (if any).
        let api_agent = &agents[0];
        let ingress_agent = &agents[1 % agents.len()];
        let mut holders = Vec::new();
        if api_agent.host_id == ingress_agent.host_id {
            holders.extend(
                vip::assign(
                    &*self.place,
                    &req.cluster_id,
                    &api_agent.host_id,
                    &api_agent.mac_address,
                    &[api, ingress],
                )
                .await?,
            );
        } else {
            for (agent, v) in [(api_agent, api), (ingress_agent, ingress)] {
                holders.extend(
                    vip::assign(
                        &*self.place,
                        &req.cluster_id,
                        &agent.host_id,
                        &agent.mac_address,
                        &[v],
                    )
                    .await?,
                );
            }
        }
        self.clusters
            .lock()
            .await
            .insert(req.cluster_id.clone(), holders);
        Ok(())
    }

    async fn deprovision_cluster(&self, cluster_id: &str) -> Result<(), OpError> {
        let known = self.clusters.lock().await.get(cluster_id).cloned();
        let holders = match known {
            Some(h) => h,
            None => vip::find(&*self.place, cluster_id).await?,
        };
        vip::release(&holders).await?;
        self.clusters.lock().await.remove(cluster_id);
        Ok(())
    }

    async fn power(&self, machine: &MachineRef, state: PowerState) -> Result<(), OpError> {
        self.set_machine_power(machine, state).await
    }

    async fn discover_addresses(
        &self,
        machine: &MachineRef,
    ) -> Result<Vec<DiscoveredNic>, OpError> {
        self.machine_addresses(machine).await
    }
}
