//! GET and LIST replies as proto messages (gRPC): for kinds whose reply is the stored form
//! ([`resources::rendered_verbatim`]) each message is decoded once from the object's JSON text
//! ([`Service::get_json`], [`Service::list_json`]: the stored body carried through unparsed),
//! never from a parsed value; the other kinds are decoded from the value [`Service::get`] and
//! [`Service::list`] render. Authorization, tenant scope, filters, paging and visibility are
//! those of `get` and `list`.

use osac_model::{Kind, Scope};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{ListParams, Service};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, Code};
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

/// Decodes an object's JSON text into its message (a failure is the server's: INTERNAL).
fn from_text<M: DeserializeOwned>(object: &ObjectJson) -> ApiResult<M> {
    serde_json::from_str(object.get()).map_err(|e| ApiError::new(Code::Internal, e.to_string()))
}
