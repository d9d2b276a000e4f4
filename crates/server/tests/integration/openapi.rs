//! The OpenAPI document at `GET /api/openapi.json`: every REST route and every field of every
//! message the routes carry is in it, and it equals the checked-in `docs/openapi.json`
//! (`OSAC_UPDATE_OPENAPI=1` rewrites that file instead of failing).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use osac_model::{Kind, Scope};
use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, EnumDescriptorProto, FileDescriptorSet};
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::*;

/// Methods of a collection path and of its item path.
const READ: (&[&str], &[&str]) = (&["get"], &["get"]);
const FULL: (&[&str], &[&str]) = (&["get", "post"], &["get", "patch", "delete"]);

/// What the server serves for a kind on a surface (None = not on that surface): tenant kinds
/// on the public surface (events read-only), provider kinds on the private surface, and
/// provider kinds but the inventory and the tenants readable on the public one.
fn expected(
    kind: Kind,
    private: bool,
) -> Option<(&'static [&'static str], &'static [&'static str])> {
    match (kind.scope(), private) {
        (Scope::Provider, true) => Some(FULL),
        (Scope::Tenant, true) => None,
        (Scope::Provider, false) if matches!(kind, Kind::Tenant | Kind::Host) => None,
        (Scope::Provider, false) => Some(READ),
        (Scope::Tenant, false) if kind == Kind::Event => Some(READ),
        (Scope::Tenant, false) => Some(FULL),
    }
}

fn methods(item: &Value) -> BTreeSet<String> {
    item.as_object()
        .into_iter()
        .flat_map(|o| o.keys())
        .filter(|k| ["get", "post", "put", "patch", "delete"].contains(&k.as_str()))
        .cloned()
        .collect()
}

fn set(m: &[&str]) -> BTreeSet<String> {
    m.iter().map(|s| s.to_string()).collect()
}

/// The proto messages and enums of the descriptor by full name.
struct Types {
    messages: BTreeMap<String, DescriptorProto>,
    enums: BTreeMap<String, EnumDescriptorProto>,
}

fn types(set: &FileDescriptorSet) -> Types {
    fn add(scope: &str, m: &DescriptorProto, t: &mut Types) {
        let name = format!("{scope}.{}", m.name());
        for n in &m.nested_type {
            add(&name, n, t);
        }
        for e in &m.enum_type {
            t.enums.insert(format!("{name}.{}", e.name()), e.clone());
        }
        t.messages.insert(name, m.clone());
    }
    let mut t = Types {
        messages: BTreeMap::new(),
        enums: BTreeMap::new(),
    };
    for f in &set.file {
        for m in &f.message_type {
            add(f.package(), m, &mut t);
        }
        for e in &f.enum_type {
            t.enums
                .insert(format!("{}.{}", f.package(), e.name()), e.clone());
        }
    }
    t
}

fn is_map_entry(m: &DescriptorProto) -> bool {
    m.options.as_ref().is_some_and(|o| o.map_entry())
}

/// Every message and enum reachable from `roots` through fields (map entries looked through,
/// well-known types left out: they are inlined).
fn reachable(t: &Types, roots: &[String]) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<String> = roots.to_vec();
    while let Some(name) = todo.pop() {
        if name.starts_with("google.protobuf.") || !seen.insert(name.clone()) {
            continue;
        }
        let Some(m) = t.messages.get(&name) else {
            assert!(t.enums.contains_key(&name), "unknown type {name}");
            continue;
        };
        for f in &m.field {
            if matches!(f.r#type(), Type::Message | Type::Enum) {
                todo.push(f.type_name().trim_start_matches('.').to_string());
            }
        }
    }
    seen.retain(|n| t.messages.get(n).is_none_or(|m| !is_map_entry(m)));
    seen
}

/// Resolves a `#/components/schemas/…` reference.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    // A nullable property: `anyOf` of the schema and null.
    if let Some(first) = schema
        .get("anyOf")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|s| s["type"] != "null"))
    {
        return resolve(doc, first);
    }
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.trim_start_matches("#/components/schemas/");
            &doc["components"]["schemas"][name]
        }
        None => schema,
    }
}

