//! Idempotent kernel building blocks shared by the fabric and k8s managers: the external and
//! parking namespaces, bridges, the VXLAN underlay and overlay devices.

use std::net::Ipv6Addr;

use ipnet::Ipv6Net;
use osac_model::hash::fnv1a64;

use crate::cmd::{self, CmdError};
use crate::config::LinuxSettings;
use crate::names::{self, EXT_BRIDGE, EXT_NS, PARK_BRIDGE, PARK_NS, UNDERLAY_BRIDGE, UNDERLAY_IF};

/// MTU of the underlay (VXLAN over IPv6 adds 70 bytes to the tenant MTU; veths and bridges
/// carry 9000 without cost).
pub const UNDERLAY_MTU: u32 = 9000;

/// The prefix of the VXLAN flooding groups: segment `vni` floods to `ff05::4789:0:0` plus the
/// VNI (see [`vxlan_group`]).
pub const VXLAN_GROUP_PREFIX: Ipv6Addr = Ipv6Addr::new(0xff05, 0, 0, 0, 0, 0x4789, 0, 0);

/// The IPv6 multicast group the VTEPs of one segment join for its broadcast, unknown unicast
/// and multicast: one group per segment (the 24-bit VNI in the low bits of
/// [`VXLAN_GROUP_PREFIX`]), so with MLD snooping on the underlay bridge a tenant's floods reach
/// only the VTEPs carrying its segment.
pub fn vxlan_group(segment: i64) -> Ipv6Addr {
    let vni = u128::try_from(segment & 0x00ff_ffff).unwrap_or(0);
    Ipv6Addr::from(u128::from(VXLAN_GROUP_PREFIX) | vni)
}

/// A fixed MAC for a bridge: without one the kernel gives a bridge the lowest MAC of its ports,
/// so plugging or unplugging a port would change the gateway's MAC under every neighbour.
pub fn bridge_mac(ns: &str, name: &str) -> String {
    let h = fnv1a64(format!("{ns}/{name}").bytes()).to_be_bytes();
    format!(
        "02:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        h[0], h[1], h[2], h[3], h[4]
    )
}

/// The EUI-64 link-local address the kernel derives from `mac` (`addr_gen_mode` 0, the
/// default in our namespaces): how a subnet gateway's IPv6 next hop is known in advance.
pub fn eui64_link_local(mac: &str) -> Option<std::net::Ipv6Addr> {
    let bytes: Vec<u8> = mac
        .split(':')
        .map(|b| u8::from_str_radix(b, 16))
        .collect::<Result<_, _>>()
        .ok()?;
    let [a, b, c, d, e, f] = <[u8; 6]>::try_from(bytes).ok()?;
    let iid = [a ^ 0x02, b, c, 0xff, 0xfe, d, e, f];
    let mut octets = [0u8; 16];
    octets[0] = 0xfe;
    octets[1] = 0x80;
    octets[8..].copy_from_slice(&iid);
    Some(std::net::Ipv6Addr::from(octets))
}

/// The link-local address of a subnet's gateway (its bridge in the VN's router namespace):
/// the router every machine of the subnet learns from RAs, which no port may impersonate.
pub fn gateway_link_local(vn_id: &str, subnet_id: &str) -> Option<std::net::Ipv6Addr> {
    eui64_link_local(&bridge_mac(
        &names::router_ns(vn_id),
        &names::subnet_bridge(subnet_id),
    ))
}

