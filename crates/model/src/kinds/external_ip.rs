//! ExternalIP: a public address a tenant allocates from an ExternalIPPool.

use crate::kinds::KindSpec;
use crate::net::Family;
use crate::refs::RefField;
use crate::validate::metadata;
use crate::{Invalid, Kind, Scope, pb};

/// The facts about ExternalIPs. Tenant users may allocate them for their workloads.
pub const SPEC: KindSpec = KindSpec {
    aliases: &["eip", "eips"],
    state_prefix: Some("EXTERNAL_IP_STATE"),
    immutable_fields: &["spec.pool", "spec.ip_family"],
    references: &[RefField::to("spec.pool", Kind::ExternalIpPool)],
    tenant_user_may_write: true,
    needs_fabric_finalizer: true,
    ..KindSpec::new(
        "ExternalIP",
        "external_ips",
        "externalip",
        "externalips",
        Scope::Tenant,
    )
};

/// Checks an ExternalIP and returns the family it asks for when no pool is named (default IPv4).
pub fn validate(e: &pb::ExternalIp) -> Result<Family, Invalid> {
    metadata(e.metadata.as_ref())?;
    match e.spec.as_ref().map(|s| s.ip_family).unwrap_or_default() {
        0 | 1 => Ok(Family::V4),
        2 => Ok(Family::V6),
        n => Err(Invalid::new(
            "spec.ip_family",
            format!("{n} is not a valid IpFamily"),
        )),
    }
}
