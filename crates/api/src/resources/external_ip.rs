//! ExternalIP: capacity is reserved in the pool inside the API transaction, as its last step
//! (the pool row is locked and its stored counter checked and moved just before the commit), so
//! concurrent creates never over-allocate and each holds the pool's lock only briefly.
//!
//! A tenant naming a pool it may not see (not READY, without room, being deleted) gets the
//! NOT_FOUND of a pool that does not exist, and no capacity error shows a tenant the pool's
//! counters.

use osac_model::net::Family;
use osac_model::{Kind, kinds, pb, validate};
use osac_store::{ListQuery, Record, Tx};
use serde_json::Value;

use super::external_ip_pool as pools;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, Code};
use crate::object::{body_of, to_json};
use crate::request::RequestCtx;

pub async fn create(cx: &mut RequestCtx<'_>, mut e: pb::ExternalIp) -> ApiResult<Value> {
    let family = kinds::external_ip::validate(&e)?;
    let spec = e.spec.get_or_insert_with(Default::default);
    let pool = if spec.pool.is_empty() {
        // No network is concerned yet: the default class's pools.
        let class = super::network_class::resolve_class(cx, "").await?;
        choose_pool(cx.tx, family, &class.id, &class.id).await?
    } else {
        // Read, not locked: `reserve_in_pools` checks the capacity exactly at the end.
        let found = super::resolve(cx, Kind::ExternalIpPool, "spec.pool", &spec.pool, false).await;
        // A pool tenants may not see (not READY, full, being deleted) does not exist for
        // them: the answer is the one a name no pool has gets, so nothing of it leaks.
        let hidden = || {
            ApiError::not_found(format!(
                "spec.pool: {} '{}' does not exist",
                Kind::ExternalIpPool.display_name(),
                spec.pool
            ))
        };
        let pool = match found {
            Ok(pool) if !cx.caller.is_provider() && !pools::usable(&pool) => return Err(hidden()),
            Err(e)
                if !cx.caller.is_provider()
                    && matches!(e.code, Code::NotFound | Code::FailedPrecondition) =>
            {
                return Err(hidden());
            }
            found => found?,
        };
        super::require_state(&pool, "spec.pool", "EXTERNAL_IP_POOL_STATE_READY")?;
        let pool_family = pools::family(&pool)?;
        if spec.ip_family != 0 && pool_family != family {
            return Err(ApiError::invalid(format!(
                "spec.ip_family: ExternalIPPool '{}' is {}, not {}",
                pool.label(),
                pool_family.label(),
                family.label()
            )));
        }
        let (allocated, total) = (pools::allocated_stored(&pool), pools::total(&pool)?);
        if allocated >= total {
            return Err(no_capacity(cx.caller, pool.label(), allocated, total));
        }
        pool
    };
    spec.pool = pool.id.clone();
    spec.ip_family = match pools::family(&pool)? {
        Family::V4 => pb::IpFamily::Ipv4 as i32,
        Family::V6 => pb::IpFamily::Ipv6 as i32,
    };
    Ok(body_of(&to_json(&e)?))
}

/// Automatic pool choice: READY pools of the family and of NetworkClass `class_id` (the class
/// of the network concerned; pools stored without a class count as `default_class`'s), most
/// available first, ties by name, with room by their stored counters (read, not locked: the
/// reservation is made exact by [`reserve_in_pools`] at the end of the transaction).
pub async fn choose_pool(
    tx: &mut dyn Tx,
    family: Family,
    class_id: &str,
    default_class: &str,
) -> ApiResult<Record> {
    let mut candidates = Vec::new();
    for pool in tx.list_items(&ListQuery::all(Kind::ExternalIpPool)).await? {
        if super::state_of(&pool) == "EXTERNAL_IP_POOL_STATE_READY"
            && pool.deleted_at.is_none()
            && pools::family(&pool)? == family
            && super::network_class::class_of(&pool, default_class) == class_id
        {
            candidates.push(pool);
        }
    }
    candidates.sort_by(|a, b| {
        pools::available(b)
            .cmp(&pools::available(a))
            .then_with(|| a.label().cmp(b.label()))
    });
    for pool in candidates {
        if pools::allocated_stored(&pool) < pools::total(&pool)? {
            return Ok(pool);
        }
    }
    Err(ApiError::new(
        Code::ResourceExhausted,
        format!(
            "ExternalIPPool exhaustion: no available capacity in any READY pool for {}",
            family.label()
        ),
    ))
}

