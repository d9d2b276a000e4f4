//! The host inventory (private API): validation against the HostType, MAC normalisation and
//! uniqueness, update rules, deletion protection; the dev-mode hosts.

use serde_json::{Value, json};

use crate::common::*;

fn host(name: &str, pool: &str, macs: [&str; 4]) -> Value {
    let names = ["data-0", "data-1", "mgmt-0", "bmc-0"];
    let interfaces: Vec<Value> = names
        .iter()
        .zip(macs)
        .map(|(n, m)| json!({"name": n, "mac_address": m}))
        .collect();
    json!({"metadata": {"name": name}, "spec": {"host_type": "bm-standard", "interfaces": interfaces, "pool": pool}})
}

async fn host_count(s: &TestServer) -> i64 {
    s.admin.get(&format!("{PRIV}/hosts")).await.ok()["total"]
        .as_i64()
        .unwrap()
}

/// Sets a host's state and assignment directly in the store (what a workload controller does).
async fn set_state(s: &TestServer, key: &str, state: &str, assigned_to: &str) {
    let h = s.admin.get(&format!("{PRIV}/hosts/{key}")).await.ok();
    let store = s.store();
    let mut tx = store.begin().await.unwrap();
    let mut rec = tx.lock(&id(&h)).await.unwrap().unwrap();
    rec.body["status"] = json!({"state": state, "assigned_to": assigned_to});
    tx.update(&rec).await.unwrap();
    tx.commit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_mode_inventory() {
    let s = TestServer::sqlite().await;
    let list = s.admin.get(&format!("{PRIV}/hosts")).await.ok();
    assert_eq!(list["total"], 10, "{list}");
    let items = list["items"].as_array().unwrap();
    let pool = |p: &str| items.iter().filter(|h| h["spec"]["pool"] == p).count();
    assert_eq!((pool("baremetal"), pool("caas")), (4, 6));
    let mut macs: Vec<&str> = items
        .iter()
        .flat_map(|h| h["spec"]["interfaces"].as_array().unwrap())
        .map(|i| i["mac_address"].as_str().unwrap())
        .collect();
    assert_eq!(macs.len(), 40);
    macs.sort();
    macs.dedup();
    assert_eq!(macs.len(), 40, "dev MACs are unique");
    let ht = id(&s
        .admin
        .get(&format!("{PRIV}/host_types/bm-standard"))
        .await
        .ok());
    for h in items {
        assert_eq!(h["spec"]["host_type"], ht);
        assert_eq!(h["status"]["state"], "HOST_STATE_FREE");
    }
    let first = s.admin.get(&format!("{PRIV}/hosts/baremetal-0")).await.ok();
    // Bootstrapping again (a restart in dev mode) changes nothing.
    osac_server::dev::bootstrap(&s.service()).await.unwrap();
    assert_eq!(host_count(&s).await, 10);
    let again = s.admin.get(&format!("{PRIV}/hosts/baremetal-0")).await.ok();
    assert_eq!(again["spec"], first["spec"]);
    // Hosts are the provider's: tenants see nothing of them.
    let t = s.tenant("acme").await;
    t.get(&format!("{PUB}/hosts"))
        .await
        .err(404, "NOT_FOUND", &["private API"]);
    t.get(&format!("{PUB}/hosts/baremetal-0"))
        .await
        .err(404, "NOT_FOUND", &["private API"]);
    t.get(&format!("{PRIV}/hosts"))
        .await
        .err(403, "PERMISSION_DENIED", &[]);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_rules() {
    let mut s = TestServer::sqlite().await;
    let path = format!("{PRIV}/hosts");
    s.admin
        .post(
            &format!("{PRIV}/host_types"),
            json!({"metadata": {"name": "vm-small"}, "title": "VM"}),
        )
        .await
        .ok();
    let ok_macs = [
        "0A:00:00:00:00:01",
        "0a-00-00-00-00-02",
        "0a:00:00:00:00:03",
        "0a:00:00:00:00:04",
    ];
    let mut missing = host("h", "baremetal", ok_macs);
    missing["spec"]["interfaces"].as_array_mut().unwrap().pop();
    let mut extra = host("h", "baremetal", ok_macs);
    extra["spec"]["interfaces"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "eth9", "mac_address": "0a:00:00:00:00:09"}));
    let mut twice = host("h", "baremetal", ok_macs);
    twice["spec"]["interfaces"][3]["name"] = json!("data-0");
    for (body, status, code, fragments) in [
        (
            json!({"metadata": {"name": "h"}, "spec": {"pool": "caas"}}),
            400,
            "INVALID_ARGUMENT",
            vec!["spec.host_type", "required"],
        ),
        (
            json!({"spec": {"host_type": "ghost", "pool": "caas"}}),
            404,
            "NOT_FOUND",
            vec!["spec.host_type", "HostType 'ghost' does not exist"],
        ),
        (
            json!({"spec": {"host_type": "vm-small", "pool": "caas"}}),
            400,
            "INVALID_ARGUMENT",
            vec!["spec.host_type", "no interfaces"],
        ),
        (
            host("h", "gpu", ok_macs),
            400,
            "INVALID_ARGUMENT",
            vec!["spec.pool", "'gpu' is not one of baremetal, caas"],
        ),
        (
            host("h", "", ok_macs),
            400,
            "INVALID_ARGUMENT",
            vec!["spec.pool", "required"],
        ),
        (
            missing,
            400,
            "INVALID_ARGUMENT",
            vec!["spec.interfaces", "missing: bmc-0"],
        ),
        (
            extra,
            400,
            "INVALID_ARGUMENT",
            vec!["spec.interfaces[4].name", "no interface 'eth9'"],
        ),
        (
            twice,
            400,
            "INVALID_ARGUMENT",
            vec!["spec.interfaces[3].name", "listed twice"],
        ),
        (
            host(
                "h",
                "caas",
                [
                    "0a:00:00:00:00:01",
                    "zz:00:00:00:00:02",
                    "0a:00:00:00:00:03",
                    "0a:00:00:00:00:04",
                ],
            ),
            400,
            "INVALID_ARGUMENT",
            vec!["spec.interfaces[1].mac_address", "not a MAC address"],
        ),
        (
            host(
                "h",
                "caas",
                [
                    "0a:00:00:00:00:01",
                    "01:00:5e:00:00:02",
                    "0a:00:00:00:00:03",
                    "0a:00:00:00:00:04",
                ],
            ),
            400,
            "INVALID_ARGUMENT",
            vec!["spec.interfaces[1].mac_address", "multicast"],
        ),
        (
            host(
                "h",
                "caas",
                [
                    "0a:00:00:00:00:01",
                    "0A:00:00:00:00:01",
                    "0a:00:00:00:00:03",
                    "0a:00:00:00:00:04",
                ],
            ),
            400,
            "INVALID_ARGUMENT",
            vec!["spec.interfaces[1].mac_address", "unique"],
        ),
        // A MAC of a dev host (other case and separator): unique across all hosts.
        (
            host(
                "h",
                "caas",
                [
                    "0a:00:00:00:00:01",
                    "0E-00-00-00-01-00",
                    "0a:00:00:00:00:03",
                    "0a:00:00:00:00:04",
                ],
            ),
            409,
            "ALREADY_EXISTS",
            vec![
                "MAC 0e:00:00:00:01:00 of interface data-1",
                "already used by Host 'baremetal-0' (interface data-0)",
            ],
        ),
    ] {
        s.admin
            .post(&path, body)
            .await
            .err(status, code, &fragments);
    }
    assert_eq!(host_count(&s).await, 10);

    // Stored normalised (lowercase, colons, the type's order), type as id, FREE.
    let mut shuffled = host("h", "baremetal", ok_macs);
    shuffled["spec"]["interfaces"]
        .as_array_mut()
        .unwrap()
        .reverse();
    let h = s.admin.post(&path, shuffled).await.ok();
    let ht = id(&s
        .admin
        .get(&format!("{PRIV}/host_types/bm-standard"))
        .await
        .ok());
    assert_eq!(h["spec"]["host_type"], ht);
    assert_eq!(
        h["spec"]["interfaces"],
        json!([
            {"name": "data-0", "mac_address": "0a:00:00:00:00:01"},
            {"name": "data-1", "mac_address": "0a:00:00:00:00:02"},
            {"name": "mgmt-0", "mac_address": "0a:00:00:00:00:03"},
            {"name": "bmc-0", "mac_address": "0a:00:00:00:00:04"}
        ])
    );
    assert_eq!(h["status"]["state"], "HOST_STATE_FREE");
    s.admin
        .post(
            &path,
            host(
                "h",
                "caas",
                [
                    "0c:00:00:00:00:01",
                    "0c:00:00:00:00:02",
                    "0c:00:00:00:00:03",
                    "0c:00:00:00:00:04",
                ],
            ),
        )
        .await
        .err(409, "ALREADY_EXISTS", &["Host named 'h' already exists"]);

    // Updates while FREE: pool and MACs (validated, unique, normalised); never the type.
    let hp = format!("{path}/h");
    let up = s
        .admin
        .patch(
            &hp,
            json!({"spec": {"pool": "caas"}, "metadata": {"labels": {"rack": "r1"}}}),
        )
        .await
        .ok();
    assert_eq!(up["spec"]["pool"], "caas");
    let mut new_macs = host("h", "caas", ok_macs);
    new_macs["spec"]["interfaces"][0]["mac_address"] = json!("0A:00:00:00:00:11");
    let up = s.admin.patch(&hp, new_macs.clone()).await.ok();
    assert_eq!(
        up["spec"]["interfaces"][0]["mac_address"],
        "0a:00:00:00:00:11"
    );
    let mut stolen = new_macs.clone();
    stolen["spec"]["interfaces"][0]["mac_address"] = json!("0e:00:00:00:02:01");
    s.admin.patch(&hp, stolen).await.err(
        409,
        "ALREADY_EXISTS",
        &["already used by Host 'baremetal-1'"],
    );
    s.admin
        .patch(&hp, json!({"spec": {"pool": "gpu"}}))
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.pool"]);
    s.admin
        .patch(&hp, json!({"spec": {"host_type": "vm-small"}}))
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.host_type is immutable"]);
    // The type's name in a full-object update means the same type.
    let full = s.admin.patch(&hp, new_macs).await.ok();
    assert_eq!(full["spec"]["host_type"], ht);

    // The host type's interfaces cannot change while hosts use it; its text can.
    let types = format!("{PRIV}/host_types/bm-standard");
    s.admin
        .patch(
            &types,
            json!({"interfaces": [{"name": "data-0", "role": "fabric"}]}),
        )
        .await
        .err(
            412,
            "FAILED_PRECONDITION",
            &[
                "interfaces of HostType 'bm-standard' cannot change",
                "Host '",
            ],
        );
    s.admin
        .patch(&types, json!({"title": "Standard server v2"}))
        .await
        .ok();
    s.admin
        .delete(&types)
        .await
        .err(412, "FAILED_PRECONDITION", &["is used by Host"]);

    // In use (RESERVED / ASSIGNED, written by the workload controllers): no pool or interface
    // change, no delete; both name the workload. The controllers are paused so nothing
    // reconciles the hand-written state.
    let t = s.tenant("acme").await;
    t.ready_vn("net", "10.0.0.0/16").await;
    t.ready_subnet("a", "net", "10.0.1.0/24").await;
    s.pause().await;
    let bm = t.create_bm("web", "a").await;
    for state in ["HOST_STATE_RESERVED", "HOST_STATE_ASSIGNED"] {
        set_state(&s, "h", state, &id(&bm)).await;
        let short = state.trim_start_matches("HOST_STATE_");
        s.admin.delete(&hp).await.err(
            412,
            "FAILED_PRECONDITION",
            &[
                "Host 'h' cannot be deleted",
                &format!("it is {short} for BareMetalInstance 'web' of tenant 'acme'"),
            ],
        );
        s.admin
            .patch(&hp, json!({"spec": {"pool": "baremetal"}}))
            .await
            .err(
                412,
                "FAILED_PRECONDITION",
                &[
                    "only change while the host is FREE",
                    "BareMetalInstance 'web'",
                ],
            );
        // Labels can still change.
        s.admin
            .patch(&hp, json!({"metadata": {"labels": {"rack": "r2"}}}))
            .await
            .ok();
    }
    // FREE again (or FAILED): deletable at once (no finalizer).
    set_state(&s, "h", "HOST_STATE_FAILED", "").await;
    s.admin.delete(&hp).await.ok();
    s.admin
        .get(&hp)
        .await
        .err(404, "NOT_FOUND", &["Host 'h' does not exist"]);
    assert_eq!(host_count(&s).await, 10);
    s.finish().await;
}
