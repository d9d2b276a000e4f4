//! BareMetalInstanceTypes (docs/workloads.md): the provider's bare-metal flavors, checked
//! against the HostTypes serving them; instances that pick one (attachments checked against its
//! network ports, hosts chosen among its HostTypes'); what an instance hands the provisioner
//! (image, SSH key, user data, run strategy, restart trigger) and what the sim provisioner does
//! with it.

use osac_backends::provision::{PowerState, RunStrategy, SimMachine};
use serde_json::{Value, json};

use crate::common::*;

const ED25519: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBfYvH0mCVjGkdrZ5ZKZQ1S1nNv3UQtbyH5oEi4pb0mV alice@laptop";

fn port(name: &str, role: &str, kind: &str, speed: u32) -> Value {
    json!({"name": name, "role": role, "type": kind, "speed_gbps": speed})
}

/// The `gpu` type: the dev HostType's two fabric ports, its management port and its BMC.
fn gpu_type() -> Value {
    json!({
        "metadata": {"name": "gpu"},
        "spec": {
            "title": "GPU server",
            "description": "Two 100G fabric ports",
            "hardware": {"network_ports": [
                port("data-0", "fabric", "ethernet", 100),
                port("data-1", "fabric", "ethernet", 100),
                port("mgmt-0", "management", "ethernet", 1),
                port("bmc-0", "lifecycle", "ethernet", 1),
            ]},
            "host_types": ["bm-standard"]
        }
    })
}

