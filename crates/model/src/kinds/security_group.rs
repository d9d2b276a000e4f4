//! SecurityGroup: ingress and egress rules of a VirtualNetwork that workload attachments name.

use crate::kinds::KindSpec;
use crate::refs::RefField;
use crate::validate::{metadata, required, security_rules};
use crate::{Invalid, Kind, Scope, pb};

/// The facts about SecurityGroups.
pub const SPEC: KindSpec = KindSpec {
    aliases: &["sg", "sgs"],
    state_prefix: Some("SECURITY_GROUP_STATE"),
    immutable_fields: &["spec.virtual_network"],
    references: &[RefField::to("spec.virtual_network", Kind::VirtualNetwork)],
    needs_fabric_finalizer: true,
    ..KindSpec::new(
        "SecurityGroup",
        "security_groups",
        "securitygroup",
        "securitygroups",
        Scope::Tenant,
    )
};

/// Checks a SecurityGroup: VN named, rules valid.
pub fn validate(sg: &pb::SecurityGroup) -> Result<(), Invalid> {
    metadata(sg.metadata.as_ref())?;
    let spec = sg.spec.clone().unwrap_or_default();
    required("spec.virtual_network", &spec.virtual_network)?;
    security_rules("spec.ingress", &spec.ingress)?;
    security_rules("spec.egress", &spec.egress)
}
