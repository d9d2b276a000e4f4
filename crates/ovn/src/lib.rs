//! OVN for osac-net.
//!
//! [`nb`] holds the rows osac-net owns in a northbound database and converges them to what
//! they should be, changing only the difference.
//!
//! [`render`] says what each osac object is in OVN: VirtualNetworks and subnets (routers,
//! switches, DHCP), network attachments (logical switch ports), security groups (port groups
//! and ACLs) and external access (a provider network, uplinks, NAT), as pure rows.
//!
//! [`driver`] is the `ovn` fabric manager: it plans every operation on the shared fabric
//! model and writes the model's records and the rows they render to the northbound database,
//! its only state; [`driver::k8s`] is the k8s manager (hosting clusters as sets of chassis).
//!
//! [`machines`] plugs the machines of a sandbox (VMs, servers, cluster agents) into its
//! hypervisors for the `osac-linux` provisioner (dev mode and tests).
//!
//! [`sandbox`] starts a complete OVN deployment under one directory, without systemd and
//! without the Open vSwitch kernel module: the northbound and southbound databases
//! (`ovsdb-server`), `ovn-northd`, and hypervisors — each a network namespace with its own
//! `ovsdb-server`, `ovs-vswitchd` on the userspace datapath (`datapath_type=netdev`) and
//! `ovn-controller`, joined by Geneve tunnels over a shared underlay bridge. Workloads are
//! namespaces whose veth is plugged into a hypervisor's integration bridge and bound to a
//! logical switch port by `external_ids:iface-id`.
//! Its central part alone (databases and `ovn-northd`, no root) serves `ovn-trace`, also as a
//! daemon for many traces ([`sandbox::Tracer`]).

mod cmd;
pub mod driver;
pub mod machines;
pub mod nb;
pub mod render;
pub mod sandbox;

pub use cmd::CmdError;
pub use driver::k8s::OvnK8s;
pub use driver::{OvnError, OvnFabric, OvnSettings};
pub use machines::OvnMachines;
pub use sandbox::{Hypervisor, Sandbox, SandboxConfig, SandboxError};
