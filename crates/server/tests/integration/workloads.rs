//! API rules of the workload kinds (docs/workloads.md): what a create needs, what
//! is stored (ids and resolved defaults), what an update may change, what deletes they block;
//! ExternalIPAttachment targets. Every refused request leaves nothing behind.

use serde_json::{Value, json};

use crate::common::*;

/// Tenant `acme` with VN `net` (subnets `a`, `b`, SGs `web`, `db`), VN `net2` (subnet `c`,
/// SG `web2`); tenant `other` with subnet `theirs` and SG `their-sg`. Returns (acme, other).
async fn setup(s: &TestServer) -> (Api, Api) {
    let t = s.tenant("acme").await;
    t.ready_vn("net", "10.0.0.0/16").await;
    t.ready_subnet("a", "net", "10.0.1.0/24").await;
    t.ready_subnet("b", "net", "10.0.2.0/24").await;
    t.ready_sg("web", "net").await;
    t.ready_sg("db", "net").await;
    t.ready_vn("net2", "10.1.0.0/16").await;
    t.ready_subnet("c", "net2", "10.1.1.0/24").await;
    t.ready_sg("web2", "net2").await;
    let o = s.tenant("other").await;
    o.ready_vn("net", "10.0.0.0/16").await;
    o.ready_subnet("theirs", "net", "10.0.1.0/24").await;
    o.ready_sg("their-sg", "net").await;
    (t, o)
}

fn code_name(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        404 => "NOT_FOUND",
        409 => "ALREADY_EXISTS",
        _ => "FAILED_PRECONDITION",
    }
}

/// Posts every case to `collection` and checks status, code and message fragments.
async fn refused(t: &Api, collection: &str, cases: Vec<(Value, u16, Vec<&str>)>) {
    for (body, status, fragments) in cases {
        let r = t.post(&format!("{PUB}/{collection}"), body.clone()).await;
        assert_eq!(
            r.status, status,
            "{collection} {body}: expected {status}, got {}",
            r.text
        );
        r.err(status, code_name(status), &fragments);
    }
}

async fn lookup(t: &Api, collection: &str, name: &str) -> String {
    id(&t.get(&format!("{PUB}/{collection}/{name}")).await.ok())
}

/// Creates each HostType body through the private API.
async fn add_host_types(s: &TestServer, bodies: impl IntoIterator<Item = Value>) {
    for body in bodies {
        s.admin.post(&format!("{PRIV}/host_types"), body).await.ok();
    }
}

