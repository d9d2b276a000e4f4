//! Provider objects through the private API: NetworkClass, ExternalIPPool, HostType; what
//! tenants may see of them; the private API refuses tenants.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::*;

fn defaults_v4() -> Value {
    json!({
        "virtual_network_ipv4_cidr": "10.0.0.0/16",
        "subnet_ipv4_cidr": "10.0.1.0/24",
        "ingress_rules": [{"protocol": "PROTOCOL_TCP", "port_from": 22, "port_to": 22, "ipv4_cidr": "0.0.0.0/0"}],
        "egress_rules": [{"protocol": "PROTOCOL_ALL", "ipv4_cidr": "0.0.0.0/0"}],
        // No pool in these tests: tenants get no NAT gateway (and so need no address).
        "enable_nat_gateway": false
    })
}

fn class(name: &str, fabric: &str, k8s: &str, spec: Value) -> Value {
    json!({"metadata": {"name": name}, "title": name, "fabric_manager": fabric, "k8s_manager": k8s, "spec": spec})
}

/// A SQLite server whose managers directory holds exactly `registrations` (file name, YAML);
/// the directory lives as long as the returned handle.
async fn server_with_managers(registrations: &[(&str, &str)]) -> (TestServer, tempfile::TempDir) {
    let managers = tempfile::tempdir().unwrap();
    for (file, registration) in registrations {
        std::fs::write(managers.path().join(file), registration).unwrap();
    }
    let s = TestServer::start_bare(Backend::Sqlite, Some(managers.path().to_path_buf()))
        .await
        .unwrap();
    (s, managers)
}

/// Creates a NetworkClass through the private API, asserting success.
async fn create_class(s: &TestServer, body: Value) -> Value {
    s.admin
        .post(&format!("{PRIV}/network_classes"), body)
        .await
        .ok()
}

