//! Subnet: inside its VirtualNetwork (which may still be being provisioned: the controller waits
//! for it; a FAILED one is refused), and never overlapping a sibling. The
//! VN row is locked while siblings are checked, so concurrent creates cannot both win.

use osac_model::validate::{DualCidrs, subnet_within};
use osac_model::{Kind, kinds, net, pb, validate};
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::object::{body_of, to_json};
use crate::request::RequestCtx;

pub async fn create(cx: &mut RequestCtx<'_>, mut s: pb::Subnet) -> ApiResult<Value> {
    let cidrs = kinds::subnet::validate(&s)?;
    let spec = s.spec.get_or_insert_with(Default::default);
    let vn = super::parent_network(cx, &spec.virtual_network).await?;
    let vn_spec = vn.decode::<pb::VirtualNetwork>()?.spec.unwrap_or_default();
    let vn_cidrs = DualCidrs::parse_optional("spec", &vn_spec.ipv4_cidr, &vn_spec.ipv6_cidr)?;
    subnet_within(
        &cidrs,
        &vn_cidrs,
        "spec",
        &format!("VirtualNetwork '{}'", vn.label()),
    )?;
    // The siblings are those referencing the locked VN now; only their CIDRs are read, which
    // never change once stored, so a kept copy will do (no round trip per sibling).
    for r in cx.tx.referrers(&vn.id).await? {
        if r.source_kind != Kind::Subnet {
            continue;
        }
        let Some(sibling) = cx.tx.get_stable(&r.source).await? else {
            continue;
        };
        let sib = sibling.decode::<pb::Subnet>()?.spec.unwrap_or_default();
        let theirs = DualCidrs::parse_optional("spec", &sib.ipv4_cidr, &sib.ipv6_cidr)?;
        if let Some((m, o)) = cidrs.overlap(&theirs) {
            let family = net::Family::of(&m);
            return Err(ApiError::invalid(format!(
                "spec.ipv{}_cidr: subnet {} CIDR '{m}' overlaps with existing subnet '{}' (CIDR '{o}') in VirtualNetwork '{}'",
                if family == net::Family::V4 { 4 } else { 6 },
                family.label(),
                sibling.label(),
                vn.label()
            )));
        }
    }
    spec.virtual_network = vn.id.clone();
    Ok(body_of(&to_json(&s)?))
}

pub fn update(s: &pb::Subnet) -> ApiResult<()> {
    validate::metadata(s.metadata.as_ref())?;
    Ok(())
}
