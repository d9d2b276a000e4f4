//! External IPs: addresses allocated from the provider's pools, used by
//! at most one DNAT or SNAT rule at a time.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::tables::{FabricState, Record, eip_key};
use super::{Plan, put};
use crate::checks;
use crate::types::{
    AllocateExternalIpRequest, AllocateExternalIpResponse, ReleaseExternalIpRequest,
};

/// An allocated external address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalIpRecord {
    /// Our ExternalIP id.
    #[serde(alias = "id")]
    pub external_ip_id: String,
    /// Pool it came from.
    #[serde(alias = "pool")]
    pub pool_id: String,
    /// The address.
    pub address: IpAddr,
}

/// `allocate_external_ip`: the lowest free address of the pool; allocating again answers the
/// address it already has.
pub fn allocate(
    state: &FabricState,
    r: AllocateExternalIpRequest,
) -> Plan<AllocateExternalIpResponse> {
    checks::require_non_empty("external_ip_id", &r.external_ip_id)?;
    if let Some(e) = state.eip(&r.external_ip_id) {
        checks::same_pool(&r.external_ip_id, &e.pool_id, &r.pool_id)?;
        let response = AllocateExternalIpResponse { address: e.address };
        return Ok((vec![], response));
    }
    let address =
        checks::pick_external_address(&r, &|a: &IpAddr| state.external_used.contains_key(a))?;
    let rec = Record::ExternalIp(ExternalIpRecord {
        external_ip_id: r.external_ip_id,
        pool_id: r.pool_id,
        address,
    });
    let response = AllocateExternalIpResponse { address };
    Ok((vec![put(rec)], response))
}

/// `release_external_ip`: refused while a DNAT or SNAT rule uses the address.
pub fn release(state: &FabricState, r: ReleaseExternalIpRequest) -> Plan {
    let Some(e) = state.eip(&r.external_ip_id) else {
        return Ok((vec![], ()));
    };
    let used_by = state.address_consumer.get(&e.address).map(String::as_str);
    checks::releasable(&r, &e.pool_id, e.address, used_by)?;
    Ok((vec![(eip_key(&r.external_ip_id), None)], ()))
}
