//! The questions of one run, each with the `ovn-trace` microflow that asks OVN the same thing
//! and the logical port a delivered packet leaves by.

use std::net::IpAddr;

use osac_model::reachability::{End, Protocol, Question};
use osac_ovn::render::{self, external, port::port_name};

use super::rng::Rng;
use super::topology::{Port, Tenant};

/// The provider network of the run's registration.
pub const PROVIDER_NETWORK: &str = "physnet";
/// Outside addresses a VM sends to (none in the ExternalIP pool: that would be a hairpin; none
/// on the transit network, whose hosts' MACs the routers would have to learn).
const OUTSIDE: [&str; 5] = [
    "198.51.100.7",
    "198.51.100.200",
    "192.0.2.9",
    "8.8.8.8",
    "1.1.1.1",
];
/// Clients on the provider network (the internet).
const CLIENTS: [&str; 3] = ["198.51.100.7", "198.51.100.99", "192.0.2.3"];
const PORTS: [u16; 12] = [
    22, 80, 443, 53, 5353, 8080, 8443, 1, 1024, 5000, 6000, 65535,
];

/// What a question is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    SameSubnet,
    AcrossSubnets,
    AcrossVns,
    ToOutside,
    InboundExternalIp,
    InboundNatGateway,
    InboundPrivate,
}

/// One question, asked of both oracles.
#[derive(Debug, Clone)]
pub struct Asked {
    pub class: Class,
    /// Index of the tenant whose network the explainer reads.
    pub tenant: usize,
    pub question: Question,
    /// The logical datapath the packet enters.
    pub datapath: String,
    pub microflow: String,
    /// The logical port a delivered packet is output to.
    pub delivered_to: String,
}

fn l4(protocol: Protocol, port: u16, v4: bool) -> String {
    match (protocol, v4) {
        (Protocol::Tcp, _) => format!("tcp && tcp.src == 40000 && tcp.dst == {port}"),
        (Protocol::Udp, _) => format!("udp && udp.src == 40000 && udp.dst == {port}"),
        (Protocol::Icmp, true) => "icmp4 && icmp4.type == 8 && icmp4.code == 0".into(),
        (Protocol::Icmp, false) => "icmp6 && icmp6.type == 128 && icmp6.code == 0".into(),
    }
}

fn ip(src: IpAddr, dst: IpAddr) -> String {
    let f = if dst.is_ipv4() { "ip4" } else { "ip6" };
    format!("{f}.src == {src} && {f}.dst == {dst} && ip.ttl == 64")
}

fn protocol(rng: &mut Rng) -> (Protocol, u16) {
    let p = *rng.pick(&[
        Protocol::Tcp,
        Protocol::Tcp,
        Protocol::Udp,
        Protocol::Udp,
        Protocol::Icmp,
    ]);
    let port = match p {
        Protocol::Icmp => 0,
        _ if rng.chance(70) => *rng.pick(&PORTS),
        // Any port but DHCP's (a port's control plane, not a security-group question).
        _ => loop {
            let port = u16::try_from(rng.range(1, 65535)).unwrap_or(1);
            if ![67, 68, 546, 547].contains(&port) {
                break port;
            }
        },
    };
    (p, port)
}

fn address(a: IpAddr, vn: &str) -> End {
    End::Address {
        address: a,
        virtual_network: Some(vn.to_string()),
    }
}

fn outside(a: &str) -> End {
    End::Address {
        address: a.parse().expect("an address of the generator"),
        virtual_network: None,
    }
}

/// A question from port `from` to port `to`: IPv6 when both have it and the dice say so (the
/// destination then named by address), else IPv4 (by ComputeInstance or by address).
fn port_to_port(rng: &mut Rng, t: usize, class: Class, from: &Port, to: &Port) -> Option<Asked> {
    let v6 = from.v6.is_some() && to.v6.is_some() && rng.chance(40);
    let (src, dst) = if v6 {
        (from.v6?, to.v6?)
    } else {
        (from.v4?, to.v4?)
    };
    let destination = if v6 || rng.chance(40) {
        address(dst, &to.vn)
    } else {
        End::ComputeInstance(to.vm.clone())
    };
    let (protocol, port) = protocol(rng);
    let eth_dst = if from.subnet == to.subnet {
        to.mac.clone()
    } else {
        render::gateway_mac(&from.subnet)
    };
    Some(Asked {
        class,
        tenant: t,
        question: Question {
            source: End::ComputeInstance(from.vm.clone()),
            destination,
            protocol,
            port,
        },
        datapath: render::switch_name(&from.subnet),
        microflow: format!(
            "inport == \"{}\" && eth.src == {} && eth.dst == {eth_dst} && {} && {}",
            port_name(&from.attachment),
            from.mac,
            ip(src, dst),
            l4(protocol, port, !v6)
        ),
        delivered_to: port_name(&to.attachment),
    })
}

