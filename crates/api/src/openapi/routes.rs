//! The routes of the proto services: collection routes (list, get, watch, create, update,
//! delete) and single routes, with their parameters and responses.

use osac_model::Kind;
use prost_types::ServiceDescriptorProto;
use serde_json::{Map, Value, json};

use crate::service::{DEFAULT_LIMIT, MAX_LIMIT};

use super::schemas::{Schemas, Svc, type_name};
use super::{OpenApiError, Surface};

pub(super) fn error_response() -> Value {
    json!({ "$ref": "#/components/responses/Error" })
}

pub(super) fn json_content(schema: Value) -> Value {
    json!({ "application/json": { "schema": schema } })
}

pub(super) fn ok(description: &str, schema: Value) -> Value {
    json!({
        "200": { "description": description, "content": json_content(schema) },
        "default": error_response(),
    })
}

pub(super) fn query(name: &str, description: &str, schema: Value) -> Value {
    json!({ "name": name, "in": "query", "required": false, "description": description, "schema": schema })
}

pub(super) fn id_param() -> Value {
    json!({
        "name": "id", "in": "path", "required": true,
        "description": "Object id; a name is accepted and resolved in the caller's tenant.",
        "schema": { "type": "string", "pattern": super::constraints::ID }
    })
}

pub(super) fn rpc<'s>(
    s: &'s ServiceDescriptorProto,
    name: &str,
) -> Option<&'s prost_types::MethodDescriptorProto> {
    s.method.iter().find(|m| m.name() == name)
}

