//! NATGateway (outbound SNAT): one per VirtualNetwork, its ExternalIP free (the controller waits
//! for the network to be READY and the address to be ALLOCATED).

use osac_model::{Kind, kinds, pb, validate};
use serde_json::Value;

use crate::error::{ApiError, ApiResult, Code};
use crate::object::{body_of, to_json};
use crate::request::RequestCtx;

pub async fn create(cx: &mut RequestCtx<'_>, mut n: pb::NatGateway) -> ApiResult<Value> {
    kinds::nat_gateway::validate(&n)?;
    let spec = n.spec.get_or_insert_with(Default::default);
    let vn = super::parent_network(cx, &spec.virtual_network).await?;
    for r in cx.tx.referrers(&vn.id).await? {
        if r.source_kind == Kind::NatGateway
            && let Some(existing) = cx.tx.get(&r.source).await?
        {
            return Err(ApiError::new(
                Code::AlreadyExists,
                format!(
                    "VirtualNetwork '{}' already has NATGateway '{}' (one per network)",
                    vn.label(),
                    existing.label()
                ),
            ));
        }
    }
    let eip = super::external_ip::require_free(cx, &spec.external_ip).await?;
    require_same_class(cx, &vn, &eip).await?;
    spec.virtual_network = vn.id.clone();
    spec.external_ip = eip.id.clone();
    Ok(body_of(&to_json(&n)?))
}

pub fn update(n: &pb::NatGateway) -> ApiResult<()> {
    validate::metadata(n.metadata.as_ref())?;
    Ok(())
}

/// The gateway's address must come from a pool of the VirtualNetwork's NetworkClass: that
/// class's fabric manager allocated it and is the one that can translate to it.
async fn require_same_class(
    cx: &mut RequestCtx<'_>,
    vn: &osac_store::Record,
    eip: &osac_store::Record,
) -> ApiResult<()> {
    let pool_id = eip
        .body
        .pointer("/spec/pool")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(pool) = cx.tx.get(pool_id).await? else {
        return Ok(());
    };
    let default_class = super::network_class::resolve_class(cx, "").await?.id;
    let vn_class = super::network_class::class_of(vn, &default_class).to_string();
    let pool_class = super::network_class::class_of(&pool, &default_class).to_string();
    if pool_class == vn_class {
        return Ok(());
    }
    let mut names = Vec::with_capacity(2);
    for id in [&pool_class, &vn_class] {
        names.push(match cx.tx.get(id).await? {
            Some(class) => class.label().to_string(),
            None => id.clone(),
        });
    }
    let (pool_class, vn_class) = (&names[0], &names[1]);
    Err(ApiError::precondition(format!(
        "spec.external_ip: ExternalIP '{}' comes from ExternalIPPool '{}' of NetworkClass '{pool_class}', but VirtualNetwork '{}' is of NetworkClass '{vn_class}': use an ExternalIP of a pool of the network's class",
        eip.label(),
        pool.label(),
        vn.label()
    )))
}
