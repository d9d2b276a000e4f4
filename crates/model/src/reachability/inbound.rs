//! Paths entering a VirtualNetwork from outside: only through an ExternalIPAttachment, whose
//! DNAT the router's uplink guard lets in (everything else from the uplink but replies is
//! dropped; private addresses are not routed from outside at all).

use std::net::IpAddr;

use super::network::{Index, Port, object_name};
use super::path::{Step, Trace};
use super::resolve::{Place, external_ip, external_ip_label};
use super::security_groups::Peer;
use super::{ClusterEndpoint, ExplainError, HopKind, Invalid, Kind, ObjectRef, pb};

fn att_ref(a: &pb::ExternalIpAttachment) -> ObjectRef {
    ObjectRef::new(
        Kind::ExternalIpAttachment,
        &a.id,
        object_name(a.metadata.as_ref()),
    )
}

/// The workload an attachment targets, as an index of `Index::workloads`, and its endpoint.
fn target_workload(
    ix: &Index,
    spec: &pb::ExternalIpAttachmentSpec,
) -> Option<(usize, Option<ClusterEndpoint>)> {
    let (kind, key, endpoint) = if !spec.compute_instance.is_empty() {
        (Kind::ComputeInstance, &spec.compute_instance, None)
    } else if !spec.baremetal_instance.is_empty() {
        (Kind::BareMetalInstance, &spec.baremetal_instance, None)
    } else if !spec.cluster.is_empty() {
        let e = if spec.target_endpoint == pb::ExternalIpAttachmentEndpoint::Ingress as i32 {
            ClusterEndpoint::Ingress
        } else {
            ClusterEndpoint::Api
        };
        (Kind::Cluster, &spec.cluster, Some(e))
    } else {
        return None;
    };
    let w = ix
        .workloads
        .iter()
        .position(|w| w.object.kind == kind && w.object.id == *key)
        .or_else(|| {
            ix.workloads
                .iter()
                .position(|w| w.object.kind == kind && w.object.name == *key)
        })?;
    Some((w, endpoint))
}

/// The port an attachment forwards to: the one holding its `status.target_ip`, else the
/// cluster VIP or the workload's primary port; `Err` says why it forwards nothing.
fn target_port(ix: &Index, a: &pb::ExternalIpAttachment) -> Result<usize, String> {
    let me = att_ref(a).describe();
    let st = a.status.clone().unwrap_or_default();
    if st.state != pb::ExternalIpAttachmentState::Ready as i32 {
        let state = pb::ExternalIpAttachmentState::try_from(st.state)
            .map_or("UNSPECIFIED", |s| s.as_str_name())
            .trim_start_matches("EXTERNAL_IP_ATTACHMENT_STATE_")
            .to_string();
        let mut why = format!("{me} is {state}, not READY: its DNAT is not programmed");
        if !st.message.is_empty() {
            why = format!(
                "{me} is {state}: {} (its DNAT is not programmed)",
                st.message
            );
        }
        return Err(why);
    }
    let spec = a.spec.clone().unwrap_or_default();
    let Some((w, endpoint)) = target_workload(ix, &spec) else {
        return Err(format!("{me} targets no workload of the tenant"));
    };
    let target: Option<IpAddr> = st.target_ip.parse().ok();
    ix.ports_of(w)
        .find(|(_, p)| target.is_some_and(|t| p.has(t)))
        .or_else(|| {
            ix.ports_of(w)
                .find(|(_, p)| endpoint.is_some() && p.vip == endpoint)
        })
        .or_else(|| ix.ports_of(w).find(|(_, p)| p.primary))
        .map(|(n, _)| n)
        .ok_or_else(|| format!("{me}: its target has no port"))
}

/// The attachment of ExternalIP `n` and the port it forwards to.
pub fn attachment_of(ix: &Index, n: usize) -> Option<(ObjectRef, Result<usize, String>)> {
    let a = ix.net.external_ip_attachments.iter().find(|a| {
        a.spec
            .as_ref()
            .is_some_and(|s| external_ip(ix, &s.external_ip) == Some(n))
    })?;
    Some((att_ref(a), target_port(ix, a)))
}

