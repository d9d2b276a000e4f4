//! Every kernel name the `linux` managers and provisioner use, derived from object ids, in one
//! place so the fabric, the k8s manager, the provisioner and garbage collection agree.
//!
//! # Contract with the provisioner
//! - [`short_hash`] is **12** hex characters (48 bits of FNV-1a 64), so 5,000+ objects do not
//!   collide; interface names stay ≤ 15 characters because interfaces inside our
//!   own namespaces carry no `osac` prefix (the namespace is ours).
//! - The VXLAN underlay is a bridge [`UNDERLAY_BRIDGE`] in [`EXT_NS`]; router and hosting-cluster
//!   namespaces join it with a veth named [`UNDERLAY_IF`] (see `docs/dataplane.md`).
//! - A parked agent port (idle cluster agent) is a veth whose switch end
//!   [`port_switch_end`]`(key, ifname)` is enslaved to [`PARK_BRIDGE`] in [`PARK_NS`]; use
//!   `osac_linux::fabric_manager::ports::ensure_parked_port` to create it, the fabric moves it from there.
//!
//! Namespaces (all start with [`PREFIX`]`-`; nothing else is ever touched):
//! - [`EXT_NS`] — the provider's external network (bridge [`EXT_BRIDGE`], transit gateway, routes
//!   to the VNs' external addresses) and the VXLAN underlay bridge;
//! - [`PARK_NS`] — the parking bridge for idle cluster agents;
//! - [`router_ns`]`(vn_id)` — one router per VirtualNetwork;
//! - [`hosting_ns`]`(cluster)` — one per hosting cluster (overlay bridges);
//! - [`machine_ns`]`(key)` — a VM, bare-metal server or agent (key from [`machine_of`]).

use osac_model::hash::fnv1a64;

/// Prefix of every namespace and nft table we own.
pub const PREFIX: &str = "osac";
/// The provider's external namespace.
pub const EXT_NS: &str = "osac-ext";
/// The parking namespace for idle cluster agents.
pub const PARK_NS: &str = "osac-park";
/// Namespace-name prefix of router namespaces.
pub const ROUTER_NS_PREFIX: &str = "osac-r-";
/// Namespace-name prefix of hosting-cluster namespaces.
pub const HOSTING_NS_PREFIX: &str = "osac-hc-";
/// Namespace-name prefix of machine (workload) namespaces.
pub const MACHINE_NS_PREFIX: &str = "osac-m-";

/// Bridge in [`EXT_NS`] carrying the transit range (router uplinks) and test clients.
pub const EXT_BRIDGE: &str = "ext0";
/// Bridge in [`EXT_NS`] carrying the VXLAN underlay (IPv6, no address of its own).
pub const UNDERLAY_BRIDGE: &str = "ul0";
/// Bridge in [`PARK_NS`] idle agent ports are plugged into.
pub const PARK_BRIDGE: &str = "park0";
/// Router end of a router namespace's uplink veth.
pub const UPLINK_IF: &str = "up0";
/// Router / hosting-cluster end of the underlay veth.
pub const UNDERLAY_IF: &str = "ul";
/// Name of the stateless anti-spoofing table (family `bridge`) in router and hosting namespaces.
pub const BRIDGE_TABLE: &str = "osac";

/// Name of the guard table (family `inet`) of the layer-2-only infrastructure namespaces
/// (hosting clusters, parking): not shaped like a VN table, so garbage collection never
/// touches it.
pub const GUARD_TABLE: &str = "osac-guard";

/// UDP port of the VXLAN overlays.
pub const VXLAN_PORT: u16 = 4789;

/// 12 lowercase hex characters (48 bits) identifying an object id in kernel names.
pub fn short_hash(id: &str) -> String {
    format!("{:012x}", fnv1a64(id.bytes()) >> 16)
}

/// Router namespace of a VirtualNetwork.
pub fn router_ns(vn_id: &str) -> String {
    format!("{ROUTER_NS_PREFIX}{}", short_hash(vn_id))
}

/// Namespace of a hosting cluster (by its configured name, e.g. `hosting-a`).
pub fn hosting_ns(cluster: &str) -> String {
    format!("{HOSTING_NS_PREFIX}{}", short_hash(cluster))
}

/// Namespace of a machine (VM instance id, or inventory Host id of a BM server / agent).
pub fn machine_ns(key: &str) -> String {
    format!("{MACHINE_NS_PREFIX}{}", short_hash(key))
}

/// Splits a `create_network_attachment` (host, interface) into (machine key, interface name
/// inside the machine, is_vm). A VM port is `"<vm id>/<ifname>"` with `host` = the hosting
/// cluster; anything else is an inventory Host's interface (`host` is the key).
pub fn machine_of(host: &str, interface: &str) -> (String, String, bool) {
    match interface.split_once('/') {
        Some((vm, ifname)) => (vm.to_string(), ifname.to_string(), true),
        None => (host.to_string(), interface.to_string(), false),
    }
}

/// Bridge of a subnet: in its VN's router namespace (with the gateway addresses) and, with the
/// same name, the overlay bridge in every hosting-cluster namespace.
pub fn subnet_bridge(subnet_id: &str) -> String {
    format!("b{}", short_hash(subnet_id))
}

