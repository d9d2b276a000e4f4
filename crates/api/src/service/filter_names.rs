//! Filters on a reference field accept the referenced object's name as well as its id.
//!
//! References are stored as ids, so `this.spec.virtual_network == "gen-net"` would match
//! nothing. Before the filter is translated, every string compared for equality (`==`, `!=`,
//! `in`) with a reference field of the listed kind is looked up: an id of a visible object of
//! the referenced kind stays as written; a name is replaced by the id of the object of that
//! name that the caller can see (its own tenant's for tenant kinds; provider objects for
//! provider kinds); a value that names nothing stays as written and matches nothing.

use std::collections::HashMap;

use osac_model::filter::{equality_strings, parse_filter, replace_strings};
use osac_model::refs::ref_fields;
use osac_model::{Kind, Scope};

use super::{Service, by_name};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::resources;

/// Most distinct values a filter may compare with reference fields (each one is looked up).
pub const MAX_REFERENCE_VALUES: usize = 64;

impl Service {
    /// `filter` with the names it compares with reference fields replaced by ids (see the
    /// module). A filter that does not parse is returned as it is: checking it reports why.
    pub(crate) async fn with_reference_ids(
        &self,
        caller: &Caller,
        surface: Scope,
        kind: Kind,
        filter: &str,
    ) -> ApiResult<String> {
        osac_model::bounds::check_query("filter", filter)?;
        let Ok(expr) = parse_filter(filter) else {
            return Ok(filter.to_string());
        };
        let fields = ref_fields(kind);
        let mut resolved: HashMap<(Kind, String), Option<String>> = HashMap::new();
        let mut replacements = Vec::new();
        for (path, literal) in equality_strings(&expr) {
            let osac_model::filter::Literal::String(value) = &literal.value else {
                continue;
            };
            let dotted = path.segments.join(".");
            let Some(target) = fields
                .iter()
                .find(|f| f.path == dotted)
                .and_then(|f| f.target)
            else {
                continue;
            };
            let key = (target, value.clone());
            if !resolved.contains_key(&key) {
                if resolved.len() >= MAX_REFERENCE_VALUES {
                    return Err(ApiError::invalid(format!(
                        "filter: at most {MAX_REFERENCE_VALUES} distinct values may be compared with reference fields"
                    )));
                }
                let id = self
                    .reference_id(caller, surface, target, &dotted, value)
                    .await?;
                resolved.insert(key.clone(), id);
            }
            if let Some(Some(id)) = resolved.get(&key) {
                replacements.push((literal.pos, id.clone()));
            }
        }
        if replacements.is_empty() {
            return Ok(filter.to_string());
        }
        replace_strings(filter, &replacements)
            .map_err(|e| ApiError::invalid(format!("filter: {e}")))
    }

    /// The id to compare instead of `value` in a filter on the reference field `field` to
    /// `target`, or None when `value` stays as written (an id, or a name of nothing the caller
    /// sees).
    async fn reference_id(
        &self,
        caller: &Caller,
        surface: Scope,
        target: Kind,
        field: &str,
        value: &str,
    ) -> ApiResult<Option<String>> {
        let scope = Self::scope(caller, target);
        let visible = |rec: &osac_store::Record| {
            surface == Scope::Provider || resources::publicly_visible(target, rec)
        };
        if let Some(rec) = self.store.get(value).await?
            && rec.kind == target
            && scope.as_deref().is_none_or(|t| t == rec.tenant)
            && visible(&rec)
        {
            return Ok(None);
        }
        let found = self
            .store
            .list(&by_name(target, scope.as_deref(), value))
            .await?
            .items;
        if found.len() > 1 {
            return Err(ApiError::invalid(format!(
                "filter: {field}: name '{value}' matches {} objects in several tenants; use the id",
                target.display_name()
            )));
        }
        Ok(found.into_iter().find(|rec| visible(rec)).map(|rec| rec.id))
    }
}
