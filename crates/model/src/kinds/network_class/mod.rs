//! NetworkClass: a provider-defined kind of network (its fabric and k8s managers, the
//! capabilities it offers and the default networking every new tenant gets).

pub mod design_defaults;

use crate::kinds::KindSpec;
use crate::validate::{DualCidrs, metadata, required, security_rules, subnet_within};
use crate::{Invalid, Scope, pb};

/// The facts about NetworkClasses. The fabric manager is fixed at creation; the k8s manager
/// may be set once later.
pub const SPEC: KindSpec = KindSpec {
    aliases: &["nc", "class", "classes"],
    state_prefix: Some("NETWORK_CLASS_STATE"),
    immutable_fields: &["fabric_manager"],
    set_once_fields: &["k8s_manager"],
    ..KindSpec::new(
        "NetworkClass",
        "network_classes",
        "networkclass",
        "networkclasses",
        Scope::Provider,
    )
};

/// Checks a NetworkClass apart from the manager registry: managers named, defaults valid.
pub fn validate(nc: &pb::NetworkClass) -> Result<(), Invalid> {
    metadata(nc.metadata.as_ref())?;
    required("fabric_manager", &nc.fabric_manager)?;
    let spec = nc.spec.clone().unwrap_or_default();
    if !(0..=32).contains(&spec.vip_prefix_length) {
        return Err(Invalid::new(
            "spec.vip_prefix_length",
            "must be between 1 and 32 (0 = default 28)",
        ));
    }
    let Some(d) = spec.defaults.as_ref() else {
        return Err(Invalid::new(
            "spec.defaults",
            "defaults are required (tenant default networking)",
        ));
    };
    let vn = DualCidrs::parse(
        "spec.defaults.virtual_network",
        &d.virtual_network_ipv4_cidr,
        &d.virtual_network_ipv6_cidr,
    )
    .map_err(|e| Invalid::new(e.field.replace("network.ipv", "network_ipv"), e.message))?;
    let sub = DualCidrs::parse_optional(
        "spec.defaults.subnet",
        &d.subnet_ipv4_cidr,
        &d.subnet_ipv6_cidr,
    )
    .map_err(|e| Invalid::new(e.field.replace("subnet.ipv", "subnet_ipv"), e.message))?;
    if sub.v4.is_none() && sub.v6.is_none() {
        return Err(Invalid::new(
            "spec.defaults.subnet_ipv4_cidr",
            "at least one default subnet CIDR is required",
        ));
    }
    subnet_within(
        &sub,
        &vn,
        "spec.defaults.subnet",
        "the default VirtualNetwork CIDR",
    )?;
    security_rules("spec.defaults.ingress_rules", &d.ingress_rules)?;
    security_rules("spec.defaults.egress_rules", &d.egress_rules)?;
    Ok(())
}