/// Creates bridge `name` in `ns` unless present (fixed MAC, no STP delay, no multicast
/// snooping: every port of a subnet or external bridge gets its floods), then sets it up.
/// Returns true when it had to be created (callers re-attach what depended on the old device).
pub async fn ensure_bridge(ns: &str, name: &str, mtu: Option<u32>) -> Result<bool, CmdError> {
    let mac = bridge_mac(ns, name);
    let created = match cmd::link(ns, name).await? {
        None => {
            let added = cmd::ip(
                Some(ns),
                &[
                    "link",
                    "add",
                    name,
                    "address",
                    &mac,
                    "type",
                    "bridge",
                    "forward_delay",
                    "0",
                    "mcast_snooping",
                    "0",
                ],
            )
            .await;
            match added {
                Ok(_) => true,
                // Another manager created it concurrently (fabric and k8s share osac-ext).
                Err(CmdError::Failed { stderr, .. }) if stderr.contains("File exists") => false,
                Err(e) => return Err(e),
            }
        }
        Some(link) => {
            if link.address.as_deref() != Some(mac.as_str()) {
                cmd::ip(Some(ns), &["link", "set", name, "address", &mac]).await?;
            }
            false
        }
    };
    if let Some(mtu) = mtu {
        cmd::ip(Some(ns), &["link", "set", name, "mtu", &mtu.to_string()]).await?;
    }
    cmd::ip(Some(ns), &["link", "set", name, "up"]).await?;
    Ok(created)
}

/// Adds an address (no DAD: the fabric guarantees uniqueness) unless already there.
pub async fn ensure_addr(ns: &str, dev: &str, cidr: &str) -> Result<(), CmdError> {
    match cmd::ip(Some(ns), &["addr", "replace", cidr, "dev", dev, "nodad"]).await {
        Ok(_) => Ok(()),
        Err(CmdError::Failed { stderr, .. }) if stderr.contains("nodad") => {
            cmd::ip(Some(ns), &["addr", "replace", cidr, "dev", dev])
                .await
                .map(|_| ())
        }
        Err(e) => Err(e),
    }
}

/// The external namespace: bridge with the transit gateways, the underlay bridge, forwarding.
pub async fn ensure_external(settings: &LinuxSettings) -> Result<(), CmdError> {
    cmd::ensure_netns(EXT_NS).await?;
    cmd::sysctl(
        EXT_NS,
        &["net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"],
    )
    .await?;
    ensure_bridge(EXT_NS, EXT_BRIDGE, None).await?;
    let t4 = settings.transit_ipv4_cidr;
    let t6 = settings.transit_ipv6_cidr;
    let gw4 = osac_backends::net::ipv4_gateway(t4);
    let gw6 = osac_backends::net::ipv6_gateway(t6);
    ensure_addr(EXT_NS, EXT_BRIDGE, &format!("{gw4}/{}", t4.prefix_len())).await?;
    ensure_addr(EXT_NS, EXT_BRIDGE, &format!("{gw6}/{}", t6.prefix_len())).await?;
    ensure_bridge(EXT_NS, UNDERLAY_BRIDGE, Some(UNDERLAY_MTU)).await?;
    // The underlay forwards a segment's flooding group only to the VTEPs that joined it (MLD
    // snooping, with the bridge as querier so memberships are refreshed and kept).
    cmd::ip(
        Some(EXT_NS),
        &[
            "link",
            "set",
            UNDERLAY_BRIDGE,
            "type",
            "bridge",
            "mcast_snooping",
            "1",
            "mcast_querier",
            "1",
        ],
    )
    .await?;
    Ok(())
}

/// Sysctls of every infrastructure namespace facing workloads (routers, hosting clusters,
/// parking), set before any of its devices is created: devices get no IPv6 unless
/// [`set_ipv6`] turns it on (so switch ends, overlay bridges and VXLAN devices have no
/// link-local address a workload could find), and nothing accepts router advertisements (the
/// namespaces' routes are static; a tenant's RA must never configure infrastructure).
pub const INFRA_SYSCTLS: [&str; 4] = [
    "net.ipv6.conf.default.disable_ipv6=1",
    "net.ipv6.conf.default.accept_ra=0",
    "net.ipv6.conf.all.accept_ra=0",
    "net.ipv6.conf.default.accept_redirects=0",
];

/// Turns IPv6 on (the interfaces that need an address: uplink, underlay, dual-stack subnet
/// gateways) or off on one device; never accepts router advertisements on it.
pub async fn set_ipv6(ns: &str, dev: &str, on: bool) -> Result<(), CmdError> {
    let disable = format!("net.ipv6.conf.{dev}.disable_ipv6={}", u8::from(!on));
    let ra = format!("net.ipv6.conf.{dev}.accept_ra=0");
    cmd::sysctl(ns, &[&disable, &ra]).await
}

