//! BareMetalInstanceType (provider catalog, private API; tenants read it): network ports and the
//! HostTypes serving the type. The HostTypes are stored as ids and each must have every port as
//! an interface of the same role; they may change (re-checked), the hardware may not. The type
//! cannot be deleted while a BareMetalInstance is of it.

use osac_model::{Kind, kinds, pb};
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::object::{body_of, to_json};
use crate::request::RequestCtx;

pub async fn create(cx: &mut RequestCtx<'_>, mut t: pb::BareMetalInstanceType) -> ApiResult<Value> {
    kinds::baremetal_instance_type::validate(&t)?;
    resolve_host_types(cx, &mut t).await?;
    Ok(body_of(&to_json(&t)?))
}

/// Title, description and the serving HostTypes may change (re-resolved and re-checked); the
/// hardware is checked immutable by the update rules.
pub async fn update(cx: &mut RequestCtx<'_>, t: &mut pb::BareMetalInstanceType) -> ApiResult<()> {
    kinds::baremetal_instance_type::validate(t)?;
    resolve_host_types(cx, t).await
}

/// Resolves `spec.host_types` to ids (locked: a HostType cannot vanish under the type) and
/// checks that each is a bare-metal HostType with every network port as an interface.
async fn resolve_host_types(
    cx: &mut RequestCtx<'_>,
    t: &mut pb::BareMetalInstanceType,
) -> ApiResult<()> {
    let spec = t.spec.get_or_insert_with(Default::default);
    let ports = spec.hardware.clone().unwrap_or_default().network_ports;
    let mut ids = Vec::with_capacity(spec.host_types.len());
    for (i, key) in spec.host_types.iter().enumerate() {
        let field = format!("spec.host_types[{i}]");
        let rec = super::resolve(cx, Kind::HostType, &field, key, true).await?;
        if ids.contains(&rec.id) {
            return Err(ApiError::invalid(format!(
                "{field}: HostType '{}' is listed twice",
                rec.label()
            )));
        }
        let ht: pb::HostType = rec.decode()?;
        kinds::baremetal_instance_type::check_served_by(&ports, &ht, &field, rec.label())?;
        ids.push(rec.id.clone());
    }
    spec.host_types = ids;
    Ok(())
}
