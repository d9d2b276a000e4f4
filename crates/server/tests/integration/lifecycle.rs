//! Tenant networking resources from creation to READY and back to deletion, with every
//! validation rule: status codes, messages naming the field and rule, and no side effects.

use std::time::Duration;

use osac_backends::{FailureKind, Operation};
use serde_json::{Value, json};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtual_network_and_subnet_lifecycle() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    let sim = s.sim_fabric();

    let vn = t.create("virtual_networks", json!({"metadata": {"name": "net", "labels": {"env": "dev"}}, "spec": {"ipv4_cidr": "10.0.0.0/16", "ipv6_cidr": "fd00::/48"}})).await;
    assert_eq!(vn["status"]["state"], "VIRTUAL_NETWORK_STATE_PENDING");
    assert_eq!(vn["metadata"]["version"], "1", "int64 version as a string");
    assert_eq!(vn["metadata"]["creator"], "acme-tenant-admin");
    assert!(
        vn["metadata"].get("finalizers").is_none(),
        "finalizers are private: {vn}"
    );
    let vn = t
        .wait("virtual_networks", &id(&vn), "VIRTUAL_NETWORK_STATE_READY")
        .await;
    let vn_id = id(&vn);
    let fabric_vn = sim
        .virtual_network(&vn_id)
        .await
        .expect("VN programmed in the fabric");
    assert_eq!(fabric_vn.tenant, "acme");
    assert_eq!(fabric_vn.ipv4_cidr.unwrap().to_string(), "10.0.0.0/16");

    let a = t
        .create("subnets", json!({"metadata": {"name": "a"}, "spec": {"virtual_network": "net", "ipv4_cidr": "10.0.1.0/24", "ipv6_cidr": "fd00:0:0:1::/64"}}))
        .await;
    let a = t.wait("subnets", &id(&a), "SUBNET_STATE_READY").await;
    assert_eq!(a["status"]["ipv4_gateway"], "10.0.1.1");
    assert_eq!(a["status"]["ipv6_gateway"], "fd00:0:0:1::1");
    assert_eq!(a["status"]["vip_cidr"], "10.0.1.240/28");
    let seg = sim.subnet(&id(&a)).await.expect("subnet programmed");
    assert_eq!(a["status"]["segment_id"], seg.segment_id.to_string());
    let b = t.ready_subnet("b", "net", "10.0.2.0/24").await;
    let sg = t
        .create(
            "security_groups",
            json!({"metadata": {"name": "sg"}, "spec": {"virtual_network": "net"}}),
        )
        .await;
    t.wait("security_groups", "sg", "SECURITY_GROUP_STATE_READY")
        .await;

    // Deletion protection: the VN still has children; nothing changes.
    let msg = t.delete(&format!("{PUB}/virtual_networks/net")).await.err(
        412,
        "FAILED_PRECONDITION",
        &["'net'", "cannot be deleted"],
    );
    assert!(
        msg.contains("Subnet 'a'")
            || msg.contains("Subnet 'b'")
            || msg.contains("SecurityGroup 'sg'"),
        "{msg}"
    );
    let still = t.get(&format!("{PUB}/virtual_networks/net")).await.ok();
    assert_eq!(still, vn);

    // A subnet disappears only after the controller undid it in the fabric.
    sim.inject_failure(
        Operation::DeleteSubnet,
        &id(&a),
        u32::MAX,
        FailureKind::Transient,
    );
    t.delete(&format!("{PUB}/subnets/a")).await.ok();
    let deleting = t
        .wait_until(
            &format!("{PUB}/subnets/a"),
            "the injected failure to show",
            |o| {
                o["status"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("injected transient failure")
            },
        )
        .await;
    assert_eq!(deleting["status"]["state"], "SUBNET_STATE_DELETING");
    assert!(
        deleting["metadata"]["deletion_timestamp"].is_string(),
        "{deleting}"
    );
    assert!(sim.subnet(&id(&a)).await.is_some());
    // A second delete is idempotent; updates of a deleting object are refused.
    t.delete(&format!("{PUB}/subnets/a")).await.ok();
    t.patch(
        &format!("{PUB}/subnets/a"),
        json!({"metadata": {"labels": {"x": "y"}}}),
    )
    .await
    .err(412, "FAILED_PRECONDITION", &["being deleted"]);
    // While it is deleting, the VN still cannot go, and the message says so.
    t.delete(&format!("{PUB}/subnets/b")).await.ok();
    t.delete(&format!("{PUB}/security_groups/sg")).await.ok();
    t.wait_gone(PUB, "security_groups", &id(&sg)).await;
    t.wait_gone(PUB, "subnets", &id(&b)).await;
    t.delete(&format!("{PUB}/virtual_networks/net")).await.err(
        412,
        "FAILED_PRECONDITION",
        &["Subnet 'a'", "being deleted"],
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        t.get(&format!("{PUB}/subnets/a")).await.ok()["status"]["state"],
        "SUBNET_STATE_DELETING"
    );
    sim.inject_failure(Operation::DeleteSubnet, &id(&a), 0, FailureKind::Transient);
    t.wait_gone(PUB, "subnets", &id(&a)).await;
    assert!(
        sim.subnet(&id(&a)).await.is_none(),
        "fabric segment removed"
    );

    // Now the VN goes, through the fabric too; while it is DELETING it takes no children.
    sim.inject_failure(
        Operation::DeleteVirtualNetwork,
        &vn_id,
        u32::MAX,
        FailureKind::Transient,
    );
    t.delete(&format!("{PUB}/virtual_networks/{vn_id}"))
        .await
        .ok();
    t.wait("virtual_networks", &vn_id, "VIRTUAL_NETWORK_STATE_DELETING")
        .await;
    t.post(
        &format!("{PUB}/subnets"),
        subnet_body("late", "net", "10.0.9.0/24"),
    )
    .await
    .err(
        412,
        "FAILED_PRECONDITION",
        &["spec.virtual_network", "'net' is being deleted"],
    );
    sim.inject_failure(
        Operation::DeleteVirtualNetwork,
        &vn_id,
        0,
        FailureKind::Transient,
    );
    t.wait_gone(PUB, "virtual_networks", &vn_id).await;
    assert!(sim.virtual_network(&vn_id).await.is_none());
    assert_eq!(t.count("virtual_networks").await, 0);
    t.delete(&format!("{PUB}/virtual_networks/{vn_id}"))
        .await
        .err(404, "NOT_FOUND", &[&vn_id]);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cidr_rules() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    let vns = format!("{PUB}/virtual_networks");
    let subnets = format!("{PUB}/subnets");

    for (spec, fragments) in [
        (
            json!({"ipv4_cidr": "10.0.0.0/33"}),
            vec!["spec.ipv4_cidr", "'10.0.0.0/33' is not a valid CIDR"],
        ),
        (
            json!({"ipv4_cidr": "10.0.0.0"}),
            vec!["spec.ipv4_cidr", "not a valid CIDR"],
        ),
        (
            json!({"ipv4_cidr": "banana"}),
            vec!["spec.ipv4_cidr", "not a valid CIDR"],
        ),
        (
            json!({"ipv4_cidr": "10.0.0.1/16"}),
            vec!["spec.ipv4_cidr", "host bits", "10.0.0.0/16"],
        ),
        (
            json!({"ipv6_cidr": "fd00::1/48"}),
            vec!["spec.ipv6_cidr", "host bits"],
        ),
        (
            json!({"ipv4_cidr": "fd00::/48"}),
            vec!["spec.ipv4_cidr", "IPv6", "expected IPv4"],
        ),
        (
            json!({"ipv6_cidr": "10.0.0.0/16"}),
            vec!["spec.ipv6_cidr", "expected IPv6"],
        ),
        (
            json!({}),
            vec!["at least one of spec.ipv4_cidr and spec.ipv6_cidr"],
        ),
        (
            json!({"ipv4_cidr": "10.0.0.0/16", "capabilities": {"enable_ipv6": true}}),
            vec!["spec.capabilities"],
        ),
        (
            json!({"ipv4_cidr": "10.0.0.0/16", "network_class": "ghost"}),
            vec!["spec.network_class", "ghost", "does not exist"],
        ),
    ] {
        let r = t
            .post(&vns, json!({"metadata": {"name": "net"}, "spec": spec}))
            .await;
        let code = if fragments[0] == "spec.network_class" {
            (404, "NOT_FOUND")
        } else {
            (400, "INVALID_ARGUMENT")
        };
        r.err(code.0, code.1, &fragments);
    }
    assert_eq!(
        t.count("virtual_networks").await,
        0,
        "refused creates store nothing"
    );

    t.ready_vn("net", "10.0.0.0/16").await;
    let dual = t.create("virtual_networks", json!({"metadata": {"name": "dual"}, "spec": {"ipv4_cidr": "10.0.0.0/16", "ipv6_cidr": "fd00::/48"}})).await;
    t.wait(
        "virtual_networks",
        &id(&dual),
        "VIRTUAL_NETWORK_STATE_READY",
    )
    .await;
    t.ready_subnet("a", "net", "10.0.1.0/24").await;

    for (body, fragments) in [
        (
            subnet_body("x", "net", "10.1.0.0/24"),
            vec![
                "spec.ipv4_cidr",
                "'10.1.0.0/24' is not inside VirtualNetwork 'net' '10.0.0.0/16'",
            ],
        ),
        (
            subnet_body("x", "net", "10.0.0.0/15"),
            vec!["spec.ipv4_cidr", "not inside"],
        ),
        (
            subnet_body("x", "net", "10.0.3.7/24"),
            vec!["spec.ipv4_cidr", "host bits"],
        ),
        (
            subnet_body("x", "net", "10.0.3.0/40"),
            vec!["spec.ipv4_cidr", "not a valid CIDR"],
        ),
        (
            subnet_body("x", "net", "fd00::/64"),
            vec!["spec.ipv4_cidr", "expected IPv4"],
        ),
        (
            json!({"spec": {"virtual_network": "net", "ipv6_cidr": "fd00:0:0:1::/64"}}),
            vec!["spec.ipv6_cidr", "VirtualNetwork 'net' has no IPv6 CIDR"],
        ),
        (
            json!({"spec": {"virtual_network": "dual", "ipv6_cidr": "fd01::/64"}}),
            vec!["spec.ipv6_cidr", "not inside VirtualNetwork 'dual'"],
        ),
        (
            json!({"spec": {"virtual_network": "net"}}),
            vec!["at least one of spec.ipv4_cidr and spec.ipv6_cidr"],
        ),
        (
            subnet_body("b", "net", "10.0.1.0/25"),
            vec![
                "spec.ipv4_cidr: subnet IPv4 CIDR '10.0.1.0/25' overlaps with existing subnet 'a' (CIDR '10.0.1.0/24') in VirtualNetwork 'net'",
            ],
        ),
        (
            subnet_body("b", "net", "10.0.0.0/23"),
            vec!["'10.0.0.0/23' overlaps with existing subnet 'a'"],
        ),
        (
            subnet_body("b", "net", "10.0.1.128/26"),
            vec!["overlaps with existing subnet 'a'"],
        ),
    ] {
        t.post(&subnets, body)
            .await
            .err(400, "INVALID_ARGUMENT", &fragments);
    }
    t.post(&subnets, json!({"spec": {"ipv4_cidr": "10.0.5.0/24"}}))
        .await
        .err(
            400,
            "INVALID_ARGUMENT",
            &["spec.virtual_network", "required"],
        );
    t.post(&subnets, subnet_body("x", "nowhere", "10.0.5.0/24"))
        .await
        .err(
            404,
            "NOT_FOUND",
            &["spec.virtual_network", "nowhere", "does not exist"],
        );
    assert_eq!(t.count("subnets").await, 1, "refused creates store nothing");

    // IPv6 overlap in a dual-stack VN, adjacent subnets, the same CIDR in another VN.
    t.create("subnets", json!({"metadata": {"name": "d1"}, "spec": {"virtual_network": "dual", "ipv4_cidr": "10.0.1.0/24", "ipv6_cidr": "fd00:0:0:1::/64"}})).await;
    t.post(&subnets, json!({"spec": {"virtual_network": "dual", "ipv4_cidr": "10.0.2.0/24", "ipv6_cidr": "fd00:0:0:1::/80"}}))
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.ipv6_cidr", "subnet IPv6 CIDR 'fd00:0:0:1::/80' overlaps with existing subnet 'd1'"]);
    t.create("subnets", subnet_body("adjacent", "net", "10.0.2.0/24"))
        .await;
    t.create("subnets", subnet_body("b", "net", "10.0.0.0/24"))
        .await;
    t.wait("subnets", "adjacent", "SUBNET_STATE_READY").await;
    assert_eq!(t.count("subnets").await, 4);
    s.finish().await;
}

