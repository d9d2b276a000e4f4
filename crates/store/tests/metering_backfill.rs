//! Metering of what the store held before it metered, and of writes that change nothing, on
//! every backend (SQLite always; PostgreSQL when `OSAC_TEST_DATABASE_URL` is set):
//! - an object that accrues and has no interval (stored before metering: an upgrade) gets one
//!   when a server opens the store, once;
//! - the writes of one transaction that keep, change and keep the signature again meter
//!   exactly the changes (the known replaced record skips only what is unchanged), and a
//!   change rolled back to a savepoint is forgotten.

use std::sync::Arc;

use chrono::{Duration, Utc};
use osac_model::Kind;
use osac_model::metering::IntervalRow;
use osac_store::{Record, Store};
use serde_json::{Value, json};

mod support;

async fn intervals_of(s: &dyn Store, object: &str) -> Vec<IntervalRow> {
    let day = Duration::days(1);
    let mut rows = s
        .usage_intervals(Utc::now() - day, Utc::now() + day, None)
        .await
        .expect("intervals");
    rows.retain(|r| r.dims.object == object);
    rows
}

fn with_status(r: &Record, status: Value) -> Record {
    let mut r = r.clone();
    r.body["status"] = status;
    r
}

/// A tenant and a READY VirtualNetwork of it, and an ExternalIP still PENDING.
async fn objects(s: &dyn Store) -> (Record, Record) {
    let mut tx = s.begin().await.expect("begin");
    let mut tenant = Record::new(Kind::Tenant, "", json!({"spec": {}}));
    tenant.name = Some("acme".into());
    tx.insert(&tenant).await.expect("tenant");
    let vn = Record::new(
        Kind::VirtualNetwork,
        "acme",
        json!({"spec": {"ipv4_cidr": "10.0.0.0/16"}, "status": {"state": "VIRTUAL_NETWORK_STATE_READY"}}),
    );
    let vn = tx.insert(&vn).await.expect("vn");
    let eip = Record::new(
        Kind::ExternalIp,
        "acme",
        json!({"spec": {}, "status": {"state": "EXTERNAL_IP_STATE_PENDING"}}),
    );
    let eip = tx.insert(&eip).await.expect("eip");
    tx.commit().await.expect("commit");
    (vn, eip)
}

/// Deletes every interval and outbox row, as a store written before metering has none.
async fn forget_metering(url: &str) {
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await.expect("connect");
        sqlx::query("DELETE FROM usage_intervals")
            .execute(&pool)
            .await
            .expect("delete");
    } else {
        let pool = sqlx::SqlitePool::connect(url).await.expect("connect");
        sqlx::query("DELETE FROM usage_intervals")
            .execute(&pool)
            .await
            .expect("delete");
        pool.close().await;
    }
}

async fn backfill(url: &str) {
    let s = osac_store::open(url).await.expect("open");
    let (vn, eip) = objects(s.as_ref()).await;
    assert_eq!(intervals_of(s.as_ref(), &vn.id).await.len(), 1);
    drop(s);
    forget_metering(url).await;

    let before = Utc::now();
    let s = osac_store::open(url).await.expect("reopen");
    let rows = intervals_of(s.as_ref(), &vn.id).await;
    assert_eq!(rows.len(), 1, "the READY VN accrues again: {rows:?}");
    assert!(rows[0].ended_at.is_none());
    assert!(rows[0].started_at >= before, "it accrues from the opening");
    assert_eq!(rows[0].dims.tenant, "acme");
    assert!(
        intervals_of(s.as_ref(), &eip.id).await.is_empty(),
        "a PENDING ExternalIP accrues nothing"
    );
    drop(s);

    let s = osac_store::open(url).await.expect("open again");
    assert_eq!(
        intervals_of(s.as_ref(), &vn.id).await,
        rows,
        "opened once, not at every start"
    );
}

async fn one_transaction(s: Arc<dyn Store>) {
    let s = s.as_ref();
    let (_, eip) = objects(s).await;
    let allocated = |attached: bool, message: &str| json!({"state": "EXTERNAL_IP_STATE_ALLOCATED", "address": "192.0.2.9", "attached": attached, "message": message});
    // Each write replaces the one before it in the same transaction: the replaced record is
    // known without a statement every time.
    let mut tx = s.begin().await.expect("begin");
    let mut rec = eip;
    for (attached, message) in [
        (false, "a"),
        (false, "b"),
        (true, "c"),
        (true, "d"),
        (false, "e"),
    ] {
        rec = tx
            .update(&with_status(&rec, allocated(attached, message)))
            .await
            .expect("update")
            .expect("kept");
    }
    tx.commit().await.expect("commit");
    // Then in transactions of their own (the replaced record comes from the cache).
    for (attached, message) in [(false, "f"), (true, "g"), (true, "h")] {
        let mut tx = s.begin().await.expect("begin");
        rec = tx
            .update(&with_status(&rec, allocated(attached, message)))
            .await
            .expect("update")
            .expect("kept");
        tx.commit().await.expect("commit");
    }
    // A change undone by a rollback to a savepoint leaves the open interval as it was: the
    // next change closes the interval that is really open.
    let mut tx = s.begin().await.expect("begin");
    tx.savepoint().await.expect("savepoint");
    tx.update(&with_status(&rec, allocated(false, "undone")))
        .await
        .expect("update")
        .expect("kept");
    tx.rollback_to_savepoint().await.expect("rollback");
    rec = tx
        .update(&with_status(&rec, allocated(false, "i")))
        .await
        .expect("update")
        .expect("kept");
    tx.commit().await.expect("commit");
    let rows = intervals_of(s, &rec.id).await;
    let attached: Vec<&str> = rows.iter().map(|r| r.dims.attached.as_str()).collect();
    assert_eq!(
        attached,
        ["false", "true", "false", "true", "false"],
        "one interval per change: {rows:?}"
    );
    assert!(rows[..4].iter().all(|r| r.ended_at.is_some()));
    assert!(rows[4].ended_at.is_none());
    assert_eq!(rows[4].interval_id, format!("{}.{}", rec.id, rec.version));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_backfills_and_meters_only_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("osac.db").display());
    backfill(&url).await;
    let other = format!("sqlite://{}", dir.path().join("other.db").display());
    one_transaction(osac_store::open(&other).await.expect("open")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_backfills_and_meters_only_changes() {
    let (Some(a), Some(b)) = (
        support::fresh_postgres_url().await,
        support::fresh_postgres_url().await,
    ) else {
        assert!(
            !support::in_ci(),
            "CI=true but OSAC_TEST_DATABASE_URL is not set"
        );
        eprintln!("OSAC_TEST_DATABASE_URL not set: PostgreSQL metering skipped");
        return;
    };
    backfill(&a).await;
    one_transaction(osac_store::open(&b).await.expect("open")).await;
}
