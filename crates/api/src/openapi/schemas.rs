//! Proto descriptors → JSON Schemas: an index of the messages, enums and services (with their
//! comments) and the schemas of the messages reachable from the routes.

use std::collections::{BTreeMap, HashMap, VecDeque};

use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorSet,
    ServiceDescriptorProto,
};
use serde_json::{Map, Value, json};

use super::OpenApiError;
use super::constraints;

/// A message with its comments.
pub(super) struct Msg<'a> {
    pub(super) desc: &'a DescriptorProto,
    pub(super) comment: Option<String>,
    pub(super) fields: Vec<Option<String>>,
}

/// An enum with its comments.
pub(super) struct Enum<'a> {
    pub(super) desc: &'a EnumDescriptorProto,
    pub(super) comment: Option<String>,
    pub(super) values: Vec<Option<String>>,
}

/// A service with its package.
pub(super) struct Svc<'a> {
    pub(super) package: String,
    pub(super) desc: &'a ServiceDescriptorProto,
}

/// Every type of the descriptor by full name (without the leading dot).
#[derive(Default)]
pub(super) struct Index<'a> {
    pub(super) messages: HashMap<String, Msg<'a>>,
    pub(super) enums: HashMap<String, Enum<'a>>,
    pub(super) services: Vec<Svc<'a>>,
}

/// A comment as one line: the lines of a proto `//` comment joined by spaces.
pub(super) fn one_line(c: &str) -> Option<String> {
    let s = c
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    (!s.is_empty()).then_some(s)
}

impl<'a> Index<'a> {
    pub(super) fn new(set: &'a FileDescriptorSet) -> Self {
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

    pub(super) fn add_message(
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

    pub(super) fn add_enum(
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
pub(super) fn type_name(proto: &str) -> &str {
    proto.strip_prefix('.').unwrap_or(proto)
}

pub(super) fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// Adds a description to a schema (next to a `$ref` too: allowed in JSON Schema 2020-12).
pub(super) fn described(mut schema: Value, description: Option<&str>) -> Value {
    if let (Some(d), Some(o)) = (description, schema.as_object_mut()) {
        o.insert("description".into(), json!(d));
    }
    schema
}

/// The proto-JSON form of the well-known types, inlined where they are used.
pub(super) fn well_known(name: &str) -> Option<Value> {
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
pub(super) struct Schemas<'a, 'i> {
    pub(super) ix: &'i Index<'a>,
    pub(super) done: BTreeMap<String, Value>,
    pub(super) queue: VecDeque<String>,
}

impl<'a, 'i> Schemas<'a, 'i> {
    /// A reference to a proto type, queued for emission (well-known types inline).
    pub(super) fn reference(&mut self, proto: &str) -> Value {
        let name = type_name(proto);
        if let Some(v) = well_known(name) {
            return v;
        }
        if !self.done.contains_key(name) && !self.queue.iter().any(|q| q == name) {
            self.queue.push_back(name.to_string());
        }
        schema_ref(name)
    }

    pub(super) fn scalar(&mut self, f: &FieldDescriptorProto) -> Result<Value, OpenApiError> {
        Ok(match f.r#type() {
            Type::Double | Type::Float => json!({ "type": "number" }),
            Type::Int32 | Type::Sint32 | Type::Sfixed32 => {
                json!({ "type": "integer", "format": "int32" })
            }
            Type::Uint32 | Type::Fixed32 => {
                json!({ "type": "integer", "format": "int32", "minimum": 0 })
            }
            // proto-JSON writes 64-bit integers as strings; numbers are accepted on input.
            Type::Int64 | Type::Sint64 | Type::Sfixed64 | Type::Uint64 | Type::Fixed64 => {
                json!({ "type": ["string", "integer"], "format": "int64", "pattern": "^-?[0-9]+$" })
            }
            Type::Bool => json!({ "type": "boolean" }),
            Type::String => json!({ "type": "string" }),
            Type::Bytes => json!({ "type": "string", "contentEncoding": "base64" }),
            Type::Enum => {
                let name = f.type_name();
                if !self.ix.enums.contains_key(type_name(name)) {
                    return Err(OpenApiError::UnknownType(name.to_string()));
                }
                // Written by name; proto-JSON also reads the number.
                json!({ "anyOf": [self.reference(name), { "type": "integer", "format": "int32" }] })
            }
            Type::Message | Type::Group => {
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

    pub(super) fn field(&mut self, f: &FieldDescriptorProto) -> Result<Value, OpenApiError> {
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

    pub(super) fn message(&mut self, name: &str) -> Result<Value, OpenApiError> {
        let ix = self.ix;
        let m = ix
            .messages
            .get(name)
            .ok_or_else(|| OpenApiError::UnknownType(name.to_string()))?;
        let mut props = Map::new();
        for (f, comment) in m.desc.field.iter().zip(&m.fields) {
            let mut schema = self.field(f)?;
            if let Some(extra) = constraints::field_extra(name, f.name()) {
                constraints::merge(&mut schema, extra);
            }
            props.insert(f.name().to_string(), described(schema, comment.as_deref()));
        }
        // A message field may be `null` (read as unset) unless validation requires it.
        let required = constraints::required_of(name);
        for f in &m.desc.field {
            let message = f.r#type() == Type::Message && f.label() != Label::Repeated;
            if message
                && !required.contains(&f.name())
                && let Some(schema) = props.get_mut(f.name())
            {
                nullable(schema);
            }
        }
        let mut schema = json!({
            "type": "object",
            "properties": props,
            // Unknown fields are rejected.
            "additionalProperties": false,
        });
        if let Some(missing) = required.iter().find(|r| !props_has(&schema, r)) {
            return Err(OpenApiError::UnknownType(format!("{name}.{missing}")));
        }
        if !required.is_empty() {
            schema["required"] = json!(required);
        }
        // A real oneof (not the synthetic one of a proto3 `optional`): exactly one member set.
        for (i, decl) in m.desc.oneof_decl.iter().enumerate() {
            let members: Vec<&str> = m
                .desc
                .field
                .iter()
                .filter(|f| f.oneof_index == Some(i as i32) && !f.proto3_optional())
                .map(|f| f.name())
                .collect();
            if members.is_empty() {
                continue;
            }
            let one: Vec<Value> = members.iter().map(|f| json!({ "required": [f] })).collect();
            schema["oneOf"] = json!(one);
            let text = format!("Exactly one of {} ({}).", members.join(", "), decl.name());
            let d = match &m.comment {
                Some(c) => format!("{c} {text}"),
                None => text,
            };
            return Ok(described(schema, Some(&d)));
        }
        Ok(described(schema, m.comment.as_deref()))
    }

    pub(super) fn enumeration(&self, name: &str) -> Option<Value> {
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
    pub(super) fn drain(&mut self) -> Result<(), OpenApiError> {
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

fn props_has(schema: &Value, field: &str) -> bool {
    schema["properties"].get(field).is_some()
}

/// Lets a property (a `$ref`, or an inlined well-known type) also be `null`.
fn nullable(schema: &mut Value) {
    let Some(o) = schema.as_object_mut() else {
        return;
    };
    if let Some(r) = o.remove("$ref") {
        o.insert("anyOf".into(), json!([{ "$ref": r }, { "type": "null" }]));
    } else if let Some(Value::String(t)) = o.get("type").cloned() {
        o.insert("type".into(), json!([t, "null"]));
    }
}
