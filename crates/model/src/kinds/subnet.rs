//! Subnet: a range of a VirtualNetwork that workloads attach to.

use crate::kinds::KindSpec;
use crate::refs::RefField;
use crate::validate::{DualCidrs, metadata};
use crate::{Invalid, Kind, Scope, pb};

/// The facts about Subnets.
pub const SPEC: KindSpec = KindSpec {
    display_name: "Subnet",
    collection: "subnets",
    singular: "subnet",
    plural: "subnets",
    aliases: &["sn"],
    scope: Scope::Tenant,
    state_prefix: Some("SUBNET_STATE"),
    initial_state: "PENDING",
    immutable_fields: &["spec.virtual_network", "spec.ipv4_cidr", "spec.ipv6_cidr"],
    set_once_fields: &[],
    references: &[RefField::to("spec.virtual_network", Kind::VirtualNetwork)],
    tenant_user_may_write: false,
    needs_fabric_finalizer: true,
    reconciled: true,
};

/// Checks a Subnet on its own: VN named, CIDRs valid.
pub fn validate(s: &pb::Subnet) -> Result<DualCidrs, Invalid> {
    metadata(s.metadata.as_ref())?;
    let spec = s.spec.clone().unwrap_or_default();
    if spec.virtual_network.is_empty() {
        return Err(Invalid::new(
            "spec.virtual_network",
            "virtual_network is required",
        ));
    }
    DualCidrs::parse("spec", &spec.ipv4_cidr, &spec.ipv6_cidr)
}
