//! Settings of the `linux` managers: the `linux:` block of a manager registration file.
//!
//! ```yaml
//! name: linux-fabric
//! role: fabric
//! driver: linux
//! capabilities: [ipv4, ipv6, dual_stack]
//! linux:
//!   state_dir: /run/osac-net
//!   transit_ipv4_cidr: 100.64.0.0/16
//!   transit_ipv6_cidr: fd00:6f73:6163:fffe::/64
//!   underlay_ipv6_cidr: fd00:6f73:6163:ffff::/64
//!   mtu: 1450
//!   lease_seconds: 3600
//!   dns_servers: []
//! ```

use std::net::IpAddr;
use std::path::PathBuf;

use ipnet::{Ipv4Net, Ipv6Net};
use serde::{Deserialize, Serialize};

/// Default hosting clusters of a `linux` k8s manager.
pub const DEFAULT_HOSTING_CLUSTERS: [&str; 2] = ["hosting-a", "hosting-b"];

/// Settings shared by the `linux` fabric and k8s managers (they must agree on the state
/// directory, the underlay and the MTU).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinuxSettings {
    /// Where dnsmasq configs, leases and the fabric's allocations live. May be private (mode
    /// 0700): only this process (root) reads it.
    pub state_dir: PathBuf,
    /// Where dnsmasq's host entries live: dnsmasq reads them after it dropped its privileges
    /// (to `nobody`), so every directory above this one must be traversable by all users. The
    /// server refuses to start when it is not. Default (unset):
    /// `/run/osac-net-dhcp/<hash of state_dir>`.
    pub dhcp_hosts_dir: Option<PathBuf>,
    /// Provider transit range on the external bridge: its first address is the external
    /// gateway, router uplinks get the next ones.
    pub transit_ipv4_cidr: Ipv4Net,
    /// IPv6 transit range (gateway `::1`).
    pub transit_ipv6_cidr: Ipv6Net,
    /// Underlay prefix of the VXLAN endpoints (addresses are derived from namespace names).
    pub underlay_ipv6_cidr: Ipv6Net,
    /// MTU of every tenant segment (advertised by DHCP and RA); the VXLAN overhead is added on
    /// the underlay, not taken from the tenant.
    pub mtu: u32,
    /// DHCP lease time.
    pub lease_seconds: u32,
    /// DNS servers given to primary ports; empty = none advertised.
    pub dns_servers: Vec<IpAddr>,
    /// Hosting clusters (k8s role); the registration's `hosting_clusters` win when set.
    pub hosting_clusters: Vec<String>,
    /// Garbage-collect what nobody owns (kernel state of no recorded object) when the server
    /// starts, so a crash never leaves orphans behind. Off only where
    /// several deployments share one kernel (tests side by side): a namespace's name does not
    /// say which deployment made it, so each would collect the others'.
    pub gc_on_start: bool,
}

impl Default for LinuxSettings {
    fn default() -> Self {
        LinuxSettings {
            state_dir: PathBuf::from("/run/osac-net"),
            dhcp_hosts_dir: None,
            transit_ipv4_cidr: Ipv4Net::new(std::net::Ipv4Addr::new(100, 64, 0, 0), 16)
                .unwrap_or_default(),
            transit_ipv6_cidr: Ipv6Net::new(
                std::net::Ipv6Addr::new(0xfd00, 0x6f73, 0x6163, 0xfffe, 0, 0, 0, 0),
                64,
            )
            .unwrap_or_default(),
            underlay_ipv6_cidr: Ipv6Net::new(
                std::net::Ipv6Addr::new(0xfd00, 0x6f73, 0x6163, 0xffff, 0, 0, 0, 0),
                64,
            )
            .unwrap_or_default(),
            mtu: 1450,
            lease_seconds: 3600,
            dns_servers: Vec::new(),
            hosting_clusters: DEFAULT_HOSTING_CLUSTERS.map(String::from).to_vec(),
            gc_on_start: true,
        }
    }
}

