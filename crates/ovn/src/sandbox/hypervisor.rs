//! One hypervisor of a sandbox: a network namespace with its own `ovsdb-server` (the Open
//! vSwitch configuration), `ovs-vswitchd` on the userspace datapath and `ovn-controller`.
//!
//! Bridges: `br-int`, the integration bridge `ovn-controller` programs (`fail-mode=secure`),
//! and `br-phy`, which holds the underlay veth and carries the tunnel address: on the
//! userspace datapath Geneve packets are routed through it. A workload's veth is plugged into
//! `br-int` from this namespace (the daemon opens ports by name in its own namespace) with
//! `external_ids:iface-id` naming its logical switch port.

use std::ffi::OsStr;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use osac_ovsdb::Address;

use super::{SandboxConfig, SandboxError, VSWITCH_SCHEMA, daemon_args, encap_ip, kill_pidfile};
use crate::cmd;

/// A hypervisor (an OVN chassis).
#[derive(Debug, Clone)]
pub struct Hypervisor {
    chassis: String,
    ns: String,
    index: usize,
    encap_ip: Ipv4Addr,
    dir: PathBuf,
}

impl Hypervisor {
    pub(super) fn new(config: &SandboxConfig, index: usize) -> Self {
        let chassis = format!("hv{index}");
        Hypervisor {
            ns: format!("{}-{chassis}", config.prefix),
            dir: config.dir.join(&chassis),
            chassis,
            index,
            encap_ip: encap_ip(index),
        }
    }

    /// The chassis name (`hv1`…), the `requested-chassis` of ports bound here.
    pub fn chassis(&self) -> &str {
        &self.chassis
    }

    /// The network namespace the daemons run in.
    pub fn namespace(&self) -> &str {
        &self.ns
    }

    /// The Geneve tunnel address.
    pub fn encap_ip(&self) -> Ipv4Addr {
        self.encap_ip
    }

    fn db(&self) -> String {
        format!("unix:{}", self.dir.join("db.sock").display())
    }

