//! Per-kind API rules (one file per resource): what a create needs, what an update may change,
//! what blocks a delete, and what tenants may see of provider objects. Create and update rules
//! take the proto message of their kind ([`Object`]); a create rule returns the body to store.

pub mod baremetal_instance;
pub mod baremetal_instance_type;
pub mod baremetal_template;
pub mod cluster;
pub mod compute_instance;
pub mod event;
pub mod external_ip;
pub mod external_ip_attachment;
pub mod external_ip_pool;
pub mod host;
pub mod host_type;
mod insert;
pub mod nat_gateway;
pub mod network_class;
pub mod security_group;
pub mod subnet;
pub mod tenant;
pub mod virtual_network;
pub mod workload;

use osac_model::Kind;
use osac_store::{Record, Tx};
use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};
use crate::request::{RequestCtx, not_found};
use crate::typed::Object;

pub(crate) use insert::insert_new;

/// Validates a create request and returns the body to store (references resolved to ids).
pub async fn prepare_create(cx: &mut RequestCtx<'_>, obj: Object) -> ApiResult<Value> {
    match obj {
        Object::NetworkClass(m) => network_class::create(cx, m).await,
        Object::ExternalIpPool(m) => external_ip_pool::create(cx, m).await,
        Object::HostType(m) => host_type::create(cx, m).await,
        Object::BareMetalTemplate(m) => baremetal_template::create(cx, m).await,
        Object::BareMetalInstanceType(m) => baremetal_instance_type::create(cx, m).await,
        Object::Tenant(m) => tenant::create(cx, m).await,
        Object::VirtualNetwork(m) => virtual_network::create(cx, m).await,
        Object::Subnet(m) => subnet::create(cx, m).await,
        Object::SecurityGroup(m) => security_group::create(cx, m).await,
        Object::ExternalIp(m) => external_ip::create(cx, m).await,
        Object::ExternalIpAttachment(m) => external_ip_attachment::create(cx, m).await,
        Object::NatGateway(m) => nat_gateway::create(cx, m).await,
        Object::Host(m) => host::create(cx, m).await,
        Object::ComputeInstance(m) => compute_instance::create(cx, m).await,
        Object::BareMetalInstance(m) => baremetal_instance::create(cx, m).await,
        Object::Cluster(m) => cluster::create(cx, m).await,
        Object::Event(_) => event::create(),
    }
}

/// Status a kind starts with besides its PENDING state (e.g. pool capacity).
pub fn initial_status(obj: &Object) -> Option<Value> {
    match obj {
        Object::ExternalIpPool(pool) => external_ip_pool::initial_status(pool),
        _ => None,
    }
}

/// Work that needs the inserted row (counters that include it).
pub async fn after_insert(cx: &mut RequestCtx<'_>, rec: &Record) -> ApiResult<()> {
    match rec.kind {
        Kind::ExternalIp => external_ip::after_insert(cx, rec).await,
        Kind::Tenant => tenant::onboard(cx, rec).await,
        Kind::ComputeInstance | Kind::BareMetalInstance | Kind::Cluster => {
            workload::auto_external_ips(cx, rec).await
        }
        _ => Ok(()),
    }
}

/// Work after a row was removed immediately by a delete (no finalizers).
pub async fn after_remove(_cx: &mut RequestCtx<'_>, _rec: &Record) -> ApiResult<()> {
    Ok(())
}

/// Re-validates an updated body; `body` already has the requested changes applied. The body
/// is parsed once into the message of its kind for the kind's rule; a rule that completes or
/// rewrites the message (resolved references, computed fields) has its result stored.
pub async fn prepare_update(
    cx: &mut RequestCtx<'_>,
    kind: Kind,
    current: &Record,
    body: &mut Value,
) -> ApiResult<()> {
    if kind == Kind::Event {
        return event::update();
    }
    let rewritten = match Object::from_json(kind, body.clone())? {
        Object::NetworkClass(mut m) => {
            network_class::update(cx, current, &mut m).await?;
            Object::NetworkClass(m)
        }
        Object::Host(mut m) => {
            host::update(cx, current, &mut m).await?;
            Object::Host(m)
        }
        Object::BareMetalInstanceType(mut m) => {
            baremetal_instance_type::update(cx, &mut m).await?;
            Object::BareMetalInstanceType(m)
        }
        Object::ComputeInstance(mut m) => {
            compute_instance::update(cx, current, &mut m).await?;
            Object::ComputeInstance(m)
        }
        Object::BareMetalInstance(mut m) => {
            baremetal_instance::update(cx, current, &mut m).await?;
            Object::BareMetalInstance(m)
        }
        Object::Cluster(mut m) => {
            cluster::update(cx, current, &mut m).await?;
            Object::Cluster(m)
        }
        // The rules below only check: the body is stored as it is.
        Object::ExternalIpPool(m) => return external_ip_pool::update(&m),
        Object::HostType(m) => return host_type::update(cx, current, &m).await,
        Object::BareMetalTemplate(m) => return baremetal_template::update(&m),
        Object::Tenant(m) => return tenant::update(current, m),
        Object::VirtualNetwork(m) => return virtual_network::update(&m),
        Object::Subnet(m) => return subnet::update(&m),
        Object::SecurityGroup(m) => return security_group::update(&m),
        Object::ExternalIp(m) => return external_ip::update(&m),
        Object::ExternalIpAttachment(m) => return external_ip_attachment::update(&m),
        Object::NatGateway(m) => return nat_gateway::update(&m),
        Object::Event(_) => return event::update(),
    };
    *body = crate::object::body_of(&rewritten.to_json()?);
    Ok(())
}

