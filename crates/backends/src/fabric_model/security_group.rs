//! Security groups: stateful allow rules of a VirtualNetwork, applied to
//! network attachments.

use serde::{Deserialize, Serialize};

use super::tables::{FabricState, Record, sg_key};
use super::{Plan, put};
use crate::checks;
use crate::types::{ApplySecurityGroupRequest, DeleteSecurityGroupRequest, SecurityRule};

/// A programmed security group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityGroupRecord {
    /// Our SecurityGroup id.
    #[serde(alias = "id")]
    pub security_group_id: String,
    /// Its VirtualNetwork.
    #[serde(alias = "vn")]
    pub virtual_network_id: String,
    /// Inbound allow rules.
    pub ingress: Vec<SecurityRule>,
    /// Outbound allow rules.
    pub egress: Vec<SecurityRule>,
}

/// `apply_security_group`: replaces the group's rules.
pub fn apply(state: &FabricState, r: ApplySecurityGroupRequest) -> Plan {
    checks::require_non_empty("security_group_id", &r.security_group_id)?;
    state.required_vn(&r.virtual_network_id)?;
    let its_vn = state
        .sg(&r.security_group_id)
        .map(|g| g.virtual_network_id.as_str());
    checks::security_group(&r, its_vn)?;
    let rec = Record::SecurityGroup(SecurityGroupRecord {
        security_group_id: r.security_group_id,
        virtual_network_id: r.virtual_network_id,
        ingress: r.ingress,
        egress: r.egress,
    });
    Ok((vec![put(rec)], ()))
}

/// `delete_security_group`: refused while network attachments still use it.
pub fn delete(state: &FabricState, r: DeleteSecurityGroupRequest) -> Plan {
    let Some(g) = state.sg(&r.security_group_id) else {
        return Ok((vec![], ()));
    };
    checks::security_group_in(
        &r.security_group_id,
        &g.virtual_network_id,
        &r.virtual_network_id,
    )?;
    if let Some(users) = state.sg_refs.get(&r.security_group_id) {
        checks::security_group_unused(
            &r.security_group_id,
            users.len(),
            users.iter().next().map_or("", String::as_str),
        )?;
    }
    Ok((vec![(sg_key(&r.security_group_id), None)], ()))
}
