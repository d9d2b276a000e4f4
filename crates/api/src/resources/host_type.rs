//! HostType: a class of hosts and its ordered interfaces. Hosts and workloads depend on the
//! interfaces (hosts list a MAC per interface, attachments and node sets name them), so the
//! interfaces cannot change while anything uses the type.

use osac_model::{Kind, kinds, pb};
use osac_store::Record;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::object::{body_of, to_json};
use crate::request::RequestCtx;

pub async fn create(_cx: &mut RequestCtx<'_>, ht: pb::HostType) -> ApiResult<Value> {
    kinds::host_type::validate(&ht)?;
    Ok(body_of(&to_json(&ht)?))
}

pub async fn update(cx: &mut RequestCtx<'_>, current: &Record, ht: &pb::HostType) -> ApiResult<()> {
    kinds::host_type::validate(ht)?;
    let old: pb::HostType = current.decode()?;
    if old.interfaces == ht.interfaces {
        return Ok(());
    }
    // Descriptions are documentation; names, roles and order are what others rely on.
    let shape = |t: &pb::HostType| {
        t.interfaces
            .iter()
            .map(|i| (i.name.clone(), i.role.clone()))
            .collect::<Vec<_>>()
    };
    if shape(&old) == shape(ht) {
        return Ok(());
    }
    for r in cx.tx.referrers(&current.id).await? {
        if !matches!(
            r.source_kind,
            Kind::Host | Kind::BareMetalInstance | Kind::Cluster | Kind::BareMetalInstanceType
        ) {
            continue;
        }
        if let Some(user) = cx.tx.get(&r.source).await? {
            return Err(ApiError::precondition(format!(
                "interfaces: the interfaces of HostType '{}' cannot change while {} '{}' uses it",
                current.label(),
                user.kind,
                user.label()
            )));
        }
    }
    Ok(())
}
