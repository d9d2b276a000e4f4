//! The usage query (docs/metering.md): `GET /api/private/v1/usage` (the provider, any tenant
//! or one with `tenant=`) and `GET /api/fulfillment/v1/usage` (the caller's own tenant only).
//! Resource-seconds come from the store's intervals clipped to `[from, to)`, bytes from the
//! bandwidth meters' rows; both are grouped by the `group_by` dimensions. Both are selected by
//! the tenant's id, not its name: a tenant deleted and created again under the same name is
//! another tenant and reads none of its predecessor's usage.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use chrono::{DateTime, Duration, Utc};
use osac_model::Invalid;
use osac_model::metering::cloudevent::rfc3339;
use osac_model::metering::{BandwidthRow, Dimension, Meter, UsageQuery, aggregate};
use osac_store::Store;
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::rest::{AppState, caller, reply, require_provider};

/// The parameters the query takes.
const PARAMS: [&str; 5] = ["from", "to", "group_by", "meter", "tenant"];

/// A parsed usage request.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageParams {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub meter: Option<Meter>,
    pub group_by: Vec<Dimension>,
    pub tenant: Option<String>,
}

fn time(params: &HashMap<String, String>, name: &str) -> Result<Option<DateTime<Utc>>, Invalid> {
    params
        .get(name)
        .map(|v| {
            DateTime::parse_from_rfc3339(v)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|e| Invalid::new(name, format!("{v:?} is not an RFC 3339 time: {e}")))
        })
        .transpose()
}

/// Parses the query string: `to` defaults to now, `from` to a day before `to`; `from` must be
/// before `to`; unknown parameters are refused.
pub fn parse(params: &HashMap<String, String>, now: DateTime<Utc>) -> Result<UsageParams, Invalid> {
    if let Some(unknown) = params.keys().find(|k| !PARAMS.contains(&k.as_str())) {
        return Err(Invalid::new(
            unknown.as_str(),
            format!(
                "unknown parameter: the usage query takes {}",
                PARAMS.join(", ")
            ),
        ));
    }
    let to = time(params, "to")?.unwrap_or(now);
    let from = time(params, "from")?.unwrap_or(to - Duration::days(1));
    if from >= to {
        return Err(Invalid::new("from", "must be before `to`"));
    }
    let meter = match params.get("meter").map(String::as_str) {
        None | Some("") => None,
        Some(m) => Some(m.parse::<Meter>()?),
    };
    let group_by = Dimension::parse_list(params.get("group_by").map_or("", String::as_str))?;
    let tenant = params.get("tenant").filter(|t| !t.is_empty()).cloned();
    Ok(UsageParams {
        from,
        to,
        meter,
        group_by,
        tenant,
    })
}

/// Whose usage a request asks for, before the tenant is resolved to its id.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Asked {
    /// Every tenant's (the provider without `tenant=`).
    All,
    /// The provider's `tenant=`: the tenant of that name now, or else a tenant id (also of a
    /// tenant since deleted).
    NameOrId(String),
    /// The caller's own tenant, by the name it acts in.
    Own(String),
}

/// Whose usage a request reads, by tenant id: usage belongs to a tenant's identity, so a new
/// tenant of an old name never reads its predecessor's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every tenant's.
    All,
    /// The tenant with this id.
    Tenant(String),
    /// No tenant's: the caller's tenant no longer exists.
    Nobody,
}

/// Whose usage `caller` may read on a surface: the provider any (or all); a tenant caller only
/// its own, and naming another tenant is refused.
fn tenant_scope(
    caller: &Caller,
    provider_surface: bool,
    asked: Option<String>,
) -> ApiResult<Asked> {
    if provider_surface {
        require_provider(caller)?;
        return Ok(asked.map_or(Asked::All, Asked::NameOrId));
    }
    let Some(own) = caller.tenant.clone() else {
        return Err(ApiError::denied(
            "the fulfillment API answers a tenant's own usage: the caller acts in no tenant",
        ));
    };
    match asked {
        Some(other) if other != own => Err(ApiError::denied(format!(
            "tenant: a tenant reads only its own usage, not {other:?}"
        ))),
        _ => Ok(Asked::Own(own)),
    }
}

/// The tenant id `asked` names. A name is resolved to the tenant that has it now; on the
/// provider's surface a value that names no tenant is taken as a tenant id, so the usage of a
/// deleted tenant stays readable by its id, and a value that is neither answers empty usage
/// (as a list filter matching nothing does).
async fn resolve(store: &dyn Store, asked: Asked) -> ApiResult<Scope> {
    Ok(match asked {
        Asked::All => Scope::All,
        Asked::NameOrId(v) => match osac_store::metering::tenant_id(store, &v).await? {
            Some(id) => Scope::Tenant(id),
            None => Scope::Tenant(v),
        },
        Asked::Own(name) => match osac_store::metering::tenant_id(store, &name).await? {
            Some(id) => Scope::Tenant(id),
            None => Scope::Nobody,
        },
    })
}

impl Scope {
    /// The tenant id filter of the store's queries (`Some(None)`: every tenant), or None when
    /// the answer is empty without asking.
    fn selection(&self) -> Option<Option<&str>> {
        match self {
            Scope::All => Some(None),
            Scope::Tenant(id) => Some(Some(id)),
            Scope::Nobody => None,
        }
    }
}

