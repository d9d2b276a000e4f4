//! Metering with three replicas on one PostgreSQL database: objects reconciled while a
//! replica goes away mid-life are metered once, and every surviving replica answers the same
//! totals for the period.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::{SecondsFormat, Utc};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_meter_once_and_agree() {
    let Some(s) = TestServer::start(Backend::Postgres).await else {
        return;
    };
    let r1 = s.replica().await;
    let r2 = s.replica().await;
    let t = s.tenant("acme").await;
    let start = Utc::now();
    // Several objects, so that their shards are spread over the replicas.
    let mut vns = Vec::new();
    for i in 0..4 {
        vns.push(
            t.ready_vn(&format!("rep-{i}"), &format!("10.{}.0.0/16", 60 + i))
                .await,
        );
    }
    // A replica goes away while they live; the others take its shards over.
    r1.shutdown().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    for vn in &vns {
        t.delete(&format!("{PUB}/virtual_networks/{}", id(vn)))
            .await
            .ok();
    }
    for vn in &vns {
        t.wait_gone(PUB, "virtual_networks", &id(vn)).await;
    }
    let end = Utc::now();

    let rfc = |t: chrono::DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Micros, true);
    let q = format!(
        "{PRIV}/usage?from={}&to={}&group_by=object&tenant=acme",
        rfc(start),
        rfc(end)
    );
    let here = s.admin.get(&q).await.ok();
    let there = Api::new(&Arc::new(RwLock::new(r2.url())), s.admin.token.as_deref());
    assert_eq!(
        here,
        there.get(&q).await.ok(),
        "every replica answers the same"
    );
    let acme = id(&s.admin.get(&format!("{PRIV}/tenants/acme")).await.ok());
    let rows = s
        .store()
        .usage_intervals(start, end, Some(&acme))
        .await
        .expect("intervals");
    for vn in &vns {
        let of: Vec<_> = rows.iter().filter(|r| r.dims.object == id(vn)).collect();
        assert_eq!(of.len(), 1, "one interval per object: {of:?}");
        assert!(of[0].ended_at.is_some(), "closed at the deletion request");
    }
    r2.shutdown().await;
    s.finish().await;
}
