//! OVSDB values in their JSON notation (RFC 7047 §5.1): atoms are JSON strings, numbers and
//! booleans; a UUID is `["uuid", "…"]`, a reference to a row inserted by the same transaction
//! `["named-uuid", "…"]`; a set is `["set", [atoms]]` (a one-element set may be the bare atom);
//! a map is `["map", [[key, value], …]]`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// A row's UUID.
pub fn uuid(id: &str) -> Value {
    json!(["uuid", id])
}

/// A row inserted earlier in the same transaction under `name`.
pub fn named_uuid(name: &str) -> Value {
    json!(["named-uuid", name])
}

/// A set of atoms.
pub fn set(items: impl IntoIterator<Item = Value>) -> Value {
    json!(["set", items.into_iter().collect::<Vec<_>>()])
}

/// A set of strings.
pub fn string_set<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> Value {
    set(items.into_iter().map(|s| Value::from(s.as_ref())))
}

/// A map of string keys to string values (`external_ids`, `options`…).
pub fn string_map<K: AsRef<str>, V: AsRef<str>>(pairs: impl IntoIterator<Item = (K, V)>) -> Value {
    let pairs: Vec<Value> = pairs
        .into_iter()
        .map(|(k, v)| json!([k.as_ref(), v.as_ref()]))
        .collect();
    json!(["map", pairs])
}

/// The UUID a value holds (`["uuid", id]`), if it is one.
pub fn as_uuid(v: &Value) -> Option<&str> {
    match v.as_array().map(Vec::as_slice) {
        Some([tag, Value::String(id)]) if tag == "uuid" => Some(id),
        _ => None,
    }
}

/// The atoms of a set (a bare atom is a one-element set; `["set", []]` the empty one).
pub fn set_items(v: &Value) -> Vec<&Value> {
    match v.as_array().map(Vec::as_slice) {
        Some([tag, Value::Array(items)]) if tag == "set" => items.iter().collect(),
        _ => vec![v],
    }
}

/// The strings of a set of strings (other atoms are skipped).
pub fn string_set_items(v: &Value) -> Vec<String> {
    set_items(v)
        .into_iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect()
}

/// The UUIDs of a set of references.
pub fn uuid_set_items(v: &Value) -> Vec<String> {
    set_items(v)
        .into_iter()
        .filter_map(|a| as_uuid(a).map(str::to_string))
        .collect()
}

/// A map of strings to strings (pairs of other types are skipped; not a map ⇒ empty).
pub fn string_map_items(v: &Value) -> BTreeMap<String, String> {
    let Some([tag, Value::Array(pairs)]) = v.as_array().map(Vec::as_slice) else {
        return BTreeMap::new();
    };
    if tag != "map" {
        return BTreeMap::new();
    }
    pairs
        .iter()
        .filter_map(|p| match p.as_array().map(Vec::as_slice) {
            Some([Value::String(k), Value::String(v)]) => Some((k.clone(), v.clone())),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_and_decodes_sets_maps_and_uuids() {
        let s = string_set(["a", "b"]);
        assert_eq!(s, json!(["set", ["a", "b"]]));
        assert_eq!(string_set_items(&s), ["a", "b"]);
        assert_eq!(string_set_items(&json!("solo")), ["solo"]);
        assert!(string_set_items(&json!(["set", []])).is_empty());

        let m = string_map([("osac-id", "x"), ("osac-tenant", "t")]);
        assert_eq!(m, json!(["map", [["osac-id", "x"], ["osac-tenant", "t"]]]));
        let back = string_map_items(&m);
        assert_eq!(back["osac-id"], "x");
        assert_eq!(back.len(), 2);
        assert!(string_map_items(&json!(["set", []])).is_empty());

        let u = uuid("0b4f");
        assert_eq!(as_uuid(&u), Some("0b4f"));
        assert_eq!(as_uuid(&named_uuid("n")), None);
        assert_eq!(uuid_set_items(&set([uuid("a"), uuid("b")])), ["a", "b"]);
        assert_eq!(uuid_set_items(&uuid("solo")), ["solo"]);
    }
}