/// A NetworkClass without a k8s manager, a VN of it (`bmnet`) and a subnet (`bm-a`).
async fn bm_only_network(s: &TestServer, t: &Api) {
    let class = json!({
        "metadata": {"name": "bm-only"}, "title": "bare metal only", "fabric_manager": "sim-fabric",
        "spec": {"defaults": {
            "virtual_network_ipv4_cidr": "10.0.0.0/16", "subnet_ipv4_cidr": "10.0.1.0/24",
            "ingress_rules": [], "egress_rules": [], "enable_nat_gateway": false
        }}
    });
    s.admin
        .post(&format!("{PRIV}/network_classes"), class)
        .await
        .ok();
    s.admin
        .wait_for_state(
            PRIV,
            "network_classes",
            "bm-only",
            "NETWORK_CLASS_STATE_READY",
        )
        .await;
    let vn = t
        .create(
            "virtual_networks",
            json!({"metadata": {"name": "bmnet"}, "spec": {"ipv4_cidr": "10.5.0.0/16", "network_class": "bm-only"}}),
        )
        .await;
    t.wait("virtual_networks", &id(&vn), "VIRTUAL_NETWORK_STATE_READY")
        .await;
    t.ready_subnet("bm-a", "bmnet", "10.5.1.0/24").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compute_instance_rules() {
    let mut s = TestServer::sqlite().await;
    let (t, o) = setup(&s).await;
    let their_subnet = lookup(&o, "subnets", "theirs").await;
    let their_sg = lookup(&o, "security_groups", "their-sg").await;
    let web = lookup(&t, "security_groups", "web").await;
    let f = "spec.compute_network_attachments";
    let vm = |atts: Value| vm_body("vm", atts);
    refused(
        &t,
        "compute_instances",
        vec![
            (
                json!({"spec": {"compute_network_attachments": [{"subnet": "a"}], "network_attachments": [{"subnet": "b"}]}}),
                400,
                vec!["spec.network_attachments", "not both"],
            ),
            (
                vm(json!([{"subnet": ""}])),
                400,
                vec!["spec.compute_network_attachments[0].subnet", "required"],
            ),
            (
                vm(json!([{"subnet": "ghost"}])),
                404,
                vec!["spec.compute_network_attachments[0].subnet", "Subnet 'ghost' does not exist"],
            ),
            (
                vm(json!([{"subnet": their_subnet}])),
                404,
                vec!["spec.compute_network_attachments[0].subnet", "does not exist"],
            ),
            (
                vm(json!([{"subnet": "theirs"}])),
                404,
                vec!["Subnet 'theirs' does not exist"],
            ),
            (
                vm(json!([{"subnet": "a"}, {"subnet": "b"}])),
                400,
                vec![f, "exactly one must be primary", "got 0 of 2"],
            ),
            (
                vm(json!([{"subnet": "a", "primary": true}, {"subnet": "b", "primary": true}])),
                400,
                vec![f, "exactly one must be primary", "got 2 of 2"],
            ),
            (
                vm(json!([{"subnet": "a", "primary": true}, {"subnet": "c"}])),
                400,
                vec![
                    "spec.compute_network_attachments[1].subnet",
                    "Subnet 'c' is in VirtualNetwork 'net2'",
                    "spec.compute_network_attachments[0].subnet is in VirtualNetwork 'net'",
                    "one VirtualNetwork",
                ],
            ),
            (
                vm(json!([{"subnet": "a", "security_groups": ["web2"]}])),
                400,
                vec![
                    "spec.compute_network_attachments[0].security_groups[0]",
                    "SecurityGroup 'web2' belongs to VirtualNetwork 'net2'",
                    "only use security groups of its VirtualNetwork",
                ],
            ),
            (
                vm(json!([{"subnet": "a", "security_groups": ["web", "ghost"]}])),
                404,
                vec![
                    "spec.compute_network_attachments[0].security_groups[1]",
                    "SecurityGroup 'ghost' does not exist",
                ],
            ),
            (
                vm(json!([{"subnet": "a", "security_groups": [their_sg]}])),
                404,
                vec!["security_groups[0]", "does not exist"],
            ),
            (
                vm(json!([{"subnet": "a", "security_groups": ["web", web]}])),
                400,
                vec!["security_groups[1]", "SecurityGroup 'web' is listed twice"],
            ),
            (
                vm(json!([{"subnet": "a", "security_groups": ["web", "web"]}])),
                400,
                vec!["security_groups[1]", "listed twice"],
            ),
            (
                vm(json!([{"subnet": "a", "interface": "eth0"}])),
                400,
                vec!["interface"],
            ),
        ],
    )
    .await;
    assert_eq!(t.count("compute_instances").await, 0);

    // What is stored: ids, the primary flag; the deprecated form converted.
    let (a, b) = (
        lookup(&t, "subnets", "a").await,
        lookup(&t, "subnets", "b").await,
    );
    let one = t
        .create(
            "compute_instances",
            vm_body("one", json!([{"subnet": "a", "security_groups": ["web"]}])),
        )
        .await;
    assert_eq!(
        one["spec"]["compute_network_attachments"],
        json!([{"subnet": a, "security_groups": [web], "primary": true}])
    );
    assert_eq!(one["status"]["state"], "COMPUTE_INSTANCE_STATE_STARTING");
    assert_eq!(one["metadata"]["tenant"], "acme");
    let private = s
        .admin
        .get(&format!("{PUB}/compute_instances/{}", id(&one)))
        .await
        .ok();
    assert_eq!(private["id"], one["id"], "the provider sees every tenant");
    let old = t
        .create(
            "compute_instances",
            json!({"metadata": {"name": "old"}, "spec": {"network_attachments": [{"subnet": "b"}, {"subnet": "a", "security_groups": ["web"]}]}}),
        )
        .await;
    assert_eq!(
        old["spec"]["compute_network_attachments"],
        json!([{"subnet": b, "primary": true}, {"subnet": a, "security_groups": [web]}])
    );
    assert!(old["spec"].get("network_attachments").is_none(), "{old}");
    let two = t
        .create(
            "compute_instances",
            vm_body(
                "two",
                json!([{"subnet": a}, {"subnet": "b", "primary": true}]),
            ),
        )
        .await;
    assert_eq!(
        two["spec"]["compute_network_attachments"],
        json!([{"subnet": a}, {"subnet": b, "primary": true}])
    );
    t.post(
        &format!("{PUB}/compute_instances"),
        vm_body("two", json!([{"subnet": "a"}])),
    )
    .await
    .err(409, "ALREADY_EXISTS", &["two"]);
    // A tenant-user runs workloads on the admin's networks (and reads everything).
    let user = s.client_for("acme", "tenant-user").await;
    let u = user.create_vm("u", "a").await;
    assert_eq!(user.count("compute_instances").await, 4);
    user.delete(&format!("{PUB}/compute_instances/u"))
        .await
        .ok();
    user.wait_gone(PUB, "compute_instances", &id(&u)).await;
    assert_eq!(user.count("compute_instances").await, 3);
    assert_eq!(o.count("compute_instances").await, 0);

    // BM-only deployment: no VMs.
    bm_only_network(&s, &t).await;
    t.post(
        &format!("{PUB}/compute_instances"),
        vm_body("vm", json!([{"subnet": "bm-a"}])),
    )
    .await
    .err(
        412,
        "FAILED_PRECONDITION",
        &[
            "BM-only deployment: this NetworkClass has no k8s manager, so virtual machines are not available",
            "NetworkClass 'bm-only'",
        ],
    );

    // Subnets and security groups still being provisioned are accepted (the workload waits in
    // its first phase); one being deleted is refused.
    t.ready_subnet("gone", "net", "10.0.4.0/24").await;
    s.pause().await;
    t.create(
        "subnets",
        json!({"metadata": {"name": "p"}, "spec": {"virtual_network": "net", "ipv4_cidr": "10.0.3.0/24"}}),
    )
    .await;
    t.create(
        "security_groups",
        json!({"metadata": {"name": "psg"}, "spec": {"virtual_network": "net"}}),
    )
    .await;
    t.delete(&format!("{PUB}/subnets/gone")).await.ok();
    let mut waiting =
        vm(json!([{"subnet": "p"}, {"subnet": "a", "security_groups": ["psg"], "primary": true}]));
    waiting["metadata"] = json!({"name": "waiting"});
    let accepted = t.create("compute_instances", waiting).await;
    assert_eq!(
        accepted["status"]["state"], "COMPUTE_INSTANCE_STATE_STARTING",
        "{accepted}"
    );
    refused(
        &t,
        "compute_instances",
        vec![(
            vm(json!([{"subnet": "gone"}])),
            412,
            vec![
                "spec.compute_network_attachments[0].subnet",
                "Subnet 'gone' is being deleted",
            ],
        )],
    )
    .await;
    assert_eq!(t.count("compute_instances").await, 4);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baremetal_instance_rules() {
    let s = TestServer::sqlite().await;
    let (t, o) = setup(&s).await;
    let their_subnet = lookup(&o, "subnets", "theirs").await;
    add_host_types(
        &s,
        [
            json!({"metadata": {"name": "vm-small"}, "title": "VM"}),
            json!({"metadata": {"name": "mgmt-only"}, "title": "odd", "interfaces": [{"name": "m0", "role": "management"}, {"name": "bmc", "role": "lifecycle"}]}),
        ],
    )
    .await;
    let f = "spec.network_attachments";
    let bm = |atts: Value| bm_body("bm", atts);
    let with_type = |ht: &str, atts: Value| json!({"metadata": {"name": "bm"}, "spec": {"host_type": ht, "network_attachments": atts}});
    refused(
        &t,
        "baremetal_instances",
        vec![
            (
                json!({"spec": {"network_attachments": [{"subnet": "a"}]}}),
                400,
                vec!["spec.host_type", "required"],
            ),
            (
                json!({"spec": {"catalog_item": "gold", "network_attachments": [{"subnet": "a"}]}}),
                404,
                vec!["spec.catalog_item", "BareMetalTemplate 'gold' does not exist"],
            ),
            (
                json!({"spec": {"template": "gold", "network_attachments": [{"subnet": "a"}]}}),
                404,
                vec!["spec.template", "BareMetalTemplate 'gold' does not exist"],
            ),
            (
                with_type("ghost", json!([{"subnet": "a"}])),
                404,
                vec!["spec.host_type", "HostType 'ghost' does not exist"],
            ),
            (
                with_type("vm-small", json!([{"subnet": "a"}])),
                400,
                vec!["spec.host_type", "HostType 'vm-small' has no interfaces"],
            ),
            (
                with_type("mgmt-only", json!([{"subnet": "a"}])),
                400,
                vec![
                    "spec.network_attachments[0].interface",
                    "HostType 'mgmt-only' has no fabric interface",
                ],
            ),
            (
                bm(json!([{"subnet": "a", "interface": "eth9"}])),
                400,
                vec![
                    "spec.network_attachments[0].interface",
                    "HostType 'bm-standard' has no interface 'eth9'",
                    "data-0, data-1, mgmt-0",
                ],
            ),
            (
                bm(json!([{"subnet": "a", "interface": "bmc-0"}])),
                400,
                vec![
                    "spec.network_attachments[0].interface",
                    "'bmc-0' is a lifecycle interface",
                ],
            ),
            (
                bm(json!([{"subnet": "a", "interface": "data-0", "primary": true}, {"subnet": "b", "interface": "data-0"}])),
                400,
                vec!["spec.network_attachments[1].interface", "'data-0' is attached twice"],
            ),
            (
                bm(json!([{"subnet": "a", "interface": "data-0", "primary": true}, {"subnet": "b"}])),
                400,
                vec![
                    "spec.network_attachments[1].interface",
                    "every attachment must name its interface",
                ],
            ),
            (
                bm(json!([
                    {"subnet": "a", "interface": "data-0", "primary": true},
                    {"subnet": "b", "interface": "data-1"},
                    {"subnet": "a", "interface": "mgmt-0"},
                    {"subnet": "b", "interface": "bmc-0"}
                ])),
                400,
                vec![f, "4 network attachments", "only 3 tenant-attachable interfaces"],
            ),
            (
                bm(json!([{"subnet": "a", "interface": "data-0"}, {"subnet": "b", "interface": "data-1"}])),
                400,
                vec![f, "exactly one must be primary"],
            ),
            (
                bm(json!([{"subnet": "a", "interface": "data-0", "primary": true}, {"subnet": "c", "interface": "data-1"}])),
                400,
                vec!["spec.network_attachments[1].subnet", "one VirtualNetwork"],
            ),
            (
                bm(json!([{"subnet": their_subnet}])),
                404,
                vec!["spec.network_attachments[0].subnet", "does not exist"],
            ),
            (
                bm(json!([{"subnet": "a", "security_groups": ["web2"]}])),
                400,
                vec!["security_groups[0]", "belongs to VirtualNetwork 'net2'"],
            ),
        ],
    )
    .await;
    assert_eq!(t.count("baremetal_instances").await, 0);

    let types = format!("{PRIV}/host_types");
    let ht = id(&s.admin.get(&format!("{types}/bm-standard")).await.ok());
    let (a, b) = (
        lookup(&t, "subnets", "a").await,
        lookup(&t, "subnets", "b").await,
    );
    let one = t.create_bm("one", "a").await;
    assert_eq!(one["spec"]["host_type"], ht);
    assert_eq!(
        one["spec"]["network_attachments"],
        json!([{"subnet": a, "interface": "data-0", "primary": true}])
    );
    assert_eq!(
        one["status"]["state"],
        "BARE_METAL_INSTANCE_STATE_PROVISIONING"
    );
    let two = t
        .create(
            "baremetal_instances",
            bm_body(
                "two",
                json!([{"subnet": "a", "interface": "data-1"}, {"subnet": "b", "interface": "mgmt-0", "primary": true}]),
            ),
        )
        .await;
    assert_eq!(
        two["spec"]["network_attachments"],
        json!([{"subnet": a, "interface": "data-1"}, {"subnet": b, "interface": "mgmt-0", "primary": true}])
    );
    // Bare metal works in a BM-only deployment.
    bm_only_network(&s, &t).await;
    t.create_bm("bm-only", "bm-a").await;
    // The host type cannot go while instances use it.
    s.admin.delete(&format!("{types}/bm-standard")).await.err(
        412,
        "FAILED_PRECONDITION",
        &["HostType 'bm-standard' cannot be deleted"],
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baremetal_templates() {
    let s = TestServer::sqlite().await;
    let (t, _o) = setup(&s).await;
    let templates = format!("{PRIV}/baremetal_templates");
    let ht = id(&s
        .admin
        .get(&format!("{PRIV}/host_types/bm-standard"))
        .await
        .ok());
    add_host_types(
        &s,
        [
            json!({"metadata": {"name": "other-bm"}, "title": "other", "interfaces": [{"name": "eth0", "role": "fabric"}]}),
            json!({"metadata": {"name": "vm-small"}, "title": "VM"}),
        ],
    )
    .await;

    // The dev template: its HostType stored as an id, READY at once, readable by tenants.
    let dev = t
        .get(&format!("{PUB}/baremetal_templates/bcm_h100"))
        .await
        .ok();
    assert_eq!(dev["spec"]["host_type"], ht);
    assert_eq!(dev["status"]["state"], "BARE_METAL_TEMPLATE_STATE_READY");
    assert!(t.list("baremetal_templates", &[]).await.ok()["total"].as_i64() >= Some(1));

    // Provider rules.
    for (body, status, fragments) in [
        (
            json!({"metadata": {"name": "x"}, "spec": {"title": "no type"}}),
            400,
            vec!["spec.host_type", "required"],
        ),
        (
            json!({"metadata": {"name": "x"}, "spec": {"host_type": "ghost"}}),
            404,
            vec!["spec.host_type", "HostType 'ghost' does not exist"],
        ),
        (
            json!({"metadata": {"name": "x"}, "spec": {"host_type": "vm-small"}}),
            400,
            vec!["spec.host_type", "HostType 'vm-small' has no interfaces"],
        ),
    ] {
        let r = s.admin.post(&templates, body.clone()).await;
        r.err(status, code_name(status), &fragments);
    }
    let gold = s
        .admin
        .post(
            &templates,
            json!({"metadata": {"name": "gold"}, "spec": {
                "host_type": "bm-standard", "title": "Gold", "description": "gold servers",
                "template_parameters": {"os": "rhel", "disk": 100}
            }}),
        )
        .await
        .ok();
    assert_eq!(gold["spec"]["host_type"], ht);
    let gold_id = id(&gold);
    // Title and parameters change; the HostType never does (a name of the same type is fine).
    let up = s
        .admin
        .patch(
            &format!("{templates}/gold"),
            json!({"spec": {"host_type": "bm-standard", "title": "Gold 2"}}),
        )
        .await
        .ok();
    assert_eq!(up["spec"]["title"], "Gold 2");
    s.admin
        .patch(
            &format!("{templates}/gold"),
            json!({"spec": {"host_type": "other-bm"}}),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.host_type is immutable"]);

    // Tenants read templates but never write them.
    t.post(
        &format!("{PUB}/baremetal_templates"),
        json!({"metadata": {"name": "mine"}, "spec": {"host_type": "bm-standard"}}),
    )
    .await
    .err(405, "METHOD_NOT_ALLOWED", &["POST"]);
    t.patch(
        &format!("{PUB}/baremetal_templates/gold"),
        json!({"spec": {"title": "hacked"}}),
    )
    .await
    .err(405, "METHOD_NOT_ALLOWED", &["PATCH"]);
    t.delete(&format!("{PUB}/baremetal_templates/gold"))
        .await
        .err(405, "METHOD_NOT_ALLOWED", &["DELETE"]);
    t.get(&format!("{PRIV}/baremetal_templates")).await.err(
        403,
        "PERMISSION_DENIED",
        &["private API"],
    );
    let seen = t.get(&format!("{PUB}/baremetal_templates/gold")).await.ok();
    assert_eq!(seen["spec"]["title"], "Gold 2");

    // Conflicts.
    let with = |spec: Value| {
        let mut spec = spec;
        spec["network_attachments"] = json!([{"subnet": "a"}]);
        json!({"metadata": {"name": "bm"}, "spec": spec})
    };
    refused(
        &t,
        "baremetal_instances",
        vec![
            (
                with(json!({"template": "gold", "host_type": "other-bm"})),
                400,
                vec![
                    "spec.host_type",
                    "HostType 'other-bm' differs from the HostType of BareMetalTemplate 'gold'",
                ],
            ),
            (
                with(json!({"template": "gold", "catalog_item": "bcm_h100"})),
                400,
                vec![
                    "spec.catalog_item",
                    "deprecated alias of spec.template",
                    "'bcm_h100'",
                ],
            ),
        ],
    )
    .await;
    assert_eq!(t.count("baremetal_instances").await, 0);

    // The template supplies the HostType and default parameters (the instance's values win);
    // its id is stored.
    let one = t
        .create(
            "baremetal_instances",
            json!({"metadata": {"name": "one"}, "spec": {
                "template": "gold", "template_parameters": {"os": "fedora"},
                "network_attachments": [{"interface": "data-0", "subnet": "a", "security_groups": ["web"]}]
            }}),
        )
        .await;
    assert_eq!(one["spec"]["template"], gold_id);
    assert_eq!(one["spec"]["host_type"], ht);
    assert_eq!(
        one["spec"]["template_parameters"],
        json!({"os": "fedora", "disk": 100.0})
    );
    // Same HostType named explicitly, template by id, the alias naming the same template.
    let two = t
        .create(
            "baremetal_instances",
            json!({"metadata": {"name": "two"}, "spec": {
                "template": gold_id, "catalog_item": "gold", "host_type": "bm-standard",
                "network_attachments": [{"subnet": "a"}]
            }}),
        )
        .await;
    assert_eq!(two["spec"]["template"], gold_id);
    assert!(two["spec"].get("catalog_item").is_none(), "{two}");
    // The deprecated alias alone.
    let three = t
        .create(
            "baremetal_instances",
            json!({"metadata": {"name": "three"}, "spec": {
                "catalog_item": "bcm_h100", "network_attachments": [{"subnet": "a"}]
            }}),
        )
        .await;
    assert_eq!(three["spec"]["template"], id(&dev));
    assert_eq!(three["spec"]["template_parameters"]["os_image"], "rhel-9");

    // The template is immutable on the instance; naming the same one (or a round trip) is not
    // a change.
    let path = format!("{PUB}/baremetal_instances/one");
    t.patch(&path, json!({"spec": {"template": "bcm_h100"}}))
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.template is immutable"]);
    t.patch(
        &path,
        json!({"spec": {"template": "gold", "catalog_item": "gold", "host_type": "bm-standard"}}),
    )
    .await
    .ok();
    let mut obj = t.get(&path).await.ok();
    obj["metadata"]["labels"] = json!({"tier": "gpu"});
    let up = t.patch(&path, obj).await.ok();
    assert_eq!(up["metadata"]["labels"]["tier"], "gpu");

    // A template cannot be deleted while an instance references it.
    s.admin.delete(&format!("{templates}/gold")).await.err(
        412,
        "FAILED_PRECONDITION",
        &[
            "BareMetalTemplate 'gold' cannot be deleted",
            "BareMetalInstance",
        ],
    );
    for name in ["one", "two"] {
        t.delete(&format!("{PUB}/baremetal_instances/{name}"))
            .await
            .ok();
        t.wait_gone(PUB, "baremetal_instances", name).await;
    }
    s.admin.delete(&format!("{templates}/gold")).await.ok();
    s.admin.wait_gone(PRIV, "baremetal_templates", "gold").await;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_rules() {
    let s = TestServer::sqlite().await;
    let (t, o) = setup(&s).await;
    let their_subnet = lookup(&o, "subnets", "theirs").await;
    add_host_types(
        &s,
        [
            json!({"metadata": {"name": "vm-small"}, "title": "VM"}),
            json!({"metadata": {"name": "mgmt-only"}, "title": "odd", "interfaces": [{"name": "m0", "role": "management"}]}),
        ],
    )
    .await;
    t.ready_subnet("tiny", "net", "10.0.9.0/28").await;
    let with_sets = |sets: Value| json!({"metadata": {"name": "c"}, "spec": {"node_sets": sets, "network_attachment": {"subnet": "a"}}});
    let ns = |ht: &str, size: i32| json!({"workers": {"host_type": ht, "size": size}});
    refused(
        &t,
        "clusters",
        vec![
            (
                json!({"spec": {"network_attachment": {"subnet": "a"}}}),
                400,
                vec!["spec.node_sets", "at least one node set"],
            ),
            (
                with_sets(ns("bm-standard", 0)),
                400,
                vec!["spec.node_sets.workers.size", "at least 1"],
            ),
            (
                with_sets(ns("", 3)),
                400,
                vec!["spec.node_sets.workers.host_type", "required"],
            ),
            (
                with_sets(json!({"Workers": {"host_type": "bm-standard", "size": 1}})),
                400,
                vec!["spec.node_sets.Workers", "DNS label"],
            ),
            (
                with_sets(ns("ghost", 3)),
                404,
                vec![
                    "spec.node_sets.workers.host_type",
                    "HostType 'ghost' does not exist",
                ],
            ),
            (
                with_sets(ns("vm-small", 3)),
                400,
                vec![
                    "spec.node_sets.workers.host_type",
                    "bare-metal node sets only",
                ],
            ),
            (
                with_sets(ns("mgmt-only", 3)),
                400,
                vec![
                    "spec.node_sets.workers.host_type",
                    "HostType 'mgmt-only' has no fabric interface",
                ],
            ),
            (
                cluster_body("c", &their_subnet, json!([]), 3),
                404,
                vec!["spec.network_attachment.subnet", "does not exist"],
            ),
            (
                cluster_body("c", "a", json!(["web2"]), 3),
                400,
                vec![
                    "spec.network_attachment.security_groups[0]",
                    "belongs to VirtualNetwork 'net2'",
                ],
            ),
            (
                cluster_body("c", "tiny", json!([]), 3),
                412,
                vec![
                    "spec.network_attachment.subnet",
                    "Subnet 'tiny' has no VIP block",
                ],
            ),
        ],
    )
    .await;
    assert_eq!(t.count("clusters").await, 0);

    let types = format!("{PRIV}/host_types");
    let ht = id(&s.admin.get(&format!("{types}/bm-standard")).await.ok());
    let (a, web) = (
        lookup(&t, "subnets", "a").await,
        lookup(&t, "security_groups", "web").await,
    );
    let c = t
        .create("clusters", cluster_body("c", "a", json!(["web"]), 3))
        .await;
    assert_eq!(
        c["spec"]["node_sets"],
        json!({"workers": {"host_type": ht, "size": 3, "fabric_interface": "data-0"}})
    );
    assert_eq!(
        c["spec"]["network_attachment"],
        json!({"subnet": a, "security_groups": [web]})
    );
    assert_eq!(c["status"]["state"], "CLUSTER_STATE_PROGRESSING");
    // A user-supplied fabric_interface is output only: the server resolves it.
    let d = t
        .create(
            "clusters",
            json!({"metadata": {"name": "d"}, "spec": {"node_sets": {"cp": {"host_type": ht, "size": 1, "fabric_interface": "mgmt-0"}}, "network_attachment": {"subnet": "b"}}}),
        )
        .await;
    assert_eq!(d["spec"]["node_sets"]["cp"]["fabric_interface"], "data-0");

    bm_only_network(&s, &t).await;
    t.post(
        &format!("{PUB}/clusters"),
        cluster_body("e", "bm-a", json!([]), 1),
    )
    .await
    .err(
        412,
        "FAILED_PRECONDITION",
        &["BM-only deployment", "so clusters are not available"],
    );
    assert_eq!(t.count("clusters").await, 2);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_security_groups_change_after_creation() {
    let mut s = TestServer::sqlite().await;
    let (t, o) = setup(&s).await;
    // No controllers: the objects stay as the API stored them.
    s.pause().await;
    let (a, web, db) = (
        lookup(&t, "subnets", "a").await,
        lookup(&t, "security_groups", "web").await,
        lookup(&t, "security_groups", "db").await,
    );
    let their_sg = lookup(&o, "security_groups", "their-sg").await;
    t.create(
        "compute_instances",
        vm_body("vm", json!([{"subnet": "a", "security_groups": ["web"]}])),
    )
    .await;
    let vm = format!("{PUB}/compute_instances/vm");
    let f = "spec.compute_network_attachments";

    // Names are accepted and stored as ids; the resolved primary flag may be left out.
    let up = t
        .patch(
            &vm,
            json!({"spec": {"compute_network_attachments": [{"subnet": "a", "security_groups": ["db", "web"]}]}}),
        )
        .await
        .ok();
    assert_eq!(
        up["spec"]["compute_network_attachments"],
        json!([{"subnet": a, "security_groups": [db, web], "primary": true}])
    );
    // A GET-modify-update round trip.
    let mut obj = t.get(&vm).await.ok();
    obj["spec"]["compute_network_attachments"][0]["security_groups"] = json!([]);
    obj["metadata"]["labels"] = json!({"tier": "web"});
    let up = t.patch(&vm, obj).await.ok();
    assert_eq!(
        up["spec"]["compute_network_attachments"],
        json!([{"subnet": a, "primary": true}])
    );
    assert_eq!(up["metadata"]["labels"]["tier"], "web");
    let version = up["metadata"]["version"].clone();
    for (body, status, fragments) in [
        (
            json!({"spec": {"compute_network_attachments": [{"subnet": "b"}]}}),
            400,
            vec!["spec.compute_network_attachments[].subnet is immutable"],
        ),
        (
            json!({"spec": {"compute_network_attachments": [{"subnet": "a"}, {"subnet": "b"}]}}),
            400,
            vec!["is immutable"],
        ),
        (
            json!({"spec": {"compute_network_attachments": [{"subnet": "a", "security_groups": ["web2"]}]}}),
            400,
            vec![
                &format!("{f}[0].security_groups[0]"),
                "belongs to VirtualNetwork 'net2'",
            ],
        ),
        (
            json!({"spec": {"compute_network_attachments": [{"subnet": "a", "security_groups": [their_sg]}]}}),
            404,
            vec!["security_groups[0]", "does not exist"],
        ),
        (
            json!({"spec": {"compute_network_attachments": [{"subnet": "a", "security_groups": ["web", "web"]}]}}),
            400,
            vec!["listed twice"],
        ),
        (
            json!({"spec": {"network_attachments": [{"subnet": "a"}]}}),
            400,
            vec!["spec.network_attachments", "at creation only"],
        ),
        (
            json!({"spec": {"template": "large"}}),
            400,
            vec!["spec.template is immutable"],
        ),
        (
            json!({"spec": {"auto_external_ip_attachment": true}}),
            400,
            vec!["spec.auto_external_ip_attachment is immutable"],
        ),
    ] {
        t.patch(&vm, body)
            .await
            .err(status, code_name(status), &fragments);
    }
    assert_eq!(t.get(&vm).await.ok()["metadata"]["version"], version);

    // Bare metal: the resolved interface may be left out; it never changes.
    t.create(
        "baremetal_instances",
        bm_body("bm", json!([{"subnet": "a", "security_groups": ["web"]}])),
    )
    .await;
    let bm = format!("{PUB}/baremetal_instances/bm");
    let up = t
        .patch(
            &bm,
            json!({"spec": {"network_attachments": [{"subnet": "a", "security_groups": ["db"]}]}}),
        )
        .await
        .ok();
    assert_eq!(
        up["spec"]["network_attachments"],
        json!([{"subnet": a, "interface": "data-0", "security_groups": [db], "primary": true}])
    );
    t.patch(
        &bm,
        json!({"spec": {"network_attachments": [{"subnet": "a", "interface": "data-1"}]}}),
    )
    .await
    .err(
        400,
        "INVALID_ARGUMENT",
        &["spec.network_attachments[].interface is immutable"],
    );
    t.patch(&bm, json!({"spec": {"host_type": "mgmt"}}))
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.host_type is immutable"]);

    // Cluster: the attachment's security groups only.
    t.create("clusters", cluster_body("c", "a", json!([]), 2))
        .await;
    let c = format!("{PUB}/clusters/c");
    let up = t
        .patch(
            &c,
            json!({"spec": {"network_attachment": {"subnet": "a", "security_groups": ["web"]}}}),
        )
        .await
        .ok();
    assert_eq!(
        up["spec"]["network_attachment"],
        json!({"subnet": a, "security_groups": [web]})
    );
    // Node sets written with names and without the resolved interface mean the same.
    let up = t
        .patch(
            &c,
            json!({"spec": {"node_sets": {"workers": {"host_type": "bm-standard", "size": 2}}}}),
        )
        .await
        .ok();
    assert_eq!(
        up["spec"]["node_sets"]["workers"]["fabric_interface"],
        "data-0"
    );
    for body in [
        json!({"spec": {"node_sets": {"workers": {"host_type": "bm-standard", "size": 5}}}}),
        json!({"spec": {"network_attachment": {"subnet": "b"}}}),
    ] {
        t.patch(&c, body)
            .await
            .err(400, "INVALID_ARGUMENT", &["is immutable"]);
    }
    t.patch(
        &c,
        json!({"spec": {"network_attachment": {"subnet": "a", "security_groups": ["web2"]}}}),
    )
    .await
    .err(
        400,
        "INVALID_ARGUMENT",
        &["belongs to VirtualNetwork 'net2'"],
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_protect_what_they_use() {
    let mut s = TestServer::sqlite().await;
    let (t, o) = setup(&s).await;
    t.allocated_eip("ip", "").await;
    t.allocated_eip("ip2", "").await;
    // No controllers: what the API refuses is independent of workload progress.
    s.pause().await;
    t.create(
        "compute_instances",
        vm_body("vm", json!([{"subnet": "a", "security_groups": ["web"]}])),
    )
    .await;
    t.create(
        "baremetal_instances",
        bm_body("bm", json!([{"subnet": "b", "security_groups": ["db"]}])),
    )
    .await;
    t.create(
        "external_ip_attachments",
        json!({"metadata": {"name": "in"}, "spec": {"external_ip": "ip", "compute_instance": "vm"}}),
    )
    .await;
    for (path, fragments) in [
        (
            "subnets/a",
            vec![
                "Subnet 'a' cannot be deleted",
                "is used by ComputeInstance 'vm'",
            ],
        ),
        (
            "security_groups/web",
            vec![
                "SecurityGroup 'web' cannot be deleted",
                "ComputeInstance 'vm'",
            ],
        ),
        (
            "subnets/b",
            vec!["Subnet 'b' cannot be deleted", "BareMetalInstance 'bm'"],
        ),
        ("security_groups/db", vec!["BareMetalInstance 'bm'"]),
        (
            "external_ips/ip",
            vec![
                "ExternalIP 'ip' cannot be deleted",
                "ExternalIPAttachment 'in'",
            ],
        ),
        ("virtual_networks/net", vec!["still has"]),
    ] {
        t.delete(&format!("{PUB}/{path}"))
            .await
            .err(412, "FAILED_PRECONDITION", &fragments);
    }
    // A cluster holds its subnet and security groups too.
    t.create("clusters", cluster_body("k", "c", json!(["web2"]), 1))
        .await;
    t.delete(&format!("{PUB}/subnets/c"))
        .await
        .err(412, "FAILED_PRECONDITION", &["Cluster 'k'"]);
    t.delete(&format!("{PUB}/security_groups/web2")).await.err(
        412,
        "FAILED_PRECONDITION",
        &["Cluster 'k'"],
    );
    // A tenant with workloads cannot go.
    s.admin.delete(&format!("{PRIV}/tenants/acme")).await.err(
        412,
        "FAILED_PRECONDITION",
        &["Tenant 'acme' cannot be deleted"],
    );
    // Workloads themselves can be deleted: marked DELETING, the controller undoes them.
    t.delete(&format!("{PUB}/compute_instances/vm")).await.ok();
    let vm = t.get(&format!("{PUB}/compute_instances/vm")).await.ok();
    assert_eq!(vm["status"]["state"], "COMPUTE_INSTANCE_STATE_DELETING");
    assert!(vm["metadata"]["deletion_timestamp"].is_string());
    // …and a workload being deleted still holds what it uses, and takes no new attachments.
    t.delete(&format!("{PUB}/subnets/a")).await.err(
        412,
        "FAILED_PRECONDITION",
        &["being deleted; retry when it is gone"],
    );
    t.post(
        &format!("{PUB}/external_ip_attachments"),
        json!({"spec": {"external_ip": "ip2", "compute_instance": "vm"}}),
    )
    .await
    .err(
        412,
        "FAILED_PRECONDITION",
        &[
            "spec.compute_instance",
            "ComputeInstance 'vm' is being deleted",
        ],
    );
    let _ = o;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_ip_attachment_targets() {
    let mut s = TestServer::sqlite().await;
    let (t, o) = setup(&s).await;
    for name in ["ip", "ip-vm", "ip-bm", "ip-c"] {
        t.allocated_eip(name, "").await;
    }
    s.pause().await;
    let vm = t.create_vm("vm", "a").await;
    let bm = t.create_bm("bm", "a").await;
    let c = t
        .create("clusters", cluster_body("c", "a", json!([]), 1))
        .await;
    let theirs = o.create_vm("vm", "theirs").await;
    let their_bm = o.create_bm("bm", "theirs").await;
    let path = format!("{PUB}/external_ip_attachments");
    for (spec, fragments) in [
        (
            json!({"external_ip": "ip", "compute_instance": id(&theirs)}),
            vec!["spec.compute_instance", "does not exist"],
        ),
        (
            json!({"external_ip": "ip", "baremetal_instance": id(&their_bm)}),
            vec!["spec.baremetal_instance", "does not exist"],
        ),
        (
            // Only names may be forward references (forward_refs.rs): an unknown id is not.
            json!({"external_ip": "ip", "cluster": "0190c0de-7a3b-7cc1-8f00-0123456789ab", "target_endpoint": "EXTERNAL_IP_ATTACHMENT_ENDPOINT_INGRESS"}),
            vec![
                "spec.cluster",
                "Cluster '0190c0de-7a3b-7cc1-8f00-0123456789ab' does not exist",
            ],
        ),
    ] {
        t.post(&path, json!({"spec": spec}))
            .await
            .err(404, "NOT_FOUND", &fragments);
    }
    assert_eq!(t.count("external_ip_attachments").await, 0);
    // Names are resolved and stored as ids; the attachment waits for its target's IP.
    for (field, key, expected) in [
        ("compute_instance", "vm", &vm),
        ("baremetal_instance", "bm", &bm),
        ("cluster", "c", &c),
    ] {
        let mut spec =
            json!({"external_ip": format!("ip-{}", &key[..key.len().min(2)]), field: key});
        if field == "cluster" {
            spec["target_endpoint"] = json!("EXTERNAL_IP_ATTACHMENT_ENDPOINT_API");
        }
        let att = t
            .create("external_ip_attachments", json!({"spec": spec}))
            .await;
        assert_eq!(att["spec"][field], expected["id"]);
        assert_eq!(
            att["status"]["state"],
            "EXTERNAL_IP_ATTACHMENT_STATE_PENDING"
        );
    }
    s.finish().await;
}
