//! Resolving a question's ends to places of the tenant's network: a workload (id or name),
//! a port, an ExternalIP, a subnet gateway, an unused address of a subnet, or the outside.

use std::net::IpAddr;

use super::network::{Index, find, object_name};
use super::{ClusterEndpoint, End, ExplainError};
use crate::{Invalid, Kind};

/// Where an end is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A workload (index in `Index::workloads`), and the cluster VIP when one is meant.
    Workload(usize, Option<ClusterEndpoint>),
    /// A port, named by one of its addresses.
    Port(usize, IpAddr),
    /// An ExternalIP of the tenant (index in `Network::external_ips`) at its address.
    External(usize, IpAddr),
    /// The gateway address of a subnet (id).
    Gateway(String, IpAddr),
    /// An address of a subnet (id) that no port has.
    Vacant(String, IpAddr),
    /// Outside the cloud: an address, or any (`None`).
    Outside(Option<IpAddr>),
}

fn workload(ix: &Index, kind: Kind, key: &str, field: &str) -> Result<usize, ExplainError> {
    let hit = |by_id: bool| {
        ix.workloads.iter().position(|w| {
            w.object.kind == kind
                && if by_id {
                    w.object.id == key
                } else {
                    w.object.name == key
                }
        })
    };
    hit(true)
        .or_else(|| hit(false))
        .ok_or_else(|| ExplainError::NotFound {
            field: field.to_string(),
            kind,
            key: key.to_string(),
        })
}

/// The VirtualNetwork id of a place, when it is inside one.
pub fn vn_of(ix: &Index, place: &Place) -> Option<String> {
    match place {
        Place::Workload(w, _) => ix.ports_of(*w).next().map(|(_, p)| p.vn.clone()),
        Place::Port(p, _) => Some(ix.ports[*p].vn.clone()),
        Place::Gateway(s, _) | Place::Vacant(s, _) => ix
            .subnet(s)
            .and_then(|s| s.spec.as_ref())
            .map(|s| s.virtual_network.clone()),
        Place::External(..) | Place::Outside(_) => None,
    }
}

/// Resolves `end` (request field `field`); `context` is the VirtualNetwork of the other end,
/// which an address without `virtual_network` is looked up in first.
pub fn resolve(
    ix: &Index,
    end: &End,
    field: &str,
    context: Option<&str>,
) -> Result<Place, ExplainError> {
    match end {
        End::ComputeInstance(k) => Ok(Place::Workload(
            workload(
                ix,
                Kind::ComputeInstance,
                k,
                &format!("{field}.compute_instance"),
            )?,
            None,
        )),
        End::BareMetalInstance(k) => Ok(Place::Workload(
            workload(
                ix,
                Kind::BareMetalInstance,
                k,
                &format!("{field}.baremetal_instance"),
            )?,
            None,
        )),
        End::Cluster(k, e) => Ok(Place::Workload(
            workload(ix, Kind::Cluster, k, &format!("{field}.cluster"))?,
            Some(*e),
        )),
        End::Internet => Ok(Place::Outside(None)),
        End::Address {
            address,
            virtual_network,
        } => address_place(ix, *address, virtual_network.as_deref(), field, context),
    }
}

fn address_place(
    ix: &Index,
    a: IpAddr,
    vn_key: Option<&str>,
    field: &str,
    context: Option<&str>,
) -> Result<Place, ExplainError> {
    let vn = match vn_key {
        Some(key) => Some(
            find(
                &ix.net.virtual_networks,
                key,
                |v| v.id.as_str(),
                |v| v.metadata.as_ref(),
            )
            .map(|v| v.id.clone())
            .ok_or_else(|| ExplainError::NotFound {
                field: format!("{field}.virtual_network"),
                kind: Kind::VirtualNetwork,
                key: key.to_string(),
            })?,
        ),
        None => None,
    };
    let ports: Vec<usize> = ix.by_address.get(&a).cloned().unwrap_or_default();
    let in_vn = |v: &str| ports.iter().copied().find(|p| ix.ports[*p].vn == v);
    if let Some(v) = &vn {
        if let Some(p) = in_vn(v) {
            return Ok(Place::Port(p, a));
        }
    } else if let Some(p) = context.and_then(in_vn) {
        return Ok(Place::Port(p, a));
    } else {
        let mut vns: Vec<&str> = ports.iter().map(|p| ix.ports[*p].vn.as_str()).collect();
        vns.sort_unstable();
        vns.dedup();
        match vns.len() {
            0 => {}
            1 => return Ok(Place::Port(ports[0], a)),
            _ => {
                let names: Vec<String> = vns
                    .iter()
                    .map(|v| format!("'{}'", ix.vn_ref(v).label()))
                    .collect();
                return Err(Invalid::new(
                    format!("{field}.virtual_network"),
                    format!(
                        "address {a} is used in several VirtualNetworks ({}): say which",
                        names.join(", ")
                    ),
                )
                .into());
            }
        }
    }
    if let Some(n) = ix.net.external_ips.iter().position(|e| {
        e.status
            .as_ref()
            .is_some_and(|s| s.address.parse() == Ok(a))
    }) {
        return Ok(Place::External(n, a));
    }
    let scope = vn.as_deref().or(context);
    for s in &ix.net.subnets {
        let Some(spec) = &s.spec else { continue };
        if scope.is_some_and(|v| v != spec.virtual_network) {
            continue;
        }
        if ix.gateway(&s.id, a.is_ipv4()) == Some(a) {
            return Ok(Place::Gateway(s.id.clone(), a));
        }
        let cidr = if a.is_ipv4() {
            &spec.ipv4_cidr
        } else {
            &spec.ipv6_cidr
        };
        if scope.is_some() && cidr.parse::<ipnet::IpNet>().is_ok_and(|n| n.contains(&a)) {
            return Ok(Place::Vacant(s.id.clone(), a));
        }
    }
    Ok(Place::Outside(Some(a)))
}

/// The ExternalIP `key` (id or name) of an attachment, as an index of `Network::external_ips`.
pub fn external_ip(ix: &Index, key: &str) -> Option<usize> {
    let e = find(
        &ix.net.external_ips,
        key,
        |e| e.id.as_str(),
        |e| e.metadata.as_ref(),
    )?;
    ix.net.external_ips.iter().position(|x| x.id == e.id)
}

/// "ExternalIP 'name'".
pub fn external_ip_label(ix: &Index, n: usize) -> String {
    let e = &ix.net.external_ips[n];
    let name = object_name(e.metadata.as_ref());
    format!(
        "ExternalIP '{}'",
        if name.is_empty() { &e.id } else { name }
    )
}
