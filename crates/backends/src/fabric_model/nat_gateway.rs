//! NAT gateways: outbound SNAT of a VirtualNetwork (one per VirtualNetwork)
//! to an allocated external address.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::tables::{FabricState, Record, ref_snat, snat_key};
use super::{Plan, put, remove};
use crate::checks;
use crate::types::{CreateNatGatewayRequest, DeleteNatGatewayRequest};

/// An outbound SNAT entry (NATGateway).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NatGatewayRecord {
    /// Our NATGateway id.
    #[serde(alias = "id")]
    pub nat_gateway_id: String,
    /// Translated VirtualNetwork.
    #[serde(alias = "vn")]
    pub virtual_network_id: String,
    /// Source address after translation.
    #[serde(alias = "external")]
    pub external_address: IpAddr,
    /// Translated sources (empty: the VirtualNetwork's prefixes).
    #[serde(alias = "sources")]
    pub source_cidrs: Vec<IpNet>,
}

/// `create_nat_gateway`: records the SNAT rule.
pub fn create(state: &FabricState, r: CreateNatGatewayRequest) -> Plan {
    checks::require_non_empty("nat_gateway_id", &r.nat_gateway_id)?;
    state.required_vn(&r.virtual_network_id)?;
    state.external_address_free(r.external_address, &ref_snat(&r.nat_gateway_id))?;
    let other = state
        .vn_nat
        .get(&r.virtual_network_id)
        .map(String::as_str)
        .filter(|other| *other != r.nat_gateway_id);
    let its_vn = state
        .snat(&r.nat_gateway_id)
        .map(|s| s.virtual_network_id.as_str());
    checks::nat_gateway(&r, other, its_vn)?;
    let rec = Record::Snat(NatGatewayRecord {
        nat_gateway_id: r.nat_gateway_id,
        virtual_network_id: r.virtual_network_id,
        external_address: r.external_address,
        source_cidrs: r.source_cidrs,
    });
    Ok((vec![put(rec)], ()))
}

/// `delete_nat_gateway`: removes the SNAT rule.
pub fn delete(state: &FabricState, r: DeleteNatGatewayRequest) -> Plan {
    remove(state, snat_key(&r.nat_gateway_id))
}
