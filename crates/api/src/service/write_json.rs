//! Creates and updates from REST's JSON bodies: the body is checked (size limits) and parsed
//! into the proto message of its kind once, at this edge, with the same rules and messages as
//! everywhere (proto field names, enums by name, unknown fields INVALID_ARGUMENT), then handled
//! as [`Service::create`] and [`Service::update`] handle the messages gRPC receives. An update
//! body stays JSON: it holds only the fields to change (a field present with its default value
//! is a change), which a proto message cannot tell from an absent one. A NetworkClass body may
//! give its defaults in the designs' shape, rewritten to ours first
//! ([`osac_model::kinds::network_class::design_defaults`]).

use osac_model::{Kind, Scope};
use serde_json::Value;

use super::{Service, UpdateOptions, owning_tenant};
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::object::user_metadata;
use crate::typed::Object;

impl Service {
    /// [`Service::create`] from the JSON object of a REST body.
    pub async fn create_json(
        &self,
        caller: &Caller,
        surface: Scope,
        kind: Kind,
        mut body: Value,
    ) -> ApiResult<Value> {
        self.authorize(caller, surface, kind, true)?;
        if kind == Kind::NetworkClass {
            osac_model::kinds::network_class::design_defaults::canonical(&mut body)?;
        }
        let tenant = owning_tenant(caller, kind, &user_metadata(&body))?;
        osac_model::bounds::check_object(&body)?;
        let obj = Object::from_json(kind, body)?;
        let meta = obj.user_metadata();
        let rec = self.insert(caller, obj, meta, tenant).await?;
        self.render_full(surface, &rec).await
    }

    /// [`Service::update`] from a REST body: the fields present in it (or those of the mask).
    pub async fn update_json(
        &self,
        caller: &Caller,
        surface: Scope,
        kind: Kind,
        key: &str,
        mut body: Value,
        how: UpdateOptions<'_>,
    ) -> ApiResult<Value> {
        self.authorize(caller, surface, kind, true)?;
        if kind == Kind::NetworkClass {
            osac_model::kinds::network_class::design_defaults::canonical(&mut body)?;
        }
        crate::object::check_metadata(kind, &body)?;
        let rec = self.apply_update(caller, kind, key, body, how).await?;
        self.render_full(surface, &rec).await
    }
}
