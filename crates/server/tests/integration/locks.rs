//! Row locks that keep a create and a concurrent delete of what it depends on apart (the races
//! matter on PostgreSQL, where transactions run concurrently; SQLite runs them one at a time):
//! a workload created while its tenant is deleted, a SecurityGroup or Subnet created while its
//! VirtualNetwork is deleted, workloads created while their Subnet and SecurityGroup are
//! deleted. In every round at most one of the two may succeed.

use serde_json::json;

use crate::both_backends;
use crate::common::*;

both_backends!(
    tenant_delete_races_workload_create,
    network_delete_races_group_and_subnet_create,
    subnet_and_group_deletes_race_workload_creates
);

/// Rounds per race.
const ROUNDS: usize = 12;
/// Rounds of the workload race (its deletes start at eight different lags).
const WORKLOAD_ROUNDS: usize = 16;

/// A tenant delete and a ComputeInstance create in that tenant, concurrently: either the
/// delete is refused (it has a workload) or the create fails (the tenant is being deleted) —
/// never a workload in a deleted tenant.
async fn tenant_delete_races_workload_create(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let mut outcomes = [0usize; 2];
    for round in 0..ROUNDS {
        let tenant = format!("race-{round}");
        let t = s.tenant(&tenant).await;
        t.wait("subnets", "default-ipv4", "SUBNET_STATE_READY")
            .await;
        let vm = vm_body(
            "vm",
            json!([{"subnet": "default-ipv4", "security_groups": ["default"]}]),
        );
        let (vm_path, tenant_path) = (
            format!("{PUB}/compute_instances"),
            format!("{PRIV}/tenants/{tenant}"),
        );
        let (created, deleted) = tokio::join!(t.post(&vm_path, vm), s.admin.delete(&tenant_path));
        match (created.status, deleted.status) {
            (200, 412) => {
                deleted.err(
                    412,
                    "FAILED_PRECONDITION",
                    &["still has 1 compute_instances"],
                );
                outcomes[0] += 1;
            }
            (c, 200) if c != 200 => {
                // 401: deleting a tenant revokes its tokens, so the create may not even
                // authenticate any more.
                assert!(
                    matches!(c, 401 | 403 | 404 | 412),
                    "round {round}: create failed oddly: {}",
                    created.text
                );
                outcomes[1] += 1;
            }
            _ => panic!(
                "round {round}: both succeeded or an odd answer: create {} {}, delete {} {}",
                created.status, created.text, deleted.status, deleted.text
            ),
        }
        // Whatever won, a live workload has a live tenant.
        let vms = t.list("compute_instances", &[]).await;
        if vms.status == 200 && vms.body["total"].as_i64().unwrap_or(0) > 0 {
            let owner = s.admin.get(&format!("{PRIV}/tenants/{tenant}")).await.ok();
            assert!(
                owner["metadata"].get("deletion_timestamp").is_none(),
                "round {round}: a workload in a tenant being deleted: {owner}"
            );
        }
    }
    eprintln!(
        "create won {} rounds, delete won {}",
        outcomes[0], outcomes[1]
    );
    s.finish().await;
}

/// A VirtualNetwork delete and a SecurityGroup plus a Subnet create on it, concurrently:
/// either the delete is refused (the network is used) or the creates fail — never a group or
/// subnet on a deleted network.
async fn network_delete_races_group_and_subnet_create(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let t = s.tenant("acme").await;
    for round in 0..ROUNDS {
        let vn = format!("vn-{round}");
        t.post(
            &format!("{PUB}/virtual_networks"),
            json!({"metadata": {"name": vn}, "spec": {"ipv4_cidr": format!("10.{}.0.0/16", round + 1)}}),
        )
        .await
        .ok();
        let (sg_path, sn_path, vn_path) = (
            format!("{PUB}/security_groups"),
            format!("{PUB}/subnets"),
            format!("{PUB}/virtual_networks/{vn}"),
        );
        let sg_body =
            json!({"metadata": {"name": format!("sg-{round}")}, "spec": {"virtual_network": vn}});
        let sn_body = json!({"metadata": {"name": format!("sn-{round}")}, "spec": {"virtual_network": vn, "ipv4_cidr": format!("10.{}.0.0/24", round + 1)}});
        let (sg, subnet, deleted) = tokio::join!(
            t.post(&sg_path, sg_body),
            t.post(&sn_path, sn_body),
            t.delete(&vn_path),
        );
        let used = sg.status == 200 || subnet.status == 200;
        if deleted.status == 200 {
            assert!(
                !used,
                "round {round}: the network was deleted but a create on it succeeded: sg {} {}, subnet {} {}",
                sg.status, sg.text, subnet.status, subnet.text
            );
        } else {
            deleted.err(
                412,
                "FAILED_PRECONDITION",
                &["cannot be deleted: it still has"],
            );
            assert!(used, "round {round}: delete refused for nothing");
        }
        for r in [&sg, &subnet] {
            assert!(
                matches!(r.status, 200 | 404 | 412),
                "round {round}: odd answer {}",
                r.text
            );
        }
    }
    // No group or subnet refers to a network that is gone or going.
    for collection in ["security_groups", "subnets"] {
        let list = t.list(collection, &[("filter", NOT_DEFAULT)]).await.ok();
        for obj in list["items"].as_array().cloned().unwrap_or_default() {
            let vn = obj["spec"]["virtual_network"].as_str().unwrap_or_default();
            let owner = t.get(&format!("{PUB}/virtual_networks/{vn}")).await.ok();
            assert!(
                owner["metadata"].get("deletion_timestamp").is_none(),
                "{collection} {} on a network being deleted: {owner}",
                obj["metadata"]["name"]
            );
        }
    }
    s.finish().await;
}

