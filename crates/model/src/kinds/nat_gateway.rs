//! NATGateway: outbound address translation of a VirtualNetwork through one ExternalIP.

use crate::kinds::KindSpec;
use crate::refs::RefField;
use crate::validate::{metadata, required};
use crate::{Invalid, Kind, Scope, pb};

/// The facts about NATGateways. Nothing references them.
pub const SPEC: KindSpec = KindSpec {
    aliases: &["nat", "nats", "natgw", "natgws"],
    state_prefix: Some("NAT_GATEWAY_STATE"),
    immutable_fields: &["spec.virtual_network", "spec.external_ip"],
    references: &[
        RefField::to("spec.virtual_network", Kind::VirtualNetwork),
        RefField::to("spec.external_ip", Kind::ExternalIp),
    ],
    needs_fabric_finalizer: true,
    ..KindSpec::new(
        "NATGateway",
        "nat_gateways",
        "natgateway",
        "natgateways",
        Scope::Tenant,
    )
};

/// Checks a NATGateway: VN and external IP named.
pub fn validate(n: &pb::NatGateway) -> Result<(), Invalid> {
    metadata(n.metadata.as_ref())?;
    let spec = n.spec.clone().unwrap_or_default();
    required("spec.virtual_network", &spec.virtual_network)?;
    required("spec.external_ip", &spec.external_ip)
}