/// Before the immutability check of an update: names written where ids are stored, and
/// resolved defaults left out, are made equal to the stored values (see
/// [`workload::canonicalize_update`]).
pub async fn canonicalize_update(
    cx: &mut RequestCtx<'_>,
    kind: Kind,
    current: &Record,
    new_obj: &mut Value,
) -> ApiResult<()> {
    match kind {
        Kind::ComputeInstance
        | Kind::BareMetalInstance
        | Kind::Cluster
        | Kind::Host
        | Kind::BareMetalTemplate => {
            workload::canonicalize_update(cx, kind, current, new_obj).await
        }
        _ => Ok(()),
    }
}

/// Refuses deletes that would strand other objects (FAILED_PRECONDITION naming the user).
pub async fn check_delete(cx: &mut RequestCtx<'_>, rec: &Record) -> ApiResult<()> {
    match rec.kind {
        Kind::NetworkClass => {
            refuse_if_used(cx.tx, rec, &[Kind::VirtualNetwork], "is used by").await
        }
        Kind::ExternalIpPool => external_ip_pool::check_delete(cx, rec).await,
        Kind::HostType => {
            // Hosts and workloads first: they say more than a catalog entry.
            refuse_if_used(
                cx.tx,
                rec,
                &[Kind::Host, Kind::BareMetalInstance, Kind::Cluster],
                "is used by",
            )
            .await?;
            refuse_if_used(
                cx.tx,
                rec,
                &[Kind::BareMetalTemplate, Kind::BareMetalInstanceType],
                "is used by",
            )
            .await
        }
        Kind::BareMetalInstanceType => {
            refuse_if_used(cx.tx, rec, &[Kind::BareMetalInstance], "is used by").await
        }
        Kind::BareMetalTemplate => {
            refuse_if_used(cx.tx, rec, &[Kind::BareMetalInstance], "is used by").await
        }
        Kind::Host => host::check_delete(cx, rec).await,
        Kind::ComputeInstance | Kind::BareMetalInstance | Kind::Cluster => Ok(()),
        Kind::Tenant => tenant::check_delete(cx, rec).await,
        Kind::VirtualNetwork => {
            refuse_if_used(
                cx.tx,
                rec,
                &[Kind::Subnet, Kind::SecurityGroup, Kind::NatGateway],
                "still has",
            )
            .await
        }
        Kind::ExternalIp => {
            refuse_if_used(
                cx.tx,
                rec,
                &[Kind::NatGateway, Kind::ExternalIpAttachment],
                "is attached to",
            )
            .await
        }
        Kind::Subnet | Kind::SecurityGroup => {
            refuse_if_used(cx.tx, rec, &Kind::WORKLOADS, "is used by").await
        }
        Kind::ExternalIpAttachment | Kind::NatGateway => Ok(()),
        Kind::Event => event::check_delete(rec),
    }
}

/// Fails when a live object of one of `kinds` references `rec`.
pub async fn refuse_if_used(
    tx: &mut dyn Tx,
    rec: &Record,
    kinds: &[Kind],
    verb: &str,
) -> ApiResult<()> {
    for r in tx.referrers(&rec.id).await? {
        if !kinds.contains(&r.source_kind) {
            continue;
        }
        let Some(user) = tx.get(&r.source).await? else {
            continue;
        };
        return Err(ApiError::precondition(format!(
            "{} '{}' cannot be deleted: it {verb} {} '{}'{}",
            rec.kind,
            rec.label(),
            user.kind,
            user.label(),
            if user.deleted_at.is_some() {
                " (being deleted; retry when it is gone)"
            } else {
                ""
            }
        )));
    }
    Ok(())
}