/// Asserts that every object key in `value` is a property of its schema, recursively.
fn fits(doc: &Value, schema: &Value, value: &Value, at: &str) {
    let schema = resolve(doc, schema);
    match value {
        Value::Object(o) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, v) in o {
                    let p = props
                        .get(k)
                        .unwrap_or_else(|| panic!("{at}.{k} is not in the document"));
                    fits(doc, p, v, &format!("{at}.{k}"));
                }
            } else if let Some(extra) = schema.get("additionalProperties").filter(|a| a.is_object())
            {
                for (k, v) in o {
                    fits(doc, extra, v, &format!("{at}[{k}]"));
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    fits(doc, item, v, &format!("{at}[{i}]"));
                }
            }
        }
        Value::String(_) => {
            if let Some(values) = schema.get("enum").and_then(Value::as_array) {
                assert!(
                    values.contains(value),
                    "{at}: {value} is not a documented value"
                );
            }
        }
        _ => {}
    }
}

fn docs_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_document_covers_every_route_and_field() {
    let s = TestServer::sqlite().await;
    let served = s.anonymous().get("/api/openapi.json").await;
    assert_eq!(
        served.status, 200,
        "served without a token: {}",
        served.text
    );
    let doc = served.body.clone();
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().expect("paths");

    // Every collection on each surface with exactly its methods; nothing else.
    let mut want: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut roots = Vec::new();
    for kind in Kind::ALL {
        for (private, prefix, package) in
            [(false, PUB, "osacnet.v1"), (true, PRIV, "osacnet.admin.v1")]
        {
            let Some((collection, item)) = expected(kind, private) else {
                continue;
            };
            let c = kind.collection();
            want.insert(format!("{prefix}/{c}"), set(collection));
            want.insert(format!("{prefix}/{c}/{{id}}"), set(item));
            let name = kind.display_name();
            roots.push(format!("osacnet.v1.{name}"));
            roots.push(format!("{package}.{name}ListResponse"));
            roots.push(format!("{package}.{name}WatchEvent"));
        }
    }
    want.insert(format!("{PRIV}/tokens"), set(&["post", "get"]));
    want.insert(format!("{PRIV}/tokens/{{id}}"), set(&["delete"]));
    for (path, m) in [
        (format!("{PRIV}/managers"), "get"),
        (format!("{PRIV}/replicas"), "get"),
        (format!("{PRIV}/usage"), "get"),
        (format!("{PUB}/usage"), "get"),
        (format!("{PRIV}/dataplane:gc"), "post"),
        (format!("{PUB}/reachability:explain"), "post"),
        (format!("{PRIV}/reachability:explain"), "post"),
        ("/healthz".into(), "get"),
        ("/readyz".into(), "get"),
        ("/metrics".into(), "get"),
        ("/api/openapi.json".into(), "get"),
    ] {
        want.insert(path, set(&[m]));
    }
    roots.push("osacnet.admin.v1.CreateTokenRequest".into());
    roots.push("osacnet.admin.v1.CreateTokenResponse".into());
    roots.push("osacnet.admin.v1.ListTokensResponse".into());
    roots.push("osacnet.admin.v1.DeleteTokenResponse".into());
    roots.push("osacnet.v1.DeleteResponse".into());
    let got: BTreeMap<String, BTreeSet<String>> =
        paths.iter().map(|(p, v)| (p.clone(), methods(v))).collect();
    assert_eq!(got, want, "paths of the document");

    // List takes the paging, filter, order and watch parameters; PATCH the mask and the lock.
    for (path, item) in paths {
        if let Some(list) = item
            .get("get")
            .filter(|_| want.contains_key(&format!("{path}/{{id}}")) && !path.ends_with("/tokens"))
        {
            let names: BTreeSet<&str> = list["parameters"]
                .as_array()
                .expect("list parameters")
                .iter()
                .filter_map(|p| p["name"].as_str())
                .collect();
            assert_eq!(
                names,
                BTreeSet::from(["offset", "limit", "filter", "order", "watch"]),
                "{path}"
            );
            assert!(
                list["responses"]["200"]["content"]["text/event-stream"].is_object(),
                "{path}: watch stream"
            );
        }
        if let Some(patch) = item.get("patch") {
            let names: BTreeSet<&str> = patch["parameters"]
                .as_array()
                .expect("patch parameters")
                .iter()
                .filter_map(|p| p["name"].as_str())
                .collect();
            assert_eq!(names, BTreeSet::from(["update_mask", "lock"]), "{path}");
        }
    }

    // The server agrees: a documented collection lists (200) and creates (anything but 403 or
    // 404); an undocumented one refuses both.
    let tenant = s.tenant("acme").await;
    for kind in Kind::ALL {
        for (private, prefix, client) in [(false, PUB, &tenant), (true, PRIV, &s.admin)] {
            let path = format!("{prefix}/{}", kind.collection());
            let documented = &want.get(&path).cloned().unwrap_or_default();
            let list = client.get(&path).await;
            assert_eq!(
                list.status == 200,
                documented.contains("get"),
                "GET {path} (private {private}): {} {}",
                list.status,
                list.text
            );
            let create = client
                .send_raw(Method::POST, &path, Some(b"{}".to_vec()))
                .await;
            // Undocumented: 405 where the path is documented for other methods (with `Allow`),
            // 403 or 404 where the kind is not on this surface at all.
            let ok = if documented.contains("post") {
                ![403, 404, 405].contains(&create.status)
            } else if documented.is_empty() {
                [403, 404].contains(&create.status)
            } else {
                create.status == 405
            };
            assert!(ok, "POST {path}: {} {}", create.status, create.text);
        }
    }

    // Real answers fit the schemas: every key of every listed object is a documented property.
    for (prefix, client) in [(PUB, &tenant), (PRIV, &s.admin)] {
        for kind in Kind::ALL {
            let path = format!("{prefix}/{}", kind.collection());
            let Some(op) = paths.get(&path).and_then(|p| p.get("get")) else {
                continue;
            };
            let schema = &op["responses"]["200"]["content"]["application/json"]["schema"];
            let page = client.get(&path).await.ok();
            fits(&doc, schema, &page, &path);
        }
    }

    // Every field of every message the routes carry, and every enum value, is in the schemas;
    // every reference resolves; every proto field has a description (from its comment).
    let set = FileDescriptorSet::decode(osac_proto::FILE_DESCRIPTOR_SET).expect("descriptor");
    let t = types(&set);
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    let needed = reachable(&t, &roots);
    assert!(needed.contains("osacnet.v1.Metadata") && needed.contains("osacnet.v1.Condition"));
    let mut undocumented = Vec::new();
    for name in &needed {
        let schema = schemas
            .get(name)
            .unwrap_or_else(|| panic!("schema {name} is missing"));
        if schema.get("description").is_none() {
            undocumented.push(name.clone());
        }
        if let Some(e) = t.enums.get(name) {
            let values: Vec<&str> = e.value.iter().map(|v| v.name()).collect();
            assert_eq!(schema["enum"], json!(values), "values of {name}");
            continue;
        }
        let m = &t.messages[name];
        let props = schema["properties"].as_object().expect("properties");
        for f in &m.field {
            let p = props
                .get(f.name())
                .unwrap_or_else(|| panic!("field {name}.{} is missing", f.name()));
            if p.get("description").is_none() {
                undocumented.push(format!("{name}.{}", f.name()));
            }
            let is_map = f.label() == Label::Repeated
                && t.messages
                    .get(f.type_name().trim_start_matches('.'))
                    .is_some_and(is_map_entry);
            let want_type = if is_map {
                "object"
            } else if f.label() == Label::Repeated {
                "array"
            } else {
                match f.r#type() {
                    Type::Int64 | Type::Uint64 | Type::Sint64 | Type::Fixed64 | Type::Sfixed64 => {
                        "string"
                    }
                    Type::String => "string",
                    Type::Bool => "boolean",
                    Type::Int32 | Type::Uint32 | Type::Sint32 => "integer",
                    _ => "",
                }
            };
            if !want_type.is_empty() {
                assert!(
                    p["type"] == want_type
                        || p["type"] == json!([want_type, "null"])
                        || (want_type == "string" && p["type"] == json!(["string", "integer"])),
                    "type of {name}.{}: {}",
                    f.name(),
                    p["type"]
                );
            }
        }
        assert_eq!(
            props.len(),
            m.field.len(),
            "{name} has properties that are not proto fields"
        );
    }
    assert!(
        undocumented.is_empty(),
        "proto messages and fields without a comment: {undocumented:?}"
    );
    let text = serde_json::to_string(&doc).expect("json");
    for r in text.split("\"$ref\":\"").skip(1) {
        let target = r.split('"').next().unwrap_or_default();
        let name = target
            .strip_prefix("#/components/schemas/")
            .or_else(|| target.strip_prefix("#/components/responses/"))
            .unwrap_or_else(|| panic!("unexpected $ref {target}"));
        assert!(
            schemas.contains_key(name) || doc["components"]["responses"].get(name).is_some(),
            "$ref {target} does not resolve"
        );
    }

    // The checked-in copy is the served document.
    let file = docs_file();
    if std::env::var("OSAC_UPDATE_OPENAPI").is_ok_and(|v| v == "1") {
        std::fs::write(&file, &served.text).expect("write docs/openapi.json");
    } else {
        let checked_in = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            checked_in == served.text,
            "docs/openapi.json is not the served document; regenerate it with \
             OSAC_UPDATE_OPENAPI=1 cargo nextest run -p osac-api openapi"
        );
    }
    s.finish().await;
}

