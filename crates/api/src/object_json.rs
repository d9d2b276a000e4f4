//! API objects as JSON text, for replies that carry the stored body through unparsed: the
//! envelope (`id`, `metadata`) is rendered from the record's columns, and the stored body's
//! fields are written after it as they are stored. Only for kinds whose reply is the stored
//! form ([`crate::resources::rendered_verbatim`]); the others are rendered from values.

use osac_store::{RecordText, StoreError};
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::ApiResult;
use crate::object::metadata_of;

/// One API object as JSON text; serialises verbatim.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct ObjectJson(Box<RawValue>);

impl ObjectJson {
    /// The API object of a record whose body is the stored JSON text: the same object as
    /// [`crate::object::to_object`] renders from the parsed record, for kinds rendered
    /// verbatim. Finalizers are shown on the private API only.
    pub fn of_record(rec: &RecordText, show_finalizers: bool) -> ApiResult<Self> {
        let corrupt =
            |e: serde_json::Error| StoreError::Corrupt(format!("{} {}: {e}", rec.kind, rec.id));
        let id = serde_json::to_string(&rec.id).map_err(corrupt)?;
        let metadata =
            serde_json::to_string(&metadata_of(rec, show_finalizers)).map_err(corrupt)?;
        let body = rec.body.get().trim();
        let mut text = String::with_capacity(body.len() + id.len() + metadata.len() + 24);
        text.push_str("{\"id\":");
        text.push_str(&id);
        text.push_str(",\"metadata\":");
        text.push_str(&metadata);
        // The body's fields (never `id` or `metadata`: columns own those). A body that is not
        // an object adds nothing, as in `to_object`.
        if let Some(fields) = body
            .strip_prefix('{')
            .and_then(|b| b.strip_suffix('}'))
            .map(str::trim)
            .filter(|f| !f.is_empty())
        {
            text.push(',');
            text.push_str(fields);
        }
        text.push('}');
        Ok(Self(RawValue::from_string(text).map_err(corrupt)?))
    }

    /// An object already rendered as a value (kinds not rendered verbatim).
    pub fn from_value(value: &Value) -> ApiResult<Self> {
        let raw = serde_json::value::to_raw_value(value)
            .map_err(|e| StoreError::Corrupt(format!("rendering an object: {e}")))?;
        Ok(Self(raw))
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }
}

/// A page of objects as the REST list reply: `{"size","total","items"}`.
#[derive(Debug, Clone, Serialize)]
pub struct ListJson {
    /// Objects on this page.
    pub size: usize,
    /// Objects matching the query.
    pub total: i64,
    pub items: Vec<ObjectJson>,
}

impl ListJson {
    /// The reply of a page of `items` out of `total`.
    pub fn new(total: i64, items: Vec<ObjectJson>) -> Self {
        Self {
            size: items.len(),
            total,
            items,
        }
    }
}
