//! Races the API must win on both databases: overlapping sibling subnets, pool capacity, unique
//! host MACs, and a subnet deleted while workloads are created on it.

use std::collections::{BTreeMap, HashSet};
use std::net::Ipv4Addr;

use futures::future::join_all;
use ipnet::Ipv4Net;
use serde_json::json;

use crate::both_backends;
use crate::common::*;

both_backends!(
    concurrent_overlapping_subnets,
    concurrent_external_ips_never_over_allocate,
    concurrent_provider_writes,
    concurrent_inventory_and_workload_writes,
    concurrent_creates_are_durable_and_updates_lose_nothing
);

/// 64 concurrent creates in one VN: 16 /23s, 32 /24s and 16 /25s over 10.0.0.0/19, each /25 inside
/// one /24, each /24 inside one /23. Whatever the interleaving, the survivors must be pairwise
/// disjoint, and every loser must have been told which survivor it overlaps.
async fn concurrent_overlapping_subnets(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let t = s.tenant("acme").await;
    let vn = t.ready_vn("net", "10.0.0.0/16").await;

    let mut candidates: Vec<(String, Ipv4Net)> = Vec::new();
    for i in 0..16u8 {
        candidates.push((
            format!("w23-{i}"),
            format!("10.0.{}.0/23", 2 * i).parse().unwrap(),
        ));
    }
    for j in 0..32u8 {
        candidates.push((
            format!("w24-{j}"),
            format!("10.0.{j}.0/24").parse().unwrap(),
        ));
    }
    for j in 0..16u8 {
        candidates.push((
            format!("w25-{j}"),
            format!("10.0.{j}.0/25").parse().unwrap(),
        ));
    }
    // Interleave the sizes so every size competes from the first request on.
    candidates.sort_by_key(|(name, net)| (u32::from(net.network()) >> 8, name.clone()));
    assert_eq!(candidates.len(), 64);
    let cidr_of: BTreeMap<String, Ipv4Net> = candidates.iter().cloned().collect();

    let results = join_all(candidates.iter().map(|(name, net)| {
        let t = t.clone();
        let body = json!({"metadata": {"name": name}, "spec": {"virtual_network": "net", "ipv4_cidr": net.to_string()}});
        async move { (name.clone(), t.post(&format!("{PUB}/subnets"), body).await) }
    }))
    .await;

    let mut winners: BTreeMap<String, String> = BTreeMap::new();
    let mut losers: Vec<(String, String)> = Vec::new();
    for (name, r) in results {
        match r.status {
            200 => {
                winners.insert(name, id(&r.body));
            }
            400 => {
                let msg = r.err(
                    400,
                    "INVALID_ARGUMENT",
                    &[
                        "spec.ipv4_cidr",
                        "overlaps with existing subnet",
                        "in VirtualNetwork 'net'",
                    ],
                );
                losers.push((name, msg));
            }
            other => panic!("{name}: unexpected {other}: {}", r.text),
        }
    }
    assert!(!winners.is_empty());
    assert_eq!(winners.len() + losers.len(), 64);

    // Survivors are pairwise disjoint.
    let won: Vec<(&String, Ipv4Net)> = winners.keys().map(|n| (n, cidr_of[n])).collect();
    for (i, (a, na)) in won.iter().enumerate() {
        for (b, nb) in &won[i + 1..] {
            assert!(
                !na.contains(&nb.network()) && !nb.contains(&na.network()),
                "winners {a} ({na}) and {b} ({nb}) overlap"
            );
        }
    }
    // Each loser names a survivor it really overlaps, with that survivor's CIDR.
    for (name, msg) in &losers {
        let mine = cidr_of[name];
        assert!(
            msg.contains(&format!("subnet IPv4 CIDR '{mine}' overlaps")),
            "{msg}"
        );
        let other = msg
            .split("existing subnet '")
            .nth(1)
            .and_then(|r| r.split('\'').next())
            .expect("names the subnet");
        assert!(
            winners.contains_key(other),
            "{name} lost to '{other}', which does not exist: {msg}"
        );
        let theirs = cidr_of[other];
        assert!(msg.contains(&format!("(CIDR '{theirs}')")), "{msg}");
        assert!(
            mine.contains(&theirs.network()) || theirs.contains(&mine.network()),
            "{name} ({mine}) does not overlap {other} ({theirs})"
        );
    }
    // The store holds exactly the survivors, and they all become READY.
    let list = t
        .list("subnets", &[("limit", "1000"), ("filter", NOT_DEFAULT)])
        .await
        .ok();
    assert_eq!(list["total"].as_u64(), Some(winners.len() as u64));
    let stored: BTreeMap<String, String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["metadata"]["name"].as_str().unwrap().to_string(), id(i)))
        .collect();
    assert_eq!(stored, winners);
    for sid in winners.values() {
        t.wait("subnets", sid, "SUBNET_STATE_READY").await;
    }
    let sim = s.sim_fabric();
    let mut segments = HashSet::new();
    for sid in winners.values() {
        let sub = sim.subnet(sid).await.expect("programmed");
        assert_eq!(sub.virtual_network_id, id(&vn));
        assert!(segments.insert(sub.segment_id), "segment ids are unique");
    }
    s.finish().await;
}

