//! VirtualNetwork: a tenant network of a NetworkClass with an IPv4 and/or an IPv6 CIDR.

use crate::kinds::KindSpec;
use crate::refs::RefField;
use crate::validate::{DualCidrs, metadata};
use crate::{Invalid, Kind, Scope, pb};

/// The facts about VirtualNetworks.
pub const SPEC: KindSpec = KindSpec {
    display_name: "VirtualNetwork",
    collection: "virtual_networks",
    singular: "virtualnetwork",
    plural: "virtualnetworks",
    aliases: &["vn", "vns", "vnet", "vnets"],
    scope: Scope::Tenant,
    state_prefix: Some("VIRTUAL_NETWORK_STATE"),
    initial_state: "PENDING",
    immutable_fields: &[
        "spec.network_class",
        "spec.ipv4_cidr",
        "spec.ipv6_cidr",
        "spec.capabilities",
    ],
    set_once_fields: &[],
    references: &[RefField::to("spec.network_class", Kind::NetworkClass)],
    tenant_user_may_write: false,
    needs_fabric_finalizer: true,
    reconciled: true,
};

/// Checks a VirtualNetwork's CIDRs; capability checks need the class.
pub fn validate(vn: &pb::VirtualNetwork) -> Result<DualCidrs, Invalid> {
    metadata(vn.metadata.as_ref())?;
    let spec = vn.spec.clone().unwrap_or_default();
    DualCidrs::parse("spec", &spec.ipv4_cidr, &spec.ipv6_cidr)
}
