//! The web console (docs/console.md): one page under `/console` whose HTML, JavaScript and CSS
//! are compiled into the binary (`crates/api/console/`), plus the three small routes the page needs
//! besides the REST API:
//!
//! - `GET /console/api/session`: who the bearer token is (`{"subject","role","tenant"}`), so the
//!   page can show the provider's tenant picker and only the actions the role may take;
//! - `GET /console/api/quota[?tenant=]`: the quota usage of the caller's own tenant (`tenant`
//!   is ignored for tenant tokens; the provider names the tenant), `{"tenant","usage"}` with
//!   `usage` as the Tenant's `status.usage`. Tenants cannot read their Tenant object, yet
//!   should see how much of their quotas they use;
//! - `GET /console/api/watch?surface=&collections=&filter=`: several watches in one
//!   `text/event-stream`. A browser opens at most six HTTP/1.1 connections to a server, so one
//!   stream per collection (nine for a tenant's network) would leave none for the page's other
//!   requests. Events are those of the REST watch plus the collection they belong to,
//!   `{"collection","type","object"}`, and one `{"collection","type":"SYNCED"}` per collection
//!   once its first batch has been sent: the picture is complete when every collection is
//!   synced.
//!
//! Every answer carries a strict Content-Security-Policy: scripts and styles only from the page's
//! own files (no inline script, no `eval`), requests only to this server, no framing. The page
//! itself renders tenant data with `textContent` and SVG text nodes, never as HTML.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt;
use futures::stream::BoxStream;
use osac_model::{Kind, Scope};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::auth::{Caller, Role};
use crate::error::{ApiError, ApiResult};
use crate::rest::{authenticated, caller, reply};
use crate::service::Service;
use crate::watch::{WatchEvent, WatchReceiver};

/// Where the console is served.
pub const PATH: &str = "/console";

/// The policy of every console answer: nothing but the page's own files and this server.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// Most collections one console stream may watch.
const MAX_COLLECTIONS: usize = 16;

/// A file of the page, compiled in: (name under `/console/`, content type, content).
macro_rules! asset {
    ($name:literal, $type:expr) => {
        ($name, $type, include_str!(concat!("../console/", $name)))
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// The page's files.
const ASSETS: [(&str, &str, &str); 13] = [
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("console.css", "text/css; charset=utf-8"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("dom.js", JS),
    asset!("live.js", JS),
    asset!("model.js", JS),
    asset!("topology.js", JS),
    asset!("details.js", JS),
    asset!("reach.js", JS),
    asset!("provider.js", JS),
    asset!("objects.js", JS),
    asset!("forms.js", JS),
];

/// The console's routes: the page, its files and its two API helpers.
pub fn router(service: Arc<Service>) -> Router {
    Router::new()
        .route(PATH, get(|| async { asset_response("index.html") }))
        .route("/console/", get(|| async { asset_response("index.html") }))
        .route("/console/api/session", get(session))
        .route("/console/api/watch", get(watch))
        .route("/console/api/quota", get(quota))
        .route(
            "/console/{file}",
            get(|Path(file): Path<String>| async move { asset_response(&file) }),
        )
        .with_state(service)
}

/// The security headers every console answer carries.
fn secured(mut resp: Response) -> Response {
    let headers = resp.headers_mut();
    let set = |h: &mut HeaderMap, name: HeaderName, value: &'static str| {
        h.insert(name, HeaderValue::from_static(value));
    };
    set(
        headers,
        header::CONTENT_SECURITY_POLICY,
        CONTENT_SECURITY_POLICY,
    );
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    set(headers, header::REFERRER_POLICY, "no-referrer");
    set(headers, header::CACHE_CONTROL, "no-cache");
    resp
}

fn asset_response(file: &str) -> Response {
    let found = ASSETS.iter().find(|(name, _, _)| *name == file);
    secured(match found {
        Some((_, content_type, body)) => {
            ([(header::CONTENT_TYPE, *content_type)], *body).into_response()
        }
        None => ApiError::not_found(format!("no console file '{file}'")).into_response(),
    })
}

async fn session(State(s): State<Arc<Service>>, headers: HeaderMap) -> Response {
    secured(reply(
        async {
            let c = caller(&s, &headers).await?;
            Ok(json!({"subject": c.subject, "role": c.role.as_str(), "tenant": c.tenant}))
        }
        .await,
    ))
}

/// The quota usage of one tenant: the caller's own (a tenant token cannot name another), or the
/// one the provider names.
async fn quota(
    State(s): State<Arc<Service>>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    secured(reply(
        async {
            let c = caller(&s, &headers).await?;
            let tenant = match (&c.tenant, c.is_provider()) {
                (_, true) => q
                    .get("tenant")
                    .filter(|t| !t.is_empty())
                    .cloned()
                    .ok_or_else(|| ApiError::invalid("tenant: name the tenant"))?,
                (Some(own), false) => own.clone(),
                (None, false) => return Err(ApiError::not_found("the token has no tenant")),
            };
            // Read as the provider, but only ever the tenant fixed above.
            let reader = Caller {
                subject: c.subject.clone(),
                tenant: None,
                role: Role::ProviderAdmin,
            };
            let obj = s
                .get(&reader, Scope::Provider, Kind::Tenant, &tenant)
                .await?;
            Ok(json!({"tenant": tenant, "usage": obj["status"]["usage"].clone()}))
        }
        .await,
    ))
}

/// The watch parameters: which surface and collections, with one filter for all of them.
fn watched_kinds(q: &HashMap<String, String>) -> ApiResult<(Scope, Vec<Kind>)> {
    let surface = match q.get("surface").map(String::as_str) {
        None | Some("") | Some("fulfillment") => Scope::Tenant,
        Some("private") => Scope::Provider,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "surface: '{other}' is not fulfillment or private"
            )));
        }
    };
    let mut kinds = Vec::new();
    for name in q
        .get("collections")
        .map(String::as_str)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
    {
        let kind = Kind::ALL
            .into_iter()
            .find(|k| k.collection() == name)
            .ok_or_else(|| {
                ApiError::invalid(format!("collections: unknown collection '{name}'"))
            })?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    if kinds.is_empty() {
        return Err(ApiError::invalid(
            "collections: give at least one collection, separated by commas",
        ));
    }
    if kinds.len() > MAX_COLLECTIONS {
        return Err(ApiError::invalid(format!(
            "collections: at most {MAX_COLLECTIONS} collections per stream"
        )));
    }
    Ok((surface, kinds))
}

