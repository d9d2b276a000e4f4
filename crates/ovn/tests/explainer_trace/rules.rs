//! Security-group rules: random ones as the API stores them, and their conversion to the
//! fabric contract's shape.

use std::net::IpAddr;

use osac_backends::{Protocol, SecurityRule};
use osac_model::pb;

use super::rng::Rng;
use super::topology::{POOL, Port, Vn};

/// TCP/UDP port ranges of rules (a single port as `(p, 0)`, how the API stores one).
const RULE_PORTS: [(i32, i32); 10] = [
    (22, 0),
    (80, 0),
    (443, 0),
    (5353, 0),
    (8080, 8080),
    (1, 1024),
    (23, 79),
    (5000, 6000),
    (8000, 9000),
    (1024, 65535),
];

/// The stored rule in the fabric contract's shape, as the controller hands it to the fabric
/// (a single bound is that port).
pub fn fabric_rule(r: &pb::SecurityRule) -> SecurityRule {
    let protocol = match pb::Protocol::try_from(r.protocol) {
        Ok(pb::Protocol::Tcp) => Protocol::Tcp,
        Ok(pb::Protocol::Udp) => Protocol::Udp,
        Ok(pb::Protocol::Icmp) => Protocol::Icmp,
        _ => Protocol::All,
    };
    let port = |p: i32| u16::try_from(p).expect("a port of the generator");
    let (port_from, port_to) = match (port(r.port_from), port(r.port_to)) {
        (0, 0) => (None, None),
        (f, 0) | (0, f) => (Some(f), Some(f)),
        (f, t) => (Some(f), Some(t)),
    };
    SecurityRule {
        protocol,
        port_from,
        port_to,
        cidr: osac_model::validate::rule_peer(r).expect("a peer of the generator"),
    }
}

/// A rule of `protocol`, ports `(from, to)` and peer `peer` (either family).
pub fn pb_rule(protocol: pb::Protocol, (from, to): (i32, i32), peer: &str) -> pb::SecurityRule {
    let v6 = peer.contains(':');
    pb::SecurityRule {
        protocol: protocol as i32,
        port_from: from,
        port_to: to,
        ipv4_cidr: if v6 { String::new() } else { peer.into() },
        ipv6_cidr: if v6 { peer.into() } else { String::new() },
    }
}

/// A random rule of a group of `vn`: its peer may be any of `ports` or a NAT gateway of `nat`.
pub fn rule(rng: &mut Rng, vn: &Vn, ports: &[Port], nat: &[(IpAddr, String)]) -> pb::SecurityRule {
    let protocol = *rng.pick(&[
        pb::Protocol::Tcp,
        pb::Protocol::Tcp,
        pb::Protocol::Udp,
        pb::Protocol::Udp,
        pb::Protocol::Icmp,
        pb::Protocol::All,
    ]);
    let range = match protocol {
        pb::Protocol::Tcp | pb::Protocol::Udp if rng.chance(85) => *rng.pick(&RULE_PORTS),
        _ => (0, 0),
    };
    let subnet = rng.pick(&vn.subnets).clone();
    let port = rng.pick(ports).clone();
    let peer = if vn.v6.is_some() && rng.chance(30) {
        match rng.range(0, 5) {
            0 | 1 => "::/0".to_string(),
            2 => vn
                .v6
                .map(|n| n.to_string())
                .unwrap_or_else(|| "::/0".into()),
            3 => subnet
                .2
                .map_or_else(|| "fd00::/8".into(), |n| n.to_string()),
            4 => port
                .v6
                .map_or_else(|| "fd00::/8".into(), |a| format!("{a}/128")),
            _ => "fd00::/8".to_string(),
        }
    } else {
        match rng.range(0, 13) {
            0..=2 => "0.0.0.0/0".to_string(),
            3 => "10.0.0.0/8".to_string(),
            4 => vn.v4.to_string(),
            5 => subnet.1.to_string(),
            6 | 7 => port
                .v4
                .map_or_else(|| "10.0.0.0/8".into(), |a| format!("{a}/32")),
            8 => "198.51.100.0/24".to_string(),
            9 => "198.51.100.7/32".to_string(),
            10 => POOL.to_string(),
            11 => rng
                .pick(&["0.0.0.0/1", "128.0.0.0/1", "192.0.2.0/28", "10.0.0.0/20"])
                .to_string(),
            _ => match nat.first() {
                Some((a, _)) => format!("{a}/32"),
                None => "100.64.0.0/22".to_string(),
            },
        }
    };
    pb_rule(protocol, range, &peer)
}
