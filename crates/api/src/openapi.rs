//! The OpenAPI 3.1 document of the REST API, generated from the proto descriptor: every service
//! of `osacnet.v1` becomes routes under `/api/fulfillment/v1`, every service of
//! `osacnet.admin.v1` routes under `/api/private/v1` (List/Get/Watch ⇒ GET, Create ⇒ POST,
//! Update ⇒ PATCH, Delete ⇒ DELETE), and the messages reachable from them become
//! `components.schemas` (JSON Schema 2020-12, proto-JSON shapes) with the proto comments as
//! descriptions. Routes not defined in proto (managers, dataplane GC, health, metrics) are added
//! by hand. Served at `GET /api/openapi.json`; a copy is checked in as `docs/openapi.json`.

use std::collections::{BTreeMap, HashMap, VecDeque};

use osac_model::Kind;
use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorSet,
    ServiceDescriptorProto,
};
use serde_json::{Map, Value, json};

use crate::error::Code;
use crate::service::{DEFAULT_LIMIT, MAX_LIMIT};

/// Path of the document itself.
pub const PATH: &str = "/api/openapi.json";

/// Why the document cannot be generated from a descriptor.
#[derive(Debug, thiserror::Error)]
pub enum OpenApiError {
    #[error("cannot decode the file descriptor set")]
    Decode(#[from] prost::DecodeError),
    #[error("the descriptor references type '{0}', which it does not define")]
    UnknownType(String),
    #[error("service '{0}' maps to no REST collection")]
    UnknownService(String),
    #[error("cannot render the document")]
    Render(#[from] serde_json::Error),
}

/// A REST surface: the proto package its services live in and the URL prefix.
struct Surface {
    package: &'static str,
    prefix: &'static str,
    name: &'static str,
}

const SURFACES: [Surface; 2] = [
    Surface {
        package: "osacnet.v1",
        prefix: "/api/fulfillment/v1",
        name: "fulfillment",
    },
    Surface {
        package: "osacnet.admin.v1",
        prefix: "/api/private/v1",
        name: "private",
    },
];

/// Services that are not collections: service full name → (path under the prefix).
const SINGLE_ROUTES: [(&str, &str); 1] = [("osacnet.admin.v1.Tokens", "tokens")];

/// A message with its comments.
struct Msg<'a> {
    desc: &'a DescriptorProto,
    comment: Option<String>,
    fields: Vec<Option<String>>,
}

/// An enum with its comments.
struct Enum<'a> {
    desc: &'a EnumDescriptorProto,
    comment: Option<String>,
    values: Vec<Option<String>>,
}

/// A service with its package.
struct Svc<'a> {
    package: String,
    desc: &'a ServiceDescriptorProto,
}

/// Every type of the descriptor by full name (without the leading dot).
#[derive(Default)]
struct Index<'a> {
    messages: HashMap<String, Msg<'a>>,
    enums: HashMap<String, Enum<'a>>,
    services: Vec<Svc<'a>>,
}

/// A comment as one line: the lines of a proto `//` comment joined by spaces.
fn one_line(c: &str) -> Option<String> {
    let s = c
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    (!s.is_empty()).then_some(s)
}

impl<'a> Index<'a> {
    fn new(set: &'a FileDescriptorSet) -> Self {
        let mut ix = Index::default();
        for file in &set.file {
            let mut comments: HashMap<&[i32], String> = HashMap::new();
            if let Some(info) = &file.source_code_info {
                for loc in &info.location {
                    let text = loc
                        .leading_comments
                        .as_deref()
                        .or(loc.trailing_comments.as_deref());
                    if let Some(c) = text.and_then(one_line) {
                        comments.insert(loc.path.as_slice(), c);
                    }
                }
            }
            let package = file.package.clone().unwrap_or_default();
            for (i, m) in file.message_type.iter().enumerate() {
                ix.add_message(&package, m, vec![4, i as i32], &comments);
            }
            for (i, e) in file.enum_type.iter().enumerate() {
                ix.add_enum(&package, e, vec![5, i as i32], &comments);
            }
            for s in &file.service {
                ix.services.push(Svc {
                    package: package.clone(),
                    desc: s,
                });
            }
        }
        ix
    }

