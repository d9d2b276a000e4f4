//! Replies as proto messages (gRPC). For kinds whose reply is the stored form
//! ([`resources::rendered_verbatim`]) a GET or LIST message is decoded once from the object's
//! JSON text ([`Service::get_json`], [`Service::list_json`]: the stored body carried through
//! unparsed), and the message of a record just written straight from the record's parts
//! ([`Service::message_of`]); the other kinds are decoded from the value [`Service::get`],
//! [`Service::list`] and [`Service::render_full`] render. Authorization, tenant scope,
//! filters, paging and visibility are those of the value path.

use osac_model::{Kind, Scope};
use osac_store::Record;
use serde::de::DeserializeOwned;
use serde::de::value::MapDeserializer;
use serde_json::Value;

use super::{ListParams, Service};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, Code};
use crate::object::metadata_of;
use crate::object_json::ObjectJson;
use crate::resources;

/// A page of objects as messages.
#[derive(Debug, Clone)]
pub struct MessagePage<M> {
    /// Objects matching the query.
    pub total: i64,
    pub items: Vec<M>,
}

impl Service {
    /// [`Service::get`] as the proto message `M` of `kind`.
    pub async fn get_message<M: DeserializeOwned>(
        &self,
        caller: &Caller,
        surface: Scope,
        kind: Kind,
        key: &str,
    ) -> ApiResult<M> {
        if !resources::rendered_verbatim(kind, surface) {
            return from_value(self.get(caller, surface, kind, key).await?);
        }
        from_text(&self.get_json(caller, surface, kind, key).await?)
    }

    /// The reply to a write of `rec` as the proto message `M` of its kind: what
    /// [`Service::render_full`] renders, decoded.
    pub(crate) async fn message_of<M: DeserializeOwned>(
        &self,
        surface: Scope,
        rec: &Record,
    ) -> ApiResult<M> {
        if !resources::rendered_verbatim(rec.kind, surface) {
            return from_value(self.render_full(surface, rec).await?);
        }
        from_record(rec, surface == Scope::Provider)
    }

    /// [`Service::list`] as proto messages `M` of `kind`.
    pub async fn list_messages<M: DeserializeOwned>(
        &self,
        caller: &Caller,
        surface: Scope,
        kind: Kind,
        p: ListParams,
    ) -> ApiResult<MessagePage<M>> {
        if !resources::rendered_verbatim(kind, surface) {
            let page = self.list(caller, surface, kind, p).await?;
            return Ok(MessagePage {
                total: page.total,
                items: page
                    .items
                    .into_iter()
                    .map(from_value)
                    .collect::<ApiResult<_>>()?,
            });
        }
        let page = self.list_json(caller, surface, kind, p).await?;
        Ok(MessagePage {
            total: page.total,
            items: page.items.iter().map(from_text).collect::<ApiResult<_>>()?,
        })
    }
}

/// Decodes a rendered object into its message (a failure is the server's: INTERNAL).
pub(crate) fn from_value<M: DeserializeOwned>(value: Value) -> ApiResult<M> {
    serde_json::from_value(value).map_err(|e| ApiError::new(Code::Internal, e.to_string()))
}

/// Decodes the API object of a record whose reply is its stored form into its message, from
/// the record's parts as they are: `id`, the `metadata` rendered from the columns, then the
/// body's fields (as [`ObjectJson::of_record`] writes them), without copying the body.
fn from_record<M: DeserializeOwned>(rec: &Record, show_finalizers: bool) -> ApiResult<M> {
    let id = Value::String(rec.id.clone());
    let metadata = Value::Object(metadata_of(rec, show_finalizers));
    let body = rec.body.as_object().into_iter().flatten();
    let fields = [("id", &id), ("metadata", &metadata)]
        .into_iter()
        .chain(body.map(|(k, v)| (k.as_str(), v)));
    M::deserialize(MapDeserializer::<_, serde_json::Error>::new(fields))
        .map_err(|e| ApiError::new(Code::Internal, e.to_string()))
}

/// Decodes an object's JSON text into its message (a failure is the server's: INTERNAL).
fn from_text<M: DeserializeOwned>(object: &ObjectJson) -> ApiResult<M> {
    serde_json::from_str(object.get()).map_err(|e| ApiError::new(Code::Internal, e.to_string()))
}
