//! API objects as JSON text, for replies that carry the stored body through unparsed: the
//! envelope (`id`, `metadata`) is rendered from the record's columns, and the stored body's
//! fields are written after it as they are stored. Only for kinds whose reply is the stored
//! form ([`crate::resources::rendered_verbatim`]); the others are rendered from values.

use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use osac_store::{RecordText, StoreError};
use serde_json::Value;

use crate::error::ApiResult;
use crate::object::metadata_of;

/// One API object as JSON text, composed from parts that are JSON already (serialised
/// columns, the stored body), so it is not parsed again.
#[derive(Debug, Clone)]
pub struct ObjectJson(String);

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
        Ok(Self(text))
    }

    /// An object already rendered as a value (kinds not rendered verbatim).
    pub fn from_value(value: &Value) -> ApiResult<Self> {
        let text = serde_json::to_string(value)
            .map_err(|e| StoreError::Corrupt(format!("rendering an object: {e}")))?;
        Ok(Self(text))
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        &self.0
    }
}

/// A page of objects as the REST list reply: `{"size","total","items"}`.
#[derive(Debug, Clone)]
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

impl ListJson {
    /// The reply's JSON text: the items' texts joined, nothing parsed.
    pub fn to_json(&self) -> String {
        let items: usize = self.items.iter().map(|i| i.0.len() + 1).sum();
        let mut text = String::with_capacity(items + 48);
        text.push_str("{\"size\":");
        text.push_str(&self.size.to_string());
        text.push_str(",\"total\":");
        text.push_str(&self.total.to_string());
        text.push_str(",\"items\":[");
        for (n, item) in self.items.iter().enumerate() {
            if n > 0 {
                text.push(',');
            }
            text.push_str(&item.0);
        }
        text.push_str("]}");
        text
    }
}

/// `application/json` with the text as it is.
fn json_response(text: String) -> Response {
    ([(CONTENT_TYPE, "application/json")], text).into_response()
}

impl IntoResponse for ObjectJson {
    fn into_response(self) -> Response {
        json_response(self.0)
    }
}

impl IntoResponse for ListJson {
    fn into_response(self) -> Response {
        json_response(self.to_json())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_reply_is_json_with_its_items_verbatim() {
        let items = vec![
            ObjectJson::from_value(&serde_json::json!({"id": "a", "spec": {"x": 1}})).unwrap(),
            ObjectJson::from_value(&serde_json::json!({"id": "b"})).unwrap(),
        ];
        let text = ListJson::new(7, items).to_json();
        let v: Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(
            v,
            serde_json::json!({"size": 2, "total": 7, "items": [{"id": "a", "spec": {"x": 1}}, {"id": "b"}]})
        );
        let empty: Value = serde_json::from_str(&ListJson::new(0, vec![]).to_json()).unwrap();
        assert_eq!(
            empty,
            serde_json::json!({"size": 0, "total": 0, "items": []})
        );
    }
}
