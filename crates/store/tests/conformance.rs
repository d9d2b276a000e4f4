//! One conformance suite, run against every store backend (SQLite always; PostgreSQL when
//! `OSAC_TEST_DATABASE_URL` is set, in a fresh database per run).

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use osac_model::Kind;
use osac_store::{FenceToken, ListQuery, Record, StateCount, Store, StoreError, Write, WriteSet};
use serde_json::json;

mod support;

async fn sqlite() -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("osac.db").display());
    (osac_store::open(&url).await.expect("open sqlite"), dir)
}

/// A fresh PostgreSQL database for this run, or None when no server is configured.
async fn postgres() -> Option<Arc<dyn Store>> {
    let url = support::fresh_postgres_url().await?;
    Some(osac_store::open(&url).await.expect("open postgres"))
}

fn uuid_simple() -> String {
    format!("{:x}", Utc::now().timestamp_nanos_opt().unwrap_or_default())
}

fn subnet(tenant: &str, name: &str, vn: &str, labels: &[(&str, &str)]) -> Record {
    let mut r = Record::new(
        Kind::Subnet,
        tenant,
        json!({"spec": {"virtual_network": vn, "ipv4_cidr": "10.0.1.0/24"}, "status": {"state": "SUBNET_STATE_PENDING"}}),
    );
    r.name = Some(name.to_string());
    r.labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    r
}

async fn crud_and_versions(s: &dyn Store) {
    let mut tx = s.begin().await.unwrap();
    let rec = tx.insert(&subnet("t1", "a", "vn1", &[])).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(rec.version, 1);
    let got = s.get(&rec.id).await.unwrap().expect("stored");
    assert_eq!(got.name.as_deref(), Some("a"));
    assert_eq!(got.body, rec.body);

    let mut tx = s.begin().await.unwrap();
    let mut next = got.clone();
    next.body["status"]["state"] = json!("SUBNET_STATE_READY");
    let updated = tx.update(&next).await.unwrap().expect("still there");
    assert_eq!(updated.version, 2);
    // A writer holding the old version loses.
    let err = tx.update(&next).await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Conflict {
                expected: 1,
                found: 2,
                ..
            }
        ),
        "{err:?}"
    );
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    let found = tx
        .find_by_name(Kind::Subnet, "t1", "a")
        .await
        .unwrap()
        .expect("by name");
    assert_eq!(found.id, rec.id);
    assert!(
        tx.find_by_name(Kind::Subnet, "t2", "a")
            .await
            .unwrap()
            .is_none()
    );
}

async fn names_are_unique_per_kind_and_tenant(s: &dyn Store) {
    let mut tx = s.begin().await.unwrap();
    tx.insert(&subnet("t1", "dup", "vn1", &[])).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    let err = tx
        .insert(&subnet("t1", "dup", "vn1", &[]))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::AlreadyExists(_)), "{err:?}");
    drop(tx);
    let mut tx = s.begin().await.unwrap();
    tx.insert(&subnet("t2", "dup", "vn1", &[])).await.unwrap();
    let mut unnamed = subnet("t1", "x", "vn1", &[]);
    unnamed.name = None;
    tx.insert(&unnamed).await.unwrap();
    unnamed.id = uuid_simple();
    tx.insert(&unnamed).await.unwrap();
    tx.commit().await.unwrap();
}

async fn rollback_on_drop_and_feed_after_commit(s: &dyn Store) {
    let mut feed = s.subscribe();
    let mut tx = s.begin().await.unwrap();
    let rec = tx
        .insert(&subnet("t3", "rolled-back", "vn1", &[]))
        .await
        .unwrap();
    drop(tx);
    assert!(
        s.get(&rec.id).await.unwrap().is_none(),
        "dropped transaction must roll back"
    );
    let mut tx = s.begin().await.unwrap();
    let rec = tx.insert(&subnet("t3", "kept", "vn9", &[])).await.unwrap();
    tx.commit().await.unwrap();
    let change = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let c = feed.recv().await.expect("feed open");
            if c.id == rec.id {
                return c;
            }
        }
    })
    .await
    .expect("change published after commit");
    assert_eq!(change.kind, "subnets");
    assert!(!change.gone);
    assert_eq!(change.refs, vec!["vn9".to_string()]);
}

async fn list_filter_order_paging(s: &dyn Store) {
    let mut tx = s.begin().await.unwrap();
    for i in 0..12 {
        let color = if i % 3 == 0 { "red" } else { "blue" };
        tx.insert(&subnet(
            "t4",
            &format!("web-{i:02}"),
            "vn1",
            &[("color", color)],
        ))
        .await
        .unwrap();
    }
    tx.insert(&subnet(
        "t5",
        "web-other-tenant",
        "vn1",
        &[("color", "red")],
    ))
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let q = |filter: &str, order: &str, offset: i64, limit: i64| ListQuery {
        kind: Kind::Subnet,
        tenant: Some("t4".into()),
        filter: filter.into(),
        order: order.into(),
        offset,
        limit,
    };
    let red = s
        .list(&q("this.metadata.labels[\"color\"] == \"red\"", "", 0, 100))
        .await
        .unwrap();
    assert_eq!(red.total, 4);
    assert!(red.items.iter().all(|r| r.tenant == "t4"));
    let page = s
        .list(&q(
            "this.metadata.name.startsWith(\"web-\")",
            "metadata.name desc",
            2,
            3,
        ))
        .await
        .unwrap();
    assert_eq!(page.total, 12);
    let names: Vec<_> = page.items.iter().filter_map(|r| r.name.clone()).collect();
    assert_eq!(names, vec!["web-09", "web-08", "web-07"]);
    let by_state = s
        .list(&q("this.status.state == 1", "", 0, 100))
        .await
        .unwrap();
    assert_eq!(by_state.total, 12, "enum compared by number");
    let err = s.list(&q("this.spec.(", "", 0, 10)).await.unwrap_err();
    assert!(matches!(err, StoreError::Filter(_)), "{err:?}");
    let all = s
        .list(&ListQuery {
            tenant: None,
            ..q("this.metadata.labels[\"color\"] == \"red\"", "", 0, 100)
        })
        .await
        .unwrap();
    assert_eq!(all.total, 5);
}

async fn references_and_finalizers(s: &dyn Store) {
    let mut tx = s.begin().await.unwrap();
    let mut vn = Record::new(
        Kind::VirtualNetwork,
        "t6",
        json!({"spec": {"ipv4_cidr": "10.0.0.0/16"}}),
    );
    vn.finalizers = vec!["osac.openshift.io/fabric".into()];
    let vn = tx.insert(&vn).await.unwrap();
    let child = tx
        .insert(&subnet("t6", "child", &vn.id, &[]))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let refs = s.referrers(&vn.id).await.unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0].source, child.id);
    assert_eq!(refs[0].field, "spec.virtual_network");
    // A status write keeps the referrers; moving the reference moves them (also when the
    // store caches referrers).
    let mut tx = s.begin().await.unwrap();
    let mut status = child.clone();
    status.body["status"]["state"] = json!("SUBNET_STATE_READY");
    let child = tx.update(&status).await.unwrap().expect("kept");
    tx.commit().await.unwrap();
    assert_eq!(s.referrers(&vn.id).await.unwrap().len(), 1);
    let mut tx = s.begin().await.unwrap();
    let mut moved = child.clone();
    moved.body["spec"]["virtual_network"] = json!("elsewhere");
    let moved = tx.update(&moved).await.unwrap().expect("kept");
    tx.commit().await.unwrap();
    assert!(s.referrers(&vn.id).await.unwrap().is_empty());
    assert_eq!(s.referrers("elsewhere").await.unwrap().len(), 1);
    let mut tx = s.begin().await.unwrap();
    let mut back = moved.clone();
    back.body["spec"]["virtual_network"] = json!(vn.id);
    let child = tx.update(&back).await.unwrap().expect("kept");
    tx.commit().await.unwrap();
    assert_eq!(s.referrers(&vn.id).await.unwrap().len(), 1);
    assert!(s.referrers("elsewhere").await.unwrap().is_empty());

    // Deleting with a finalizer keeps the row; dropping the finalizer removes it.
    let mut tx = s.begin().await.unwrap();
    let mut deleting = vn.clone();
    deleting.deleted_at = Some(Utc::now());
    let kept = tx
        .update(&deleting)
        .await
        .unwrap()
        .expect("finalizer keeps it");
    let mut done = kept.clone();
    done.finalizers.clear();
    assert!(tx.update(&done).await.unwrap().is_none());
    tx.remove(&child.id).await.unwrap();
    tx.commit().await.unwrap();
    assert!(s.get(&vn.id).await.unwrap().is_none());
    assert!(s.referrers(&vn.id).await.unwrap().is_empty());
}

