//! Metering with three `osac server` processes (replicas) on one PostgreSQL database when the
//! replica owning most objects is killed with `kill -9` while objects are being reconciled and
//! deleted: every surviving replica answers the same usage, every time, and the database holds
//! each object's intervals once, in order, accruing the time the tenant saw the object
//! usable. Runs when `OSAC_TEST_DATABASE_URL` is set (always in CI).

#[path = "support/replicas.rs"]
mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};
use support::*;

/// Every sim operation takes this long, so objects are still being reconciled and deleted when
/// the replica is killed.
const SIM_LATENCY: [&str; 2] = ["--sim-latency-ms", "800"];

/// How far an accrued total may lie outside the bounds polling measured: the answer is rounded
/// to the second, and a status write reads its clock a moment before it commits.
const SLACK_S: f64 = 3.0;

/// The metered kinds created here, with the state in which each accrues.
const KINDS: [(&str, &str); 4] = [
    ("virtual_networks", "VIRTUAL_NETWORK_STATE_READY"),
    ("subnets", "SUBNET_STATE_READY"),
    ("security_groups", "SECURITY_GROUP_STATE_READY"),
    ("external_ips", "EXTERNAL_IP_STATE_ALLOCATED"),
];

/// What the tenant observed of one metered object, as times read around its API calls.
#[derive(Debug)]
struct Seen {
    collection: &'static str,
    id: String,
    /// When the last call that showed it not yet usable (or its create) was sent.
    unusable_at: DateTime<Utc>,
    /// When the first call that showed it usable answered.
    usable_at: Option<DateTime<Utc>>,
    /// When its DELETE was sent and answered.
    deleted: Option<(DateTime<Utc>, DateTime<Utc>)>,
    gone: bool,
    /// Attached to a VM by the test, and whether its status says attached.
    attach: bool,
    attached: bool,
}

impl Seen {
    fn settled(&self) -> bool {
        match self.deleted {
            Some(_) => self.gone,
            None => self.usable_at.is_some() && self.attached == self.attach,
        }
    }
}

/// The test's metered objects by name, created round-robin through the replicas in `urls`.
struct Objects {
    seen: BTreeMap<String, Seen>,
    urls: Vec<String>,
    next: usize,
}

impl Objects {
    /// The next replica in turn.
    fn base(&mut self) -> String {
        self.next += 1;
        self.urls[self.next % self.urls.len()].clone()
    }

