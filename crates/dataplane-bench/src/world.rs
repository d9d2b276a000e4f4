//! A bench world: its own state directory, transit ranges and ids (tagged with the process id),
//! so the bench can share the machine with a dev server or the dataplane tests; and a cleanup
//! that removes exactly what the world created.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Mutex;

use osac_backends::{Capability, DriverConfig, Registration, Role};
use osac_linux::{LinuxSettings, cmd, names};

/// Boxed error of the bench (a binary: the message is all the operator needs).
pub type BenchError = Box<dyn std::error::Error + Send + Sync>;

/// A world of the bench.
pub struct World {
    /// Tag in every id (`b<pid>-<name>`).
    pub tag: String,
    /// Settings of the managers of this world.
    pub settings: LinuxSettings,
    ids: Mutex<BTreeSet<String>>,
}

/// A registration for a manager the bench builds in-process.
pub fn registration(name: &str, role: Role, clusters: &[String]) -> Registration {
    Registration {
        name: name.into(),
        role,
        description: "osac-dataplane-bench".into(),
        capabilities: [Capability::Ipv4, Capability::Ipv6, Capability::DualStack]
            .into_iter()
            .collect(),
        driver: DriverConfig::Linux(serde_yaml_ng::Value::Null),
        hosting_clusters: clusters.to_vec(),
    }
}

impl World {
    /// World `name` with transit range `100.<third>.0.0/24` (the third octet is chosen per
    /// world, away from the defaults and the tests' ranges).
    pub fn new(name: &str, third: u8) -> Result<World, BenchError> {
        let pid = std::process::id();
        let state_dir = PathBuf::from(format!("/tmp/osac-dataplane-bench-{pid}-{name}"));
        std::fs::create_dir_all(&state_dir)?;
        let settings = LinuxSettings {
            state_dir,
            transit_ipv4_cidr: format!("100.{third}.{}.0/24", pid % 250).parse()?,
            transit_ipv6_cidr: format!("fd00:6f73:b{third:x}:{:x}::/64", pid % 65000).parse()?,
            ..LinuxSettings::default()
        };
        Ok(World {
            tag: format!("b{pid}-{name}"),
            settings,
            ids: Mutex::new(BTreeSet::new()),
        })
    }

    /// An id of this world (remembered for [`World::cleanup`]).
    pub fn id(&self, s: &str) -> String {
        let id = format!("{}-{s}", self.tag);
        if let Ok(mut ids) = self.ids.lock() {
            ids.insert(id.clone());
        }
        id
    }

    /// Every namespace that exists and derives from one of this world's ids.
    pub async fn namespaces(&self) -> Result<Vec<String>, BenchError> {
        let ids = self.ids.lock().map(|i| i.clone()).unwrap_or_default();
        let mine: BTreeSet<String> = ids
            .iter()
            .flat_map(|id| {
                [
                    names::router_ns(id),
                    names::machine_ns(id),
                    names::hosting_ns(id),
                ]
            })
            .collect();
        Ok(cmd::list_netns()
            .await?
            .into_iter()
            .filter(|ns| mine.contains(ns))
            .collect())
    }

    /// "Reboot" this world's kernel state: deletes its namespaces (killing dnsmasq inside),
    /// its routes and transit gateway addresses in the shared external namespace. The state
    /// directory stays (it is the managers' memory across restarts).
    pub async fn wipe_kernel(&self) -> Result<usize, BenchError> {
        let namespaces = self.namespaces().await?;
        for ns in &namespaces {
            cmd::delete_netns(ns).await?;
        }
        let t4 = self.settings.transit_ipv4_cidr;
        let t6 = self.settings.transit_ipv6_cidr;
        let ext = names::EXT_NS;
        let mut batch = String::new();
        for routes in [
            cmd::ip(Some(ext), &["-4", "route", "show"]).await?,
            cmd::ip(Some(ext), &["-6", "route", "show"]).await?,
        ] {
            for line in routes.lines() {
                let dst = line.split_whitespace().next().unwrap_or("");
                let via = line
                    .split("via ")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .and_then(|v| v.parse::<std::net::IpAddr>().ok());
                let ours = match via {
                    Some(std::net::IpAddr::V4(v)) => t4.contains(&v),
                    Some(std::net::IpAddr::V6(v)) => t6.contains(&v),
                    None => false,
                };
                if ours {
                    batch.push_str(&format!("route del {dst}\n"));
                }
            }
        }
        if !batch.is_empty() {
            // `-force`: a route that vanished meanwhile must not stop the rest.
            cmd::run("ip", &["-n", ext, "-force", "-batch", "-"], Some(&batch)).await?;
        }
        let gw4 = format!(
            "{}/{}",
            osac_backends::net::ipv4_gateway(t4),
            t4.prefix_len()
        );
        let gw6 = format!(
            "{}/{}",
            osac_backends::net::ipv6_gateway(t6),
            t6.prefix_len()
        );
        for a in [gw4, gw6] {
            cmd::ip_ignore_missing(Some(ext), &["addr", "del", &a, "dev", names::EXT_BRIDGE])
                .await
                .or_else(|e| match &e {
                    // "Cannot assign requested address": already gone.
                    cmd::CmdError::Failed { stderr, .. } if stderr.contains("assign") => Ok(()),
                    _ => Err(e),
                })?;
        }
        Ok(namespaces.len())
    }

    /// Removes everything of this world: kernel state and the state directory.
    pub async fn cleanup(&self) {
        if let Err(e) = self.wipe_kernel().await {
            eprintln!("cleanup of {}: {e}", self.tag);
        }
        let _ = std::fs::remove_dir_all(&self.settings.state_dir);
    }
}

/// Configures a machine's interface by hand (a DHCP client does this in the product): address
/// and default route.
pub async fn configure(
    machine_ns: &str,
    ifname: &str,
    cidr: &str,
    gw: &str,
) -> Result<(), BenchError> {
    cmd::ip(
        Some(machine_ns),
        &["addr", "replace", cidr, "dev", ifname, "nodad"],
    )
    .await?;
    cmd::ip(
        Some(machine_ns),
        &["route", "replace", "default", "via", gw, "dev", ifname],
    )
    .await?;
    Ok(())
}