/// The parking namespace and bridge (idle cluster agents). Agents reach each other there at
/// layer 2 but nothing of the namespace itself: no address, input and output dropped.
pub async fn ensure_park() -> Result<(), CmdError> {
    cmd::ensure_netns(PARK_NS).await?;
    let mut settings = INFRA_SYSCTLS.to_vec();
    settings.push("net.ipv6.conf.all.disable_ipv6=1");
    cmd::sysctl(PARK_NS, &settings).await?;
    cmd::nft(PARK_NS, &crate::fabric_manager::render::l2_guard_table()).await?;
    ensure_bridge(PARK_NS, PARK_BRIDGE, None).await.map(|_| ())
}

/// Underlay address of a namespace: the prefix plus 64 bits of the namespace name's hash.
pub fn underlay_addr(prefix: Ipv6Net, ns: &str) -> Ipv6Addr {
    let host_bits = 128 - u32::from(prefix.prefix_len());
    let mask = if host_bits >= 128 {
        u128::MAX
    } else {
        (1u128 << host_bits) - 1
    };
    let host = u128::from(fnv1a64(ns.bytes())) & mask;
    // Avoid the all-zero and ::1 host parts (subnet-router anycast, conventional gateway).
    let host = if host < 2 { host + 2 } else { host };
    Ipv6Addr::from(u128::from(prefix.network()) | host)
}

/// Joins `ns` to the underlay: veth [`UNDERLAY_IF`] ↔ `ext_end` on the underlay bridge, with the
/// namespace's underlay address.
pub async fn ensure_underlay(
    settings: &LinuxSettings,
    ns: &str,
    ext_end: &str,
) -> Result<Ipv6Addr, CmdError> {
    ensure_external(settings).await?;
    let here = cmd::link(ns, UNDERLAY_IF).await?;
    let there = cmd::link(EXT_NS, ext_end).await?;
    if here.is_none() || there.is_none() {
        cmd::ip_ignore_missing(Some(ns), &["link", "del", UNDERLAY_IF]).await?;
        cmd::ip_ignore_missing(Some(EXT_NS), &["link", "del", ext_end]).await?;
        let mtu = UNDERLAY_MTU.to_string();
        cmd::ip(
            None,
            &[
                "link",
                "add",
                ext_end,
                "netns",
                EXT_NS,
                "mtu",
                &mtu,
                "type",
                "veth",
                "peer",
                "name",
                UNDERLAY_IF,
                "netns",
                ns,
                "mtu",
                &mtu,
            ],
        )
        .await?;
    }
    cmd::ip(
        Some(EXT_NS),
        &["link", "set", ext_end, "master", UNDERLAY_BRIDGE, "up"],
    )
    .await?;
    set_ipv6(ns, UNDERLAY_IF, true).await?;
    cmd::ip(Some(ns), &["link", "set", UNDERLAY_IF, "up"]).await?;
    let addr = underlay_addr(settings.underlay_ipv6_cidr, ns);
    ensure_addr(
        ns,
        UNDERLAY_IF,
        &format!("{addr}/{}", settings.underlay_ipv6_cidr.prefix_len()),
    )
    .await?;
    Ok(addr)
}

/// VXLAN device for `segment` in `ns`, enslaved to `bridge`, flooding by the segment's own
/// multicast group ([`vxlan_group`]) on the underlay. Recreated when its group differs (so a
/// device flooding to any other group, such as one shared by every segment, is replaced).
pub async fn ensure_vxlan(
    ns: &str,
    segment: i64,
    local: Ipv6Addr,
    bridge: &str,
    mtu: u32,
) -> Result<(), CmdError> {
    let dev = names::vxlan_dev(segment);
    let group = vxlan_group(segment);
    let current = vxlan_group_of(ns, &dev).await?;
    if current.is_some_and(|g| g != Some(group)) {
        cmd::ip_ignore_missing(Some(ns), &["link", "del", &dev]).await?;
    }
    if current.is_none_or(|g| g != Some(group)) {
        let group = group.to_string();
        let (id, local, port) = (
            segment.to_string(),
            local.to_string(),
            names::VXLAN_PORT.to_string(),
        );
        cmd::ip(
            Some(ns),
            &[
                "link",
                "add",
                &dev,
                "type",
                "vxlan",
                "id",
                &id,
                "group",
                &group,
                "dev",
                UNDERLAY_IF,
                "dstport",
                &port,
                "local",
                &local,
                "ttl",
                "4",
            ],
        )
        .await?;
    }
    cmd::ip(Some(ns), &["link", "set", &dev, "mtu", &mtu.to_string()]).await?;
    cmd::ip(Some(ns), &["link", "set", &dev, "master", bridge, "up"]).await?;
    Ok(())
}

