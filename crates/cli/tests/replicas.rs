//! Several `osac server` processes (replicas) on one PostgreSQL database: objects created
//! through any replica become READY, a replica killed mid-way hands its shards over, and a
//! paused replica writes nothing when it resumes. Runs when `OSAC_TEST_DATABASE_URL` is set
//! (always in CI).

#[path = "support/replicas.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

/// Sim records that are written once when their object is created: a second journal entry
/// means a second, different allocation.
const ONCE_WRITTEN: &str = "SELECT key, COUNT(*) FROM kv_journal WHERE ns LIKE 'sim%' \
     AND (key LIKE 'subnet/%' OR key LIKE 'vn/%' OR key LIKE 'eip/%' OR key LIKE 'sg/%') \
     GROUP BY key HAVING COUNT(*) > 1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_the_work_and_survive_a_kill() {
    let Some(db) = Db::new().await else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut replicas: Vec<Option<Replica>> = (0..3)
        .map(|i| Some(Replica::start(&db, &tmp.path().join(format!("r{i}")), &[])))
        .collect();
    let urls: Vec<String> = replicas.iter().flatten().map(|r| r.url.clone()).collect();
    let admin = replicas[0].as_ref().expect("r0").admin_token();
    let api = Rest::new();
    let listing = api.settled_replicas(&urls[0], &admin, 3).await;
    assert_eq!(
        listing["items"].as_array().map(Vec::len),
        Some(3),
        "{listing:#}"
    );
    let token = tenant(&api, &urls[1], &admin).await;

    // VMs and ExternalIPs created round-robin through all three replicas.
    let mut vms = Vec::new();
    let mut eips = Vec::new();
    let mut ids = Vec::new();
    for i in 0..24 {
        let base = &urls[i % 3];
        if i == 12 {
            // Kill -9 the replica that owns most of what was created so far.
            let idx = busiest_url(&api, &urls, &admin, &ids).await;
            replicas[idx].as_ref().expect("victim").signal("-9");
            replicas[idx] = None;
            eprintln!("killed replica {idx} ({})", urls[idx]);
        }
        let base = if replicas[i % 3].is_none() {
            &urls[(i + 1) % 3]
        } else {
            base
        };
        let name = format!("vm{i}");
        let vm = api
            .post(base, &format!("{PUB}/compute_instances"), &token, json!({"metadata": {"name": name}, "spec": {"template": "small", "compute_network_attachments": [{"subnet": "sub"}]}}))
            .await;
        ids.push(vm["id"].as_str().expect("id").to_string());
        vms.push(name);
        let eip = format!("ip{i}");
        let e = api
            .post(
                base,
                &format!("{PUB}/external_ips"),
                &token,
                json!({"metadata": {"name": eip}}),
            )
            .await;
        ids.push(e["id"].as_str().expect("id").to_string());
        eips.push(eip);
    }
    let killed_at = Instant::now();
    let alive: Vec<&String> = urls
        .iter()
        .zip(&replicas)
        .filter(|(_, r)| r.is_some())
        .map(|(u, _)| u)
        .collect();
    let after = api.settled_replicas(alive[0], &admin, 2).await;
    eprintln!(
        "shards moved {:?} after the last create",
        killed_at.elapsed()
    );
    api.wait_all(
        alive[1],
        &token,
        "compute_instances",
        &vms,
        "COMPUTE_INSTANCE_STATE_RUNNING",
    )
    .await;
    api.wait_all(
        alive[0],
        &token,
        "external_ips",
        &eips,
        "EXTERNAL_IP_STATE_ALLOCATED",
    )
    .await;
    let dead = after["items"]
        .as_array()
        .map(|i| i.iter().filter(|r| r["live"] == false).count());
    assert_eq!(dead, Some(1), "{after:#}");
    // Nothing allocated twice: every once-written sim record has one journal entry, and no
    // two ExternalIPs got the same address.
    assert_eq!(db.query(ONCE_WRITTEN).await, vec![]);
    let list = api
        .get(alive[0], &format!("{PUB}/external_ips?limit=1000"), &token)
        .await;
    let mut addresses: Vec<String> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            i["status"]["address"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    let n = addresses.len();
    addresses.sort();
    addresses.dedup();
    assert_eq!(addresses.len(), n, "duplicate external addresses");
}

