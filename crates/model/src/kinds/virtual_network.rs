//! VirtualNetwork: a tenant network of a NetworkClass with an IPv4 and/or an IPv6 CIDR.

use crate::kinds::KindSpec;
use crate::refs::RefField;
use crate::validate::{DualCidrs, metadata};
use crate::{Invalid, Kind, Scope, pb};

/// The facts about VirtualNetworks.
pub const SPEC: KindSpec = KindSpec {
    aliases: &["vn", "vns", "vnet", "vnets"],
    state_prefix: Some("VIRTUAL_NETWORK_STATE"),
    immutable_fields: &[
        "spec.network_class",
        "spec.ipv4_cidr",
        "spec.ipv6_cidr",
        "spec.capabilities",
    ],
    references: &[RefField::to("spec.network_class", Kind::NetworkClass)],
    needs_fabric_finalizer: true,
    ..KindSpec::new(
        "VirtualNetwork",
        "virtual_networks",
        "virtualnetwork",
        "virtualnetworks",
        Scope::Tenant,
    )
};

/// Checks a VirtualNetwork's CIDRs; capability checks need the class.
pub fn validate(vn: &pb::VirtualNetwork) -> Result<DualCidrs, Invalid> {
    metadata(vn.metadata.as_ref())?;
    let spec = vn.spec.clone().unwrap_or_default();
    DualCidrs::parse("spec", &spec.ipv4_cidr, &spec.ipv6_cidr)
}