    fn add_message(
        &mut self,
        scope: &str,
        m: &'a DescriptorProto,
        path: Vec<i32>,
        comments: &HashMap<&[i32], String>,
    ) {
        let name = format!("{scope}.{}", m.name());
        let at = |tail: &[i32]| {
            let mut p = path.clone();
            p.extend_from_slice(tail);
            comments.get(p.as_slice()).cloned()
        };
        let fields = (0..m.field.len()).map(|f| at(&[2, f as i32])).collect();
        for (j, n) in m.nested_type.iter().enumerate() {
            let mut p = path.clone();
            p.extend([3, j as i32]);
            self.add_message(&name, n, p, comments);
        }
        for (j, e) in m.enum_type.iter().enumerate() {
            let mut p = path.clone();
            p.extend([4, j as i32]);
            self.add_enum(&name, e, p, comments);
        }
        self.messages.insert(
            name,
            Msg {
                desc: m,
                comment: at(&[]),
                fields,
            },
        );
    }

    fn add_enum(
        &mut self,
        scope: &str,
        e: &'a EnumDescriptorProto,
        path: Vec<i32>,
        comments: &HashMap<&[i32], String>,
    ) {
        let at = |tail: &[i32]| {
            let mut p = path.clone();
            p.extend_from_slice(tail);
            comments.get(p.as_slice()).cloned()
        };
        let values = (0..e.value.len()).map(|v| at(&[2, v as i32])).collect();
        self.enums.insert(
            format!("{scope}.{}", e.name()),
            Enum {
                desc: e,
                comment: at(&[]),
                values,
            },
        );
    }
}

/// `.osacnet.v1.Subnet` → `osacnet.v1.Subnet`.
fn type_name(proto: &str) -> &str {
    proto.strip_prefix('.').unwrap_or(proto)
}

fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// Adds a description to a schema (next to a `$ref` too: allowed in JSON Schema 2020-12).
fn described(mut schema: Value, description: Option<&str>) -> Value {
    if let (Some(d), Some(o)) = (description, schema.as_object_mut()) {
        o.insert("description".into(), json!(d));
    }
    schema
}

/// The proto-JSON form of the well-known types, inlined where they are used.
fn well_known(name: &str) -> Option<Value> {
    Some(match name {
        "google.protobuf.Timestamp" => json!({
            "type": "string", "format": "date-time",
            "description": "RFC 3339 timestamp in UTC, e.g. \"2026-01-02T03:04:05Z\"."
        }),
        "google.protobuf.Duration" => json!({
            "type": "string", "description": "Duration in seconds with an \"s\" suffix, e.g. \"1.5s\"."
        }),
        "google.protobuf.Value" => json!({ "description": "Any JSON value." }),
        "google.protobuf.Struct" => json!({ "type": "object" }),
        "google.protobuf.ListValue" => json!({ "type": "array" }),
        "google.protobuf.Empty" => json!({ "type": "object", "additionalProperties": false }),
        "google.protobuf.FieldMask" => json!({
            "type": "string", "description": "Comma-separated field paths."
        }),
        _ => return None,
    })
}

/// Builds `components.schemas` from the messages and enums reachable from the routes.
struct Schemas<'a, 'i> {
    ix: &'i Index<'a>,
    done: BTreeMap<String, Value>,
    queue: VecDeque<String>,
}

impl<'a, 'i> Schemas<'a, 'i> {
    /// A reference to a proto type, queued for emission (well-known types inline).
    fn reference(&mut self, proto: &str) -> Value {
        let name = type_name(proto);
        if let Some(v) = well_known(name) {
            return v;
        }
        if !self.done.contains_key(name) && !self.queue.iter().any(|q| q == name) {
            self.queue.push_back(name.to_string());
        }
        schema_ref(name)
    }

