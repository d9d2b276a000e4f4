//! The reachability explainer end to end (docs/reachability.md): REST on both surfaces and
//! gRPC, over objects created through the API on the sim fabric.

use osac_proto::v1 as pb;
use serde_json::{Value, json};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Request, Status};

use crate::common::*;

const EXPLAIN: &str = "/api/fulfillment/v1/reachability:explain";
const EXPLAIN_PRIVATE: &str = "/api/private/v1/reachability:explain";

/// Tenant `acme`: VN `net` (subnets `a`, `b`), VN `other` (subnet `o`); SG `web` (tcp 443
/// from anywhere), SG `db` (tcp 5432 from 10.0.1.0/24), both allowing every egress; VMs `vm1`, `vm2` (a, web), `db1`
/// (b, db), `far` (o); `vm1` attached at ExternalIP `pub`.
async fn tenant(s: &TestServer) -> Api {
    let t = s.tenant("acme").await;
    t.ready_vn("net", "10.0.0.0/16").await;
    t.ready_vn("other", "10.1.0.0/16").await;
    t.ready_subnet("a", "net", "10.0.1.0/24").await;
    t.ready_subnet("b", "net", "10.0.2.0/24").await;
    t.ready_subnet("o", "other", "10.1.1.0/24").await;
    for (name, rule) in [
        (
            "web",
            json!({"protocol": "PROTOCOL_TCP", "port_from": 443, "ipv4_cidr": "0.0.0.0/0"}),
        ),
        (
            "db",
            json!({"protocol": "PROTOCOL_TCP", "port_from": 5432, "ipv4_cidr": "10.0.1.0/24"}),
        ),
    ] {
        let net = "net";
        let sg = t
            .create(
                "security_groups",
                json!({"metadata": {"name": name}, "spec": {"virtual_network": net, "ingress": [rule], "egress": [{"protocol": "PROTOCOL_ALL", "ipv4_cidr": "0.0.0.0/0"}]}}),
            )
            .await;
        t.wait("security_groups", &id(&sg), "SECURITY_GROUP_STATE_READY")
            .await;
    }
    for (name, subnet, sgs) in [
        ("vm1", "a", json!(["web"])),
        ("vm2", "a", json!(["web"])),
        ("db1", "b", json!(["db"])),
        ("far", "o", json!([])),
    ] {
        t.create_running_vm(vm_body(
            name,
            json!([{"subnet": subnet, "security_groups": sgs}]),
        ))
        .await;
    }
    t.allocated_eip("pub", "").await;
    let a = t
        .create(
            "external_ip_attachments",
            json!({"metadata": {"name": "a1"}, "spec": {"external_ip": "pub", "compute_instance": "vm1"}}),
        )
        .await;
    t.wait(
        "external_ip_attachments",
        &id(&a),
        "EXTERNAL_IP_ATTACHMENT_STATE_READY",
    )
    .await;
    t
}

fn vm(name: &str) -> Value {
    json!({"compute_instance": name})
}

fn ask(from: Value, to: Value, protocol: &str, port: u32) -> Value {
    json!({"source": from, "destination": to, "protocol": protocol, "port": port})
}

/// Asks the public explainer `question`, asserting a 200.
async fn explain(t: &Api, question: Value) -> Value {
    t.post(EXPLAIN, question).await.ok()
}

/// The first hop of `kind` in an explanation.
fn hop<'a>(r: &'a Value, kind: &str) -> Option<&'a Value> {
    r["hops"].as_array()?.iter().find(|h| h["kind"] == kind)
}

