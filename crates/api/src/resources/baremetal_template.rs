//! BareMetalTemplate (provider catalog item, private API; tenants read it): a HostType plus
//! catalog text and default template parameters. `host_type` is stored as an id and never
//! changes; the template cannot be deleted while a BareMetalInstance references it.

use osac_model::{Kind, pb};
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::object::{body_of, to_json};
use crate::request::RequestCtx;

const HOST_TYPE: &str = "spec.host_type";

pub async fn create(cx: &mut RequestCtx<'_>, mut t: pb::BareMetalTemplate) -> ApiResult<Value> {
    let spec = t.spec.get_or_insert_with(Default::default);
    if spec.host_type.is_empty() {
        return Err(ApiError::invalid(format!(
            "{HOST_TYPE}: host_type is required (the HostType instances of the template run on)"
        )));
    }
    let ht_rec = super::resolve(cx, Kind::HostType, HOST_TYPE, &spec.host_type, true).await?;
    let ht: pb::HostType = ht_rec.decode()?;
    if ht.interfaces.is_empty() {
        return Err(ApiError::invalid(format!(
            "{HOST_TYPE}: HostType '{}' has no interfaces (a virtual-machine type); a bare-metal template needs a bare-metal type",
            ht_rec.label()
        )));
    }
    spec.host_type = ht_rec.id.clone();
    t.status = None;
    Ok(body_of(&to_json(&t)?))
}

/// Title, description and the default parameters may change (they apply to new instances);
/// the HostType is checked immutable by the update rules (metadata by the service).
pub fn update(_: &pb::BareMetalTemplate) -> ApiResult<()> {
    Ok(())
}
