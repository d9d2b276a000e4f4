//! BareMetalTemplate: a provider catalog item for bare-metal instances: a HostType plus
//! default parameters.

use crate::kinds::KindSpec;
use crate::refs::RefField;
use crate::{Kind, Scope};

/// The facts about BareMetalTemplates. Instances took their HostType from the template, so it
/// is fixed; title, description and the default parameters (for new instances) may change.
/// Nothing to provision: a template is usable once stored.
pub const SPEC: KindSpec = KindSpec {
    aliases: &["bmt", "bmtemplate", "bmtemplates"],
    state_prefix: Some("BARE_METAL_TEMPLATE_STATE"),
    initial_state: "READY",
    immutable_fields: &["spec.host_type"],
    references: &[RefField::to("spec.host_type", Kind::HostType)],
    ..KindSpec::new(
        "BareMetalTemplate",
        "baremetal_templates",
        "baremetaltemplate",
        "baremetaltemplates",
        Scope::Provider,
    )
};
