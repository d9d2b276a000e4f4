//! Restarts: state survives, and reconciles interrupted by a stop converge afterwards.

use osac_backends::{FailureKind, Operation};
use serde_json::json;

use crate::both_backends;
use crate::common::*;

both_backends!(
    state_survives_a_restart,
    interrupted_reconciles_converge_after_restart
);

async fn state_survives_a_restart(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    let t = s.tenant("acme").await;
    let vn = t.ready_vn("net", "10.0.0.0/16").await;
    let sn = t.ready_subnet("a", "net", "10.0.1.0/24").await;
    let sg = t
        .create("security_groups", json!({"metadata": {"name": "sg"}, "spec": {"virtual_network": "net", "ingress": [{"protocol": "PROTOCOL_TCP", "port_from": 22, "ipv4_cidr": "0.0.0.0/0"}]}}))
        .await;
    let sg = t
        .wait("security_groups", &id(&sg), "SECURITY_GROUP_STATE_READY")
        .await;
    t.allocated_eip("ip", "").await;
    let nat = t.create("nat_gateways", json!({"metadata": {"name": "nat"}, "spec": {"virtual_network": "net", "external_ip": "ip"}})).await;
    let nat = t
        .wait("nat_gateways", &id(&nat), "NAT_GATEWAY_STATE_READY")
        .await;
    let eip = t
        .wait_until(&format!("{PUB}/external_ips/ip"), "attached", |o| {
            o["status"]["attached"] == true
        })
        .await;
    let pool = s
        .admin
        .get(&format!("{PRIV}/external_ip_pools/external-pool-1"))
        .await
        .ok();
    let segment = s.sim_fabric().subnet(&id(&sn)).await.unwrap().segment_id;

    s.restart().await;

    // Same objects, same states, nothing re-done (versions unchanged once settled).
    for (col, obj) in [
        ("virtual_networks", &vn),
        ("subnets", &sn),
        ("security_groups", &sg),
        ("external_ips", &eip),
        ("nat_gateways", &nat),
    ] {
        let again = t.get(&format!("{PUB}/{col}/{}", id(obj))).await.ok();
        assert_eq!(&again, obj, "{col} changed across the restart");
    }
    assert_eq!(
        s.admin
            .get(&format!("{PRIV}/external_ip_pools/external-pool-1"))
            .await
            .ok(),
        pool
    );
    // The fabric's tables were persisted: same segment, and new segments do not reuse it.
    let sim = s.sim_fabric();
    assert_eq!(
        sim.subnet(&id(&sn)).await.expect("segment kept").segment_id,
        segment
    );
    assert!(
        sim.snat_rules()
            .await
            .iter()
            .any(|r| r.nat_gateway_id == id(&nat))
    );
    let b = t.ready_subnet("b", "net", "10.0.2.0/24").await;
    assert_ne!(sim.subnet(&id(&b)).await.unwrap().segment_id, segment);
    // Names stay unique and the overlap rule still sees the old subnet.
    t.post(&format!("{PUB}/subnets"), json!({"metadata": {"name": "c"}, "spec": {"virtual_network": "net", "ipv4_cidr": "10.0.1.0/25"}}))
        .await
        .err(400, "INVALID_ARGUMENT", &["overlaps with existing subnet 'a'"]);
    t.post(
        &format!("{PUB}/virtual_networks"),
        json!({"metadata": {"name": "net"}, "spec": {"ipv4_cidr": "10.1.0.0/16"}}),
    )
    .await
    .err(409, "ALREADY_EXISTS", &["'net'"]);
    // And everything can still be torn down.
    t.delete(&format!("{PUB}/nat_gateways/nat")).await.ok();
    t.wait_gone(PUB, "nat_gateways", &id(&nat)).await;
    t.delete(&format!("{PUB}/external_ips/ip")).await.ok();
    for sub in [&sn, &b] {
        t.delete(&format!("{PUB}/subnets/{}", id(sub))).await.ok();
    }
    t.delete(&format!("{PUB}/security_groups/sg")).await.ok();
    for (col, obj) in [
        ("subnets", &sn),
        ("subnets", &b),
        ("security_groups", &sg),
        ("external_ips", &eip),
    ] {
        t.wait_gone(PUB, col, &id(obj)).await;
    }
    t.delete(&format!("{PUB}/virtual_networks/net")).await.ok();
    t.wait_gone(PUB, "virtual_networks", &id(&vn)).await;
    assert!(sim.virtual_network(&id(&vn)).await.is_none());
    s.finish().await;
}

