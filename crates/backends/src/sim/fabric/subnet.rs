//! Subnets in the sim fabric: a segment (its id doubles as the VXLAN VNI) inside a
//! VirtualNetwork, with gateways and an optional VIP range no port is given.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::{Deserialize, Serialize};

use super::tables::{Meta, Record, State, subnet_key, subnet_prefixes};
use super::{Plan, put};
use crate::checks;
use crate::net::{ipv4_gateway, ipv6_gateway};
use crate::types::{CreateSubnetRequest, CreateSubnetResponse, DeleteSubnetRequest};

/// First segment id handed out (segment ids double as VXLAN VNIs).
pub(super) const FIRST_SEGMENT_ID: i64 = 100;

/// A subnet segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimSubnet {
    /// Our Subnet id.
    pub subnet_id: String,
    /// Its VirtualNetwork.
    pub virtual_network_id: String,
    /// Segment id (VNI).
    pub segment_id: i64,
    /// IPv4 prefix.
    pub ipv4_cidr: Option<Ipv4Net>,
    /// IPv6 prefix.
    pub ipv6_cidr: Option<Ipv6Net>,
    /// Reserved VIP range.
    pub vip_cidr: Option<IpNet>,
    /// IPv4 gateway (first usable address).
    pub ipv4_gateway: Option<Ipv4Addr>,
    /// IPv6 gateway (`::1`).
    pub ipv6_gateway: Option<Ipv6Addr>,
}

/// `create_subnet`: a new subnet gets the next segment id and may not overlap a sibling;
/// creating it again keeps its segment (only the VIP range may change).
pub(super) fn create(state: &State, r: CreateSubnetRequest) -> Plan<CreateSubnetResponse> {
    checks::require_non_empty("subnet_id", &r.subnet_id)?;
    let vn = state.required_vn(&r.virtual_network_id)?;
    checks::subnet(&r, vn.ipv4_cidr, vn.ipv6_cidr)?;

    let ipv4_gateway = r.ipv4_cidr.map(ipv4_gateway);
    let ipv6_gateway = r.ipv6_cidr.map(ipv6_gateway);
    let mut changes = Vec::new();
    let segment_id = if let Some(old) = state.subnet(&r.subnet_id) {
        checks::same_subnet(&r, &old.virtual_network_id, old.ipv4_cidr, old.ipv6_cidr)?;
        old.segment_id
    } else {
        let candidate = SimSubnet {
            subnet_id: r.subnet_id.clone(),
            virtual_network_id: r.virtual_network_id.clone(),
            segment_id: 0,
            ipv4_cidr: r.ipv4_cidr,
            ipv6_cidr: r.ipv6_cidr,
            vip_cidr: None,
            ipv4_gateway: None,
            ipv6_gateway: None,
        };
        for (v4, lo, _) in subnet_prefixes(&candidate) {
            for id in state.sibling_neighbours(&r.virtual_network_id, v4, lo) {
                if let Some(s) = state.subnet(id) {
                    checks::not_overlapping(&r, id, s.ipv4_cidr, s.ipv6_cidr)?;
                }
            }
        }
        let segment_id = state.next_segment_id;
        changes.push(put(Record::Meta(Meta {
            next_segment_id: segment_id + 1,
        })));
        segment_id
    };
    changes.push(put(Record::Subnet(SimSubnet {
        subnet_id: r.subnet_id,
        virtual_network_id: r.virtual_network_id,
        segment_id,
        ipv4_cidr: r.ipv4_cidr,
        ipv6_cidr: r.ipv6_cidr,
        vip_cidr: r.vip_cidr,
        ipv4_gateway,
        ipv6_gateway,
    })));
    let response = CreateSubnetResponse {
        segment_id,
        ipv4_gateway: ipv4_gateway.map(IpAddr::V4),
        ipv6_gateway: ipv6_gateway.map(IpAddr::V6),
    };
    Ok((changes, response))
}

/// `delete_subnet`: refused while network attachments remain.
pub(super) fn delete(state: &State, r: DeleteSubnetRequest) -> Plan {
    let Some(s) = state.subnet(&r.subnet_id) else {
        return Ok((vec![], ()));
    };
    checks::subnet_in(&r.subnet_id, &s.virtual_network_id, &r.virtual_network_id)?;
    if let Some(ports) = state.subnet_ports.get(&r.subnet_id) {
        checks::subnet_unused(
            &r.subnet_id,
            ports.len(),
            ports.iter().next().map_or("", String::as_str),
        )?;
    }
    Ok((vec![(subnet_key(&r.subnet_id), None)], ()))
}
