//! Subnets: a segment (its id doubles as the VXLAN VNI or OVN tunnel key) inside a
//! VirtualNetwork, with gateways and an optional VIP range no port is given.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::{Deserialize, Serialize};

use super::tables::{FabricState, Record, subnet_key, subnet_prefixes};
use super::{Plan, put};
use crate::checks;
use crate::contract::OpError;
use crate::net::{ipv4_gateway, ipv6_gateway};
use crate::types::{CreateSubnetRequest, CreateSubnetResponse, DeleteSubnetRequest};

/// Lowest segment id handed out (ids below are left to the provider's own segments).
pub const FIRST_SEGMENT_ID: i64 = 100;

/// The segment id a new subnet gets: derived from the subnet id's hash, so a fabric that lost
/// its state gives a re-created subnet the same segment again, probing upwards (wrapping to
/// [`FIRST_SEGMENT_ID`]) past ids in use. `None` when every id is taken.
pub fn pick_segment(state: &FabricState, subnet_id: &str) -> Option<i64> {
    let span = checks::MAX_VNI - FIRST_SEGMENT_ID + 1;
    let hash = osac_model::hash::fnv1a64(subnet_id.bytes());
    // The remainder is below `span`, which fits an i64.
    let offset = i64::try_from(hash % span.unsigned_abs()).unwrap_or(0);
    first_free(
        &state.segments,
        FIRST_SEGMENT_ID + offset,
        FIRST_SEGMENT_ID..=checks::MAX_VNI,
    )
}

/// The first id of `range` not in `used` at or after `start`, else the first from the bottom of
/// `range`.
fn first_free(
    used: &std::collections::BTreeSet<i64>,
    start: i64,
    range: std::ops::RangeInclusive<i64>,
) -> Option<i64> {
    let free_from = |from: i64| {
        let mut candidate = from;
        for taken in used.range(from..) {
            if *taken != candidate {
                break;
            }
            candidate += 1;
        }
        range.contains(&candidate).then_some(candidate)
    };
    free_from(start).or_else(|| free_from(*range.start()).filter(|id| *id < start))
}

/// A subnet segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubnetRecord {
    /// Our Subnet id.
    #[serde(alias = "id")]
    pub subnet_id: String,
    /// Its VirtualNetwork.
    #[serde(alias = "vn")]
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
    #[serde(default)]
    pub ipv4_gateway: Option<Ipv4Addr>,
    /// IPv6 gateway (`::1`).
    #[serde(default)]
    pub ipv6_gateway: Option<Ipv6Addr>,
}

impl SubnetRecord {
    /// The IPv4 gateway: the first usable address of the IPv4 prefix.
    pub fn gw4(&self) -> Option<Ipv4Addr> {
        self.ipv4_cidr.map(ipv4_gateway)
    }

    /// The IPv6 gateway: `::1` of the IPv6 prefix.
    pub fn gw6(&self) -> Option<Ipv6Addr> {
        self.ipv6_cidr.map(ipv6_gateway)
    }
}

/// `create_subnet`: a new subnet gets the next segment id and may not overlap a sibling;
/// creating it again keeps its segment (only the VIP range may change).
pub fn create(state: &FabricState, r: CreateSubnetRequest) -> Plan<CreateSubnetResponse> {
    checks::require_non_empty("subnet_id", &r.subnet_id)?;
    let vn = state.required_vn(&r.virtual_network_id)?;
    checks::subnet(&r, vn.ipv4_cidr, vn.ipv6_cidr)?;

    let ipv4_gateway = r.ipv4_cidr.map(ipv4_gateway);
    let ipv6_gateway = r.ipv6_cidr.map(ipv6_gateway);
    let segment_id = if let Some(old) = state.subnet(&r.subnet_id) {
        checks::same_subnet(&r, &old.virtual_network_id, old.ipv4_cidr, old.ipv6_cidr)?;
        old.segment_id
    } else {
        let candidate = SubnetRecord {
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
        pick_segment(state, &r.subnet_id).ok_or_else(|| {
            OpError::permanent(format!(
                "no free segment id is left for subnet '{}' ({FIRST_SEGMENT_ID}-{})",
                r.subnet_id,
                checks::MAX_VNI
            ))
        })?
    };
    let changes = vec![put(Record::Subnet(SubnetRecord {
        subnet_id: r.subnet_id,
        virtual_network_id: r.virtual_network_id,
        segment_id,
        ipv4_cidr: r.ipv4_cidr,
        ipv6_cidr: r.ipv6_cidr,
        vip_cidr: r.vip_cidr,
        ipv4_gateway,
        ipv6_gateway,
    }))];
    let response = CreateSubnetResponse {
        segment_id,
        ipv4_gateway: ipv4_gateway.map(IpAddr::V4),
        ipv6_gateway: ipv6_gateway.map(IpAddr::V6),
    };
    Ok((changes, response))
}

/// `delete_subnet`: refused while network attachments remain.
pub fn delete(state: &FabricState, r: DeleteSubnetRequest) -> Plan {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn with_segments(ids: &[i64]) -> FabricState {
        let mut state = FabricState::default();
        for (i, id) in ids.iter().enumerate() {
            let rec = SubnetRecord {
                subnet_id: format!("taken{i}"),
                virtual_network_id: "vn".into(),
                segment_id: *id,
                ipv4_cidr: None,
                ipv6_cidr: None,
                vip_cidr: None,
                ipv4_gateway: None,
                ipv6_gateway: None,
            };
            state.apply(subnet_key(&rec.subnet_id), Some(Record::Subnet(rec)));
        }
        state
    }

    #[test]
    fn a_subnet_gets_the_same_segment_from_any_empty_fabric() {
        let a = pick_segment(&FabricState::default(), "subnet-a");
        assert_eq!(a, pick_segment(&FabricState::default(), "subnet-a"));
        let a = a.unwrap_or_default();
        assert!((FIRST_SEGMENT_ID..=checks::MAX_VNI).contains(&a));
        assert_ne!(Some(a), pick_segment(&FabricState::default(), "subnet-b"));
    }

    #[test]
    fn segments_in_use_are_probed_past_and_the_top_wraps_to_the_bottom() {
        let home = pick_segment(&FabricState::default(), "s").unwrap_or_default();
        let state = with_segments(&[home, home + 1]);
        assert_eq!(pick_segment(&state, "s"), Some(home + 2));

        let used = [7, 8, 9, 10, 1].into_iter().collect();
        assert_eq!(first_free(&used, 7, 1..=10), Some(2));
        let full = (1..=10).collect();
        assert_eq!(first_free(&full, 7, 1..=10), None);
    }
}
