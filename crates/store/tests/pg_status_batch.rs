//! Concurrent status writes on PostgreSQL share statements (a batch per free slot), yet each
//! keeps the outcome it would have alone: a good write commits with its event and is
//! published; a stale version is a Conflict, a lost lease Fenced, a missing row NotFound —
//! and none of those writes anything, its event included; a write that changes labels goes
//! or a reference goes through its own transaction; two writes of one object at one version: exactly one wins.
//! (The writes change a state that accrues no usage: one that opens or closes a usage interval
//! is metered in its own transaction, docs/metering.md.)

use std::sync::Arc;
use std::time::Duration;

use osac_model::Kind;
use osac_store::{FenceToken, Record, Store, StoreError, Write, WriteSet};
use serde_json::json;

mod support;

fn subnet(n: usize) -> Record {
    let mut r = Record::new(
        Kind::Subnet,
        "t-batch",
        json!({"spec": {"virtual_network": format!("vn-{}", n % 3), "ipv4_cidr": "10.0.1.0/24"},
               "status": {"state": "SUBNET_STATE_PENDING"}}),
    );
    r.name = Some(format!("s{n}"));
    r.labels = [("color".to_string(), "red".to_string())].into();
    r
}

/// A store on a fresh PostgreSQL database and its URL; None (outside CI) without a server.
async fn postgres() -> Option<(String, Arc<dyn Store>)> {
    let Some(url) = support::fresh_postgres_url().await else {
        assert!(!support::in_ci(), "CI sets OSAC_TEST_DATABASE_URL");
        return None;
    };
    let s = osac_store::open(&url).await.expect("open postgres");
    Some((url, s))
}

/// Stores `n` subnets (`subnet(0..n)`).
async fn subnets(s: &dyn Store, n: usize) -> Vec<Record> {
    let mut tx = s.begin().await.unwrap();
    let mut stored = Vec::new();
    for i in 0..n {
        stored.push(tx.insert(&subnet(i)).await.unwrap());
    }
    tx.commit().await.unwrap();
    stored
}

/// What each write of the test is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Case {
    Good,
    Stale,
    LostLease,
    NewLabels,
    NewReference,
    Missing,
    Twice,
}

const CASES: [Case; 7] = [
    Case::Good,
    Case::Stale,
    Case::LostLease,
    Case::NewLabels,
    Case::NewReference,
    Case::Missing,
    Case::Twice,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batched_status_writes_keep_each_outcome() {
    let Some((url, s)) = postgres().await else {
        return;
    };
    let leases = s.leases().expect("PostgreSQL coordinates replicas");
    let long = Duration::from_secs(30);
    leases.join(&support::replica("a"), long).await.unwrap();
    let held = leases.acquire("a", &[3], long).await.unwrap();
    assert_eq!(held, vec![(3, 1)]);
    let fence = |token| {
        Some(FenceToken {
            shard: 3,
            replica: "a".into(),
            token,
        })
    };

    let n = 245;
    let stored = subnets(s.as_ref(), n).await;
    let mut feed = s.subscribe();
    // Another process on the database: it learns of changes only by their notifications.
    let other = osac_store::open(&url).await.expect("open postgres again");
    let mut notified = other.subscribe();
    let (commits_before, sets_before) = osac_store::group_commits();

    let start = Arc::new(tokio::sync::Barrier::new(n + n / CASES.len()));
    let mut tasks = Vec::new();
    let mut submit = |i: usize, case: Case, set: WriteSet, event: String| {
        let s = s.clone();
        let start = start.clone();
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            (i, case, event, s.apply(set).await)
        }));
    };
    for (i, rec) in stored.iter().enumerate() {
        let case = CASES[i % CASES.len()];
        let mut next = rec.clone();
        next.body["status"]["state"] = json!("SUBNET_STATE_FAILED");
        let event = Record::new(Kind::Event, "t-batch", json!({"reason": format!("e{i}")}));
        let mut token = 1;
        match case {
            Case::Stale => next.version = 9,
            Case::LostLease => token = 2,
            Case::NewLabels => next.labels = [("color".to_string(), "blue".to_string())].into(),
            Case::NewReference => next.body["spec"]["virtual_network"] = json!("vn-moved"),
            Case::Missing => next.id = format!("gone-{i}"),
            Case::Good | Case::Twice => {}
        }
        let set = |next: Record, event: &Record| WriteSet {
            fence: fence(token),
            writes: vec![Write::Update(next), Write::Insert(event.clone())],
        };
        if case == Case::Twice {
            let other = Record::new(Kind::Event, "t-batch", json!({"reason": "twin"}));
            submit(i, case, set(next.clone(), &other), other.id.clone());
        }
        submit(i, case, set(next, &event), event.id.clone());
    }

    let mut twice_won = vec![0; n];
    let mut kept_events = Vec::new();
    let mut dropped_events = Vec::new();
    for t in tasks {
        let (i, case, event, outcome) = t.await.unwrap();
        match (case, &outcome) {
            (Case::Good | Case::NewLabels | Case::NewReference, Ok(applied)) => {
                assert_eq!(applied[0].as_ref().map(|r| r.version), Some(2), "{i}");
                kept_events.push(event);
            }
            (Case::Twice, Ok(_)) => {
                twice_won[i] += 1;
                kept_events.push(event);
            }
            (Case::Twice, Err(StoreError::Conflict { found: 2, .. })) => dropped_events.push(event),
            (Case::Stale, Err(StoreError::Conflict { found: 1, .. }))
            | (Case::LostLease, Err(StoreError::Fenced(3)))
            | (Case::Missing, Err(StoreError::NotFound(_))) => dropped_events.push(event),
            _ => panic!("write {i} ({case:?}): {outcome:?}"),
        }
    }

    for (i, rec) in stored.iter().enumerate() {
        let case = CASES[i % CASES.len()];
        let got = s.get(&rec.id).await.unwrap().expect("kept");
        let written = matches!(
            case,
            Case::Good | Case::NewLabels | Case::NewReference | Case::Twice
        );
        assert_eq!(got.version, if written { 2 } else { 1 }, "{i} ({case:?})");
        let state = if written {
            "SUBNET_STATE_FAILED"
        } else {
            "SUBNET_STATE_PENDING"
        };
        assert_eq!(got.body["status"]["state"], state, "{i} ({case:?})");
        if case == Case::Twice {
            assert_eq!(
                twice_won[i], 1,
                "exactly one of two writes at one version wins"
            );
        }
    }
    for id in &kept_events {
        assert!(
            s.get(id).await.unwrap().is_some(),
            "a written status keeps its event"
        );
    }
    for id in &dropped_events {
        assert!(
            s.get(id).await.unwrap().is_none(),
            "a refused write leaves no event"
        );
    }
    // The label changes went through their own transactions: the label rows follow.
    let blue = osac_store::ListQuery {
        tenant: Some("t-batch".into()),
        filter: "this.metadata.labels[\"color\"] == \"blue\"".into(),
        ..osac_store::ListQuery::all(Kind::Subnet)
    };
    let each = n / CASES.len();
    assert_eq!(
        s.list(&blue).await.unwrap().total,
        i64::try_from(each).unwrap()
    );
    // So did the reference change: the referrers follow.
    assert_eq!(s.referrers("vn-moved").await.unwrap().len(), each);
    // Published here and notified to the other process: every written object and event,
    // never a refused write's event.
    for (feed, whom) in [(&mut feed, "here"), (&mut notified, "to the other process")] {
        let mut seen = std::collections::HashSet::new();
        while let Ok(Ok(c)) = tokio::time::timeout(Duration::from_millis(500), feed.recv()).await {
            seen.insert(c.id);
        }
        for id in &kept_events {
            assert!(seen.contains(id), "a committed event is published {whom}");
        }
        for id in &dropped_events {
            assert!(
                !seen.contains(id),
                "a refused write is not published {whom}"
            );
        }
    }
    // And the writes did share statements.
    let (commits, sets) = osac_store::group_commits();
    assert!(
        sets - sets_before > commits - commits_before,
        "no statement carried more than one write: {} statements, {} writes",
        commits - commits_before,
        sets - sets_before
    );
}

