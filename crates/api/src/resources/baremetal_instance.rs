//! BareMetalInstance: attachments checked against the BareMetalInstanceType's network ports
//! (`spec.instance_type`) or else the HostType's interfaces (interface rules) and stored with
//! the resolved interface, ids and primary flag; `host_type` and `instance_type` stored as ids. A BareMetalTemplate
//! (`spec.template`, or its deprecated alias `spec.catalog_item`) is stored as an id and
//! supplies the HostType and default template parameters. Only the security groups of an
//! attachment, the run strategy, the restart trigger (and metadata) change afterwards.

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
    kinds::baremetal_instance::machine_fields(spec)?;
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
    let machine = machine_of(cx, spec).await?;
    if spec.network_attachments.is_empty() {
        if machine.interfaces.is_empty() {
            // A VM type is the more useful thing to say.
            kinds::baremetal_instance::network_attachments(&[], &[], &machine.what)?;
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
        &machine.interfaces,
        &machine.what,
    )?;
    workload::resolve_machine_attachments(cx, FIELD, &mut atts).await?;
    if let Some(id) = &machine.host_type {
        refs.push((id.clone(), "spec.host_type".into()));
    }
    if let Some(id) = &machine.instance_type {
        refs.push((id.clone(), "spec.instance_type".into()));
    }
    workload::lock_refs(cx, refs).await?;
    spec.network_attachments = atts;
    spec.host_type = machine.host_type.unwrap_or_default();
    spec.instance_type = machine.instance_type.unwrap_or_default();
    Ok(body_of(&to_json(&bm)?))
}

/// What an instance's attachments are checked against, and the ids to store.
struct Machine {
    /// The interfaces attachments may name: the instance type's network ports, else the
    /// HostType's interfaces.
    interfaces: Vec<pb::HostTypeInterface>,
    /// Names the source of `interfaces` in messages (`HostType 'bm'`).
    what: String,
    host_type: Option<String>,
    instance_type: Option<String>,
}

/// The instance's HostType and BareMetalInstanceType (either or both; both set: the HostType
/// must serve the type, else INVALID_ARGUMENT naming both fields).
async fn machine_of(
    cx: &mut RequestCtx<'_>,
    spec: &pb::BareMetalInstanceSpec,
) -> ApiResult<Machine> {
    let host_type = if spec.host_type.is_empty() {
        None
    } else {
        let rec =
            super::resolve(cx, Kind::HostType, "spec.host_type", &spec.host_type, false).await?;
        let ht: pb::HostType = rec.decode()?;
        Some((rec, ht))
    };
    if spec.instance_type.is_empty() {
        let Some((rec, ht)) = host_type else {
            return Err(ApiError::invalid(
                "spec.host_type: host_type is required (or name a BareMetalInstanceType in spec.instance_type, or a BareMetalTemplate in spec.template)",
            ));
        };
        return Ok(Machine {
            interfaces: ht.interfaces,
            what: format!("HostType '{}'", rec.label()),
            host_type: Some(rec.id),
            instance_type: None,
        });
    }
    let t_rec = super::resolve(
        cx,
        Kind::BareMetalInstanceType,
        "spec.instance_type",
        &spec.instance_type,
        false,
    )
    .await?;
    let t: pb::BareMetalInstanceType = t_rec.decode()?;
    let served_by = t
        .spec
        .as_ref()
        .map(|s| s.host_types.clone())
        .unwrap_or_default();
    if let Some((rec, _)) = &host_type
        && !served_by.contains(&rec.id)
    {
        return Err(ApiError::invalid(format!(
            "spec.host_type: HostType '{}' does not serve BareMetalInstanceType '{}' named in spec.instance_type; omit spec.host_type or name one of the type's spec.host_types",
            rec.label(),
            t_rec.label()
        )));
    }
    Ok(Machine {
        interfaces: kinds::baremetal_instance_type::port_interfaces(&t),
        what: format!("BareMetalInstanceType '{}'", t_rec.label()),
        host_type: host_type.map(|(rec, _)| rec.id),
        instance_type: Some(t_rec.id),
    })
}

/// Only the security groups of the attachments (re-validated), the run strategy, the restart
/// trigger and metadata may change.
pub async fn update(
    cx: &mut RequestCtx<'_>,
    current: &Record,
    bm: &mut pb::BareMetalInstance,
) -> ApiResult<()> {
    validate::metadata(bm.metadata.as_ref())?;
    let spec = bm.spec.get_or_insert_with(Default::default);
    kinds::baremetal_instance::machine_fields(spec)?;
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