    fn scalar(&mut self, f: &FieldDescriptorProto) -> Result<Value, OpenApiError> {
        Ok(match f.r#type() {
            Type::Double | Type::Float => json!({ "type": "number" }),
            Type::Int32 | Type::Sint32 | Type::Sfixed32 => {
                json!({ "type": "integer", "format": "int32" })
            }
            Type::Uint32 | Type::Fixed32 => {
                json!({ "type": "integer", "format": "int32", "minimum": 0 })
            }
            // proto-JSON writes 64-bit integers as strings (numbers are accepted on input).
            Type::Int64 | Type::Sint64 | Type::Sfixed64 | Type::Uint64 | Type::Fixed64 => {
                json!({ "type": "string", "format": "int64", "pattern": "^-?[0-9]+$" })
            }
            Type::Bool => json!({ "type": "boolean" }),
            Type::String => json!({ "type": "string" }),
            Type::Bytes => json!({ "type": "string", "contentEncoding": "base64" }),
            Type::Enum | Type::Message | Type::Group => {
                let name = f.type_name();
                if !self.ix.messages.contains_key(type_name(name))
                    && !self.ix.enums.contains_key(type_name(name))
                    && well_known(type_name(name)).is_none()
                {
                    return Err(OpenApiError::UnknownType(name.to_string()));
                }
                self.reference(name)
            }
        })
    }

    fn field(&mut self, f: &FieldDescriptorProto) -> Result<Value, OpenApiError> {
        if f.label() != Label::Repeated {
            return self.scalar(f);
        }
        if f.r#type() == Type::Message {
            let entry = self.ix.messages.get(type_name(f.type_name()));
            if let Some(entry) = entry.filter(|m| {
                m.desc
                    .options
                    .as_ref()
                    .is_some_and(|o| o.map_entry.unwrap_or(false))
            }) {
                let value = entry
                    .desc
                    .field
                    .iter()
                    .find(|v| v.number() == 2)
                    .ok_or_else(|| OpenApiError::UnknownType(f.type_name().to_string()))?;
                let value = self.scalar(value)?;
                return Ok(json!({ "type": "object", "additionalProperties": value }));
            }
        }
        Ok(json!({ "type": "array", "items": self.scalar(f)? }))
    }

    fn message(&mut self, name: &str) -> Result<Value, OpenApiError> {
        let ix = self.ix;
        let m = ix
            .messages
            .get(name)
            .ok_or_else(|| OpenApiError::UnknownType(name.to_string()))?;
        let mut props = Map::new();
        for (f, comment) in m.desc.field.iter().zip(&m.fields) {
            let schema = self.field(f)?;
            props.insert(f.name().to_string(), described(schema, comment.as_deref()));
        }
        let schema = json!({
            "type": "object",
            "properties": props,
            // Unknown fields are rejected.
            "additionalProperties": false,
        });
        Ok(described(schema, m.comment.as_deref()))
    }

    fn enumeration(&self, name: &str) -> Option<Value> {
        let e = self.ix.enums.get(name)?;
        let names: Vec<&str> = e.desc.value.iter().map(|v| v.name()).collect();
        let mut text: Vec<String> = e.comment.iter().cloned().collect();
        text.push("Written by name; the number is accepted on input.".into());
        for (v, c) in e.desc.value.iter().zip(&e.values) {
            if let Some(c) = c {
                text.push(format!("- {}: {c}", v.name()));
            }
        }
        Some(json!({ "type": "string", "enum": names, "description": text.join("\n") }))
    }

    /// Emits every queued type (and what they reference).
    fn drain(&mut self) -> Result<(), OpenApiError> {
        while let Some(name) = self.queue.pop_front() {
            let schema = match self.enumeration(&name) {
                Some(e) => e,
                None => self.message(&name)?,
            };
            self.done.insert(name, schema);
        }
        Ok(())
    }
}

fn error_response() -> Value {
    json!({ "$ref": "#/components/responses/Error" })
}

fn json_content(schema: Value) -> Value {
    json!({ "application/json": { "schema": schema } })
}

fn ok(description: &str, schema: Value) -> Value {
    json!({
        "200": { "description": description, "content": json_content(schema) },
        "default": error_response(),
    })
}

fn query(name: &str, description: &str, schema: Value) -> Value {
    json!({ "name": name, "in": "query", "required": false, "description": description, "schema": schema })
}

fn id_param() -> Value {
    json!({
        "name": "id", "in": "path", "required": true,
        "description": "Object id; a name is accepted and resolved in the caller's tenant.",
        "schema": { "type": "string" }
    })
}

fn rpc<'s>(
    s: &'s ServiceDescriptorProto,
    name: &str,
) -> Option<&'s prost_types::MethodDescriptorProto> {
    s.method.iter().find(|m| m.name() == name)
}