/// A status write never waits on a slot for a row another transaction holds: its statement
/// (alone or shared) skips it, the other writes commit at once, and the held row's write
/// waits off the slot and commits once the holder ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_held_row_holds_up_only_its_own_write() {
    let Some((url, s)) = postgres().await else {
        return;
    };
    let n = 60;
    let stored = subnets(s.as_ref(), n).await;
    // Another transaction holds four of the rows for as long as the test needs (its own
    // connection: no idle timeout ends it).
    let held: Vec<usize> = vec![0, 1, n / 2, n - 1];
    let mut holder: sqlx::PgConnection = sqlx::Connection::connect(&url).await.expect("connect");
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    for &i in &held {
        sqlx::query("SELECT id FROM objects WHERE id = $1 FOR UPDATE")
            .bind(&stored[i].id)
            .execute(&mut holder)
            .await
            .unwrap();
    }

    let write = |rec: &Record| {
        let s = s.clone();
        let mut next = rec.clone();
        next.body["status"]["state"] = json!("SUBNET_STATE_FAILED");
        let event = Record::new(Kind::Event, "t-batch", json!({"reason": "Ready"}));
        async move {
            s.apply(WriteSet::of(vec![
                Write::Update(next),
                Write::Insert(event),
            ]))
            .await
        }
    };
    // The first two held rows' writes go first, one at a time: each alone in a statement
    // (one per slot), then the rest at once, in shared statements.
    let mut tasks = Vec::new();
    for rec in &stored[..2] {
        tasks.push(tokio::spawn(write(rec)));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let start = Arc::new(tokio::sync::Barrier::new(n - 2));
    for rec in &stored[2..] {
        let start = start.clone();
        let write = write(rec);
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            write.await
        }));
    }
    let mut waiting = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        if held.contains(&i) {
            waiting.push(task);
            continue;
        }
        let outcome = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap_or_else(|_| panic!("write {i} waited for a row it does not write"))
            .unwrap();
        assert!(outcome.is_ok(), "{outcome:?}");
    }
    for task in &waiting {
        assert!(
            !task.is_finished(),
            "a held row's write waits for its holder"
        );
    }
    sqlx::query("COMMIT").execute(&mut holder).await.unwrap();
    for task in waiting {
        let outcome = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("written once the holder ended")
            .unwrap();
        assert!(outcome.is_ok(), "{outcome:?}");
    }
    for rec in &stored {
        assert_eq!(s.get(&rec.id).await.unwrap().expect("kept").version, 2);
    }
}
