//! HostType: a provider description of a machine model: its interfaces and their roles
//! (a type without interfaces describes virtual machines).

use crate::kinds::KindSpec;
use crate::labels::check_name;
use crate::validate::metadata;
use crate::{Invalid, Scope, pb};

/// The facts about HostTypes. They have no state: usable once stored.
pub const SPEC: KindSpec = KindSpec {
    aliases: &["ht"],
    ..KindSpec::new(
        "HostType",
        "host_types",
        "hosttype",
        "hosttypes",
        Scope::Provider,
    )
};

/// Checks a HostType: interface names unique and DNS-like, roles known.
pub fn validate(ht: &pb::HostType) -> Result<(), Invalid> {
    metadata(ht.metadata.as_ref())?;
    let mut seen = std::collections::HashSet::new();
    for (i, iface) in ht.interfaces.iter().enumerate() {
        check_name(&format!("interfaces[{i}].name"), &iface.name)?;
        if iface.name.is_empty() {
            return Err(Invalid::new(
                format!("interfaces[{i}].name"),
                "interface name is required",
            ));
        }
        if !seen.insert(iface.name.as_str()) {
            return Err(Invalid::new(
                format!("interfaces[{i}].name"),
                format!(
                    "interface '{}' appears twice; names are unique in a host type",
                    iface.name
                ),
            ));
        }
        if !["fabric", "management", "storage", "lifecycle"].contains(&iface.role.as_str()) {
            return Err(Invalid::new(
                format!("interfaces[{i}].role"),
                format!(
                    "role '{}' is not one of fabric, management, storage, lifecycle",
                    iface.role
                ),
            ));
        }
    }
    Ok(())
}

/// Interface roles of a HostType that tenants may never attach.
pub const LIFECYCLE_ROLE: &str = "lifecycle";

/// The first `fabric` interface of a host type (the default attachment and cluster interface).
pub fn first_fabric_interface(ht: &pb::HostType) -> Option<&str> {
    ht.interfaces
        .iter()
        .find(|i| i.role == "fabric")
        .map(|i| i.name.as_str())
}

/// A bare-metal host type for tests: a management, two fabric and a lifecycle interface.
#[cfg(test)]
pub(crate) fn bare_metal_sample() -> pb::HostType {
    let iface = |name: &str, role: &str| pb::HostTypeInterface {
        name: name.into(),
        role: role.into(),
        description: String::new(),
    };
    pb::HostType {
        interfaces: vec![
            iface("mgmt-0", "management"),
            iface("data-0", "fabric"),
            iface("data-1", "fabric"),
            iface("bmc-0", "lifecycle"),
        ],
        ..Default::default()
    }
}
