//! The path of a packet through the dataplane, hop by hop, as the `linux` fabric builds it:
//! a port's subnet bridge, the VirtualNetwork's router (routing between its subnets, DNAT of
//! attached ExternalIPs, SNAT to the NAT gateway or masquerade to the transit address), the
//! uplink and the provider's external network. Security groups are applied where the
//! dataplane applies them (see `security_groups`).

use std::net::IpAddr;

use super::network::{Index, Port, object_name};
use super::resolve::{Place, resolve, vn_of};
use super::security_groups::{Filter, Peer, Probe, filter};
use super::{ExplainError, Explanation, Hop, HopKind, Invalid, ObjectRef, Question, Verdict};
use crate::Kind;

/// Hops gathered so far and the allowing rules met on the way.
pub struct Trace<'a> {
    pub ix: &'a Index,
    pub probe: Probe,
    pub hops: Vec<Hop>,
    egress_allowed: Option<Filter>,
    ingress_allowed: Option<Filter>,
}

/// The outcome of a step: go on, or the final answer.
pub type Step = Result<(), Explanation>;

impl<'a> Trace<'a> {
    fn new(ix: &'a Index, probe: Probe) -> Self {
        Self {
            ix,
            probe,
            hops: Vec::new(),
            egress_allowed: None,
            ingress_allowed: None,
        }
    }

    /// Adds a hop.
    pub fn hop(
        &mut self,
        kind: HopKind,
        description: impl Into<String>,
        object: Option<ObjectRef>,
        source: &str,
        destination: &str,
    ) {
        self.hops.push(Hop {
            kind,
            description: description.into(),
            object,
            source_address: source.to_string(),
            destination_address: destination.to_string(),
        });
    }

    /// The answer BLOCKED by `why`.
    pub fn blocked(
        &mut self,
        why: impl Into<String>,
        object: Option<ObjectRef>,
        index: u32,
    ) -> Explanation {
        Explanation {
            verdict: Verdict::Blocked,
            hops: std::mem::take(&mut self.hops),
            deciding: why.into(),
            deciding_object: object,
            deciding_rule_index: index,
        }
    }

    /// The answer REACHABLE, decided by the destination's allowing ingress rule, else the
    /// source's egress rule, else no port's groups being on the path (callers that know better
    /// replace the text).
    pub fn reachable(&mut self) -> Explanation {
        let decided = self
            .ingress_allowed
            .take()
            .or_else(|| self.egress_allowed.take());
        let (deciding, object, index) = match decided {
            Some(Filter::Allowed { group, index, text }) => (text, Some(group), index),
            _ => ("no security group is on this path".to_string(), None, 0),
        };
        Explanation {
            verdict: Verdict::Reachable,
            hops: std::mem::take(&mut self.hops),
            deciding,
            deciding_object: object,
            deciding_rule_index: index,
        }
    }

    /// The workload of `port` must be running (a cluster READY) to send or answer.
    pub fn running(&mut self, port: &Port, sends: bool) -> Step {
        let w = &self.ix.workloads[port.workload];
        if let Some(state) = &w.not_running {
            let what = if sends { "sends" } else { "answers" };
            let mut why = format!(
                "{} is {state}, not RUNNING: it {what} nothing",
                w.object.describe()
            );
            if !w.message.is_empty() {
                why.push_str(&format!(" ({})", w.message));
            }
            return Err(self.blocked(why, Some(w.object.clone()), 0));
        }
        Ok(())
    }

    /// Applies `port`'s groups in one direction; a denial ends the trace.
    pub fn filter(&mut self, port: &Port, ingress: bool, peer: Peer) -> Step {
        match filter(self.ix, port, ingress, self.probe, peer) {
            Filter::Denied { groups, text } => {
                Err(self.blocked(text, groups.into_iter().next(), 0))
            }
            f @ Filter::Allowed { .. } => {
                if ingress {
                    self.ingress_allowed = Some(f);
                } else {
                    self.egress_allowed = Some(f);
                }
                Ok(())
            }
            Filter::Closed { text } => {
                let w = self.ix.workloads[port.workload].object.clone();
                Err(self.blocked(text, Some(w), 0))
            }
        }
    }

    /// The hop of a port (source or destination).
    pub fn port_hop(&mut self, port: &Port, leaves: bool, src: &str, dst: &str) {
        let w = &self.ix.workloads[port.workload].object;
        let verb = if leaves { "leaves" } else { "arrives at" };
        let groups = if port.sgs.is_empty() {
            " (no security groups: closed)".to_string()
        } else {
            String::new()
        };
        self.hop(
            HopKind::Port,
            format!("{verb} {} {}{groups}", w.describe(), port.interface),
            Some(w.clone()),
            src,
            dst,
        );
    }

    /// The hop of a subnet bridge.
    pub fn subnet_hop(&mut self, subnet: &str, how: &str, src: &str, dst: &str) {
        let s = self.ix.subnet_ref(subnet);
        self.hop(
            HopKind::Subnet,
            format!("{how} {}", s.describe()),
            Some(s),
            src,
            dst,
        );
    }