/// A packet from the provider network (the localnet port) from `client` to `dst`, which the
/// provider routes to VN `vn`'s uplink.
fn inbound(rng: &mut Rng, t: usize, class: Class, vn: &str, dst: IpAddr, target: &Port) -> Asked {
    let client: IpAddr = rng.pick(&CLIENTS).parse().expect("a client address");
    let (protocol, port) = protocol(rng);
    Asked {
        class,
        tenant: t,
        question: Question {
            source: End::Address {
                address: client,
                virtual_network: None,
            },
            destination: match class {
                Class::InboundPrivate => address(dst, vn),
                _ => End::Address {
                    address: dst,
                    virtual_network: None,
                },
            },
            protocol,
            port,
        },
        datapath: external::provider_switch_name(PROVIDER_NETWORK),
        microflow: format!(
            "inport == \"osac-ln-{PROVIDER_NETWORK}\" && eth.src == 0a:ff:00:00:00:01 && \
             eth.dst == {} && {} && {}",
            render::gateway_mac(&external::uplink_key(vn)),
            ip(client, dst),
            l4(protocol, port, true)
        ),
        delivered_to: port_name(&target.attachment),
    }
}

/// One question of `class` about tenant `t`, if its network has what the class needs.
fn one(rng: &mut Rng, t: usize, tenant: &Tenant, class: Class) -> Option<Asked> {
    let ports = &tenant.ports;
    let from = rng.pick(ports);
    match class {
        Class::SameSubnet | Class::AcrossSubnets | Class::AcrossVns => {
            let peers: Vec<&Port> = ports
                .iter()
                .filter(|p| p.attachment != from.attachment)
                .filter(|p| match class {
                    Class::SameSubnet => p.subnet == from.subnet,
                    Class::AcrossSubnets => p.vn == from.vn && p.subnet != from.subnet,
                    _ => p.vn != from.vn,
                })
                .collect();
            if peers.is_empty() {
                return None;
            }
            let to = *rng.pick(&peers);
            port_to_port(rng, t, class, from, to)
        }
        Class::ToOutside => {
            let (protocol, port) = protocol(rng);
            let dst: IpAddr = rng.pick(&OUTSIDE).parse().ok()?;
            Some(Asked {
                class,
                tenant: t,
                question: Question {
                    source: End::ComputeInstance(from.vm.clone()),
                    destination: outside(&dst.to_string()),
                    protocol,
                    port,
                },
                datapath: render::switch_name(&from.subnet),
                microflow: format!(
                    "inport == \"{}\" && eth.src == {} && eth.dst == {} && {} && {}",
                    port_name(&from.attachment),
                    from.mac,
                    render::gateway_mac(&from.subnet),
                    ip(from.v4?, dst),
                    l4(protocol, port, true)
                ),
                delivered_to: format!("osac-ln-{PROVIDER_NETWORK}"),
            })
        }
        Class::InboundExternalIp => {
            if tenant.external_ips.is_empty() {
                return None;
            }
            let (eip, vn, target) = rng.pick(&tenant.external_ips).clone();
            Some(inbound(rng, t, class, &vn, eip, &ports[target]))
        }
        Class::InboundNatGateway => {
            if tenant.nat_gateways.is_empty() {
                return None;
            }
            let (nat, vn) = rng.pick(&tenant.nat_gateways).clone();
            // Delivered anywhere in the VN would be wrong; name any of its ports.
            let target = ports.iter().find(|p| p.vn == vn)?;
            Some(inbound(rng, t, class, &vn, nat, target))
        }
        Class::InboundPrivate => {
            let vn = from.vn.clone();
            Some(inbound(rng, t, class, &vn, from.v4?, from))
        }
    }
}

/// `n` questions over `tenants`.
pub fn generate(rng: &mut Rng, tenants: &[Tenant], n: usize) -> Vec<Asked> {
    const CLASSES: [(Class, usize); 7] = [
        (Class::SameSubnet, 20),
        (Class::AcrossSubnets, 15),
        (Class::AcrossVns, 10),
        (Class::ToOutside, 20),
        (Class::InboundExternalIp, 20),
        (Class::InboundNatGateway, 5),
        (Class::InboundPrivate, 10),
    ];
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let mut roll = rng.range(0, 99);
        let class = CLASSES
            .iter()
            .find(|(_, w)| {
                if roll < *w {
                    true
                } else {
                    roll -= w;
                    false
                }
            })
            .map_or(Class::SameSubnet, |(c, _)| *c);
        let t = rng.range(0, tenants.len() - 1);
        if let Some(asked) = one(rng, t, &tenants[t], class) {
            out.push(asked);
        }
    }
    out
}