/// Answers the query for `scope`: intervals from the store, `bandwidth` rows of the same
/// period and scope, grouped.
pub async fn answer(
    store: &dyn Store,
    p: &UsageParams,
    scope: &Scope,
    bandwidth: &[BandwidthRow],
    now: DateTime<Utc>,
) -> ApiResult<Value> {
    let intervals = match scope.selection() {
        None => Vec::new(),
        Some(tenant_id) => store
            .usage_intervals(p.from, p.to, tenant_id)
            .await
            .map_err(ApiError::from)?,
    };
    let q = UsageQuery {
        from: p.from,
        to: p.to,
        now,
        meter: p.meter,
        group_by: p.group_by.clone(),
    };
    let groups: Vec<Value> = aggregate(&q, &intervals, bandwidth)
        .into_iter()
        .map(|g| {
            json!({
                "dimensions": g.dimensions,
                "resource_seconds": g.resource_seconds().to_string(),
                "ingress_bytes": g.ingress_bytes.to_string(),
                "egress_bytes": g.egress_bytes.to_string(),
            })
        })
        .collect();
    Ok(json!({
        "from": rfc3339(p.from),
        "to": rfc3339(p.to),
        "meter": p.meter.map_or("all".to_string(), |m| m.to_string()),
        "group_by": p.group_by.iter().map(|d| d.name()).collect::<Vec<_>>(),
        "groups": groups,
    }))
}

async fn serve(
    s: AppState,
    headers: HeaderMap,
    params: HashMap<String, String>,
    provider_surface: bool,
) -> ApiResult<Value> {
    let caller = caller(&s, &headers).await?;
    let now = Utc::now();
    let mut p = parse(&params, now)?;
    let asked = tenant_scope(&caller, provider_surface, p.tenant.take())?;
    let scope = resolve(&*s.store, asked).await?;
    let bandwidth = bandwidth_rows(&*s.store, &p, &scope).await?;
    answer(&*s.store, &p, &scope, &bandwidth, now).await
}

/// Bytes per ExternalIP and NAT gateway path: the bandwidth meters' rows of the buckets that
/// start in `[from, to)` (none when only the allocation meter is asked for).
async fn bandwidth_rows(
    store: &dyn Store,
    p: &UsageParams,
    scope: &Scope,
) -> ApiResult<Vec<BandwidthRow>> {
    let Some(tenant_id) = scope.selection() else {
        return Ok(Vec::new());
    };
    if p.meter == Some(Meter::Allocation) {
        return Ok(Vec::new());
    }
    let rows = store
        .traffic_usage(p.from, p.to, tenant_id)
        .await
        .map_err(ApiError::from)?;
    Ok(rows
        .into_iter()
        .map(|r| BandwidthRow {
            tenant: r.tenant,
            tenant_id: r.tenant_id,
            kind: r.kind,
            object_id: r.object_id,
            external_ip_id: r.external_ip_id,
            ingress_bytes: r.ingress_bytes,
            egress_bytes: r.egress_bytes,
        })
        .collect())
}

/// `GET /api/private/v1/usage`.
pub async fn private(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    reply(serve(s, headers, params, true).await)
}

/// `GET /api/fulfillment/v1/usage`.
pub async fn fulfillment(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    reply(serve(s, headers, params, false).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn bad_parameters_name_themselves() {
        let now = Utc::now();
        let field = |p: &[(&str, &str)]| parse(&params(p), now).unwrap_err().field;
        assert_eq!(field(&[("from", "yesterday")]), "from");
        assert_eq!(field(&[("to", "2026-13-01T00:00:00Z")]), "to");
        assert_eq!(
            field(&[
                ("from", "2026-01-02T00:00:00Z"),
                ("to", "2026-01-01T00:00:00Z")
            ]),
            "from"
        );
        assert_eq!(field(&[("meter", "bytes")]), "meter");
        assert_eq!(field(&[("group_by", "tenant,colour")]), "group_by");
        assert_eq!(field(&[("colour", "red")]), "colour");
        let p = parse(
            &params(&[("group_by", "tenant,kind"), ("meter", "allocation")]),
            now,
        )
        .unwrap();
        assert_eq!(p.to, now);
        assert_eq!(p.group_by, vec![Dimension::Tenant, Dimension::Kind]);
        assert_eq!(p.meter, Some(Meter::Allocation));
    }

    #[test]
    fn a_tenant_reads_only_its_own_usage() {
        let tenant = Caller {
            subject: "u".into(),
            tenant: Some("acme".into()),
            role: crate::auth::Role::TenantUser,
        };
        let own = Asked::Own("acme".into());
        assert_eq!(tenant_scope(&tenant, false, None).unwrap(), own);
        assert_eq!(
            tenant_scope(&tenant, false, Some("acme".into())).unwrap(),
            own
        );
        assert!(tenant_scope(&tenant, false, Some("globex".into())).is_err());
        assert!(
            tenant_scope(&tenant, true, None).is_err(),
            "private API is the provider's"
        );
        let provider = Caller {
            subject: "admin".into(),
            tenant: None,
            role: crate::auth::Role::ProviderAdmin,
        };
        assert_eq!(tenant_scope(&provider, true, None).unwrap(), Asked::All);
        assert_eq!(
            tenant_scope(&provider, true, Some("0190-id".into())).unwrap(),
            Asked::NameOrId("0190-id".into())
        );
    }
}