/// The flooding group of VXLAN device `dev` in `ns`: `None` when there is no such device,
/// `Some(None)` when it has no IPv6 group.
async fn vxlan_group_of(ns: &str, dev: &str) -> Result<Option<Option<Ipv6Addr>>, CmdError> {
    let out = match cmd::ip(Some(ns), &["-d", "-j", "link", "show", "dev", dev]).await {
        Ok(out) => out,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    let links: serde_json::Value = serde_json::from_str(&out).map_err(|e| CmdError::Failed {
        command: format!("ip -d -j link show dev {dev}"),
        status: "unparsable output".into(),
        stderr: e.to_string(),
    })?;
    let Some(link) = links.get(0) else {
        return Ok(None);
    };
    Ok(Some(
        link.pointer("/linkinfo/info_data/group6")
            .and_then(|g| g.as_str())
            .and_then(|g| g.parse().ok()),
    ))
}

/// Sets the br_netfilter switches so bridged IP traffic passes the namespace's `inet` hooks.
pub async fn enable_br_netfilter(ns: &str) -> Result<(), CmdError> {
    cmd::sysctl(ns, &BR_NETFILTER_SYSCTLS).await
}

/// br_netfilter inside a namespace: bridged IP traffic passes its `inet` hooks.
const BR_NETFILTER_SYSCTLS: [&str; 2] = [
    "net.bridge.bridge-nf-call-iptables=1",
    "net.bridge.bridge-nf-call-ip6tables=1",
];

/// Prepares an infrastructure namespace that bridges tenant traffic (router, hosting cluster)
/// in one `sysctl` run: [`INFRA_SYSCTLS`], br_netfilter, and `extra`.
pub async fn prepare_bridging_ns(ns: &str, extra: &[&str]) -> Result<(), CmdError> {
    let mut all: Vec<&str> = INFRA_SYSCTLS.to_vec();
    all.extend(BR_NETFILTER_SYSCTLS);
    all.extend_from_slice(extra);
    cmd::sysctl(ns, &all).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eui64_link_local_flips_the_universal_bit() {
        assert_eq!(
            eui64_link_local("02:11:22:33:44:55"),
            Some("fe80::11:22ff:fe33:4455".parse().unwrap())
        );
        assert_eq!(eui64_link_local("not a mac"), None);
    }

    #[test]
    fn bridge_macs_are_stable_local_unicast() {
        let m = bridge_mac("osac-ext", "ext0");
        assert_eq!(m, bridge_mac("osac-ext", "ext0"));
        assert_ne!(m, bridge_mac("osac-ext", "ul0"));
        assert!(m.starts_with("02:") && m.len() == 17);
    }

    #[test]
    fn each_segment_floods_to_its_own_group() {
        assert_eq!(
            vxlan_group(42),
            "ff05::4789:0:2a".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            vxlan_group(0x00ab_cdef),
            "ff05::4789:ab:cdef".parse::<Ipv6Addr>().unwrap()
        );
        assert_ne!(vxlan_group(1), vxlan_group(2));
        assert!(vxlan_group(7).is_multicast());
    }

    #[test]
    fn underlay_addresses_are_in_the_prefix_and_distinct() {
        let p: Ipv6Net = "fd00:6f73:6163:ffff::/64".parse().unwrap();
        let a = underlay_addr(p, "osac-r-1");
        let b = underlay_addr(p, "osac-hc-2");
        assert!(p.contains(&a) && p.contains(&b));
        assert_ne!(a, b);
        assert_eq!(a, underlay_addr(p, "osac-r-1"));
    }
}
