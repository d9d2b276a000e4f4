//! `osac-linux`: the real dataplane of osac-net on the local kernel — network
//! namespaces, Linux bridges, veth pairs, VXLAN, nftables and dnsmasq.
//!
//! - [`LinuxFabric`] implements the fabric role of the manager contract;
//! - [`LinuxK8s`] implements the k8s role (hosting-cluster overlays);
//! - [`gc`] removes kernel state nobody owns, [`preflight`] checks root and tools.
//!
//! Every kernel name comes from [`names`]; commands run through [`cmd`] (never `setns` on an
//! async worker thread: `ip -n` / `ip netns exec`). Layout and decisions: `docs/dataplane.md`.

#![warn(missing_docs)]

pub mod cmd;
pub mod config;
pub mod dhcp;
pub mod error;
pub mod fabric_manager;
pub mod k8s;
pub mod kernel;
pub mod names;
#[cfg(feature = "testing")]
pub mod probe;
pub mod provision;
pub mod raw;

pub use config::LinuxSettings;
pub use error::LinuxError;
pub use fabric_manager::{GcReport, LinuxFabric, OwnedSet, gc};
pub use k8s::LinuxK8s;

/// Tools the dataplane cannot work without.
pub const REQUIRED_TOOLS: [&str; 4] = ["ip", "nft", "dnsmasq", "sysctl"];

/// Whether this process runs with effective user id 0 (the error says why it cannot tell).
pub async fn runs_as_root() -> Result<bool, String> {
    let status = tokio::fs::read_to_string("/proc/self/status")
        .await
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("");
    Ok(euid == "0")
}

/// Checks that this process can run the dataplane: root, and `ip`, `nft`, `dnsmasq`,
/// `sysctl` and `conntrack` on PATH. The error says what is missing and how to get it.
pub async fn preflight() -> Result<(), LinuxError> {
    if !runs_as_root().await.map_err(LinuxError::Preflight)? {
        return Err(LinuxError::Preflight(
            "it needs root (network namespaces, nftables); run as root or use the sim fabric"
                .into(),
        ));
    }
    let missing: Vec<&str> = REQUIRED_TOOLS
        .into_iter()
        .chain(["conntrack"])
        .filter(|t| !cmd::on_path(t))
        .collect();
    if !missing.is_empty() {
        return Err(LinuxError::Preflight(format!(
            "missing tools: {} (install: apt-get install -y iproute2 nftables dnsmasq-base conntrack procps)",
            missing.join(", ")
        )));
    }
    Ok(())
}
