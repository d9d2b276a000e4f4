//! Tenant: a customer of the cloud; its name is its identity in tokens and objects.

use crate::kinds::KindSpec;
use crate::labels::check_name;
use crate::validate::metadata;
use crate::{Invalid, Scope, pb};

/// The facts about Tenants.
pub const SPEC: KindSpec = KindSpec {
    state_prefix: Some("TENANT_STATE"),
    needs_fabric_finalizer: true,
    ..KindSpec::new("Tenant", "tenants", "tenant", "tenants", Scope::Provider)
};

/// Checks a Tenant: a name is required (it is the tenant's identity in tokens and objects).
pub fn validate(t: &pb::Tenant) -> Result<(), Invalid> {
    metadata(t.metadata.as_ref())?;
    if t.metadata.as_ref().is_none_or(|m| m.name.is_empty()) {
        return Err(Invalid::new("metadata.name", "a tenant needs a name"));
    }
    for (i, d) in t
        .spec
        .as_ref()
        .map(|s| s.domains.as_slice())
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        if d.is_empty()
            || d.split('.')
                .any(|p| check_name("", p).is_err() || p.is_empty())
        {
            return Err(Invalid::new(
                format!("spec.domains[{i}]"),
                format!("'{d}' is not a DNS domain"),
            ));
        }
    }
    Ok(())
}