/// Two ComputeInstance creates on one Subnet and SecurityGroup (which share their locks on
/// them) and the deletes of that Subnet and that group, concurrently: a delete that succeeds
/// saw no workload, so no create may have succeeded — never a workload on a deleted subnet or
/// group.
async fn subnet_and_group_deletes_race_workload_creates(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let t = s.tenant("acme").await;
    t.post(
        &format!("{PUB}/virtual_networks"),
        json!({"metadata": {"name": "vn"}, "spec": {"ipv4_cidr": "10.50.0.0/16"}}),
    )
    .await
    .ok();
    let mut created_total = 0;
    for round in 0..WORKLOAD_ROUNDS {
        let (sn, sg) = (format!("sn-{round}"), format!("sg-{round}"));
        t.post(
            &format!("{PUB}/subnets"),
            json!({"metadata": {"name": sn}, "spec": {"virtual_network": "vn", "ipv4_cidr": format!("10.50.{round}.0/24")}}),
        )
        .await
        .ok();
        t.post(
            &format!("{PUB}/security_groups"),
            json!({"metadata": {"name": sg}, "spec": {"virtual_network": "vn"}}),
        )
        .await
        .ok();
        t.wait("subnets", &sn, "SUBNET_STATE_READY").await;
        let vm_path = format!("{PUB}/compute_instances");
        let vm = |n: usize| {
            vm_body(
                &format!("vm-{round}-{n}"),
                json!([{"subnet": sn, "security_groups": [sg]}]),
            )
        };
        let (sn_path, sg_path) = (
            format!("{PUB}/subnets/{sn}"),
            format!("{PUB}/security_groups/{sg}"),
        );
        // The deletes start a little later each round, so some rounds meet the creates
        // mid-transaction, whatever the backend's speed.
        let lag = std::time::Duration::from_millis(2 * (round as u64 % 8));
        let (vm0, vm1, sn_deleted, sg_deleted) = tokio::join!(
            t.post(&vm_path, vm(0)),
            t.post(&vm_path, vm(1)),
            async {
                tokio::time::sleep(lag).await;
                t.delete(&sn_path).await
            },
            async {
                tokio::time::sleep(lag).await;
                t.delete(&sg_path).await
            },
        );
        let created = [&vm0, &vm1].iter().filter(|r| r.status == 200).count();
        created_total += created;
        for (what, deleted) in [("subnet", &sn_deleted), ("security group", &sg_deleted)] {
            if deleted.status == 200 {
                assert_eq!(
                    created, 0,
                    "round {round}: the {what} was deleted but a workload on it was created: {} / {}",
                    vm0.text, vm1.text
                );
            } else {
                deleted.err(
                    412,
                    "FAILED_PRECONDITION",
                    &["cannot be deleted: it is used by"],
                );
            }
        }
        for r in [&vm0, &vm1] {
            assert!(
                matches!(r.status, 200 | 404 | 412),
                "round {round}: odd answer {}",
                r.text
            );
        }
    }
    // No workload refers to a subnet or group that is gone or going.
    let list = t.list("compute_instances", &[]).await.ok();
    for vm in list["items"].as_array().cloned().unwrap_or_default() {
        let att = &vm["spec"]["compute_network_attachments"][0];
        let mut used = vec![format!(
            "{PUB}/subnets/{}",
            att["subnet"].as_str().unwrap_or_default()
        )];
        for g in att["security_groups"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            used.push(format!(
                "{PUB}/security_groups/{}",
                g.as_str().unwrap_or_default()
            ));
        }
        for path in used {
            let owner = t.get(&path).await.ok();
            assert!(
                owner["metadata"].get("deletion_timestamp").is_none(),
                "{} uses {path}, which is being deleted: {owner}",
                vm["metadata"]["name"]
            );
        }
    }
    eprintln!("workloads created in the races: {created_total}");
    s.finish().await;
}
