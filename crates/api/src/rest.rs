//! REST transport (docs/api.md): parses paths, query and body into a typed call of the shared
//! [`Service`]; errors become `{"code","message","details"}` with the mapped HTTP status.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use osac_model::{Kind, Scope};
use serde_json::{Value, json};

use crate::auth::{Authenticated, Caller};
use crate::deprecation;
use crate::error::{ApiError, ApiResult};
use crate::service::{ListParams, Service, UpdateOptions};
use crate::token_service::MintRequest;
use crate::watch::WatchReceiver;

/// Largest request body accepted.
pub const BODY_LIMIT: usize = 1024 * 1024;

pub(crate) type AppState = Arc<Service>;

/// The REST routes of both surfaces plus token minting and the manager list.
pub fn router(service: Arc<Service>) -> Router {
    let collection = |surface: Scope| {
        Router::new()
            .route(
                "/reachability:explain",
                post(move |s, h, b| explain(s, h, b, surface)),
            )
            .route(
                "/{collection}",
                get(move |s, p, q, h| list(s, p, q, h, surface))
                    .post(move |s, p, h, b| create(s, p, h, b, surface)),
            )
            .route(
                "/{collection}/{id}",
                get(move |s, p, h| get_one(s, p, h, surface))
                    .patch(move |s, p, q, h, b| update(s, p, q, h, b, surface))
                    .delete(move |s, p, h| delete(s, p, h, surface)),
            )
    };
    let private = Router::new()
        .route("/tokens", post(mint_token).get(list_tokens))
        .route("/tokens/{id}", axum::routing::delete(revoke_token))
        .route("/managers", get(managers))
        .route("/replicas", get(crate::replicas::list))
        .route("/usage", get(crate::usage::private))
        .merge(collection(Scope::Provider));
    Router::new()
        .nest(
            "/api/fulfillment/v1",
            Router::new()
                .route("/usage", get(crate::usage::fulfillment))
                .merge(collection(Scope::Tenant)),
        )
        .nest("/api/private/v1", private)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(axum::middleware::map_response(method_not_allowed_body))
        .layer(axum::middleware::from_fn(
            crate::allowed_methods::refuse_undeclared,
        ))
        .with_state(service)
}

pub(crate) async fn caller(service: &Service, headers: &HeaderMap) -> ApiResult<Caller> {
    let caller = service
        .auth
        .authenticate(headers.get("authorization").and_then(|v| v.to_str().ok()))
        .await?;
    crate::access::note_subject(&caller.subject);
    Ok(caller)
}

/// The caller of a request that opens a stream, with the credential the stream keeps checking.
pub(crate) async fn authenticated(
    service: &Service,
    headers: &HeaderMap,
) -> ApiResult<Authenticated> {
    let who = service
        .auth
        .authenticate_stream(headers.get("authorization").and_then(|v| v.to_str().ok()))
        .await?;
    crate::access::note_subject(&who.caller.subject);
    Ok(who)
}

fn kind_of(collection: &str) -> ApiResult<Kind> {
    Kind::ALL
        .into_iter()
        .find(|k| k.collection() == collection)
        .ok_or_else(|| ApiError::not_found(format!("unknown collection '{collection}'")))
}

fn json_body(body: &Bytes) -> ApiResult<Value> {
    if body.is_empty() {
        return Err(ApiError::invalid(
            "request body is empty; expected a JSON object",
        ));
    }
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("malformed JSON body: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::invalid("request body must be a JSON object"));
    }
    Ok(v)
}

/// A body that could not be read (over [`BODY_LIMIT`]: 413) as the JSON error body. An
/// oversized message is RESOURCE_EXHAUSTED in gRPC terms; REST keeps the specific 413.
fn body_rejection(r: BytesRejection) -> Response {
    let status = r.status();
    let (code, message) = if status == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        (
            "RESOURCE_EXHAUSTED",
            format!("request body is larger than the limit of {BODY_LIMIT} bytes"),
        )
    } else {
        (
            "INVALID_ARGUMENT",
            format!("cannot read the request body: {}", r.body_text()),
        )
    };
    let mut resp = (
        status,
        Json(json!({"code": code, "message": message, "details": []})),
    )
        .into_response();
    // The unread rest of the body is still on the wire: tell HTTP/1 clients not to reuse the
    // connection (hyper strips this header on HTTP/2).
    resp.headers_mut().insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    resp
}

/// The raw request body; one that cannot be read (over [`BODY_LIMIT`]) is answered with
/// [`body_rejection`] before the handler runs (so before authentication).
struct RequestBody(Bytes);

impl<S: Send + Sync> FromRequest<S> for RequestBody {
    type Rejection = Response;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Response> {
        Bytes::from_request(req, state)
            .await
            .map(RequestBody)
            .map_err(body_rejection)
    }
}

