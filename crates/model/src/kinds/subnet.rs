//! Subnet: a range of a VirtualNetwork that workloads attach to.

use crate::kinds::KindSpec;
use crate::refs::RefField;
use crate::validate::{DualCidrs, metadata, required};
use crate::{Invalid, Kind, Scope, pb};

/// The facts about Subnets.
pub const SPEC: KindSpec = KindSpec {
    aliases: &["sn"],
    state_prefix: Some("SUBNET_STATE"),
    immutable_fields: &["spec.virtual_network", "spec.ipv4_cidr", "spec.ipv6_cidr"],
    references: &[RefField::to("spec.virtual_network", Kind::VirtualNetwork)],
    needs_fabric_finalizer: true,
    ..KindSpec::new("Subnet", "subnets", "subnet", "subnets", Scope::Tenant)
};

/// Checks a Subnet on its own: VN named, CIDRs valid.
pub fn validate(s: &pb::Subnet) -> Result<DualCidrs, Invalid> {
    metadata(s.metadata.as_ref())?;
    let spec = s.spec.clone().unwrap_or_default();
    required("spec.virtual_network", &spec.virtual_network)?;
    DualCidrs::parse("spec", &spec.ipv4_cidr, &spec.ipv6_cidr)
}
