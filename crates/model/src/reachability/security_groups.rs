//! Security-group evaluation, as the dataplane's `sgout`/`sgin` chains do it: a port without
//! groups is closed (nothing but DHCP and neighbour discovery/ARP with its subnet passes,
//! which the explainer does not ask about); with groups a packet passes when any rule of any group (union)
//! matches its protocol, destination port and peer address (family included: a rule with an
//! IPv4 peer never matches IPv6); replies of allowed flows always pass (conntrack).

use std::net::IpAddr;

use ipnet::IpNet;

use super::network::{Index, Port, object_name};
use super::{ObjectRef, Protocol};
use crate::{Kind, pb, validate};

/// The other end of a packet as a security rule sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// A known address.
    Addr(IpAddr),
    /// Any address outside the cloud (of a family: true = IPv4): a rule matches only when
    /// its peer is the whole family (0.0.0.0/0, ::/0).
    Anywhere(bool),
    /// A router's transit address (of a family), whose exact value the store does not hold.
    Transit(bool),
}

impl Peer {
    fn is_v4(self) -> bool {
        match self {
            Peer::Addr(a) => a.is_ipv4(),
            Peer::Anywhere(v4) | Peer::Transit(v4) => v4,
        }
    }

    /// The peer in words.
    pub fn describe(self) -> String {
        match self {
            Peer::Addr(a) => a.to_string(),
            Peer::Anywhere(_) => "any address outside the cloud".into(),
            Peer::Transit(_) => "the source VirtualNetwork's router transit address".into(),
        }
    }

    /// The address column of a hop.
    pub fn address(self) -> String {
        match self {
            Peer::Addr(a) => a.to_string(),
            Peer::Anywhere(_) => "internet".into(),
            Peer::Transit(_) => "transit".into(),
        }
    }
}

/// A probe: protocol and destination port.
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    /// Protocol.
    pub protocol: Protocol,
    /// Destination port (TCP/UDP).
    pub port: u16,
}

impl Probe {
    /// "tcp/443", "icmp".
    pub fn describe(self) -> String {
        match self.protocol {
            Protocol::Icmp => "icmp".into(),
            p => format!("{}/{}", p.label(), self.port),
        }
    }
}

/// The outcome of one direction's filter at one port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// The port has no groups: it is closed; `text` says so.
    Closed {
        /// "ComputeInstance 'vm' eth0 has no security groups: …".
        text: String,
    },
    /// Rule `index` (1-based) of group `group` allows it; `text` is the rule in words.
    Allowed {
        /// The group.
        group: ObjectRef,
        /// 1-based rule number in that direction's list.
        index: u32,
        /// "SecurityGroup 'web' ingress rule 2: tcp 443 from 0.0.0.0/0".
        text: String,
    },
    /// No rule of `groups` allows it; `text` says so.
    Denied {
        /// The port's groups.
        groups: Vec<ObjectRef>,
        /// "no ingress rule of SecurityGroups 'db' allows tcp/8080 from 10.0.1.5".
        text: String,
    },
}

/// The range of a rule's ports, as the controller hands it to the fabric (0/0 = all; a
/// missing bound = the other one).
fn port_range(rule: &pb::SecurityRule) -> Option<(u16, u16)> {
    let p = |v: i32| u16::try_from(v).unwrap_or(0);
    match (p(rule.port_from), p(rule.port_to)) {
        (0, 0) => None,
        (f, 0) => Some((f, f)),
        (0, t) => Some((t, t)),
        (f, t) => Some((f, t)),
    }
}

fn peer_matches(cidr: &IpNet, peer: Peer, transit: &[IpNet]) -> bool {
    if cidr.addr().is_ipv4() != peer.is_v4() {
        return false;
    }
    match peer {
        Peer::Addr(a) => cidr.contains(&a),
        Peer::Anywhere(_) => cidr.prefix_len() == 0,
        Peer::Transit(v4) => {
            let known: Vec<&IpNet> = transit
                .iter()
                .filter(|t| t.addr().is_ipv4() == v4)
                .collect();
            if known.is_empty() {
                cidr.prefix_len() == 0
            } else {
                known.iter().all(|t| cidr.contains(*t))
            }
        }
    }
}