/// Ids of the subnets named in `names` that still exist.
async fn existing(api: &Rest, base: &str, token: &str, names: &[String]) -> Vec<String> {
    let list = api
        .get(base, &format!("{PUB}/subnets?limit=1000"), token)
        .await;
    list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|i| names.iter().any(|n| i["metadata"]["name"] == n.as_str()))
        .map(|i| i["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_replica_writes_nothing_when_it_resumes() {
    let Some(db) = Db::new().await else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    // Every sim operation takes 1.5 s, so A is stopped while its operations are in flight.
    let slow = ["--sim-latency-ms", "1500"];
    let a = Replica::start(&db, &tmp.path().join("a"), &slow);
    let b = Replica::start(&db, &tmp.path().join("b"), &slow);
    let admin = a.admin_token();
    let api = Rest::new();
    api.settled_replicas(&b.url, &admin, 2).await;
    let token = tenant(&api, &b.url, &admin).await;
    let mut names = Vec::new();
    let mut ids = Vec::new();
    for i in 0..12 {
        let name = format!("s{i}");
        let s = api
            .post(&b.url, &format!("{PUB}/subnets"), &token, json!({"metadata": {"name": name}, "spec": {"virtual_network": "net", "ipv4_cidr": format!("10.8.{}.0/24", i + 10)}}))
            .await;
        ids.push(s["id"].as_str().expect("id").to_string());
        names.push(name);
    }
    let listing = api.get(&b.url, &format!("{PRIV}/replicas"), &admin).await;
    let a_shards: Vec<i64> = listing["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|r| a.url.ends_with(r["address"].as_str().unwrap_or("?")))
        .and_then(|r| r["shards"].as_array())
        .map(|s| s.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default();
    let on_a = ids
        .iter()
        .filter(|id| a_shards.contains(&i64::from(osac_controller::shard_of(id))))
        .count();
    assert!(on_a > 0, "none of the subnets is A's");
    // A is now inside its create_subnet calls; stop it there.
    tokio::time::sleep(Duration::from_millis(400)).await;
    a.signal("-STOP");
    // The tenant deletes the subnets meanwhile; B takes A's shards over once A's leases
    // expire and undoes them.
    for id in &ids {
        api.call(
            osac_client::Method::DELETE,
            format!("{}{PUB}/subnets/{id}", b.url),
            &token,
            None,
        )
        .await;
    }
    api.settled_replicas(&b.url, &admin, 1).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !existing(&api, &b.url, &token, &names).await.is_empty() {
        assert!(Instant::now() < deadline, "subnets never went away");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let snapshot = "SELECT id, version FROM objects WHERE kind <> 'events' ORDER BY id";
    let objects_before = db.query(snapshot).await;
    let journal = "SELECT ns, generation FROM kv_namespaces ORDER BY ns";
    let journal_before = db.query(journal).await;
    let events = "SELECT 'events', COUNT(*) FROM objects WHERE kind = 'events'";
    let events_before = db.query(events).await;
    a.signal("-CONT");
    // A wakes up past its local lease deadlines, in the middle of creating subnets that no
    // longer exist: the fencing token stops those operations and any write. Give it time.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let log = std::fs::read_to_string(a.dir.join("server.log")).unwrap_or_default();
    for line in log
        .lines()
        .filter(|l| l.contains("lease") || l.contains("shards"))
    {
        eprintln!("A: {line}");
    }
    assert_eq!(
        db.query(journal).await,
        journal_before,
        "manager state changed after resume"
    );
    assert_eq!(
        db.query(snapshot).await,
        objects_before,
        "objects changed after resume"
    );
    assert_eq!(
        db.query(events).await,
        events_before,
        "events recorded after resume"
    );
    let leaked = "SELECT key, 0::int8 FROM kv WHERE ns LIKE 'sim%' AND key LIKE 'subnet/%'";
    let leaked: Vec<String> = db
        .query(leaked)
        .await
        .into_iter()
        .map(|(k, _)| k)
        .filter(|k| ids.iter().any(|id| k.ends_with(id.as_str())))
        .collect();
    assert_eq!(
        leaked,
        Vec::<String>::new(),
        "deleted subnets exist in the fabric again"
    );
    // And it serves again: the shards are shared out anew.
    api.settled_replicas(&a.url, &admin, 2).await;
}