/// The documented schema of one server-sent event of the watch of `path`'s list operation, and
/// of its `data` (the watch event), resolved.
fn stream_schemas<'a>(doc: &'a Value, path: &str) -> (&'a Value, &'a Value) {
    let stream =
        &doc["paths"][path]["get"]["responses"]["200"]["content"]["text/event-stream"]["schema"];
    assert!(
        stream.get("x-event-schema").is_none(),
        "no private extension"
    );
    let message = &stream["oneOf"][0];
    assert_eq!(
        message["properties"]["event"]["const"], "message",
        "{stream}"
    );
    assert_eq!(
        message["properties"]["data"]["contentMediaType"],
        "application/json"
    );
    let data = resolve(doc, &message["properties"]["data"]["contentSchema"]);
    (stream, data)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_events_fit_the_documented_stream_schema() {
    let s = TestServer::sqlite().await;
    let doc = s.anonymous().get("/api/openapi.json").await.ok();
    let t = s.tenant("acme").await;
    t.ready_vn("net-a", "10.0.0.0/16").await;
    let path = format!("{PUB}/virtual_networks");
    let (stream, event) = stream_schemas(&doc, &path);
    assert_eq!(event["required"], json!(["type", "object"]), "{event}");
    let url = format!("{}{path}?watch=true", t.base());
    let mut resp = reqwest::Client::new()
        .get(url)
        .bearer_auth(t.token.clone().unwrap_or_default())
        .send()
        .await
        .expect("watch");
    assert_eq!(resp.status(), 200);
    let mut buffer = String::new();
    let mut events = Vec::new();
    while events.is_empty() {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(30), resp.chunk())
            .await
            .expect("an event")
            .expect("read")
            .expect("stream open");
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let data: String = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            if !data.is_empty() {
                assert!(
                    !block.contains("event:"),
                    "a change is a plain message: {block}"
                );
                events.push(serde_json::from_str::<Value>(&data).expect("data is JSON"));
            }
        }
    }
    for e in &events {
        for field in event["required"].as_array().expect("required") {
            let field = field.as_str().unwrap_or_default();
            assert!(e.get(field).is_some(), "{field} missing in {e}");
        }
        // `type` is one of the documented values; every key of the object is documented.
        fits(&doc, event, e, "event");
        assert!(
            event["properties"]["type"]["enum"]
                .as_array()
                .is_some_and(|v| v.contains(&e["type"])),
            "{e}"
        );
    }
    assert_eq!(events[0]["type"], "ADDED");
    // The tenant's own networks: its default one and net-a.
    let name = events[0]["object"]["metadata"]["name"]
        .as_str()
        .unwrap_or_default();
    assert!(["default", "net-a"].contains(&name), "{}", events[0]);
    // The error event ends the stream with the error body.
    let error = resolve(
        &doc,
        &stream["oneOf"][1]["properties"]["data"]["contentSchema"],
    );
    assert_eq!(error["required"], json!(["code", "message", "details"]));
    s.finish().await;
}
