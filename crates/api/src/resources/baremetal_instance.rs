//! BareMetalInstance: placeholder until the workloads issue implements its rules.

use osac_store::Record;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::service::Cx;

pub async fn create(_cx: &mut Cx<'_>, _obj: &Value) -> ApiResult<Value> {
    Err(ApiError::precondition(
        "BareMetalInstance is not supported yet",
    ))
}

pub async fn update(_cx: &mut Cx<'_>, _current: &Record, _body: &mut Value) -> ApiResult<()> {
    Err(ApiError::precondition(
        "BareMetalInstance is not supported yet",
    ))
}
