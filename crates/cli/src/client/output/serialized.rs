//! JSON and YAML of API objects with keys in reading order.

use serde_json::Value;

/// Serialises a JSON value with object keys in reading order (id, name, metadata, …, spec,
/// status) rather than alphabetically.
struct Ordered<'a>(&'a Value);

fn key_rank(k: &str) -> u8 {
    match k {
        "id" => 0,
        "name" => 1,
        "metadata" => 2,
        "state" => 3,
        "message" => 4,
        "title" => 5,
        "description" => 6,
        "spec" => 100,
        "status" => 101,
        _ => 50,
    }
}

impl serde::Serialize for Ordered<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort_by_key(|k| (key_rank(k), k.as_str()));
                let mut map = ser.serialize_map(Some(keys.len()))?;
                for k in keys {
                    map.serialize_entry(k, &Ordered(&m[k.as_str()]))?;
                }
                map.end()
            }
            Value::Array(a) => {
                let mut seq = ser.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(&Ordered(v))?;
                }
                seq.end()
            }
            other => other.serialize(ser),
        }
    }
}

/// Pretty JSON with keys in reading order, newline-terminated.
pub fn to_json(v: &Value) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(&Ordered(v))? + "\n")
}

/// YAML with keys in reading order.
pub fn to_yaml(v: &Value) -> anyhow::Result<String> {
    Ok(serde_yaml_ng::to_string(&Ordered(v))?)
}
