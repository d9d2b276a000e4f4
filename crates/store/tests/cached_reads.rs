//! Cached reads (`Store::get_cached`, `Store::referrers_cached`) on PostgreSQL, where other
//! processes write the same database: a copy never outlives this process's own commits, a
//! change notification from another process makes it current before the change is passed on,
//! a writer that read a stale copy is refused once and then reads anew, and a listener that
//! lost its connection (and so maybe notifications) drops every copy.

use std::sync::Arc;
use std::time::{Duration, Instant};

use osac_model::Kind;
use osac_store::{Record, Store, StoreError, Write, WriteSet};
use serde_json::json;

mod support;

fn subnet(name: &str, vn: &str) -> Record {
    let mut r = Record::new(
        Kind::Subnet,
        "t1",
        json!({"spec": {"virtual_network": vn, "ipv4_cidr": "10.0.1.0/24"}, "status": {"state": "SUBNET_STATE_PENDING"}}),
    );
    r.name = Some(name.to_string());
    r
}

async fn insert(s: &dyn Store, rec: &Record) -> Record {
    let mut tx = s.begin().await.unwrap();
    let rec = tx.insert(rec).await.unwrap();
    tx.commit().await.unwrap();
    rec
}

async fn set_state(s: &dyn Store, rec: &Record, state: &str) -> Record {
    let mut next = rec.clone();
    next.body["status"]["state"] = json!(state);
    let applied = s.apply(WriteSet::of(vec![Write::Update(next)])).await;
    applied.unwrap().remove(0).expect("still there")
}

async fn cached_version(s: &dyn Store, id: &str) -> i64 {
    s.get_cached(id).await.unwrap().expect("stored").version
}

/// Waits until `feed` passes on a change of `id` (from another process).
async fn wait_for_change(
    feed: &mut tokio::sync::broadcast::Receiver<osac_store::Change>,
    id: &str,
) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, feed.recv()).await {
            Ok(Ok(c)) if c.id == id => return,
            Ok(_) => {}
            Err(_) => panic!("no change notification for {id} within 10 s"),
        }
    }
}

/// Writes a new version of `id` as no store would: without a change notification (one not
/// arrived yet); returns the connection for more such statements.
async fn bump_without_notice(url: &str, id: &str) -> sqlx::PgPool {
    let raw = sqlx::PgPool::connect(url).await.unwrap();
    sqlx::query("UPDATE objects SET version = version + 1 WHERE id = $1")
        .bind(id)
        .execute(&raw)
        .await
        .unwrap();
    raw
}

/// Two stores on one database, as two replicas have.
async fn two_processes() -> Option<(Arc<dyn Store>, Arc<dyn Store>, String)> {
    let url = support::fresh_postgres_url().await?;
    let here = osac_store::open(&url).await.expect("open postgres");
    let there = osac_store::open(&url).await.expect("open postgres again");
    Some((here, there, url))
}

fn skipped() {
    assert!(
        !support::in_ci(),
        "CI=true but OSAC_TEST_DATABASE_URL is not set: the PostgreSQL suite must run in CI"
    );
    eprintln!("OSAC_TEST_DATABASE_URL not set: PostgreSQL cached reads skipped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn own_commits_and_other_processes_changes_make_copies_current() {
    let Some((here, there, _)) = two_processes().await else {
        return skipped();
    };
    assert!(here.referrers_cached("vn1").await.unwrap().is_empty());
    let rec = insert(here.as_ref(), &subnet("a", "vn1")).await;
    assert_eq!(cached_version(here.as_ref(), &rec.id).await, 1);
    // The new reference row is seen at once too.
    assert_eq!(here.referrers_cached("vn1").await.unwrap().len(), 1);

    // This process's own write is read back at once.
    let rec = set_state(here.as_ref(), &rec, "SUBNET_STATE_READY").await;
    assert_eq!(cached_version(here.as_ref(), &rec.id).await, 2);

    // Another process's writes: once their notifications are passed on here, the copies
    // are current — a controller woken by the change reads what the change made.
    let mut feed = here.subscribe();
    let rec = set_state(there.as_ref(), &rec, "SUBNET_STATE_FAILED").await;
    let sibling = insert(there.as_ref(), &subnet("b", "vn1")).await;
    wait_for_change(&mut feed, &rec.id).await;
    assert_eq!(cached_version(here.as_ref(), &rec.id).await, 3);
    wait_for_change(&mut feed, &sibling.id).await;
    let referrers = here.referrers_cached("vn1").await.unwrap();
    assert_eq!(referrers.len(), 2, "{referrers:?}");
}

/// A copy older than the database (a write whose notification has not arrived: here a row
/// changed without one) costs its reader one refused write, never a loop of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_refused_for_a_stale_copy_forgets_it() {
    let Some((here, _, url)) = two_processes().await else {
        return skipped();
    };
    let rec = insert(here.as_ref(), &subnet("a", "vn1")).await;
    let stale = here.get_cached(&rec.id).await.unwrap().expect("stored");
    bump_without_notice(&url, &rec.id).await;
    assert_eq!(cached_version(here.as_ref(), &rec.id).await, 1, "the lag");
    let mut next = stale.clone();
    next.body["status"]["state"] = json!("SUBNET_STATE_READY");
    let refused = here.apply(WriteSet::of(vec![Write::Update(next)])).await;
    assert!(
        matches!(refused, Err(StoreError::Conflict { found: 2, .. })),
        "{refused:?}"
    );
    assert_eq!(cached_version(here.as_ref(), &rec.id).await, 2);
}

/// Notifications sent while the listener was disconnected are lost: every copy is dropped
/// and none is kept until it listens again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_listener_connection_drops_every_copy() {
    let Some((here, _, url)) = two_processes().await else {
        return skipped();
    };
    let rec = insert(here.as_ref(), &subnet("a", "vn1")).await;
    assert_eq!(cached_version(here.as_ref(), &rec.id).await, 1);
    let raw = bump_without_notice(&url, &rec.id).await;
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND query ILIKE 'LISTEN%'",
    )
    .execute(&raw)
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while cached_version(here.as_ref(), &rec.id).await != 2 {
        assert!(
            Instant::now() < deadline,
            "the copy from before the lost connection is still served"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