    /// The hop of a VirtualNetwork's router.
    pub fn router_hop(&mut self, vn: &str, how: &str, src: &str, dst: &str) {
        let v = self.ix.vn_ref(vn);
        self.hop(
            HopKind::Router,
            format!("{how} the router of {}", v.describe()),
            Some(v),
            src,
            dst,
        );
    }
}

/// Answers a question over the index.
pub fn explain(ix: &Index, q: &Question) -> Result<Explanation, ExplainError> {
    if q.protocol != super::Protocol::Icmp && q.port == 0 {
        return Err(Invalid::new("port", "a port (1-65535) is required for TCP and UDP").into());
    }
    let src = resolve(ix, &q.source, "source", None)?;
    let dst = resolve(
        ix,
        &q.destination,
        "destination",
        vn_of(ix, &src).as_deref(),
    )?;
    let probe = Probe {
        protocol: q.protocol,
        port: if q.protocol == super::Protocol::Icmp {
            0
        } else {
            q.port
        },
    };
    let mut t = Trace::new(ix, probe);
    let answer = match src {
        Place::Outside(from) => super::inbound::from_outside(&mut t, from, &dst),
        Place::Workload(..) | Place::Port(..) => from_workload(&mut t, &src, &dst),
        Place::External(..) => Err(Invalid::new(
            "source.address",
            "is an ExternalIP: traffic leaves from a workload (name it) or a NAT gateway, never from an attachment's address",
        )
        .into()),
        Place::Gateway(..) | Place::Vacant(..) => Err(Invalid::new(
            "source.address",
            "is not a workload's address: name a workload, a port's address, an address outside the cloud or `internet`",
        )
        .into()),
    }?;
    Ok(match answer {
        Err(e) => e,
        Ok(()) => t.reachable(),
    })
}

/// Picks the ports of a workload-to-workload question: a pair on one subnet when there is
/// one (the machines talk on that link), else the primary ports.
fn pick_ports(ix: &Index, src: &Place, dst: &Place) -> (Option<usize>, Option<usize>) {
    let primary = |w: usize| {
        ix.ports_of(w)
            .find(|(_, p)| p.primary && p.vip.is_none())
            .or_else(|| ix.ports_of(w).find(|(_, p)| p.vip.is_none()))
            .map(|(n, _)| n)
    };
    let dst_fixed = match dst {
        Place::Port(p, _) => Some(*p),
        Place::Workload(w, Some(e)) => ix
            .ports_of(*w)
            .find(|(_, p)| p.vip == Some(*e))
            .map(|(n, _)| n),
        _ => None,
    };
    match (src, dst) {
        (Place::Port(p, _), _) if dst_fixed.is_some() => (Some(*p), dst_fixed),
        (Place::Port(p, _), Place::Workload(dw, None)) => {
            let s = &ix.ports[*p];
            let on_link = ix
                .ports_of(*dw)
                .find(|(_, d)| d.subnet == s.subnet && d.vip.is_none())
                .map(|(n, _)| n);
            (Some(*p), on_link.or_else(|| primary(*dw)))
        }
        (Place::Port(p, _), _) => (Some(*p), None),
        (Place::Workload(sw, _), _) => {
            if let Some(d) = dst_fixed {
                let s = ix
                    .ports_of(*sw)
                    .find(|(_, p)| p.subnet == ix.ports[d].subnet && p.vip.is_none())
                    .map(|(n, _)| n);
                return (s.or_else(|| primary(*sw)), Some(d));
            }
            if let Place::Workload(dw, None) = dst {
                for (sn, s) in ix.ports_of(*sw).filter(|(_, p)| p.vip.is_none()) {
                    if let Some((dn, _)) = ix
                        .ports_of(*dw)
                        .find(|(_, d)| d.subnet == s.subnet && d.vip.is_none())
                    {
                        return (Some(sn), Some(dn));
                    }
                }
                return (primary(*sw), primary(*dw));
            }
            (primary(*sw), None)
        }
        _ => (None, dst_fixed),
    }
}

/// The family of the packet: the destination address's, else the first both ports have
/// (IPv4 first).
fn family(s: &Port, d: Option<&Port>, dst_addr: Option<IpAddr>) -> Option<bool> {
    if let Some(a) = dst_addr {
        return Some(a.is_ipv4());
    }
    match d {
        Some(d) => [true, false]
            .into_iter()
            .find(|v4| s.address(*v4).is_some() && d.address(*v4).is_some()),
        None => [true, false]
            .into_iter()
            .find(|v4| s.address(*v4).is_some()),
    }
}

fn fam(v4: bool) -> &'static str {
    if v4 { "IPv4" } else { "IPv6" }
}

