//! Paths leaving a VirtualNetwork by its router's uplink: to the outside (SNAT to the NAT
//! gateway, else masquerade to the transit address) and to an ExternalIP of the tenant
//! (hairpin DNAT inside the same VN, or out and into another VN's router).

use std::net::IpAddr;

use super::inbound::{attachment_of, deliver, nat_gateway_of};
use super::network::Port;
use super::path::{Step, Trace, snat_of};
use super::resolve::external_ip_label;
use super::security_groups::Peer;
use super::{HopKind, Kind, ObjectRef};

/// The hops from a port to its router's uplink, with the source NAT; returns the source
/// address outside.
fn leave(t: &mut Trace, s: &Port, sa: IpAddr, dst: &str) -> Peer {
    let sa_s = sa.to_string();
    t.subnet_hop(&s.subnet, "to the gateway of", &sa_s, dst);
    t.router_hop(&s.vn, "routed to the uplink by", &sa_s, dst);
    let (nat, text, obj) = snat_of(t.ix, &s.vn, sa.is_ipv4());
    t.hop(HopKind::Snat, text, obj, &nat.address(), dst);
    t.hop(
        HopKind::Uplink,
        "leaves by the router's uplink",
        None,
        &nat.address(),
        dst,
    );
    nat
}

/// From port `s` to an address outside the cloud (or anywhere outside).
pub fn to_outside(t: &mut Trace, s: &Port, sa: IpAddr, peer: Peer) -> Step {
    let dst = peer.address();
    t.port_hop(s, true, &sa.to_string(), &dst);
    t.filter(s, false, peer)?;
    let nat = leave(t, s, sa, &dst);
    t.hop(
        HopKind::External,
        "crosses the provider's external network",
        None,
        &nat.address(),
        &dst,
    );
    t.hop(
        HopKind::Internet,
        format!("reaches {}", peer.describe()),
        None,
        &nat.address(),
        &dst,
    );
    Err(t.reachable())
}

/// From port `s` to ExternalIP `n` at `ea`.
pub fn to_external(t: &mut Trace, s: &Port, sa: IpAddr, n: usize, ea: IpAddr) -> Step {
    let ix = t.ix;
    let (sa_s, ea_s) = (sa.to_string(), ea.to_string());
    t.port_hop(s, true, &sa_s, &ea_s);
    let eip = &ix.net.external_ips[n];
    let label = external_ip_label(ix, n);
    let eip_ref = ObjectRef::new(
        Kind::ExternalIp,
        &eip.id,
        super::network::object_name(eip.metadata.as_ref()),
    );
    let Some((att, target)) = attachment_of(ix, n) else {
        t.filter(s, false, Peer::Addr(ea))?;
        leave(t, s, sa, &ea_s);
        if let Some(g) = nat_gateway_of(ix, n) {
            let why = format!(
                "{} uses {label} ({ea}) for outbound traffic only: nothing that arrives for it is \
                 forwarded inward",
                g.describe()
            );
            return Err(t.blocked(why, Some(g), 0));
        }
        let why =
            format!("{label} ({ea}) is attached to nothing: no ExternalIPAttachment forwards it");
        return Err(t.blocked(why, Some(eip_ref), 0));
    };
    let Ok(tp) = target else {
        t.filter(s, false, Peer::Addr(ea))?;
        leave(t, s, sa, &ea_s);
        return Err(t.blocked(target.err().unwrap_or_default(), Some(att), 0));
    };
    let d = &ix.ports[tp];
    let Some(ta) = d.address(ea.is_ipv4()) else {
        let why = format!(
            "{} forwards {ea} to no address of its family",
            att.describe()
        );
        return Err(t.blocked(why, Some(att), 0));
    };
    let ta_s = ta.to_string();
    if d.vn == s.vn {
        // Hairpin: the router DNATs before forwarding, so a bare-metal sender's egress groups
        // (applied in the router) see the target, a VM's (in its hosting cluster) the
        // ExternalIP. The reply must return through the router: the packet is masqueraded to
        // the router's address on the target's subnet after the router's ingress filter.
        let daddr = if s.hosted { ea } else { ta };
        t.filter(s, false, Peer::Addr(daddr))?;
        t.subnet_hop(&s.subnet, "to the gateway of", &sa_s, &ea_s);
        t.router_hop(&s.vn, "hairpinned by", &sa_s, &ea_s);
        t.hop(
            HopKind::Dnat,
            format!("destination NAT {ea} → {ta} by {}", att.describe()),
            Some(att.clone()),
            &sa_s,
            &ta_s,
        );
        if s.same_switch_port(d) {
            // The router would have to send the packet back out of the bridge port it came
            // in by: the sender's own switch port, which does not hairpin (a VM's overlay
            // link does).
            let why = format!(
                "hairpin to {ea} cannot return to {}: the router would send the packet back \
                 through the switch port it arrived by (a bare-metal server or cluster agent \
                 reaching its own ExternalIP)",
                ix.subnet_ref(&d.subnet).describe()
            );
            return Err(t.blocked(why, Some(att), 0));
        }
        let gw = ix.gateway(&d.subnet, ta.is_ipv4());
        let seen = if d.hosted { gw.unwrap_or(sa) } else { sa };
        let gw_s = gw.map_or_else(|| "gateway".to_string(), |g| g.to_string());
        t.hop(
            HopKind::Snat,
            format!(
                "masqueraded to the gateway address of {} so the reply returns through the router",
                ix.subnet_ref(&d.subnet).describe()
            ),
            None,
            &gw_s,
            &ta_s,
        );
        deliver(t, d, &gw_s, ta, Peer::Addr(seen), false)
    } else {
        t.filter(s, false, Peer::Addr(ea))?;
        let nat = leave(t, s, sa, &ea_s);
        t.hop(
            HopKind::External,
            format!("routed to the router of {}", ix.vn_ref(&d.vn).describe()),
            None,
            &nat.address(),
            &ea_s,
        );
        t.router_hop(&d.vn, "enters by the uplink of", &nat.address(), &ea_s);
        t.hop(
            HopKind::Dnat,
            format!("destination NAT {ea} → {ta} by {}", att.describe()),
            Some(att.clone()),
            &nat.address(),
            &ta_s,
        );
        deliver(t, d, &nat.address(), ta, nat, false)
    }
}