/// A pool of exactly 100 addresses and 200 concurrent creates: 100 win, 100 get
/// RESOURCE_EXHAUSTED, and the counters add up.
async fn concurrent_external_ips_never_over_allocate(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let t = s.tenant("acme").await;
    // The race is about pool capacity, not the tenant's ExternalIP quota.
    s.admin
        .patch(
            &format!("{PRIV}/tenants/acme"),
            json!({"spec": {"quotas": {"external_ips": u32::MAX}}}),
        )
        .await
        .ok();
    let cidrs = [
        "198.51.100.0/26",
        "198.51.100.64/27",
        "198.51.100.96/29",
        "198.51.100.104/30",
    ];
    let pool = s
        .admin
        .post(&format!("{PRIV}/external_ip_pools"), json!({"metadata": {"name": "hundred"}, "spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": cidrs}}))
        .await
        .ok();
    assert_eq!(
        counter(&pool, "total"),
        100,
        "62 + 30 + 6 + 2 usable addresses: {pool}"
    );
    s.admin
        .wait_for_state(
            PRIV,
            "external_ip_pools",
            "hundred",
            "EXTERNAL_IP_POOL_STATE_READY",
        )
        .await;

    let race = |names: Vec<String>| {
        let t = t.clone();
        async move {
            join_all(names.into_iter().map(|name| {
                let t = t.clone();
                async move {
                    let r = t
                        .post(
                            &format!("{PUB}/external_ips"),
                            json!({"metadata": {"name": name}, "spec": {"pool": "hundred"}}),
                        )
                        .await;
                    (name, r)
                }
            }))
            .await
        }
    };
    let results = race((0..200).map(|i| format!("eip-{i}")).collect()).await;
    let mut won = Vec::new();
    let mut exhausted = 0;
    for (name, r) in &results {
        match r.status {
            200 => won.push(id(&r.body)),
            // Refused in the final reservation: no room, and no counters for a tenant.
            429 => {
                let m = r.err(
                    429,
                    "RESOURCE_EXHAUSTED",
                    &["ExternalIPPool 'hundred' has no available capacity"],
                );
                assert!(
                    !m.contains("of 100"),
                    "a tenant sees the pool's counters: {m}"
                );
                exhausted += 1;
            }
            // Refused when the pool was already full: a full pool is hidden from tenants.
            404 => {
                r.err(
                    404,
                    "NOT_FOUND",
                    &["spec.pool: ExternalIPPool 'hundred' does not exist"],
                );
                exhausted += 1;
            }
            other => panic!("{name}: unexpected {other}: {}", r.text),
        }
    }
    assert_eq!((won.len(), exhausted), (100, 100));
    assert_pool_full(&s).await;
    assert_eq!(t.count("external_ips").await, 100);

    // Every winner gets a distinct address from the pool.
    let nets: Vec<Ipv4Net> = cidrs.iter().map(|c| c.parse().unwrap()).collect();
    let mut addresses = HashSet::new();
    for eid in &won {
        let e = t
            .wait("external_ips", eid, "EXTERNAL_IP_STATE_ALLOCATED")
            .await;
        let a: Ipv4Addr = e["status"]["address"].as_str().unwrap().parse().unwrap();
        assert!(
            nets.iter()
                .any(|n| n.contains(&a) && a != n.network() && a != n.broadcast()),
            "{a} is not a usable pool address"
        );
        assert!(addresses.insert(a), "{a} allocated twice");
    }

    // Release 10, race 20 for them: exactly 10 more fit.
    for eid in &won[..10] {
        t.delete(&format!("{PUB}/external_ips/{eid}")).await.ok();
    }
    for eid in &won[..10] {
        t.wait_gone(PUB, "external_ips", eid).await;
    }
    let p = s
        .admin
        .get(&format!("{PRIV}/external_ip_pools/hundred"))
        .await
        .ok();
    assert_eq!(
        (counter(&p, "allocated"), counter(&p, "available")),
        (90, 10),
        "{p}"
    );
    let results = race((0..20).map(|i| format!("again-{i}")).collect()).await;
    let ok = results.iter().filter(|(_, r)| r.status == 200).count();
    // Refused: no room at the reservation (429), or the pool already full, hence hidden (404).
    let refused = results
        .iter()
        .filter(|(_, r)| matches!(r.status, 429 | 404))
        .count();
    assert_eq!((ok, refused), (10, 10));
    assert_pool_full(&s).await;
    for (_, r) in results.iter().filter(|(_, r)| r.status == 200) {
        t.wait("external_ips", &id(&r.body), "EXTERNAL_IP_STATE_ALLOCATED")
            .await;
    }
    s.finish().await;
}

