//! Dev mode on OVN (`osac server --dev --fabric ovn`): the `ovn` fabric and k8s managers on an
//! OVN sandbox the server starts under `<data-dir>/ovn` (northbound socket
//! `<data-dir>/ovn/nb.sock`; two hypervisors `hv1` and `hv2`; the provider network), and the
//! provisioner whose machines are namespaces plugged into the hypervisors. With
//! `--ovn-northbound ADDR` the managers program that OVN instead, no sandbox starts, and the
//! provisioner is the simulated one (the machines there are not this server's to create).
//!
//! Layout of the dev deployment (docs/ovn.md, "Dev mode"):
//! - hosting clusters `hosting-a` (chassis `hv1`) and `hosting-b` (chassis `hv2`);
//! - the inventory hosts spread over `hv1` and `hv2` (by host id);
//! - provider network `physnet`: transit `172.31.0.0/24`, the outside world `172.31.0.1` in the
//!   provider namespace (`<prefix>-pr`), which routes the ExternalIP pool `203.0.113.0/24` onto
//!   the provider network (OVN's gateway ports answer ARP for their NAT addresses);
//! - gateway chassis `hv1`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use osac_backends::{
    Capability, DriverConfig, DriverContext, Registration, Registry, RegistryError, Role,
};
use osac_linux::provision::{LinuxProvisioner, MachineScope};
use osac_ovn::driver::ProviderSettings;
use osac_ovn::{OvnMachines, OvnSettings, Sandbox, SandboxConfig};

/// Names of the dev-mode ovn managers.
pub const OVN_FABRIC: &str = "ovn-fabric";
/// See [`OVN_FABRIC`].
pub const OVN_K8S: &str = "ovn-k8s";
/// The provider network's name (the hypervisors' `ovn-bridge-mappings`).
pub const PROVIDER_NETWORK: &str = "physnet";
/// The routers' uplink addresses.
pub const TRANSIT_CIDR: &str = "172.31.0.0/24";
/// The outside world's address on the provider network: the routers' next hop.
pub const PROVIDER_GATEWAY: &str = "172.31.0.1";
/// The dev ExternalIP pool, routed onto the provider network.
pub const EXTERNAL_POOL: &str = "203.0.113.0/24";
/// The hosting clusters and their chassis.
pub const HOSTING_CLUSTERS: [(&str, &str); 2] = [("hosting-a", "hv1"), ("hosting-b", "hv2")];
/// The sandbox's chassis.
const CHASSIS: [&str; 2] = ["hv1", "hv2"];

/// Where dev mode's OVN is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OvnDev {
    /// The sandbox's directory (`<data-dir>/ovn`).
    pub dir: PathBuf,
    /// Prefix of the sandbox's namespaces (`<prefix>-hv1`…) and, with `m-`, of the machines'
    /// (at most 10 letters, digits or `-`; never `osac-`).
    pub prefix: String,
    /// An existing OVN's northbound database (no sandbox then).
    pub northbound: Option<String>,
}

impl OvnDev {
    /// The northbound database the managers program.
    pub fn northbound(&self) -> String {
        self.northbound
            .clone()
            .unwrap_or_else(|| format!("unix:{}", self.dir.join("nb.sock").display()))
    }

    /// The machines' namespace prefix.
    pub fn machine_prefix(&self) -> String {
        format!("{}m-", self.prefix)
    }
}

/// The settings of both dev managers.
pub fn settings(northbound: String) -> Result<OvnSettings, String> {
    let parse = |what: &str, text: &str| format!("dev {what} '{text}' does not parse");
    let mut chassis: BTreeMap<String, Vec<String>> = HOSTING_CLUSTERS
        .iter()
        .map(|(cluster, c)| (cluster.to_string(), vec![c.to_string()]))
        .collect();
    // Inventory hosts (known by id only once created) spread over both hypervisors.
    chassis.insert(
        osac_ovn::driver::ANY_HOST.to_string(),
        CHASSIS.iter().map(|c| c.to_string()).collect(),
    );
    Ok(OvnSettings {
        northbound,
        provider: ProviderSettings {
            provider_network: PROVIDER_NETWORK.into(),
            transit_cidr: TRANSIT_CIDR
                .parse()
                .map_err(|_| parse("transit", TRANSIT_CIDR))?,
            provider_gateway: PROVIDER_GATEWAY
                .parse()
                .map_err(|_| parse("gateway", PROVIDER_GATEWAY))?,
            transit_ipv6_cidr: None,
            provider_ipv6_gateway: None,
        },
        gateway_chassis: vec![CHASSIS[0].to_string()],
        resync_seconds: 30,
        private_key: None,
        certificate: None,
        ca_certificate: None,
        chassis,
    })
}