/// The collection routes of one service.
pub(super) fn collection_paths(
    surface: &Surface,
    svc: &Svc<'_>,
    schemas: &mut Schemas<'_, '_>,
    paths: &mut Map<String, Value>,
) -> Result<(), OpenApiError> {
    let s = svc.desc;
    let full = format!("{}.{}", svc.package, s.name());
    let get = rpc(s, "Get").ok_or_else(|| OpenApiError::UnknownService(full.clone()))?;
    let object = type_name(get.output_type()).to_string();
    let short = object.rsplit('.').next().unwrap_or_default();
    let kind = Kind::ALL
        .into_iter()
        .find(|k| k.display_name() == short)
        .ok_or_else(|| OpenApiError::UnknownService(full.clone()))?;
    let collection = kind.collection();
    let op = |verb: &str| format!("{}.{collection}.{verb}", surface.name);
    let tags = json!([short]);
    let obj_ref = schemas.reference(get.output_type());

    let mut list_path = Map::new();
    if let Some(list) = rpc(s, "List") {
        let page = schemas.reference(list.output_type());
        let mut content = json_content(page);
        let mut params = vec![
            query(
                "offset",
                "Objects to skip.",
                json!({ "type": "integer", "format": "int64", "minimum": 0, "maximum": i64::MAX, "default": 0 }),
            ),
            query(
                "limit",
                &format!(
                    "Page size; 0 or absent = {DEFAULT_LIMIT}; larger values than {MAX_LIMIT} are refused (page with offset)."
                ),
                json!({ "type": "integer", "minimum": 0, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT }),
            ),
            query(
                "filter",
                "CEL expression over the object as `this`, e.g. `this.spec.virtual_network == \"net\"` (a reference field matches the referenced object's id or name); docs/api.md lists what the filter language takes.",
                json!({ "type": "string", "format": "osac-filter" }),
            ),
            query(
                "order",
                "Comma list of `field [asc|desc]` over the kind's fields; default creation order.",
                json!({ "type": "string", "format": "osac-order" }),
            ),
        ];
        if let Some(watch) = rpc(s, "Watch") {
            let event = schemas.reference(watch.output_type());
            params.push(query(
                "watch",
                "true: answer `text/event-stream` instead of a page (filter applies; offset, limit and order do not).",
                json!({ "type": "boolean", "default": false }),
            ));
            if let Some(c) = content.as_object_mut() {
                c.insert(
                    "text/event-stream".into(),
                    json!({ "schema": stream_event_schema(event) }),
                );
            }
        }
        list_path.insert(
            "get".into(),
            json!({
                "operationId": op("list"),
                "summary": format!("List {collection}"),
                "tags": tags,
                "parameters": params,
                "responses": {
                    "200": { "description": "A page of objects (or, with watch=true, a stream of changes).", "content": content },
                    "default": error_response(),
                },
            }),
        );
    }
    if let Some(create) = rpc(s, "Create") {
        let body = schemas.reference(create.input_type());
        list_path.insert(
            "post".into(),
            json!({
                "operationId": op("create"),
                "summary": format!("Create a {short}"),
                "tags": tags,
                "requestBody": { "required": true, "content": json_content(body) },
                "responses": ok("The created object.", obj_ref.clone()),
            }),
        );
    }
    if !list_path.is_empty() {
        paths.insert(format!("{}/{collection}", surface.prefix), list_path.into());
    }

    let mut item = Map::new();
    item.insert("parameters".into(), json!([id_param()]));
    item.insert(
        "get".into(),
        json!({
            "operationId": op("get"),
            "summary": format!("Get a {short}"),
            "tags": tags,
            "responses": ok("The object.", obj_ref.clone()),
        }),
    );
    if rpc(s, "Update").is_some() {
        item.insert(
            "patch".into(),
            json!({
                "operationId": op("update"),
                "summary": format!("Update a {short}"),
                "tags": tags,
                "parameters": [
                    query("update_mask", "Comma-separated field paths to take from the body (a listed field absent from the body is cleared); absent = every field present in the body. Also accepted as a body field.", json!({ "type": "string" })),
                    query("lock", "true: fail with ABORTED (409) unless metadata.version in the body is current.", json!({ "type": "boolean", "default": false })),
                ],
                "requestBody": { "required": true, "content": json_content(obj_ref.clone()) },
                "responses": ok("The updated object.", obj_ref.clone()),
            }),
        );
    }
    if let Some(delete) = rpc(s, "Delete") {
        let out = schemas.reference(delete.output_type());
        item.insert(
            "delete".into(),
            json!({
                "operationId": op("delete"),
                "summary": format!("Delete a {short} (marks it; it is gone once its controller has undone it)"),
                "tags": tags,
                "responses": ok("Deletion started (or the object is already being deleted).", out),
            }),
        );
    }
    paths.insert(
        format!("{}/{collection}/{{id}}", surface.prefix),
        item.into(),
    );
    Ok(())
}

