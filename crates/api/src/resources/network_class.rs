//! NetworkClass: managers must be registered for their role; capabilities are the intersection
//! of what they declare minus `disable_capabilities`; defaults must fit those capabilities;
//! exactly one class is the default.

use osac_backends::{Capability, Role};
use osac_model::{Kind, kinds, pb};
use osac_store::ListQuery;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::object::{body_of, to_json};
use crate::request::RequestCtx;

/// VIP block size used when a class does not say.
pub const DEFAULT_VIP_PREFIX: i32 = 28;

pub async fn create(cx: &mut RequestCtx<'_>, mut nc: pb::NetworkClass) -> ApiResult<Value> {
    complete(cx, &mut nc)?;
    let existing = cx.tx.list(&ListQuery::all(Kind::NetworkClass)).await?;
    if existing.items.is_empty() {
        nc.is_default = true;
    }
    if nc.is_default {
        unset_other_defaults(cx, None).await?;
    }
    Ok(body_of(&to_json(&nc)?))
}

pub async fn update(
    cx: &mut RequestCtx<'_>,
    current: &osac_store::Record,
    nc: &mut pb::NetworkClass,
) -> ApiResult<()> {
    let was_default = current
        .body
        .get("is_default")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    complete(cx, nc)?;
    if was_default && !nc.is_default {
        return Err(ApiError::precondition(
            "is_default: exactly one NetworkClass is the default; set is_default on another class instead",
        ));
    }
    if nc.is_default && !was_default {
        unset_other_defaults(cx, Some(&current.id)).await?;
    }
    nc.status = current.decode::<pb::NetworkClass>()?.status;
    Ok(())
}

/// Validates and fills the computed fields (capabilities, default VIP prefix).
fn complete(cx: &RequestCtx<'_>, nc: &mut pb::NetworkClass) -> ApiResult<()> {
    kinds::network_class::validate(nc)?;
    cx.registry
        .check(&nc.fabric_manager, Role::Fabric)
        .map_err(|e| ApiError::invalid(format!("fabric_manager: {e}")))?;
    let k8s = (!nc.k8s_manager.is_empty()).then_some(nc.k8s_manager.as_str());
    if let Some(k) = k8s {
        cx.registry
            .check(k, Role::K8s)
            .map_err(|e| ApiError::invalid(format!("k8s_manager: {e}")))?;
    }
    let declared = cx
        .registry
        .class_capabilities(&nc.fabric_manager, k8s)
        .map_err(|e| ApiError::invalid(e.to_string()))?;
    let spec = nc.spec.get_or_insert_with(Default::default);
    let off = spec.disable_capabilities.unwrap_or_default();
    let has = |c: Capability, disabled: bool| declared.contains(&c) && !disabled;
    let caps = pb::Capabilities {
        supports_ipv4: has(Capability::Ipv4, off.supports_ipv4),
        supports_ipv6: has(Capability::Ipv6, off.supports_ipv6),
        supports_dual_stack: has(Capability::DualStack, off.supports_dual_stack),
        dpu_support: has(Capability::DpuSupport, off.dpu_support),
    };
    if spec.vip_prefix_length == 0 {
        spec.vip_prefix_length = DEFAULT_VIP_PREFIX;
    }
    if let Some(d) = &spec.defaults {
        let v4 = !d.virtual_network_ipv4_cidr.is_empty() || !d.subnet_ipv4_cidr.is_empty();
        let v6 = !d.virtual_network_ipv6_cidr.is_empty() || !d.subnet_ipv6_cidr.is_empty();
        let need = |ok: bool, field: &str, what: &str| {
            if ok {
                Ok(())
            } else {
                Err(ApiError::invalid(format!(
                    "{field}: {what} defaults need the {what} capability, which this class lacks"
                )))
            }
        };
        if v4 {
            need(
                caps.supports_ipv4,
                "spec.defaults.virtual_network_ipv4_cidr",
                "IPv4",
            )?;
        }
        if v6 {
            need(
                caps.supports_ipv6,
                "spec.defaults.virtual_network_ipv6_cidr",
                "IPv6",
            )?;
        }
        if !d.virtual_network_ipv4_cidr.is_empty() && !d.virtual_network_ipv6_cidr.is_empty() {
            need(
                caps.supports_dual_stack,
                "spec.defaults.virtual_network_ipv6_cidr",
                "dual-stack",
            )?;
        }
    }
    nc.capabilities = Some(caps);
    Ok(())
}

async fn unset_other_defaults(cx: &mut RequestCtx<'_>, keep: Option<&str>) -> ApiResult<()> {
    let page = cx.tx.list(&ListQuery::all(Kind::NetworkClass)).await?;
    for listed in page.items {
        if Some(listed.id.as_str()) == keep || listed.deleted_at.is_some() {
            continue;
        }
        if listed.body.get("is_default").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        // Re-read under the row lock: the controller may have written its status since the
        // list (an unlocked read would make this write fail with a version conflict).
        let Some(mut rec) = cx.tx.lock(&listed.id).await? else {
            continue;
        };
        if rec.body.get("is_default").and_then(Value::as_bool) == Some(true) {
            if let Some(o) = rec.body.as_object_mut() {
                o.remove("is_default");
            }
            cx.tx.update(&rec).await?;
        }
    }
    Ok(())
}

/// The NetworkClass id a VirtualNetwork or ExternalIPPool record belongs to
/// (`spec.network_class`; records stored without one belong to `default_class`).
pub fn class_of<'a>(rec: &'a osac_store::Record, default_class: &'a str) -> &'a str {
    rec.body
        .pointer("/spec/network_class")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .unwrap_or(default_class)
}

/// The default class (or the named one) for a new VirtualNetwork; it must be READY.
pub async fn resolve_for_vn(cx: &mut RequestCtx<'_>, key: &str) -> ApiResult<osac_store::Record> {
    let rec = resolve_class(cx, key).await?;
    super::require_state(&rec, "spec.network_class", "NETWORK_CLASS_STATE_READY")?;
    Ok(rec)
}

/// The default class (`key` empty) or the named one, whatever its state.
pub async fn resolve_class(cx: &mut RequestCtx<'_>, key: &str) -> ApiResult<osac_store::Record> {
    let rec = if key.is_empty() {
        cx.tx
            .list_items(&ListQuery {
                filter: "this.is_default == true".into(),
                ..ListQuery::all(Kind::NetworkClass)
            })
            .await?
            .into_iter()
            .find(|r| r.deleted_at.is_none())
            .ok_or_else(|| {
                ApiError::precondition(
                    "spec.network_class: no default NetworkClass is configured; ask your provider",
                )
            })?
    } else {
        super::resolve(cx, Kind::NetworkClass, "spec.network_class", key, false).await?
    };
    Ok(rec)
}