/// The NAT gateway using ExternalIP `n`.
pub fn nat_gateway_of(ix: &Index, n: usize) -> Option<ObjectRef> {
    ix.net
        .nat_gateways
        .iter()
        .find(|g| {
            g.spec
                .as_ref()
                .is_some_and(|s| external_ip(ix, &s.external_ip) == Some(n))
        })
        .map(|g| ObjectRef::new(Kind::NatGateway, &g.id, object_name(g.metadata.as_ref())))
}

/// The last hops into port `d` at `ta` (after the DNAT): its subnet, the workload's state,
/// its ingress groups (which see `peer`), the port. `src` is the source address shown.
pub fn deliver(t: &mut Trace, d: &Port, src: &str, ta: IpAddr, peer: Peer, _entry: bool) -> Step {
    let ta_s = ta.to_string();
    t.subnet_hop(&d.subnet, "out through the gateway of", src, &ta_s);
    t.running(d, false)?;
    t.filter(d, true, peer)?;
    t.port_hop(d, false, src, &ta_s);
    Err(t.reachable())
}

/// The hops from outside into an attachment's target.
fn enter(t: &mut Trace, att: ObjectRef, tp: usize, ea: IpAddr, peer: Peer) -> Step {
    let ix = t.ix;
    let d = &ix.ports[tp];
    let (src, ea_s) = (peer.address(), ea.to_string());
    t.hop(
        HopKind::External,
        format!(
            "the provider's external network routes {ea} to the router of {}",
            ix.vn_ref(&d.vn).describe()
        ),
        None,
        &src,
        &ea_s,
    );
    t.hop(
        HopKind::Uplink,
        "enters by the router's uplink (a DNAT'ed flow: the guard lets it in)",
        None,
        &src,
        &ea_s,
    );
    let Some(ta) = d.address(ea.is_ipv4()) else {
        let why = format!(
            "{} forwards {ea} to no address of its family",
            att.describe()
        );
        return Err(t.blocked(why, Some(att), 0));
    };
    t.router_hop(&d.vn, "forwarded by", &src, &ea_s);
    t.hop(
        HopKind::Dnat,
        format!("destination NAT {ea} → {ta} by {}", att.describe()),
        Some(att),
        &src,
        &ta.to_string(),
    );
    deliver(t, d, &src, ta, peer, true)
}