    fn env(&self) -> [(&'static str, &Path); 4] {
        let d = self.dir.as_path();
        [
            ("OVS_RUNDIR", d),
            ("OVS_LOGDIR", d),
            ("OVN_RUNDIR", d),
            ("OVN_LOGDIR", d),
        ]
    }

    /// `ovs-vsctl` against this hypervisor's configuration database.
    async fn vsctl(&self, args: &[&str]) -> Result<String, SandboxError> {
        let db = format!("--db={}", self.db());
        let mut all = vec![db.as_str(), "--timeout=10"];
        all.extend_from_slice(args);
        Ok(cmd::run_str(None, &self.env(), "ovs-vsctl", &all).await?)
    }

    pub(super) async fn start(
        &mut self,
        underlay_ns: &str,
        underlay_bridge: &str,
        sb: &Address,
    ) -> Result<(), SandboxError> {
        std::fs::create_dir_all(&self.dir).map_err(|source| SandboxError::Io {
            path: self.dir.clone(),
            source,
        })?;
        let ns = self.ns.clone();
        cmd::ip(None, &["netns", "add", &ns]).await?;
        cmd::ip(Some(&ns), &["link", "set", "lo", "up"]).await?;
        // The underlay: `ul` here, `<chassis>` on the underlay bridge.
        let peer = self.chassis.clone();
        cmd::ip(
            Some(underlay_ns),
            &[
                "link", "add", &peer, "type", "veth", "peer", "name", "ul", "netns", &ns,
            ],
        )
        .await?;
        cmd::ip(
            Some(underlay_ns),
            &["link", "set", &peer, "master", underlay_bridge, "up"],
        )
        .await?;
        cmd::ip(Some(&ns), &["link", "set", "ul", "up"]).await?;

        let conf = self.dir.join("conf.db");
        let _ = std::fs::remove_file(&conf);
        cmd::run(
            None,
            &[],
            "ovsdb-tool",
            &[
                OsStr::new("create"),
                conf.as_os_str(),
                OsStr::new(VSWITCH_SCHEMA),
            ],
        )
        .await?;
        let remote = format!("--remote=punix:{}", self.dir.join("db.sock").display());
        let mut args = vec![conf.display().to_string(), remote];
        args.extend(daemon_args(&self.dir, "ovsdb-server"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cmd::run_str(Some(&ns), &self.env(), "ovsdb-server", &args).await?;
        self.vsctl(&["--no-wait", "init"]).await?;

        let mut args = vec![self.db()];
        args.extend(daemon_args(&self.dir, "ovs-vswitchd"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cmd::run_str(Some(&ns), &self.env(), super::OVS_VSWITCHD, &args).await?;

        let ip = self.encap_ip.to_string();
        self.vsctl(&[
            "set",
            "open",
            ".",
            &format!("external-ids:system-id={}", self.chassis),
            &format!("external-ids:ovn-remote={sb}"),
            "external-ids:ovn-encap-type=geneve",
            &format!("external-ids:ovn-encap-ip={ip}"),
            "external-ids:ovn-bridge=br-int",
        ])
        .await?;
        self.vsctl(&[
            "--may-exist",
            "add-br",
            "br-int",
            "--",
            "set",
            "bridge",
            "br-int",
            "datapath_type=netdev",
            "fail-mode=secure",
            "other-config:disable-in-band=true",
        ])
        .await?;
        self.vsctl(&[
            "--may-exist",
            "add-br",
            "br-phy",
            "--",
            "set",
            "bridge",
            "br-phy",
            "datapath_type=netdev",
            "--",
            "--may-exist",
            "add-port",
            "br-phy",
            "ul",
        ])
        .await?;
        cmd::ip(
            Some(&ns),
            &["addr", "add", &format!("{ip}/16"), "dev", "br-phy"],
        )
        .await?;
        cmd::ip(Some(&ns), &["link", "set", "br-phy", "up"]).await?;

        let mut args = vec![self.db()];
        args.extend(daemon_args(&self.dir, "ovn-controller"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cmd::run_str(Some(&ns), &self.env(), "ovn-controller", &args).await?;
        tracing::debug!(chassis = %self.chassis, index = self.index, "OVN hypervisor started");
        Ok(())
    }

    /// Joins the provider network: a netdev bridge `br-provider` holding a veth (`pv` here,
    /// `<chassis>` on bridge `bridge` of namespace `provider_ns`), mapped to physical network
    /// `network` (`ovn-bridge-mappings`), so `localnet` ports of that name reach it.
    pub(super) async fn connect_provider(
        &self,
        provider_ns: &str,
        bridge: &str,
        network: &str,
    ) -> Result<(), SandboxError> {
        let peer = self.chassis.clone();
        cmd::ip(
            Some(provider_ns),
            &[
                "link", "add", &peer, "type", "veth", "peer", "name", "pv", "netns", &self.ns,
            ],
        )
        .await?;
        cmd::ip(
            Some(provider_ns),
            &["link", "set", &peer, "master", bridge, "up"],
        )
        .await?;
        cmd::ip(Some(&self.ns), &["link", "set", "pv", "up"]).await?;
        self.vsctl(&[
            "--may-exist",
            "add-br",
            "br-provider",
            "--",
            "set",
            "bridge",
            "br-provider",
            "datapath_type=netdev",
            "--",
            "--may-exist",
            "add-port",
            "br-provider",
            "pv",
            "--",
            "set",
            "open",
            ".",
            &format!("external-ids:ovn-bridge-mappings={network}:br-provider"),
        ])
        .await?;
        Ok(())
    }

    /// The name of the veth end on `br-int` for logical port `port` (at most 15 characters,
    /// stable for a port name).
    pub fn port_device(port: &str) -> String {
        format!("vp{:012x}", osac_model::hash::fnv1a64(port.bytes()) >> 16)
    }

    /// Plugs a workload: a veth whose end `ifname` (MAC `mac`) goes into namespace `workload_ns`
    /// and whose other end joins `br-int` bound to logical switch port `port`.
    pub async fn plug(
        &self,
        port: &str,
        workload_ns: &str,
        ifname: &str,
        mac: &str,
    ) -> Result<(), SandboxError> {
        self.plug_device(&Self::port_device(port), port, workload_ns, ifname, mac)
            .await
    }

    /// [`Hypervisor::plug`] with the `br-int` end named `dev` (at most 15 characters; any
    /// earlier device of that name, and its workload end, is replaced).
    pub async fn plug_device(
        &self,
        dev: &str,
        port: &str,
        workload_ns: &str,
        ifname: &str,
        mac: &str,
    ) -> Result<(), SandboxError> {
        let tmp = format!("{dev}w");
        let _ = cmd::ip(Some(&self.ns), &["link", "del", dev]).await;
        cmd::ip(
            Some(&self.ns),
            &[
                "link",
                "add",
                dev,
                "type",
                "veth",
                "peer",
                "name",
                &tmp,
                "netns",
                workload_ns,
            ],
        )
        .await?;
        cmd::ip(Some(workload_ns), &["link", "set", &tmp, "name", ifname]).await?;
        cmd::ip(
            Some(workload_ns),
            &["link", "set", ifname, "address", mac, "up"],
        )
        .await?;
        disable_checksum_offload(workload_ns, ifname).await?;
        cmd::ip(Some(&self.ns), &["link", "set", dev, "up"]).await?;
        self.vsctl(&[
            "--may-exist",
            "add-port",
            "br-int",
            dev,
            "--",
            "set",
            "interface",
            dev,
            &format!("external_ids:iface-id={port}"),
        ])
        .await?;
        Ok(())
    }

    /// Binds device `dev` (already on `br-int`) to logical switch port `port` instead of the
    /// one it had: the workload keeps its interface (a port moved to another switch).
    pub async fn bind(&self, dev: &str, port: &str) -> Result<(), SandboxError> {
        self.vsctl(&[
            "set",
            "interface",
            dev,
            &format!("external_ids:iface-id={port}"),
        ])
        .await?;
        Ok(())
    }

    /// Unplugs logical port `port`'s veth (its workload end goes with it).
    pub async fn unplug(&self, port: &str) -> Result<(), SandboxError> {
        self.unplug_device(&Self::port_device(port)).await
    }

    /// Unplugs device `dev` (its workload end goes with it).
    pub async fn unplug_device(&self, dev: &str) -> Result<(), SandboxError> {
        self.vsctl(&["--if-exists", "del-port", "br-int", dev])
            .await?;
        let _ = cmd::ip(Some(&self.ns), &["link", "del", dev]).await;
        Ok(())
    }

    pub(super) async fn stop(&self) {
        for name in ["ovn-controller", "ovs-vswitchd", "ovsdb-server"] {
            kill_pidfile(&self.dir.join(format!("{name}.pid"))).await;
        }
        let _ = cmd::ip(None, &["netns", "del", &self.ns]).await;
    }
}

/// Makes the kernel fill in the checksums of what `ifname` in `ns` sends: the userspace
/// datapath reads frames from a veth as they are, and one whose TCP or UDP checksum was left
/// to an offload that never happens is dropped by the receiver (ICMP is not offloaded, so
/// pings pass either way).
pub(super) async fn disable_checksum_offload(ns: &str, ifname: &str) -> Result<(), SandboxError> {
    cmd::run_str(
        Some(ns),
        &[],
        "ethtool",
        &["--offload", ifname, "tx", "off"],
    )
    .await?;
    Ok(())
}
