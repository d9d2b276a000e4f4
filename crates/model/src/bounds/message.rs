//! The limits of [`super::check_object`] checked on a message as it serialises (proto-JSON),
//! without building its JSON form: a serializer that walks the values serde hands it. The
//! checks, their order and the reported violation are those of `check_object` on the JSON
//! object — map and struct entries are compared in key order, as the JSON object holds them,
//! so of several violations the same one is reported. Only `metadata`, small and checked by
//! [`super::check_metadata`], is made into a JSON value.

use std::fmt;

use serde::Serialize;
use serde::ser::{self, Impossible};

use super::{
    MAX_STRING_BYTES, MAX_TEMPLATE_PARAMETERS_BYTES, SERVER_ROOTS, check_metadata, count, limit_of,
    string_limit_of,
};
use crate::Invalid;

/// Why a message was refused by [`check_message`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// A value over a limit.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// The message has no JSON form (e.g. an enum field holding a number that names no value):
    /// the serializer's message.
    #[error("{0}")]
    Unserializable(String),
}

/// Checks every limit of [`super::check_object`] on `msg`, an API object message, as its
/// JSON form would be checked.
pub fn check_message<T: Serialize + ?Sized>(msg: &T) -> Result<(), MessageError> {
    match msg.serialize(Root) {
        Ok(None) => Ok(()),
        Ok(Some(invalid)) => Err(MessageError::Invalid(invalid)),
        Err(Unserializable(message)) => Err(MessageError::Unserializable(message)),
    }
}

/// A serialisation failure of the message itself.
#[derive(Debug)]
struct Unserializable(String);

impl fmt::Display for Unserializable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unserializable {}

impl ser::Error for Unserializable {
    fn custom<M: fmt::Display>(msg: M) -> Self {
        Unserializable(msg.to_string())
    }
}

/// What a walked value found: its first violation (None: within every limit).
type Found = Result<Option<Invalid>, Unserializable>;

/// Keeps, of the entries of one JSON object, the violation of the smallest key.
#[derive(Default)]
struct FirstByKey(Option<(String, Invalid)>);

impl FirstByKey {
    fn offer(&mut self, key: &str, found: Option<Invalid>) {
        if let Some(invalid) = found
            && self.0.as_ref().is_none_or(|(best, _)| key < best.as_str())
        {
            self.0 = Some((key.to_string(), invalid));
        }
    }

    fn take(self) -> Option<Invalid> {
        self.0.map(|(_, invalid)| invalid)
    }
}

/// The object itself: `metadata` by [`check_metadata`], the server's parts (`id`, `status`)
/// not checked, every other field walked; no count of the fields.
struct Root;

struct RootFields {
    metadata: Option<Invalid>,
    fields: FirstByKey,
}

impl RootFields {
    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Unserializable> {
        if key == "metadata" {
            let meta = serde_json::to_value(value).map_err(|e| Unserializable(e.to_string()))?;
            self.metadata = check_metadata(&meta).err();
        } else if SERVER_ROOTS.contains(&key) {
            value.serialize(Walk::unchecked())?;
        } else {
            let found = value.serialize(Walk::at(key.to_string(), key.to_string()))?;
            self.fields.offer(key, found);
        }
        Ok(())
    }

    fn end(self) -> Found {
        Ok(self.metadata.or_else(|| self.fields.take()))
    }
}

impl ser::SerializeStruct for RootFields {
    type Ok = Option<Invalid>;
    type Error = Unserializable;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Unserializable> {
        self.field(key, value)
    }

    fn end(self) -> Found {
        RootFields::end(self)
    }
}

/// Serialises a value only to find out whether it can be (what is not an object has nothing
/// `check_object` checks).
macro_rules! nothing_to_check {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(fn $method(self, _: $ty) -> Found {
            Ok(None)
        })*
    };
}

/// Booleans and numbers have no size to check, wherever they are.
macro_rules! no_bounds_on_numbers {
    () => {
        nothing_to_check!(
            serialize_bool(bool),
            serialize_i8(i8),
            serialize_i16(i16),
            serialize_i32(i32),
            serialize_i64(i64),
            serialize_u8(u8),
            serialize_u16(u16),
            serialize_u32(u32),
            serialize_u64(u64),
            serialize_f32(f32),
            serialize_f64(f64),
        );
    };
}