/// A packet from outside (`from`, or any address) to `dst`.
pub fn from_outside(
    t: &mut Trace,
    from: Option<IpAddr>,
    dst: &Place,
) -> Result<Step, ExplainError> {
    let ix = t.ix;
    let peer_of = |v4: bool| from.map_or(Peer::Anywhere(v4), Peer::Addr);
    let start = |t: &mut Trace, peer: Peer, dst: &str| {
        t.hop(
            HopKind::Internet,
            format!("starts at {}", peer.describe()),
            None,
            &peer.address(),
            dst,
        );
    };
    Ok(match dst {
        Place::Outside(_) => {
            return Err(Invalid::new(
                "destination",
                "both ends are outside the cloud: name a workload, a port's address or an ExternalIP",
            )
            .into());
        }
        Place::External(n, ea) => {
            let peer = peer_of(ea.is_ipv4());
            if from.is_some_and(|f| f.is_ipv4() != ea.is_ipv4()) {
                return Err(Invalid::new(
                    "destination.address",
                    "is of another address family than the source",
                )
                .into());
            }
            start(t, peer, &ea.to_string());
            match attachment_of(ix, *n) {
                Some((att, Ok(tp))) => enter(t, att, tp, *ea, peer),
                Some((att, Err(why))) => Err(t.blocked(why, Some(att), 0)),
                None => match nat_gateway_of(ix, *n) {
                    Some(g) => {
                        let why = format!(
                            "{} uses {} ({ea}) for outbound traffic only: the router's uplink guard drops new inbound flows to it",
                            g.describe(),
                            external_ip_label(ix, *n)
                        );
                        Err(t.blocked(why, Some(g), 0))
                    }
                    None => {
                        let e = &ix.net.external_ips[*n];
                        let why = format!(
                            "{} ({ea}) is attached to nothing: no ExternalIPAttachment forwards it",
                            external_ip_label(ix, *n)
                        );
                        let obj = ObjectRef::new(
                            Kind::ExternalIp,
                            &e.id,
                            object_name(e.metadata.as_ref()),
                        );
                        Err(t.blocked(why, Some(obj), 0))
                    }
                },
            }
        }
        Place::Workload(w, endpoint) => to_workload(t, *w, *endpoint, from),
        Place::Port(p, a) => {
            let port = &ix.ports[*p];
            start(t, peer_of(a.is_ipv4()), &a.to_string());
            let vn = ix.vn_ref(&port.vn);
            let why = format!(
                "{a} is a private address of {} ({}): private addresses are not routed from outside; only an ExternalIPAttachment makes a workload reachable, at its ExternalIP",
                vn.describe(),
                ix.workloads[port.workload].object.describe()
            );
            Err(t.blocked(why, Some(vn), 0))
        }
        Place::Gateway(s, a) | Place::Vacant(s, a) => {
            start(t, peer_of(a.is_ipv4()), &a.to_string());
            let sr = ix.subnet_ref(s);
            let why = format!(
                "{a} is a private address of {}: not routed from outside",
                sr.describe()
            );
            Err(t.blocked(why, Some(sr), 0))
        }
    })
}

/// From outside to a workload: through its READY ExternalIPAttachment.
fn to_workload(
    t: &mut Trace,
    w: usize,
    endpoint: Option<ClusterEndpoint>,
    from: Option<IpAddr>,
) -> Step {
    let ix = t.ix;
    let object = ix.workloads[w].object.clone();
    let mut pending = None;
    for a in &ix.net.external_ip_attachments {
        let Some(spec) = &a.spec else { continue };
        if target_workload(ix, spec) != Some((w, endpoint)) {
            continue;
        }
        let st = a.status.clone().unwrap_or_default();
        let ea: Option<IpAddr> = st.external_ip_address.parse().ok().or_else(|| {
            external_ip(ix, &spec.external_ip)
                .and_then(|n| ix.net.external_ips[n].status.as_ref())
                .and_then(|s| s.address.parse().ok())
        });
        match (target_port(ix, a), ea) {
            (Ok(tp), Some(ea)) if from.is_none_or(|f| f.is_ipv4() == ea.is_ipv4()) => {
                let peer = from.map_or(Peer::Anywhere(ea.is_ipv4()), Peer::Addr);
                t.hop(
                    HopKind::Internet,
                    format!("starts at {}", peer.describe()),
                    None,
                    &peer.address(),
                    &ea.to_string(),
                );
                return enter(t, att_ref(a), tp, ea, peer);
            }
            (Err(why), _) => pending = pending.or(Some((att_ref(a), why))),
            _ => {}
        }
    }
    let v4 = from.is_none_or(|f| f.is_ipv4());
    let peer = from.map_or(Peer::Anywhere(v4), Peer::Addr);
    t.hop(
        HopKind::Internet,
        format!("starts at {}", peer.describe()),
        None,
        &peer.address(),
        "",
    );
    if let Some((att, why)) = pending {
        return Err(t.blocked(why, Some(att), 0));
    }
    let what = match endpoint {
        Some(ClusterEndpoint::Api) => format!("the API VIP of {}", object.describe()),
        Some(ClusterEndpoint::Ingress) => format!("the ingress VIP of {}", object.describe()),
        None => object.describe(),
    };
    let why = format!("no ExternalIPAttachment makes {what} reachable from the internet");
    Err(t.blocked(why, Some(object), 0))
}