async fn watch(
    State(s): State<Arc<Service>>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let started = async {
        let who = authenticated(&s, &headers).await?;
        let (surface, kinds) = watched_kinds(&q)?;
        let filter = q.get("filter").map(String::as_str).unwrap_or_default();
        let mut streams = Vec::with_capacity(kinds.len());
        // One slot per collection, all taken before any watch starts.
        let slots = s.take_watch_slots(&who, kinds.len())?;
        for (kind, slot) in kinds.into_iter().zip(slots) {
            let (rx, synced) = s
                .watch_reporting_sync(&who, surface, kind, filter, slot)
                .await?;
            streams.push(collection_stream(kind.collection(), rx, synced));
        }
        Ok::<_, ApiError>(streams)
    }
    .await;
    secured(match started {
        Ok(streams) => {
            let events =
                futures::stream::select_all(streams).map(Ok::<_, std::convert::Infallible>);
            Sse::new(events)
                .keep_alive(KeepAlive::default())
                .into_response()
        }
        Err(e) => e.into_response(),
    })
}

/// What one collection's watch contributes to the stream.
enum Item {
    Event(ApiResult<WatchEvent>),
    Synced,
}

impl Item {
    fn into_sse(self, collection: &str) -> SseEvent {
        match self {
            Item::Event(Ok(event)) => {
                let mut v = event.to_json();
                v["collection"] = json!(collection);
                SseEvent::default().data(v.to_string())
            }
            Item::Event(Err(e)) => {
                let mut v: Value = e.body();
                v["collection"] = json!(collection);
                SseEvent::default().event("error").data(v.to_string())
            }
            Item::Synced => SseEvent::default()
                .data(json!({"collection": collection, "type": "SYNCED"}).to_string()),
        }
    }
}

/// One collection's events, with `SYNCED` right after the last event of its first batch.
fn collection_stream(
    collection: &'static str,
    rx: WatchReceiver,
    synced: oneshot::Receiver<()>,
) -> BoxStream<'static, SseEvent> {
    struct St {
        rx: WatchReceiver,
        synced: Option<oneshot::Receiver<()>>,
        pending: VecDeque<Item>,
    }
    let start = St {
        rx,
        synced: Some(synced),
        pending: VecDeque::new(),
    };
    futures::stream::unfold(start, move |mut st| async move {
        loop {
            if let Some(item) = st.pending.pop_front() {
                return Some((item.into_sse(collection), st));
            }
            let Some(synced) = st.synced.as_mut() else {
                let event = st.rx.recv().await?;
                return Some((Item::Event(event).into_sse(collection), st));
            };
            let fired = tokio::select! {
                event = st.rx.recv() => Err(event),
                fired = synced => Ok(fired.is_ok()),
            };
            let fired = match fired {
                Err(event) => return Some((Item::Event(event?).into_sse(collection), st)),
                Ok(fired) => fired,
            };
            st.synced = None;
            // The whole first batch is queued: pass it on, then the marker. A watch that failed
            // before its first batch ended never fires; its error follows instead.
            while let Ok(event) = st.rx.try_recv() {
                st.pending.push_back(Item::Event(event));
            }
            if fired {
                st.pending.push_back(Item::Synced);
            }
        }
    })
    .boxed()
}
