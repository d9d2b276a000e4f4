//! External IP attachments: inbound DNAT from an allocated external address
//! to an address inside a VirtualNetwork.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::tables::{FabricState, Record, dnat_key, ref_dnat};
use super::{Plan, put, remove};
use crate::checks;
use crate::types::{CreateExternalIpAttachmentRequest, DeleteExternalIpAttachmentRequest};

/// An inbound DNAT entry (ExternalIPAttachment).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalIpAttachmentRecord {
    /// Our ExternalIPAttachment id.
    #[serde(alias = "id")]
    pub attachment_id: String,
    /// VirtualNetwork of the target.
    #[serde(alias = "vn")]
    pub virtual_network_id: String,
    /// Destination rewritten from…
    #[serde(alias = "external")]
    pub external_address: IpAddr,
    /// …to this address.
    #[serde(alias = "target")]
    pub target_ip: IpAddr,
}

/// `create_external_ip_attachment`: records the DNAT rule.
pub fn create(state: &FabricState, r: CreateExternalIpAttachmentRequest) -> Plan {
    checks::require_non_empty("attachment_id", &r.attachment_id)?;
    let vn = state.required_vn(&r.virtual_network_id)?;
    state.external_address_free(r.external_address, &ref_dnat(&r.attachment_id))?;
    let its_vn = state
        .dnat(&r.attachment_id)
        .map(|d| d.virtual_network_id.as_str());
    checks::external_ip_attachment(&r, vn.ipv4_cidr, vn.ipv6_cidr, its_vn)?;
    let rec = Record::Dnat(ExternalIpAttachmentRecord {
        attachment_id: r.attachment_id,
        virtual_network_id: r.virtual_network_id,
        external_address: r.external_address,
        target_ip: r.target_ip,
    });
    Ok((vec![put(rec)], ()))
}

/// `delete_external_ip_attachment`: removes the DNAT rule.
pub fn delete(state: &FabricState, r: DeleteExternalIpAttachmentRequest) -> Plan {
    remove(state, dnat_key(&r.attachment_id))
}