async fn address(t: &Api, name: &str) -> String {
    let v = t.get(&format!("{PUB}/compute_instances/{name}")).await.ok();
    v["status"]["internal_ip_address"]
        .as_str()
        .expect("address")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explains_security_groups_vns_and_external_paths_over_rest() {
    let s = TestServer::sqlite().await;
    let t = tenant(&s).await;
    let vm1 = address(&t, "vm1").await;

    let r = explain(&t, ask(vm("vm1"), vm("vm2"), "PROTOCOL_TCP", 443)).await;
    assert_eq!(r["verdict"], "REACHABILITY_VERDICT_REACHABLE", "{r}");
    assert_eq!(
        r["deciding"],
        "SecurityGroup 'web' ingress rule 1: tcp 443 from 0.0.0.0/0"
    );
    assert_eq!(r["deciding_object"]["name"], "web");
    assert_eq!(r["deciding_rule_index"], 1);
    assert_eq!(r["hops"][0]["source_address"], vm1.as_str());

    let r = explain(&t, ask(vm("vm1"), vm("vm2"), "PROTOCOL_TCP", 8080)).await;
    assert_eq!(r["verdict"], "REACHABILITY_VERDICT_BLOCKED", "{r}");
    assert_eq!(
        r["deciding"],
        format!("no ingress rule of SecurityGroups 'web' allows tcp/8080 from {vm1}")
    );

    let r = explain(&t, ask(vm("vm1"), vm("db1"), "PROTOCOL_TCP", 5432)).await;
    assert_eq!(r["verdict"], "REACHABILITY_VERDICT_REACHABLE", "{r}");
    assert!(hop(&r, "router").is_some(), "{r}");

    let r = explain(&t, ask(vm("vm1"), vm("far"), "PROTOCOL_ICMP", 0)).await;
    assert_eq!(r["verdict"], "REACHABILITY_VERDICT_BLOCKED", "{r}");
    assert!(
        r["deciding"]
            .as_str()
            .unwrap()
            .starts_with("different VirtualNetworks"),
        "{r}"
    );

    // Inbound through the attachment, outbound through the tenant's default NAT gateway.
    let r = explain(
        &t,
        ask(json!({"internet": true}), vm("vm1"), "PROTOCOL_TCP", 443),
    )
    .await;
    assert_eq!(r["verdict"], "REACHABILITY_VERDICT_REACHABLE", "{r}");
    assert_eq!(
        hop(&r, "dnat").expect("a dnat hop")["destination_address"],
        vm1.as_str()
    );
    let r = explain(
        &t,
        ask(json!({"internet": true}), vm("vm2"), "PROTOCOL_TCP", 443),
    )
    .await;
    assert_eq!(
        r["deciding"],
        "no ExternalIPAttachment makes ComputeInstance 'vm2' reachable from the internet"
    );

    let nat = t.get(&format!("{PUB}/nat_gateways/default")).await.ok();
    t.create_running_vm(vm_body(
        "out",
        json!([{"subnet": "default-ipv4", "security_groups": ["default"]}]),
    ))
    .await;
    let r = explain(
        &t,
        ask(vm("out"), json!({"internet": true}), "PROTOCOL_UDP", 53),
    )
    .await;
    assert_eq!(r["verdict"], "REACHABILITY_VERDICT_REACHABLE", "{r}");
    assert_eq!(
        hop(&r, "snat").expect("a snat hop")["source_address"],
        nat["status"]["address"]
    );

    // Bad input names the field.
    let e = t
        .post(EXPLAIN, ask(vm("vm1"), vm("vm2"), "PROTOCOL_TCP", 0))
        .await;
    e.err(400, "INVALID_ARGUMENT", &["port"]);
    let e = t
        .post(
            EXPLAIN,
            ask(
                vm("vm1"),
                json!({"address": "not-an-ip"}),
                "PROTOCOL_TCP",
                1,
            ),
        )
        .await;
    e.err(400, "INVALID_ARGUMENT", &["destination.address"]);
    let e = t
        .post(EXPLAIN, ask(vm("vm1"), vm("vm2"), "PROTOCOL_ALL", 0))
        .await;
    e.err(400, "INVALID_ARGUMENT", &["protocol"]);
    let e = t
        .post(EXPLAIN, ask(vm("vm1"), vm("ghost"), "PROTOCOL_TCP", 1))
        .await;
    e.err(404, "NOT_FOUND", &["destination.compute_instance", "ghost"]);

    // The provider names the tenant on the private API, and must.
    let mut body = ask(vm("vm1"), vm("vm2"), "PROTOCOL_TCP", 443);
    s.admin
        .post(EXPLAIN_PRIVATE, body.clone())
        .await
        .err(400, "INVALID_ARGUMENT", &["tenant"]);
    body["tenant"] = json!("acme");
    let r = s.admin.post(EXPLAIN_PRIVATE, body).await.ok();
    assert_eq!(r["verdict"], "REACHABILITY_VERDICT_REACHABLE", "{r}");
}

/// The hosting cluster the sim k8s manager places a VM on (the controllers' stable choice).
async fn hosting_cluster(t: &Api, name: &str) -> String {
    let vm = id(&t.get(&format!("{PUB}/compute_instances/{name}")).await.ok());
    let clusters = osac_backends::registration::DEFAULT_SIM_HOSTING_CLUSTERS.map(String::from);
    osac_controller::hosting_cluster_for(&vm, &clusters).expect("a hosting cluster")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_follow_writes_and_hosting_clusters() {
    let s = TestServer::sqlite().await;
    let t = tenant(&s).await;
    let question = ask(vm("vm1"), vm("vm2"), "PROTOCOL_TCP", 443);
    let r = explain(&t, question.clone()).await;
    assert_eq!(r["verdict"], "REACHABILITY_VERDICT_REACHABLE", "{r}");

    // The answer right after a write reflects it (the tenant's network is kept between
    // questions, and must not be answered from the copy before the write).
    t.patch(
        &format!("{PUB}/security_groups/web"),
        json!({"spec": {"ingress": [{"protocol": "PROTOCOL_TCP", "port_from": 8443, "ipv4_cidr": "0.0.0.0/0"}]}}),
    )
    .await
    .ok();
    let r = explain(&t, question).await;
    assert_eq!(r["verdict"], "REACHABILITY_VERDICT_BLOCKED", "{r}");
    let r = explain(&t, ask(vm("vm1"), vm("vm2"), "PROTOCOL_TCP", 8443)).await;
    assert_eq!(r["verdict"], "REACHABILITY_VERDICT_REACHABLE", "{r}");

    // A VM reaching vm1 at its ExternalIP (hairpin through the router) from the same subnet:
    // reachable whether both VMs share a hosting cluster's overlay link into the subnet or
    // not (the router's overlay port hairpins), and so is vm1 itself.
    let public = t.get(&format!("{PUB}/external_ips/pub")).await.ok()["status"]["address"]
        .as_str()
        .expect("address")
        .to_string();
    let home = hosting_cluster(&t, "vm1").await;
    let (mut same, mut other) = (false, false);
    for n in 0..16 {
        if same && other {
            break;
        }
        let name = format!("peer{n}");
        t.create_running_vm(vm_body(
            &name,
            json!([{"subnet": "a", "security_groups": ["web"]}]),
        ))
        .await;
        let shares = hosting_cluster(&t, &name).await == home;
        let r = explain(
            &t,
            ask(vm(&name), json!({"address": public}), "PROTOCOL_TCP", 8443),
        )
        .await;
        assert_eq!(
            r["verdict"], "REACHABILITY_VERDICT_REACHABLE",
            "{name} shares vm1's hosting cluster: {shares}; {r}"
        );
        same |= shares;
        other |= !shares;
    }
    assert!(same && other, "both placements were tried");
    let r = explain(
        &t,
        ask(vm("vm1"), json!({"address": public}), "PROTOCOL_TCP", 8443),
    )
    .await;
    assert_eq!(
        r["verdict"], "REACHABILITY_VERDICT_REACHABLE",
        "itself: {r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_workload_is_not_found() {
    let s = TestServer::sqlite().await;
    let t = tenant(&s).await;
    let victim = id(&t.get(&format!("{PUB}/compute_instances/vm1")).await.ok());
    let evil = s.tenant("evil").await;
    evil.running_vm("mine", "default-ipv4").await;
    for body in [
        ask(vm("mine"), vm(&victim), "PROTOCOL_TCP", 443),
        ask(vm(&victim), vm("mine"), "PROTOCOL_TCP", 443),
        ask(json!({"internet": true}), vm(&victim), "PROTOCOL_TCP", 443),
    ] {
        evil.post(EXPLAIN, body)
            .await
            .err(404, "NOT_FOUND", &[&victim]);
    }
    // Names resolve in the caller's tenant: acme's vm1 is not evil's.
    evil.post(EXPLAIN, ask(vm("mine"), vm("vm1"), "PROTOCOL_TCP", 443))
        .await
        .err(404, "NOT_FOUND", &["vm1"]);
}

#[derive(Clone)]
struct Bearer(Option<String>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(t) = &self.0 {
            req.metadata_mut().insert(
                "authorization",
                format!("Bearer {t}").parse().expect("header"),
            );
        }
        Ok(req)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explains_over_grpc() {
    let s = TestServer::sqlite().await;
    let t = tenant(&s).await;
    let ch = Channel::from_shared(s.url())
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let mut client: pb::reachability_client::ReachabilityClient<
        InterceptedService<Channel, Bearer>,
    > = pb::reachability_client::ReachabilityClient::with_interceptor(ch, Bearer(t.token.clone()));
    let end = |name: &str| {
        Some(pb::ReachabilityEndpoint {
            endpoint: Some(pb::reachability_endpoint::Endpoint::ComputeInstance(
                name.into(),
            )),
            ..Default::default()
        })
    };
    let req = |to: &str, port: u32| pb::ExplainReachabilityRequest {
        source: end("vm1"),
        destination: end(to),
        protocol: pb::Protocol::Tcp as i32,
        port,
        tenant: String::new(),
    };
    let r = client
        .explain(req("db1", 5432))
        .await
        .expect("explain")
        .into_inner();
    assert_eq!(r.verdict, pb::ReachabilityVerdict::Reachable as i32);
    assert_eq!(r.deciding_object.expect("object").name, "db");
    let r = client
        .explain(req("db1", 22))
        .await
        .expect("explain")
        .into_inner();
    assert_eq!(r.verdict, pb::ReachabilityVerdict::Blocked as i32);
    let e = client.explain(req("ghost", 22)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
    let e = client.explain(req("db1", 0)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("port"), "{}", e.message());
}

/// A hostile tenant-user empties its VM's security groups to open it to the internet: a port
/// without groups is closed (only DHCP and neighbour discovery/ARP pass), so the explainer
/// answers BLOCKED both ways, naming the VM. Mutation-checked: with the explainer treating a
/// group-less port as unfiltered (the old rule), internet → vm1 tcp/5432 turned REACHABLE and
/// this test failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_user_emptying_its_groups_closes_the_port() {
    let s = TestServer::sqlite().await;
    let t = tenant(&s).await;
    let user = s.client_for("acme", "tenant-user").await;
    let inbound = ask(json!({"internet": true}), vm("vm1"), "PROTOCOL_TCP", 5432);
    let r = explain(&t, inbound.clone()).await;
    assert_eq!(r["verdict"], "REACHABILITY_VERDICT_BLOCKED", "{r}");

    let path = format!("{PUB}/compute_instances/vm1");
    let mut atts = user.get(&path).await.ok()["spec"]["compute_network_attachments"].clone();
    atts[0]["security_groups"] = json!([]);
    let patched = user
        .patch(
            &path,
            json!({"spec": {"compute_network_attachments": atts}}),
        )
        .await
        .ok();
    assert_eq!(
        patched["spec"]["compute_network_attachments"][0]
            .get("security_groups")
            .cloned()
            .unwrap_or(json!([])),
        json!([]),
        "{patched}"
    );

    for (question, dir) in [
        (inbound, "ingress tcp/5432"),
        (
            ask(vm("vm1"), vm("vm2"), "PROTOCOL_TCP", 443),
            "egress tcp/443",
        ),
        (
            ask(vm("vm1"), json!({"internet": true}), "PROTOCOL_UDP", 53),
            "egress udp/53",
        ),
    ] {
        let r = explain(&user, question).await;
        assert_eq!(r["verdict"], "REACHABILITY_VERDICT_BLOCKED", "{r}");
        let deciding = r["deciding"].as_str().unwrap_or_default();
        assert!(
            deciding.contains("has no security groups: a port without groups is closed")
                && deciding.ends_with(&format!("so no {dir} passes")),
            "{r}"
        );
        assert_eq!(r["deciding_object"]["name"], "vm1", "{r}");
    }
    // The tenant-admin opens it again by attaching a group that allows it.
    t.patch(
        &format!("{PUB}/security_groups/db"),
        json!({"spec": {"ingress": [{"protocol": "PROTOCOL_TCP", "port_from": 5432, "ipv4_cidr": "0.0.0.0/0"}]}}),
    )
    .await
    .ok();
    atts[0]["security_groups"] = json!(["db"]);
    t.patch(
        &path,
        json!({"spec": {"compute_network_attachments": atts}}),
    )
    .await
    .ok();
    let r = explain(
        &t,
        ask(json!({"internet": true}), vm("vm1"), "PROTOCOL_TCP", 5432),
    )
    .await;
    assert_eq!(r["verdict"], "REACHABILITY_VERDICT_REACHABLE", "{r}");
    s.finish().await;
}
