//! GET and LIST replies as JSON text: for kinds whose reply is the stored form
//! ([`resources::rendered_verbatim`]) the stored body is carried through unparsed
//! ([`Store::get_text`], [`Store::list_text`]); the other kinds are rendered as [`Service::get`]
//! and [`Service::list`] render them. Authorization, tenant scope, filters, paging and
//! visibility are those of `get` and `list`.

use osac_model::{Kind, Scope};
use osac_store::RecordText;

use super::{ListParams, Service, by_name, only_match};
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::object_json::{ListJson, ObjectJson};
use crate::resources;

impl Service {
    /// [`Service::get`] as JSON text.
    pub async fn get_json(
        &self,
        caller: &Caller,
        surface: Scope,
        kind: Kind,
        key: &str,
    ) -> ApiResult<ObjectJson> {
        if !resources::rendered_verbatim(kind, surface) {
            return ObjectJson::from_value(&self.get(caller, surface, kind, key).await?);
        }
        self.authorize(caller, surface, kind, false)?;
        let scope = Self::scope(caller, kind);
        let rec = self.find_text(kind, scope.as_deref(), key).await?;
        ObjectJson::of_record(&rec, surface == Scope::Provider)
    }

    /// [`Service::list`] as the JSON list reply.
    pub async fn list_json(
        &self,
        caller: &Caller,
        surface: Scope,
        kind: Kind,
        p: ListParams,
    ) -> ApiResult<ListJson> {
        if !resources::rendered_verbatim(kind, surface) {
            let page = self.list(caller, surface, kind, p).await?;
            let items = page
                .items
                .iter()
                .map(ObjectJson::from_value)
                .collect::<ApiResult<_>>()?;
            return Ok(ListJson::new(page.total, items));
        }
        let query = self.list_query(caller, surface, kind, p).await?;
        let page = self.store.list_text(&query).await?;
        let show_finalizers = surface == Scope::Provider;
        let items = page
            .items
            .iter()
            .map(|rec| ObjectJson::of_record(rec, show_finalizers))
            .collect::<ApiResult<_>>()?;
        Ok(ListJson::new(page.total, items))
    }

    /// [`Service::find`] with the body as the stored JSON text: by id within the caller's
    /// `scope` (None: every tenant), else by name.
    async fn find_text(&self, kind: Kind, scope: Option<&str>, key: &str) -> ApiResult<RecordText> {
        if let Some(rec) = self.store.get_text(key).await?
            && rec.kind == kind
            && scope.is_none_or(|tenant| tenant == rec.tenant)
        {
            return Ok(rec);
        }
        if !super::may_be_name(key) {
            return Err(super::not_found(kind, key));
        }
        let page = self.store.list_text(&by_name(kind, scope, key)).await?;
        only_match(page.items, kind, key)
    }
}