/// Whether `rule` matches a packet of `probe` whose peer (source for ingress, destination
/// for egress) is `peer`.
pub fn rule_matches(rule: &pb::SecurityRule, probe: Probe, peer: Peer, transit: &[IpNet]) -> bool {
    let Ok(cidr) = validate::rule_peer(rule) else {
        return false;
    };
    if !peer_matches(&cidr, peer, transit) {
        return false;
    }
    match pb::Protocol::try_from(rule.protocol) {
        Ok(pb::Protocol::All) => true,
        Ok(pb::Protocol::Icmp) => probe.protocol == Protocol::Icmp,
        Ok(pb::Protocol::Tcp) if probe.protocol == Protocol::Tcp => port_in(rule, probe.port),
        Ok(pb::Protocol::Udp) if probe.protocol == Protocol::Udp => port_in(rule, probe.port),
        _ => false,
    }
}

fn port_in(rule: &pb::SecurityRule, port: u16) -> bool {
    port_range(rule).is_none_or(|(f, t)| (f..=t).contains(&port))
}

/// A rule in words: "tcp 443 from 0.0.0.0/0", "udp 8000-8100 to 10.0.0.0/8", "all from ::/0".
pub fn describe_rule(rule: &pb::SecurityRule, ingress: bool) -> String {
    let proto = match pb::Protocol::try_from(rule.protocol) {
        Ok(pb::Protocol::Tcp) => "tcp",
        Ok(pb::Protocol::Udp) => "udp",
        Ok(pb::Protocol::Icmp) => "icmp",
        Ok(pb::Protocol::All) => "all",
        _ => "unknown protocol",
    };
    let ports = match (pb::Protocol::try_from(rule.protocol), port_range(rule)) {
        (Ok(pb::Protocol::Tcp | pb::Protocol::Udp), Some((f, t))) if f == t => format!(" {f}"),
        (Ok(pb::Protocol::Tcp | pb::Protocol::Udp), Some((f, t))) => format!(" {f}-{t}"),
        (Ok(pb::Protocol::Tcp | pb::Protocol::Udp), None) => " all ports".into(),
        _ => String::new(),
    };
    let peer = if rule.ipv4_cidr.is_empty() {
        &rule.ipv6_cidr
    } else {
        &rule.ipv4_cidr
    };
    let dir = if ingress { "from" } else { "to" };
    format!("{proto}{ports} {dir} {peer}")
}

/// Applies `port`'s groups in one direction to a packet whose other end is `peer`.
pub fn filter(ix: &Index, port: &Port, ingress: bool, probe: Probe, peer: Peer) -> Filter {
    let dir = if ingress { "ingress" } else { "egress" };
    if port.sgs.is_empty() {
        let w = &ix.workloads[port.workload].object;
        let text = format!(
            "{} {} has no security groups: a port without groups is closed (only DHCP and \
             neighbour discovery with its subnet pass), so no {dir} {} passes",
            w.describe(),
            port.interface,
            probe.describe()
        );
        return Filter::Closed { text };
    }
    let mut groups = Vec::new();
    for id in &port.sgs {
        let Some(g) = ix.security_group(id) else {
            groups.push(ObjectRef::new(Kind::SecurityGroup, id, ""));
            continue;
        };
        let group = ObjectRef::new(Kind::SecurityGroup, &g.id, object_name(g.metadata.as_ref()));
        let spec = g.spec.clone().unwrap_or_default();
        let rules = if ingress { &spec.ingress } else { &spec.egress };
        for (n, rule) in rules.iter().enumerate() {
            if rule_matches(rule, probe, peer, &ix.net.transit_prefixes) {
                let index = u32::try_from(n + 1).unwrap_or(u32::MAX);
                let text = format!(
                    "{} {dir} rule {index}: {}",
                    group.describe(),
                    describe_rule(rule, ingress)
                );
                return Filter::Allowed { group, index, text };
            }
        }
        groups.push(group);
    }
    let names: Vec<String> = groups.iter().map(|g| format!("'{}'", g.label())).collect();
    let prep = if ingress { "from" } else { "to" };
    let text = format!(
        "no {dir} rule of SecurityGroups {} allows {} {prep} {}",
        names.join(", "),
        probe.describe(),
        peer.describe()
    );
    Filter::Denied { groups, text }
}
