//! Store-level work: the raw insert rate (the reference the REST create rate is compared with)
//! and the bulk load of the objects the read benchmarks run against.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use osac_controller::APPLIED_SPEC_ANNOTATION;
use osac_model::{FABRIC_FINALIZER, Kind};
use osac_store::{ListQuery, Record, Store};
use serde_json::{Value, json};

use crate::load::{self, Run};

/// A subnet as the REST create inserts it: spec with a VirtualNetwork reference (one
/// `object_refs` row), PENDING status, two labels (two `object_labels` rows), a name, the
/// fabric finalizer.
pub fn raw_subnet(tenant: &str, i: usize, vn: &str) -> Record {
    let body = json!({
        "spec": {"virtual_network": vn, "ipv4_cidr": "10.0.1.0/24"},
        "status": {"state": "SUBNET_STATE_PENDING"}
    });
    let mut rec = Record::new(Kind::Subnet, tenant, body);
    rec.name = Some(format!("raw-sn-{i}"));
    rec.creator = "osac-bench".into();
    rec.labels = BTreeMap::from([
        ("bench".to_string(), "raw".to_string()),
        ("bench-index".to_string(), i.to_string()),
    ]);
    rec.finalizers = vec![FABRIC_FINALIZER.to_string()];
    rec
}

/// `n` inserts, `writers` at a time, each in its own transaction. Returns the inserted ids.
pub async fn raw_inserts(
    store: Arc<dyn Store>,
    tenant: &str,
    n: usize,
    writers: usize,
) -> Run<String> {
    let tenant = tenant.to_string();
    // Each raw subnet references its own (non-existent) VirtualNetwork, as every REST-created
    // subnet of the create benchmark has its own VN.
    let vns: Arc<Vec<String>> = Arc::new(
        (0..n)
            .map(|_| Record::new(Kind::VirtualNetwork, "", json!({})).id)
            .collect(),
    );
    load::run(n, writers, move |i| {
        let store = store.clone();
        let rec = raw_subnet(&tenant, i, &vns[i]);
        async move {
            let mut tx = store.begin().await?;
            let rec = tx.insert(&rec).await?;
            tx.commit().await?;
            Ok(rec.id)
        }
    })
    .await
}

/// Removes objects in transactions of `batch`.
pub async fn remove_all(store: &dyn Store, ids: &[String], batch: usize) -> Result<()> {
    for chunk in ids.chunks(batch.max(1)) {
        let mut tx = store.begin().await?;
        for id in chunk {
            tx.remove(id).await?;
        }
        tx.commit().await?;
    }
    Ok(())
}

/// The number of objects of every kind in the store (events are records, not objects).
pub async fn count_all(store: &dyn Store) -> Result<i64> {
    let mut total = 0;
    for kind in Kind::ALL.into_iter().filter(|k| k.is_reconciled()) {
        let mut q = ListQuery::all(kind);
        q.limit = 1;
        total += store.list(&q).await?.total;
    }
    Ok(total)
}

/// The controllers' hash of `spec`: a bulk object carrying it in the applied-spec annotation
/// is "settled" — the controllers leave it alone, as they would a READY object created through
/// the API.
pub use osac_controller::spec_hash;

/// Subnets per bulk VirtualNetwork (each gets its own /24 of the VN's /16).
pub const SUBNETS_PER_VN: usize = 200;
/// Subnets sharing one `bench-group` label value: what a LIST filter matches.
pub const GROUP_SIZE: usize = 100;

/// What the bulk load wrote.
pub struct Bulk {
    pub vns: usize,
    pub subnets: usize,
    /// Full `bench-group` label values (each on exactly [`GROUP_SIZE`] subnets).
    pub groups: usize,
    /// Ids of every 10th bulk subnet, for GETs.
    pub sample_ids: Vec<String>,
    pub elapsed: Duration,
}

/// A copy of `template` (a READY object created through the API) with a new id and name, the
/// given labels and body, and the applied-spec annotation matching the new spec.
fn copy_of(
    template: &Record,
    name: String,
    labels: BTreeMap<String, String>,
    body: Value,
) -> Record {
    let mut rec = Record::new(template.kind, template.tenant.clone(), body);
    rec.name = Some(name);
    rec.creator = template.creator.clone();
    rec.labels = labels;
    rec.annotations = template.annotations.clone();
    rec.annotations
        .insert(APPLIED_SPEC_ANNOTATION.to_string(), spec_hash(&rec.body));
    rec.finalizers = template.finalizers.clone();
    rec
}

/// Rewrites the "10.0.1." of the template subnet's addresses to "10.0.{third}.".
fn retarget(v: &mut Value, third: usize) {
    if let Some(s) = v.as_str()
        && let Some(rest) = s.strip_prefix("10.0.1.")
    {
        *v = Value::String(format!("10.0.{third}.{rest}"));
    }
}

