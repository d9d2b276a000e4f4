//! The machines of an OVN sandbox (dev mode and tests): VMs, bare-metal servers and cluster
//! agents are network namespaces whose veths are plugged into `br-int` of a hypervisor, each
//! bound (`external_ids:iface-id`) to its network attachment's logical switch port, on the
//! chassis the port is bound to ([`OvnSettings::chassis_for`]: a VM on a chassis of its hosting
//! cluster, a server or an agent on the chassis its host maps to).
//!
//! What to plug comes from the northbound database itself: the network attachments recorded
//! there by the `ovn` fabric driver ([`crate::driver::records`]). [`OvnMachines`] is the
//! [`MachinePlace`] of the `osac-linux` provisioner, which boots machines by running its DHCP
//! clients in them (OVN's DHCP server answers), supervises those clients, powers machines off
//! and on and puts cluster VIPs on agents — the same code as on the linux fabric.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use osac_backends::OpError;
use osac_linux::names::machine_of;
use osac_linux::provision::MachinePlace;
use osac_ovsdb::{Address, Client};
use tokio::sync::Mutex;

use crate::driver::records;
use crate::render::port::port_name;
use crate::{Hypervisor, OvnSettings, Sandbox};

/// One machine interface as plugged: where, bound to which port, with which MAC.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Plug {
    chassis: String,
    port: String,
    mac: String,
}

/// The machines of `sandbox`'s hypervisors; see the module docs.
pub struct OvnMachines {
    sandbox: Arc<Sandbox>,
    settings: OvnSettings,
    prefix: String,
    northbound: Vec<Address>,
    client: Mutex<Option<Client>>,
    /// What is plugged, by (machine namespace, interface), and whether it is a VM's.
    plugged: Mutex<BTreeMap<(String, String), (Plug, bool)>>,
}

impl OvnMachines {
    /// The machines of `sandbox`, in namespaces named `<prefix><hash of the machine>` (a
    /// prefix of their own: never `osac-`, which the linux fabric's garbage collection owns),
    /// bound as the `ovn` driver with `settings` binds their ports.
    pub fn new(sandbox: Arc<Sandbox>, settings: OvnSettings, prefix: &str) -> Result<Self, String> {
        if prefix.starts_with("osac-") {
            return Err(format!(
                "machine namespace prefix '{prefix}' starts with osac- (the linux fabric's)"
            ));
        }
        let northbound = Address::parse_list(&settings.northbound).map_err(|e| e.to_string())?;
        Ok(OvnMachines {
            sandbox,
            settings,
            prefix: prefix.to_string(),
            northbound,
            client: Mutex::new(None),
            plugged: Mutex::new(BTreeMap::new()),
        })
    }

    /// The interfaces the northbound database's attachments call for, with their machine's
    /// key and whether it is a VM.
    async fn wanted(&self) -> Result<BTreeMap<(String, String), (String, bool, Plug)>, String> {
        let mut client = self.client.lock().await;
        if client.is_none() {
            let mut last = String::from("no northbound address");
            for a in &self.northbound {
                match Client::connect(a).await {
                    Ok((c, _)) => {
                        *client = Some(c);
                        break;
                    }
                    Err(e) => last = e.to_string(),
                }
            }
            if client.is_none() {
                return Err(last);
            }
        }
        let Some(c) = client.as_ref() else {
            return Err("no connection".into());
        };
        let loaded = match records::load(c).await {
            Ok(l) => l,
            Err(e) => {
                *client = None;
                return Err(e.to_string());
            }
        };
        let mut wanted = BTreeMap::new();
        for a in loaded.state.attachments() {
            let (key, ifname, vm) = machine_of(&a.host, &a.interface);
            let plug = Plug {
                chassis: self.settings.chassis_for(&a.host, &a.interface),
                port: port_name(&a.attachment_id),
                mac: a.mac_address.to_ascii_lowercase(),
            };
            wanted.insert((self.namespace(&key), ifname), (key, vm, plug));
        }
        Ok(wanted)
    }

    fn hypervisor(&self, chassis: &str) -> Result<&Hypervisor, String> {
        self.sandbox
            .hypervisor(chassis)
            .ok_or_else(|| format!("the sandbox has no chassis '{chassis}'"))
    }

