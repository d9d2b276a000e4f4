//! Routes and schemas that are not defined in proto: health, metrics, managers, dataplane
//! garbage collection, errors.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::error::Code;

use super::PATH;
use super::routes::{json_content, ok};
use super::schemas::{described, schema_ref};

/// Routes and schemas that are not defined in proto.
pub(super) fn hand_written(paths: &mut Map<String, Value>, schemas: &mut BTreeMap<String, Value>) {
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
        json!({ "get": { "operationId": "metrics", "summary": "Prometheus metrics (text exposition format); a provider-admin token is required on the API port, none on the metrics listener (--metrics-listen)", "tags": ["Operations"], "responses": {
            "200": { "description": "The metrics.", "content": { "text/plain": { "schema": { "type": "string" } } } },
            "default": super::routes::error_response(),
        } } }),
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
    let usage_params = |tenant: &str| {
        json!([
            super::routes::query(
                "from",
                "Start of the period (RFC 3339, inclusive); default a day before `to`.",
                json!({ "type": "string", "format": "date-time" })
            ),
            super::routes::query(
                "to",
                "End of the period (RFC 3339, exclusive); default now.",
                json!({ "type": "string", "format": "date-time" })
            ),
            super::routes::query(
                "group_by",
                "Comma-separated dimensions: tenant, tenant_id, kind, object, network_class, ip_family, attached, parent_kind, parent.",
                json!({ "type": "string" })
            ),
            super::routes::query(
                "meter",
                "allocation or bandwidth; omitted: both.",
                json!({ "type": "string", "enum": ["allocation", "bandwidth"] })
            ),
            super::routes::query("tenant", tenant, json!({ "type": "string" })),
        ])
    };
    for (surface, id, tenant) in [
        (
            "private",
            "private.usage.get",
            "Only this tenant's usage, by its name (the tenant that has the name now) or its id (also of a deleted tenant); a value that is neither answers no usage; omitted: every tenant.",
        ),
        (
            "fulfillment",
            "usage.get",
            "The caller's own tenant; naming another is refused (403).",
        ),
    ] {
        paths.insert(
            format!("/api/{surface}/v1/usage"),
            json!({ "get": { "operationId": id, "summary": "Resource-seconds and bytes per group of dimensions over a period", "tags": ["Metering"],
                "parameters": usage_params(tenant),
                "responses": ok("The usage of the period, per group.", schema_ref("UsageReport")) } }),
        );
    }
    schemas.insert(
        "UsageReport".into(),
        json!({
            "type": "object",
            "properties": {
                "from": { "type": "string", "format": "date-time" },
                "to": { "type": "string", "format": "date-time" },
                "meter": { "type": "string", "description": "allocation, bandwidth or all." },
                "group_by": { "type": "array", "items": { "type": "string" } },
                "groups": { "type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "dimensions": { "type": "object", "additionalProperties": { "type": "string" }, "description": "The value of each group_by dimension." },
                        "resource_seconds": { "type": "string", "format": "int64" },
                        "ingress_bytes": { "type": "string", "format": "int64" },
                        "egress_bytes": { "type": "string", "format": "int64" },
                    },
                } },
            },
        }),
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
        list_schema("Manager", "Number of registered managers.", json!({})),
    );
    schemas.insert(
        "ReplicaList".into(),
        list_schema(
            "Replica",
            "Number of replicas listed.",
            json!({
                "shared": { "type": "boolean", "description": "Whether the store is shared by replicas (PostgreSQL); false: one process reconciles everything." },
                "shards": { "type": "integer", "description": "Number of controller shards." },
                "unowned_shards": { "type": "integer", "description": "Shards no live replica holds right now." },
            }),
        ),
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
            "properties": { "scope": described(json!({ "type": ["array", "null"], "items": { "type": "string" } }), Some("Only these namespaces; absent or null = all.")) },
            "additionalProperties": false,
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

/// The schema of a private list reply: `size` items of schema `item`, the `total` counted as
/// `total_description` says, and the list's own `extra` properties (a JSON object).
fn list_schema(item: &str, total_description: &str, extra: Value) -> Value {
    let mut properties = match extra {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    properties.insert(
        "size".into(),
        json!({ "type": "integer", "description": "Number of items." }),
    );
    properties.insert(
        "total".into(),
        json!({ "type": "integer", "description": total_description }),
    );
    properties.insert(
        "items".into(),
        json!({ "type": "array", "items": schema_ref(item) }),
    );
    json!({ "type": "object", "properties": properties })
}
