//! Metering in the store, on every backend (SQLite always; PostgreSQL when
//! `OSAC_TEST_DATABASE_URL` is set): intervals open and close in the transaction of the
//! object write, whichever write path it takes, never twice; the outbox holds one event each.

use std::sync::Arc;

use chrono::{Duration, Utc};
use osac_model::Kind;
use osac_model::metering::IntervalRow;
use osac_store::traffic::{KIND_EXTERNAL_IP_ATTACHMENT, KIND_NAT_GATEWAY};
use osac_store::{OutboxEvent, Record, Store, TrafficSample, Write, WriteSet};
use serde_json::{Value, json};

mod support;

async fn sqlite() -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("osac.db").display());
    (osac_store::open(&url).await.expect("open sqlite"), dir)
}

async fn insert(s: &dyn Store, rec: &Record) -> Record {
    let mut tx = s.begin().await.unwrap();
    let r = tx.insert(rec).await.unwrap();
    tx.commit().await.unwrap();
    r
}

async fn update(s: &dyn Store, rec: &Record) -> Option<Record> {
    let mut tx = s.begin().await.unwrap();
    let r = tx.update(rec).await.unwrap();
    tx.commit().await.unwrap();
    r
}

/// A status write through the grouped write-set path (PostgreSQL's status statement).
async fn status_write(s: &dyn Store, rec: &Record) -> Record {
    let applied = s
        .apply(WriteSet::of(vec![Write::Update(rec.clone())]))
        .await
        .unwrap();
    applied[0].clone().expect("kept")
}

fn with_status(r: &Record, status: Value) -> Record {
    let mut r = r.clone();
    r.body["status"] = status;
    r
}

async fn intervals_of(s: &dyn Store, object: &str) -> Vec<IntervalRow> {
    let far = Utc::now() + Duration::days(1);
    let mut rows = s
        .usage_intervals(Utc::now() - Duration::days(1), far, None)
        .await
        .unwrap();
    rows.retain(|r| r.dims.object == object);
    rows
}

async fn outbox_ids(s: &dyn Store) -> Vec<String> {
    s.outbox_peek(10_000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event_id)
        .collect()
}

