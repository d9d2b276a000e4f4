//! VirtualNetwork: CIDRs valid and allowed by its class's capabilities; the class (default when
//! omitted) is stored resolved, so later class changes never move an existing network.

use osac_model::{kinds, pb, validate};
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::object::{body_of, to_json};
use crate::request::RequestCtx;

pub async fn create(cx: &mut RequestCtx<'_>, mut vn: pb::VirtualNetwork) -> ApiResult<Value> {
    let cidrs = kinds::virtual_network::validate(&vn)?;
    let spec = vn.spec.get_or_insert_with(Default::default);
    let class = super::network_class::resolve_for_vn(cx, &spec.network_class).await?;
    let caps = class
        .decode::<pb::NetworkClass>()?
        .capabilities
        .unwrap_or_default();
    let denied = |field: &str, what: &str| {
        ApiError::invalid(format!(
            "{field}: NetworkClass '{}' does not support {what}",
            class.label()
        ))
    };
    if cidrs.v4.is_some() && !caps.supports_ipv4 {
        return Err(denied("spec.ipv4_cidr", "IPv4"));
    }
    if cidrs.v6.is_some() && !caps.supports_ipv6 {
        return Err(denied("spec.ipv6_cidr", "IPv6"));
    }
    if cidrs.is_dual_stack() && !caps.supports_dual_stack {
        return Err(denied("spec.ipv6_cidr", "dual-stack networks"));
    }
    let derived = pb::VirtualNetworkCapabilities {
        enable_ipv4: cidrs.v4.is_some(),
        enable_ipv6: cidrs.v6.is_some(),
        enable_dual_stack: cidrs.is_dual_stack(),
    };
    if let Some(asked) = &spec.capabilities
        && *asked != pb::VirtualNetworkCapabilities::default()
        && *asked != derived
    {
        return Err(ApiError::invalid(
            "spec.capabilities: must match the CIDRs given (enable_ipv4 with ipv4_cidr, enable_ipv6 with ipv6_cidr, enable_dual_stack with both)",
        ));
    }
    spec.capabilities = Some(derived);
    spec.network_class = class.id.clone();
    Ok(body_of(&to_json(&vn)?))
}

pub fn update(vn: &pb::VirtualNetwork) -> ApiResult<()> {
    validate::metadata(vn.metadata.as_ref())?;
    Ok(())
}