/// Notes the new address for its pool's counter ([`reserve_in_pools`] moves it).
pub async fn after_insert(cx: &mut RequestCtx<'_>, rec: &Record) -> ApiResult<()> {
    let pool_id = rec
        .body
        .pointer("/spec/pool")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    *cx.pool_reservations.entry(pool_id).or_default() += 1;
    Ok(())
}

/// The last step of a transaction that inserted ExternalIPs: locks each pool they take
/// addresses from (in id order, so two transactions never wait for each other crosswise),
/// checks that it is still READY and has room for all of them, and moves its counters. The
/// pools were chosen from unlocked reads; this is where the reservation becomes exact. No room
/// ⇒ RESOURCE_EXHAUSTED and the caller rolls the whole transaction back.
pub async fn reserve_in_pools(cx: &mut RequestCtx<'_>) -> ApiResult<()> {
    for (pool_id, taken) in std::mem::take(&mut cx.pool_reservations) {
        let Some(pool) = cx.tx.lock(&pool_id).await? else {
            return Err(ApiError::not_found(format!(
                "ExternalIPPool '{pool_id}' does not exist"
            )));
        };
        if pool.deleted_at.is_some() || super::state_of(&pool) != "EXTERNAL_IP_POOL_STATE_READY" {
            return Err(ApiError::new(
                Code::FailedPrecondition,
                format!("ExternalIPPool '{}' is no longer READY", pool.label()),
            ));
        }
        let (allocated, total) = (pools::allocated_stored(&pool), pools::total(&pool)?);
        if allocated + taken > total {
            return Err(no_capacity(cx.caller, pool.label(), allocated, total));
        }
        osac_store::pool::adjust_pool(cx.tx, &pool_id, taken).await?;
    }
    Ok(())
}

/// RESOURCE_EXHAUSTED for a pool without room. The provider reads the pool's counters in the
/// message; a tenant only that there is no room (the counters are the provider's, and other
/// tenants' addresses are in them).
fn no_capacity(caller: &Caller, pool: &str, allocated: i64, total: i64) -> ApiError {
    let counters = if caller.is_provider() {
        format!(" ({allocated} of {total} allocated)")
    } else {
        String::new()
    };
    ApiError::new(
        Code::ResourceExhausted,
        format!("ExternalIPPool '{pool}' has no available capacity{counters}"),
    )
}

pub fn update(e: &pb::ExternalIp) -> ApiResult<()> {
    validate::metadata(e.metadata.as_ref())?;
    Ok(())
}

/// The live NATGateway or ExternalIPAttachment consuming an ExternalIP, if any.
pub async fn consumer(tx: &mut dyn Tx, eip_id: &str) -> ApiResult<Option<Record>> {
    for r in tx.referrers(eip_id).await? {
        if matches!(r.source_kind, Kind::NatGateway | Kind::ExternalIpAttachment)
            && let Some(user) = tx.get(&r.source).await?
        {
            return Ok(Some(user));
        }
    }
    Ok(None)
}

/// Resolves an ExternalIP for a new consumer: not FAILED (a PENDING one is waited for by the
/// consumer's controller) and not attached (one consumer at most).
pub async fn require_free(cx: &mut RequestCtx<'_>, key: &str) -> ApiResult<Record> {
    let eip = super::resolve_usable(cx, Kind::ExternalIp, "spec.external_ip", key, true).await?;
    if let Some(user) = consumer(cx.tx, &eip.id).await? {
        return Err(ApiError::precondition(format!(
            "spec.external_ip: ExternalIP '{}' is already attached to {} '{}'",
            eip.label(),
            user.kind,
            user.label()
        )));
    }
    Ok(eip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Role;

    /// The pool's counters count every tenant's addresses: a tenant's refusal does not show
    /// them (mutation-checked: with the counters shown to everyone, this failed).
    #[test]
    fn only_the_provider_reads_a_full_pool_s_counters() {
        let caller = |role| Caller {
            subject: "s".into(),
            tenant: Some("acme".into()),
            role,
        };
        let tenant = no_capacity(&caller(Role::TenantAdmin), "p", 7, 8);
        assert_eq!(tenant.code, Code::ResourceExhausted);
        assert_eq!(
            tenant.message,
            "ExternalIPPool 'p' has no available capacity"
        );
        let provider = no_capacity(&caller(Role::ProviderAdmin), "p", 7, 8);
        assert_eq!(
            provider.message,
            "ExternalIPPool 'p' has no available capacity (7 of 8 allocated)"
        );
    }
}
