//! The fast path of a shared namespace's batch (`Store::kv_write_current`) on PostgreSQL: a
//! writer that is current writes in one statement; a writer another replica overtook, or one
//! whose lease was taken over, writes nothing and is sent to the locked path
//! (`Store::kv_exclusive`), which catches it up.

use std::time::Duration;

use osac_store::Missed;

mod support;

fn put(key: &str, value: &str) -> (String, Option<String>) {
    (key.to_string(), Some(value.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_writes_only_when_current_and_fenced() {
    let Some(url) = support::fresh_postgres_url().await else {
        assert!(!support::in_ci(), "CI sets OSAC_TEST_DATABASE_URL");
        return;
    };
    let s = osac_store::open(&url).await.expect("open postgres");
    let ns = "fast-path";
    let leases = s.leases().expect("PostgreSQL coordinates replicas");
    leases
        .join(&support::replica("a"), Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(
        leases
            .acquire("a", &[7], Duration::from_secs(30))
            .await
            .unwrap(),
        vec![(7, 1)]
    );
    let held = vec![(7, "a".to_string(), 1)];

    // Before its first write the namespace has no row: reads are current at generation 0,
    // a write takes the locked path, which makes the row.
    assert_eq!(
        s.kv_write_current(ns, 0, &held, &[]).await.unwrap(),
        Some(0)
    );
    assert_eq!(
        s.kv_write_current(ns, 0, &held, &[put("k", "0")])
            .await
            .unwrap(),
        None
    );
    assert!(s.kv_load(ns).await.unwrap().is_empty(), "nothing written");
    let first = s.kv_exclusive(ns, 0).await.unwrap().expect("shared");
    assert_eq!(first.commit(&[put("k", "1")]).await.unwrap(), 1);

    // Current, lease held: written as the next generation, journalled like a locked batch.
    assert_eq!(
        s.kv_write_current(ns, 1, &held, &[put("k", "2"), put("j", "x")])
            .await
            .unwrap(),
        Some(2)
    );
    let mut behind = s.kv_exclusive(ns, 1).await.unwrap().expect("shared");
    assert_eq!(behind.generation(), 2);
    assert_eq!(
        behind.take_missed(),
        Missed::Changes(vec![put("j", "x"), put("k", "2")])
    );
    drop(behind);

    // Overtaken: a writer still at generation 1 writes nothing, reads are not current either.
    assert_eq!(
        s.kv_write_current(ns, 1, &held, &[put("k", "stale")])
            .await
            .unwrap(),
        None
    );
    assert_eq!(s.kv_write_current(ns, 1, &held, &[]).await.unwrap(), None);
    assert_eq!(s.kv_write_current(ns, 0, &held, &[]).await.unwrap(), None);
    assert_eq!(
        s.kv_write_current(ns, 2, &held, &[]).await.unwrap(),
        Some(2)
    );

    // A lease that was taken over (here: released and acquired anew, fencing token 2) refuses
    // the old token's batch, and the current token's batch goes through.
    leases.release("a", &[7]).await.unwrap();
    assert_eq!(
        leases
            .acquire("a", &[7], Duration::from_secs(30))
            .await
            .unwrap(),
        vec![(7, 2)]
    );
    assert_eq!(
        s.kv_write_current(ns, 2, &held, &[put("k", "fenced")])
            .await
            .unwrap(),
        None
    );
    assert_eq!(s.kv_write_current(ns, 2, &held, &[]).await.unwrap(), None);
    let now = vec![(7, "a".to_string(), 2)];
    assert_eq!(
        s.kv_write_current(ns, 2, &now, &[put("k", "3")])
            .await
            .unwrap(),
        Some(3)
    );
    let mut stored = s.kv_load(ns).await.unwrap();
    stored.sort();
    assert_eq!(
        stored,
        vec![
            ("j".to_string(), "x".to_string()),
            ("k".to_string(), "3".to_string())
        ],
        "only the current, fenced writes are stored"
    );
}

/// Writers racing on the fast path from the same generation: exactly one wins, the others
/// write nothing (each then takes the locked path).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_fast_writers_one_wins() {
    let Some(url) = support::fresh_postgres_url().await else {
        assert!(!support::in_ci(), "CI sets OSAC_TEST_DATABASE_URL");
        return;
    };
    let s = osac_store::open(&url).await.expect("open postgres");
    let ns = "fast-race";
    let first = s.kv_exclusive(ns, 0).await.unwrap().expect("shared");
    assert_eq!(first.commit(&[put("seed", "0")]).await.unwrap(), 1);
    let writers: Vec<_> = (0..8)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(async move {
                s.kv_write_current(ns, 1, &[], &[put(&format!("w{i}"), "v")])
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut won = Vec::new();
    for w in writers {
        won.extend(w.await.unwrap());
    }
    assert_eq!(won, vec![2], "one writer made generation 2");
    assert_eq!(s.kv_load(ns).await.unwrap().len(), 2, "seed and the winner");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_batches_delete_as_well_as_put() {
    let Some(url) = support::fresh_postgres_url().await else {
        assert!(!support::in_ci(), "CI sets OSAC_TEST_DATABASE_URL");
        return;
    };
    let s = osac_store::open(&url).await.expect("open postgres");
    let ns = "fast-deletes";
    let first = s.kv_exclusive(ns, 0).await.unwrap().expect("shared");
    assert_eq!(
        first.commit(&[put("a", "1"), put("b", "1")]).await.unwrap(),
        1
    );
    // Unfenced (no lease to hold): a delete and a put, then puts alone.
    assert_eq!(
        s.kv_write_current(ns, 1, &[], &[("a".into(), None), put("c", "2")])
            .await
            .unwrap(),
        Some(2)
    );
    assert_eq!(
        s.kv_write_current(ns, 2, &[], &[put("d", "3")])
            .await
            .unwrap(),
        Some(3)
    );
    assert_eq!(
        s.kv_load(ns).await.unwrap(),
        vec![
            ("b".to_string(), "1".to_string()),
            ("c".to_string(), "2".to_string()),
            ("d".to_string(), "3".to_string()),
        ]
    );
}
