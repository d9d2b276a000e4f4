//! Per-tenant quota enforcement and usage.
//!
//! A create that a limited quota counts takes that quota's lock for its tenant (keyed by the
//! tenant's id) before it
//! counts (`Tx::lock_name`, held until it commits), so the count cannot change before it
//! commits: two concurrent creates the same quota counts are ordered, and the second sees the
//! first one's object. Creates no limited quota counts (and creates of other kinds) do not
//! wait for each other. Usage is never stored: it is
//! counted from the objects themselves (in the write transaction when enforcing, with count
//! queries when a tenant is read), so it cannot drift from what exists.

use osac_model::quota::{Quota, QuotaLimits, UNLIMITED};
use osac_model::{Kind, pb};
use osac_store::{ListQuery, Page, Record, Store, Tx};
use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult, Code};
use crate::request::RequestCtx;

/// Where counts are read: inside a write transaction or from the store.
enum Reader<'a> {
    Tx(&'a mut dyn Tx),
    Store(&'a dyn Store),
}

impl Reader<'_> {
    async fn list(&mut self, q: &ListQuery) -> ApiResult<Page> {
        Ok(match self {
            Reader::Tx(tx) => tx.list(q).await?,
            Reader::Store(s) => s.list(q).await?,
        })
    }

    /// How many objects of `kind` the tenant owns (being deleted included).
    async fn count(&mut self, kind: Kind, tenant: &str) -> ApiResult<u64> {
        let page = self
            .list(&ListQuery {
                tenant: Some(tenant.to_string()),
                limit: 1,
                ..ListQuery::all(kind)
            })
            .await?;
        Ok(u64::try_from(page.total).unwrap_or(0))
    }

    /// Rules over all of the tenant's SecurityGroups, `except` one (the group being updated).
    async fn rules(&mut self, tenant: &str, except: Option<&str>) -> ApiResult<u64> {
        let mut total = 0u64;
        let mut offset = 0i64;
        loop {
            let page = self
                .list(&ListQuery {
                    tenant: Some(tenant.to_string()),
                    offset,
                    ..ListQuery::all(Kind::SecurityGroup)
                })
                .await?;
            let n = page.items.len();
            total += page
                .items
                .iter()
                .filter(|r| except != Some(r.id.as_str()))
                .map(|r| rule_count(&r.body))
                .sum::<u64>();
            offset += i64::try_from(n).unwrap_or(i64::MAX);
            if n == 0 || offset >= page.total {
                return Ok(total);
            }
        }
    }

    async fn used(&mut self, q: Quota, tenant: &str) -> ApiResult<u64> {
        match q {
            Quota::SecurityGroupRules => self.rules(tenant, None).await,
            _ => self.count(q.kind(), tenant).await,
        }
    }
}

/// Ingress plus egress rules of a SecurityGroup body.
pub fn rule_count(body: &Value) -> u64 {
    ["ingress", "egress"]
        .iter()
        .filter_map(|d| {
            body.pointer(&format!("/spec/{d}"))
                .and_then(Value::as_array)
        })
        .map(|a| a.len() as u64)
        .sum()
}

/// The limits in force for a tenant record: its `spec.quotas` over the provider defaults.
pub fn limits_of(defaults: &QuotaLimits, tenant: &Record) -> ApiResult<QuotaLimits> {
    let t: pb::Tenant = tenant.decode()?;
    Ok(defaults.for_tenant(t.spec.as_ref().and_then(|s| s.quotas.as_ref())))
}

/// The limits of the tenant of `cx` (those of the row the write already locked, else read) and
/// the key of its quota locks: the tenant's id.
async fn tenant_limits(cx: &mut RequestCtx<'_>) -> ApiResult<(QuotaLimits, String)> {
    if let (Some((name, limits)), Some(id)) = (&cx.tenant_limits, &cx.tenant_id)
        && *name == cx.tenant
    {
        return Ok((*limits, id.clone()));
    }
    match cx.tx.find_by_name(Kind::Tenant, "", &cx.tenant).await? {
        Some(t) => Ok((limits_of(&cx.quota_defaults, &t)?, t.id)),
        // No such tenant: nothing of it can be counted twice; its name keys the lock.
        None => Ok((cx.quota_defaults, format!("name:{}", cx.tenant))),
    }
}

fn exceeded(q: Quota, tenant: &str, limit: u32, used: u64, adds: u64) -> ApiError {
    let what = if q == Quota::SecurityGroupRules {
        format!(", this request brings {adds} rules")
    } else {
        String::new()
    };
    ApiError::new(
        Code::ResourceExhausted,
        format!(
            "quota {} of tenant '{tenant}' exceeded: limit {limit}, in use {used}{what}; delete some or ask the provider to raise the quota",
            q.name()
        ),
    )
}

