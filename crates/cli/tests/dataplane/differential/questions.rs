//! The questions: random (source, destination, protocol, port) among the built workloads,
//! their ExternalIP addresses and the internet client; each as the explainer's request and as
//! the probe that answers it for real.

use std::net::{IpAddr, SocketAddr};

use serde_json::{Value, json};

use super::build::{Built, BuiltWorkload};
use super::listeners::{self, Answer};
use super::rng::Rng;
use super::topology::{PORTS, Proto, WorkloadKind};
use crate::harness::{EXT_GATEWAY, EXT_NS};

/// The internet client's label.
pub const INTERNET: &str = "internet";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Workload `(tenant, workload)` at its own address.
    Workload(usize, usize),
    /// The ExternalIP address attached to workload `(tenant, workload)`.
    ExternalIp(usize, usize),
    /// The internet client, asked as `internet` (true) or as its address (false).
    Internet(bool),
}

#[derive(Debug, Clone)]
pub struct Question {
    pub id: usize,
    pub source: End,
    pub destination: End,
    pub proto: Proto,
    /// 0 for ICMP.
    pub port: u16,
    /// Whose token asks: the source's tenant, or the destination's when the source is the
    /// internet.
    pub tenant: usize,
}

/// `n` questions for the built topology.
pub fn generate(rng: &mut Rng, built: &Built, n: usize) -> Vec<Question> {
    let all: Vec<(usize, usize)> = built
        .tenants
        .iter()
        .enumerate()
        .flat_map(|(t, bt)| (0..bt.workloads.len()).map(move |w| (t, w)))
        .collect();
    let attached = |t: usize| -> Vec<usize> {
        (0..built.tenants[t].workloads.len())
            .filter(|w| built.tenants[t].workloads[*w].external_ip.is_some())
            .collect()
    };
    let mut out = Vec::with_capacity(n);
    for id in 0..n {
        let internet = End::Internet(rng.chance(35));
        let (source, destination, tenant) = if rng.chance(15) {
            let t = rng.range(0, built.tenants.len() - 1);
            let eips = attached(t);
            let dst = if !eips.is_empty() && rng.chance(75) {
                End::ExternalIp(t, *rng.pick(&eips))
            } else {
                End::Workload(t, rng.range(0, built.tenants[t].workloads.len() - 1))
            };
            (internet, dst, t)
        } else {
            let (t, w) = *rng.pick(&all);
            let here = &built.tenants[t].workloads[w].plan.vn;
            let others: Vec<usize> = (0..built.tenants[t].workloads.len())
                .filter(|o| *o != w)
                .collect();
            let same_vn: Vec<usize> = others
                .iter()
                .copied()
                .filter(|o| &built.tenants[t].workloads[*o].plan.vn == here)
                .collect();
            let other_vn: Vec<usize> = others
                .iter()
                .copied()
                .filter(|o| !same_vn.contains(o))
                .collect();
            let eips = attached(t);
            let dst = match rng.range(0, 99) {
                0..=34 if !same_vn.is_empty() => End::Workload(t, *rng.pick(&same_vn)),
                35..=49 if !other_vn.is_empty() => End::Workload(t, *rng.pick(&other_vn)),
                50..=74 if !eips.is_empty() => End::ExternalIp(t, *rng.pick(&eips)),
                75..=99 => internet,
                _ if !others.is_empty() => End::Workload(t, *rng.pick(&others)),
                _ => internet,
            };
            (End::Workload(t, w), dst, t)
        };
        let proto = match rng.range(0, 99) {
            0..=44 => Proto::Tcp,
            45..=79 => Proto::Udp,
            _ => Proto::Icmp,
        };
        let port = if proto == Proto::Icmp {
            0
        } else {
            *rng.pick(&PORTS)
        };
        out.push(Question {
            id,
            source,
            destination,
            proto,
            port,
            tenant,
        });
    }
    out
}

fn workload(built: &Built, t: usize, w: usize) -> &BuiltWorkload {
    &built.tenants[t].workloads[w]
}

fn gateway() -> IpAddr {
    EXT_GATEWAY
        .parse()
        .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))
}

/// The label a workload's responder answers with.
pub fn label(built: &Built, t: usize, w: usize) -> String {
    format!(
        "{}/{}",
        built.tenants[t].plan.name,
        workload(built, t, w).plan.name
    )
}