/// The 100-address pool "hundred" has every address allocated, per its counters.
async fn assert_pool_full(s: &TestServer) {
    let p = s
        .admin
        .get(&format!("{PRIV}/external_ip_pools/hundred"))
        .await
        .ok();
    assert_eq!(
        (
            counter(&p, "total"),
            counter(&p, "allocated"),
            counter(&p, "available")
        ),
        (100, 100, 0),
        "{p}"
    );
}

/// Kind-wide provider rules hold under concurrency too: pool CIDRs never overlap, exactly one
/// NetworkClass is the default, one NAT gateway per VN, one consumer per ExternalIP.
async fn concurrent_provider_writes(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let cidrs = [
        "198.51.100.0/24",
        "198.51.100.0/25",
        "198.51.100.128/25",
        "198.51.100.0/24",
        "198.51.100.64/26",
        "198.51.100.192/26",
        "198.51.100.0/23",
        "198.51.100.128/25",
    ];
    let results = join_all(cidrs.iter().enumerate().map(|(i, cidr)| {
        let a = s.admin.clone();
        let body = json!({"metadata": {"name": format!("p{i}")}, "spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": [cidr]}});
        async move { a.post(&format!("{PRIV}/external_ip_pools"), body).await }
    }))
    .await;
    for r in results.iter().filter(|r| r.status != 200) {
        r.err(400, "INVALID_ARGUMENT", &["spec.cidrs[0]", "overlaps"]);
    }
    let won: Vec<Ipv4Net> = results
        .iter()
        .filter(|r| r.status == 200)
        .map(|r| {
            r.body["spec"]["cidrs"][0]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(!won.is_empty());
    for (i, a) in won.iter().enumerate() {
        for b in &won[i + 1..] {
            assert!(
                !a.contains(&b.network()) && !b.contains(&a.network()),
                "overlapping pools {a} and {b} were both created"
            );
        }
    }
    let pools = s.admin.get(&format!("{PRIV}/external_ip_pools")).await.ok();
    assert_eq!(pools["total"].as_u64(), Some(won.len() as u64 + 1));

    let results = join_all((0..8).map(|i| {
        let a = s.admin.clone();
        let mut c = osac_server::dev::default_class();
        c["metadata"]["name"] = json!(format!("class-{i}"));
        async move { a.post(&format!("{PRIV}/network_classes"), c).await }
    }))
    .await;
    for r in &results {
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let defaults = s
        .admin
        .get(&format!(
            "{PRIV}/network_classes?filter=this.is_default%20%3D%3D%20true"
        ))
        .await
        .ok();
    assert_eq!(defaults["total"], 1, "{defaults}");
    // The new default must be READY before networks use it.
    for i in 0..8 {
        s.admin
            .wait_for_state(
                PRIV,
                "network_classes",
                &format!("class-{i}"),
                "NETWORK_CLASS_STATE_READY",
            )
            .await;
    }

    // Pools belong to the class they were made in: the new default class needs its own.
    let default_id = defaults["items"][0]["id"].as_str().unwrap().to_string();
    s.admin
        .post(
            &format!("{PRIV}/external_ip_pools"),
            json!({"metadata": {"name": "new-default-pool"}, "spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": ["198.18.0.0/24"], "network_class": default_id}}),
        )
        .await
        .ok();
    s.admin
        .wait_for_state(
            PRIV,
            "external_ip_pools",
            "new-default-pool",
            "EXTERNAL_IP_POOL_STATE_READY",
        )
        .await;

    // One NAT gateway per VN, one consumer per ExternalIP, under concurrency.
    let t = s.tenant("acme").await;
    t.ready_vn("net", "10.0.0.0/16").await;
    t.ready_vn("net2", "10.0.0.0/16").await;
    let mut eips = Vec::new();
    for i in 0..4 {
        eips.push(id(&t.allocated_eip(&format!("e{i}"), "").await));
    }
    let results = join_all(eips.iter().map(|e| {
        let t = t.clone();
        let body = json!({"spec": {"virtual_network": "net", "external_ip": e}});
        async move { t.post(&format!("{PUB}/nat_gateways"), body).await }
    }))
    .await;
    assert_eq!(results.iter().filter(|r| r.status == 200).count(), 1);
    for r in results.iter().filter(|r| r.status != 200) {
        r.err(
            409,
            "ALREADY_EXISTS",
            &["VirtualNetwork 'net' already has NATGateway"],
        );
    }
    let free = eips
        .iter()
        .find(|e| {
            !results
                .iter()
                .any(|r| r.status == 200 && r.body["spec"]["external_ip"] == e.as_str())
        })
        .unwrap();
    let results = join_all(["net2", "net2"].iter().enumerate().map(|(i, vn)| {
        let t = t.clone();
        let body = json!({"metadata": {"name": format!("n{i}")}, "spec": {"virtual_network": vn, "external_ip": free}});
        async move { t.post(&format!("{PUB}/nat_gateways"), body).await }
    }))
    .await;
    assert_eq!(
        results.iter().filter(|r| r.status == 200).count(),
        1,
        "{:?}",
        results.iter().map(|r| &r.text).collect::<Vec<_>>()
    );
    assert_eq!(t.count("nat_gateways").await, 2);
    s.finish().await;
}

/// 16 concurrent host creates sharing one MAC pairwise: one host per MAC survives. Then a
/// subnet delete racing 16 VM creates on it: either the delete loses (412, VMs exist) or the
/// VMs that lost see the subnet being deleted (412) — never a VM on a deleted subnet.
async fn concurrent_inventory_and_workload_writes(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let results = join_all((0..16u8).map(|i| {
        let a = s.admin.clone();
        // Hosts 2k and 2k+1 share their data-0 MAC.
        let interfaces: Vec<serde_json::Value> = ["data-0", "data-1", "mgmt-0", "bmc-0"]
            .iter()
            .enumerate()
            .map(|(k, n)| {
                let owner = if k == 0 { i / 2 } else { 100 + i };
                json!({"name": n, "mac_address": format!("0a:00:00:00:{owner:02x}:{k:02x}")})
            })
            .collect();
        let body = json!({"metadata": {"name": format!("h{i}")}, "spec": {"host_type": "bm-standard", "pool": "caas", "interfaces": interfaces}});
        async move { a.post(&format!("{PRIV}/hosts"), body).await }
    }))
    .await;
    let won = results.iter().filter(|r| r.status == 200).count();
    for r in results.iter().filter(|r| r.status != 200) {
        r.err(409, "ALREADY_EXISTS", &["already used by Host"]);
    }
    assert_eq!(won, 8);

    let t = s.tenant("acme").await;
    t.ready_vn("net", "10.0.0.0/16").await;
    t.ready_subnet("a", "net", "10.0.1.0/24").await;
    let mut calls: Vec<_> = (0..16)
        .map(|i| {
            let t = t.clone();
            tokio::spawn(async move {
                t.post(
                    &format!("{PUB}/compute_instances"),
                    vm_body(&format!("vm{i}"), json!([{"subnet": "a"}])),
                )
                .await
            })
        })
        .collect();
    let del = {
        let t = t.clone();
        tokio::spawn(async move { t.delete(&format!("{PUB}/subnets/a")).await })
    };
    calls.push(del);
    let mut created = 0;
    let mut deleted = false;
    for (i, c) in join_all(calls).await.into_iter().enumerate() {
        let r = c.expect("task");
        if i == 16 {
            deleted = r.status == 200;
            if !deleted {
                r.err(412, "FAILED_PRECONDITION", &["is used by ComputeInstance"]);
            }
        } else if r.status == 200 {
            created += 1;
        } else if r.status == 404 {
            // The subnet was deleted and already gone.
            r.err(404, "NOT_FOUND", &["Subnet 'a' does not exist"]);
        } else {
            r.err(412, "FAILED_PRECONDITION", &["Subnet 'a' is being deleted"]);
        }
    }
    assert!(
        !(deleted && created > 0),
        "{created} VMs on a deleted subnet"
    );
    assert_eq!(t.count("compute_instances").await, created);
    s.finish().await;
}

/// Request transactions share commits (on SQLite, turns of the group commit): many creates
/// and optimistic read-modify-write updates at once. Every create is readable the moment it
/// returns, and no increment is lost.
async fn concurrent_creates_are_durable_and_updates_lose_nothing(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let t = s.tenant("acme").await;
    t.create(
        "virtual_networks",
        json!({"metadata": {"name": "counter", "labels": {"n": "0"}}, "spec": {"ipv4_cidr": "10.200.0.0/16"}}),
    )
    .await;
    const CREATES: usize = 24;
    const WRITERS: usize = 6;
    const INCREMENTS: usize = 4;
    let creates = join_all((0..CREATES).map(|i| {
        let t = t.clone();
        async move {
            let name = format!("vn-{i}");
            let body = json!({"metadata": {"name": name}, "spec": {"ipv4_cidr": format!("10.{i}.0.0/16")}});
            let created = t.post(&format!("{PUB}/virtual_networks"), body).await.ok();
            // Durable once the create returned: readable at once.
            let read = t.get(&format!("{PUB}/virtual_networks/{name}")).await.ok();
            assert_eq!(id(&read), id(&created), "{name}");
        }
    }));
    let increments = join_all((0..WRITERS).map(|_| {
        let t = t.clone();
        async move {
            let path = format!("{PUB}/virtual_networks/counter");
            let mut done = 0;
            while done < INCREMENTS {
                let current = t.get(&path).await.ok();
                let n: usize = current["metadata"]["labels"]["n"]
                    .as_str()
                    .and_then(|n| n.parse().ok())
                    .expect("counter label");
                let version = current["metadata"]["version"].clone();
                let r = t
                    .patch(
                        &format!("{path}?lock=true"),
                        json!({"metadata": {"version": version, "labels": {"n": (n + 1).to_string()}}}),
                    )
                    .await;
                match r.status {
                    200 => done += 1,
                    409 => {}
                    other => panic!("unexpected {other}: {}", r.text),
                }
            }
        }
    }));
    futures::future::join(creates, increments).await;
    let counter = t.get(&format!("{PUB}/virtual_networks/counter")).await.ok();
    assert_eq!(
        counter["metadata"]["labels"]["n"],
        json!((WRITERS * INCREMENTS).to_string()),
        "no increment lost"
    );
    assert_eq!(
        t.count("virtual_networks").await,
        i64::try_from(CREATES + 1).unwrap()
    );
    s.finish().await;
}
