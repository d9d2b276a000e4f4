//! Cluster VIPs answered by one agent, like MetalLB in L2 mode: the VIP is an extra address of
//! that agent's fabric interface (so the agent answers ARP/ND for it) and a gratuitous ARP
//! tells the segment. Which cluster put it there is recorded in the interface alias, so a
//! restarted server can still remove it.

use std::net::IpAddr;

use osac_backends::OpError;

use super::MachinePlace;
use super::machines::{MachineLink, machine_links};
use crate::cmd;
use crate::dhcp::netns;
use crate::dhcp::packet::parse_mac;
use crate::raw;

/// Alias prefix of an interface holding VIPs: `osac-vip <cluster id> <vip> [<vip>…]`.
const VIP_ALIAS: &str = "osac-vip";

/// One VIP on one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Agent machine namespace.
    pub ns: String,
    /// Fabric interface inside it.
    pub ifname: String,
    /// The VIP.
    pub vip: IpAddr,
}

/// A failure of the machine's tools or files: backend detail, for the provider only.
fn transient(e: impl std::fmt::Display) -> OpError {
    OpError::backend_transient(e.to_string())
}

fn cidr(vip: IpAddr) -> String {
    match vip {
        IpAddr::V4(a) => format!("{a}/32"),
        IpAddr::V6(a) => format!("{a}/128"),
    }
}

/// The interface of `links` with `mac`.
fn by_mac<'a>(links: &'a [MachineLink], mac: &str) -> Option<&'a MachineLink> {
    links.iter().find(|l| {
        l.ifname != "lo"
            && l.address
                .as_deref()
                .is_some_and(|a| a.eq_ignore_ascii_case(mac))
    })
}

/// Puts `vips` on the agent (host id, fabric MAC) and records `cluster_id` in the alias.
pub async fn assign(
    place: &dyn MachinePlace,
    cluster_id: &str,
    host_id: &str,
    mac: &str,
    vips: &[IpAddr],
) -> Result<Vec<Holder>, OpError> {
    let ns = place.namespace(host_id);
    let links = machine_links(&ns).await.map_err(transient)?;
    let Some(link) = by_mac(&links, mac) else {
        return Err(OpError::transient(format!(
            "agent '{host_id}' has no interface with MAC {mac} yet"
        )));
    };
    let ifname = link.ifname.clone();
    let mut alias = format!("{VIP_ALIAS} {cluster_id}");
    for vip in vips {
        alias.push(' ');
        alias.push_str(&vip.to_string());
    }
    cmd::ip(Some(&ns), &["link", "set", "dev", &ifname, "alias", &alias])
        .await
        .map_err(transient)?;
    let mut out = Vec::new();
    for vip in vips {
        let c = cidr(*vip);
        let mut args = vec!["addr", "replace", &c, "dev", &ifname];
        if vip.is_ipv6() {
            args.push("nodad");
        }
        cmd::ip(Some(&ns), &args).await.map_err(transient)?;
        if let (IpAddr::V4(v4), Some(m)) = (vip, parse_mac(mac)) {
            let frame = raw::gratuitous_arp(m, *v4);
            let iface = ifname.clone();
            // Best effort: the address answers ARP anyway; this only refreshes caches.
            if let Err(e) = netns::run_in_async(&ns, move || raw::send_frame(&iface, &frame)).await
            {
                tracing::debug!(%ns, error = %e, "gratuitous ARP not sent");
            }
        }
        out.push(Holder {
            ns: ns.clone(),
            ifname: ifname.clone(),
            vip: *vip,
        });
    }
    Ok(out)
}

/// Finds the VIP holders of `cluster_id` by their aliases (after a restart).
pub async fn find(place: &dyn MachinePlace, cluster_id: &str) -> Result<Vec<Holder>, OpError> {
    let mut out = Vec::new();
    for ns in netns::list(place.prefix()) {
        for l in machine_links(&ns).await.map_err(transient)? {
            let Some(alias) = l.ifalias.as_deref() else {
                continue;
            };
            let mut words = alias.split_whitespace();
            if words.next() != Some(VIP_ALIAS) || words.next() != Some(cluster_id) {
                continue;
            }
            for vip in words.filter_map(|w| w.parse::<IpAddr>().ok()) {
                out.push(Holder {
                    ns: ns.clone(),
                    ifname: l.ifname.clone(),
                    vip,
                });
            }
        }
    }
    Ok(out)
}

/// Removes the VIPs and clears the aliases (missing namespaces or addresses are fine).
pub async fn release(holders: &[Holder]) -> Result<(), OpError> {
    for h in holders {
        let c = cidr(h.vip);
        cmd::ip_ignore_missing(Some(&h.ns), &["addr", "del", &c, "dev", &h.ifname])
            .await
            .or_else(|e| match &e {
                cmd::CmdError::Failed { stderr, .. } if stderr.contains("Cannot assign") => Ok(()),
                _ => Err(transient(e)),
            })?;
        cmd::ip_ignore_missing(Some(&h.ns), &["link", "set", "dev", &h.ifname, "alias", ""])
            .await
            .map_err(transient)?;
    }
    Ok(())
}