/// Declarative creation: children of a parent still being provisioned are accepted and wait
/// for it (PENDING, with a message naming it), then proceed by themselves; a FAILED parent is
/// refused at create time; a parent that fails later fails its waiting children, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_wait_for_parents_being_provisioned_and_failed_parents_are_refused() {
    let mut s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    t.ready_vn("good", "10.1.0.0/16").await;

    // With the server's controllers stopped, create the VNs and inject failures before any
    // controller sees them; then let the test's own controllers run.
    let mut ctl = s.pause().await;
    for (name, cidr, kind) in [
        ("broken", "10.0.0.0/16", FailureKind::Permanent),
        ("slow", "10.0.0.0/16", FailureKind::Transient),
        ("doomed", "10.2.0.0/16", FailureKind::Permanent),
    ] {
        let vn = t
            .create(
                "virtual_networks",
                json!({"metadata": {"name": name}, "spec": {"ipv4_cidr": cidr}}),
            )
            .await;
        ctl.sim_fabric()
            .inject_failure(Operation::CreateVirtualNetwork, &id(&vn), u32::MAX, kind);
    }
    // Children of PENDING parents are accepted (nothing reconciled yet): a subnet, a group,
    // and a NAT gateway whose ExternalIP is not ALLOCATED either.
    t.create("subnets", subnet_body("waits", "slow", "10.0.1.0/24"))
        .await;
    t.create(
        "security_groups",
        json!({"metadata": {"name": "waits"}, "spec": {"virtual_network": "slow"}}),
    )
    .await;
    t.create("subnets", subnet_body("dies", "doomed", "10.2.1.0/24"))
        .await;
    let pending_ip = t
        .create("external_ips", json!({"metadata": {"name": "pending-ip"}}))
        .await;
    ctl.sim_fabric().inject_failure(
        Operation::AllocateExternalIp,
        &id(&pending_ip),
        u32::MAX,
        FailureKind::Transient,
    );
    t.create(
        "nat_gateways",
        json!({"metadata": {"name": "waits"}, "spec": {"virtual_network": "good", "external_ip": "pending-ip"}}),
    )
    .await;
    ctl.run();
    let failed = t
        .wait("virtual_networks", "broken", "VIRTUAL_NETWORK_STATE_FAILED")
        .await;
    assert!(
        failed["status"]["message"]
            .as_str()
            .unwrap()
            .contains("injected permanent failure"),
        "{failed}"
    );
    let message = |o: &Value| {
        o["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    for (collection, name, waits_for) in [
        (
            "subnets",
            "waits",
            "waiting for VirtualNetwork 'slow' to be READY",
        ),
        (
            "security_groups",
            "waits",
            "waiting for VirtualNetwork 'slow' to be READY",
        ),
        (
            "nat_gateways",
            "waits",
            "waiting for ExternalIP 'pending-ip' to be ALLOCATED",
        ),
    ] {
        let o = t
            .wait_until(&format!("{PUB}/{collection}/{name}"), waits_for, |o| {
                message(o).contains(waits_for)
            })
            .await;
        assert!(
            o["status"]["state"]
                .as_str()
                .unwrap_or_default()
                .ends_with("_STATE_PENDING"),
            "{o}"
        );
    }
    // The parent failed later: its child fails, naming it and why.
    let dies = t.wait("subnets", "dies", "SUBNET_STATE_FAILED").await;
    assert!(
        message(&dies).contains("VirtualNetwork 'doomed' is FAILED")
            && message(&dies).contains("injected permanent failure"),
        "{dies}"
    );
    // A workload on a FAILED subnet is refused, naming it; nothing is stored.
    t.post(
        &format!("{PUB}/compute_instances"),
        vm_body("on-dies", json!([{"subnet": "dies"}])),
    )
    .await
    .err(
        412,
        "FAILED_PRECONDITION",
        &[
            "spec.compute_network_attachments[0].subnet",
            "Subnet 'dies' is FAILED",
            "it cannot be used",
        ],
    );
    assert_eq!(t.count("compute_instances").await, 0);

    // A FAILED parent is refused at create time, naming it; nothing is stored.
    let before = (
        t.count("subnets").await,
        t.count("security_groups").await,
        t.count("nat_gateways").await,
    );
    t.post(
        &format!("{PUB}/subnets"),
        subnet_body("x", "broken", "10.0.1.0/24"),
    )
    .await
    .err(
        412,
        "FAILED_PRECONDITION",
        &[
            "spec.virtual_network",
            "VirtualNetwork 'broken' is FAILED",
            "injected permanent failure",
            "it cannot be used",
        ],
    );
    t.post(
        &format!("{PUB}/security_groups"),
        json!({"spec": {"virtual_network": "broken"}}),
    )
    .await
    .err(
        412,
        "FAILED_PRECONDITION",
        &["spec.virtual_network", "broken", "FAILED"],
    );
    let spare = t.allocated_eip("spare", "").await;
    t.post(
        &format!("{PUB}/nat_gateways"),
        json!({"spec": {"virtual_network": "broken", "external_ip": "spare"}}),
    )
    .await
    .err(
        412,
        "FAILED_PRECONDITION",
        &["spec.virtual_network", "broken", "FAILED"],
    );
    assert_eq!(
        before,
        (
            t.count("subnets").await,
            t.count("security_groups").await,
            t.count("nat_gateways").await,
        ),
        "refused creates store nothing"
    );
    ctl.stop().await;

    // The pending parents come through: their children proceed by themselves.
    s.restart().await;
    t.wait("virtual_networks", "slow", "VIRTUAL_NETWORK_STATE_READY")
        .await;
    t.wait("subnets", "waits", "SUBNET_STATE_READY").await;
    t.wait("security_groups", "waits", "SECURITY_GROUP_STATE_READY")
        .await;
    t.wait("external_ips", "pending-ip", "EXTERNAL_IP_STATE_ALLOCATED")
        .await;
    t.wait("nat_gateways", "waits", "NAT_GATEWAY_STATE_READY")
        .await;

    t.delete(&format!("{PUB}/virtual_networks/broken"))
        .await
        .ok();
    t.wait_gone(PUB, "virtual_networks", "broken").await;
    let _ = spare;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_groups() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    let sim = s.sim_fabric();
    t.ready_vn("net", "10.0.0.0/16").await;
    let path = format!("{PUB}/security_groups");
    let sg = |ingress: Value, egress: Value| json!({"metadata": {"name": "web"}, "spec": {"virtual_network": "net", "ingress": ingress, "egress": egress}});
    let tcp = |from: i64, to: i64| json!({"protocol": "PROTOCOL_TCP", "port_from": from, "port_to": to, "ipv4_cidr": "0.0.0.0/0"});

    for (ingress, egress, fragments) in [
        (
            json!([{"port_from": 22, "port_to": 22, "ipv4_cidr": "0.0.0.0/0"}]),
            json!([]),
            vec!["spec.ingress[0].protocol", "protocol is required"],
        ),
        (
            json!([{"protocol": "PROTOCOL_ICMP", "port_from": 1, "port_to": 1, "ipv4_cidr": "0.0.0.0/0"}]),
            json!([]),
            vec![
                "spec.ingress[0].port_from",
                "only allowed for TCP and UDP",
                "PROTOCOL_ICMP",
            ],
        ),
        (
            json!([{"protocol": "PROTOCOL_ALL", "port_to": 80, "ipv4_cidr": "0.0.0.0/0"}]),
            json!([]),
            vec!["spec.ingress[0]", "PROTOCOL_ALL"],
        ),
        (
            json!([tcp(0, 80)]),
            json!([]),
            vec!["spec.ingress[0].port_from", "required"],
        ),
        (
            json!([tcp(22, 70000)]),
            json!([]),
            vec!["spec.ingress[0].port_to", "70000", "1–65535"],
        ),
        (
            json!([tcp(-1, 22)]),
            json!([]),
            vec!["spec.ingress[0].port_from", "1–65535"],
        ),
        (
            json!([tcp(443, 80)]),
            json!([]),
            vec![
                "spec.ingress[0].port_from",
                "port_from 443 is greater than port_to 80",
            ],
        ),
        (
            json!([{"protocol": "PROTOCOL_TCP", "port_from": 22, "port_to": 22}]),
            json!([]),
            vec!["spec.ingress[0].ipv4_cidr", "peer CIDR is required"],
        ),
        (
            json!([{"protocol": "PROTOCOL_UDP", "ipv4_cidr": "0.0.0.0/0", "ipv6_cidr": "::/0"}]),
            json!([]),
            vec!["spec.ingress[0]", "only one"],
        ),
        (
            json!([{"protocol": "PROTOCOL_UDP", "ipv4_cidr": "1.2.3.4/40"}]),
            json!([]),
            vec!["spec.ingress[0].ipv4_cidr", "not a valid CIDR"],
        ),
        (
            json!([{"protocol": "PROTOCOL_UDP", "ipv4_cidr": "1.2.3.4/24"}]),
            json!([]),
            vec!["spec.ingress[0].ipv4_cidr", "host bits"],
        ),
        (
            json!([{"protocol": "PROTOCOL_UDP", "ipv6_cidr": "10.0.0.0/8"}]),
            json!([]),
            vec!["spec.ingress[0].ipv6_cidr", "expected IPv6"],
        ),
        (
            json!([{"protocol": "PROTOCOL_SCTP", "ipv4_cidr": "0.0.0.0/0"}]),
            json!([]),
            vec!["PROTOCOL_SCTP"],
        ),
        (
            json!([tcp(22, 22)]),
            json!([tcp(22, 22), {"protocol": "PROTOCOL_ICMP"}]),
            vec!["spec.egress[1].ipv4_cidr", "peer CIDR"],
        ),
    ] {
        t.post(&path, sg(ingress, egress))
            .await
            .err(400, "INVALID_ARGUMENT", &fragments);
    }
    t.post(&path, json!({"spec": {}})).await.err(
        400,
        "INVALID_ARGUMENT",
        &["spec.virtual_network", "required"],
    );
    assert_eq!(t.count("security_groups").await, 0);

    // A single port (port_to omitted) and a range; ICMP and ALL without ports; IPv6 peers.
    let created = t
        .create(
            "security_groups",
            sg(
                json!([{"protocol": "PROTOCOL_TCP", "port_from": 443, "ipv4_cidr": "0.0.0.0/0"}, tcp(8000, 8080), {"protocol": "PROTOCOL_ICMP", "ipv6_cidr": "::/0"}]),
                json!([{"protocol": "PROTOCOL_ALL", "ipv4_cidr": "0.0.0.0/0"}]),
            ),
        )
        .await;
    let sg_id = id(&created);
    t.wait("security_groups", &sg_id, "SECURITY_GROUP_STATE_READY")
        .await;
    let programmed = sim.security_group(&sg_id).await.expect("SG programmed");
    assert_eq!(programmed.ingress.len(), 3);
    assert_eq!(programmed.egress.len(), 1);

    // Rules are mutable and re-programmed; bad rules are refused and change nothing.
    let before = t.get(&format!("{path}/web")).await.ok();
    t.patch(
        &format!("{path}/web"),
        json!({"spec": {"ingress": [tcp(10, 5)]}}),
    )
    .await
    .err(
        400,
        "INVALID_ARGUMENT",
        &["spec.ingress[0].port_from", "greater than"],
    );
    assert_eq!(t.get(&format!("{path}/web")).await.ok(), before);
    assert_eq!(sim.security_group(&sg_id).await.unwrap(), programmed);
    let upd = t
        .patch(&format!("{path}/web"), json!({"spec": {"ingress": [{"protocol": "PROTOCOL_UDP", "port_from": 53, "port_to": 53, "ipv4_cidr": "10.0.0.0/8"}]}}))
        .await
        .ok();
    assert_eq!(upd["spec"]["ingress"].as_array().unwrap().len(), 1);
    assert_eq!(
        upd["spec"]["egress"], before["spec"]["egress"],
        "fields outside the body are kept"
    );
    let start = std::time::Instant::now();
    loop {
        let g = sim.security_group(&sg_id).await.unwrap();
        if g.ingress.len() == 1 {
            assert_eq!(g.ingress[0].port_from, Some(53));
            assert_eq!(g.ingress[0].cidr.to_string(), "10.0.0.0/8");
            assert_eq!(g.egress, programmed.egress);
            break;
        }
        assert!(start.elapsed() < WAIT, "rules were not re-applied: {g:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    t.wait("security_groups", "web", "SECURITY_GROUP_STATE_READY")
        .await;
    // Emptying a list with an explicit mask.
    let upd = t
        .patch(
            &format!("{path}/web?update_mask=spec.egress"),
            json!({"spec": {}}),
        )
        .await
        .ok();
    assert!(upd["spec"].get("egress").is_none(), "{upd}");
    assert_eq!(upd["spec"]["ingress"].as_array().unwrap().len(), 1);
    let start = std::time::Instant::now();
    while !sim.security_group(&sg_id).await.unwrap().egress.is_empty() {
        assert!(start.elapsed() < WAIT, "egress not cleared in the fabric");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The VN is immutable.
    t.ready_vn("other", "10.1.0.0/16").await;
    t.refuses_spec_change(&format!("{path}/web"), "virtual_network", json!("other"))
        .await;
    // The VN cannot go while the SG exists; the SG can.
    t.delete(&format!("{PUB}/virtual_networks/net")).await.err(
        412,
        "FAILED_PRECONDITION",
        &["SecurityGroup 'web'"],
    );
    t.delete(&format!("{path}/web")).await.ok();
    t.wait_gone(PUB, "security_groups", &sg_id).await;
    assert!(sim.security_group(&sg_id).await.is_none());
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_ips_and_nat_gateways() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    t.drop_defaults().await;
    let sim = s.sim_fabric();
    let vn = t.ready_vn("net", "10.0.0.0/16").await;
    t.ready_vn("net2", "10.0.0.0/16").await;
    let pool = |s: &TestServer| {
        let admin = s.admin.clone();
        async move {
            admin
                .get(&format!("{PRIV}/external_ip_pools/external-pool-1"))
                .await
                .ok()
        }
    };
    let p0 = pool(&s).await;

    // ExternalIP validation.
    let eips = format!("{PUB}/external_ips");
    t.post(&eips, json!({"spec": {"pool": "ghost"}})).await.err(
        404,
        "NOT_FOUND",
        &["spec.pool", "ghost", "does not exist"],
    );
    t.post(&eips, json!({"spec": {"ip_family": "IP_FAMILY_IPV6"}}))
        .await
        .err(
            429,
            "RESOURCE_EXHAUSTED",
            &["no available capacity in any READY pool for IPv6"],
        );
    t.post(
        &eips,
        json!({"spec": {"pool": "external-pool-1", "ip_family": "IP_FAMILY_IPV6"}}),
    )
    .await
    .err(
        400,
        "INVALID_ARGUMENT",
        &["spec.ip_family", "external-pool-1", "IPv4"],
    );
    t.post(&eips, json!({"spec": {"ip_family": 7}})).await.err(
        400,
        "INVALID_ARGUMENT",
        &["spec.ip_family"],
    );
    assert_eq!(t.count("external_ips").await, 0);
    assert_eq!(pool(&s).await, p0, "refused creates reserve nothing");

    // Allocation: by pool name and automatic.
    let ip1 = t
        .create(
            "external_ips",
            json!({"metadata": {"name": "ip1"}, "spec": {"pool": "external-pool-1"}}),
        )
        .await;
    assert_eq!(ip1["status"]["state"], "EXTERNAL_IP_STATE_PENDING");
    assert_eq!(
        counter(&pool(&s).await, "allocated"),
        1,
        "capacity reserved by the create itself"
    );
    let ip1 = t
        .wait("external_ips", "ip1", "EXTERNAL_IP_STATE_ALLOCATED")
        .await;
    let ip2 = t.allocated_eip("ip2", "").await;
    assert_eq!(ip2["spec"]["ip_family"], "IP_FAMILY_IPV4");
    assert_eq!(ip2["status"]["pool"], p0["id"]);
    assert_ne!(ip1["status"]["address"], ip2["status"]["address"]);
    assert!(
        sim.external_addresses()
            .await
            .iter()
            .any(|a| a.address.to_string() == ip1["status"]["address"])
    );
    assert_eq!(
        ip1["status"].get("attached"),
        None,
        "not attached yet: {ip1}"
    );
    t.refuses_spec_change(&format!("{eips}/ip1"), "pool", json!("other"))
        .await;

    // NATGateway: required fields, one per VN, one consumer per ExternalIP.
    let nats = format!("{PUB}/nat_gateways");
    t.post(&nats, json!({"spec": {"external_ip": "ip1"}}))
        .await
        .err(
            400,
            "INVALID_ARGUMENT",
            &["spec.virtual_network", "required"],
        );
    t.post(&nats, json!({"spec": {"virtual_network": "net"}}))
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.external_ip", "required"]);
    t.post(
        &nats,
        json!({"spec": {"virtual_network": "net", "external_ip": "nope"}}),
    )
    .await
    .err(404, "NOT_FOUND", &["spec.external_ip", "nope"]);
    let nat = t.create("nat_gateways", json!({"metadata": {"name": "nat"}, "spec": {"virtual_network": "net", "external_ip": "ip1"}})).await;
    let nat = t
        .wait("nat_gateways", &id(&nat), "NAT_GATEWAY_STATE_READY")
        .await;
    assert_eq!(nat["status"]["address"], ip1["status"]["address"]);
    let snat = sim.snat_rules().await;
    assert!(
        snat.iter()
            .any(|r| r.nat_gateway_id == id(&nat) && r.virtual_network_id == id(&vn)),
        "{snat:?}"
    );
    t.wait_until(&format!("{eips}/ip1"), "attached", |o| {
        o["status"]["attached"] == true
    })
    .await;
    t.post(&nats, json!({"metadata": {"name": "nat2"}, "spec": {"virtual_network": "net", "external_ip": "ip2"}})).await.err(
        409,
        "ALREADY_EXISTS",
        &["VirtualNetwork 'net' already has NATGateway 'nat'"],
    );
    t.post(&nats, json!({"metadata": {"name": "nat2"}, "spec": {"virtual_network": "net2", "external_ip": "ip1"}})).await.err(
        412,
        "FAILED_PRECONDITION",
        &["spec.external_ip", "ExternalIP 'ip1' is already attached to NATGateway 'nat'"],
    );
    assert_eq!(t.count("nat_gateways").await, 1);
    t.refuses_spec_change(&format!("{nats}/nat"), "external_ip", json!("ip2"))
        .await;

    // Deletion protection: the attached ExternalIP and the VN with its NAT gateway.
    t.delete(&format!("{eips}/ip1")).await.err(
        412,
        "FAILED_PRECONDITION",
        &["ExternalIP 'ip1' cannot be deleted", "NATGateway 'nat'"],
    );
    t.delete(&format!("{PUB}/virtual_networks/net")).await.err(
        412,
        "FAILED_PRECONDITION",
        &["NATGateway 'nat'"],
    );
    assert_eq!(
        t.get(&format!("{eips}/ip1")).await.ok()["status"]["state"],
        "EXTERNAL_IP_STATE_ALLOCATED"
    );

    // Tear down: NAT, then the address goes back to the pool.
    t.delete(&format!("{nats}/nat")).await.ok();
    t.wait_gone(PUB, "nat_gateways", &id(&nat)).await;
    assert!(
        sim.snat_rules()
            .await
            .iter()
            .all(|r| r.nat_gateway_id != id(&nat))
    );
    t.wait_until(&format!("{eips}/ip1"), "detached", |o| {
        o["status"]["attached"] != true
    })
    .await;
    // The freed address can serve another VN.
    let nat2 = t.create("nat_gateways", json!({"metadata": {"name": "nat2"}, "spec": {"virtual_network": "net2", "external_ip": "ip1"}})).await;
    t.wait("nat_gateways", &id(&nat2), "NAT_GATEWAY_STATE_READY")
        .await;
    t.delete(&format!("{nats}/nat2")).await.ok();
    t.wait_gone(PUB, "nat_gateways", &id(&nat2)).await;
    for ip in [&ip1, &ip2] {
        t.delete(&format!("{eips}/{}", id(ip))).await.ok();
        t.wait_gone(PUB, "external_ips", &id(ip)).await;
    }
    // Deleting an ExternalIP right after creating it (maybe before allocation) releases it.
    let quick = t
        .create("external_ips", json!({"metadata": {"name": "quick"}}))
        .await;
    t.delete(&format!("{eips}/quick")).await.ok();
    t.wait_gone(PUB, "external_ips", &id(&quick)).await;
    assert!(sim.external_addresses().await.is_empty());
    let p = pool(&s).await;
    assert_eq!(
        (counter(&p, "allocated"), counter(&p, "available")),
        (0, counter(&p, "total")),
        "{p}"
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_ip_attachments() {
    const GHOST: &str = "0190c0de-7a3b-7cc1-8f00-0123456789ab";
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    t.allocated_eip("ip", "").await;
    let path = format!("{PUB}/external_ip_attachments");
    // Invalid attachments.
    for (spec, fragments) in [
        (
            json!({"compute_instance": "vm"}),
            vec!["spec.external_ip", "required"],
        ),
        (
            json!({"external_ip": "ip"}),
            vec![
                "exactly one target of compute_instance, cluster, baremetal_instance",
                "none",
            ],
        ),
        (
            json!({"external_ip": "ip", "compute_instance": "vm", "cluster": "c"}),
            vec!["exactly one target", "compute_instance, cluster"],
        ),
        (
            json!({"external_ip": "ip", "cluster": "c"}),
            vec![
                "spec.target_endpoint",
                "required when the target is a cluster",
            ],
        ),
        (
            json!({"external_ip": "ip", "compute_instance": "vm", "target_endpoint": "EXTERNAL_IP_ATTACHMENT_ENDPOINT_API"}),
            vec!["spec.target_endpoint", "must be unset", "compute_instance"],
        ),
        (
            json!({"external_ip": "ip", "baremetal_instance": "bm", "target_endpoint": "EXTERNAL_IP_ATTACHMENT_ENDPOINT_INGRESS"}),
            vec!["spec.target_endpoint", "baremetal_instance"],
        ),
    ] {
        t.post(&path, json!({"spec": spec}))
            .await
            .err(400, "INVALID_ARGUMENT", &fragments);
    }
    // Missing referents.
    for (spec, fragments) in [
        (
            json!({"external_ip": "ghost", "compute_instance": "vm"}),
            vec!["spec.external_ip", "ghost", "does not exist"],
        ),
        // Every rule of the attachment passes; the target ids do not exist (a name that no
        // workload has is a forward reference, forward_refs.rs; workload targets are covered
        // in workloads.rs).
        (
            json!({"external_ip": "ip", "compute_instance": GHOST}),
            vec!["spec.compute_instance", "ComputeInstance", "does not exist"],
        ),
        (
            json!({"external_ip": "ip", "cluster": GHOST, "target_endpoint": "EXTERNAL_IP_ATTACHMENT_ENDPOINT_API"}),
            vec!["spec.cluster", "Cluster", "does not exist"],
        ),
        (
            json!({"external_ip": "ip", "baremetal_instance": GHOST}),
            vec![
                "spec.baremetal_instance",
                "BareMetalInstance",
                "does not exist",
            ],
        ),
    ] {
        t.post(&path, json!({"spec": spec}))
            .await
            .err(404, "NOT_FOUND", &fragments);
    }
    assert_eq!(t.count("external_ip_attachments").await, 0);
    assert_ne!(
        t.get(&format!("{PUB}/external_ips/ip")).await.ok()["status"]["attached"],
        true
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_immutability_locking_and_masks() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    let vn = t.ready_vn("net", "10.0.0.0/16").await;
    let sn = t.ready_subnet("a", "net", "10.0.1.0/24").await;
    let vns = format!("{PUB}/virtual_networks");

    let subnet_a = format!("{PUB}/subnets/a");
    for (path, field, value) in [
        (format!("{vns}/net"), "ipv4_cidr", json!("10.1.0.0/16")),
        (format!("{vns}/net"), "ipv6_cidr", json!("fd00::/48")),
        (format!("{vns}/net"), "network_class", json!("x")),
        (subnet_a.clone(), "ipv4_cidr", json!("10.0.1.0/25")),
        (subnet_a.clone(), "virtual_network", json!("other")),
        (subnet_a.clone(), "ipv6_cidr", json!("fd00::/64")),
    ] {
        t.refuses_spec_change(&path, field, value).await;
    }
    assert_eq!(
        t.get(&format!("{vns}/net")).await.ok(),
        vn,
        "refused updates change nothing"
    );
    assert_eq!(t.get(&format!("{PUB}/subnets/a")).await.ok(), sn);
    // Sending the unchanged value back is fine (a GET-modify-PATCH round trip).
    let mut round = sn.clone();
    round["metadata"]["labels"] = json!({"tier": "web"});
    let upd = t.patch(&format!("{PUB}/subnets/a"), round).await.ok();
    assert_eq!(upd["metadata"]["labels"]["tier"], "web");
    assert_eq!(upd["status"], sn["status"], "status is not client-writable");
    // Status sent by a client is ignored.
    let upd2 = t
        .patch(
            &format!("{PUB}/subnets/a"),
            json!({"status": {"state": "SUBNET_STATE_FAILED"}}),
        )
        .await
        .ok();
    assert_eq!(upd2["status"]["state"], "SUBNET_STATE_READY");

    // Optimistic locking.
    let v = upd2["metadata"]["version"].as_str().unwrap().to_string();
    let stale = (v.parse::<i64>().unwrap() - 1).to_string();
    t.patch(
        &format!("{PUB}/subnets/a?lock=true"),
        json!({"metadata": {"version": stale, "labels": {"tier": "db"}}}),
    )
    .await
    .err(409, "ABORTED", &["Subnet 'a'", "stale"]);
    t.patch(
        &format!("{PUB}/subnets/a?lock=true"),
        json!({"metadata": {"labels": {"tier": "db"}}}),
    )
    .await
    .err(400, "INVALID_ARGUMENT", &["metadata.version", "lock=true"]);
    t.patch(
        &format!("{PUB}/subnets/a?lock=maybe"),
        json!({"metadata": {"labels": {"tier": "db"}}}),
    )
    .await
    .err(400, "INVALID_ARGUMENT", &["lock"]);
    assert_eq!(
        t.get(&format!("{PUB}/subnets/a")).await.ok()["metadata"]["labels"]["tier"],
        "web"
    );
    let ok = t
        .patch(
            &format!("{PUB}/subnets/a?lock=true"),
            json!({"metadata": {"version": v, "labels": {"tier": "db"}}}),
        )
        .await
        .ok();
    assert_eq!(ok["metadata"]["labels"]["tier"], "db");
    assert_ne!(ok["metadata"]["version"], json!(v));
    // Without lock, a stale version is no obstacle (last writer wins).
    t.patch(
        &format!("{PUB}/subnets/a"),
        json!({"metadata": {"version": "1", "labels": {"tier": "app"}}}),
    )
    .await
    .ok();

    // update_mask (query and body field): only the masked paths change.
    let body = json!({"metadata": {"labels": {"k": "v"}, "annotations": {"note": "x"}}});
    let m = t
        .patch(
            &format!("{vns}/net?update_mask=metadata.annotations"),
            body.clone(),
        )
        .await
        .ok();
    assert_eq!(m["metadata"]["annotations"], json!({"note": "x"}));
    assert!(m["metadata"].get("labels").is_none(), "{m}");
    let mut with_mask = body.clone();
    with_mask["update_mask"] = json!("metadata.labels");
    with_mask["metadata"]["annotations"] = json!({"note": "changed"});
    let m = t.patch(&format!("{vns}/net"), with_mask).await.ok();
    assert_eq!(m["metadata"]["labels"], json!({"k": "v"}));
    assert_eq!(m["metadata"]["annotations"], json!({"note": "x"}));
    // A masked path that is empty in the body clears it.
    let m = t
        .patch(&format!("{vns}/net?update_mask=metadata.labels"), json!({}))
        .await
        .ok();
    assert!(m["metadata"].get("labels").is_none(), "{m}");
    // A mask naming an immutable field with a different value is refused; unknown paths too.
    t.patch(&format!("{vns}/net?update_mask=spec.ipv4_cidr"), json!({}))
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.ipv4_cidr", "immutable"]);
    t.patch(&format!("{vns}/net?update_mask=bogus.field"), json!({}))
        .await
        .err(400, "INVALID_ARGUMENT", &["bogus.field"]);
    // Label syntax is checked on update.
    t.patch(
        &format!("{vns}/net"),
        json!({"metadata": {"labels": {"bad key!": "v"}}}),
    )
    .await
    .err(400, "INVALID_ARGUMENT", &["metadata.labels"]);
    t.patch(
        &format!("{vns}/ghost"),
        json!({"metadata": {"labels": {"a": "b"}}}),
    )
    .await
    .err(404, "NOT_FOUND", &["ghost"]);
    // Metadata in an update is as strict as in a create: nothing is silently dropped.
    let before = t.get(&format!("{vns}/net")).await.ok();
    t.patch(
        &format!("{vns}/net"),
        json!({"metadata": {"labels": {"a": 1}}}),
    )
    .await
    .err(400, "INVALID_ARGUMENT", &["metadata.labels.a"]);
    t.patch(&format!("{vns}/net"), json!({"metadata": {"nmae": "x"}}))
        .await
        .err(400, "INVALID_ARGUMENT", &["metadata", "nmae"]);
    t.patch(&format!("{vns}/net"), json!({"metadata": "x"}))
        .await
        .err(400, "INVALID_ARGUMENT", &["metadata"]);
    assert_eq!(t.get(&format!("{vns}/net")).await.ok(), before);
    // Every immutable field of the kinds under test.
    t.refuses_spec_change(
        &format!("{vns}/net"),
        "capabilities",
        json!({"enable_ipv6": true}),
    )
    .await;
    let e = t.allocated_eip("ip", "").await;
    t.refuses_spec_change(
        &format!("{PUB}/external_ips/ip"),
        "ip_family",
        json!("IP_FAMILY_IPV6"),
    )
    .await;
    t.ready_vn("net2", "10.1.0.0/16").await;
    t.create("nat_gateways", json!({"metadata": {"name": "nat"}, "spec": {"virtual_network": "net", "external_ip": "ip"}})).await;
    t.refuses_spec_change(
        &format!("{PUB}/nat_gateways/nat"),
        "virtual_network",
        json!("net2"),
    )
    .await;
    let nat = t
        .patch(
            &format!("{PUB}/nat_gateways/nat"),
            json!({"metadata": {"labels": {"x": "y"}}}),
        )
        .await
        .ok();
    assert_eq!(nat["spec"]["external_ip"], e["id"]);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_hygiene() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    t.ready_vn("net", "10.0.0.0/16").await;
    let vns = format!("{PUB}/virtual_networks");

    // Duplicate names.
    t.post(
        &vns,
        json!({"metadata": {"name": "net"}, "spec": {"ipv4_cidr": "10.1.0.0/16"}}),
    )
    .await
    .err(
        409,
        "ALREADY_EXISTS",
        &["VirtualNetwork named 'net' already exists"],
    );
    t.create(
        "virtual_networks",
        json!({"metadata": {"name": "other"}, "spec": {"ipv4_cidr": "10.1.0.0/16"}}),
    )
    .await;
    t.patch(
        &format!("{vns}/other"),
        json!({"metadata": {"name": "net"}}),
    )
    .await
    .err(409, "ALREADY_EXISTS", &["'net'"]);
    assert_eq!(t.count("virtual_networks").await, 2);
    // Names: DNS labels only.
    for bad in ["Net", "-net", "net_1", &"n".repeat(64)] {
        t.post(
            &vns,
            json!({"metadata": {"name": bad}, "spec": {"ipv4_cidr": "10.2.0.0/16"}}),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["metadata.name"]);
    }
    t.post(&vns, json!({"metadata": {"labels": {"k": "v".repeat(64)}}, "spec": {"ipv4_cidr": "10.2.0.0/16"}})).await.err(
        400,
        "INVALID_ARGUMENT",
        &["metadata.labels"],
    );

    // Unknown fields are rejected, wherever they are.
    t.post(
        &vns,
        json!({"spec": {"ipv4_cidr": "10.2.0.0/16", "colour": "red"}}),
    )
    .await
    .err(400, "INVALID_ARGUMENT", &["colour"]);
    t.post(&vns, json!({"spek": {"ipv4_cidr": "10.2.0.0/16"}}))
        .await
        .err(400, "INVALID_ARGUMENT", &["spek"]);
    t.post(
        &vns,
        json!({"metadata": {"nmae": "x"}, "spec": {"ipv4_cidr": "10.2.0.0/16"}}),
    )
    .await
    .err(400, "INVALID_ARGUMENT", &["nmae"]);
    t.post(&vns, json!({"spec": {"ipv4_cidr": 10}})).await.err(
        400,
        "INVALID_ARGUMENT",
        &["spec.ipv4_cidr", "VirtualNetwork"],
    );
    t.patch(&format!("{vns}/net"), json!({"spec": {"colour": "red"}}))
        .await
        .err(400, "INVALID_ARGUMENT", &["colour"]);

    // Malformed JSON, empty body, not an object: a clean 400 with the JSON error body.
    for body in [&b"{\"spec\": {"[..], b"not json", b"", b"[1,2]", b"\"str\""] {
        let r = t
            .send_raw(reqwest::Method::POST, &vns, Some(body.to_vec()))
            .await;
        r.err(400, "INVALID_ARGUMENT", &[]);
    }
    let r = t
        .send_raw(reqwest::Method::POST, &vns, Some(b"{\"spec\": {".to_vec()))
        .await;
    r.err(400, "INVALID_ARGUMENT", &["malformed JSON"]);
    let r = t
        .send_raw(
            reqwest::Method::PATCH,
            &format!("{vns}/net"),
            Some(b"{oops".to_vec()),
        )
        .await;
    r.err(400, "INVALID_ARGUMENT", &["malformed JSON"]);

    // Over the body limit: 413, with the JSON error body.
    let big = json!({"metadata": {"annotations": {"blob": "x".repeat(2 * 1024 * 1024)}}, "spec": {"ipv4_cidr": "10.3.0.0/16"}});
    let r = t.post(&vns, big.clone()).await;
    assert_eq!(r.status, 413, "{}", &r.text[..r.text.len().min(200)]);
    r.err(
        413,
        "RESOURCE_EXHAUSTED",
        &["request body is larger than the limit"],
    );
    let r = t.patch(&format!("{vns}/net"), big).await;
    assert_eq!(r.status, 413);
    assert_eq!(t.count("virtual_networks").await, 2);

    // Unknown collections and routes.
    t.get(&format!("{PUB}/widgets"))
        .await
        .err(404, "NOT_FOUND", &["widgets"]);
    t.post(&format!("{PUB}/widgets"), json!({}))
        .await
        .err(404, "NOT_FOUND", &["widgets"]);
    let r = t.get("/api/nothing/here").await;
    assert_eq!(r.status, 404);
    s.finish().await;
}
