//! ExternalIPPool: valid CIDRs of one family, no overlap with any other pool, capacity computed;
//! scoped to a NetworkClass (the default one when omitted; stored as its id), whose fabric
//! manager allocates its addresses; delete refused while addresses are allocated.

use osac_model::net::total_capacity;
use osac_model::{Kind, kinds, net, pb, validate};
use osac_store::{ListQuery, Record};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::object::{body_of, to_json};
use crate::request::RequestCtx;

pub async fn create(cx: &mut RequestCtx<'_>, mut pool: pb::ExternalIpPool) -> ApiResult<Value> {
    let nets = kinds::external_ip_pool::validate(&pool)?;
    let spec = pool.spec.get_or_insert_with(Default::default);
    // A class still being provisioned is fine (the provider creates both at once).
    let class = super::network_class::resolve_class(cx, &spec.network_class).await?;
    super::require_not_failed(&class, "spec.network_class")?;
    spec.network_class = class.id;
    let others = cx.tx.list(&ListQuery::all(Kind::ExternalIpPool)).await?;
    for other in others.items {
        let spec = other
            .decode::<pb::ExternalIpPool>()?
            .spec
            .unwrap_or_default();
        for c in &spec.cidrs {
            let Ok(theirs) = c.parse::<ipnet::IpNet>() else {
                continue;
            };
            if let Some((i, mine)) = nets
                .iter()
                .enumerate()
                .find(|(_, n)| net::overlaps(n, &theirs))
            {
                return Err(ApiError::invalid(format!(
                    "spec.cidrs[{i}]: CIDR '{mine}' overlaps with CIDR '{theirs}' of ExternalIPPool '{}'",
                    other.label()
                )));
            }
        }
    }
    Ok(body_of(&to_json(&pool)?))
}

/// Capacity of a new pool: everything available.
pub fn initial_status(pool: &pb::ExternalIpPool) -> Option<Value> {
    let nets: Vec<ipnet::IpNet> = pool
        .spec
        .as_ref()?
        .cidrs
        .iter()
        .filter_map(|c| c.parse().ok())
        .collect();
    let total = total_capacity(&nets);
    Some(json!({"total": total.to_string(), "allocated": "0", "available": total.to_string()}))
}

pub fn update(pool: &pb::ExternalIpPool) -> ApiResult<()> {
    validate::metadata(pool.metadata.as_ref())?;
    Ok(())
}

pub async fn check_delete(cx: &mut RequestCtx<'_>, rec: &Record) -> ApiResult<()> {
    let refs = cx.tx.referrers(&rec.id).await?;
    let mut users = refs.iter().filter(|r| r.source_kind == Kind::ExternalIp);
    let Some(first) = users.next() else {
        return Ok(());
    };
    let allocated = 1 + users.count();
    let example = match cx.tx.get(&first.source).await? {
        Some(user) => format!(
            " (e.g. ExternalIP '{}' of tenant '{}')",
            user.label(),
            user.tenant
        ),
        None => String::new(),
    };
    Err(ApiError::precondition(format!(
        "ExternalIPPool '{}' cannot be deleted: {allocated} address(es) are allocated from it{example}",
        rec.label()
    )))
}

/// The stored `status.allocated` of a pool record: exact when the record was read under the
/// pool's row lock (every reservation and release moves it under that lock).
pub fn allocated_stored(rec: &Record) -> i64 {
    rec.body
        .pointer("/status/allocated")
        .and_then(|v| {
            v.as_i64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        })
        .unwrap_or(0)
}

/// Total capacity of a stored pool.
pub fn total(rec: &Record) -> ApiResult<i64> {
    let spec = rec.decode::<pb::ExternalIpPool>()?.spec.unwrap_or_default();
    let nets: Vec<ipnet::IpNet> = spec.cidrs.iter().filter_map(|c| c.parse().ok()).collect();
    Ok(total_capacity(&nets))
}

/// Whether tenants may use (and see) the pool: READY with capacity left.
pub fn usable(rec: &Record) -> bool {
    super::state_of(rec) == "EXTERNAL_IP_POOL_STATE_READY"
        && available(rec) > 0
        && rec.deleted_at.is_none()
}

/// `status.available` of a stored pool.
pub fn available(rec: &Record) -> i64 {
    rec.body
        .get("status")
        .and_then(|s| s.get("available"))
        .and_then(|v| {
            v.as_str()
                .and_then(|s| s.parse().ok())
                .or_else(|| v.as_i64())
        })
        .unwrap_or(0)
}

/// The pool family as the model names it.
pub fn family(rec: &Record) -> ApiResult<net::Family> {
    let spec = rec.decode::<pb::ExternalIpPool>()?.spec.unwrap_or_default();
    Ok(if spec.ip_family == pb::IpFamily::Ipv6 as i32 {
        net::Family::V6
    } else {
        net::Family::V4
    })
}