async fn class_count(s: &TestServer) -> i64 {
    s.admin.get(&format!("{PRIV}/network_classes")).await.ok()["total"]
        .as_i64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_class_validation() {
    let s = TestServer::sqlite().await;
    let path = format!("{PRIV}/network_classes");
    let before = s.admin.get(&format!("{path}/default")).await.ok();

    // Class `c1` on the sim fabric, without a k8s manager.
    let on_sim = |spec: Value| class("c1", "sim-fabric", "", spec);
    let with_defaults = |field: &str, value: Value| {
        let mut d = defaults_v4();
        d[field] = value;
        on_sim(json!({"defaults": d}))
    };
    let mut dual_stack = defaults_v4();
    dual_stack["virtual_network_ipv6_cidr"] = json!("fd00::/48");
    dual_stack["subnet_ipv6_cidr"] = json!("fd00:0:0:1::/64");
    for (body, fragments) in [
        // Unknown manager, wrong role (both ways).
        (
            class("c1", "nope", "", json!({"defaults": defaults_v4()})),
            vec!["fabric_manager", "nope"],
        ),
        (
            class("c1", "sim-k8s", "", json!({"defaults": defaults_v4()})),
            vec!["fabric_manager", "sim-k8s", "k8s"],
        ),
        (
            class(
                "c1",
                "sim-fabric",
                "sim-fabric",
                json!({"defaults": defaults_v4()}),
            ),
            vec!["k8s_manager", "sim-fabric"],
        ),
        (
            class(
                "c1",
                "sim-fabric",
                "ghost",
                json!({"defaults": defaults_v4()}),
            ),
            vec!["k8s_manager", "ghost"],
        ),
        // fabric_manager required.
        (
            class("c1", "", "", json!({"defaults": defaults_v4()})),
            vec!["fabric_manager", "required"],
        ),
        // Defaults missing.
        (on_sim(json!({})), vec!["spec.defaults", "required"]),
        (
            json!({"metadata": {"name": "c1"}, "fabric_manager": "sim-fabric"}),
            vec!["spec.defaults"],
        ),
        // Defaults invalid: subnet outside the VN CIDR, bad CIDR syntax, host bits, wrong family.
        (
            with_defaults("subnet_ipv4_cidr", json!("10.1.0.0/24")),
            vec![
                "spec.defaults.subnet_ipv4_cidr",
                "10.1.0.0/24",
                "not inside",
                "10.0.0.0/16",
            ],
        ),
        (
            with_defaults("virtual_network_ipv4_cidr", json!("10.0.0.0/33")),
            vec![
                "spec.defaults.virtual_network_ipv4_cidr",
                "not a valid CIDR",
            ],
        ),
        (
            with_defaults("subnet_ipv4_cidr", json!("10.0.1.1/24")),
            vec!["spec.defaults.subnet_ipv4_cidr", "host bits"],
        ),
        (
            with_defaults("virtual_network_ipv4_cidr", json!("fd00::/48")),
            vec![
                "spec.defaults.virtual_network_ipv4_cidr",
                "IPv6",
                "expected IPv4",
            ],
        ),
        (
            with_defaults(
                "ingress_rules",
                json!([{"protocol": "PROTOCOL_ICMP", "port_from": 1, "port_to": 2, "ipv4_cidr": "0.0.0.0/0"}]),
            ),
            vec![
                "spec.defaults.ingress_rules[0].port_from",
                "only allowed for TCP and UDP",
            ],
        ),
        // IPv6 defaults while IPv6 is disabled on the class.
        (
            on_sim(
                json!({"defaults": dual_stack.clone(), "disable_capabilities": {"supports_ipv6": true}}),
            ),
            vec!["spec.defaults.virtual_network_ipv6_cidr", "IPv6"],
        ),
        // Dual-stack defaults while dual stack is disabled.
        (
            on_sim(
                json!({"defaults": dual_stack, "disable_capabilities": {"supports_dual_stack": true}}),
            ),
            vec!["dual-stack"],
        ),
        // vip_prefix_length out of range.
        (
            on_sim(json!({"defaults": defaults_v4(), "vip_prefix_length": 40})),
            vec!["spec.vip_prefix_length"],
        ),
    ] {
        s.admin
            .post(&path, body)
            .await
            .err(400, "INVALID_ARGUMENT", &fragments);
    }

    // Nothing of that was stored; the default class is untouched.
    assert_eq!(class_count(&s).await, 1);
    let after = s.admin.get(&format!("{path}/default")).await.ok();
    assert_eq!(before, after);

    // A valid class: capabilities = what the managers declare minus what is disabled.
    let c = create_class(
        &s,
        class(
            "v4only",
            "sim-fabric",
            "",
            json!({"defaults": defaults_v4(), "disable_capabilities": {"supports_ipv6": true, "supports_dual_stack": true}}),
        ),
    )
    .await;
    assert_eq!(c["capabilities"], json!({"supports_ipv4": true}), "{c}");
    assert_eq!(
        c["spec"]["vip_prefix_length"], 28,
        "default VIP prefix filled in"
    );
    assert!(
        c["is_default"].as_bool() != Some(true),
        "a second class is not the default: {c}"
    );
    let c = s
        .admin
        .wait_for_state(
            PRIV,
            "network_classes",
            "v4only",
            "NETWORK_CLASS_STATE_READY",
        )
        .await;
    assert_eq!(
        c["metadata"]["finalizers"],
        Value::Null,
        "classes carry no fabric finalizer: {c}"
    );

    // Its VNs follow its capabilities.
    let t = s.tenant("acme").await;
    t.post(
        &format!("{PUB}/virtual_networks"),
        json!({"spec": {"network_class": "v4only", "ipv6_cidr": "fd00::/48"}}),
    )
    .await
    .err(
        400,
        "INVALID_ARGUMENT",
        &["spec.ipv6_cidr", "v4only", "IPv6"],
    );
    let vn = t
        .create(
            "virtual_networks",
            json!({"spec": {"network_class": "v4only", "ipv4_cidr": "10.0.0.0/16"}}),
        )
        .await;
    assert_eq!(
        vn["spec"]["network_class"], c["id"],
        "class name resolved to its id"
    );
    let vn = t
        .create(
            "virtual_networks",
            json!({"spec": {"ipv4_cidr": "10.0.0.0/16", "ipv6_cidr": "fd00::/48"}}),
        )
        .await;
    assert_eq!(
        vn["spec"]["network_class"], before["id"],
        "default class used when omitted"
    );
    assert_eq!(
        vn["spec"]["capabilities"],
        json!({"enable_ipv4": true, "enable_ipv6": true, "enable_dual_stack": true})
    );

    // Immutable / set-once fields.
    s.admin
        .patch(
            &format!("{path}/v4only"),
            json!({"fabric_manager": "sim-k8s"}),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["fabric_manager", "immutable"]);
    s.admin
        .patch(&format!("{path}/default"), json!({"k8s_manager": ""}))
        .await
        .err(
            400,
            "INVALID_ARGUMENT",
            &["k8s_manager", "cannot change once set"],
        );
    // k8s_manager may be set once, and is validated like at creation.
    s.admin
        .patch(
            &format!("{path}/v4only"),
            json!({"k8s_manager": "sim-fabric"}),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["k8s_manager", "sim-fabric"]);
    let c = s
        .admin
        .patch(
            &format!("{path}/v4only"),
            json!({"k8s_manager": "sim-k8s", "title": "IPv4 only"}),
        )
        .await
        .ok();
    assert_eq!(c["k8s_manager"], "sim-k8s");
    assert_eq!(c["title"], "IPv4 only");
    // Updates re-validate the defaults and re-compute capabilities.
    s.admin
        .patch(
            &format!("{path}/v4only"),
            json!({"spec": {"defaults": {"virtual_network_ipv6_cidr": "fd00::/48"}}}),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["IPv6"]);
    let c = s
        .admin
        .patch(&format!("{path}/v4only"), json!({"spec": {"disable_capabilities": {"supports_ipv6": false, "supports_dual_stack": true}}}))
        .await
        .ok();
    assert_eq!(
        c["capabilities"],
        json!({"supports_ipv4": true, "supports_ipv6": true}),
        "{c}"
    );

    // A GET-modify-PATCH round trip works (read-only fields sent back are ignored).
    let mut round = s.admin.get(&format!("{path}/v4only")).await.ok();
    round["description"] = json!("round trip");
    let c = s
        .admin
        .patch(&format!("{path}/v4only"), round.clone())
        .await
        .ok();
    assert_eq!(c["description"], "round trip");
    assert_eq!(c["capabilities"], round["capabilities"]);

    // Exactly one default: making another class the default moves the flag.
    let c = s
        .admin
        .patch(&format!("{path}/v4only"), json!({"is_default": true}))
        .await
        .ok();
    assert_eq!(c["is_default"], true);
    let defaults = s
        .admin
        .get(&format!("{path}?filter=this.is_default%20%3D%3D%20true"))
        .await
        .ok();
    assert_eq!(defaults["total"], 1, "{defaults}");
    assert_eq!(defaults["items"][0]["metadata"]["name"], "v4only");
    s.admin
        .patch(&format!("{path}/v4only"), json!({"is_default": false}))
        .await
        .err(412, "FAILED_PRECONDITION", &["is_default", "exactly one"]);
    let c = s
        .admin
        .post(&path, {
            let mut c = class(
                "third",
                "sim-fabric",
                "sim-k8s",
                json!({"defaults": defaults_v4()}),
            );
            c["is_default"] = json!(true);
            c
        })
        .await
        .ok();
    assert_eq!(c["is_default"], true);
    let defaults = s
        .admin
        .get(&format!("{path}?filter=this.is_default%20%3D%3D%20true"))
        .await
        .ok();
    assert_eq!(defaults["total"], 1, "{defaults}");
    assert_eq!(defaults["items"][0]["metadata"]["name"], "third");

    // A class in use cannot be deleted.
    s.admin.delete(&format!("{path}/default")).await.err(
        412,
        "FAILED_PRECONDITION",
        &["'default'", "VirtualNetwork"],
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_class_capabilities_are_the_intersection() {
    let (s, _managers) = server_with_managers(&[
        (
            "fab.yaml",
            "name: fab\nrole: fabric\ndescription: d\ncapabilities: [ipv4, ipv6, dual_stack]\ndriver: sim\n",
        ),
        (
            "kube.yaml",
            "name: kube\nrole: k8s\ncapabilities: [ipv4, ipv6]\ndriver: sim\n",
        ),
        (
            "v4fab.yaml",
            "name: v4fab\nrole: fabric\ncapabilities: [ipv4]\ndriver: sim\n",
        ),
    ])
    .await;
    let path = format!("{PRIV}/network_classes");

    let list = s.admin.get(&format!("{PRIV}/managers")).await.ok();
    assert_eq!(list["total"], 3, "{list}");

    let c = create_class(
        &s,
        class("both", "fab", "kube", json!({"defaults": defaults_v4()})),
    )
    .await;
    assert_eq!(
        c["capabilities"],
        json!({"supports_ipv4": true, "supports_ipv6": true}),
        "no dual stack in kube: {c}"
    );
    assert_eq!(c["is_default"], true, "the first class becomes the default");
    let c = create_class(
        &s,
        class("fab-only", "fab", "", json!({"defaults": defaults_v4()})),
    )
    .await;
    assert_eq!(
        c["capabilities"],
        json!({"supports_ipv4": true, "supports_ipv6": true, "supports_dual_stack": true})
    );
    let c = create_class(
        &s,
        class(
            "fab-v4",
            "fab",
            "kube",
            json!({"defaults": defaults_v4(), "disable_capabilities": {"supports_ipv6": true}}),
        ),
    )
    .await;
    assert_eq!(c["capabilities"], json!({"supports_ipv4": true}));

    // Defaults needing a capability the managers lack.
    let mut dual = defaults_v4();
    dual["virtual_network_ipv6_cidr"] = json!("fd00::/48");
    s.admin
        .post(&path, class("c", "fab", "kube", json!({"defaults": dual})))
        .await
        .err(400, "INVALID_ARGUMENT", &["dual-stack"]);
    let v6 =
        json!({"virtual_network_ipv6_cidr": "fd00::/48", "subnet_ipv6_cidr": "fd00:0:0:1::/64"});
    s.admin
        .post(&path, class("c", "v4fab", "", json!({"defaults": v6})))
        .await
        .err(
            400,
            "INVALID_ARGUMENT",
            &["spec.defaults.virtual_network_ipv6_cidr", "IPv6"],
        );
    assert_eq!(class_count(&s).await, 3);

    // VNs on the class: dual stack refused, IPv6 alone fine.
    s.admin
        .wait_for_state(PRIV, "network_classes", "both", "NETWORK_CLASS_STATE_READY")
        .await;
    let t = s.tenant("acme").await;
    t.post(
        &format!("{PUB}/virtual_networks"),
        json!({"spec": {"ipv4_cidr": "10.0.0.0/16", "ipv6_cidr": "fd00::/48"}}),
    )
    .await
    .err(
        400,
        "INVALID_ARGUMENT",
        &["spec.ipv6_cidr", "'both'", "dual-stack"],
    );
    let vn = t
        .create(
            "virtual_networks",
            json!({"spec": {"ipv6_cidr": "fd00::/48"}}),
        )
        .await;
    t.wait("virtual_networks", &id(&vn), "VIRTUAL_NETWORK_STATE_READY")
        .await;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_ip_pool_rules() {
    let s = TestServer::sqlite().await;
    let path = format!("{PRIV}/external_ip_pools");
    let pool = |name: &str, family: &str, cidrs: Value| json!({"metadata": {"name": name}, "spec": {"ip_family": family, "cidrs": cidrs}});

    s.admin
        .post(
            &path,
            pool("p", "IP_FAMILY_IPV4", json!(["198.51.100.0/33"])),
        )
        .await
        .err(
            400,
            "INVALID_ARGUMENT",
            &["spec.cidrs[0]", "not a valid CIDR"],
        );
    s.admin
        .post(
            &path,
            pool(
                "p",
                "IP_FAMILY_IPV4",
                json!(["198.51.100.0/25", "198.51.100.129/25"]),
            ),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.cidrs[1]", "host bits"]);
    s.admin
        .post(
            &path,
            pool(
                "p",
                "IP_FAMILY_IPV4",
                json!(["198.51.100.0/25", "2001:db8::/64"]),
            ),
        )
        .await
        .err(
            400,
            "INVALID_ARGUMENT",
            &["spec.cidrs[1]", "IPv6", "expected IPv4"],
        );
    s.admin
        .post(
            &path,
            pool("p", "IP_FAMILY_IPV6", json!(["198.51.100.0/25"])),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.cidrs[0]", "expected IPv6"]);
    s.admin
        .post(
            &path,
            pool(
                "p",
                "IP_FAMILY_IPV4",
                json!(["198.51.100.0/24", "198.51.100.128/25"]),
            ),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.cidrs[1]", "overlaps"]);
    s.admin
        .post(
            &path,
            pool("p", "IP_FAMILY_IPV4", json!(["203.0.113.128/25"])),
        )
        .await
        .err(
            400,
            "INVALID_ARGUMENT",
            &[
                "spec.cidrs[0]",
                "203.0.113.128/25",
                "overlaps",
                "203.0.113.0/24",
                "external-pool-1",
            ],
        );
    s.admin
        .post(&path, pool("p", "IP_FAMILY_IPV4", json!(["203.0.0.0/16"])))
        .await
        .err(400, "INVALID_ARGUMENT", &["overlaps", "external-pool-1"]);
    s.admin
        .post(&path, pool("p", "IP_FAMILY_IPV4", json!([])))
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.cidrs", "at least one"]);
    s.admin
        .post(
            &path,
            json!({"metadata": {"name": "p"}, "spec": {"cidrs": ["198.51.100.0/24"]}}),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.ip_family", "required"]);
    s.admin
        .post(
            &path,
            pool("p", "IP_FAMILY_IPV5", json!(["198.51.100.0/24"])),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["IP_FAMILY_IPV5"]);
    // Nothing stored.
    assert_eq!(s.admin.get(&path).await.ok()["total"], 1);

    // Capacity: IPv4 excludes network and broadcast addresses.
    let p = s
        .admin
        .post(
            &path,
            pool(
                "pool-b",
                "IP_FAMILY_IPV4",
                json!(["198.51.100.0/25", "198.51.100.128/26"]),
            ),
        )
        .await
        .ok();
    assert_eq!(
        (
            counter(&p, "total"),
            counter(&p, "allocated"),
            counter(&p, "available")
        ),
        (188, 0, 188),
        "{p}"
    );
    assert_eq!(
        p["status"]["total"], "188",
        "int64 counters are JSON strings"
    );
    let p = s
        .admin
        .wait_for_state(
            PRIV,
            "external_ip_pools",
            "pool-b",
            "EXTERNAL_IP_POOL_STATE_READY",
        )
        .await;
    assert_eq!(counter(&p, "available"), 188);
    let v6 = s
        .admin
        .post(
            &path,
            pool("pool-v6", "IP_FAMILY_IPV6", json!(["2001:db8:1::/120"])),
        )
        .await
        .ok();
    assert_eq!(counter(&v6, "total"), 256);

    // Immutable CIDRs and family.
    s.admin
        .refuses_spec_change(
            &format!("{path}/pool-b"),
            "cidrs",
            json!(["198.51.100.0/24"]),
        )
        .await;
    s.admin
        .refuses_spec_change(
            &format!("{path}/pool-b"),
            "ip_family",
            json!("IP_FAMILY_IPV6"),
        )
        .await;
    let p = s
        .admin
        .patch(
            &format!("{path}/pool-b"),
            json!({"metadata": {"labels": {"zone": "a"}}}),
        )
        .await
        .ok();
    assert_eq!(p["metadata"]["labels"]["zone"], "a");
    assert_eq!(
        p["spec"]["cidrs"],
        json!(["198.51.100.0/25", "198.51.100.128/26"])
    );

    // Allocation counts; delete refused while allocated, naming an allocation.
    let t = s.tenant("acme").await;
    let eip = t.allocated_eip("ip1", "pool-b").await;
    let addr: std::net::Ipv4Addr = eip["status"]["address"].as_str().unwrap().parse().unwrap();
    assert_eq!(addr.octets()[..3], [198, 51, 100]);
    let p = s.admin.get(&format!("{path}/pool-b")).await.ok();
    assert_eq!(
        (
            counter(&p, "total"),
            counter(&p, "allocated"),
            counter(&p, "available")
        ),
        (188, 1, 187),
        "{p}"
    );
    s.admin.delete(&format!("{path}/pool-b")).await.err(
        412,
        "FAILED_PRECONDITION",
        &["pool-b", "allocated", "ip1"],
    );
    s.admin
        .wait_for_state(
            PRIV,
            "external_ip_pools",
            "pool-b",
            "EXTERNAL_IP_POOL_STATE_READY",
        )
        .await;

    // Tenants see READY pools with capacity, with the family and availability only.
    let list = t.get(&format!("{PUB}/external_ip_pools")).await.ok();
    assert_eq!(list["total"], 3, "{list}");
    let b = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["name"] == "pool-b")
        .expect("pool-b listed")
        .clone();
    let class = s
        .admin
        .get(&format!("{PRIV}/network_classes/default"))
        .await
        .ok();
    assert_eq!(
        b["spec"],
        json!({"ip_family": "IP_FAMILY_IPV4", "network_class": class["id"]}),
        "{b}"
    );
    assert_eq!(b["status"], json!({"available": "187"}), "{b}");
    assert!(b["metadata"].get("creator").is_none(), "{b}");
    // Automatic choice: the READY pool of the family with the most available addresses.
    let auto = t.allocated_eip("auto", "").await;
    assert_eq!(
        auto["status"]["pool"],
        s.admin.get(&format!("{path}/external-pool-1")).await.ok()["id"],
        "253 > 187 available"
    );
    let v6 = t
        .create(
            "external_ips",
            json!({"metadata": {"name": "v6"}, "spec": {"ip_family": "IP_FAMILY_IPV6"}}),
        )
        .await;
    let v6 = t
        .wait("external_ips", &id(&v6), "EXTERNAL_IP_STATE_ALLOCATED")
        .await;
    assert!(
        v6["status"]["address"]
            .as_str()
            .unwrap()
            .starts_with("2001:db8:1::"),
        "{v6}"
    );
    assert_eq!(v6["spec"]["ip_family"], "IP_FAMILY_IPV6");
    let one = t
        .get(&format!("{PUB}/external_ip_pools/pool-v6"))
        .await
        .ok();
    assert_eq!(
        one["spec"],
        json!({"ip_family": "IP_FAMILY_IPV6", "network_class": class["id"]})
    );
    t.post(
        &format!("{PUB}/external_ip_pools"),
        pool("x", "IP_FAMILY_IPV4", json!(["192.0.2.0/24"])),
    )
    .await
    .err(405, "METHOD_NOT_ALLOWED", &["POST"]);
    t.delete(&format!("{PUB}/external_ip_pools/pool-b"))
        .await
        .err(405, "METHOD_NOT_ALLOWED", &["DELETE"]);

    // An exhausted pool disappears from the public view (and from GET).
    s.admin
        .post(
            &path,
            pool("tiny", "IP_FAMILY_IPV4", json!(["192.0.2.0/30"])),
        )
        .await
        .ok();
    s.admin
        .wait_for_state(
            PRIV,
            "external_ip_pools",
            "tiny",
            "EXTERNAL_IP_POOL_STATE_READY",
        )
        .await;
    assert_eq!(
        t.get(&format!("{PUB}/external_ip_pools")).await.ok()["total"],
        4
    );
    t.allocated_eip("t1", "tiny").await;
    t.allocated_eip("t2", "tiny").await;
    // Naming the full pool is answered like naming a pool that does not exist: no name
    // confirmed, no counters (the rule in `resources::external_ip::create`; with it removed,
    // this was 429 "ExternalIPPool 'tiny' has no available capacity (2 of 2 allocated)").
    let hidden = t
        .post(
            &format!("{PUB}/external_ips"),
            json!({"spec": {"pool": "tiny"}}),
        )
        .await
        .err(404, "NOT_FOUND", &["spec.pool", "tiny", "does not exist"]);
    let missing = t
        .post(
            &format!("{PUB}/external_ips"),
            json!({"spec": {"pool": "tinx"}}),
        )
        .await
        .err(404, "NOT_FOUND", &["spec.pool", "tinx", "does not exist"]);
    assert_eq!(hidden.replace("tiny", "tinx"), missing);
    assert!(
        !hidden.contains("2 of 2") && !hidden.contains("capacity"),
        "{hidden}"
    );
    let list = t.get(&format!("{PUB}/external_ip_pools")).await.ok();
    assert_eq!(list["total"], 3, "{list}");
    assert!(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["metadata"]["name"] != "tiny")
    );
    t.get(&format!("{PUB}/external_ip_pools/tiny"))
        .await
        .err(404, "NOT_FOUND", &["tiny"]);
    let tiny = s.admin.get(&format!("{path}/tiny")).await.ok();
    assert_eq!(
        (
            counter(&tiny, "total"),
            counter(&tiny, "allocated"),
            counter(&tiny, "available")
        ),
        (2, 2, 0)
    );

    // Releasing gives the capacity back; then the pool can go.
    t.delete(&format!("{PUB}/external_ips/ip1")).await.ok();
    t.wait_gone(PUB, "external_ips", "ip1").await;
    let p = s.admin.get(&format!("{path}/pool-b")).await.ok();
    assert_eq!(
        (counter(&p, "allocated"), counter(&p, "available")),
        (0, 188),
        "{p}"
    );
    s.admin.delete(&format!("{path}/pool-b")).await.ok();
    s.admin.wait_gone(PRIV, "external_ip_pools", "pool-b").await;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_type_rules() {
    let s = TestServer::sqlite().await;
    let path = format!("{PRIV}/host_types");
    let iface = |n: &str, r: &str| json!({"name": n, "role": r});
    let ht =
        |ifaces: Value| json!({"metadata": {"name": "gpu"}, "title": "GPU", "interfaces": ifaces});

    s.admin
        .post(
            &path,
            ht(json!([
                iface("data-0", "fabric"),
                iface("data-0", "management")
            ])),
        )
        .await
        .err(
            400,
            "INVALID_ARGUMENT",
            &["interfaces[1].name", "data-0", "twice"],
        );
    s.admin
        .post(&path, ht(json!([iface("data-0", "uplink")])))
        .await
        .err(
            400,
            "INVALID_ARGUMENT",
            &[
                "interfaces[0].role",
                "uplink",
                "fabric, management, storage, lifecycle",
            ],
        );
    s.admin
        .post(&path, ht(json!([iface("Data_0", "fabric")])))
        .await
        .err(
            400,
            "INVALID_ARGUMENT",
            &["interfaces[0].name", "DNS label"],
        );
    s.admin
        .post(&path, ht(json!([iface("", "fabric")])))
        .await
        .err(400, "INVALID_ARGUMENT", &["interfaces[0].name", "required"]);
    s.admin
        .post(&path, json!({"metadata": {"name": "gpu"}, "spec": {}}))
        .await
        .err(400, "INVALID_ARGUMENT", &["spec"]);
    assert_eq!(s.admin.get(&path).await.ok()["total"], 1);

    let h = s
        .admin
        .post(
            &path,
            ht(json!([
                iface("data-0", "fabric"),
                iface("bmc", "lifecycle")
            ])),
        )
        .await
        .ok();
    assert_eq!(h["interfaces"][1]["role"], "lifecycle");
    assert!(
        h.get("spec").is_none() && h.get("status").is_none(),
        "no spec/status wrapper: {h}"
    );
    s.admin
        .post(&path, ht(json!([])))
        .await
        .err(409, "ALREADY_EXISTS", &["gpu"]);
    // Updates are validated too and change nothing when refused.
    s.admin
        .patch(
            &format!("{path}/gpu"),
            json!({"interfaces": [iface("a", "fabric"), iface("a", "fabric")]}),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["interfaces[1].name"]);
    let t = s.tenant("acme").await;
    let seen = t.get(&format!("{PUB}/host_types/gpu")).await.ok();
    assert_eq!(seen["interfaces"], h["interfaces"]);
    assert_eq!(t.get(&format!("{PUB}/host_types")).await.ok()["total"], 2);
    t.post(&format!("{PUB}/host_types"), ht(json!([])))
        .await
        .err(405, "METHOD_NOT_ALLOWED", &["POST"]);
    t.patch(&format!("{PUB}/host_types/gpu"), json!({"title": "x"}))
        .await
        .err(405, "METHOD_NOT_ALLOWED", &["PATCH"]);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_api_is_for_the_provider() {
    let s = TestServer::sqlite().await;
    let admin = s.tenant("acme").await;
    let user = s.client_for("acme", "tenant-user").await;
    for api in [&admin, &user] {
        for col in [
            "network_classes",
            "external_ip_pools",
            "host_types",
            "tenants",
        ] {
            api.get(&format!("{PRIV}/{col}"))
                .await
                .err(403, "PERMISSION_DENIED", &["private API"]);
            api.get(&format!("{PRIV}/{col}/default"))
                .await
                .err(403, "PERMISSION_DENIED", &[]);
        }
        for (method, path, body) in [
            (
                Method::POST,
                "network_classes",
                Some(class(
                    "x",
                    "sim-fabric",
                    "",
                    json!({"defaults": defaults_v4()}),
                )),
            ),
            (
                Method::PATCH,
                "network_classes/default",
                Some(json!({"title": "mine"})),
            ),
            (Method::DELETE, "external_ip_pools/external-pool-1", None),
            (
                Method::POST,
                "tokens",
                Some(json!({"tenant": "acme", "role": "provider-admin"})),
            ),
            (
                Method::POST,
                "tenants",
                Some(json!({"metadata": {"name": "evil"}})),
            ),
            (Method::GET, "managers", None),
            (Method::GET, "replicas", None),
        ] {
            api.send(method, &format!("{PRIV}/{path}"), body).await.err(
                403,
                "PERMISSION_DENIED",
                &[],
            );
        }
    }
    assert_eq!(
        s.admin.get(&format!("{PRIV}/tenants")).await.ok()["total"],
        1
    );
    assert_eq!(
        s.admin
            .get(&format!("{PRIV}/network_classes/default"))
            .await
            .ok()["title"],
        "Default (simulated fabric)"
    );
    // Tenant collections are not on the private API.
    s.admin.get(&format!("{PRIV}/virtual_networks")).await.err(
        404,
        "NOT_FOUND",
        &["virtual_networks"],
    );
    s.admin
        .get(&format!("{PRIV}/nonsense"))
        .await
        .err(404, "NOT_FOUND", &["nonsense"]);

    // The public view of classes never shows managers or the spec.
    let list = admin.get(&format!("{PUB}/network_classes")).await.ok();
    assert_eq!(list["total"], 1);
    let c = &list["items"][0];
    for hidden in ["fabric_manager", "k8s_manager", "spec", "status"] {
        assert!(c.get(hidden).is_none(), "public class shows {hidden}: {c}");
    }
    assert_eq!(c["is_default"], true);
    assert_eq!(c["capabilities"]["supports_ipv4"], true);
    assert!(!list.to_string().contains("sim-fabric"), "{list}");
    let one = user
        .get(&format!("{PUB}/network_classes/default"))
        .await
        .ok();
    assert_eq!(&one, c);
    assert!(!one.to_string().contains("sim-k8s"));
    // Tenants do not exist on the public API.
    admin
        .get(&format!("{PUB}/tenants"))
        .await
        .err(404, "NOT_FOUND", &[]);

    // Token minting rules.
    s.admin
        .post(
            &format!("{PRIV}/tokens"),
            json!({"tenant": "ghost", "role": "tenant-admin"}),
        )
        .await
        .err(404, "NOT_FOUND", &["ghost"]);
    s.admin
        .post(
            &format!("{PRIV}/tokens"),
            json!({"tenant": "acme", "role": "root"}),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["role", "root"]);
    s.admin
        .post(&format!("{PRIV}/tokens"), json!({"role": "tenant-admin"}))
        .await
        .err(400, "INVALID_ARGUMENT", &["tenant"]);
    s.admin
        .post(
            &format!("{PRIV}/tokens"),
            json!({"tenant": "acme", "role": "tenant-admin", "ttl": 5}),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["ttl"]);
    s.finish().await;
}

/// ExternalIPPools belong to a NetworkClass: its fabric manager allocates and releases their
/// addresses, and automatic pool choice for a workload only considers pools of its network's
/// class. Two classes on two simulated fabrics that record what they allocate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_belong_to_a_network_class_whose_fabric_allocates_them() {
    let (s, _managers) = server_with_managers(&[
        (
            "fab-a.yaml",
            "name: fab-a\nrole: fabric\ncapabilities: [ipv4]\ndriver: sim\n",
        ),
        (
            "fab-b.yaml",
            "name: fab-b\nrole: fabric\ncapabilities: [ipv4]\ndriver: sim\n",
        ),
        // One k8s manager per fabric: each fabric numbers its own segments.
        (
            "kube-a.yaml",
            "name: kube-a\nrole: k8s\ncapabilities: [ipv4]\ndriver: sim\n",
        ),
        (
            "kube-b.yaml",
            "name: kube-b\nrole: k8s\ncapabilities: [ipv4]\ndriver: sim\n",
        ),
    ])
    .await;
    let a = create_class(
        &s,
        class("a", "fab-a", "kube-a", json!({"defaults": defaults_v4()})),
    )
    .await;
    let b = create_class(
        &s,
        class("b", "fab-b", "kube-b", json!({"defaults": defaults_v4()})),
    )
    .await;
    assert_eq!(a["is_default"], true);
    for c in ["a", "b"] {
        s.admin
            .wait_for_state(PRIV, "network_classes", c, "NETWORK_CLASS_STATE_READY")
            .await;
    }
    let pools = format!("{PRIV}/external_ip_pools");
    let pa = s
        .admin
        .post(
            &pools,
            json!({"metadata": {"name": "pa"}, "spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": ["203.0.113.0/28"]}}),
        )
        .await
        .ok();
    let pb = s
        .admin
        .post(&pools, json!({"metadata": {"name": "pb"}, "spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": ["198.51.100.0/28"], "network_class": "b"}}))
        .await
        .ok();
    assert_eq!(
        pa["spec"]["network_class"], a["id"],
        "omitted = the default class"
    );
    assert_eq!(
        pb["spec"]["network_class"], b["id"],
        "a name is stored as the id"
    );
    s.admin
        .post(
            &pools,
            json!({"spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": ["192.0.2.0/28"], "network_class": "nope"}}),
        )
        .await
        .err(404, "NOT_FOUND", &["spec.network_class", "nope"]);
    s.admin
        .patch(
            &format!("{pools}/pb"),
            json!({"spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": ["198.51.100.0/28"], "network_class": "a"}}),
        )
        .await
        .err(
            400,
            "INVALID_ARGUMENT",
            &["spec.network_class", "immutable"],
        );
    for p in ["pa", "pb"] {
        s.admin
            .wait_for_state(PRIV, "external_ip_pools", p, "EXTERNAL_IP_POOL_STATE_READY")
            .await;
    }
    let t = s.tenant("acme").await;
    let seen = t.get(&format!("{PUB}/external_ip_pools/pb")).await.ok();
    assert_eq!(
        seen["spec"]["network_class"], b["id"],
        "tenants see a pool's class"
    );

    let vn = t
        .create(
            "virtual_networks",
            json!({"metadata": {"name": "vb"}, "spec": {"network_class": "b", "ipv4_cidr": "10.5.0.0/16"}}),
        )
        .await;
    t.wait("virtual_networks", "vb", "VIRTUAL_NETWORK_STATE_READY")
        .await;
    t.ready_subnet("sb", "vb", "10.5.1.0/24").await;
    let vm = t
        .create(
            "compute_instances",
            json!({"metadata": {"name": "vm"}, "spec": {"template": "small", "compute_network_attachments": [{"subnet": "sb"}], "auto_external_ip_attachment": true}}),
        )
        .await;
    let filter = format!(
        "this.metadata.labels[\"osac.openshift.io/auto-provisioned-for\"] == \"{}\"",
        id(&vm)
    );
    let auto = t
        .list("external_ips", &[("filter", filter.as_str())])
        .await
        .ok();
    let auto = auto["items"][0].clone();
    assert_eq!(
        auto["spec"]["pool"], pb["id"],
        "the pool of the network's class: {auto}"
    );
    let auto = t
        .wait("external_ips", &id(&auto), "EXTERNAL_IP_STATE_ALLOCATED")
        .await;
    let fab_a = s.server().registry.sim_fabric("fab-a").unwrap();
    let fab_b = s.server().registry.sim_fabric("fab-b").unwrap();
    let addresses = |f: &std::sync::Arc<osac_backends::sim::SimFabric>| {
        let f = f.clone();
        async move {
            f.external_addresses()
                .await
                .into_iter()
                .map(|e| e.address.to_string())
                .collect::<Vec<_>>()
        }
    };
    let address = auto["status"]["address"].as_str().unwrap().to_string();
    assert!(address.starts_with("198.51.100."), "{auto}");
    assert_eq!(
        addresses(&fab_b).await,
        vec![address.clone()],
        "allocated by class b's fabric"
    );
    assert!(addresses(&fab_a).await.is_empty());

    // Without a network concerned, the default class's pools; such an address cannot serve a
    // NAT gateway of class b's network.
    let plain = t.allocated_eip("plain", "").await;
    assert_eq!(plain["spec"]["pool"], pa["id"]);
    assert_eq!(
        addresses(&fab_a).await,
        vec![plain["status"]["address"].as_str().unwrap().to_string()]
    );
    t.post(
        &format!("{PUB}/nat_gateways"),
        json!({"spec": {"virtual_network": "vb", "external_ip": "plain"}}),
    )
    .await
    .err(
        412,
        "FAILED_PRECONDITION",
        &[
            "spec.external_ip",
            "ExternalIPPool 'pa' of NetworkClass 'a'",
            "NetworkClass 'b'",
        ],
    );
    t.allocated_eip("nb", "pb").await;
    t.create(
        "nat_gateways",
        json!({"metadata": {"name": "nat"}, "spec": {"virtual_network": "vb", "external_ip": "nb"}}),
    )
    .await;
    t.wait("nat_gateways", "nat", "NAT_GATEWAY_STATE_READY")
        .await;

    // Release goes to the same fabric.
    t.delete(&format!("{PUB}/compute_instances/vm")).await.ok();
    t.wait_gone(PUB, "compute_instances", &id(&vm)).await;
    t.wait_gone(PUB, "external_ips", &id(&auto)).await;
    assert!(
        !addresses(&fab_b).await.contains(&address),
        "released by class b's fabric"
    );
    let _ = vn;
    s.finish().await;
}
