//! Tenant: the unit of isolation; its name is the tenant identity in tokens and objects.

use osac_model::{Kind, pb, validate};
use osac_store::{ListQuery, Record, Tx};
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::object::{body_of, parse, to_json};
use crate::service::Cx;

pub async fn create(_cx: &mut Cx<'_>, obj: &Value) -> ApiResult<Value> {
    let t: pb::Tenant = parse(Kind::Tenant, obj)?;
    validate::tenant(&t)?;
    Ok(body_of(&to_json(&t)?))
}

pub fn update(current: &Record, body: &mut Value) -> ApiResult<()> {
    let mut t: pb::Tenant = parse(Kind::Tenant, body)?;
    // The body carries no metadata here; the (unchangeable) name is the stored one.
    t.metadata = Some(pb::Metadata {
        name: current.name.clone().unwrap_or_default(),
        ..Default::default()
    });
    validate::tenant(&t)?;
    Ok(())
}

/// A tenant's name is its identity in tokens and in every object it owns: it never changes.
pub fn check_rename(current: &Record, new_name: Option<&str>) -> ApiResult<()> {
    if current.name.as_deref() != new_name {
        return Err(ApiError::invalid(format!(
            "metadata.name: a tenant's name is its identity and cannot change (current '{}')",
            current.label()
        )));
    }
    Ok(())
}

/// A tenant is deleted only when it owns nothing (its objects are deleted first).
pub async fn check_delete(cx: &mut Cx<'_>, rec: &Record) -> ApiResult<()> {
    let Some(name) = rec.name.as_deref() else {
        return Ok(());
    };
    for kind in Kind::ALL
        .into_iter()
        .filter(|k| k.scope() == osac_model::Scope::Tenant)
    {
        let page = cx
            .tx
            .list(&ListQuery {
                tenant: Some(name.to_string()),
                limit: 1,
                ..ListQuery::all(kind)
            })
            .await?;
        if let Some(obj) = page.items.first() {
            return Err(ApiError::precondition(format!(
                "Tenant '{name}' cannot be deleted: it still owns {} {} (e.g. '{}')",
                page.total,
                kind.collection(),
                obj.label()
            )));
        }
    }
    Ok(())
}

/// Fails with NOT_FOUND unless a live tenant of that name exists.
pub async fn require_exists(tx: &mut dyn Tx, name: &str) -> ApiResult<()> {
    match tx.find_by_name(Kind::Tenant, "", name).await? {
        Some(t) if t.deleted_at.is_none() => Ok(()),
        _ => Err(ApiError::not_found(format!(
            "tenant: Tenant '{name}' does not exist"
        ))),
    }
}
