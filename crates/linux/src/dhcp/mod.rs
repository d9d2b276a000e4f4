//! Our small DHCP clients: what a "booted" machine namespace runs on every interface so it is
//! configured only by the fabric's DHCP. Per interface, one OS thread inside the machine's
//! namespace for each family:
//!
//! - DHCPv4 ([`client`]): address, prefix, gateway and routes, MTU; UDP port 68 on the
//!   device; applied with `ip -n`;
//! - DHCPv6 ([`client6`]): the reserved address (stateful IA_NA, client id = DUID-LL of the
//!   interface MAC); the on-link prefix, the default route (primary interface only) and the
//!   MTU come from router advertisements, which the machine's kernel handles as [`ra`]
//!   configures it.

pub mod apply;
pub mod apply6;
pub mod client;
pub mod client6;
pub mod netns;
pub mod packet;
pub mod packet6;
pub mod ra;
mod worker;

pub use apply6::Applied6;
pub use client::{ClientConfig, DhcpClient, Status, Timing};
pub use client6::{Client6Config, Dhcp6Client, Status6};
pub use worker::{Client, ClientInterface};

/// What the DHCP clients of one interface hold, both families.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InterfaceStatus {
    /// The DHCPv4 client.
    pub v4: Status,
    /// The DHCPv6 client.
    pub v6: Status6,
}