/// How [`resolve_as`] reads the object a reference names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    /// As the transaction sees it.
    Plain,
    /// Locked until the transaction ends.
    Lock,
    /// Possibly an older version ([`osac_store::Tx::get_stable`]): for references the caller
    /// locks later ([`workload::lock_refs`]), where what changes is checked again.
    Stable,
}

/// Resolves a reference (id or name) to a live object of `kind` visible to the writer.
/// Provider kinds are looked up among provider objects; tenant kinds in the writer's tenant.
pub async fn resolve(
    cx: &mut RequestCtx<'_>,
    kind: Kind,
    field: &str,
    key: &str,
    lock: bool,
) -> ApiResult<Record> {
    let read = if lock { Read::Lock } else { Read::Plain };
    resolve_as(cx, kind, field, key, read).await
}

async fn resolve_as(
    cx: &mut RequestCtx<'_>,
    kind: Kind,
    field: &str,
    key: &str,
    read: Read,
) -> ApiResult<Record> {
    if key.is_empty() {
        return Err(ApiError::invalid(format!("{field} is required")));
    }
    let tenant = match kind.scope() {
        osac_model::Scope::Provider => String::new(),
        osac_model::Scope::Tenant => cx.tenant.clone(),
    };
    let missing = || {
        ApiError::not_found(format!(
            "{field}: {} '{key}' does not exist",
            kind.display_name()
        ))
    };
    // By id first (locked at once when asked: one read, and nothing of another kind or
    // tenant gets locked), else by name.
    let by_id = match read {
        Read::Lock => cx.tx.lock_of(kind, &tenant, key).await?,
        Read::Plain => cx.tx.get(key).await?,
        Read::Stable => cx.tx.get_stable(key).await?,
    }
    .filter(|r| r.kind == kind && r.tenant == tenant);
    let rec = match by_id {
        Some(r) => r,
        None => {
            let found = cx
                .tx
                .find_by_name(kind, &tenant, key)
                .await?
                .ok_or_else(missing)?;
            if read == Read::Lock {
                cx.tx.lock(&found.id).await?.ok_or_else(missing)?
            } else {
                found
            }
        }
    };
    if rec.deleted_at.is_some() {
        return Err(ApiError::precondition(format!(
            "{field}: {} '{}' is being deleted",
            kind,
            rec.label()
        )));
    }
    Ok(rec)
}

/// [`resolve`]s a dependency of a new object and refuses it once FAILED
/// ([`require_not_failed`]).
pub async fn resolve_usable(
    cx: &mut RequestCtx<'_>,
    kind: Kind,
    field: &str,
    key: &str,
    lock: bool,
) -> ApiResult<Record> {
    let rec = resolve(cx, kind, field, key, lock).await?;
    require_not_failed(&rec, field)?;
    Ok(rec)
}

/// [`resolve`] for a reference the caller share-locks before it commits
/// ([`workload::lock_refs`], which refuses it if deleted or FAILED, on the locked row): the
/// read may come from the record cache ([`osac_store::Tx::get_stable`]), so only what never
/// changes, and deletion (which is never undone), is decided here.
pub async fn resolve_referenced(
    cx: &mut RequestCtx<'_>,
    kind: Kind,
    field: &str,
    key: &str,
) -> ApiResult<Record> {
    resolve_as(cx, kind, field, key, Read::Stable).await
}

/// The VirtualNetwork a Subnet, SecurityGroup or NATGateway names in `spec.virtual_network`,
/// usable and locked: a concurrent delete of the network then either sees the new object (and
/// is refused) or makes this create fail.
pub async fn parent_network(cx: &mut RequestCtx<'_>, key: &str) -> ApiResult<Record> {
    resolve_usable(cx, Kind::VirtualNetwork, "spec.virtual_network", key, true).await
}