async fn locked_read_modify_write_loses_nothing(s: Arc<dyn Store>) {
    let mut tx = s.begin().await.unwrap();
    let counter = tx
        .insert(&Record::new(
            Kind::ExternalIpPool,
            "",
            json!({"status": {"allocated": "0"}}),
        ))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (s, id) = (s.clone(), counter.id.clone());
        tasks.push(tokio::spawn(async move {
            let mut tx = s.begin().await.unwrap();
            let mut rec = tx.lock(&id).await.unwrap().unwrap();
            let n: i64 = rec.body["status"]["allocated"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            rec.body["status"]["allocated"] = json!((n + 1).to_string());
            tx.update(&rec).await.unwrap();
            tx.commit().await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let rec = s.get(&counter.id).await.unwrap().unwrap();
    assert_eq!(rec.body["status"]["allocated"], json!("20"));
    assert_eq!(rec.version, 21);
}

async fn kind_lock_serialises_whole_kind_rules(s: Arc<dyn Store>) {
    let mut tx = s.begin().await.unwrap();
    let counter = tx
        .insert(&Record::new(Kind::NetworkClass, "", json!({"title": "0"})))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let (s, id) = (s.clone(), counter.id.clone());
        tasks.push(tokio::spawn(async move {
            let mut tx = s.begin().await.unwrap();
            tx.lock_kind(Kind::NetworkClass).await.unwrap();
            // A plain read: only the kind lock keeps the read-modify-write race-free.
            let mut rec = tx.get(&id).await.unwrap().unwrap();
            let n: i64 = rec.body["title"].as_str().unwrap().parse().unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
            rec.body["title"] = json!((n + 1).to_string());
            tx.update(&rec).await.unwrap();
            tx.commit().await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let rec = s.get(&counter.id).await.unwrap().unwrap();
    assert_eq!(rec.body["title"], json!("10"));
}

async fn key_value_records(s: &dyn Store) {
    s.kv_put("ns", "a", "1").await.unwrap();
    s.kv_put("ns", "b", "2").await.unwrap();
    s.kv_put("ns", "a", "3").await.unwrap();
    s.kv_put("other", "a", "x").await.unwrap();
    assert_eq!(
        s.kv_load("ns").await.unwrap(),
        vec![("a".into(), "3".into()), ("b".into(), "2".into())]
    );
    assert_eq!(s.kv_get("ns", "a").await.unwrap().as_deref(), Some("3"));
    assert_eq!(s.kv_get("other", "a").await.unwrap().as_deref(), Some("x"));
    assert_eq!(s.kv_get("ns", "missing").await.unwrap(), None);
    assert_eq!(s.kv_get("nope", "a").await.unwrap(), None);
    s.kv_delete("ns", "a").await.unwrap();
    assert_eq!(s.kv_get("ns", "a").await.unwrap(), None);
    s.kv_delete("ns", "missing").await.unwrap();
    assert_eq!(s.kv_load("ns").await.unwrap().len(), 1);
    // A batch: upserts, deletes, and a key changed twice (the last change wins).
    let batch: Vec<(String, Option<String>)> = vec![
        ("b".into(), None),
        ("c".into(), Some("4".into())),
        ("d".into(), Some("5".into())),
        ("d".into(), Some("6".into())),
        ("e".into(), Some("7".into())),
        ("e".into(), None),
        ("missing".into(), None),
    ];
    s.kv_write("ns", &batch).await.unwrap();
    s.kv_write("ns", &[]).await.unwrap();
    assert_eq!(
        s.kv_load("ns").await.unwrap(),
        vec![("c".into(), "4".into()), ("d".into(), "6".into())]
    );
    assert_eq!(s.kv_load("other").await.unwrap().len(), 1);
    // More rows than one statement carries.
    let many: Vec<(String, Option<String>)> = (0..600)
        .map(|i| (format!("k{i:03}"), Some(i.to_string())))
        .collect();
    s.kv_write("bulk", &many).await.unwrap();
    assert_eq!(s.kv_load("bulk").await.unwrap().len(), 600);
    let gone: Vec<(String, Option<String>)> = many.into_iter().map(|(k, _)| (k, None)).collect();
    s.kv_write("bulk", &gone).await.unwrap();
    assert!(s.kv_load("bulk").await.unwrap().is_empty());
}

async fn counts_by_kind_and_state(s: &dyn Store) {
    let before = s.count_by_state().await.unwrap();
    let count = |all: &[StateCount], kind: Kind, state: &str| {
        all.iter()
            .find(|c| c.kind == kind && c.state == state)
            .map_or(0, |c| c.count)
    };
    let mut tx = s.begin().await.unwrap();
    for name in ["cs1", "cs2", "cs3"] {
        tx.insert(&subnet("tc", name, "vn1", &[])).await.unwrap();
    }
    let mut ready = subnet("tc", "cs4", "vn1", &[]);
    ready.body["status"]["state"] = json!("SUBNET_STATE_READY");
    tx.insert(&ready).await.unwrap();
    let mut no_state = Record::new(Kind::VirtualNetwork, "tc", json!({"spec": {}}));
    no_state.name = Some("cs-vn".into());
    tx.insert(&no_state).await.unwrap();
    tx.commit().await.unwrap();
    let after = s.count_by_state().await.unwrap();
    let grew = |kind, state: &str| count(&after, kind, state) - count(&before, kind, state);
    assert_eq!(grew(Kind::Subnet, "SUBNET_STATE_PENDING"), 3);
    assert_eq!(grew(Kind::Subnet, "SUBNET_STATE_READY"), 1);
    assert_eq!(grew(Kind::VirtualNetwork, ""), 1);
    // One row per (kind, state).
    let mut keys: Vec<_> = after.iter().map(|c| (c.kind, c.state.clone())).collect();
    let n = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n);
}

/// A nameless record (an event-like row that no unique rule can refuse).
fn nameless(tenant: &str) -> Record {
    Record::new(Kind::Event, tenant, json!({"spec": {"reason": "Test"}}))
}

/// Group commit: concurrent write sets share transactions, yet each is all or nothing — a
/// set that fails (stale version, a name taken by its second write) leaves nothing behind
/// and publishes nothing, and the sets around it are committed.
async fn group_commit_isolates_sets(s: Arc<dyn Store>) {
    let mut tx = s.begin().await.unwrap();
    let mut targets = Vec::new();
    for i in 0..24 {
        targets.push(
            tx.insert(&subnet("t-group", &format!("g{i}"), "vn1", &[]))
                .await
                .unwrap(),
        );
    }
    tx.commit().await.unwrap();
    let mut feed = s.subscribe();
    let mut tasks = Vec::new();
    for (i, target) in targets.iter().enumerate() {
        let s = s.clone();
        let mut next = target.clone();
        next.body["status"]["state"] = json!("SUBNET_STATE_READY");
        let extra = nameless("t-group");
        let set = match i % 3 {
            // Good: an update and its event.
            0 => WriteSet::of(vec![Write::Update(next), Write::Insert(extra.clone())]),
            // Stale version: refused before anything is written.
            1 => {
                next.version = 7;
                WriteSet::of(vec![Write::Update(next), Write::Insert(extra.clone())])
            }
            // The second write takes a name that exists: the first must be undone.
            _ => {
                let mut taken = subnet("t-group", "g0", "vn1", &[]);
                taken.id = format!("dup-{i}");
                WriteSet::of(vec![Write::Insert(extra.clone()), Write::Insert(taken)])
            }
        };
        tasks.push(tokio::spawn(
            async move { (i, extra.id, s.apply(set).await) },
        ));
    }
    let mut undone = Vec::new();
    for t in tasks {
        let (i, extra, outcome) = t.await.unwrap();
        match i % 3 {
            0 => {
                let applied = outcome.expect("a good set commits");
                assert_eq!(applied.len(), 2);
                assert_eq!(applied[0].as_ref().map(|r| r.version), Some(2));
                assert!(s.get(&extra).await.unwrap().is_some(), "its event is kept");
            }
            1 => {
                assert!(
                    matches!(outcome, Err(StoreError::Conflict { .. })),
                    "{outcome:?}"
                );
                undone.push(extra);
            }
            _ => {
                assert!(
                    matches!(outcome, Err(StoreError::AlreadyExists(_))),
                    "{outcome:?}"
                );
                undone.push(extra);
            }
        }
    }
    for id in &undone {
        assert!(
            s.get(id).await.unwrap().is_none(),
            "a failed set leaves nothing"
        );
    }
    for (i, target) in targets.iter().enumerate() {
        let stored = s.get(&target.id).await.unwrap().unwrap();
        let expected = if i % 3 == 0 { 2 } else { 1 };
        assert_eq!(stored.version, expected, "{}", target.label());
    }
    // Driver records go through the same commits.
    s.kv_write("group-test", &[("k".into(), Some("v".into()))])
        .await
        .unwrap();
    assert_eq!(
        s.kv_get("group-test", "k").await.unwrap().as_deref(),
        Some("v")
    );
    // Published: the committed updates, never a failed set's rows.
    let mut seen = Vec::new();
    while let Ok(Ok(c)) = tokio::time::timeout(Duration::from_millis(300), feed.recv()).await {
        seen.push(c.id);
    }
    for id in &undone {
        assert!(
            !seen.contains(id),
            "a failed set's change must not be published"
        );
    }
    let updated = targets.iter().step_by(3).filter(|t| seen.contains(&t.id));
    assert_eq!(updated.count(), 8, "every committed update is published");
}

/// A text read, parsed: comparable with the value read of the same object.
fn parsed(r: osac_store::RecordText) -> Record {
    let body = serde_json::from_str(r.body.get()).expect("stored text is JSON");
    r.with_body(body)
}

/// Reads of the stored JSON text return the same objects, metadata and page (filter, order,
/// paging, total) as the parsed reads.
async fn text_reads_match_value_reads(s: &dyn Store) {
    let mut tx = s.begin().await.unwrap();
    let mut ids = Vec::new();
    for (i, colour) in ["red", "blue", "red", "red"].iter().enumerate() {
        let mut r = subnet(
            "text-t",
            &format!("text-{i}"),
            "vn-text",
            &[("colour", colour)],
        );
        r.body = json!({
            "spec": {"virtual_network": "vn-text", "ipv4_cidr": format!("10.9.{i}.0/24"),
                     "nested": {"z": [1, 2.5, {"deep": null}], "a": "ünïcødé \"quoted\" \\ / \u{1F600}"}},
            "status": {"state": "SUBNET_STATE_READY", "count": i, "ok": i % 2 == 0}
        });
        r.annotations.insert("note".into(), format!("n{i}"));
        // Free text may hold anything, control characters included.
        r.creator = format!("creator\u{1e}{i}\u{1f}\t\"x\"");
        if i == 3 {
            r.finalizers = vec!["osac.openshift.io/fabric".into()];
        }
        ids.push(tx.insert(&r).await.unwrap().id);
    }
    tx.commit().await.unwrap();
    // A deleted object still listed (its finalizer holds it).
    let mut tx = s.begin().await.unwrap();
    let mut last = tx.get(&ids[3]).await.unwrap().expect("inserted");
    last.deleted_at = Some(Utc::now());
    tx.update(&last)
        .await
        .unwrap()
        .expect("its finalizer keeps it");
    tx.commit().await.unwrap();

    for id in &ids {
        // Read the text before and after a value read (SQLite caches what `get` read).
        let text = s
            .get_text(id)
            .await
            .unwrap()
            .expect("text read finds the object");
        let value = s
            .get(id)
            .await
            .unwrap()
            .expect("value read finds the object");
        assert_eq!(parsed(text), value);
        let text = s
            .get_text(id)
            .await
            .unwrap()
            .expect("text read finds the object");
        assert_eq!(parsed(text), value);
    }
    assert!(s.get_text("no-such-object").await.unwrap().is_none());

    let queries = [
        ListQuery {
            tenant: Some("text-t".into()),
            ..ListQuery::all(Kind::Subnet)
        },
        ListQuery {
            tenant: Some("text-t".into()),
            filter: "this.metadata.labels.colour == \"red\"".into(),
            order: "this.metadata.name desc".into(),
            offset: 1,
            limit: 1,
            ..ListQuery::all(Kind::Subnet)
        },
        ListQuery {
            tenant: Some("text-t".into()),
            order: "this.metadata.name desc".into(),
            ..ListQuery::all(Kind::Subnet)
        },
        ListQuery {
            tenant: Some("text-t".into()),
            order: "this.metadata.creation_timestamp asc".into(),
            offset: 1,
            limit: 2,
            ..ListQuery::all(Kind::Subnet)
        },
        ListQuery {
            tenant: Some("text-t".into()),
            offset: 10,
            ..ListQuery::all(Kind::Subnet)
        },
        ListQuery {
            tenant: Some("someone-else".into()),
            ..ListQuery::all(Kind::Subnet)
        },
    ];
    for q in &queries {
        let values = s.list(q).await.unwrap();
        let texts = s.list_text(q).await.unwrap();
        assert_eq!(texts.total, values.total, "{q:?}");
        let texts: Vec<Record> = texts.items.into_iter().map(parsed).collect();
        assert_eq!(texts, values.items, "{q:?}");
    }
    let red = s.list_text(&queries[1]).await.unwrap();
    assert_eq!((red.total, red.items.len()), (3, 1));
    assert_eq!(red.items[0].name.as_deref(), Some("text-2"));
    let err = s
        .list_text(&ListQuery {
            filter: "this.spec ==".into(),
            ..ListQuery::all(Kind::Subnet)
        })
        .await;
    assert!(matches!(err, Err(StoreError::Filter(_))), "{err:?}");
}

/// Whether a change for `id` has arrived on `feed` (without waiting).
fn published(feed: &mut tokio::sync::broadcast::Receiver<osac_store::Change>, id: &str) -> bool {
    let mut seen = false;
    while let Ok(c) = feed.try_recv() {
        seen |= c.id == id;
    }
    seen
}

/// Request transactions sharing the group commit ([`Store::begin_shared`]): turns and write
/// sets queued together are committed together, yet each is its own all-or-nothing unit — a
/// turn that rolls back or fails leaves the others' writes, nothing of a turn is visible or
/// published before its commit returns, and after it returns it is stored.
async fn shared_transactions_commit_alone_or_together(s: Arc<dyn Store>, shares_commits: bool) {
    let mut tx = s.begin().await.unwrap();
    let existing = tx
        .insert(&subnet("t-shared", "existing", "vn1", &[]))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let before = osac_store::write_transactions();
    // Held so that (on SQLite) every writer below queues for the same shared transaction.
    let holder = s.begin().await.unwrap();
    let kept = {
        let s = s.clone();
        tokio::spawn(async move {
            let mut feed = s.subscribe();
            let mut turn = s.begin_shared().await.unwrap();
            let rec = turn
                .insert(&subnet("t-shared", "kept", "vn1", &[]))
                .await
                .unwrap();
            assert!(
                s.get(&rec.id).await.unwrap().is_none(),
                "not visible before commit"
            );
            assert!(
                !published(&mut feed, &rec.id),
                "not published before commit"
            );
            turn.commit().await.unwrap();
            assert!(
                s.get(&rec.id).await.unwrap().is_some(),
                "durable once commit returns"
            );
            rec.id
        })
    };
    let rolled_back = {
        let s = s.clone();
        tokio::spawn(async move {
            let mut turn = s.begin_shared().await.unwrap();
            let rec = turn
                .insert(&subnet("t-shared", "rolled-back", "vn1", &[]))
                .await
                .unwrap();
            drop(turn);
            rec.id
        })
    };
    let failing = {
        let s = s.clone();
        tokio::spawn(async move {
            let mut turn = s.begin_shared().await.unwrap();
            let first = turn
                .insert(&subnet("t-shared", "half", "vn1", &[]))
                .await
                .unwrap();
            let taken = turn
                .insert(&subnet("t-shared", "existing", "vn1", &[]))
                .await;
            assert!(
                matches!(taken, Err(StoreError::AlreadyExists(_))),
                "{taken:?}"
            );
            // The caller gives up on its error: the turn is rolled back as a whole.
            drop(turn);
            first.id
        })
    };
    let set = {
        let s = s.clone();
        let rec = subnet("t-shared", "by-set", "vn1", &[]);
        tokio::spawn(async move {
            s.apply(WriteSet::of(vec![Write::Insert(rec.clone())]))
                .await
                .unwrap();
            rec.id
        })
    };
    tokio::time::sleep(Duration::from_millis(30)).await;
    holder.commit().await.unwrap();
    let mut feed = s.subscribe();
    let (kept, rolled_back, failing, set) = (
        kept.await.unwrap(),
        rolled_back.await.unwrap(),
        failing.await.unwrap(),
        set.await.unwrap(),
    );
    for id in [&kept, &set, &existing.id] {
        assert!(s.get(id).await.unwrap().is_some(), "{id} committed");
    }
    for id in [&rolled_back, &failing] {
        assert!(s.get(id).await.unwrap().is_none(), "{id} rolled back");
        assert!(!published(&mut feed, id), "{id} never published");
    }
    // The holder, then the queued writers: on SQLite one shared transaction for the turns
    // and the set; on PostgreSQL each is its own. (The counter is per process: nextest runs
    // each test in its own.)
    let used = osac_store::write_transactions() - before;
    if shares_commits {
        assert_eq!(used, 2, "the queued writers shared one commit");
    } else {
        assert_eq!(used, 3, "the holder and the two committing writers");
    }
}

/// A turn open longer than [`osac_store::TURN_LIMIT`] is rolled back so the writers queued
/// behind it proceed; its later calls and its commit fail, and nothing of it is stored.
async fn shared_turn_expires(s: Arc<dyn Store>) {
    let mut slow = s.begin_shared().await.unwrap();
    let lost = slow
        .insert(&subnet("t-expiry", "slow", "vn1", &[]))
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let other = subnet("t-expiry", "queued", "vn1", &[]);
    let queued = {
        let (s, other) = (s.clone(), other.clone());
        tokio::spawn(async move {
            let mut turn = s.begin_shared().await.unwrap();
            turn.insert(&other).await.unwrap();
            turn.commit().await.unwrap();
            std::time::Instant::now()
        })
    };
    tokio::time::sleep(osac_store::TURN_LIMIT + Duration::from_millis(500)).await;
    let done = queued.await.unwrap();
    assert!(
        done.duration_since(started) < osac_store::TURN_LIMIT + Duration::from_millis(500),
        "the queued writer proceeds once the slow turn expires"
    );
    assert!(s.get(&other.id).await.unwrap().is_some());
    let late = slow.get(&lost.id).await;
    assert!(matches!(late, Err(StoreError::TurnExpired(_))), "{late:?}");
    let commit = slow.commit().await;
    assert!(
        matches!(commit, Err(StoreError::TurnExpired(_))),
        "{commit:?}"
    );
    assert!(
        s.get(&lost.id).await.unwrap().is_none(),
        "an expired turn writes nothing"
    );
}

async fn suite(s: Arc<dyn Store>) {
    s.ping().await.unwrap();
    crud_and_versions(s.as_ref()).await;
    names_are_unique_per_kind_and_tenant(s.as_ref()).await;
    rollback_on_drop_and_feed_after_commit(s.as_ref()).await;
    list_filter_order_paging(s.as_ref()).await;
    text_reads_match_value_reads(s.as_ref()).await;
    references_and_finalizers(s.as_ref()).await;
    locked_read_modify_write_loses_nothing(s.clone()).await;
    kind_lock_serialises_whole_kind_rules(s.clone()).await;
    key_value_records(s.as_ref()).await;
    counts_by_kind_and_state(s.as_ref()).await;
    group_commit_isolates_sets(s.clone()).await;
    status_write_sets(s.as_ref()).await;
    stable_reads(s.as_ref()).await;
    events_within_their_transaction(s.as_ref()).await;
    names_within_their_transaction(s.as_ref()).await;
}

/// `Tx::find_by_name` answers with the transaction's own writes (a store may answer from
/// what it keeps in memory): a row renamed or removed in it is no longer found under its old
/// name, a row it created is, and a rolled-back savepoint's renames are undone.
async fn names_within_their_transaction(s: &dyn Store) {
    let tenant = "t-names";
    let mut tx = s.begin().await.unwrap();
    let first = tx.insert(&subnet(tenant, "n1", "vn-n", &[])).await.unwrap();
    tx.commit().await.unwrap();
    assert!(s.get(&first.id).await.unwrap().is_some());
    let find = |name: &'static str| (Kind::Subnet, tenant, name);

    let mut tx = s.begin().await.unwrap();
    let (k, t, n) = find("n1");
    let found = tx.find_by_name(k, t, n).await.unwrap().expect("committed");
    assert_eq!((found.id.as_str(), found.version), (first.id.as_str(), 1));
    let mut renamed = found.clone();
    renamed.name = Some("n2".into());
    tx.update(&renamed).await.unwrap();
    assert!(
        tx.find_by_name(k, t, "n1").await.unwrap().is_none(),
        "renamed away"
    );
    let now = tx
        .find_by_name(k, t, "n2")
        .await
        .unwrap()
        .expect("new name");
    assert_eq!((now.id.as_str(), now.version), (first.id.as_str(), 2));
    let second = tx.insert(&subnet(tenant, "n1", "vn-n", &[])).await.unwrap();
    let taken = tx.find_by_name(k, t, "n1").await.unwrap().expect("created");
    assert_eq!(taken.id, second.id);
    tx.remove(&second.id).await.unwrap();
    assert!(
        tx.find_by_name(k, t, "n1").await.unwrap().is_none(),
        "removed"
    );
    tx.savepoint().await.unwrap();
    let mut again = now.clone();
    again.name = Some("n3".into());
    tx.update(&again).await.unwrap();
    tx.rollback_to_savepoint().await.unwrap();
    assert!(
        tx.find_by_name(k, t, "n3").await.unwrap().is_none(),
        "rolled back"
    );
    let kept = tx.find_by_name(k, t, "n2").await.unwrap().expect("kept");
    assert_eq!(kept.version, 2);
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    assert!(tx.find_by_name(k, t, "n1").await.unwrap().is_none());
    let last = tx
        .find_by_name(k, t, "n2")
        .await
        .unwrap()
        .expect("committed");
    assert_eq!(last.version, 2);
    drop(tx);

    // A row found by name in a transaction that then rolls back was never there.
    let mut tx = s.begin().await.unwrap();
    let ghost = tx.insert(&subnet(tenant, "n9", "vn-n", &[])).await.unwrap();
    assert!(tx.find_by_name(k, t, "n9").await.unwrap().is_some());
    drop(tx);
    assert!(s.get(&ghost.id).await.unwrap().is_none(), "rolled back");
    let mut tx = s.begin().await.unwrap();
    assert!(tx.find_by_name(k, t, "n9").await.unwrap().is_none());
    drop(tx);
}

/// Events inserted in a transaction (a store may hold their rows back until something could
/// read them) are read back in it by id and in lists, in insertion order; those of a
/// rolled-back savepoint or a dropped transaction are never stored; the rest are at commit.
async fn events_within_their_transaction(s: &dyn Store) {
    let tenant = "t-events";
    let events = || ListQuery {
        tenant: Some(tenant.into()),
        ..ListQuery::all(Kind::Event)
    };
    let mut tx = s.begin().await.unwrap();
    let first = tx.insert(&nameless(tenant)).await.unwrap();
    let second = tx.insert(&nameless(tenant)).await.unwrap();
    tx.savepoint().await.unwrap();
    let undone = tx.insert(&nameless(tenant)).await.unwrap();
    tx.rollback_to_savepoint().await.unwrap();
    let got = tx.get(&second.id).await.unwrap().expect("read back by id");
    assert_eq!(got.body, second.body);
    assert!(tx.get(&undone.id).await.unwrap().is_none(), "rolled back");
    let third = tx.insert(&nameless(tenant)).await.unwrap();
    let listed: Vec<String> = tx
        .list_items(&events())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(
        listed,
        vec![first.id.clone(), second.id.clone(), third.id.clone()]
    );
    let fourth = tx.insert(&nameless(tenant)).await.unwrap();
    // An update of an event not written yet, and a locking read naming one, find its row.
    let mut changed = fourth.clone();
    changed.annotations.insert("seen".into(), "yes".into());
    let updated = tx.update(&changed).await.unwrap().expect("kept");
    assert_eq!(updated.version, 2);
    let fifth = tx.insert(&nameless(tenant)).await.unwrap();
    let locked = tx
        .lock_shared_all(std::slice::from_ref(&fifth.id))
        .await
        .unwrap();
    assert_eq!(locked.len(), 1, "a locking read finds the event");
    let sixth = tx.insert(&nameless(tenant)).await.unwrap();
    tx.remove(&sixth.id).await.unwrap();
    tx.commit().await.unwrap();
    let stored_fourth = s.get(&fourth.id).await.unwrap().expect("committed");
    assert_eq!(
        (stored_fourth.version, stored_fourth.annotations.get("seen")),
        (2, Some(&"yes".to_string()))
    );
    assert!(s.get(&sixth.id).await.unwrap().is_none(), "removed");
    let stored: Vec<String> = s
        .list(&events())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(
        stored,
        vec![first.id, second.id, third.id, fourth.id.clone(), fifth.id]
    );
    assert!(s.get(&undone.id).await.unwrap().is_none());

    let mut tx = s.begin().await.unwrap();
    let dropped = tx.insert(&nameless(tenant)).await.unwrap();
    drop(tx);
    assert!(
        s.get(&dropped.id).await.unwrap().is_none(),
        "never committed"
    );

    // Events held back when an object is inserted: stored with it; if the insert is refused (a
    // name taken) and its savepoint rolled back, those held before the savepoint are still
    // stored, those after it are not.
    let mut tx = s.begin().await.unwrap();
    let before_object = tx.insert(&nameless(tenant)).await.unwrap();
    let object = tx
        .insert(&subnet(tenant, "with-events", "vn-e", &[]))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert!(s.get(&object.id).await.unwrap().is_some());
    assert!(s.get(&before_object.id).await.unwrap().is_some());
    let mut tx = s.begin().await.unwrap();
    let kept = tx.insert(&nameless(tenant)).await.unwrap();
    tx.savepoint().await.unwrap();
    let undone = tx.insert(&nameless(tenant)).await.unwrap();
    let taken = tx.insert(&subnet(tenant, "with-events", "vn-e", &[])).await;
    assert!(
        matches!(taken, Err(StoreError::AlreadyExists(_))),
        "{taken:?}"
    );
    tx.rollback_to_savepoint().await.unwrap();
    tx.commit().await.unwrap();
    assert!(
        s.get(&kept.id).await.unwrap().is_some(),
        "held before the savepoint: stored at commit"
    );
    assert!(s.get(&undone.id).await.unwrap().is_none(), "rolled back");
}

/// `Tx::get_stable`: the row as this process last committed it or read it (an older version
/// only when another process wrote since), of any kind and tenant (the caller filters), and
/// never a row this process removed.
async fn stable_reads(s: &dyn Store) {
    let mut tx = s.begin().await.unwrap();
    let stored = tx
        .insert(&subnet("t-stable", "stable", "vn-s", &[]))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut next = stored.clone();
    next.body["status"] = json!({"state": "SUBNET_STATE_READY"});
    let mut tx = s.begin().await.unwrap();
    let updated = tx.update(&next).await.unwrap().expect("updated");
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    let read = tx.get_stable(&stored.id).await.unwrap().expect("stored");
    assert_eq!(
        (read.kind, read.tenant.as_str(), read.version),
        (Kind::Subnet, "t-stable", updated.version),
        "this process's own commit is seen"
    );
    assert_eq!(tx.get_stable("no-such-id").await.unwrap(), None);
    tx.remove(&stored.id).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    assert_eq!(
        tx.get_stable(&stored.id).await.unwrap(),
        None,
        "a removed row is not read back"
    );
    drop(tx);
}

/// A reconcile's status write (`Store::apply` of an update and its event): written with its
/// event and published; a write set that also changes labels or references rewrites their
/// rows (label filters and referrers follow); a stale version or a missing row writes
/// nothing, the event included.
async fn status_write_sets(s: &dyn Store) {
    let tenant = "t-status";
    let labelled = |color: &str| ListQuery {
        tenant: Some(tenant.into()),
        filter: format!("this.metadata.labels[\"color\"] == \"{color}\""),
        ..ListQuery::all(Kind::Subnet)
    };
    let mut tx = s.begin().await.unwrap();
    let stored = tx
        .insert(&subnet(tenant, "status", "vn-a", &[("color", "red")]))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let event = |reason: &str| Record::new(Kind::Event, tenant, json!({"reason": reason}));
    let mut feed = s.subscribe();

    // Status only: version 2, its event stored, both published.
    let mut ready = stored.clone();
    ready.body["status"]["state"] = json!("SUBNET_STATE_READY");
    ready.finalizers = vec!["osac.io/fabric".into()];
    let ev = event("Ready");
    let applied = s
        .apply(WriteSet::of(vec![
            Write::Update(ready.clone()),
            Write::Insert(ev.clone()),
        ]))
        .await
        .unwrap();
    let written = applied[0].clone().expect("kept");
    assert_eq!(written.version, 2);
    let got = s.get(&stored.id).await.unwrap().expect("kept");
    assert_eq!(got.body["status"]["state"], "SUBNET_STATE_READY");
    assert_eq!(got.finalizers, vec!["osac.io/fabric".to_string()]);
    assert!(s.get(&ev.id).await.unwrap().is_some(), "event stored");
    let mut published = Vec::new();
    while published.len() < 2 {
        let c = tokio::time::timeout(Duration::from_secs(5), feed.recv())
            .await
            .expect("published")
            .expect("feed open");
        if c.id == stored.id || c.id == ev.id {
            published.push(c.id);
        }
    }
    assert_eq!(s.list(&labelled("red")).await.unwrap().total, 1);
    assert_eq!(s.referrers("vn-a").await.unwrap().len(), 1);

    // Labels and a reference change with the status: their rows follow.
    let mut moved = written.clone();
    moved.labels = [("color".to_string(), "blue".to_string())].into();
    moved.body["spec"]["virtual_network"] = json!("vn-b");
    s.apply(WriteSet::of(vec![Write::Update(moved.clone())]))
        .await
        .unwrap();
    assert_eq!(s.list(&labelled("red")).await.unwrap().total, 0);
    assert_eq!(s.list(&labelled("blue")).await.unwrap().total, 1);
    assert!(s.referrers("vn-a").await.unwrap().is_empty());
    assert_eq!(s.referrers("vn-b").await.unwrap().len(), 1);

    // Stale: refused with the stored version, nothing written, not even the event.
    let late = event("Late");
    let outcome = s
        .apply(WriteSet::of(vec![
            Write::Update(ready.clone()),
            Write::Insert(late.clone()),
        ]))
        .await;
    assert!(
        matches!(
            outcome,
            Err(StoreError::Conflict {
                expected: 1,
                found: 3,
                ..
            })
        ),
        "{outcome:?}"
    );
    assert!(s.get(&late.id).await.unwrap().is_none());
    assert_eq!(s.get(&stored.id).await.unwrap().expect("kept").version, 3);

    // Gone: not found, nothing written.
    let mut ghost = ready.clone();
    ghost.id = uuid_simple();
    let outcome = s
        .apply(WriteSet::of(vec![
            Write::Update(ghost),
            Write::Insert(late.clone()),
        ]))
        .await;
    assert!(
        matches!(outcome, Err(StoreError::NotFound(_))),
        "{outcome:?}"
    );
    assert!(s.get(&late.id).await.unwrap().is_none());
}

/// A transaction fenced with `shard`'s lease that writes one record: the error of the fence
/// check or of the commit (a store may refuse at either). A refused write leaves no record.
async fn fenced_write(
    s: &dyn Store,
    shard: i32,
    replica: &str,
    token: i64,
) -> Result<(), StoreError> {
    let rec = Record::new(Kind::Event, "t-fence", json!({"reason": "fenced"}));
    let mut tx = s.begin().await?;
    let outcome = async {
        tx.fence(shard, replica, token).await?;
        tx.insert(&rec).await?;
        Ok::<_, StoreError>(())
    }
    .await;
    let outcome = match outcome {
        Ok(()) => tx.commit().await,
        Err(e) => Err(e),
    };
    if outcome.is_err() {
        assert!(
            s.get(&rec.id).await?.is_none(),
            "a refused write left its record"
        );
    }
    outcome
}

/// Shard leases: one holder at a time, an expired lease is taken over with a higher fencing
/// token, and a transaction fenced with the old token is refused.
async fn leases_and_fencing(s: &dyn Store) {
    let leases = s.leases().expect("PostgreSQL coordinates replicas");
    let info = support::replica;
    let short = Duration::from_millis(700);
    assert!(leases.join(&info("a"), short).await.unwrap().is_empty());
    assert_eq!(leases.join(&info("b"), short).await.unwrap().len(), 1);
    assert_eq!(
        leases.acquire("a", &[1, 2], short).await.unwrap(),
        vec![(1, 1), (2, 1)]
    );
    assert!(
        leases
            .acquire("b", &[1, 2], short)
            .await
            .unwrap()
            .is_empty(),
        "held by a"
    );
    fenced_write(s, 1, "a", 1)
        .await
        .expect("a holds shard 1 with token 1");
    tokio::time::sleep(Duration::from_millis(900)).await;
    // Expired: a cannot renew it, b takes it with token 2, a's writes are refused.
    assert!(leases.renew("a", &[1], short).await.unwrap().is_empty());
    assert_eq!(
        leases
            .acquire("b", &[1], Duration::from_secs(30))
            .await
            .unwrap(),
        vec![(1, 2)]
    );
    assert!(matches!(
        fenced_write(s, 1, "a", 1).await,
        Err(StoreError::Fenced(1))
    ));
    // A write set carrying the lost lease is refused too, and writes nothing.
    let stale = subnet("t-fence", "fenced-set", "vn1", &[]);
    let set = WriteSet {
        fence: Some(FenceToken {
            shard: 1,
            replica: "a".into(),
            token: 1,
        }),
        writes: vec![Write::Insert(stale.clone())],
    };
    assert!(matches!(s.apply(set).await, Err(StoreError::Fenced(1))));
    assert!(s.get(&stale.id).await.unwrap().is_none());
    // So is a status write (an update and its event) under the lost lease: the row keeps its
    // status and version, the event is not stored.
    let mut tx = s.begin().await.unwrap();
    let owned = tx
        .insert(&subnet("t-fence", "fenced-status", "vn1", &[]))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let status_write = |replica: &str, token: i64, reason: &str| {
        let mut ready = owned.clone();
        ready.body["status"]["state"] = json!("SUBNET_STATE_READY");
        let event = Record::new(Kind::Event, "t-fence", json!({"reason": reason}));
        let set = WriteSet {
            fence: Some(FenceToken {
                shard: 1,
                replica: replica.into(),
                token,
            }),
            writes: vec![Write::Update(ready), Write::Insert(event.clone())],
        };
        (set, event.id)
    };
    let (set, event) = status_write("a", 1, "fenced");
    assert!(matches!(s.apply(set).await, Err(StoreError::Fenced(1))));
    assert!(s.get(&event).await.unwrap().is_none());
    let kept = s.get(&owned.id).await.unwrap().expect("kept");
    assert_eq!(kept.version, 1);
    assert_eq!(kept.body["status"]["state"], "SUBNET_STATE_PENDING");
    assert!(
        matches!(fenced_write(s, 1, "b", 1).await, Err(StoreError::Fenced(1))),
        "old token"
    );
    fenced_write(s, 1, "b", 2)
        .await
        .expect("b holds shard 1 with token 2");
    let (set, event) = status_write("b", 2, "owned");
    let applied = s.apply(set).await.expect("b's status write commits");
    assert_eq!(applied[0].as_ref().map(|r| r.version), Some(2));
    assert!(s.get(&event).await.unwrap().is_some());
    // Released shards are free at once; the listing shows who holds what.
    leases.release("b", &[1]).await.unwrap();
    assert_eq!(
        leases.acquire("a", &[1], short).await.unwrap(),
        vec![(1, 3)]
    );
    let held: Vec<_> = leases
        .shard_leases()
        .await
        .unwrap()
        .into_iter()
        .filter(|l| l.live)
        .map(|l| (l.shard, l.owner))
        .collect();
    assert_eq!(held, vec![(1, Some("a".to_string()))]);
    leases.leave("a").await.unwrap();
    // b's registration lapsed during the wait; a heartbeat renews it.
    let live_now = leases
        .heartbeat(&info("b"), Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(live_now.len(), 1);
    let live: Vec<_> = leases
        .replicas()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.live)
        .collect();
    assert_eq!(live.len(), 1, "a left, b is still registered");
    assert_eq!(live[0].info.id, "b");
}

/// A fenced transaction commits only while its lease holds: once another replica took the
/// shard over (the lease expired while it was open), its commit is refused and writes
/// nothing — the new owner never writes alongside it. The owner's renewals never wait for its
/// fenced transactions (renewals waiting for writers in flight made writers queue behind them),
/// and a takeover never waits for them either.
async fn fenced_writes_hold_off_takeover_not_renewal(s: &dyn Store) {
    let leases = s.leases().expect("PostgreSQL coordinates replicas");
    let short = Duration::from_millis(700);
    assert_eq!(
        leases.acquire("c", &[7], short).await.unwrap(),
        vec![(7, 1)]
    );
    let late = Record::new(Kind::Event, "t-fence", json!({"reason": "late"}));
    let mut tx = s.begin().await.unwrap();
    let checked = tx.fence(7, "c", 1).await;
    let renewed = tokio::time::timeout(Duration::from_secs(3), leases.renew("c", &[7], short))
        .await
        .expect("a renewal does not wait for the owner's fenced transaction")
        .unwrap();
    assert_eq!(renewed, vec![(7, 1)]);
    tokio::time::sleep(Duration::from_millis(900)).await;
    // Expired while the fenced transaction is open.
    let taken = tokio::time::timeout(Duration::from_secs(3), leases.acquire("d", &[7], short))
        .await
        .expect("a takeover skips a lease held by a fenced transaction, it does not wait")
        .unwrap();
    let committed = match checked {
        Ok(()) => {
            tx.insert(&late).await.unwrap();
            tx.commit().await
        }
        Err(e) => Err(e),
    };
    if taken.is_empty() {
        // The store locked the lease at the check: the takeover waits for the commit.
        committed.expect("the check held the lease until the commit");
        assert_eq!(
            leases.acquire("d", &[7], short).await.unwrap(),
            vec![(7, 2)]
        );
    } else {
        assert_eq!(taken, vec![(7, 2)]);
        assert!(
            matches!(committed, Err(StoreError::Fenced(7))),
            "a write committed after the takeover: {committed:?}"
        );
        assert!(s.get(&late.id).await.unwrap().is_none());
    }
    assert!(matches!(
        fenced_write(s, 7, "c", 1).await,
        Err(StoreError::Fenced(7))
    ));
}

/// A shared row lock: transactions referring to one row hold it together, and a writer of the
/// row (an update, a delete's mark) waits until every one of them ended, then sees their writes.
async fn shared_row_locks_admit_readers_and_hold_off_writers(s: Arc<dyn Store>) {
    let mut tx = s.begin().await.unwrap();
    let row = tx
        .insert(&Record::new(Kind::SecurityGroup, "t-share", json!({})))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut first = s.begin().await.unwrap();
    first.lock_shared(&row.id).await.unwrap().expect("exists");
    let mut second = s.begin().await.unwrap();
    tokio::time::timeout(Duration::from_secs(3), second.lock_shared(&row.id))
        .await
        .expect("a second shared lock does not wait for the first")
        .unwrap()
        .expect("exists");
    let (s2, id) = (s.clone(), row.id.clone());
    let writer = tokio::spawn(async move {
        let mut tx = s2.begin().await.unwrap();
        let mut rec = tx.lock(&id).await.unwrap().unwrap();
        rec.deleted_at = Some(chrono::Utc::now());
        rec.finalizers = vec!["keep".into()];
        tx.update(&rec).await.unwrap();
        tx.commit().await.unwrap();
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !writer.is_finished(),
        "the writer waits for the shared locks"
    );
    first.commit().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !writer.is_finished(),
        "the writer waits for every shared lock"
    );
    second.commit().await.unwrap();
    tokio::time::timeout(Duration::from_secs(3), writer)
        .await
        .expect("the writer goes on once the shared locks are gone")
        .unwrap();
    let mut tx = s.begin().await.unwrap();
    let now = tx.lock_shared(&row.id).await.unwrap().unwrap();
    assert!(
        now.deleted_at.is_some(),
        "a later shared lock sees the write"
    );
}

/// The one-step locking reads: by id within a kind and tenant, by name, and of several rows at
/// once. On PostgreSQL, naming another tenant's id locks nothing: its owner's writer does not
/// wait; the rows that were locked hold off writers until the transaction ends.
async fn one_step_locking_reads(s: Arc<dyn Store>, row_locks: bool) {
    let mut tx = s.begin().await.unwrap();
    let mine = tx
        .insert(&subnet("t-lock-a", "mine", "vn1", &[]))
        .await
        .unwrap();
    let other = tx
        .insert(&subnet("t-lock-a", "other", "vn1", &[]))
        .await
        .unwrap();
    let theirs = tx
        .insert(&subnet("t-lock-b", "theirs", "vn1", &[]))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    let id_of = |r: Option<Record>| r.map(|r| r.id);
    assert_eq!(
        id_of(
            tx.lock_of(Kind::Subnet, "t-lock-a", &mine.id)
                .await
                .unwrap()
        ),
        Some(mine.id.clone())
    );
    assert_eq!(
        id_of(
            tx.lock_of(Kind::Subnet, "t-lock-a", &theirs.id)
                .await
                .unwrap()
        ),
        None,
        "another tenant's object"
    );
    assert_eq!(
        id_of(
            tx.lock_of(Kind::SecurityGroup, "t-lock-a", &mine.id)
                .await
                .unwrap()
        ),
        None,
        "another kind"
    );
    assert_eq!(
        id_of(
            tx.lock_shared_by_name(Kind::Subnet, "t-lock-a", "other")
                .await
                .unwrap()
        ),
        Some(other.id.clone())
    );
    assert_eq!(
        id_of(
            tx.lock_shared_by_name(Kind::Subnet, "t-lock-a", "theirs")
                .await
                .unwrap()
        ),
        None,
        "names are looked up in the tenant"
    );
    let mut ids = vec![
        other.id.clone(),
        "missing".into(),
        mine.id.clone(),
        other.id.clone(),
    ];
    let all: Vec<String> = tx
        .lock_shared_all(&ids)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    ids.retain(|id| id != "missing");
    ids.sort();
    ids.dedup();
    assert_eq!(all, ids, "the rows that exist, once each, in id order");

    if row_locks {
        let writer = |id: String| {
            let s = s.clone();
            tokio::spawn(async move {
                let mut tx = s.begin().await.unwrap();
                let mut rec = tx.lock(&id).await.unwrap().expect("exists");
                rec.annotations.insert("touched".into(), "yes".into());
                tx.update(&rec).await.unwrap();
                tx.commit().await.unwrap();
            })
        };
        tokio::time::timeout(Duration::from_secs(3), writer(theirs.id.clone()))
            .await
            .expect("naming another tenant's id locked nothing")
            .unwrap();
        let held = writer(other.id.clone());
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!held.is_finished(), "a share-locked row holds off writers");
        tx.commit().await.unwrap();
        tokio::time::timeout(Duration::from_secs(3), held)
            .await
            .expect("the writer goes on once the locks are gone")
            .unwrap();
    }
}

/// PostgreSQL: a row the transaction locked is read again and checked before an update
/// without a statement, because nobody else can change it meanwhile. What that must not
/// change: an update of such a row still rewrites changed labels and references; a row
/// locked after a savepoint that was rolled back to is unlocked, so it is read anew; and a
/// row held only FOR SHARE is still locked FOR UPDATE when asked (other readers' shared
/// locks are waited for).
async fn locked_rows_within_their_transaction(s: Arc<dyn Store>) {
    let tenant = "t-locked";
    let mut tx = s.begin().await.unwrap();
    let row = tx
        .insert(&subnet(tenant, "l1", "vn-l1", &[("tier", "a")]))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    // Labels and references rewritten after a lock.
    let mut tx = s.begin().await.unwrap();
    let mut rec = tx.lock(&row.id).await.unwrap().expect("exists");
    assert_eq!(tx.lock(&row.id).await.unwrap().as_ref(), Some(&rec));
    rec.labels.insert("tier".into(), "b".into());
    rec.body["spec"]["virtual_network"] = json!("vn-l2");
    let written = tx.update(&rec).await.unwrap().expect("kept");
    assert_eq!(written.version, 2);
    tx.commit().await.unwrap();
    let by_label = s
        .list(&ListQuery {
            tenant: Some(tenant.into()),
            filter: r#"this.metadata.labels["tier"] == "b""#.into(),
            ..ListQuery::all(Kind::Subnet)
        })
        .await
        .unwrap();
    assert_eq!(by_label.items.len(), 1, "the label row was rewritten");
    let referrers = |target: &'static str| {
        let s = s.clone();
        async move { s.referrers(target).await.unwrap().len() }
    };
    assert_eq!(
        referrers("vn-l2").await,
        1,
        "the reference row was rewritten"
    );
    assert_eq!(referrers("vn-l1").await, 0, "the old reference row is gone");

    // A savepoint rolled back to releases the row locks taken since.
    let mut tx = s.begin().await.unwrap();
    tx.savepoint().await.unwrap();
    tx.lock(&row.id).await.unwrap().expect("exists");
    tx.rollback_to_savepoint().await.unwrap();
    let (s2, id) = (s.clone(), row.id.clone());
    let writer = tokio::spawn(async move {
        let mut tx = s2.begin().await.unwrap();
        let mut rec = tx.lock(&id).await.unwrap().expect("exists");
        rec.annotations.insert("touched".into(), "yes".into());
        tx.update(&rec).await.unwrap();
        tx.commit().await.unwrap();
    });
    tokio::time::timeout(Duration::from_secs(3), writer)
        .await
        .expect("the lock was released with the savepoint")
        .unwrap();
    let now = tx.lock(&row.id).await.unwrap().expect("exists");
    assert_eq!(
        now.version, 3,
        "read anew, not as locked before the savepoint"
    );
    let mut stale = now.clone();
    stale.version = 2;
    assert!(
        matches!(tx.update(&stale).await, Err(StoreError::Conflict { .. })),
        "an update of an older version than the locked one is refused"
    );
    drop(tx);

    // FOR SHARE, then FOR UPDATE: the exclusive lock waits for another reader's shared one.
    let mut first = s.begin().await.unwrap();
    first.lock_shared(&row.id).await.unwrap().expect("exists");
    let mut second = s.begin().await.unwrap();
    second.lock_shared(&row.id).await.unwrap().expect("exists");
    let id = row.id.clone();
    let upgrade = tokio::spawn(async move {
        first.lock(&id).await.unwrap().expect("exists");
        first
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !upgrade.is_finished(),
        "FOR UPDATE waits for the other transaction's FOR SHARE"
    );
    second.commit().await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(3), upgrade)
        .await
        .expect("the exclusive lock follows once the other reader is gone")
        .unwrap();
    first.commit().await.unwrap();
}

/// A shared namespace: each batch catches up on what others wrote since its generation.
async fn shared_namespace_journal(s: &dyn Store) {
    use osac_store::Missed;
    let ns = "journal-test";
    let mut first = s.kv_exclusive(ns, 0).await.unwrap().expect("shared");
    assert_eq!(first.take_missed(), Missed::Changes(vec![]));
    let g1 = first
        .commit(&[
            ("a".into(), Some("1".into())),
            ("b".into(), Some("2".into())),
        ])
        .await
        .unwrap();
    assert_eq!(g1, 1);
    let second = s.kv_exclusive(ns, 1).await.unwrap().expect("shared");
    let g2 = second.commit(&[("a".into(), None)]).await.unwrap();
    assert_eq!(g2, 2);
    // A writer that last saw generation 1 learns of the delete; one at 0 of everything.
    let mut behind = s.kv_exclusive(ns, 1).await.unwrap().expect("shared");
    assert_eq!(behind.generation(), 2);
    assert_eq!(
        behind.take_missed(),
        Missed::Changes(vec![("a".into(), None)])
    );
    drop(behind);
    let mut fresh = s.kv_exclusive(ns, 0).await.unwrap().expect("shared");
    assert_eq!(
        fresh.take_missed(),
        Missed::Changes(vec![
            ("a".into(), Some("1".into())),
            ("b".into(), Some("2".into())),
            ("a".into(), None),
        ])
    );
    drop(fresh);
    assert_eq!(s.kv_load(ns).await.unwrap(), vec![("b".into(), "2".into())]);
}

/// Writers of one shared namespace take turns, before its first write (no namespace row yet)
/// and after: each batch sees the generation the previous one made, none is lost.
async fn shared_namespace_writers_take_turns(s: Arc<dyn Store>) {
    let ns = "turns-test";
    for round in 0..2 {
        let writers = (0..6).map(|i| {
            let s = s.clone();
            tokio::spawn(async move {
                let batch = s.kv_exclusive(ns, 0).await.unwrap().expect("shared");
                // Widen the window another writer could slip through.
                tokio::time::sleep(Duration::from_millis(20)).await;
                let key = format!("r{round}-{i}");
                batch.commit(&[(key, Some("v".into()))]).await.unwrap()
            })
        });
        let mut generations = Vec::new();
        for w in writers.collect::<Vec<_>>() {
            generations.push(w.await.unwrap());
        }
        generations.sort();
        let first = round * 6 + 1;
        assert_eq!(generations, (first..first + 6).collect::<Vec<i64>>());
    }
    assert_eq!(s.kv_load(ns).await.unwrap().len(), 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_conforms() {
    let (s, _dir) = sqlite().await;
    suite(s.clone()).await;
    one_step_locking_reads(s.clone(), false).await;
    shared_transactions_commit_alone_or_together(s.clone(), true).await;
    // PostgreSQL runs request transactions on their own: no turn to expire.
    shared_turn_expires(s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_conforms() {
    match postgres().await {
        Some(s) => {
            suite(s.clone()).await;
            shared_transactions_commit_alone_or_together(s.clone(), false).await;
            leases_and_fencing(s.as_ref()).await;
            fenced_writes_hold_off_takeover_not_renewal(s.as_ref()).await;
            shared_row_locks_admit_readers_and_hold_off_writers(s.clone()).await;
            one_step_locking_reads(s.clone(), true).await;
            locked_rows_within_their_transaction(s.clone()).await;
            shared_namespace_journal(s.as_ref()).await;
            shared_namespace_writers_take_turns(s.clone()).await;
        }
        None if support::in_ci() => {
            panic!(
                "CI=true but OSAC_TEST_DATABASE_URL is not set: the PostgreSQL suite must run in CI"
            )
        }
        None => eprintln!("OSAC_TEST_DATABASE_URL not set: PostgreSQL conformance skipped"),
    }
}
