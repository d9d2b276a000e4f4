//! The JSON object as the API shows it (`{"id","metadata",…body}`) and back to store parts.

use std::collections::BTreeMap;

use osac_model::Kind;
use osac_store::Record;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};

/// Renders a record as its API object. Finalizers are shown on the private API only.
pub fn to_object(rec: &Record, show_finalizers: bool) -> Value {
    let mut obj = Map::new();
    obj.insert("id".into(), json!(rec.id));
    obj.insert(
        "metadata".into(),
        Value::Object(metadata_of(rec, show_finalizers)),
    );
    if let Value::Object(body) = &rec.body {
        for (k, v) in body {
            obj.insert(k.clone(), v.clone());
        }
    }
    show_zero_counters(rec.kind, &mut obj);
    Value::Object(obj)
}

/// The `metadata` of a record's API object (whatever form its body is in). Finalizers are
/// shown on the private API only; internal annotations never.
pub(crate) fn metadata_of<Body>(rec: &Record<Body>, show_finalizers: bool) -> Map<String, Value> {
    let mut meta = Map::new();
    if let Some(n) = &rec.name {
        meta.insert("name".into(), json!(n));
    }
    if !rec.tenant.is_empty() {
        meta.insert("tenant".into(), json!(rec.tenant));
    }
    if !rec.creator.is_empty() {
        meta.insert("creator".into(), json!(rec.creator));
    }
    if !rec.labels.is_empty() {
        meta.insert("labels".into(), json!(rec.labels));
    }
    let annotations: BTreeMap<&String, &String> = rec
        .annotations
        .iter()
        .filter(|(k, _)| !is_internal_annotation(k))
        .collect();
    if !annotations.is_empty() {
        meta.insert("annotations".into(), json!(annotations));
    }
    meta.insert(
        "creation_timestamp".into(),
        json!(
            rec.created_at
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        ),
    );
    if let Some(d) = rec.deleted_at {
        meta.insert(
            "deletion_timestamp".into(),
            json!(d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
        );
    }
    meta.insert("version".into(), json!(rec.version.to_string()));
    if show_finalizers && !rec.finalizers.is_empty() {
        meta.insert("finalizers".into(), json!(rec.finalizers));
    }
    meta
}

/// Status counters a reader compares (an exhausted pool's `available`): proto-JSON omits a
/// field holding 0, so they are filled in — `"0"`, an int64 in proto-JSON — when absent.
fn show_zero_counters(kind: Kind, obj: &mut Map<String, Value>) {
    let counters: &[&str] = match kind {
        Kind::ExternalIpPool => &["total", "allocated", "available"],
        _ => return,
    };
    let status = obj.entry("status").or_insert_with(|| json!({}));
    if let Value::Object(status) = status {
        for name in counters {
            status.entry(*name).or_insert_with(|| json!("0"));
        }
    }
}

/// Parses a JSON object into its proto type: unknown fields and wrong types are INVALID_ARGUMENT
/// naming the offending field (e.g. `spec.ingress[0].protocol: unknown variant …`).
pub fn parse<T: DeserializeOwned>(kind: Kind, value: Value) -> ApiResult<T> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        // pbjson's "expecting" text already starts with "expected".
        let inner = e
            .inner()
            .to_string()
            .replace("expected expected", "expected");
        let path = e.path().to_string();
        if path.is_empty() || path == "." {
            ApiError::invalid(format!("invalid {} object: {inner}", kind.display_name()))
        } else {
            ApiError::invalid(format!(
                "{path}: {inner} (in {} object)",
                kind.display_name()
            ))
        }
    })
}

/// Checks the `metadata` of an update body as strictly as a create does: unknown fields and
/// wrongly typed values (e.g. a number as a label value) are INVALID_ARGUMENT, never ignored.
pub fn check_metadata(kind: Kind, body: &Value) -> ApiResult<()> {
    let Some(meta) = body.get("metadata") else {
        return Ok(());
    };
    serde_path_to_error::deserialize::<_, osac_model::pb::Metadata>(meta.clone())
        .map(|_| ())
        .map_err(|e| {
            let inner = e
                .inner()
                .to_string()
                .replace("expected expected", "expected");
            let path = e.path().to_string();
            let field = if path.is_empty() || path == "." {
                "metadata".to_string()
            } else {
                format!("metadata.{path}")
            };
            ApiError::invalid(format!(
                "{field}: {inner} (in {} object)",
                kind.display_name()
            ))
        })
}

/// Serialises a proto value to its JSON object.
pub fn to_json<T: serde::Serialize>(v: &T) -> ApiResult<Value> {
    serde_json::to_value(v).map_err(|e| ApiError::new(crate::error::Code::Internal, e.to_string()))
}

/// The user-settable metadata of a request object.
#[derive(Debug, Default)]
pub struct UserMetadata {
    pub name: Option<String>,
    pub tenant: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub version: Option<i64>,
}

/// Reads metadata from a request object (read-only fields are ignored, except the tenant and
/// version which callers may need).
pub fn user_metadata(value: &Value) -> UserMetadata {
    let Some(m) = value.get("metadata") else {
        return UserMetadata::default();
    };
    let map = |v: Option<&Value>| -> BTreeMap<String, String> {
        v.and_then(Value::as_object)
            .map(|o| {
                o.iter()
                    .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                    .collect()
            })
            .unwrap_or_default()
    };
    UserMetadata {
        name: m
            .get("name")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        tenant: m
            .get("tenant")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        labels: map(m.get("labels")),
        annotations: map(m.get("annotations")),
        version: m.get("version").and_then(|v| {
            v.as_str()
                .and_then(|s| s.parse().ok())
                .or_else(|| v.as_i64())
        }),
    }
}

/// The body of a typed object: everything but id and metadata.
pub fn body_of(value: &Value) -> Value {
    let mut v = value.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("id");
        o.remove("metadata");
    }
    v
}

/// Annotations the controllers keep for themselves: hidden from clients, kept across updates.
pub fn is_internal_annotation(key: &str) -> bool {
    osac_model::annotations::is_internal(key)
}
