//! BareMetalInstance: attachments checked against the HostType (interface rules) and stored with the
//! resolved interface, ids and primary flag; `host_type` stored as an id. A BareMetalTemplate
//! (`spec.template`, or its deprecated alias `spec.catalog_item`) is stored as an id and
//! supplies the HostType and default template parameters. Only the security groups of an
//! attachment (and metadata) change afterwards.

use osac_model::{Kind, kinds, pb, validate};
use osac_store::Record;
use serde_json::Value;

use super::workload;
use crate::error::{ApiError, ApiResult};
use crate::object::{body_of, to_json};
use crate::request::RequestCtx;

const FIELD: &str = "spec.network_attachments";

pub async fn create(cx: &mut RequestCtx<'_>, mut bm: pb::BareMetalInstance) -> ApiResult<Value> {
    validate::metadata(bm.metadata.as_ref())?;
    let spec = bm.spec.get_or_insert_with(Default::default);
    let mut refs = Vec::new();
    if let Some(t_rec) = resolve_template(cx, spec).await? {
        let t: pb::BareMetalTemplate = t_rec.decode()?;
        let t_spec = t.spec.unwrap_or_default();
        if spec.host_type.is_empty() {
            spec.host_type = t_spec.host_type.clone();
        } else {
            let ht_rec =
                super::resolve(cx, Kind::HostType, "spec.host_type", &spec.host_type, false)
                    .await?;
            if ht_rec.id != t_spec.host_type {
                return Err(ApiError::invalid(format!(
                    "spec.host_type: HostType '{}' differs from the HostType of BareMetalTemplate '{}'; omit spec.host_type or name the template's type",
                    ht_rec.label(),
                    t_rec.label()
                )));
            }
        }
        for (k, v) in t_spec.template_parameters {
            spec.template_parameters.entry(k).or_insert(v);
        }
        spec.template = t_rec.id.clone();
        spec.catalog_item = String::new();
        refs.push((t_rec.id.clone(), "spec.template".to_string()));
    }
    if spec.host_type.is_empty() {
        return Err(ApiError::invalid(
            "spec.host_type: host_type is required (or name a BareMetalTemplate in spec.template)",
        ));
    }
    let ht_rec =
        super::resolve(cx, Kind::HostType, "spec.host_type", &spec.host_type, false).await?;
    let ht: pb::HostType = ht_rec.decode()?;
    if spec.network_attachments.is_empty() {
        if ht.interfaces.is_empty() {
            // A VM type is the more useful thing to say.
            kinds::baremetal_instance::network_attachments(&[], &ht, ht_rec.label())?;
        }
        // Defaults on the first `fabric` interface (resolved by the attachment rules).
        let d = workload::default_attachment(cx).await?;
        spec.network_attachments
            .push(pb::BareMetalNetworkAttachment {
                subnet: d.subnet,
                security_groups: d.security_groups,
                interface: String::new(),
                primary: true,
            });
    }
    let mut atts = kinds::baremetal_instance::network_attachments(
        &spec.network_attachments,
        &ht,
        ht_rec.label(),
    )?;
    workload::resolve_machine_attachments(cx, FIELD, &mut atts).await?;
    refs.push((ht_rec.id.clone(), "spec.host_type".into()));
    workload::lock_refs(cx, refs).await?;
    spec.network_attachments = atts;
    spec.host_type = ht_rec.id.clone();
    Ok(body_of(&to_json(&bm)?))
}

/// Only the security groups of the attachments (re-validated) and metadata may change.
pub async fn update(
    cx: &mut RequestCtx<'_>,
    current: &Record,
    bm: &mut pb::BareMetalInstance,
) -> ApiResult<()> {
    validate::metadata(bm.metadata.as_ref())?;
    let spec = bm.spec.get_or_insert_with(Default::default);
    let old: pb::BareMetalInstance = current.decode()?;
    let stored = old.spec.unwrap_or_default().network_attachments;
    workload::update_machine_security_groups(cx, FIELD, &stored, &mut spec.network_attachments)
        .await?;
    Ok(())
}

/// The template named by `spec.template` or its deprecated alias `spec.catalog_item` (id or
/// name; both set must name the same template), or None when neither is set.
async fn resolve_template(
    cx: &mut RequestCtx<'_>,
    spec: &pb::BareMetalInstanceSpec,
) -> ApiResult<Option<Record>> {
    let (field, key) = match (spec.template.is_empty(), spec.catalog_item.is_empty()) {
        (true, true) => return Ok(None),
        (false, _) => ("spec.template", spec.template.as_str()),
        (true, false) => ("spec.catalog_item", spec.catalog_item.as_str()),
    };
    let rec = super::resolve(cx, Kind::BareMetalTemplate, field, key, false).await?;
    if !spec.template.is_empty() && !spec.catalog_item.is_empty() {
        let alias = super::resolve(
            cx,
            Kind::BareMetalTemplate,
            "spec.catalog_item",
            &spec.catalog_item,
            false,
        )
        .await?;
        if alias.id != rec.id {
            return Err(ApiError::invalid(format!(
                "spec.catalog_item: deprecated alias of spec.template; it names BareMetalTemplate '{}' but spec.template names '{}' (set only spec.template)",
                alias.label(),
                rec.label()
            )));
        }
    }
    super::require_not_failed(&rec, field)?;
    Ok(Some(rec))
}