/// The collection routes of one service.
fn collection_paths(
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
                json!({ "type": "integer", "minimum": 0, "default": 0 }),
            ),
            query(
                "limit",
                &format!(
                    "Page size; 0 or absent = {DEFAULT_LIMIT}, larger values than {MAX_LIMIT} are capped."
                ),
                json!({ "type": "integer", "minimum": 0, "default": DEFAULT_LIMIT }),
            ),
            query(
                "filter",
                "CEL expression over the object as `this`, e.g. `this.spec.virtual_network == \"net\"`.",
                json!({ "type": "string" }),
            ),
            query(
                "order",
                "Comma list of `field [asc|desc]`; default creation order.",
                json!({ "type": "string" }),
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
                    json!({
                        "schema": {
                            "type": "string",
                            "description": "Server-sent events with watch=true: one `data:` line per change carrying the watch event JSON ({\"type\":\"ADDED|MODIFIED|DELETED\",\"object\":{…}}), the current objects first as ADDED. An `event: error` line whose data is the error body ends the stream.",
                        },
                        "x-event-schema": event,
                    }),
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

/// A route of a non-collection service (one Create rpc ⇒ POST).
fn single_path(
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
        paths.insert(
            format!("{}/{path}/{{id}}", surface.prefix),
            json!({
                "delete": {
                    "operationId": format!("{}.{path}.delete", surface.name),
                    "summary": format!("Delete one of {path} by id"),
                    "tags": [svc.desc.name()],
                    "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
                    "responses": ok("Deleted.", done),
                }
            }),
        );
    }
    Ok(())
}

