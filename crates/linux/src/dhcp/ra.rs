//! IPv6 router advertisements on a machine: the kernel of the machine namespace handles them
//! (the subnet's dnsmasq sends RAs with the M flag, the on-link prefix without the
//! A flag, and the MTU). We only set, per interface:
//!
//! - `accept_ra=1` (forwarding stays off: a machine is a host), `accept_ra_pinfo=1` (the
//!   on-link prefix route), `accept_ra_mtu=1`, `autoconf=0` (addresses come from DHCPv6);
//! - `accept_ra_defrtr=1` only on the **primary** interface, `0` elsewhere, so a multi-homed
//!   machine gets exactly one IPv6 default route, like the DHCPv4 router option that the
//!   fabric sends only to primary ports. A default route a secondary interface learnt before
//!   (the kernel accepts RAs by default) is removed.
//!
//! Who is primary: the provisioner knows it when it boots a machine (`Nic::primary`) and
//! says so explicitly. Without that (the supervisor starting clients on a machine it did not
//! boot, e.g. an idle cluster agent, or after a server restart) a machine with a single
//! interface treats it as primary, and a multi-homed one keeps what was set before — the
//! sysctls are kernel state that survives a restart, and the namespace is marked as
//! configured by `default.accept_ra_defrtr=0` (the kernel default is 1), which also makes
//! interfaces added later start without a default route until told otherwise.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io;
use std::net::{Ipv6Addr, SocketAddrV6};

use socket2::{Domain, Protocol, Socket, Type};

use super::apply::ip;
use super::netns;

const CONF: &str = "/proc/sys/net/ipv6/conf";
/// All routers (link-scoped multicast), where router solicitations go.
const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);

/// Whether interface `ifname` should accept the default router from RAs, or `None` to leave
/// the kernel's current setting (see the module docs).
pub fn default_router_wanted(
    explicit: Option<bool>,
    only_interface: bool,
    configured_before: bool,
) -> Option<bool> {
    explicit.or(if only_interface {
        Some(true)
    } else if configured_before {
        None
    } else {
        Some(false)
    })
}

fn read_conf(ifname: &str, key: &str) -> io::Result<String> {
    std::fs::read_to_string(format!("{CONF}/{ifname}/{key}")).map(|s| s.trim().to_string())
}

fn write_conf(ifname: &str, key: &str, value: &str) -> io::Result<()> {
    netns::write_sysctl(&format!("net.ipv6.conf.{ifname}.{key}"), value)
}

/// The IPv6-capable interfaces of the calling thread's namespace, without `lo`.
fn interfaces() -> io::Result<Vec<String>> {
    let mut out: Vec<String> = std::fs::read_dir(CONF)?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !matches!(n.as_str(), "all" | "default" | "lo"))
        .collect();
    out.sort();
    Ok(out)
}