/// Why a `linux:` block is invalid.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// Wrong keys or types.
    #[error("linux settings: {0}")]
    Yaml(#[from] serde_yaml_ng::Error),
    /// A value outside what the dataplane can do.
    #[error("linux settings: {0}")]
    Invalid(String),
}

impl LinuxSettings {
    /// The directory holding every subnet's dnsmasq host entries (see
    /// [`LinuxSettings::dhcp_hosts_dir`]).
    pub fn dhcp_hosts_root(&self) -> PathBuf {
        self.dhcp_hosts_dir.clone().unwrap_or_else(|| {
            PathBuf::from("/run/osac-net-dhcp")
                .join(crate::names::short_hash(&self.state_dir.to_string_lossy()))
        })
    }

    /// Parses the `linux:` block (absent = defaults) and validates it.
    pub fn from_yaml_value(value: Option<&serde_yaml_ng::Value>) -> Result<Self, SettingsError> {
        let settings: LinuxSettings = match value {
            None | Some(serde_yaml_ng::Value::Null) => LinuxSettings::default(),
            Some(v) => serde_yaml_ng::from_value(v.clone())?,
        };
        settings.validate()?;
        Ok(settings)
    }

    /// Parses a whole registration file's `linux:` block.
    pub fn from_registration_yaml(text: &str) -> Result<Self, SettingsError> {
        let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(text)?;
        Self::from_yaml_value(doc.get("linux"))
    }

    /// Checks ranges: the transit ranges must leave room for routers, the MTU must fit.
    pub fn validate(&self) -> Result<(), SettingsError> {
        if !(576..=9000).contains(&self.mtu) {
            return Err(SettingsError::Invalid(format!(
                "mtu {} is outside 576-9000",
                self.mtu
            )));
        }
        if self.transit_ipv4_cidr.prefix_len() > 29 {
            return Err(SettingsError::Invalid(format!(
                "transit_ipv4_cidr {} is too small (at most /29)",
                self.transit_ipv4_cidr
            )));
        }
        if self.transit_ipv6_cidr.prefix_len() > 120 || self.underlay_ipv6_cidr.prefix_len() > 64 {
            return Err(SettingsError::Invalid(
                "transit_ipv6_cidr must be at most /120 and underlay_ipv6_cidr at most /64".into(),
            ));
        }
        if self.lease_seconds < 120 {
            return Err(SettingsError::Invalid(
                "lease_seconds must be at least 120".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_registrations_parse() {
        let f = LinuxSettings::from_registration_yaml(include_str!(
            "../../../examples/managers/linux/linux-fabric.yaml"
        ))
        .unwrap();
        assert_eq!(
            f,
            LinuxSettings::default(),
            "the example documents the defaults"
        );
        let k = LinuxSettings::from_registration_yaml(include_str!(
            "../../../examples/managers/linux/linux-k8s.yaml"
        ))
        .unwrap();
        assert_eq!(k.mtu, f.mtu);
        assert_eq!(
            k.state_dir, f.state_dir,
            "both managers share the state directory"
        );
    }

    #[test]
    fn defaults_and_overrides() {
        let d = LinuxSettings::from_yaml_value(None).unwrap();
        assert_eq!(d.mtu, 1450);
        assert_eq!(d.transit_ipv4_cidr.to_string(), "100.64.0.0/16");
        assert_eq!(d.hosting_clusters, vec!["hosting-a", "hosting-b"]);
        let s = LinuxSettings::from_registration_yaml(
            "name: x\nrole: fabric\ndriver: linux\nlinux:\n  state_dir: /tmp/x\n  mtu: 1400\n",
        )
        .unwrap();
        assert_eq!(s.state_dir, PathBuf::from("/tmp/x"));
        assert_eq!(s.mtu, 1400);
        let err = LinuxSettings::from_registration_yaml("linux:\n  colour: red\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `colour`"), "{err}");
        let err = LinuxSettings::from_registration_yaml("linux:\n  mtu: 100\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("mtu 100"), "{err}");
    }
}
