//! SecurityGroup: rules validated (protocol, ports only for TCP/UDP, a peer CIDR); the rules are
//! mutable and re-programmed by the controller, the VirtualNetwork is not. The VirtualNetwork's
//! row is locked while the group is created, so a concurrent delete of the network either sees
//! the group (and is refused) or makes this create fail: never a group on a deleted network.

use osac_model::{kinds, pb};
use serde_json::Value;

use crate::error::ApiResult;
use crate::object::{body_of, to_json};
use crate::request::RequestCtx;

pub async fn create(cx: &mut RequestCtx<'_>, mut sg: pb::SecurityGroup) -> ApiResult<Value> {
    kinds::security_group::validate(&sg)?;
    let spec = sg.spec.get_or_insert_with(Default::default);
    let vn = super::parent_network(cx, &spec.virtual_network).await?;
    spec.virtual_network = vn.id.clone();
    Ok(body_of(&to_json(&sg)?))
}

pub fn update(sg: &pb::SecurityGroup) -> ApiResult<()> {
    kinds::security_group::validate(sg)?;
    Ok(())
}
