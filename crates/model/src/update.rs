//! Updates at the JSON level: apply a request body to the stored object under an update mask,
//! then check that no immutable field changed.
//!
//! Without a mask, the mask is every leaf field present in the body (so a body holding only
//! `metadata.labels` changes only the labels). Lists and maps are replaced as a whole.

use serde_json::{Map, Value};

use crate::{Invalid, Kind};

/// Fields that are maps: replaced whole, never merged key by key.
const MAP_FIELDS: &[&str] = &[
    "metadata.labels",
    "metadata.annotations",
    "spec.template_parameters",
];

/// Top-level parts a client may change; everything else in a body is ignored.
const WRITABLE_ROOTS: &[&str] = &[
    "metadata",
    "spec",
    "title",
    "description",
    "is_default",
    "interfaces",
    "fabric_manager",
    "k8s_manager",
];

/// Metadata fields a client may change.
const WRITABLE_METADATA: &[&str] = &["name", "labels", "annotations"];

/// Fields that never change after creation, by kind ("once set" fields are handled separately;
/// the lists are in each kind's table in [`crate::kinds`]).
pub fn immutable_fields(kind: Kind) -> &'static [&'static str] {
    kind.spec().immutable_fields
}

/// Fields that may be set once (from empty) and never changed afterwards.
pub fn set_once_fields(kind: Kind) -> &'static [&'static str] {
    kind.spec().set_once_fields
}

/// Returns the stored object with the body's fields applied under the mask.
pub fn apply(current: &Value, body: &Value, mask: Option<&str>) -> Result<Value, Invalid> {
    let paths: Vec<String> = match mask.map(str::trim).filter(|m| !m.is_empty()) {
        Some(m) => m
            .split(',')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect(),
        None => {
            let mut out = Vec::new();
            leaf_paths(body, "", &mut out);
            out
        }
    };
    let mut next = current.clone();
    for path in paths {
        let root = path.split('.').next().unwrap_or_default();
        if !WRITABLE_ROOTS.contains(&root) {
            // Output-only parts (NetworkClass `capabilities` is computed) sent back in a
            // GET-modify-update round trip are ignored, like `id` and `status`.
            if matches!(root, "id" | "status" | "capabilities") {
                continue;
            }
            return Err(Invalid::new(
                path.clone(),
                "field does not exist or cannot be updated",
            ));
        }
        if let Some(meta_field) = path.strip_prefix("metadata.") {
            let top = meta_field.split('.').next().unwrap_or_default();
            if !WRITABLE_METADATA.contains(&top) {
                continue;
            }
        } else if path == "metadata" {
            for f in WRITABLE_METADATA {
                let p = format!("metadata.{f}");
                set_path(&mut next, &p, get_path(body, &p).cloned());
            }
            continue;
        }
        set_path(&mut next, &path, get_path(body, &path).cloned());
    }
    Ok(next)
}

/// Values at a path where `list[]` segments walk every element (a list of values, so a
/// changed element or a changed length both show as a difference).
fn values_at(v: &Value, path: &str) -> Value {
    match path.split_once("[].") {
        None => normalized(get_path(v, path)),
        Some((list, rest)) => match get_path(v, list).and_then(Value::as_array) {
            None => Value::Null,
            Some(items) => Value::Array(items.iter().map(|i| values_at(i, rest)).collect()),
        },
    }
}

/// Fails when an immutable field differs between `old` and `new` (missing = default).
pub fn check_immutable(kind: Kind, old: &Value, new: &Value) -> Result<(), Invalid> {
    for field in immutable_fields(kind) {
        let (a, b) = (values_at(old, field), values_at(new, field));
        if a != b {
            return Err(Invalid::new(
                *field,
                format!("{field} is immutable (current value {a}, requested {b})"),
            ));
        }
    }
    for field in set_once_fields(kind) {
        let (a, b) = (
            normalized(get_path(old, field)),
            normalized(get_path(new, field)),
        );
        if a != Value::Null && a != b {
            return Err(Invalid::new(
                *field,
                format!("{field} cannot change once set (current value {a})"),
            ));
        }
    }
    Ok(())
}

fn normalized(v: Option<&Value>) -> Value {
    match v {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(s)) if s.is_empty() => Value::Null,
        Some(Value::Bool(false)) => Value::Null,
        Some(Value::Number(n)) if n.as_f64() == Some(0.0) => Value::Null,
        Some(Value::Array(a)) if a.is_empty() => Value::Null,
        Some(Value::Object(o)) if o.values().all(|v| normalized(Some(v)) == Value::Null) => {
            Value::Null
        }
        Some(v) => v.clone(),
    }
}

fn leaf_paths(v: &Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(map) if prefix.is_empty() || !MAP_FIELDS.contains(&prefix) => {
            if map.is_empty() && !prefix.is_empty() {
                out.push(prefix.to_string());
            }
            for (k, child) in map {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaf_paths(child, &p, out);
            }
        }
        _ => out.push(prefix.to_string()),
    }
}

/// Reads a dotted path.
pub fn get_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, seg| v.get(seg))
}

fn set_path(v: &mut Value, path: &str, value: Option<Value>) {
    let mut segs: Vec<&str> = path.split('.').collect();
    let Some(last) = segs.pop() else { return };
    let mut cur = v;
    for seg in segs {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Some(map) = cur.as_object_mut() else {
            return;
        };
        cur = map
            .entry(seg.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !cur.is_object() {
        *cur = Value::Object(Map::new());
    }
    if let Some(map) = cur.as_object_mut() {
        match value {
            Some(val) => {
                map.insert(last.to_string(), val);
            }
            None => {
                map.remove(last);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn body_fields_form_the_default_mask() {
        let cur = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"virtual_network": "v", "ingress": [1]}});
        let body = json!({"metadata": {"labels": {"y": "2"}}, "spec": {"ingress": []}, "status": {"state": "X"}});
        let next = apply(&cur, &body, None).unwrap();
        assert_eq!(next["metadata"]["labels"], json!({"y": "2"}));
        assert_eq!(next["metadata"]["name"], "a");
        assert_eq!(next["spec"]["ingress"], json!([]));
        assert_eq!(next["spec"]["virtual_network"], "v");
        assert!(next.get("status").is_none());
    }

    #[test]
    fn explicit_mask_clears_absent_fields() {
        let cur = json!({"spec": {"ingress": [1], "egress": [2]}});
        let next = apply(&cur, &json!({"spec": {}}), Some("spec.egress")).unwrap();
        assert_eq!(next["spec"], json!({"ingress": [1]}));
        assert!(apply(&cur, &json!({}), Some("bogus.x")).is_err());
    }

    #[test]
    fn immutable_and_set_once() {
        let old = json!({"spec": {"virtual_network": "v"}});
        assert!(
            check_immutable(
                Kind::Subnet,
                &old,
                &json!({"spec": {"virtual_network": "w"}})
            )
            .is_err()
        );
        assert!(check_immutable(Kind::Subnet, &old, &old).is_ok());
        assert!(
            check_immutable(Kind::NetworkClass, &json!({}), &json!({"k8s_manager": "k"})).is_ok()
        );
        assert!(
            check_immutable(
                Kind::NetworkClass,
                &json!({"k8s_manager": "k"}),
                &json!({"k8s_manager": "j"})
            )
            .is_err()
        );
    }
}