    async fn create(&mut self, api: &Rest, token: &str, collection: &'static str, body: Value) {
        let base = self.base();
        let sent = Utc::now();
        let name = body["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let created = api
            .post(&base, &format!("{PUB}/{collection}"), token, body)
            .await;
        let id = created["id"].as_str().expect("id").to_string();
        let seen = Seen {
            collection,
            id,
            unusable_at: sent,
            usable_at: None,
            deleted: None,
            gone: false,
            attach: false,
            attached: false,
        };
        self.seen.insert(name, seen);
    }

    /// A VirtualNetwork, a Subnet and a SecurityGroup (both in `net`) and an ExternalIP.
    async fn create_set(&mut self, api: &Rest, token: &str, i: usize) {
        let vn = json!({"metadata": {"name": format!("vn{i}")}, "spec": {"ipv4_cidr": format!("10.{}.0.0/16", 100 + i)}});
        self.create(api, token, "virtual_networks", vn).await;
        let subnet = json!({"metadata": {"name": format!("s{i}")}, "spec": {"virtual_network": "net", "ipv4_cidr": format!("10.8.{}.0/24", 10 + i)}});
        self.create(api, token, "subnets", subnet).await;
        let sg =
            json!({"metadata": {"name": format!("sg{i}")}, "spec": {"virtual_network": "net"}});
        self.create(api, token, "security_groups", sg).await;
        let eip = json!({"metadata": {"name": format!("ip{i}")}});
        self.create(api, token, "external_ips", eip).await;
    }

    async fn delete(&mut self, api: &Rest, token: &str, name: &str) {
        let base = self.base();
        let seen = self.seen.get_mut(name).expect("a test object");
        let sent = Utc::now();
        api.call(
            osac_client::Method::DELETE,
            format!("{base}{PUB}/{}/{}", seen.collection, seen.id),
            token,
            None,
        )
        .await;
        seen.deleted = Some((sent, Utc::now()));
    }

    /// Lists every kind once through `base` and records what changed.
    async fn poll(&mut self, api: &Rest, base: &str, token: &str) {
        for (collection, usable) in KINDS {
            let sent = Utc::now();
            let list = api
                .get(base, &format!("{PUB}/{collection}?limit=1000"), token)
                .await;
            let answered = Utc::now();
            let items = list["items"].as_array().cloned().unwrap_or_default();
            for (name, seen) in self
                .seen
                .iter_mut()
                .filter(|(_, s)| s.collection == collection)
            {
                let Some(item) = items.iter().find(|i| i["id"] == seen.id.as_str()) else {
                    assert!(seen.deleted.is_some(), "{name} went away undeleted");
                    seen.gone = true;
                    continue;
                };
                if seen.usable_at.is_none() {
                    if item["status"]["state"] == usable {
                        seen.usable_at = Some(answered);
                    } else {
                        seen.unusable_at = sent;
                    }
                }
                seen.attached = item["status"]["attached"] == true;
            }
        }
    }

    /// Ids of the objects not yet usable (or attached), or deleted and not yet gone.
    fn unsettled(&self) -> Vec<String> {
        let pending = self.seen.values().filter(|s| !s.settled());
        pending.map(|s| s.id.clone()).collect()
    }

    /// Polls through `base` until every object is settled (3 minutes: a killed replica's
    /// shards move only once its leases expire, and CI machines are slow).
    async fn settle(&mut self, api: &Rest, base: &str, token: &str) {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            self.poll(api, base, token).await;
            if self.unsettled().is_empty() {
                return;
            }
            let pending: Vec<(&String, &Seen)> =
                self.seen.iter().filter(|(_, s)| !s.settled()).collect();
            assert!(Instant::now() < deadline, "never settled: {pending:#?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn rfc(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn secs(a: DateTime<Utc>, b: DateTime<Utc>) -> f64 {
    (b - a).num_microseconds().unwrap_or(0) as f64 / 1e6
}

/// The usage answers (provider's and tenant's) of every replica in `urls`.
async fn usage(api: &Rest, urls: &[&String], admin: &str, token: &str, q: &str) -> Vec<Value> {
    let mut answers = Vec::new();
    for base in urls {
        answers.push(
            api.get(base, &format!("{PRIV}/usage?{q}&tenant=acme"), admin)
                .await,
        );
        answers.push(api.get(base, &format!("{PUB}/usage?{q}"), token).await);
    }
    answers
}

/// One `usage_intervals` row: id, object, ordinal, attached, started, ended, reason,
/// deletion requested, deletion finished.
type Interval = (
    String,
    String,
    i64,
    String,
    i64,
    Option<i64>,
    Option<String>,
    Option<i64>,
    Option<i64>,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metering_totals_survive_a_replica_killed() {
    let Some(db) = Db::new().await else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut replicas: Vec<Option<Replica>> = (0..3)
        .map(|i| {
            let dir = tmp.path().join(format!("r{i}"));
            Some(Replica::start(&db, &dir, &SIM_LATENCY))
        })
        .collect();
    let urls: Vec<String> = replicas.iter().flatten().map(|r| r.url.clone()).collect();
    let admin = replicas[0].as_ref().expect("r0").admin_token();
    let api = Rest::new();
    api.settled_replicas(&urls[0], &admin, 3).await;
    let from = Utc::now();
    let token = tenant(&api, &urls[1], &admin).await;
    let mut objs = Objects {
        seen: BTreeMap::new(),
        urls: urls.clone(),
        next: 0,
    };

    // The VMs that ExternalIPs get attached to, and a first batch of objects, all usable.
    let vms: Vec<String> = (0..3).map(|i| format!("vm{i}")).collect();
    for vm in &vms {
        let body = json!({"metadata": {"name": vm}, "spec": {"template": "small", "compute_network_attachments": [{"subnet": "sub"}]}});
        let base = objs.base();
        api.post(&base, &format!("{PUB}/compute_instances"), &token, body)
            .await;
    }
    for i in 0..6 {
        objs.create_set(&api, &token, i).await;
    }
    objs.settle(&api, &urls[0], &token).await;
    let running = "COMPUTE_INSTANCE_STATE_RUNNING";
    api.wait_all(&urls[2], &token, "compute_instances", &vms, running)
        .await;
    // Long enough that what is deleted below accrued more than the measurement's slack.
    tokio::time::sleep(Duration::from_secs(5)).await;

    // A second batch, three ExternalIPs of the first attached, a quarter of the first deleted;
    // and at once, with all of that in flight, the replica owning most of it is killed.
    for i in 6..12 {
        objs.create_set(&api, &token, i).await;
    }
    for (i, vm) in vms.iter().enumerate() {
        let body = json!({"metadata": {"name": format!("att{i}")}, "spec": {"external_ip": format!("ip{i}"), "compute_instance": vm}});
        let base = objs.base();
        api.post(
            &base,
            &format!("{PUB}/external_ip_attachments"),
            &token,
            body,
        )
        .await;
        objs.seen.get_mut(&format!("ip{i}")).expect("eip").attach = true;
    }
    for i in 3..6 {
        for kind in ["vn", "s", "sg", "ip"] {
            objs.delete(&api, &token, &format!("{kind}{i}")).await;
        }
    }
    objs.poll(&api, &urls[0], &token).await;
    let in_flight = objs.unsettled();
    let idx = busiest_url(&api, &urls, &admin, &in_flight).await;
    replicas[idx].as_ref().expect("victim").signal("-9");
    replicas[idx] = None;
    eprintln!(
        "killed replica {idx} with {} objects in flight",
        in_flight.len()
    );
    assert!(
        !in_flight.is_empty(),
        "the kill came after the work was done"
    );
    let alive: Vec<&String> = urls
        .iter()
        .zip(&replicas)
        .filter(|(_, r)| r.is_some())
        .map(|(u, _)| u)
        .collect();
    objs.urls = alive.iter().map(|u| u.to_string()).collect();
    objs.settle(&api, alive[0], &token).await;
    api.settled_replicas(alive[1], &admin, 2).await;
    // And what lives on accrues more than that too.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let to = Utc::now();
    tokio::time::sleep(Duration::from_secs(1)).await;

    // Both survivors answer the same, for the provider and the tenant, and again later: the
    // period has ended.
    let q = format!("from={}&to={}&group_by=object", rfc(from), rfc(to));
    let first = usage(&api, &alive, &admin, &token, &q).await;
    assert_eq!(first[0], first[2], "the replicas' provider answers differ");
    assert_eq!(first[1], first[3], "the replicas' tenant answers differ");
    assert_eq!(
        first[0]["groups"], first[1]["groups"],
        "provider and tenant"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = usage(&api, &alive, &admin, &token, &q).await;
    assert_eq!(first, later, "a closed period answers the same every time");

    // Each object accrued from when it was seen usable to its deletion request (or `to`).
    let groups = first[0]["groups"].as_array().cloned().unwrap_or_default();
    let totals: HashMap<String, i64> = groups
        .iter()
        .map(|g| {
            let object = g["dimensions"]["object"].as_str().unwrap_or_default();
            let n = g["resource_seconds"].as_str().unwrap_or_default();
            (object.to_string(), n.parse().expect("int64 as string"))
        })
        .collect();
    for (name, seen) in &objs.seen {
        let start_hi = seen.usable_at.expect("every object became usable");
        let (end_lo, end_hi) = seen.deleted.unwrap_or((to, to));
        let lo = secs(start_hi, end_lo) - SLACK_S;
        let hi = secs(seen.unusable_at, end_hi) + SLACK_S;
        let got = totals.get(&seen.id).copied().unwrap_or(0) as f64;
        assert!(
            (lo..=hi).contains(&got),
            "{name}: {got} s accrued, measured between {lo:.1} and {hi:.1} s: {seen:?}"
        );
    }

    // Straight from the database: each object's intervals in order, each named by its ordinal
    // (the version of the write that opened it, growing), only the last one open, none
    // overlapping the next.
    let rows: Vec<Interval> = sqlx::query_as(
        "SELECT id, object_id, ordinal, attached, started_us, ended_us, end_reason, \
         deletion_requested_us, deletion_finished_us FROM usage_intervals \
         ORDER BY object_id, ordinal",
    )
    .fetch_all(&mut db.connect().await)
    .await
    .expect("intervals");
    let mut by_object: BTreeMap<&str, Vec<&Interval>> = BTreeMap::new();
    for r in &rows {
        by_object.entry(r.1.as_str()).or_default().push(r);
    }
    for (object, of) in &by_object {
        for (n, r) in of.iter().enumerate() {
            assert_eq!(r.0, format!("{object}.{}", r.2), "{of:?}");
            if n + 1 < of.len() {
                assert!(r.2 < of[n + 1].2, "{object}: ordinals grow {of:?}");
                let ended =
                    r.5.unwrap_or_else(|| panic!("{object}: two open intervals {of:?}"));
                assert!(ended <= of[n + 1].4, "{object}: intervals overlap {of:?}");
            }
        }
    }
    for (name, seen) in &objs.seen {
        let of = by_object
            .get(seen.id.as_str())
            .unwrap_or_else(|| panic!("{name} was usable but has no interval"));
        let last = of.last().expect("an interval");
        if seen.attach {
            let attached: Vec<&str> = of.iter().map(|r| r.3.as_str()).collect();
            let flip = attached.windows(2).any(|w| w == ["false", "true"]);
            assert!(flip, "{name}: attached=true after attached=false: {of:?}");
            assert_eq!(last.3, "true", "{name}: attached at the end: {of:?}");
        }
        if seen.deleted.is_some() {
            assert!(last.5.is_some(), "{name}: deleted, interval open: {of:?}");
            assert_eq!(last.6.as_deref(), Some("deleted"), "{name}: {of:?}");
            assert!(last.7.is_some() && last.8.is_some(), "{name}: {of:?}");
        } else {
            assert_eq!(last.5, None, "{name}: alive, interval closed: {of:?}");
        }
    }

    // The outbox (never drained without --metering-nats): each event id once, each interval
    // opened once and closed once if it ended.
    let outbox: Vec<(String, String)> =
        sqlx::query_as("SELECT event_id, payload FROM metering_outbox ORDER BY seq")
            .fetch_all(&mut db.connect().await)
            .await
            .expect("outbox");
    let ids: HashSet<&str> = outbox.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids.len(), outbox.len(), "an event id twice in the outbox");
    let mut actions: HashMap<(String, String), usize> = HashMap::new();
    for (id, payload) in &outbox {
        let event: Value = serde_json::from_str(payload).expect("CloudEvent JSON");
        assert_eq!(event["id"], id.as_str(), "{event}");
        if event["type"] != "org.osac.metering.networking.v1.allocation" {
            continue;
        }
        let interval = event["data"]["interval"].as_str().unwrap_or_default();
        let action = event["data"]["action"].as_str().unwrap_or_default();
        assert_eq!(id, &format!("{interval}.{action}"), "{event}");
        *actions
            .entry((interval.to_string(), action.to_string()))
            .or_default() += 1;
    }
    for r in &rows {
        let mut count = |action: &str| actions.remove(&(r.0.clone(), action.to_string()));
        assert_eq!(count("opened"), Some(1), "{}: opened events", r.0);
        let closed = r.5.map(|_| 1);
        assert_eq!(count("closed"), closed, "{}: closed events", r.0);
    }
    assert!(actions.is_empty(), "events of no interval: {actions:?}");
}