async fn interrupted_reconciles_converge_after_restart(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    let t = s.tenant("acme").await;
    t.ready_vn("base", "10.1.0.0/16").await;
    let doomed = t.ready_subnet("doomed", "base", "10.1.1.0/24").await;

    // A delete whose fabric undo keeps failing: DELETING when the server stops.
    s.sim_fabric().inject_failure(
        Operation::DeleteSubnet,
        &id(&doomed),
        u32::MAX,
        FailureKind::Transient,
    );
    t.delete(&format!("{PUB}/subnets/doomed")).await.ok();
    t.wait_until(&format!("{PUB}/subnets/doomed"), "the failed undo", |o| {
        o["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("injected transient failure")
    })
    .await;

    // Creates interrupted mid-way: the manager failed transiently (PENDING with a message), or
    // no controller ever saw the object.
    let mut ctl = s.pause().await;
    let vn = t
        .create(
            "virtual_networks",
            json!({"metadata": {"name": "net"}, "spec": {"ipv4_cidr": "10.0.0.0/16"}}),
        )
        .await;
    let eip = t
        .create("external_ips", json!({"metadata": {"name": "ip"}}))
        .await;
    ctl.sim_fabric().inject_failure(
        Operation::CreateVirtualNetwork,
        &id(&vn),
        u32::MAX,
        FailureKind::Transient,
    );
    ctl.sim_fabric().inject_failure(
        Operation::AllocateExternalIp,
        &id(&eip),
        u32::MAX,
        FailureKind::Transient,
    );
    ctl.sim_fabric().inject_failure(
        Operation::DeleteSubnet,
        &id(&doomed),
        u32::MAX,
        FailureKind::Transient,
    );
    ctl.run();
    for (col, key) in [("virtual_networks", "net"), ("external_ips", "ip")] {
        let o = t
            .wait_until(&format!("{PUB}/{col}/{key}"), "a transient failure", |o| {
                o["status"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("injected transient failure")
            })
            .await;
        assert!(
            o["status"]["state"].as_str().unwrap().ends_with("_PENDING"),
            "{o}"
        );
    }
    ctl.stop().await;
    let sg = t
        .create(
            "security_groups",
            json!({"metadata": {"name": "sg"}, "spec": {"virtual_network": "base"}}),
        )
        .await;
    assert_eq!(sg["status"]["state"], "SECURITY_GROUP_STATE_PENDING");

    // A new server without the failures converges everything.
    s.restart().await;
    let vn = t
        .wait("virtual_networks", "net", "VIRTUAL_NETWORK_STATE_READY")
        .await;
    assert!(
        vn["status"].get("message").is_none(),
        "the old failure message is cleared: {vn}"
    );
    assert!(s.sim_fabric().virtual_network(&id(&vn)).await.is_some());
    let eip = t
        .wait("external_ips", "ip", "EXTERNAL_IP_STATE_ALLOCATED")
        .await;
    assert!(eip["status"]["address"].is_string());
    t.wait("security_groups", "sg", "SECURITY_GROUP_STATE_READY")
        .await;
    t.wait_gone(PUB, "subnets", &id(&doomed)).await;
    assert!(s.sim_fabric().subnet(&id(&doomed)).await.is_none());
    let pool = s
        .admin
        .get(&format!("{PRIV}/external_ip_pools/external-pool-1"))
        .await
        .ok();
    // The test's address and the tenant's default NAT address.
    assert_eq!(counter(&pool, "allocated"), 2);
    assert_eq!(
        counter(&pool, "allocated") + counter(&pool, "available"),
        counter(&pool, "total")
    );
    s.finish().await;
}