/// Whether a RESOURCE_EXHAUSTED error is a quota refusal (vs. an exhausted address pool).
pub fn is_quota_error(e: &ApiError) -> bool {
    e.code == Code::ResourceExhausted && e.message.starts_with("quota ")
}

fn over(limit: u32, used: u64, adds: u64) -> bool {
    limit != UNLIMITED && used.saturating_add(adds) > u64::from(limit)
}

/// Orders this transaction with every other one that counts quota `q` of the tenant with id
/// `tenant_id`, until it ends.
async fn lock_count(tx: &mut dyn Tx, q: Quota, tenant_id: &str) -> ApiResult<()> {
    tx.lock_name(&format!("osac-quota:{}:{tenant_id}", q.name()))
        .await?;
    Ok(())
}

/// Refuses a create that would take the tenant of `cx` over a quota: one more object of
/// `kind`, and for a SecurityGroup its rules. Each limited quota is counted under its lock.
pub async fn check_create(cx: &mut RequestCtx<'_>, kind: Kind, body: &Value) -> ApiResult<()> {
    let object_quota = Quota::of_kind(kind);
    if cx.tenant.is_empty() || object_quota.is_none() {
        return Ok(());
    }
    let (limits, lock_key) = tenant_limits(cx).await?;
    let tenant = cx.tenant.clone();
    // An unlimited quota is not counted (a count grows with what the tenant owns).
    if let Some(q) = object_quota.filter(|q| limits.get(*q) != UNLIMITED) {
        lock_count(cx.tx, q, &lock_key).await?;
        let used = Reader::Tx(&mut *cx.tx).count(kind, &tenant).await?;
        if over(limits.get(q), used, 1) {
            return Err(exceeded(q, &tenant, limits.get(q), used, 1));
        }
    }
    if kind == Kind::SecurityGroup {
        let adds = rule_count(body);
        let q = Quota::SecurityGroupRules;
        if adds > 0 && limits.get(q) != UNLIMITED {
            lock_count(cx.tx, q, &lock_key).await?;
            let used = Reader::Tx(&mut *cx.tx).rules(&tenant, None).await?;
            if over(limits.get(q), used, adds) {
                return Err(exceeded(q, &tenant, limits.get(q), used, adds));
            }
        }
    }
    Ok(())
}

/// Refuses a SecurityGroup update that adds rules beyond the tenant's rule quota. An update
/// that does not add rules always passes (a lowered quota never blocks removing rules).
pub async fn check_rules_update(
    cx: &mut RequestCtx<'_>,
    current: &Record,
    body: &Value,
) -> ApiResult<()> {
    let (old, new) = (rule_count(&current.body), rule_count(body));
    if current.kind != Kind::SecurityGroup || new <= old {
        return Ok(());
    }
    let (limits, lock_key) = tenant_limits(cx).await?;
    let q = Quota::SecurityGroupRules;
    if limits.get(q) == UNLIMITED {
        return Ok(());
    }
    let tenant = cx.tenant.clone();
    lock_count(cx.tx, q, &lock_key).await?;
    let others = Reader::Tx(&mut *cx.tx)
        .rules(&tenant, Some(&current.id))
        .await?;
    if over(limits.get(q), others, new) {
        return Err(exceeded(q, &tenant, limits.get(q), others + old, new));
    }
    Ok(())
}

/// Sets `status.usage` of a rendered Tenant: per quota, what the tenant owns now and the limit
/// in force, counted now.
pub async fn add_usage(
    store: &dyn Store,
    defaults: &QuotaLimits,
    rec: &Record,
    obj: &mut Value,
) -> ApiResult<()> {
    let Some(name) = rec.name.as_deref() else {
        return Ok(());
    };
    let limits = limits_of(defaults, rec)?;
    let mut r = Reader::Store(store);
    let mut usage = Map::new();
    for q in Quota::ALL {
        let used = r.used(q, name).await?;
        usage.insert(
            q.name().into(),
            json!({"used": u32::try_from(used).unwrap_or(u32::MAX), "limit": limits.get(q)}),
        );
    }
    if let Some(o) = obj.as_object_mut() {
        let status = o.entry("status").or_insert_with(|| json!({}));
        if let Some(s) = status.as_object_mut() {
            s.insert("usage".into(), Value::Object(usage));
        }
    }
    Ok(())
}