impl ser::Serializer for Root {
    type Ok = Option<Invalid>;
    type Error = Unserializable;
    type SerializeSeq = Entries;
    type SerializeTuple = Entries;
    type SerializeTupleStruct = Entries;
    type SerializeTupleVariant = Entries;
    type SerializeMap = Fields;
    type SerializeStruct = RootFields;
    type SerializeStructVariant = Fields;

    no_bounds_on_numbers!();
    nothing_to_check!(
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str),
    );

    fn serialize_none(self) -> Found {
        Ok(None)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Found {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Found {
        Ok(None)
    }

    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Found {
        Ok(None)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> Found {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Found {
        value.serialize(Walk::unchecked()).map(|_| None)
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Entries, Unserializable> {
        Ok(Walk::unchecked().entries())
    }

    fn serialize_tuple(self, _: usize) -> Result<Entries, Unserializable> {
        Ok(Walk::unchecked().entries())
    }

    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Entries, Unserializable> {
        Ok(Walk::unchecked().entries())
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Entries, Unserializable> {
        Ok(Walk::unchecked().entries())
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Fields, Unserializable> {
        Ok(Walk::unchecked().fields())
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<RootFields, Unserializable> {
        Ok(RootFields {
            metadata: None,
            fields: FirstByKey::default(),
        })
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Fields, Unserializable> {
        Ok(Walk::unchecked().fields())
    }
}

/// A value at `field` (real indices) whose pattern is `pattern` (`[]` for indices), checked
/// as `walk` checks its JSON form; unchecked, it is only serialised.
struct Walk {
    place: Option<(String, String)>,
}

impl Walk {
    fn at(field: String, pattern: String) -> Self {
        Walk {
            place: Some((field, pattern)),
        }
    }

    fn unchecked() -> Self {
        Walk { place: None }
    }

    fn string(&self, len: usize) -> Option<Invalid> {
        let (field, pattern) = self.place.as_ref()?;
        let max = string_limit_of(pattern);
        (len > max).then(|| {
            Invalid::new(
                field.clone(),
                format!("a string of {len} bytes is too long: at most {max} bytes"),
            )
        })
    }

    fn entries(self) -> Entries {
        Entries {
            place: self.place,
            len: 0,
            first: None,
        }
    }

    fn fields(self) -> Fields {
        Fields {
            place: self.place,
            len: 0,
            json_bytes: 1,
            key: None,
            first: FirstByKey::default(),
        }
    }
}

/// The walk of an enum variant's inner list or object: checked at `<field>.<variant>` when the
/// enclosing value is checked, else not.
fn variant_walk(place: Option<(String, String)>, variant: &str) -> Walk {
    match place {
        Some((field, pattern)) => {
            Walk::at(format!("{field}.{variant}"), format!("{pattern}.{variant}"))
        }
        None => Walk::unchecked(),
    }
}

impl ser::Serializer for Walk {
    type Ok = Option<Invalid>;
    type Error = Unserializable;
    type SerializeSeq = Entries;
    type SerializeTuple = Entries;
    type SerializeTupleStruct = Entries;
    type SerializeTupleVariant = Entries;
    type SerializeMap = Fields;
    type SerializeStruct = Fields;
    type SerializeStructVariant = Fields;

    no_bounds_on_numbers!();
    nothing_to_check!(serialize_unit_struct(&'static str));

    fn serialize_char(self, c: char) -> Found {
        Ok(self.string(c.len_utf8()))
    }

    fn serialize_str(self, s: &str) -> Found {
        Ok(self.string(s.len()))
    }

    /// Bytes are a JSON array of numbers.
    fn serialize_bytes(self, bytes: &[u8]) -> Found {
        let mut entries = self.entries();
        entries.len = bytes.len();
        ser::SerializeSeq::end(entries)
    }

    fn serialize_none(self) -> Found {
        Ok(None)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Found {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Found {
        Ok(None)
    }

    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Found {
        Ok(self.string(variant.len()))
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> Found {
        value.serialize(self)
    }

    /// `{"variant": value}`.
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Found {
        let mut fields = self.fields();
        ser::SerializeStruct::serialize_field(&mut fields, variant, value)?;
        ser::SerializeStruct::end(fields)
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Entries, Unserializable> {
        Ok(self.entries())
    }

    fn serialize_tuple(self, _: usize) -> Result<Entries, Unserializable> {
        Ok(self.entries())
    }

    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Entries, Unserializable> {
        Ok(self.entries())
    }

    /// `{"variant": [..]}`: the list is walked; one entry never exceeds a count.
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Entries, Unserializable> {
        Ok(variant_walk(self.place, variant).entries())
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Fields, Unserializable> {
        Ok(self.fields())
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Fields, Unserializable> {
        Ok(self.fields())
    }

    /// `{"variant": {..}}`: the inner object is walked; one entry never exceeds a count.
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Fields, Unserializable> {
        Ok(variant_walk(self.place, variant).fields())
    }
}

/// The items of a JSON array: its count first, then the first item over a limit.
struct Entries {
    place: Option<(String, String)>,
    len: usize,
    first: Option<Invalid>,
}

impl Entries {
    fn item<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unserializable> {
        let walk = match &self.place {
            Some((field, pattern)) => {
                Walk::at(format!("{field}[{}]", self.len), format!("{pattern}[]"))
            }
            None => Walk::unchecked(),
        };
        let found = value.serialize(walk)?;
        if self.first.is_none() {
            self.first = found;
        }
        self.len += 1;
        Ok(())
    }

    fn finish(self) -> Found {
        let Some((field, pattern)) = &self.place else {
            return Ok(None);
        };
        let (what, max) = limit_of(pattern).unwrap_or(("entries", super::MAX_LIST_ITEMS));
        Ok(count(field, what, self.len, max).err().or(self.first))
    }
}

macro_rules! entries_of {
    ($($trait:ident :: $method:ident),* $(,)?) => {
        $(impl ser::$trait for Entries {
            type Ok = Option<Invalid>;
            type Error = Unserializable;

            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unserializable> {
                self.item(value)
            }

            fn end(self) -> Found {
                self.finish()
            }
        })*
    };
}

entries_of!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
);

/// The entries of a JSON object: its count first, then (for template parameters) its size as
/// JSON, else the violation of the smallest key (an over-long key, or one in its value).
struct Fields {
    place: Option<(String, String)>,
    len: usize,
    /// Bytes of the object as compact JSON (`{` and what the entries add), for template
    /// parameters, which are bounded by this size instead of per value.
    json_bytes: usize,
    /// The key of the entry whose value comes next.
    key: Option<String>,
    first: FirstByKey,
}

impl Fields {
    fn is_template_parameters(&self) -> bool {
        self.place
            .as_ref()
            .is_some_and(|(_, pattern)| pattern == "spec.template_parameters")
    }

    fn entry<T: Serialize + ?Sized>(
        &mut self,
        key: String,
        value: &T,
    ) -> Result<(), Unserializable> {
        self.len += 1;
        if self.is_template_parameters() {
            let json = |e: serde_json::Error| Unserializable(e.to_string());
            let key_bytes = serde_json::to_string(&key).map_err(json)?.len();
            let value_bytes = serde_json::to_string(value).map_err(json)?.len();
            // `"key":value` and a comma or the closing brace.
            self.json_bytes += key_bytes + 1 + value_bytes + 1;
            return Ok(());
        }
        let Some((field, pattern)) = &self.place else {
            value.serialize(Walk::unchecked())?;
            return Ok(());
        };
        let found = if key.len() > MAX_STRING_BYTES {
            value.serialize(Walk::unchecked())?;
            Some(Invalid::new(
                field.clone(),
                format!(
                    "a key of {} bytes is too long: at most {MAX_STRING_BYTES} bytes",
                    key.len()
                ),
            ))
        } else {
            value.serialize(Walk::at(
                format!("{field}.{key}"),
                format!("{pattern}.{key}"),
            ))?
        };
        self.first.offer(&key, found);
        Ok(())
    }

    fn finish(self) -> Found {
        let Some((field, pattern)) = &self.place else {
            return Ok(None);
        };
        let (what, max) = limit_of(pattern).unwrap_or(("entries", super::MAX_LIST_ITEMS));
        if let Err(e) = count(field, what, self.len, max) {
            return Ok(Some(e));
        }
        if self.is_template_parameters() {
            // An empty object is `{}`.
            let bytes = self.json_bytes.max(2);
            if bytes > MAX_TEMPLATE_PARAMETERS_BYTES {
                return Ok(Some(Invalid::new(
                    field.clone(),
                    format!(
                        "{bytes} bytes of parameters are too many: at most {MAX_TEMPLATE_PARAMETERS_BYTES} bytes (as JSON)"
                    ),
                )));
            }
            return Ok(None);
        }
        Ok(self.first.take())
    }
}

impl ser::SerializeMap for Fields {
    type Ok = Option<Invalid>;
    type Error = Unserializable;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Unserializable> {
        self.key = Some(key.serialize(KeyText)?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unserializable> {
        let key = self.key.take().unwrap_or_default();
        self.entry(key, value)
    }

    fn end(self) -> Found {
        self.finish()
    }
}

macro_rules! fields_of {
    ($($trait:ident),* $(,)?) => {
        $(impl ser::$trait for Fields {
            type Ok = Option<Invalid>;
            type Error = Unserializable;

            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Unserializable> {
                self.entry(key.to_string(), value)
            }

            fn end(self) -> Found {
                self.finish()
            }
        })*
    };
}

fields_of!(SerializeStruct, SerializeStructVariant);

/// A map key as the text of its JSON object key (serde_json writes numbers and booleans as
/// their text).
struct KeyText;

macro_rules! key_as_text {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(fn $method(self, v: $ty) -> Result<String, Unserializable> {
            Ok(v.to_string())
        })*
    };
}

impl ser::Serializer for KeyText {
    type Ok = String;
    type Error = Unserializable;
    type SerializeSeq = Impossible<String, Unserializable>;
    type SerializeTuple = Impossible<String, Unserializable>;
    type SerializeTupleStruct = Impossible<String, Unserializable>;
    type SerializeTupleVariant = Impossible<String, Unserializable>;
    type SerializeMap = Impossible<String, Unserializable>;
    type SerializeStruct = Impossible<String, Unserializable>;
    type SerializeStructVariant = Impossible<String, Unserializable>;

    key_as_text!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_char(char),
        serialize_str(&str),
    );

    fn serialize_f32(self, _: f32) -> Result<String, Unserializable> {
        Err(key_must_be_a_string())
    }

    fn serialize_f64(self, _: f64) -> Result<String, Unserializable> {
        Err(key_must_be_a_string())
    }

    fn serialize_bytes(self, _: &[u8]) -> Result<String, Unserializable> {
        Err(key_must_be_a_string())
    }

    fn serialize_none(self) -> Result<String, Unserializable> {
        Err(key_must_be_a_string())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<String, Unserializable> {
        Err(key_must_be_a_string())
    }

    fn serialize_unit(self) -> Result<String, Unserializable> {
        Err(key_must_be_a_string())
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<String, Unserializable> {
        Err(key_must_be_a_string())
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<String, Unserializable> {
        Ok(variant.to_string())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<String, Unserializable> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String, Unserializable> {
        Err(key_must_be_a_string())
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Unserializable> {
        Err(key_must_be_a_string())
    }

    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Unserializable> {
        Err(key_must_be_a_string())
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Unserializable> {
        Err(key_must_be_a_string())
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Unserializable> {
        Err(key_must_be_a_string())
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Unserializable> {
        Err(key_must_be_a_string())
    }

    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, Unserializable> {
        Err(key_must_be_a_string())
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Unserializable> {
        Err(key_must_be_a_string())
    }
}

/// serde_json's refusal of a map key that has no text form.
fn key_must_be_a_string() -> Unserializable {
    Unserializable("key must be a string".into())
}

#[cfg(test)]
mod tests;