    /// Plugs, rebinds and unplugs until the machines' interfaces are what the database's
    /// attachments call for. A VM's namespace is created only when it boots (`booting`): a
    /// deleted VM whose ports are not deleted yet stays deleted. A server's or agent's NIC is
    /// plugged once its first port exists and stays (an idle agent waits, plugged, for its
    /// cluster; its port moving to a subnet re-binds the same veth). Returns the first failure
    /// (the others are tried anyway).
    async fn converge(&self, booting: Option<&str>) -> Result<(), String> {
        let wanted = self.wanted().await?;
        let mut plugged = self.plugged.lock().await;
        let mut failure = None;
        // A VM's interface goes with its port; a server's NIC stays cabled while its port is
        // away (an agent's port leaves the parking network before it joins a subnet), so the
        // machine keeps its interface and its DHCP client.
        let gone: Vec<(String, String)> = plugged
            .iter()
            .filter(|(k, (_, vm))| *vm && !wanted.contains_key(*k))
            .map(|(k, _)| k.clone())
            .collect();
        for key in gone {
            if let Some((p, _)) = plugged.remove(&key) {
                let dev = device(&key.0, &key.1);
                if let Ok(hv) = self.hypervisor(&p.chassis) {
                    let _ = hv.unplug_device(&dev).await;
                }
            }
        }
        for (key, (machine, vm, want)) in wanted {
            let (ns, ifname) = &key;
            if vm && booting != Some(machine.as_str()) && !osac_linux::dhcp::netns::exists(ns) {
                continue;
            }
            let dev = device(ns, ifname);
            let result = match plugged.get(&key).map(|(p, _)| p) {
                Some(have) if *have == want => continue,
                // The same cable, now bound to another port (an agent's port moved from the
                // parking network to a subnet): the machine keeps its interface.
                Some(have) if have.chassis == want.chassis && have.mac == want.mac => {
                    match self.hypervisor(&want.chassis) {
                        Ok(hv) => hv.bind(&dev, &want.port).await.map_err(|e| e.to_string()),
                        Err(e) => Err(e),
                    }
                }
                have => {
                    if let Some(old) = have
                        && let Ok(hv) = self.hypervisor(&old.chassis)
                    {
                        let _ = hv.unplug_device(&dev).await;
                    }
                    self.plug(&dev, ns, ifname, &want).await
                }
            };
            match result {
                Ok(()) => {
                    plugged.insert(key, (want, vm));
                }
                Err(e) => {
                    tracing::warn!(%ns, %ifname, port = %want.port, error = %e, "ovn: cannot plug a machine interface");
                    failure.get_or_insert(e);
                }
            }
        }
        failure.map_or(Ok(()), Err)
    }

    async fn plug(&self, dev: &str, ns: &str, ifname: &str, want: &Plug) -> Result<(), String> {
        let hv = self.hypervisor(&want.chassis)?;
        osac_linux::cmd::ensure_netns(ns)
            .await
            .map_err(|e| e.to_string())?;
        hv.plug_device(dev, &want.port, ns, ifname, &want.mac)
            .await
            .map_err(|e| e.to_string())
    }
}

/// The `br-int` end of machine interface `ifname` of namespace `ns`: named after the machine's
/// interface, not its port, so it survives the port's move to another switch.
fn device(ns: &str, ifname: &str) -> String {
    Hypervisor::port_device(&format!("{ns}/{ifname}"))
}

#[async_trait]
impl MachinePlace for OvnMachines {
    fn prefix(&self) -> &str {
        &self.prefix
    }

    async fn prepare(&self, key: &str) -> Result<(), OpError> {
        self.converge(Some(key)).await.map_err(|e| {
            OpError::backend_transient(format!(
                "cannot plug the interfaces of machine '{key}': {e}"
            ))
        })
    }

    async fn sync(&self) {
        if let Err(e) = self.converge(None).await {
            tracing::debug!(error = %e, "ovn: machine interfaces not all plugged");
        }
    }

    async fn remove(&self, key: &str) -> Result<(), OpError> {
        let ns = self.namespace(key);
        let mut plugged = self.plugged.lock().await;
        let mine: Vec<(String, String)> = plugged.keys().filter(|k| k.0 == ns).cloned().collect();
        for k in mine {
            if let Some((p, _)) = plugged.remove(&k)
                && let Ok(hv) = self.hypervisor(&p.chassis)
            {
                hv.unplug_device(&device(&k.0, &k.1))
                    .await
                    .map_err(|e| OpError::backend_transient(e.to_string()))?;
            }
        }
        osac_linux::cmd::delete_netns(&ns)
            .await
            .map_err(|e| OpError::backend_transient(e.to_string()))
    }
}