/// The `status.state` name of a record ("" when unset).
pub fn state_of(rec: &Record) -> &str {
    rec.body
        .get("status")
        .and_then(|s| s.get("state"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Fails unless `rec` is in `state` (for provider objects that must be READY before use: an
/// explicit pool, a VirtualNetwork's NetworkClass).
pub fn require_state(rec: &Record, field: &str, state: &str) -> ApiResult<()> {
    let current = state_of(rec);
    if current == state {
        return Ok(());
    }
    let short = |s: &str| s.rsplit("_STATE_").next().unwrap_or(s).to_string();
    Err(ApiError::precondition(format!(
        "{field}: {} '{}' is {}, it must be {}",
        rec.kind,
        rec.label(),
        if current.is_empty() {
            "PENDING".to_string()
        } else {
            short(current)
        },
        short(state)
    )))
}

/// Declarative creation: a dependency may be used while it is still being provisioned — the
/// new object is stored and its controller waits for the dependency (and fails the object if
/// the dependency fails later) — but not once it FAILED. (One being deleted is refused by
/// [`resolve`].)
pub fn require_not_failed(rec: &Record, field: &str) -> ApiResult<()> {
    if !state_of(rec).ends_with("_STATE_FAILED") {
        return Ok(());
    }
    let why = rec
        .body
        .pointer("/status/message")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .map(|m| format!(" ({m})"))
        .unwrap_or_default();
    Err(ApiError::precondition(format!(
        "{field}: {} '{}' is FAILED{why}; it cannot be used",
        rec.kind,
        rec.label()
    )))
}

/// Whether the API object of `kind` on `surface` is the record as stored (metadata from the
/// columns, then the stored body's fields), so a reply may carry the stored JSON text through
/// unparsed ([`crate::object_json::ObjectJson`]). False for every kind whose reply is computed
/// or trimmed: a Tenant (quota usage counted at read time), an ExternalIPPool (zero counters
/// filled in; tenants see only usable pools, trimmed), and whatever tenants see trimmed of a
/// provider object ([`public_fields`]). A kind with a per-object visibility rule
/// ([`publicly_visible`]) must be false here too.
pub fn rendered_verbatim(kind: Kind, surface: osac_model::Scope) -> bool {
    match kind {
        Kind::Tenant | Kind::ExternalIpPool => false,
        _ => surface == osac_model::Scope::Provider || public_fields(kind).is_none(),
    }
}

/// Whether tenants may see this provider object.
pub fn publicly_visible(kind: Kind, rec: &Record) -> bool {
    match kind {
        Kind::ExternalIpPool => external_ip_pool::usable(rec),
        _ => true,
    }
}

/// Extra filter applied to public lists.
pub fn public_filter(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::ExternalIpPool => Some(
            "this.status.state == \"EXTERNAL_IP_POOL_STATE_READY\" && this.status.available > 0",
        ),
        _ => None,
    }
}

/// The fields tenants see of a provider object whose public view is trimmed (None: the whole
/// object is public). Dotted paths; a path covers everything below it. The public view shows
/// these and nothing else, and tenants' filters and orders may use these and nothing else.
pub fn public_fields(kind: Kind) -> Option<&'static [&'static str]> {
    const META: [&str; 4] = [
        "id",
        "metadata.name",
        "metadata.creation_timestamp",
        "metadata.version",
    ];
    match kind {
        Kind::NetworkClass => Some(&[
            META[0],
            META[1],
            META[2],
            META[3],
            "title",
            "description",
            "capabilities",
            "is_default",
        ]),
        Kind::ExternalIpPool => Some(&[
            META[0],
            META[1],
            META[2],
            META[3],
            "spec.ip_family",
            "spec.network_class",
            "status.available",
        ]),
        _ => None,
    }
}

/// What tenants see of an object (provider objects are trimmed to [`public_fields`]).
pub fn public_view(kind: Kind, obj: Value) -> Value {
    let Some(fields) = public_fields(kind) else {
        return obj;
    };
    let mut out = Value::Object(Map::new());
    for field in fields {
        let pointer = format!("/{}", field.replace('.', "/"));
        if let Some(v) = obj.pointer(&pointer) {
            let mut at = &mut out;
            let segs: Vec<&str> = field.split('.').collect();
            for seg in &segs[..segs.len() - 1] {
                let Value::Object(m) = at else { break };
                at = m
                    .entry(seg.to_string())
                    .or_insert_with(|| Value::Object(Map::new()));
            }
            if let (Value::Object(m), Some(last)) = (at, segs.last()) {
                m.insert(last.to_string(), v.clone());
            }
        }
    }
    out
}

/// Refuses a tenant's filter or order on a field of `kind` that tenants cannot see: the same
/// INVALID_ARGUMENT for a hidden field and for one that does not exist, so a filter cannot
/// probe what the public view hides.
pub fn check_public_paths<'p>(
    kind: Kind,
    what: &str,
    paths: impl IntoIterator<Item = &'p osac_model::filter::Path>,
) -> ApiResult<()> {
    let Some(fields) = public_fields(kind) else {
        return Ok(());
    };
    for path in paths {
        let visible = fields.iter().any(|f| {
            let want: Vec<&str> = f.split('.').collect();
            path.segments.len() >= want.len()
                && path.segments.iter().zip(&want).all(|(a, b)| a == b)
        });
        if !visible {
            return Err(ApiError::invalid(format!(
                "{what}: field '{path}' is not available (fields of {}: {})",
                kind.collection(),
                fields.join(", ")
            )));
        }
    }
    Ok(())
}

/// NOT_FOUND helper re-exported for resource files.
pub fn missing(kind: Kind, key: &str) -> ApiError {
    not_found(kind, key)
}