/// Configures RA handling on every interface of the calling thread's namespace `ns` (the
/// thread must be inside it: see [`configure`]). `primary` holds what the caller knows
/// (interface → primary). Returns, per interface, whether it now accepts a default router.
pub fn configure_here(
    ns: &str,
    primary: &BTreeMap<String, bool>,
) -> io::Result<BTreeMap<String, bool>> {
    let ifaces = match interfaces() {
        Ok(i) => i,
        // No IPv6 in this kernel: nothing to configure (the DHCPv4 side still works).
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(e),
    };
    let configured_before = read_conf("default", "accept_ra_defrtr")? == "0";
    write_conf("default", "autoconf", "0")?;
    write_conf("default", "accept_ra_defrtr", "0")?;
    let mut out = BTreeMap::new();
    for ifname in &ifaces {
        match configure_interface(
            ns,
            ifname,
            default_router_wanted(
                primary.get(ifname).copied(),
                ifaces.len() == 1,
                configured_before,
            ),
        ) {
            Ok(defrtr) => {
                out.insert(ifname.clone(), defrtr);
            }
            // The interface went away meanwhile: nothing to configure.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

fn configure_interface(ns: &str, ifname: &str, defrtr: Option<bool>) -> io::Result<bool> {
    for (key, value) in [
        ("forwarding", "0"),
        ("autoconf", "0"),
        ("accept_ra", "1"),
        ("accept_ra_pinfo", "1"),
        ("accept_ra_mtu", "1"),
    ] {
        write_conf(ifname, key, value)?;
    }
    if let Some(d) = defrtr {
        write_conf(ifname, "accept_ra_defrtr", if d { "1" } else { "0" })?;
    }
    let accepts = read_conf(ifname, "accept_ra_defrtr")? != "0";
    if !accepts {
        // Learnt before we got here: the kernel keeps it for the router lifetime otherwise.
        forget_default_router(ns, ifname);
    }
    // Ask for an RA now rather than at the next periodic one (best effort: the link may be
    // down or without a link-local address yet; the periodic RAs follow anyway).
    let _ = solicit_router(ifname);
    Ok(accepts)
}

/// Removes the default routes `ifname` learnt from RAs (a secondary interface, or a port
/// that lost its network).
pub fn forget_default_router(ns: &str, ifname: &str) {
    for _ in 0..4 {
        if ip(
            ns,
            &[
                "-6", "route", "del", "default", "dev", ifname, "proto", "ra",
            ],
        )
        .is_err()
        {
            break;
        }
    }
}

/// Stops RA handling on every interface of the calling thread's namespace `ns` and removes
/// the default routes learnt from RAs: a powered-off machine has no network configuration.
pub fn disable_here(ns: &str) -> io::Result<()> {
    let ifaces = match interfaces() {
        Ok(i) => i,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for ifname in ifaces {
        match write_conf(&ifname, "accept_ra", "0") {
            Ok(()) => forget_default_router(ns, &ifname),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// [`disable_here`] for namespace `ns` from any thread (blocking).
pub fn disable(ns: &str) -> io::Result<()> {
    let name = ns.to_string();
    netns::run_in(ns, move || disable_here(&name))
}

/// [`disable`] from async code without blocking a runtime worker.
pub async fn disable_async(ns: &str) -> io::Result<()> {
    let ns = ns.to_string();
    tokio::task::spawn_blocking(move || disable(&ns))
        .await
        .map_err(|e| io::Error::other(format!("RA task failed: {e}")))?
}

/// Sends one ICMPv6 router solicitation on `ifname` (the kernel fills in the checksum and
/// the link-local source).
pub fn solicit_router(ifname: &str) -> io::Result<()> {
    let name = CString::new(ifname).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `name` is a valid NUL-terminated string for the duration of the call.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        return Err(io::Error::last_os_error());
    }
    let s = Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::ICMPV6))?;
    s.bind_device(Some(ifname.as_bytes()))?;
    s.set_multicast_if_v6(index)?;
    s.set_multicast_hops_v6(255)?;
    // Type 133, code 0, checksum (kernel), 4 reserved bytes.
    let rs = [133u8, 0, 0, 0, 0, 0, 0, 0];
    s.send_to(&rs, &SocketAddrV6::new(ALL_ROUTERS, 0, 0, index).into())?;
    Ok(())
}

/// [`configure_here`] for namespace `ns` from any thread (blocking: runs on a fresh thread
/// that enters the namespace).
pub fn configure(ns: &str, primary: BTreeMap<String, bool>) -> io::Result<BTreeMap<String, bool>> {
    let name = ns.to_string();
    netns::run_in(ns, move || configure_here(&name, &primary))
}

/// [`configure`] from async code without blocking a runtime worker.
pub async fn configure_async(
    ns: &str,
    primary: BTreeMap<String, bool>,
) -> io::Result<BTreeMap<String, bool>> {
    let ns = ns.to_string();
    tokio::task::spawn_blocking(move || configure(&ns, primary))
        .await
        .map_err(|e| io::Error::other(format!("RA configuration task failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::default_router_wanted as want;

    #[test]
    fn the_provisioner_decides_when_it_knows() {
        for single in [false, true] {
            for before in [false, true] {
                assert_eq!(want(Some(true), single, before), Some(true));
                assert_eq!(want(Some(false), single, before), Some(false));
            }
        }
    }

    #[test]
    fn otherwise_a_single_interface_is_primary_and_multi_homed_is_left_or_off() {
        assert_eq!(want(None, true, false), Some(true));
        assert_eq!(want(None, true, true), Some(true));
        // First time on a multi-homed machine nobody described: no default route from RAs.
        assert_eq!(want(None, false, false), Some(false));
        // Configured before (e.g. booted, then the server restarted): keep it.
        assert_eq!(want(None, false, true), None);
    }
}
