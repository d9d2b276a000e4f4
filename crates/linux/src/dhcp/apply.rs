//! Applying a DHCP lease to an interface with `ip -n <ns>` (blocking; called from the client's
//! own thread): address, MTU and routes, and removing exactly what was applied when the lease
//! is lost or the client stops.

use std::net::Ipv4Addr;
use std::process::Command;

use super::packet::{Reply, Route};

/// What a lease put on an interface, so it can be replaced or removed precisely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The leased address.
    pub address: Ipv4Addr,
    /// Its prefix length.
    pub prefix_len: u8,
    /// Routes added (`default` or `a.b.c.d/n`, gateway or on-link).
    pub routes: Vec<Route>,
    /// MTU set from option 26.
    pub mtu: Option<u16>,
    /// The server that granted the lease.
    pub server: Option<Ipv4Addr>,
}

/// A failed `ip` invocation.
#[derive(Debug, thiserror::Error)]
#[error("ip {args}: {message}")]
pub struct IpError {
    /// The arguments.
    pub args: String,
    /// stderr or the spawn error.
    pub message: String,
}

/// Runs `ip -n <ns> <args>`.
pub fn ip(ns: &str, args: &[&str]) -> Result<String, IpError> {
    let out = Command::new("ip")
        .arg("-n")
        .arg(ns)
        .args(args)
        .output()
        .map_err(|e| IpError {
            args: args.join(" "),
            message: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(IpError {
            args: args.join(" "),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The routes a reply asks for: option 121 when present (RFC 3442: then the router option is
/// ignored), else a default route via the first router.
pub fn routes_of(reply: &Reply) -> Vec<Route> {
    if !reply.classless_routes.is_empty() {
        return reply.classless_routes.clone();
    }
    reply
        .routers
        .first()
        .map(|gw| {
            vec![Route {
                destination: Ipv4Addr::UNSPECIFIED,
                prefix_len: 0,
                gateway: *gw,
            }]
        })
        .unwrap_or_default()
}

fn route_dest(r: &Route) -> String {
    if r.prefix_len == 0 {
        "default".to_string()
    } else {
        format!("{}/{}", r.destination, r.prefix_len)
    }
}

/// Puts the lease of `reply` on `ifname`, replacing what `previous` applied.
pub fn apply(
    ns: &str,
    ifname: &str,
    reply: &Reply,
    previous: Option<&Applied>,
) -> Result<Applied, IpError> {
    let prefix_len = reply.prefix_len.unwrap_or(32);
    let next = Applied {
        address: reply.yiaddr,
        prefix_len,
        routes: routes_of(reply),
        mtu: reply.mtu,
        server: reply.server_id,
    };
    if let Some(prev) = previous {
        if prev == &next {
            return Ok(next);
        }
        if prev.address != next.address || prev.prefix_len != next.prefix_len {
            remove(ns, ifname, prev);
        } else {
            for r in prev.routes.iter().filter(|r| !next.routes.contains(r)) {
                let _ = del_route(ns, ifname, r);
            }
        }
    }
    if let Some(mtu) = next.mtu.filter(|m| *m >= 576) {
        ip(ns, &["link", "set", "dev", ifname, "mtu", &mtu.to_string()])?;
    }
    let cidr = format!("{}/{}", next.address, next.prefix_len);
    ip(ns, &["addr", "replace", &cidr, "dev", ifname])?;
    for r in &next.routes {
        let dest = route_dest(r);
        if r.gateway.is_unspecified() {
            ip(
                ns,
                &["route", "replace", &dest, "dev", ifname, "scope", "link"],
            )?;
        } else {
            let gw = r.gateway.to_string();
            ip(
                ns,
                &[
                    "route", "replace", &dest, "via", &gw, "dev", ifname, "onlink",
                ],
            )?;
        }
    }
    Ok(next)
}

fn del_route(ns: &str, ifname: &str, r: &Route) -> Result<String, IpError> {
    let dest = route_dest(r);
    ip(ns, &["route", "del", &dest, "dev", ifname])
}

/// Removes what a lease applied (best effort: the interface or namespace may be gone).
pub fn remove(ns: &str, ifname: &str, applied: &Applied) {
    for r in &applied.routes {
        let _ = del_route(ns, ifname, r);
    }
    let cidr = format!("{}/{}", applied.address, applied.prefix_len);
    let _ = ip(ns, &["addr", "del", &cidr, "dev", ifname]);
}
