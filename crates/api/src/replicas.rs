//! This replica as operators see it: `/readyz` and the provider's replica listing
//! (`GET /api/private/v1/replicas`, `osac admin get replicas`).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use osac_store::{SHARDS, Store};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::rest::{AppState, caller, reply, require_provider};

/// `host:pid` of this process.
pub fn process_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string());
    format!("{host}:{}", std::process::id())
}

/// 200 when the database answers, with what this process reconciles; 503 otherwise.
/// `replica` reads, when asked, this process's replica id and how many shards it holds (None:
/// alone on its store).
pub async fn readyz(
    store: Arc<dyn Store>,
    replica: impl FnOnce() -> Option<(String, usize)>,
) -> (StatusCode, String) {
    if store.ping().await.is_err() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "database unavailable".to_string(),
        );
    }
    match replica() {
        None => (StatusCode::OK, "ready".to_string()),
        Some((id, held)) => (
            StatusCode::OK,
            format!("ready\nreplica {id}: holds {held} of {SHARDS} controller shards\n"),
        ),
    }
}

/// `GET /api/private/v1/replicas`: every registered replica, live or recently gone, with the
/// shards whose lease it holds.
pub async fn list(State(s): State<AppState>, headers: HeaderMap) -> Response {
    reply(
        async {
            let caller = caller(&s, &headers).await?;
            require_provider(&caller)?;
            listing(&*s.store).await
        }
        .await,
    )
}

async fn listing(store: &dyn Store) -> ApiResult<Value> {
    let Some(leases) = store.leases() else {
        return Ok(json!({
            "shared": false,
            "shards": SHARDS,
            "size": 0,
            "total": 0,
            "items": [],
            "message": "the embedded store has exactly one process, which reconciles everything",
        }));
    };
    let replicas = leases.replicas().await.map_err(ApiError::from)?;
    let shards = leases.shard_leases().await.map_err(ApiError::from)?;
    let items: Vec<Value> = replicas
        .iter()
        .map(|r| {
            let held: Vec<i32> = shards
                .iter()
                .filter(|l| l.live && l.owner.as_deref() == Some(r.info.id.as_str()))
                .map(|l| l.shard)
                .collect();
            json!({
                "id": r.info.id,
                "name": r.info.name,
                "address": r.info.address,
                "dataplane": r.info.dataplane,
                "live": r.live,
                "started_at": r.started_at,
                "expires_at": r.expires_at,
                "shard_count": held.len(),
                "shards": held,
            })
        })
        .collect();
    let unowned = (0..SHARDS)
        .filter(|s| !shards.iter().any(|l| l.shard == *s && l.live))
        .count();
    Ok(json!({
        "shared": true,
        "shards": SHARDS,
        "unowned_shards": unowned,
        "size": items.len(),
        "total": items.len(),
        "items": items,
    }))
}
