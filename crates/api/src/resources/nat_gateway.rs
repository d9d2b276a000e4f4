//! NATGateway (outbound SNAT): one per VirtualNetwork, its ExternalIP free (the controller waits
//! for the network to be READY and the address to be ALLOCATED).

use osac_model::{Kind, pb, validate};
use serde_json::Value;

use crate::error::{ApiError, ApiResult, Code};
use crate::object::{body_of, parse, to_json};
use crate::service::Cx;

pub async fn create(cx: &mut Cx<'_>, obj: &Value) -> ApiResult<Value> {
    let mut n: pb::NatGateway = parse(Kind::NatGateway, obj)?;
    validate::nat_gateway(&n)?;
    let spec = n.spec.get_or_insert_with(Default::default);
    let vn = super::resolve(
        cx,
        Kind::VirtualNetwork,
        "spec.virtual_network",
        &spec.virtual_network,
        true,
    )
    .await?;
    super::require_not_failed(&vn, "spec.virtual_network")?;
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
    spec.virtual_network = vn.id.clone();
    spec.external_ip = eip.id.clone();
    Ok(body_of(&to_json(&n)?))
}

pub fn update(body: &mut Value) -> ApiResult<()> {
    let n: pb::NatGateway = parse(Kind::NatGateway, body)?;
    validate::metadata(n.metadata.as_ref())?;
    Ok(())
}