/// The boolean fields of a request message as query parameters (`?force=true`), with their
/// comments.
fn bool_query_parameters(schemas: &Schemas<'_, '_>, proto: &str) -> Vec<Value> {
    let Some(msg) = schemas.ix.messages.get(proto.trim_start_matches('.')) else {
        return Vec::new();
    };
    msg.desc
        .field
        .iter()
        .zip(&msg.fields)
        .filter(|(f, _)| f.r#type() == prost_types::field_descriptor_proto::Type::Bool)
        .map(|(f, comment)| {
            query(
                f.name(),
                comment.as_deref().unwrap_or_default(),
                json!({ "type": "boolean", "default": false }),
            )
        })
        .collect()
}

/// A route of a non-collection service (one Create rpc ⇒ POST).
pub(super) fn single_path(
    surface: &Surface,
    svc: &Svc<'_>,
    path: &str,
    schemas: &mut Schemas<'_, '_>,
    paths: &mut Map<String, Value>,
) -> Result<(), OpenApiError> {
    let full = format!("{}.{}", svc.package, svc.desc.name());
    let create =
        rpc(svc.desc, "Create").ok_or_else(|| OpenApiError::UnknownService(full.clone()))?;
    let input = schemas.reference(create.input_type());
    let output = schemas.reference(create.output_type());
    let mut collection = json!({
        "post": {
            "operationId": format!("{}.{path}.create", surface.name),
            "summary": format!("Create {path}"),
            "tags": [svc.desc.name()],
            "requestBody": { "required": true, "content": json_content(input) },
            "responses": ok("Created.", output),
        }
    });
    // `List` answers GET on the collection, `Delete` DELETE on `/{id}` (its request's `id`).
    if let Some(list) = rpc(svc.desc, "List") {
        let listed = schemas.reference(list.output_type());
        collection["get"] = json!({
            "operationId": format!("{}.{path}.list", surface.name),
            "summary": format!("List {path}"),
            "tags": [svc.desc.name()],
            "responses": ok("Every item.", listed),
        });
    }
    paths.insert(format!("{}/{path}", surface.prefix), collection);
    if let Some(delete) = rpc(svc.desc, "Delete") {
        let _ = schemas.reference(delete.input_type());
        let done = schemas.reference(delete.output_type());
        let mut parameters = vec![
            json!({ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }),
        ];
        parameters.extend(bool_query_parameters(schemas, delete.input_type()));
        paths.insert(
            format!("{}/{path}/{{id}}", surface.prefix),
            json!({
                "delete": {
                    "operationId": format!("{}.{path}.delete", surface.name),
                    "summary": format!("Delete one of {path} by id"),
                    "tags": [svc.desc.name()],
                    "parameters": parameters,
                    "responses": ok("Deleted.", done),
                }
            }),
        );
    }
    Ok(())
}

/// `POST {prefix}/{path}`: one rpc of a service that is an action, not a collection (e.g.
/// `reachability:explain`), on `surface`.
pub(super) fn action_path(
    surface: &Surface,
    svc: &Svc<'_>,
    rpc_name: &str,
    path: &str,
    schemas: &mut Schemas<'_, '_>,
    paths: &mut Map<String, Value>,
) -> Result<(), OpenApiError> {
    let full = format!("{}.{}", svc.package, svc.desc.name());
    let call = rpc(svc.desc, rpc_name).ok_or(OpenApiError::UnknownService(full))?;
    let input = schemas.reference(call.input_type());
    let output = schemas.reference(call.output_type());
    paths.insert(
        format!("{}/{path}", surface.prefix),
        json!({
            "post": {
                "operationId": format!("{}.{path}", surface.name),
                "summary": format!("{} {}", svc.desc.name(), rpc_name),
                "tags": [svc.desc.name()],
                "requestBody": { "required": true, "content": json_content(input) },
                "responses": ok("The answer.", output),
            }
        }),
    );
    Ok(())
}

/// One server-sent event of a watch (`text/event-stream`), as a stream reader sees it: a
/// message whose `data` is the JSON of `event` (the kind's watch event), or an `error` event
/// whose `data` is the error body and which ends the stream. The current objects come first as
/// ADDED; comment lines keep idle connections open and are no events.
pub(super) fn stream_event_schema(event: Value) -> Value {
    let json_data = |schema: Value, d: &str| {
        json!({
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": schema,
            "description": d,
        })
    };
    json!({
        "description": "One server-sent event of a watch: a change (`data` is the watch event JSON: `type` ADDED, MODIFIED or DELETED and the `object`; the current objects come first as ADDED), or an `error` event (`data` is the error body) that ends the stream.",
        "oneOf": [
            {
                "type": "object",
                "required": ["data"],
                "properties": {
                    "event": { "const": "message" },
                    "data": json_data(event, "The watch event as JSON."),
                    "id": { "type": "string" },
                },
            },
            {
                "type": "object",
                "required": ["event", "data"],
                "properties": {
                    "event": { "const": "error" },
                    "data": json_data(error_schema_ref(), "The error body as JSON."),
                    "id": { "type": "string" },
                },
            },
        ],
    })
}

fn error_schema_ref() -> Value {
    json!({ "$ref": "#/components/schemas/Error" })
}