/// Tenant `acme` with VN `net` and subnet `a`.
async fn tenant(s: &TestServer) -> Api {
    let t = s.tenant("acme").await;
    t.ready_vn("net", "10.0.0.0/16").await;
    t.ready_subnet("a", "net", "10.0.1.0/24").await;
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_provider_defines_types_that_tenants_read() {
    let s = TestServer::sqlite().await;
    let t = tenant(&s).await;
    let types = format!("{PRIV}/baremetal_instance_types");
    let ht = id(&s
        .admin
        .get(&format!("{PRIV}/host_types/bm-standard"))
        .await
        .ok());
    s.admin
        .post(
            &format!("{PRIV}/host_types"),
            json!({"metadata": {"name": "ib-host"}, "interfaces": [
                {"name": "ib-0", "role": "fabric"}, {"name": "data-0", "role": "storage"}
            ]}),
        )
        .await
        .ok();

    // Refused: a port the HostType lacks, a role that differs, an unknown HostType, bad values.
    let with = |f: &dyn Fn(&mut Value)| {
        let mut b = gpu_type();
        f(&mut b);
        b
    };
    let cases: Vec<(Value, u16, Vec<&str>)> = vec![
        (
            with(&|b| {
                b["spec"]["hardware"]["network_ports"] = json!([
                    port("ib-0", "fabric", "infiniband", 400),
                    port("data-1", "fabric", "ethernet", 100)
                ]);
                b["spec"]["host_types"] = json!(["ib-host"]);
            }),
            400,
            vec![
                "spec.host_types[0]",
                "HostType 'ib-host' has no interface 'data-1'",
            ],
        ),
        (
            with(&|b| {
                b["spec"]["hardware"]["network_ports"] =
                    json!([port("data-0", "fabric", "ethernet", 100)]);
                b["spec"]["host_types"] = json!(["bm-standard", "ib-host"]);
            }),
            400,
            vec![
                "spec.host_types[1]",
                "has role 'storage'",
                "has role 'fabric'",
            ],
        ),
        (
            with(&|b| b["spec"]["host_types"] = json!(["nope"])),
            404,
            vec!["spec.host_types[0]", "HostType 'nope' does not exist"],
        ),
        (
            with(&|b| b["spec"]["host_types"] = json!([])),
            400,
            vec!["spec.host_types", "at least one HostType"],
        ),
        (
            with(&|b| b["spec"]["hardware"]["network_ports"][0]["speed_gbps"] = json!(0)),
            400,
            vec!["spec.hardware.network_ports[0].speed_gbps", "1 to 1600"],
        ),
        (
            with(&|b| b["spec"]["hardware"]["network_ports"][1]["type"] = json!("fddi")),
            400,
            vec![
                "spec.hardware.network_ports[1].type",
                "ethernet, infiniband",
            ],
        ),
        (
            with(&|b| b["spec"]["hardware"]["network_ports"][2]["role"] = json!("uplink")),
            400,
            vec!["spec.hardware.network_ports[2].role"],
        ),
    ];
    for (body, status, fragments) in cases {
        let r = s.admin.post(&types, body.clone()).await;
        let code = if status == 404 {
            "NOT_FOUND"
        } else {
            "INVALID_ARGUMENT"
        };
        r.err(status, code, &fragments);
    }
    assert_eq!(s.admin.get(&types).await.ok()["total"], 0, "nothing stored");

    // Stored with its HostTypes as ids; tenants read it, never write it.
    let gpu = s.admin.post(&types, gpu_type()).await.ok();
    assert_eq!(gpu["spec"]["host_types"], json!([ht]));
    let seen = t
        .get(&format!("{PUB}/baremetal_instance_types/gpu"))
        .await
        .ok();
    assert_eq!(seen["spec"]["hardware"], gpu_type()["spec"]["hardware"]);
    t.post(&format!("{PUB}/baremetal_instance_types"), gpu_type())
        .await
        .err(405, "METHOD_NOT_ALLOWED", &["POST"]);
    t.delete(&format!("{PUB}/baremetal_instance_types/gpu"))
        .await
        .err(405, "METHOD_NOT_ALLOWED", &["DELETE"]);

    // Title changes; the hardware does not; the HostTypes may, re-checked.
    s.admin
        .patch(
            &format!("{types}/gpu"),
            json!({"spec": {"title": "GPU v2"}}),
        )
        .await
        .ok();
    s.admin
        .patch(
            &format!("{types}/gpu"),
            json!({"spec": {"hardware": {"network_ports": [port("data-0", "fabric", "ethernet", 400)]}}}),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.hardware is immutable"]);
    s.admin
        .patch(
            &format!("{types}/gpu"),
            json!({"spec": {"host_types": ["bm-standard", "ib-host"]}}),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.host_types[1]", "ib-host"]);

    // A HostType serving a type cannot change its interfaces nor go.
    s.admin
        .delete(&format!("{PRIV}/host_types/bm-standard"))
        .await
        .err(412, "FAILED_PRECONDITION", &["bm-standard"]);
    s.admin.delete(&format!("{types}/gpu")).await.ok();
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_of_a_type_are_checked_against_its_ports() {
    let s = TestServer::sqlite().await;
    let t = tenant(&s).await;
    s.admin
        .post(&format!("{PRIV}/baremetal_instance_types"), gpu_type())
        .await
        .ok();
    s.admin
        .post(
            &format!("{PRIV}/host_types"),
            json!({"metadata": {"name": "other-bm"}, "interfaces": [
                {"name": "data-0", "role": "fabric"}, {"name": "data-1", "role": "fabric"}
            ]}),
        )
        .await
        .ok();
    let bm = |name: &str, spec: Value| {
        let mut body = json!({"metadata": {"name": name}, "spec": spec});
        body["spec"]["instance_type"] = json!("gpu");
        body
    };
    let path = format!("{PUB}/baremetal_instances");
    let cases: Vec<(Value, u16, Vec<&str>)> = vec![
        (
            bm(
                "x",
                json!({"network_attachments": [{"subnet": "a", "interface": "eth9"}]}),
            ),
            400,
            vec![
                "spec.network_attachments[0].interface",
                "BareMetalInstanceType 'gpu' has no interface 'eth9'",
            ],
        ),
        (
            bm(
                "x",
                json!({"network_attachments": [{"subnet": "a", "interface": "bmc-0"}]}),
            ),
            400,
            vec!["lifecycle", "never tenant-attachable"],
        ),
        (
            bm("x", json!({"host_type": "other-bm"})),
            400,
            vec![
                "spec.host_type",
                "spec.instance_type",
                "does not serve BareMetalInstanceType 'gpu'",
            ],
        ),
        (
            bm("x", json!({"ssh_public_key": "ssh-ed25519 not-a-key"})),
            400,
            vec!["spec.ssh_public_key", "not an OpenSSH public key"],
        ),
        (
            bm("x", json!({"user_data": "x".repeat(64 * 1024 + 1)})),
            400,
            vec!["spec.user_data", "at most 65536 bytes"],
        ),
        (
            bm("x", json!({"run_strategy": "SOMETIMES"})),
            400,
            vec!["run_strategy"],
        ),
        (
            json!({"metadata": {"name": "x"}, "spec": {"instance_type": "nope"}}),
            404,
            vec![
                "spec.instance_type",
                "BareMetalInstanceType 'nope' does not exist",
            ],
        ),
    ];
    for (body, status, fragments) in cases {
        let code = if status == 404 {
            "NOT_FOUND"
        } else {
            "INVALID_ARGUMENT"
        };
        t.post(&path, body).await.err(status, code, &fragments);
    }
    assert_eq!(t.list("baremetal_instances", &[]).await.ok()["total"], 0);

    // Stored: the type as an id, no HostType (any serving HostType), the first fabric port;
    // user data longer than other strings may be is accepted.
    let gpu_id = id(&t
        .get(&format!("{PUB}/baremetal_instance_types/gpu"))
        .await
        .ok());
    let a = id(&t.get(&format!("{PUB}/subnets/a")).await.ok());
    let user_data = format!("#cloud-config\n{}", "# padding\n".repeat(600));
    let made = t
        .create(
            "baremetal_instances",
            bm(
                "one",
                json!({"ssh_public_key": ED25519, "user_data": user_data, "image": "rhel-9.4",
                    "network_attachments": [{"subnet": "a"}]}),
            ),
        )
        .await;
    assert_eq!(made["spec"]["instance_type"], gpu_id);
    assert_eq!(made["spec"]["host_type"], Value::Null);
    assert_eq!(
        made["spec"]["network_attachments"],
        json!([{"subnet": a, "interface": "data-0", "primary": true}])
    );
    assert_eq!(made["spec"]["user_data"], user_data);
    // Both set and consistent is fine.
    t.create(
        "baremetal_instances",
        bm("two", json!({"host_type": "bm-standard", "network_attachments": [{"subnet": "a", "interface": "mgmt-0"}]})),
    )
    .await;

    // Installation fields are immutable; the run strategy and restart trigger are not.
    let one = format!("{path}/one");
    t.patch(&one, json!({"spec": {"image": "ubuntu"}}))
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.image is immutable"]);
    t.patch(&one, json!({"spec": {"ssh_public_key": ""}}))
        .await
        .err(
            400,
            "INVALID_ARGUMENT",
            &["spec.ssh_public_key is immutable"],
        );
    t.patch(&one, json!({"spec": {"instance_type": ""}}))
        .await
        .err(
            400,
            "INVALID_ARGUMENT",
            &["spec.instance_type is immutable"],
        );
    t.patch(&one, json!({"spec": {"restart_trigger": "r".repeat(254)}}))
        .await
        .err(
            400,
            "INVALID_ARGUMENT",
            &["spec.restart_trigger", "at most 253"],
        );
    let changed = t
        .patch(
            &one,
            json!({"spec": {"run_strategy": "BARE_METAL_RUN_STRATEGY_HALTED", "restart_trigger": "1"}}),
        )
        .await
        .ok();
    assert_eq!(
        changed["spec"]["run_strategy"],
        "BARE_METAL_RUN_STRATEGY_HALTED"
    );

    // The type cannot go while instances are of it.
    s.admin
        .delete(&format!("{PRIV}/baremetal_instance_types/gpu"))
        .await
        .err(
            412,
            "FAILED_PRECONDITION",
            &["BareMetalInstanceType 'gpu' cannot be deleted"],
        );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_provisioner_gets_the_machine_fields_and_follows_the_run_strategy() {
    let s = TestServer::sqlite().await;
    let t = tenant(&s).await;
    s.admin
        .post(&format!("{PRIV}/baremetal_instance_types"), gpu_type())
        .await
        .ok();
    let made = t
        .create(
            "baremetal_instances",
            json!({"metadata": {"name": "srv"}, "spec": {
                "instance_type": "gpu", "image": "rhel-9.4", "ssh_public_key": ED25519,
                "user_data": "#cloud-config\nhostname: srv\n",
                "run_strategy": "BARE_METAL_RUN_STRATEGY_HALTED",
                "network_attachments": [{"subnet": "a"}]
            }}),
        )
        .await;
    let srv = id(&made);
    // HALTED: installed on a host of a serving HostType, powered off, no address awaited.
    let halted = t
        .wait(
            "baremetal_instances",
            "srv",
            "BARE_METAL_INSTANCE_STATE_RUNNING",
        )
        .await;
    let ready = halted["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(ready["reason"], "Halted", "{halted}");
    assert_eq!(halted["status"]["internal_ip_address"], Value::Null);
    let host = halted["status"]["host"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let host_rec = s.admin.get(&format!("{PRIV}/hosts/{host}")).await.ok();
    assert_eq!(host_rec["spec"]["pool"], "baremetal");
    let p = s.provisioner();
    let Some(SimMachine::BareMetal(req)) = p.machine(&srv).await else {
        panic!("no bare-metal machine recorded for {srv}");
    };
    assert_eq!(req.image, "rhel-9.4");
    assert_eq!(req.ssh_public_key, ED25519);
    assert_eq!(req.user_data, "#cloud-config\nhostname: srv\n");
    assert_eq!(req.run_strategy, RunStrategy::Halted);
    assert_eq!(p.power_state(&srv).await, Some(PowerState::Off));

    // ALWAYS: powered on, addresses discovered.
    t.patch(
        &format!("{PUB}/baremetal_instances/srv"),
        json!({"spec": {"run_strategy": "BARE_METAL_RUN_STRATEGY_ALWAYS"}}),
    )
    .await
    .ok();
    t.wait_until(
        &format!("{PUB}/baremetal_instances/srv"),
        "an address",
        |v| v["status"]["internal_ip_address"].is_string(),
    )
    .await;
    assert_eq!(p.power_state(&srv).await, Some(PowerState::On));
    assert_eq!(p.restart_count(&srv), 0);

    // A new restart trigger restarts it once.
    t.patch(
        &format!("{PUB}/baremetal_instances/srv"),
        json!({"spec": {"restart_trigger": "2026-12-05T12:00:00Z"}}),
    )
    .await
    .ok();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while p.restart_count(&srv) == 0 {
        assert!(std::time::Instant::now() < until, "no restart");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(p.power_state(&srv).await, Some(PowerState::On));
    s.finish().await;
}
