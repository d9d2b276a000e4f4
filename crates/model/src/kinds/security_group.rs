//! SecurityGroup: ingress and egress rules of a VirtualNetwork that workload attachments name.

use crate::kinds::KindSpec;
use crate::refs::RefField;
use crate::validate::{metadata, security_rules};
use crate::{Invalid, Kind, Scope, pb};

/// The facts about SecurityGroups.
pub const SPEC: KindSpec = KindSpec {
    display_name: "SecurityGroup",
    collection: "security_groups",
    singular: "securitygroup",
    plural: "securitygroups",
    aliases: &["sg", "sgs"],
    scope: Scope::Tenant,
    state_prefix: Some("SECURITY_GROUP_STATE"),
    initial_state: "PENDING",
    immutable_fields: &["spec.virtual_network"],
    set_once_fields: &[],
    references: &[RefField::to("spec.virtual_network", Kind::VirtualNetwork)],
    tenant_user_may_write: false,
    needs_fabric_finalizer: true,
    reconciled: true,
};

/// Checks a SecurityGroup: VN named, rules valid.
pub fn validate(sg: &pb::SecurityGroup) -> Result<(), Invalid> {
    metadata(sg.metadata.as_ref())?;
    let spec = sg.spec.clone().unwrap_or_default();
    if spec.virtual_network.is_empty() {
        return Err(Invalid::new(
            "spec.virtual_network",
            "virtual_network is required",
        ));
    }
    security_rules("spec.ingress", &spec.ingress)?;
    security_rules("spec.egress", &spec.egress)
}
