//! HostType: a class of hosts and its ordered interfaces.

use osac_model::{Kind, pb, validate};
use serde_json::Value;

use crate::error::ApiResult;
use crate::object::{body_of, parse, to_json};
use crate::service::Cx;

pub async fn create(_cx: &mut Cx<'_>, obj: &Value) -> ApiResult<Value> {
    let ht: pb::HostType = parse(Kind::HostType, obj)?;
    validate::host_type(&ht)?;
    Ok(body_of(&to_json(&ht)?))
}

pub fn update(body: &mut Value) -> ApiResult<()> {
    let ht: pb::HostType = parse(Kind::HostType, body)?;
    validate::host_type(&ht)?;
    Ok(())
}