/// One end as the explainer's `ReachabilityEndpoint`.
fn endpoint(built: &Built, end: End) -> Value {
    match end {
        End::Workload(t, w) => {
            let wl = workload(built, t, w);
            match wl.plan.kind {
                WorkloadKind::Vm => json!({"compute_instance": wl.plan.name}),
                WorkloadKind::BareMetal => json!({"baremetal_instance": wl.plan.name}),
            }
        }
        End::ExternalIp(t, w) => {
            json!({"address": workload(built, t, w).external_ip.map(|i| i.to_string())})
        }
        End::Internet(true) => json!({"internet": true}),
        End::Internet(false) => json!({"address": EXT_GATEWAY}),
    }
}

/// The explainer's request for `q`.
pub fn request(built: &Built, q: &Question) -> Value {
    let protocol = match q.proto {
        Proto::Tcp => "PROTOCOL_TCP",
        Proto::Udp => "PROTOCOL_UDP",
        _ => "PROTOCOL_ICMP",
    };
    json!({
        "source": endpoint(built, q.source),
        "destination": endpoint(built, q.destination),
        "protocol": protocol,
        "port": q.port,
    })
}

/// How the question is probed for real.
#[derive(Debug, Clone)]
pub struct Probe {
    pub ns: String,
    pub src: Option<IpAddr>,
    pub dst: IpAddr,
    pub proto: Proto,
    pub port: u16,
    /// The label of the namespace the packet is meant for.
    pub intended: String,
    /// An ICMP answer cannot say who answered: another workload of the source's network
    /// (or the source itself) holds the destination address too.
    pub ambiguous_echo: bool,
}

pub fn probe(built: &Built, q: &Question) -> Probe {
    let (ns, src) = match q.source {
        End::Workload(t, w) => (workload(built, t, w).machine.ns.clone(), None),
        _ => (EXT_NS.to_string(), Some(gateway())),
    };
    let from_outside = matches!(q.source, End::Internet(_));
    let (dst, intended) = match q.destination {
        // From outside, a workload is reached at its ExternalIP when it has one (that is what
        // the explainer answers for a workload end); its private address is never routed in.
        End::Workload(t, w) if from_outside => {
            let target = workload(built, t, w);
            (
                target.external_ip.unwrap_or(target.machine.ip),
                label(built, t, w),
            )
        }
        End::Workload(t, w) => (workload(built, t, w).machine.ip, label(built, t, w)),
        End::ExternalIp(t, w) => (
            workload(built, t, w).external_ip.unwrap_or_else(gateway),
            label(built, t, w),
        ),
        End::Internet(_) => (gateway(), INTERNET.to_string()),
    };
    let ambiguous_echo = match (q.source, q.destination) {
        (End::Workload(st, sw), End::Workload(dt, dw)) => {
            let s = workload(built, st, sw);
            built.tenants[st]
                .workloads
                .iter()
                .enumerate()
                .any(|(o, wl)| {
                    (st, o) != (dt, dw) && wl.plan.vn == s.plan.vn && wl.machine.ip == dst
                })
        }
        _ => false,
    };
    Probe {
        ns,
        src,
        dst,
        proto: q.proto,
        port: q.port,
        intended,
        ambiguous_echo,
    }
}

/// Sends the probe (blocking).
pub fn run(p: &Probe) -> Answer {
    let to = SocketAddr::new(p.dst, p.port);
    let got = match p.proto {
        Proto::Tcp => listeners::tcp(&p.ns, p.src, to),
        Proto::Udp => listeners::udp(&p.ns, p.src, to),
        _ => listeners::icmp(&p.ns, p.src, p.dst),
    };
    got.unwrap_or_else(|e| Answer::Failed(e.to_string()))
}

/// Whether the packet reached the intended namespace.
pub fn reached(p: &Probe, a: &Answer) -> bool {
    match a {
        Answer::From(l) => *l == p.intended,
        Answer::Echo => true,
        Answer::Refused | Answer::Silent | Answer::Failed(_) => false,
    }
}

/// One line naming the question's ends, e.g. `diff-red/w1 -> address/198.18.7.9 (diff-blue/w0) tcp/80`.
pub fn describe(built: &Built, q: &Question) -> String {
    let end = |e: End| match e {
        End::Workload(t, w) => format!(
            "{} ({})",
            label(built, t, w),
            workload(built, t, w).machine.ip
        ),
        End::ExternalIp(t, w) => format!(
            "address/{} (ExternalIP of {})",
            workload(built, t, w)
                .external_ip
                .map(|i| i.to_string())
                .unwrap_or_default(),
            label(built, t, w)
        ),
        End::Internet(true) => "internet".into(),
        End::Internet(false) => format!("address/{EXT_GATEWAY} (internet)"),
    };
    let what = match q.proto {
        Proto::Icmp => "icmp".to_string(),
        p => format!("{}/{}", p.cli(), q.port),
    };
    format!(
        "#{} {} -> {} {what}",
        q.id,
        end(q.source),
        end(q.destination)
    )
}