async fn metering(s: Arc<dyn Store>) {
    let s = s.as_ref();
    let mut tenant = Record::new(Kind::Tenant, "", json!({"spec": {}}));
    tenant.name = Some("acme".into());
    let tenant = insert(s, &tenant).await;
    let mut class = Record::new(Kind::NetworkClass, "", json!({"spec": {}}));
    class.name = Some("gold".into());
    let class = insert(s, &class).await;
    let mut vn = Record::new(
        Kind::VirtualNetwork,
        "acme",
        json!({"spec": {"network_class": class.id, "ipv4_cidr": "10.0.0.0/16"}, "status": {"state": "VIRTUAL_NETWORK_STATE_PENDING"}}),
    );
    vn.name = Some("vn".into());
    let vn = insert(s, &vn).await;
    assert!(
        intervals_of(s, &vn.id).await.is_empty(),
        "pending accrues nothing"
    );

    // READY opens one interval with its dimensions, and one event.
    let vn = update(
        s,
        &with_status(&vn, json!({"state": "VIRTUAL_NETWORK_STATE_READY"})),
    )
    .await
    .unwrap();
    let rows = intervals_of(s, &vn.id).await;
    assert_eq!(rows.len(), 1);
    assert!(rows[0].ended_at.is_none());
    // The interval's id names the write that opened it (the object's version).
    assert_eq!(rows[0].interval_id, format!("{}.{}", vn.id, vn.version));
    assert_eq!(rows[0].dims.tenant, "acme");
    assert_eq!(rows[0].dims.tenant_id, tenant.id);
    assert_eq!(rows[0].dims.network_class, "gold");
    assert_eq!(outbox_ids(s).await, vec![format!("{}.2.opened", vn.id)]);

    // A subnet of it: READY through the status write path, then the same state again
    // (another message) through both paths: nothing more is written.
    let mut subnet = Record::new(
        Kind::Subnet,
        "acme",
        json!({"spec": {"virtual_network": vn.id, "ipv4_cidr": "10.0.1.0/24"}, "status": {"state": "SUBNET_STATE_PENDING"}}),
    );
    subnet.name = Some("sn".into());
    let subnet = insert(s, &subnet).await;
    let subnet = status_write(
        s,
        &with_status(&subnet, json!({"state": "SUBNET_STATE_READY"})),
    )
    .await;
    let subnet = status_write(
        s,
        &with_status(
            &subnet,
            json!({"state": "SUBNET_STATE_READY", "message": "again"}),
        ),
    )
    .await;
    let subnet = update(
        s,
        &with_status(
            &subnet,
            json!({"state": "SUBNET_STATE_READY", "message": "and again"}),
        ),
    )
    .await
    .unwrap();
    let rows = intervals_of(s, &subnet.id).await;
    assert_eq!(
        rows.len(),
        1,
        "repeated writes of one state open one interval"
    );
    assert_eq!(rows[0].dims.network_class, "gold");
    assert_eq!(rows[0].dims.parent, vn.id);
    assert_eq!(rows[0].dims.ip_family, "ipv4");
    assert_eq!(outbox_ids(s).await.len(), 2);

    // A transaction rolled back leaves no interval.
    let mut tx = s.begin().await.unwrap();
    let mut sg = Record::new(
        Kind::SecurityGroup,
        "acme",
        json!({"spec": {"virtual_network": vn.id}, "status": {"state": "SECURITY_GROUP_STATE_READY"}}),
    );
    sg.name = Some("sg".into());
    tx.insert(&sg).await.unwrap();
    drop(tx);
    assert!(intervals_of(s, &sg.id).await.is_empty());
    assert_eq!(outbox_ids(s).await.len(), 2);

    // An ExternalIP attached half its life: two intervals, `attached` false then true.
    let mut eip = Record::new(
        Kind::ExternalIp,
        "acme",
        json!({"spec": {}, "status": {"state": "EXTERNAL_IP_STATE_PENDING"}}),
    );
    eip.name = Some("ip".into());
    let eip = insert(s, &eip).await;
    let eip = status_write(
        s,
        &with_status(&eip, json!({"state": "EXTERNAL_IP_STATE_ALLOCATED", "address": "192.0.2.7", "attached": false})),
    )
    .await;
    let eip = status_write(
        s,
        &with_status(&eip, json!({"state": "EXTERNAL_IP_STATE_ALLOCATED", "address": "192.0.2.7", "attached": true})),
    )
    .await;
    let rows = intervals_of(s, &eip.id).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0].dims.attached, "false");
    assert_eq!(rows[1].dims.attached, "true");
    assert_eq!(
        rows[0].ended_at,
        Some(rows[1].started_at),
        "no gap, no overlap"
    );
    assert!(rows[1].ended_at.is_none());

    // Deletion requested ends the interval at the request; the row's removal later changes
    // nothing of the usage.
    let mut deleting = eip.clone();
    let requested = Utc::now();
    deleting.deleted_at = Some(requested);
    deleting.finalizers = vec!["osac.io/fabric".into()];
    let deleting = update(s, &deleting).await.unwrap();
    let rows = intervals_of(s, &eip.id).await;
    let ended = rows[1].ended_at.expect("closed at the deletion request");
    assert!(
        (ended - requested).num_milliseconds().abs() <= 1,
        "{ended} vs {requested}"
    );
    let mut gone = deleting.clone();
    gone.finalizers.clear();
    assert!(update(s, &gone).await.is_none());
    assert_eq!(intervals_of(s, &eip.id).await, rows);

    // A removal without a deletion request closes the open interval too.
    let mut tx = s.begin().await.unwrap();
    tx.remove(&subnet.id).await.unwrap();
    tx.commit().await.unwrap();
    assert!(intervals_of(s, &subnet.id).await[0].ended_at.is_some());

    // One event per open and close, ids unique.
    let ids = outbox_ids(s).await;
    let expected = [
        format!("{}.2.opened", vn.id),
        format!("{}.2.opened", subnet.id),
        format!("{}.2.opened", eip.id),
        format!("{}.2.closed", eip.id),
        format!("{}.3.opened", eip.id),
        format!("{}.3.closed", eip.id),
        format!("{}.2.closed", subnet.id),
    ];
    assert_eq!(ids, expected);
    let entries = s.outbox_peek(100).await.unwrap();
    assert!(
        entries.windows(2).all(|w| w[0].seq < w[1].seq),
        "oldest first"
    );
    let closed: Value = serde_json::from_str(&entries[3].payload).unwrap();
    assert_eq!(closed["specversion"], "1.0");
    assert_eq!(closed["subject"], format!("external_ips/{}", eip.id));
    assert_eq!(entries[3].subject, format!("external_ips/{}", eip.id));

    // The tenant filter: by the tenant's id, never by its name.
    let day = Duration::days(1);
    let other = s
        .usage_intervals(Utc::now() - day, Utc::now() + day, Some("nobody"))
        .await
        .unwrap();
    assert!(other.is_empty());
    let by_name = s
        .usage_intervals(Utc::now() - day, Utc::now() + day, Some("acme"))
        .await
        .unwrap();
    assert!(by_name.is_empty(), "a tenant's name selects nothing");
    let by_id = s
        .usage_intervals(Utc::now() - day, Utc::now() + day, Some(&tenant.id))
        .await
        .unwrap();
    assert_eq!(
        by_id.len(),
        4,
        "the VN's, the subnet's and the ExternalIP's two"
    );

    // Periodic usage records: one per open interval (the VN's), once per end.
    let end = Utc::now();
    assert_eq!(s.record_usage(end).await.unwrap(), 1);
    assert_eq!(
        s.record_usage(end).await.unwrap(),
        0,
        "a second call writes nothing"
    );
    assert_eq!(s.outbox_len().await.unwrap(), 8);

    // Outbox: append keeps an id once; ack deletes what it names.
    let ev = OutboxEvent {
        event_id: "x.1".into(),
        subject: "s".into(),
        payload: "{}".into(),
    };
    s.outbox_append(&[ev.clone(), ev.clone()]).await.unwrap();
    s.outbox_append(&[ev]).await.unwrap();
    assert_eq!(s.outbox_len().await.unwrap(), 9);
    let first: Vec<i64> = s
        .outbox_peek(3)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(s.outbox_ack(&first).await.unwrap(), 3);
    assert_eq!(s.outbox_len().await.unwrap(), 6);
    assert_eq!(outbox_ids(s).await[0], format!("{}.2.closed", eip.id));

    // Retention: closed intervals before the cut go, the open one stays.
    let pruned = s.prune_usage(Utc::now() + day).await.unwrap();
    assert_eq!(pruned, 3);
    let left = s
        .usage_intervals(Utc::now() - day, Utc::now() + day, None)
        .await
        .unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].dims.object, vn.id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_meters() {
    let (s, _dir) = sqlite().await;
    metering(s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_meters() {
    match support::fresh_postgres_url().await {
        Some(url) => metering(osac_store::open(&url).await.expect("open postgres")).await,
        None if support::in_ci() => panic!("CI=true but OSAC_TEST_DATABASE_URL is not set"),
        None => eprintln!("OSAC_TEST_DATABASE_URL not set: PostgreSQL metering skipped"),
    }
}

/// The bytes of every periodic usage record of `interval`, summed (ingress, egress), and how
/// many records there are.
async fn recorded_bytes(s: &dyn Store, interval: &str) -> ((i64, i64), usize) {
    let mut sum = (0, 0);
    let mut n = 0;
    for e in s.outbox_peek(100_000).await.unwrap() {
        if !e.event_id.starts_with(&format!("{interval}.usage.")) {
            continue;
        }
        let v: Value = serde_json::from_str(&e.payload).unwrap();
        let int = |f: &str| v["data"][f].as_str().unwrap().parse::<i64>().unwrap();
        sum.0 += int("ingress_bytes");
        sum.1 += int("egress_bytes");
        n += 1;
    }
    (sum, n)
}

fn sample(kind: &str, object: &str, eip: &str, epoch: &str, i: u64, e: u64) -> TrafficSample {
    TrafficSample {
        kind: kind.into(),
        object_id: object.into(),
        tenant: "acme".into(),
        tenant_id: "acme-id".into(),
        external_ip_id: eip.into(),
        epoch: epoch.into(),
        ingress_bytes: i,
        egress_bytes: e,
    }
}

/// Usage records carry each byte of the bandwidth rows once: an ExternalIP's the bytes of
/// its attachments' paths, a NATGateway's those of its own path, other kinds none; bytes added
/// to a bucket already carried go into the next record; a record written twice carries
/// nothing twice; bytes after the interval closed are in no record but still in the query.
async fn records_carry_bytes_once(s: Arc<dyn Store>) {
    let s = s.as_ref();
    let status = |kind: Kind, state: &str, extra: Value| {
        let mut body = json!({"spec": extra, "status": {"state": state}});
        if kind == Kind::ExternalIp {
            body["status"]["address"] = json!("192.0.2.9");
            body["status"]["attached"] = json!(true);
        }
        let mut r = Record::new(kind, "acme", body);
        r.name = Some(format!("{kind}").to_lowercase());
        r
    };
    let eip = insert(
        s,
        &status(Kind::ExternalIp, "EXTERNAL_IP_STATE_ALLOCATED", json!({})),
    )
    .await;
    let gw = insert(
        s,
        &status(
            Kind::NatGateway,
            "NAT_GATEWAY_STATE_READY",
            json!({"external_ip": eip.id}),
        ),
    )
    .await;
    let vn = insert(
        s,
        &status(
            Kind::VirtualNetwork,
            "VIRTUAL_NETWORK_STATE_READY",
            json!({}),
        ),
    )
    .await;
    let dnat = |epoch: &str, i, e| sample(KIND_EXTERNAL_IP_ATTACHMENT, "att", &eip.id, epoch, i, e);
    let snat = |i, e| sample(KIND_NAT_GATEWAY, &gw.id, &eip.id, "", i, e);
    let now = Utc::now();
    let mut end = now;
    let mut record = || {
        end += Duration::seconds(60);
        end
    };

    // Bytes in a bucket, a record; more bytes in the same bucket and the next, a record (and
    // the same record again); a dataplane reset, a record; nothing, a record.
    s.record_traffic(now, &[dnat("1", 1000, 100), snat(7, 70)])
        .await
        .unwrap();
    s.record_usage(record()).await.unwrap();
    assert_eq!(
        recorded_bytes(s, &format!("{}.1", eip.id)).await.0,
        (1000, 100)
    );
    s.record_traffic(now, &[dnat("1", 1500, 150), snat(9, 90)])
        .await
        .unwrap();
    s.record_traffic(now + Duration::seconds(60), &[dnat("1", 1700, 170)])
        .await
        .unwrap();
    let e2 = record();
    assert_eq!(s.record_usage(e2).await.unwrap(), 3);
    assert_eq!(s.record_usage(e2).await.unwrap(), 0, "written once per end");
    s.record_traffic(now + Duration::seconds(120), &[dnat("2", 40, 4)])
        .await
        .unwrap();
    s.record_usage(record()).await.unwrap();
    s.record_usage(record()).await.unwrap();

    let ((i, e), n) = recorded_bytes(s, &format!("{}.1", eip.id)).await;
    assert_eq!((i, e), (1700 + 40, 170 + 4), "every DNAT byte once");
    assert_eq!(n, 4, "one record per end");
    let (gw_bytes, _) = recorded_bytes(s, &format!("{}.1", gw.id)).await;
    assert_eq!(
        gw_bytes,
        (9, 90),
        "the gateway's own path, not in the ExternalIP's"
    );
    let (vn_bytes, vn_records) = recorded_bytes(s, &format!("{}.1", vn.id)).await;
    assert_eq!((vn_bytes, vn_records), ((0, 0), 4), "other kinds move none");
    let rows = s
        .traffic_usage(now - Duration::hours(1), now + Duration::hours(1), None)
        .await
        .unwrap();
    let total = |kind: &str| {
        rows.iter()
            .filter(|r| r.kind == kind)
            .fold((0, 0), |(i, e), r| {
                (i + r.ingress_bytes, e + r.egress_bytes)
            })
    };
    assert_eq!(
        total(KIND_EXTERNAL_IP_ATTACHMENT),
        (i, e),
        "records = query"
    );
    assert_eq!(total(KIND_NAT_GATEWAY), gw_bytes);

    // The ExternalIP's deletion closes its interval: later bytes are in no record of it,
    // and the query still has them.
    let mut deleting = eip.clone();
    deleting.deleted_at = Some(Utc::now());
    deleting.finalizers = vec!["osac.io/fabric".into()];
    update(s, &deleting).await.unwrap();
    s.record_traffic(now + Duration::seconds(180), &[dnat("2", 50, 5)])
        .await
        .unwrap();
    s.record_usage(record()).await.unwrap();
    let (after, _) = recorded_bytes(s, &format!("{}.1", eip.id)).await;
    assert_eq!(after, (i, e));
    let rows = s
        .traffic_usage(
            now - Duration::hours(1),
            now + Duration::hours(1),
            Some("acme-id"),
        )
        .await
        .unwrap();
    let dnat_total = rows
        .iter()
        .filter(|r| r.kind == KIND_EXTERNAL_IP_ATTACHMENT)
        .fold(0, |acc, r| acc + r.ingress_bytes);
    assert_eq!(dnat_total, i + 10);
}

/// Sweeps and usage records running at once (a record's transaction reads a bucket a sweep is
/// adding to): the records still carry every byte once.
async fn records_racing_sweeps_carry_every_byte_once(s: Arc<dyn Store>) {
    let mut ip = Record::new(
        Kind::ExternalIp,
        "acme",
        json!({"spec": {}, "status": {"state": "EXTERNAL_IP_STATE_ALLOCATED", "address": "192.0.2.10", "attached": true}}),
    );
    ip.name = Some("racing".into());
    let ip = insert(s.as_ref(), &ip).await;
    let start = Utc::now();
    let sweeps = {
        let (s, ip) = (s.clone(), ip.id.clone());
        tokio::spawn(async move {
            for n in 1..=60u64 {
                let at = start + Duration::seconds(i64::try_from(n).unwrap() * 7);
                let one = sample(
                    KIND_EXTERNAL_IP_ATTACHMENT,
                    "racing-att",
                    &ip,
                    "",
                    n * 100,
                    n,
                );
                s.record_traffic(at, &[one]).await.unwrap();
            }
        })
    };
    let records = {
        let s = s.clone();
        tokio::spawn(async move {
            for n in 1..=60 {
                s.record_usage(start + Duration::milliseconds(n))
                    .await
                    .unwrap();
                tokio::task::yield_now().await;
            }
        })
    };
    sweeps.await.unwrap();
    records.await.unwrap();
    s.record_usage(start + Duration::seconds(1)).await.unwrap();
    let ((i, e), _) = recorded_bytes(s.as_ref(), &format!("{}.1", ip.id)).await;
    assert_eq!((i, e), (6000, 60), "the last reading, cumulative, once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_records_racing_sweeps() {
    let (s, _dir) = sqlite().await;
    records_racing_sweeps_carry_every_byte_once(s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_records_racing_sweeps() {
    match support::fresh_postgres_url().await {
        Some(url) => {
            let s = osac_store::open(&url).await.expect("open postgres");
            records_racing_sweeps_carry_every_byte_once(s).await
        }
        None if support::in_ci() => panic!("CI=true but OSAC_TEST_DATABASE_URL is not set"),
        None => eprintln!("OSAC_TEST_DATABASE_URL not set: PostgreSQL metering skipped"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_records_carry_bytes_once() {
    let (s, _dir) = sqlite().await;
    records_carry_bytes_once(s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_records_carry_bytes_once() {
    match support::fresh_postgres_url().await {
        Some(url) => {
            records_carry_bytes_once(osac_store::open(&url).await.expect("open postgres")).await
        }
        None if support::in_ci() => panic!("CI=true but OSAC_TEST_DATABASE_URL is not set"),
        None => eprintln!("OSAC_TEST_DATABASE_URL not set: PostgreSQL metering skipped"),
    }
}