/// Checks root and tools before the sandbox starts (nothing to check with an existing OVN).
pub async fn preflight(dev: &OvnDev) -> Result<(), String> {
    if dev.northbound.is_some() {
        return Ok(());
    }
    let root = osac_linux::runs_as_root()
        .await
        .map_err(|e| format!("--fabric ovn cannot run here: {e}"))?;
    if !root {
        return Err("--fabric ovn cannot run here: its OVN sandbox needs root (network namespaces, Open vSwitch); run as root, pass --ovn-northbound ADDR of an existing OVN, or use the sim fabric".into());
    }
    if let Some(missing) = osac_ovn::sandbox::missing_sandbox_tools() {
        return Err(format!(
            "--fabric ovn cannot run here: missing {missing} (install: apt-get install -y ovn-central ovn-host openvswitch-switch ethtool)"
        ));
    }
    Ok(())
}

/// Starts (or restarts: the northbound database is kept) the dev sandbox and gives its
/// provider namespace the outside world's address and the pool's route.
pub async fn start_sandbox(dev: &OvnDev) -> Result<Sandbox, String> {
    std::fs::create_dir_all(&dev.dir)
        .map_err(|e| format!("cannot create {}: {e}", dev.dir.display()))?;
    let sandbox = Sandbox::start(SandboxConfig {
        dir: dev.dir.clone(),
        prefix: dev.prefix.clone(),
        hypervisors: CHASSIS.len(),
        provider_network: Some(PROVIDER_NETWORK.into()),
    })
    .await
    .map_err(|e| format!("the OVN sandbox did not start: {e}"))?;
    let Some(provider_ns) = sandbox.provider_namespace() else {
        sandbox.stop().await;
        return Err("the OVN sandbox has no provider namespace".into());
    };
    let bridge = osac_ovn::sandbox::PROVIDER_BRIDGE;
    let gateway = format!("{PROVIDER_GATEWAY}/24");
    for args in [
        ["addr", "replace", gateway.as_str(), "dev", bridge],
        ["route", "replace", EXTERNAL_POOL, "dev", bridge],
    ] {
        if let Err(e) = osac_linux::cmd::ip(Some(&provider_ns), &args).await {
            sandbox.stop().await;
            return Err(format!("the OVN sandbox's provider network: {e}"));
        }
    }
    Ok(sandbox)
}

fn registration(name: &str, role: Role, settings: &OvnSettings) -> Result<Registration, String> {
    let value = serde_yaml_ng::to_value(settings).map_err(|e| e.to_string())?;
    Ok(Registration {
        name: name.to_string(),
        role,
        description: format!("{role} on an OVN deployment (dev mode)"),
        capabilities: [Capability::Ipv4, Capability::Ipv6, Capability::DualStack]
            .into_iter()
            .collect(),
        driver: DriverConfig::Ovn(value),
        hosting_clusters: match role {
            Role::Fabric => Vec::new(),
            Role::K8s => HOSTING_CLUSTERS
                .iter()
                .map(|(c, _)| c.to_string())
                .collect(),
        },
    })
}

/// The dev registry on OVN: `ovn-fabric` and `ovn-k8s`.
pub async fn dev_registry(
    ctx: &DriverContext,
    settings: &OvnSettings,
) -> Result<Registry, RegistryError> {
    crate::dataplane::registry_of(
        ctx,
        [(OVN_FABRIC, Role::Fabric), (OVN_K8S, Role::K8s)],
        |name, role| registration(name, role, settings),
    )
    .await
}

/// The provisioner of the sandbox's machines: the `osac-linux` provisioner (DHCP clients,
/// power, VIPs) on machines [`OvnMachines`] plugs into the hypervisors.
pub fn provisioner(
    sandbox: Arc<Sandbox>,
    settings: OvnSettings,
    dev: &OvnDev,
    scope: Arc<dyn MachineScope>,
) -> Result<Arc<LinuxProvisioner>, String> {
    let machines = OvnMachines::new(sandbox, settings, &dev.machine_prefix())?;
    Ok(LinuxProvisioner::start_in(
        osac_linux::dhcp::Timing::default(),
        Some(scope),
        Arc::new(machines),
    ))
}