/// Routes and schemas that are not defined in proto.
fn hand_written(paths: &mut Map<String, Value>, schemas: &mut BTreeMap<String, Value>) {
    let text = |d: &str| json!({ "200": { "description": d, "content": { "text/plain": { "schema": { "type": "string" } } } } });
    paths.insert(
        "/healthz".into(),
        json!({ "get": { "operationId": "healthz", "summary": "Liveness: the process serves requests", "tags": ["Operations"], "security": [], "responses": text("\"ok\".") } }),
    );
    paths.insert(
        "/readyz".into(),
        json!({ "get": { "operationId": "readyz", "summary": "Readiness: the database answers", "tags": ["Operations"], "security": [], "responses": {
            "200": { "description": "\"ready\"; on PostgreSQL a second line with the controller shards this replica holds.", "content": { "text/plain": { "schema": { "type": "string" } } } },
            "503": { "description": "\"database unavailable\".", "content": { "text/plain": { "schema": { "type": "string" } } } },
        } } }),
    );
    paths.insert(
        "/metrics".into(),
        json!({ "get": { "operationId": "metrics", "summary": "Prometheus metrics (text exposition format)", "tags": ["Operations"], "security": [], "responses": text("The metrics.") } }),
    );
    paths.insert(
        PATH.into(),
        json!({ "get": { "operationId": "openapi", "summary": "This OpenAPI document", "tags": ["Operations"], "security": [], "responses": {
            "200": { "description": "The document.", "content": json_content(json!({ "type": "object" })) }
        } } }),
    );
    paths.insert(
        "/api/private/v1/managers".into(),
        json!({ "get": { "operationId": "private.managers.list", "summary": "List the registered managers", "tags": ["Managers"],
            "responses": ok("Every registered manager.", schema_ref("ManagerList")) } }),
    );
    paths.insert(
        "/api/private/v1/replicas".into(),
        json!({ "get": { "operationId": "private.replicas.list", "summary": "List the control-plane replicas sharing the database and the controller shards each holds", "tags": ["Managers"],
            "responses": ok("Every replica registered in the last hour.", schema_ref("ReplicaList")) } }),
    );
    paths.insert(
        "/api/private/v1/dataplane:gc".into(),
        json!({ "post": { "operationId": "private.dataplane.gc", "summary": "Remove kernel state of the linux dataplane that no stored object owns", "tags": ["Managers"],
            "requestBody": { "required": false, "content": json_content(schema_ref("DataplaneGcRequest")) },
            "responses": ok("What was removed.", schema_ref("DataplaneGcReport")) } }),
    );
    let codes = [
        Code::InvalidArgument,
        Code::Unauthenticated,
        Code::PermissionDenied,
        Code::NotFound,
        Code::AlreadyExists,
        Code::Aborted,
        Code::FailedPrecondition,
        Code::ResourceExhausted,
        Code::Unavailable,
        Code::Internal,
    ];
    let mapping = codes
        .iter()
        .map(|c| format!("{} {}", c.name(), c.http().as_u16()))
        .collect::<Vec<_>>()
        .join(", ");
    schemas.insert(
        "Error".into(),
        json!({
            "type": "object",
            "description": format!("An error; the HTTP status follows the code: {mapping}."),
            "required": ["code", "message", "details"],
            "properties": {
                "code": { "type": "string", "enum": codes.iter().map(|c| c.name()).collect::<Vec<_>>(), "description": "gRPC status code name." },
                "message": { "type": "string", "description": "What is wrong, naming the field and the rule." },
                "details": { "type": "array", "items": {}, "description": "Always empty for now." },
            },
        }),
    );
    let strings = json!({ "type": "array", "items": { "type": "string" } });
    schemas.insert(
        "Manager".into(),
        json!({
            "type": "object",
            "description": "A registered manager (fabric or k8s).",
            "properties": {
                "name": { "type": "string", "description": "Registration name, referenced by NetworkClass.fabric_manager and k8s_manager." },
                "role": { "type": "string", "description": "fabric or k8s." },
                "description": { "type": "string", "description": "Human description from the registration." },
                "capabilities": described(strings.clone(), Some("Capabilities the manager declared.")),
                "driver": { "type": "string", "description": "Driver kind, e.g. sim or linux." },
                "hosting_clusters": described(strings.clone(), Some("Hosting clusters the manager serves.")),
            },
        }),
    );
    schemas.insert(
        "ManagerList".into(),
        json!({
            "type": "object",
            "properties": {
                "size": { "type": "integer", "description": "Number of items." },
                "total": { "type": "integer", "description": "Number of registered managers." },
                "items": { "type": "array", "items": schema_ref("Manager") },
            },
        }),
    );
    schemas.insert(
        "ReplicaList".into(),
        json!({
            "type": "object",
            "properties": {
                "shared": { "type": "boolean", "description": "Whether the store is shared by replicas (PostgreSQL); false: one process reconciles everything." },
                "shards": { "type": "integer", "description": "Number of controller shards." },
                "unowned_shards": { "type": "integer", "description": "Shards no live replica holds right now." },
                "size": { "type": "integer", "description": "Number of items." },
                "total": { "type": "integer", "description": "Number of replicas listed." },
                "items": { "type": "array", "items": schema_ref("Replica") },
            },
        }),
    );
    schemas.insert(
        "Replica".into(),
        json!({
            "type": "object",
            "properties": {
                "id": { "type": "string", "description": "Unique per process start." },
                "name": { "type": "string", "description": "host:pid." },
                "address": { "type": "string", "description": "Where it serves the API." },
                "dataplane": { "type": "boolean", "description": "Whether it drives the linux dataplane (then it runs alone)." },
                "live": { "type": "boolean", "description": "Its registration has not expired." },
                "started_at": { "type": "string", "format": "date-time" },
                "expires_at": { "type": "string", "format": "date-time", "description": "Its registration lapses then unless renewed." },
                "shard_count": { "type": "integer" },
                "shards": { "type": "array", "items": { "type": "integer" }, "description": "The controller shards whose lease it holds." },
            },
        }),
    );
    schemas.insert(
        "DataplaneGcRequest".into(),
        json!({
            "type": "object",
            "description": "Optional body; an empty body collects everything.",
            "properties": { "scope": described(strings.clone(), Some("Only these namespaces; absent = all.")) },
        }),
    );
    schemas.insert(
        "DataplaneGcReport".into(),
        json!({
            "type": "object",
            "properties": {
                "namespaces": described(strings.clone(), Some("Deleted namespaces.")),
                "bridges": described(strings.clone(), Some("Deleted bridges, as namespace/bridge.")),
                "processes": { "type": "array", "items": { "type": "integer" }, "description": "Killed dnsmasq processes (pids)." },
                "tables": described(strings, Some("Deleted nft tables, as namespace/family name.")),
            },
        }),
    );
}

