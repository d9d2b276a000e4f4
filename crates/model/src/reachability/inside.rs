//! Paths inside one VirtualNetwork: between ports of a subnet (bridged), between subnets
//! (routed by the VN's router), to a subnet's gateway; and the isolation between VNs.

use std::net::IpAddr;

use super::network::Port;
use super::path::{Step, Trace};
use super::security_groups::Peer;
use super::{HopKind, Protocol};

/// From port `s` (address `sa`) to port `d` (address `da`).
pub fn port_to_port(t: &mut Trace, s: &Port, sa: IpAddr, d: &Port, da: IpAddr) -> Step {
    let (sa_s, da_s) = (sa.to_string(), da.to_string());
    let ix = t.ix;
    t.port_hop(s, true, &sa_s, &da_s);
    if s.workload == d.workload && ix.workloads[s.workload].object.kind != crate::Kind::Cluster {
        let w = ix.workloads[s.workload].object.clone();
        let why = format!(
            "{da} is an address of {} itself: the machine delivers it locally, no network crossed",
            w.describe()
        );
        let mut e = t.reachable();
        e.deciding = why;
        return Err(e);
    }
    if s.vn != d.vn {
        let (sv, dv) = (ix.vn_ref(&s.vn), ix.vn_ref(&d.vn));
        let why = format!(
            "different VirtualNetworks: {} is in {} and {} in {}; VirtualNetworks are isolated \
             and reach each other only through ExternalIPs (an ExternalIPAttachment of the \
             destination)",
            ix.workloads[s.workload].object.describe(),
            sv.describe(),
            ix.workloads[d.workload].object.describe(),
            dv.describe()
        );
        return Err(t.blocked(why, Some(dv), 0));
    }
    t.filter(s, false, Peer::Addr(da))?;
    if s.subnet == d.subnet {
        t.subnet_hop(&s.subnet, "bridged within", &sa_s, &da_s);
    } else {
        t.subnet_hop(&s.subnet, "to the gateway of", &sa_s, &da_s);
        t.router_hop(&s.vn, "routed between subnets by", &sa_s, &da_s);
        t.subnet_hop(&d.subnet, "out through the gateway of", &sa_s, &da_s);
    }
    t.running(d, false)?;
    t.filter(d, true, Peer::Addr(sa))?;
    t.port_hop(d, false, &sa_s, &da_s);
    Err(t.reachable())
}

/// From port `s` to the gateway address `ga` of `subnet`: the router answers ICMP echo there,
/// and only on the subnet the request arrives on.
pub fn to_gateway(t: &mut Trace, s: &Port, sa: IpAddr, subnet: &str, ga: IpAddr) -> Step {
    let (sa_s, ga_s) = (sa.to_string(), ga.to_string());
    t.port_hop(s, true, &sa_s, &ga_s);
    let sr = t.ix.subnet_ref(subnet);
    if subnet != s.subnet {
        let why = format!(
            "{ga} is the gateway of {}: the router answers only at the gateway address of the \
             subnet a packet arrives on",
            sr.describe()
        );
        return Err(t.blocked(why, Some(sr), 0));
    }
    if t.probe.protocol != Protocol::Icmp {
        let why = format!(
            "the gateway of {} answers ICMP echo (and DHCP, neighbour discovery) only: nothing \
             of the router listens on {}",
            sr.describe(),
            t.probe.describe()
        );
        return Err(t.blocked(why, Some(sr), 0));
    }
    if s.hosted {
        // A VM's frames to the gateway are bridged out of its hosting cluster under its
        // egress groups; a bare-metal port's reach the router's own input, unfiltered.
        t.filter(s, false, Peer::Addr(ga))?;
    }
    t.hop(
        HopKind::Router,
        format!("answered by the gateway of {}", sr.describe()),
        Some(sr.clone()),
        &sa_s,
        &ga_s,
    );
    let mut e = t.reachable();
    if e.deciding_object.is_none() {
        e.deciding = format!(
            "the gateway of {} answers ICMP echo from its own subnet",
            sr.describe()
        );
        e.deciding_object = Some(sr);
    }
    Err(e)
}
