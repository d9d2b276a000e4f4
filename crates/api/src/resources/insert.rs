//! The insert path of every create, from the object's proto message: per-kind rules, quota,
//! initial state, finalizers, the row, its events, then the work that needs the row. Creates
//! that make further objects in the same transaction (tenant onboarding, auto-provisioned
//! ExternalIPs) call it again for each.

use osac_model::FABRIC_FINALIZER;
use osac_store::Record;

use crate::error::ApiResult;
use crate::request::{RequestCtx, name_taken, set_state, validate_metadata};
use crate::typed::Object;

/// Creates one object inside the caller's transaction: per-kind rules, initial state,
/// finalizers, insert, then the work that needs the row (pool counters, onboarding defaults,
/// auto-provisioned ExternalIPs). Used by every create, and by creates that make further
/// objects in the same transaction (all of it exists or none of it does).
pub(crate) fn insert_new<'c, 'a: 'c>(
    cx: &'c mut RequestCtx<'a>,
    obj: Object,
) -> futures::future::BoxFuture<'c, ApiResult<Record>> {
    Box::pin(async move {
        let kind = obj.kind();
        let meta = obj.user_metadata();
        validate_metadata(kind, &meta)?;
        let initial_status = super::initial_status(&obj);
        let mut body = super::prepare_create(cx, obj).await?;
        let initial_status = initial_status.or(cx.initial_status.take());
        crate::quota::check_create(cx, kind, &body).await?;
        if let Some(o) = body.as_object_mut() {
            o.remove("status");
            if let Some(status) = initial_status {
                o.insert("status".into(), status);
            }
        }
        set_state(&mut body, kind, kind.initial_state());
        let mut rec = Record::new(kind, cx.tenant.clone(), body);
        rec.name = meta.name.clone();
        rec.creator = cx.caller.subject.clone();
        rec.labels = meta.labels;
        rec.annotations = meta.annotations;
        rec.annotations
            .retain(|k, _| !crate::object::is_internal_annotation(k));
        if kind.needs_fabric_finalizer() {
            rec.finalizers.push(FABRIC_FINALIZER.to_string());
        }
        if super::workload::wants_auto_external_ip(kind, &rec.body) {
            rec.finalizers
                .push(osac_model::defaults::CLEANUP_FINALIZER.to_string());
        }
        let rec = cx
            .tx
            .insert(&rec)
            .await
            .map_err(|e| name_taken(e, kind, &meta.name, &cx.tenant))?;
        cx.created.push(rec.id.clone());
        let created = format!("{kind} '{}' created by {}", rec.label(), cx.caller.subject);
        let event = osac_store::events::for_record(&rec, false, "Created", created);
        osac_store::events::record(cx.tx, event).await?;
        for (reason, message) in std::mem::take(&mut cx.notes) {
            let event = osac_store::events::for_record(&rec, false, reason, message);
            osac_store::events::record(cx.tx, event).await?;
        }
        super::after_insert(cx, &rec).await?;
        Ok(rec)
    })
}