/// The OpenAPI document of the REST API described by an encoded `FileDescriptorSet`.
pub fn document(descriptor: &[u8]) -> Result<Value, OpenApiError> {
    let set = FileDescriptorSet::decode(descriptor)?;
    let ix = Index::new(&set);
    let mut schemas = Schemas {
        ix: &ix,
        done: BTreeMap::new(),
        queue: VecDeque::new(),
    };
    let mut paths = Map::new();
    for surface in &SURFACES {
        let mut services: Vec<&Svc<'_>> = ix
            .services
            .iter()
            .filter(|s| s.package == surface.package)
            .collect();
        services.sort_by_key(|s| s.desc.name());
        for svc in services {
            let full = format!("{}.{}", svc.package, svc.desc.name());
            match SINGLE_ROUTES.iter().find(|(name, _)| *name == full) {
                Some((_, path)) => single_path(surface, svc, path, &mut schemas, &mut paths)?,
                None => collection_paths(surface, svc, &mut schemas, &mut paths)?,
            }
        }
    }
    schemas.drain()?;
    let mut components = schemas.done;
    hand_written(&mut paths, &mut components);
    Ok(json!({
        "openapi": "3.1.0",
        "info": {
            "title": "osac-net REST API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Tenant collections under /api/fulfillment/v1, provider collections under /api/private/v1. JSON is the proto3 JSON mapping with proto field names (snake_case), enums by name, int64 as strings, unset fields omitted and unknown fields rejected. Generated from the proto definitions.",
        },
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": { "type": "http", "scheme": "bearer", "description": "A token minted with POST /api/private/v1/tokens (kept in the store), or a JWT of the identity provider." }
            },
            "responses": {
                "Error": { "description": "An error.", "content": json_content(schema_ref("Error")) }
            },
            "schemas": components,
        },
    }))
}

/// The document as served and checked in: pretty JSON with a final newline.
pub fn document_json(descriptor: &[u8]) -> Result<Vec<u8>, OpenApiError> {
    let mut out = serde_json::to_vec_pretty(&document(descriptor)?)?;
    out.push(b'\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> Value {
        document(osac_proto::FILE_DESCRIPTOR_SET).expect("document")
    }

    #[test]
    fn routes_come_from_the_services() {
        let d = doc();
        let paths = &d["paths"];
        let subnets = &paths["/api/fulfillment/v1/subnets"];
        assert!(subnets["get"].is_object() && subnets["post"].is_object());
        let item = &paths["/api/fulfillment/v1/subnets/{id}"];
        for m in ["get", "patch", "delete"] {
            assert!(item[m].is_object(), "subnets/{{id}} {m}");
        }
        // Read-only on the public surface.
        let classes = &paths["/api/fulfillment/v1/network_classes"];
        assert!(classes["get"].is_object() && classes.get("post").is_none());
        assert!(
            paths["/api/fulfillment/v1/events/{id}"]
                .get("delete")
                .is_none()
        );
        // Provider only.
        assert!(paths.get("/api/fulfillment/v1/tenants").is_none());
        assert!(paths["/api/private/v1/tenants"]["post"].is_object());
        assert!(paths["/api/private/v1/tokens"]["post"].is_object());
        assert_eq!(
            subnets["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/osacnet.v1.SubnetListResponse"
        );
    }

    #[test]
    fn schemas_follow_proto_json_and_carry_comments() {
        let d = doc();
        let s = &d["components"]["schemas"];
        let status = &s["osacnet.v1.SubnetStatus"]["properties"];
        assert_eq!(status["segment_id"]["type"], "string", "int64 as string");
        assert_eq!(
            status["state"]["$ref"],
            "#/components/schemas/osacnet.v1.SubnetState"
        );
        assert!(
            s["osacnet.v1.SubnetState"]["enum"]
                .as_array()
                .is_some_and(|e| e.contains(&json!("SUBNET_STATE_READY")))
        );
        let meta = &s["osacnet.v1.Metadata"]["properties"];
        assert_eq!(meta["labels"]["type"], "object");
        assert_eq!(meta["labels"]["additionalProperties"]["type"], "string");
        assert_eq!(meta["creation_timestamp"]["format"], "date-time");
        assert_eq!(s["osacnet.v1.Subnet"]["additionalProperties"], false);
        // Comments become descriptions.
        assert!(
            s["osacnet.admin.v1.CreateTokenRequest"]["properties"]["role"]["description"]
                .as_str()
                .is_some_and(|t| t.contains("tenant-admin"))
        );
        // Only what routes reach: gRPC-only request messages are absent.
        assert!(s.get("osacnet.v1.SubnetUpdateRequest").is_none());
        assert!(s.get("osacnet.v1.ListRequest").is_none());
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(matches!(
            document(b"\xff\xff\xff"),
            Err(OpenApiError::Decode(_))
        ));
    }
}
