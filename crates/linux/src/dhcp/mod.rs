//! Our small DHCPv4 client: what a "booted" machine namespace runs on every interface so it is
//! configured only by the fabric's DHCP (address, prefix, gateway and routes, MTU). One OS
//! thread per interface, inside the machine's namespace; packets over a UDP socket bound to
//! port 68 on the device; configuration applied with `ip -n`.

pub mod apply;
pub mod client;
pub mod netns;
pub mod packet;

pub use client::{ClientConfig, DhcpClient, Status, Timing};
