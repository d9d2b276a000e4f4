//! VirtualNetworks: a tenant's address space, which its subnets, security
//! groups, DNAT and SNAT rules live in.

use ipnet::{Ipv4Net, Ipv6Net};
use serde::{Deserialize, Serialize};

use super::tables::{Change, FabricState, Record, vn_key};
use super::{Plan, put};
use crate::checks;
use crate::types::{CreateVirtualNetworkRequest, DeleteVirtualNetworkRequest};

/// A VirtualNetwork as the sim fabric knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VirtualNetworkRecord {
    /// Our VirtualNetwork id.
    #[serde(alias = "id")]
    pub virtual_network_id: String,
    /// Owning tenant.
    pub tenant: String,
    /// IPv4 range.
    pub ipv4_cidr: Option<Ipv4Net>,
    /// IPv6 range.
    pub ipv6_cidr: Option<Ipv6Net>,
}

/// `create_virtual_network`: records the VirtualNetwork; creating it again with the same
/// tenant and prefixes changes nothing.
pub fn create(state: &FabricState, r: CreateVirtualNetworkRequest) -> Plan {
    checks::virtual_network(&r)?;
    if let Some(old) = state.vn(&r.virtual_network_id) {
        checks::same_virtual_network(&r, &old.tenant, old.ipv4_cidr, old.ipv6_cidr)?;
    }
    let rec = Record::VirtualNetwork(VirtualNetworkRecord {
        virtual_network_id: r.virtual_network_id,
        tenant: r.tenant,
        ipv4_cidr: r.ipv4_cidr,
        ipv6_cidr: r.ipv6_cidr,
    });
    Ok((vec![put(rec)], ()))
}

/// `delete_virtual_network`: refused while anything still lives in it.
pub fn delete(state: &FabricState, r: DeleteVirtualNetworkRequest) -> Plan {
    if state.vn(&r.virtual_network_id).is_none() {
        return Ok((vec![], ()));
    }
    if let Some(refs) = state.vn_refs.get(&r.virtual_network_id) {
        checks::still_in_use(
            &format!("virtual network '{}'", r.virtual_network_id),
            refs.iter().map(String::as_str),
        )?;
    }
    let change: Change = (vn_key(&r.virtual_network_id), None);
    Ok((vec![change], ()))
}