/// A packet from a workload's port.
fn from_workload(t: &mut Trace, src: &Place, dst: &Place) -> Result<Step, ExplainError> {
    let ix = t.ix;
    let (sp, dp) = pick_ports(ix, src, dst);
    let Some(sp) = sp else {
        let w = match src {
            Place::Workload(w, _) => ix.workloads[*w].object.clone(),
            _ => return Err(Invalid::new("source", "has no port").into()),
        };
        if let Err(e) = t.running_of(&w) {
            return Ok(Err(e));
        }
        let why = format!("{} has no network port with an address yet", w.describe());
        return Ok(Err(t.blocked(why, Some(w), 0)));
    };
    let s = &ix.ports[sp];
    let dst_addr = match dst {
        Place::Port(_, a) | Place::External(_, a) | Place::Gateway(_, a) | Place::Vacant(_, a) => {
            Some(*a)
        }
        Place::Outside(a) => *a,
        Place::Workload(_, Some(_)) => dp.and_then(|d| ix.ports[d].v4.or(ix.ports[d].v6)),
        Place::Workload(_, None) => None,
    };
    let d = dp.map(|n| &ix.ports[n]);
    let Some(v4) = family(s, d, dst_addr) else {
        let w = ix.workloads[s.workload].object.clone();
        let why = match d {
            Some(d) => format!(
                "{} and {} share no address family",
                w.describe(),
                ix.workloads[d.workload].object.describe()
            ),
            None => format!("{} has no address", w.describe()),
        };
        return Ok(Err(t.blocked(why, Some(w), 0)));
    };
    let Some(sa) = s.address(v4) else {
        let w = ix.workloads[s.workload].object.clone();
        let why = format!(
            "{} has no {} address on {}",
            w.describe(),
            fam(v4),
            s.interface
        );
        return Ok(Err(t.blocked(why, Some(w), 0)));
    };
    let sa_s = sa.to_string();
    if let Err(e) = t.running(s, true) {
        return Ok(Err(e));
    }
    Ok(match dst {
        Place::Workload(..) | Place::Port(..) => {
            let Some(d) = d else {
                let w = match dst {
                    Place::Workload(w, _) => ix.workloads[*w].object.clone(),
                    _ => return Err(Invalid::new("destination", "has no port").into()),
                };
                let why = format!("{} has no network port with an address yet", w.describe());
                return Ok(Err(t.blocked(why, Some(w), 0)));
            };
            let Some(da) = d.address(v4) else {
                let w = ix.workloads[d.workload].object.clone();
                let why = format!("{} has no {} address", w.describe(), fam(v4));
                return Ok(Err(t.blocked(why, Some(w), 0)));
            };
            super::inside::port_to_port(t, s, sa, d, da)
        }
        Place::Gateway(subnet, ga) => super::inside::to_gateway(t, s, sa, subnet, *ga),
        Place::Vacant(subnet, a) => {
            t.port_hop(s, true, &sa_s, &a.to_string());
            let sr = ix.subnet_ref(subnet);
            let why = format!("no port of {} has address {a}", sr.describe());
            Err(t.blocked(why, Some(sr), 0))
        }
        Place::External(n, ea) => super::outbound::to_external(t, s, sa, *n, *ea),
        Place::Outside(a) => {
            let peer = a.map_or(Peer::Anywhere(v4), Peer::Addr);
            super::outbound::to_outside(t, s, sa, peer)
        }
    })
}

impl Trace<'_> {
    fn running_of(&mut self, w: &ObjectRef) -> Step {
        let wl = self.ix.workloads.iter().find(|x| x.object == *w);
        if let Some(state) = wl.and_then(|x| x.not_running.clone()) {
            let why = format!("{} is {state}, not RUNNING: it sends nothing", w.describe());
            return Err(self.blocked(why, Some(w.clone()), 0));
        }
        Ok(())
    }
}

/// The NAT a packet leaving VirtualNetwork `vn` by the uplink gets: the READY NAT gateway's
/// address of its family, else the router's transit address (masquerade).
pub fn snat_of(ix: &Index, vn: &str, v4: bool) -> (Peer, String, Option<ObjectRef>) {
    let gw = ix.net.nat_gateways.iter().find(|g| {
        g.spec
            .as_ref()
            .is_some_and(|s| s.virtual_network == vn || ix.vn_ref(vn).name == s.virtual_network)
    });
    let Some(g) = gw else {
        return (
            Peer::Transit(v4),
            "masqueraded to the router's transit address (the VirtualNetwork has no NATGateway)"
                .into(),
            None,
        );
    };
    let obj = ObjectRef::new(Kind::NatGateway, &g.id, object_name(g.metadata.as_ref()));
    let st = g.status.clone().unwrap_or_default();
    let ready = st.state == crate::pb::NatGatewayState::Ready as i32;
    match st.address.parse::<IpAddr>() {
        Ok(a) if ready && a.is_ipv4() == v4 => (
            Peer::Addr(a),
            format!("source NAT to {a} by {}", obj.describe()),
            Some(obj),
        ),
        Ok(_) if ready => (
            Peer::Transit(v4),
            format!(
                "masqueraded to the router's transit address ({} serves the other address family)",
                obj.describe()
            ),
            Some(obj),
        ),
        _ => (
            Peer::Transit(v4),
            format!(
                "masqueraded to the router's transit address ({} is not READY)",
                obj.describe()
            ),
            Some(obj),
        ),
    }
}
