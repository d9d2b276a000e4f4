//! Tenant: the unit of isolation. Its id is its identity in tokens and streams; its name labels
//! every object it owns (`metadata.tenant`), and only one tenant of a name exists at a time.
//! Creating one creates its default networking in the same transaction (all of it exists or
//! none of it does); deleting
//! one is refused while it has workloads, then the controller removes what it owns.

use osac_model::defaults::onboarding_objects;
use osac_model::{Kind, kinds, pb};
use osac_store::{ListQuery, Record, Tx};
use serde_json::Value;

use super::insert_new;
use crate::error::{ApiError, ApiResult};
use crate::object::{body_of, to_json};
use crate::request::RequestCtx;
use crate::typed::Object;

pub async fn create(_cx: &mut RequestCtx<'_>, t: pb::Tenant) -> ApiResult<Value> {
    kinds::tenant::validate(&t)?;
    Ok(body_of(&to_json(&t)?))
}

pub fn update(current: &Record, mut t: pb::Tenant) -> ApiResult<()> {
    // The body carries no metadata here; the (unchangeable) name is the stored one.
    t.metadata = Some(pb::Metadata {
        name: current.name.clone().unwrap_or_default(),
        ..Default::default()
    });
    kinds::tenant::validate(&t)?;
    Ok(())
}

/// A tenant's name labels every object it owns: it never changes.
pub fn check_rename(current: &Record, new_name: Option<&str>) -> ApiResult<()> {
    if current.name.as_deref() != new_name {
        return Err(ApiError::invalid(format!(
            "metadata.name: a tenant's name is its identity and cannot change (current '{}')",
            current.label()
        )));
    }
    Ok(())
}

/// A tenant is deleted only when it has no workloads; its networking (defaults and anything
/// else it owns) is then removed by the tenant controller, consumers first.
pub async fn check_delete(cx: &mut RequestCtx<'_>, rec: &Record) -> ApiResult<()> {
    let Some(name) = rec.name.as_deref() else {
        return Ok(());
    };
    for kind in Kind::WORKLOADS {
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
                "Tenant '{name}' cannot be deleted: it still has {} {} (e.g. '{}'{}); delete its workloads first",
                page.total,
                kind.collection(),
                obj.label(),
                if obj.deleted_at.is_some() {
                    ", being deleted"
                } else {
                    ""
                }
            )));
        }
    }
    Ok(())
}

/// The default NetworkClass, if the deployment has one (a tenant without one gets no defaults).
async fn default_class(tx: &mut dyn Tx) -> ApiResult<Option<Record>> {
    let page = tx
        .list(&ListQuery {
            filter: "this.is_default == true".into(),
            ..ListQuery::all(Kind::NetworkClass)
        })
        .await?;
    Ok(page.items.into_iter().find(|r| r.deleted_at.is_none()))
}

/// Creates the tenant's default networking in the tenant's transaction. Any
/// failure (e.g. no pool capacity for the NAT address) fails the tenant's creation too; the
/// error names the default object.
pub async fn onboard(cx: &mut RequestCtx<'_>, tenant: &Record) -> ApiResult<()> {
    let Some(name) = tenant.name.clone() else {
        return Ok(());
    };
    let Some(class) = default_class(cx.tx).await? else {
        return Ok(());
    };
    let nc: pb::NetworkClass = class.decode()?;
    let Some(defaults) = nc.spec.and_then(|s| s.defaults) else {
        return Ok(());
    };
    let outer = std::mem::replace(&mut cx.tenant, name);
    let mut result = Ok(());
    let mut made = Vec::new();
    for obj in onboarding_objects(&class.id, &defaults) {
        let inserted = match Object::from_json(obj.kind, obj.body) {
            Ok(object) => insert_new(cx, object).await.map(|_| ()),
            Err(e) => Err(e),
        };
        if let Err(e) = inserted {
            result = Err(e.context(format!(
                "tenant default networking: {} '{}'",
                obj.kind, obj.name
            )));
            break;
        }
        made.push(format!("{} '{}'", obj.kind, obj.name));
    }
    cx.tenant = outer;
    result?;
    let message = format!(
        "creating from NetworkClass '{}': {}",
        class.label(),
        made.join(", ")
    );
    let event = osac_store::events::for_record(tenant, false, "CreatingDefaultNetworking", message);
    osac_store::events::record(cx.tx, event).await?;
    Ok(())
}

/// Share-locks the row of the live tenant of that name until the transaction ends
/// (PostgreSQL `FOR SHARE`): a create in the tenant is ordered with the tenant's deletion (which
/// locks the row exclusively, so it waits for the creates in flight and sees their objects),
/// while creates of one tenant do not wait for each other — their quota counts are ordered by
/// the quota's own lock (`quota::check_create`). NOT_FOUND when there is no such tenant or it
/// is being deleted.
pub async fn lock_live(tx: &mut dyn Tx, name: &str) -> ApiResult<Record> {
    let gone = || ApiError::not_found(format!("tenant: Tenant '{name}' does not exist"));
    match tx.lock_shared_by_name(Kind::Tenant, "", name).await? {
        Some(t) if t.deleted_at.is_none() => Ok(t),
        Some(_) => Err(ApiError::precondition(format!(
            "tenant: Tenant '{name}' is being deleted"
        ))),
        None => Err(gone()),
    }
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