fn int_param(q: &HashMap<String, String>, name: &str) -> ApiResult<i64> {
    match q.get(name).map(|s| s.trim()) {
        None => Ok(0),
        Some(s) => s
            .parse()
            .map_err(|_| ApiError::invalid(format!("{name}: '{s}' is not an integer"))),
    }
}

/// Provider-only routes that are not collections (managers, replicas).
pub(crate) fn require_provider(caller: &Caller) -> ApiResult<()> {
    if caller.is_provider() {
        Ok(())
    } else {
        Err(ApiError::denied(
            "the private API is for provider administrators",
        ))
    }
}

pub(crate) fn reply(r: ApiResult<Value>) -> Response {
    match r {
        Ok(v) => Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn list(
    State(s): State<AppState>,
    Path(collection): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    surface: Scope,
) -> Response {
    async {
        if watch_param(&q)? {
            let who = authenticated(&s, &headers).await?;
            let kind = kind_of(&collection)?;
            let filter = q.get("filter").map(String::as_str).unwrap_or_default();
            return Ok::<_, ApiError>(event_stream(s.watch(&who, surface, kind, filter).await?));
        }
        let caller = caller(&s, &headers).await?;
        let kind = kind_of(&collection)?;
        let params = ListParams {
            offset: int_param(&q, "offset")?,
            limit: int_param(&q, "limit")?,
            filter: q.get("filter").cloned().unwrap_or_default(),
            order: q.get("order").cloned().unwrap_or_default(),
        };
        Ok(s.list_json(&caller, surface, kind, params)
            .await?
            .into_response())
    }
    .await
    .unwrap_or_else(IntoResponse::into_response)
}

/// A watch as `text/event-stream`: one `data:` line per event, `{"type","object"}`; an error
/// ends the stream with an `error` event carrying `{"code","message","details"}`. Comment lines
/// keep idle connections open through proxies.
fn event_stream(rx: WatchReceiver) -> Response {
    // The watcher sends an error as its last item and then ends, which ends the stream.
    let events = futures::stream::unfold(rx, |mut rx| async move {
        let event = match rx.recv().await? {
            Ok(event) => SseEvent::default().data(event.to_json().to_string()),
            Err(e) => SseEvent::default()
                .event("error")
                .data(e.body().to_string()),
        };
        Some((Ok::<_, std::convert::Infallible>(event), rx))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// `?watch=`: `true` streams changes, `false` (or no parameter) lists; nothing else is a
/// boolean.
fn watch_param(q: &HashMap<String, String>) -> ApiResult<bool> {
    match q.get("watch").map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(ApiError::invalid(format!(
            "watch: expected true or false, got {other:?}"
        ))),
    }
}

/// A 405 of the router (a method no route of the path takes) gets the error body every other
/// refusal has; the router adds its `Allow` header.
async fn method_not_allowed_body(method: axum::http::Method, response: Response) -> Response {
    if response.status() != axum::http::StatusCode::METHOD_NOT_ALLOWED {
        return response;
    }
    let body = serde_json::json!({
        "code": "METHOD_NOT_ALLOWED",
        "message": format!("{method} is not allowed on this path (its Allow header lists what is)"),
        "details": [],
    });
    let (mut parts, _) = response.into_parts();
    parts.headers.insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(body.to_string()))
}

async fn create(
    State(s): State<AppState>,
    Path(collection): Path<String>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
    surface: Scope,
) -> Response {
    let mut warning = None;
    let mut response = reply(
        async {
            let caller = caller(&s, &headers).await?;
            let kind = kind_of(&collection)?;
            let body = json_body(&body)?;
            warning = deprecation::create_warning_json(kind, &body);
            s.create_json(&caller, surface, kind, body).await
        }
        .await,
    );
    if let Some(text) = warning
        && response.status().is_success()
        && let Ok(value) = HeaderValue::from_str(&deprecation::warning_value(text))
    {
        response.headers_mut().insert(header::WARNING, value);
    }
    response
}

async fn get_one(
    State(s): State<AppState>,
    Path((collection, id)): Path<(String, String)>,
    headers: HeaderMap,
    surface: Scope,
) -> Response {
    async {
        let caller = caller(&s, &headers).await?;
        let object = s
            .get_json(&caller, surface, kind_of(&collection)?, &id)
            .await?;
        Ok::<_, ApiError>(object.into_response())
    }
    .await
    .unwrap_or_else(IntoResponse::into_response)
}

async fn update(
    State(s): State<AppState>,
    Path((collection, id)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
    surface: Scope,
) -> Response {
    reply(
        async {
            let caller = caller(&s, &headers).await?;
            let kind = kind_of(&collection)?;
            let mut body = json_body(&body)?;
            let mut mask = q.get("update_mask").cloned();
            if let Some(Value::String(m)) =
                body.as_object_mut().and_then(|o| o.remove("update_mask"))
            {
                mask.get_or_insert(m);
            }
            let lock = match q.get("lock").map(String::as_str) {
                None | Some("false") | Some("") => false,
                Some("true") => true,
                Some(other) => {
                    return Err(ApiError::invalid(format!(
                        "lock: '{other}' is not true or false"
                    )));
                }
            };
            let how = UpdateOptions {
                mask: mask.as_deref(),
                lock,
            };
            s.update_json(&caller, surface, kind, &id, body, how).await
        }
        .await,
    )
}

async fn delete(
    State(s): State<AppState>,
    Path((collection, id)): Path<(String, String)>,
    headers: HeaderMap,
    surface: Scope,
) -> Response {
    reply(
        async {
            let caller = caller(&s, &headers).await?;
            s.delete(&caller, surface, kind_of(&collection)?, &id)
                .await?;
            Ok(json!({}))
        }
        .await,
    )
}

/// `POST …/reachability:explain`: the request JSON (proto field names, enums by name,
/// unknown fields refused) → the explanation JSON.
async fn explain(
    State(s): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
    surface: Scope,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(r) => return body_rejection(r),
    };
    reply(
        async {
            let caller = caller(&s, &headers).await?;
            let v = json_body(&body)?;
            let req: osac_model::pb::ExplainReachabilityRequest = serde_json::from_value(v)
                .map_err(|e| ApiError::invalid(format!("request body: {e}")))?;
            let answer = s.explain_reachability(&caller, surface, &req).await?;
            serde_json::to_value(answer)
                .map_err(|e| ApiError::new(crate::error::Code::Internal, e.to_string()))
        }
        .await,
    )
}

async fn mint_token(
    State(s): State<AppState>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> Response {
    reply(
        async {
            let caller = caller(&s, &headers).await?;
            let v = json_body(&body)?;
            const FIELDS: [&str; 5] = ["tenant", "role", "subject", "expires_in", "expires_at"];
            if let Some(obj) = v.as_object() {
                if let Some(extra) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
                    return Err(ApiError::invalid(format!(
                        "unknown field '{extra}' (expected {})",
                        FIELDS.join(", ")
                    )));
                }
                if let Some((k, _)) = obj.iter().find(|(_, v)| !v.is_string() && !v.is_null()) {
                    return Err(ApiError::invalid(format!("{k}: must be a string")));
                }
            }
            let field = |n: &str| {
                v.get(n)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let minted = s
                .mint_token(
                    &caller,
                    MintRequest {
                        tenant: field("tenant"),
                        role: field("role"),
                        subject: field("subject"),
                        expires_in: field("expires_in"),
                        expires_at: field("expires_at"),
                    },
                )
                .await?;
            serde_json::to_value(minted)
                .map_err(|e| ApiError::new(crate::error::Code::Internal, e.to_string()))
        }
        .await,
    )
}

async fn list_tokens(State(s): State<AppState>, headers: HeaderMap) -> Response {
    reply(
        async {
            let caller = caller(&s, &headers).await?;
            let items = s.list_tokens(&caller).await?;
            let size = items.len();
            let items = serde_json::to_value(items)
                .map_err(|e| ApiError::new(crate::error::Code::Internal, e.to_string()))?;
            Ok(json!({"size": size, "total": size, "items": items}))
        }
        .await,
    )
}

async fn revoke_token(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    reply(
        async {
            let caller = caller(&s, &headers).await?;
            let force = match query.get("force").map(String::as_str) {
                None | Some("false") => false,
                Some("true") => true,
                Some(other) => {
                    return Err(ApiError::invalid(format!(
                        "force: expected true or false, got '{other}'"
                    )));
                }
            };
            let presented = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(crate::auth::bearer_secret);
            s.revoke_token(&caller, presented, &id, force).await?;
            Ok(json!({}))
        }
        .await,
    )
}

async fn managers(State(s): State<AppState>, headers: HeaderMap) -> Response {
    reply(
        async {
            let caller = caller(&s, &headers).await?;
            require_provider(&caller)?;
            let mut items: Vec<Value> = s
            .registry
            .registrations()
            .into_iter()
            .map(|r| {
                json!({
                    "name": r.name,
                    "role": r.role.as_str(),
                    "description": r.description,
                    "capabilities": r.capabilities.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
                    "driver": r.driver.kind(),
                    "hosting_clusters": r.hosting_clusters,
                })
            })
            .collect();
            // The provisioner registration, if any, listed with the same fields.
            if let Some(p) = s.registry.provisioner() {
                items.push(json!({
                    "name": p.name,
                    "role": p.role(),
                    "description": p.description,
                    "capabilities": Vec::<&str>::new(),
                    "driver": p.driver.kind(),
                    "hosting_clusters": Vec::<String>::new(),
                }));
            }
            Ok(json!({"size": items.len(), "total": items.len(), "items": items}))
        }
        .await,
    )
}
