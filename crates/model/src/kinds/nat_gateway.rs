//! NATGateway: outbound address translation of a VirtualNetwork through one ExternalIP.

use crate::kinds::KindSpec;
use crate::refs::RefField;
use crate::validate::metadata;
use crate::{Invalid, Kind, Scope, pb};

/// The facts about NATGateways. Nothing references them.
pub const SPEC: KindSpec = KindSpec {
    display_name: "NATGateway",
    collection: "nat_gateways",
    singular: "natgateway",
    plural: "natgateways",
    aliases: &["nat", "nats", "natgw", "natgws"],
    scope: Scope::Tenant,
    state_prefix: Some("NAT_GATEWAY_STATE"),
    initial_state: "PENDING",
    immutable_fields: &["spec.virtual_network", "spec.external_ip"],
    set_once_fields: &[],
    references: &[
        RefField::to("spec.virtual_network", Kind::VirtualNetwork),
        RefField::to("spec.external_ip", Kind::ExternalIp),
    ],
    tenant_user_may_write: false,
    needs_fabric_finalizer: true,
    reconciled: true,
};

/// Checks a NATGateway: VN and external IP named.
pub fn validate(n: &pb::NatGateway) -> Result<(), Invalid> {
    metadata(n.metadata.as_ref())?;
    let spec = n.spec.clone().unwrap_or_default();
    if spec.virtual_network.is_empty() {
        return Err(Invalid::new(
            "spec.virtual_network",
            "virtual_network is required",
        ));
    }
    if spec.external_ip.is_empty() {
        return Err(Invalid::new("spec.external_ip", "external_ip is required"));
    }
    Ok(())
}