/// VXLAN device of a segment (VNI) inside a router or hosting-cluster namespace.
pub fn vxlan_dev(segment_id: i64) -> String {
    format!("vx{segment_id}")
}

/// Switch end of a workload port's veth (in the router, hosting-cluster or parking namespace).
pub fn port_switch_end(machine_key: &str, ifname: &str) -> String {
    format!("p{}", short_hash(&format!("{machine_key}/{ifname}")))
}

/// [`EXT_NS`] end of a router's uplink veth.
pub fn uplink_ext_end(vn_id: &str) -> String {
    format!("u{}", short_hash(vn_id))
}

/// [`EXT_NS`] end of a router's underlay veth.
pub fn router_underlay_ext_end(vn_id: &str) -> String {
    format!("l{}", short_hash(vn_id))
}

/// [`EXT_NS`] end of a hosting cluster's underlay veth.
pub fn hosting_underlay_ext_end(cluster: &str) -> String {
    format!("c{}", short_hash(cluster))
}

/// The per-VirtualNetwork `inet` table (security groups, NAT) in the router namespace and in
/// every hosting-cluster namespace with ports of that VN.
pub fn vn_table(vn_id: &str) -> String {
    format!("{PREFIX}-{}", short_hash(vn_id))
}

/// Chain of a security group's ingress (`in_dir = true`) or egress rules.
pub fn sg_chain(sg_id: &str, ingress: bool) -> String {
    format!(
        "g-{}-{}",
        short_hash(sg_id),
        if ingress { "i" } else { "e" }
    )
}

/// Chain steering traffic of an allowed address (a cluster VIP) claimed by ports, ingress
/// (`ingress = true`) or egress: the union of its claimants' security groups. A chain per
/// address rather than a map element pointing at one claimant's chain, so the element never
/// has to be re-pointed when a claimant goes away.
pub fn vip_chain(addr: &std::net::IpAddr, ingress: bool) -> String {
    format!(
        "v-{}-{}",
        short_hash(&addr.to_string()),
        if ingress { "i" } else { "e" }
    )
}

/// Conntrack zone (1..=65535) of the VN whose per-VN table is `vn_table` (itself named from
/// the VN id, so the zone is stable): keeps the flows of VNs with overlapping CIDRs apart in a
/// hosting-cluster namespace they share. Hash-derived, so two VNs on one hosting cluster may
/// collide (about 1 % for 36 VNs); a collision only matters for identical 5-tuples.
pub fn ct_zone(vn_table: &str) -> u16 {
    (fnv1a64(vn_table.bytes()) % 65_535) as u16 + 1
}

/// Per-port chain (SG union or anti-spoofing) keyed by the port's switch-end name.
pub fn port_chain(kind: &str, switch_end: &str) -> String {
    format!("{kind}-{switch_end}")
}

/// Whether a namespace name is one of ours (the only namespaces GC may delete).
pub fn is_ours(ns: &str) -> bool {
    ns.starts_with("osac-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_stable_short_and_prefixed() {
        assert_eq!(short_hash("a").len(), 12);
        assert_eq!(short_hash("vn-1"), short_hash("vn-1"));
        assert_ne!(short_hash("vn-1"), short_hash("vn-2"));
        // Known value: renaming would orphan every kernel object of a running deployment.
        assert_eq!(short_hash("vn-1"), "3ae24d00e90a");
        assert_eq!(router_ns("x"), format!("osac-r-{}", short_hash("x")));
        for name in [
            subnet_bridge("00000000-0000-0000-0000-000000000000"),
            port_switch_end("vm", "eth0"),
            uplink_ext_end("v"),
            router_underlay_ext_end("v"),
            hosting_underlay_ext_end("hosting-a"),
            vxlan_dev(16_777_215),
        ] {
            assert!(name.len() <= 15, "{name} is longer than IFNAMSIZ-1");
        }
        for ns in [
            router_ns("v"),
            hosting_ns("h"),
            machine_ns("m"),
            EXT_NS.into(),
        ] {
            assert!(is_ours(&ns));
        }
        assert!(!is_ours("default"));
    }

    #[test]
    fn zones_and_vip_chains_are_stable_and_distinct() {
        let (a, b) = (vn_table("vn-1"), vn_table("vn-2"));
        assert_eq!(ct_zone(&a), ct_zone(&vn_table("vn-1")));
        assert_ne!(ct_zone(&a), ct_zone(&b));
        assert!(ct_zone(&a) >= 1, "zone 0 is the default zone");
        let vip: std::net::IpAddr = "10.0.1.241".parse().unwrap();
        assert_ne!(vip_chain(&vip, true), vip_chain(&vip, false));
        assert_ne!(
            vip_chain(&vip, true),
            vip_chain(&"10.0.1.242".parse().unwrap(), true)
        );
    }

    #[test]
    fn machine_of_splits_vm_ports() {
        assert_eq!(
            machine_of("hosting-a", "vm-1/eth0"),
            ("vm-1".into(), "eth0".into(), true)
        );
        assert_eq!(
            machine_of("host-7", "data-0"),
            ("host-7".into(), "data-0".into(), false)
        );
        assert_ne!(
            port_switch_end("vm-1", "eth0"),
            port_switch_end("vm-1", "eth1")
        );
    }
}
