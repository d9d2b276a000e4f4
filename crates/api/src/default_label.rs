//! A tenant's own defaults: a tenant-admin may label its own VirtualNetwork, Subnets and
//! SecurityGroup `osac.openshift.io/default: "true"` (the upgrade path of tenants onboarded
//! before default networking, or that prefer their own objects). At most one default per kind
//! in a tenant, and for subnets one per IP family (a dual-stack subnet counts for both); the
//! value is "true" or nothing. Two writers labelling at once are serialised on a named lock of
//! the tenant and kind, so the second sees the first's default and is refused.

use osac_model::Kind;
use osac_model::defaults::DEFAULT_LABEL;
use osac_store::{ListQuery, Record, Tx};

use crate::auth::{Caller, Role};
use crate::error::{ApiError, ApiResult};

/// The kinds whose objects a tenant-admin may label as the tenant's default.
pub const SELF_DEFAULT_KINDS: [Kind; 3] = [Kind::VirtualNetwork, Kind::Subnet, Kind::SecurityGroup];

/// Whether a client may set reserved label `key` on an object of `kind` (the rules of the
/// value, role and uniqueness are [`check`]'s).
pub fn client_settable(kind: Kind, key: &str) -> bool {
    key == DEFAULT_LABEL && SELF_DEFAULT_KINDS.contains(&kind)
}

fn field() -> String {
    format!("metadata.labels[\"{DEFAULT_LABEL}\"]")
}

/// The IP families a default of `rec`'s kind is for: subnets per family, other kinds one.
fn families(rec: &Record) -> Vec<&'static str> {
    if rec.kind != Kind::Subnet {
        return vec![""];
    }
    let set = |f: &str| {
        osac_model::refs::string_at(&rec.body, &format!("spec.{f}")).is_some_and(|s| !s.is_empty())
    };
    let mut out = Vec::new();
    if set("ipv4_cidr") {
        out.push("IPv4 ");
    }
    if set("ipv6_cidr") {
        out.push("IPv6 ");
    }
    out
}

/// Checks the default label of `rec` as written by `caller` (`previous`: the stored object of
/// an update). Call inside the write's transaction, after the row is written.
pub async fn check(
    tx: &mut dyn Tx,
    caller: &Caller,
    rec: &Record,
    previous: Option<&Record>,
) -> ApiResult<()> {
    let Some(value) = rec.labels.get(DEFAULT_LABEL) else {
        return Ok(());
    };
    if previous.is_some_and(|p| p.labels.get(DEFAULT_LABEL) == Some(value)) {
        return Ok(());
    }
    if !client_settable(rec.kind, DEFAULT_LABEL) {
        return Ok(());
    }
    if value != "true" {
        return Err(ApiError::invalid(format!(
            "{}: the only value is \"true\" (got \"{value}\")",
            field()
        )));
    }
    if caller.role != Role::TenantAdmin && !caller.is_provider() {
        return Err(ApiError::denied(format!(
            "{}: only a tenant-admin may mark the tenant's defaults",
            field()
        )));
    }
    tx.lock_name(&format!("osac-default:{}:{}", rec.kind, rec.tenant))
        .await?;
    let others = tx
        .list(&ListQuery {
            tenant: Some(rec.tenant.clone()),
            filter: format!("this.metadata.labels[\"{DEFAULT_LABEL}\"] == \"true\""),
            ..ListQuery::all(rec.kind)
        })
        .await?;
    let mine = families(rec);
    for other in others.items.iter().filter(|o| o.id != rec.id) {
        if let Some(family) = families(other).into_iter().find(|f| mine.contains(f)) {
            return Err(ApiError::precondition(format!(
                "{}: {} '{}' is already the default {family}{} of tenant '{}' (at most one{})",
                field(),
                rec.kind,
                other.label(),
                rec.kind.display_name(),
                rec.tenant,
                if rec.kind == Kind::Subnet {
                    " per IP family"
                } else {
                    ""
                }
            )));
        }
    }
    Ok(())
}
