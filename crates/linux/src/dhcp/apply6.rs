//! Applying a DHCPv6 address to an interface with `ip -n <ns> -6` (blocking; called from the
//! client's own thread). The address is installed as a /128 with the server's lifetimes, so
//! the kernel drops it by itself if the client dies; the on-link prefix route, the default
//! route (primary interface only) and the MTU come from the router advertisements the
//! kernel handles (see [`super::ra`]).

use std::net::Ipv6Addr;

use super::apply::{IpError, ip};

/// What a DHCPv6 Reply put on an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied6 {
    /// The leased address.
    pub address: Ipv6Addr,
    /// Its prefix length as installed (128: the prefix is on-link by RA).
    pub prefix_len: u8,
    /// Preferred lifetime in seconds when applied (`u32::MAX` = forever).
    pub preferred: u32,
    /// Valid lifetime in seconds when applied (`u32::MAX` = forever).
    pub valid: u32,
    /// DNS servers the server sent (option 23; primary ports only).
    pub dns: Vec<Ipv6Addr>,
    /// The granting server's DUID.
    pub server_id: Vec<u8>,
}

fn lifetime(seconds: u32) -> String {
    if seconds == u32::MAX {
        "forever".to_string()
    } else {
        seconds.to_string()
    }
}

/// Puts `next` on `ifname` (refreshing the lifetimes when it is already there), removing
/// `previous` first when it is another address.
pub fn apply(
    ns: &str,
    ifname: &str,
    next: &Applied6,
    previous: Option<&Applied6>,
) -> Result<(), IpError> {
    if let Some(prev) = previous
        && (prev.address != next.address || prev.prefix_len != next.prefix_len)
    {
        remove(ns, ifname, prev);
    }
    let cidr = format!("{}/{}", next.address, next.prefix_len);
    let valid = lifetime(next.valid);
    let preferred = lifetime(next.preferred.min(next.valid));
    ip(
        ns,
        &[
            "-6",
            "addr",
            "replace",
            &cidr,
            "dev",
            ifname,
            "valid_lft",
            &valid,
            "preferred_lft",
            &preferred,
        ],
    )?;
    Ok(())
}

/// Removes an applied address (best effort: the interface or namespace may be gone).
pub fn remove(ns: &str, ifname: &str, applied: &Applied6) {
    let cidr = format!("{}/{}", applied.address, applied.prefix_len);
    let _ = ip(ns, &["-6", "addr", "del", &cidr, "dev", ifname]);
}
