//! Host (inventory, private API): every interface of its HostType with a valid MAC (stored
//! lowercase), MACs unique across all hosts, pool `baremetal` or `caas`. The type never
//! changes; interfaces and pool change only while the host is FREE; a host in use (RESERVED or
//! ASSIGNED) cannot be deleted. State and assignment are written by the workload controllers.

use osac_model::{Kind, kinds, pb, validate};
use osac_store::{ListQuery, Record, Tx};
use serde_json::Value;

use crate::error::{ApiError, ApiResult, Code};
use crate::object::{body_of, to_json};
use crate::request::RequestCtx;

pub async fn create(cx: &mut RequestCtx<'_>, mut h: pb::Host) -> ApiResult<Value> {
    validate::metadata(h.metadata.as_ref())?;
    let key = h
        .spec
        .as_ref()
        .map(|s| s.host_type.clone())
        .unwrap_or_default();
    let ht_rec = super::resolve(cx, Kind::HostType, "spec.host_type", &key, true).await?;
    let ht: pb::HostType = ht_rec.decode()?;
    let spec = kinds::host::validate(&h, &ht, ht_rec.label(), &ht_rec.id)?;
    cx.tx.lock_kind(Kind::Host).await?;
    check_unique_macs(cx.tx, &spec, None).await?;
    h.spec = Some(spec);
    Ok(body_of(&to_json(&h)?))
}

pub async fn update(cx: &mut RequestCtx<'_>, current: &Record, h: &mut pb::Host) -> ApiResult<()> {
    validate::metadata(h.metadata.as_ref())?;
    let old = current.decode::<pb::Host>()?.spec.unwrap_or_default();
    let ht_rec = cx.tx.get(&old.host_type).await?.ok_or_else(|| {
        ApiError::precondition(format!(
            "spec.host_type: HostType '{}' of Host '{}' no longer exists",
            old.host_type,
            current.label()
        ))
    })?;
    let ht: pb::HostType = ht_rec.decode()?;
    let spec = kinds::host::validate(h, &ht, ht_rec.label(), &ht_rec.id)?;
    if spec.interfaces != old.interfaces || spec.pool != old.pool {
        if super::state_of(current) != "HOST_STATE_FREE" {
            return Err(ApiError::precondition(format!(
                "spec.interfaces and spec.pool can only change while the host is FREE: Host '{}' is {}",
                current.label(),
                describe_use(cx.tx, current).await?
            )));
        }
        cx.tx.lock_kind(Kind::Host).await?;
        check_unique_macs(cx.tx, &spec, Some(&current.id)).await?;
    }
    h.spec = Some(spec);
    Ok(())
}

/// A host serving a workload (RESERVED or ASSIGNED) cannot be deleted.
pub async fn check_delete(cx: &mut RequestCtx<'_>, rec: &Record) -> ApiResult<()> {
    if matches!(
        super::state_of(rec),
        "HOST_STATE_RESERVED" | "HOST_STATE_ASSIGNED"
    ) {
        return Err(ApiError::precondition(format!(
            "Host '{}' cannot be deleted: it is {}",
            rec.label(),
            describe_use(cx.tx, rec).await?
        )));
    }
    Ok(())
}

/// "RESERVED for BareMetalInstance 'web'" (the workload named when it still exists).
async fn describe_use(tx: &mut dyn Tx, rec: &Record) -> ApiResult<String> {
    let state = super::state_of(rec)
        .strip_prefix("HOST_STATE_")
        .unwrap_or("in an unknown state")
        .to_string();
    let assigned = rec
        .body
        .pointer("/status/assigned_to")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if assigned.is_empty() {
        return Ok(state);
    }
    Ok(match tx.get(assigned).await? {
        Some(w) => format!(
            "{state} for {} '{}' of tenant '{}'",
            w.kind,
            w.label(),
            w.tenant
        ),
        None => format!("{state} for workload '{assigned}'"),
    })
}

/// No MAC of `spec` may belong to another host (`except` = the host being updated).
async fn check_unique_macs(
    tx: &mut dyn Tx,
    spec: &pb::HostSpec,
    except: Option<&str>,
) -> ApiResult<()> {
    let mut offset = 0;
    loop {
        let page = tx
            .list(&ListQuery {
                offset,
                ..ListQuery::all(Kind::Host)
            })
            .await?;
        for other in &page.items {
            if Some(other.id.as_str()) == except {
                continue;
            }
            let theirs = other.decode::<pb::Host>()?.spec.unwrap_or_default();
            for mine in &spec.interfaces {
                if let Some(t) = theirs
                    .interfaces
                    .iter()
                    .find(|t| t.mac_address == mine.mac_address)
                {
                    return Err(ApiError::new(
                        Code::AlreadyExists,
                        format!(
                            "spec.interfaces: MAC {} of interface {} is already used by Host '{}' (interface {})",
                            mine.mac_address,
                            mine.name,
                            other.label(),
                            t.name
                        ),
                    ));
                }
            }
        }
        offset += page.items.len() as i64;
        if page.items.is_empty() || offset >= page.total {
            return Ok(());
        }
    }
}