/// Loads `count` objects copied from the READY templates: one VirtualNetwork per
/// [`SUBNETS_PER_VN`] subnets, each subnet on its own /24, labelled `bench=bulk` and
/// `bench-group=g<n>`; `batch` inserts per transaction, `writers` transactions at a time.
pub async fn bulk_load(
    store: Arc<dyn Store>,
    vn_template: &Record,
    sn_template: &Record,
    count: usize,
    batch: usize,
    writers: usize,
) -> Result<Bulk> {
    let start = Instant::now();
    if sn_template
        .body
        .pointer("/spec/ipv4_cidr")
        .and_then(Value::as_str)
        != Some("10.0.1.0/24")
    {
        bail!(
            "the template subnet must be 10.0.1.0/24: {}",
            sn_template.body
        );
    }
    let vns = count.div_ceil(SUBNETS_PER_VN + 1);
    let subnets = count - vns;
    let bulk_labels = |extra: Option<String>| {
        let mut l = BTreeMap::from([("bench".to_string(), "bulk".to_string())]);
        if let Some(g) = extra {
            l.insert("bench-group".to_string(), g);
        }
        l
    };
    // VirtualNetworks first, so the subnets can reference them.
    let vn_records: Vec<Record> = (0..vns)
        .map(|v| {
            copy_of(
                vn_template,
                format!("bulk-vn-{v}"),
                bulk_labels(None),
                vn_template.body.clone(),
            )
        })
        .collect();
    let vn_ids: Arc<Vec<String>> = Arc::new(vn_records.iter().map(|r| r.id.clone()).collect());
    insert_batches(store.clone(), vn_records, batch, writers).await?;

    let sample = Arc::new(std::sync::Mutex::new(Vec::new()));
    let chunks = subnets.div_ceil(batch.max(1));
    let template = Arc::new(sn_template.clone());
    let run = load::run(chunks, writers, {
        let store = store.clone();
        let sample = sample.clone();
        move |c| {
            let store = store.clone();
            let vn_ids = vn_ids.clone();
            let template = template.clone();
            let sample = sample.clone();
            async move {
                let first = c * batch;
                let last = ((c + 1) * batch).min(subnets);
                let mut tx = store.begin().await?;
                let mut ids = Vec::new();
                for s in first..last {
                    let (v, third) = (s / SUBNETS_PER_VN, s % SUBNETS_PER_VN);
                    let mut body = template.body.clone();
                    body["spec"]["virtual_network"] = json!(vn_ids[v]);
                    body["spec"]["ipv4_cidr"] = json!(format!("10.0.{third}.0/24"));
                    if let Some(status) = body.get_mut("status").and_then(Value::as_object_mut) {
                        for field in ["ipv4_gateway", "vip_cidr"] {
                            if let Some(f) = status.get_mut(field) {
                                retarget(f, third);
                            }
                        }
                        if let Some(seg) = status.get_mut("segment_id") {
                            let n = 1_000_000 + s as i64;
                            *seg = if seg.is_string() {
                                json!(n.to_string())
                            } else {
                                json!(n)
                            };
                        }
                    }
                    let labels = bulk_labels(Some(format!("g{}", s / GROUP_SIZE)));
                    let rec = copy_of(&template, format!("bulk-sn-{s}"), labels, body);
                    let rec = tx.insert(&rec).await?;
                    if s % 10 == 0 {
                        ids.push(rec.id);
                    }
                }
                tx.commit().await?;
                sample.lock().expect("sample lock").extend(ids);
                Ok(())
            }
        }
    })
    .await;
    if let Some(e) = run.first_error {
        bail!(
            "bulk load failed ({} of {chunks} transactions): {e}",
            run.errors
        );
    }
    let sample_ids = std::mem::take(&mut *sample.lock().expect("sample lock"));
    Ok(Bulk {
        vns,
        subnets,
        groups: subnets / GROUP_SIZE,
        sample_ids,
        elapsed: start.elapsed(),
    })
}

async fn insert_batches(
    store: Arc<dyn Store>,
    records: Vec<Record>,
    batch: usize,
    writers: usize,
) -> Result<()> {
    let chunks: Arc<Vec<Vec<Record>>> = Arc::new(
        records
            .chunks(batch.max(1))
            .map(<[Record]>::to_vec)
            .collect(),
    );
    let n = chunks.len();
    let run = load::run(n, writers, move |c| {
        let store = store.clone();
        let chunks = chunks.clone();
        async move {
            let mut tx = store.begin().await?;
            for rec in &chunks[c] {
                tx.insert(rec)
                    .await
                    .with_context(|| format!("insert {}", rec.label()))?;
            }
            tx.commit().await?;
            Ok(())
        }
    })
    .await;
    match run.first_error {
        Some(e) => bail!("bulk insert failed: {e}"),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_hash_matches_the_controllers_algorithm() {
        // Key order and status do not matter; array order does.
        let a = json!({"spec": {"a": 1, "b": [1, 2]}, "status": {"state": "X"}});
        let b = json!({"spec": {"b": [1, 2], "a": 1}});
        let c = json!({"spec": {"b": [2, 1], "a": 1}});
        assert_eq!(spec_hash(&a), spec_hash(&b));
        assert_ne!(spec_hash(&a), spec_hash(&c));
        // FNV-1a 64 of "null" (no spec).
        assert_eq!(spec_hash(&json!({})), "5b9bc4ba528108e4");
    }

    #[test]
    fn retarget_rewrites_the_third_octet() {
        let mut v = json!("10.0.1.1");
        retarget(&mut v, 17);
        assert_eq!(v, json!("10.0.17.1"));
        let mut w = json!("10.0.1.240/28");
        retarget(&mut w, 0);
        assert_eq!(w, json!("10.0.0.240/28"));
    }

    #[test]
    fn raw_subnet_has_the_shape_of_a_created_subnet() {
        let r = raw_subnet("t", 3, "vn");
        assert_eq!(r.kind, Kind::Subnet);
        assert_eq!(r.references().len(), 1);
        assert_eq!(r.labels.len(), 2);
        assert_eq!(r.finalizers, vec![FABRIC_FINALIZER.to_string()]);
    }
}
