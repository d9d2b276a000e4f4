//! Joining replicas on PostgreSQL (runs when `OSAC_TEST_DATABASE_URL` is set, always in CI): a
//! replica driving the linux dataplane runs alone — it may not join next to a live replica, and
//! no replica may join next to it.

use std::sync::Arc;
use std::time::Duration;

use osac_controller::replica::{JoinError, ReplicaConfig, join};
use osac_store::{ReplicaInfo, Store};

async fn fresh_store() -> Option<Arc<dyn Store>> {
    let Ok(base) = std::env::var("OSAC_TEST_DATABASE_URL") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but OSAC_TEST_DATABASE_URL is not set"
        );
        eprintln!("OSAC_TEST_DATABASE_URL not set: skipped");
        return None;
    };
    let pool = sqlx::PgPool::connect(&base).await.expect("connect");
    let name = format!("osac_join_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&pool)
        .await
        .expect("create database");
    let path_start = base.find("://").map_or(0, |i| i + 3);
    let url = match base[path_start..].rfind('/') {
        Some(i) => format!("{}/{name}", &base[..path_start + i]),
        None => format!("{base}/{name}"),
    };
    Some(osac_store::open(&url).await.expect("open"))
}

fn replica(id: &str, dataplane: bool) -> ReplicaConfig {
    ReplicaConfig {
        lease_ttl: Duration::from_secs(30),
        ..ReplicaConfig::new(ReplicaInfo {
            id: id.into(),
            name: format!("host:{id}"),
            address: "127.0.0.1:1".into(),
            dataplane,
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_linux_dataplane_runs_as_a_single_replica() {
    let Some(store) = fresh_store().await else {
        return;
    };
    join(&*store, &replica("plain-1", false))
        .await
        .expect("first replica");
    join(&*store, &replica("plain-2", false))
        .await
        .expect("plain replicas share");
    let refused = join(&*store, &replica("linux-1", true)).await;
    assert!(
        matches!(refused, Err(JoinError::Dataplane { .. })),
        "a dataplane replica next to live ones: {refused:?}"
    );
    // Once the others are gone it may run; then nobody may join it.
    let leases = store.leases().expect("shared store");
    leases.leave("plain-1").await.expect("leave");
    leases.leave("plain-2").await.expect("leave");
    join(&*store, &replica("linux-1", true))
        .await
        .expect("alone now");
    let refused = join(&*store, &replica("plain-3", false)).await;
    match refused {
        Err(e @ JoinError::Dataplane { .. }) => {
            assert!(e.to_string().contains("drives the linux dataplane"), "{e}")
        }
        other => panic!("a replica next to the dataplane one: {other:?}"),
    }
    // The refused replica is not left registered.
    let live: Vec<String> = leases
        .replicas()
        .await
        .expect("list")
        .into_iter()
        .filter(|r| r.live)
        .map(|r| r.info.id)
        .collect();
    assert_eq!(live, vec!["linux-1".to_string()]);
}
