//! Workloads end to end through REST with the sim fabric and the sim provisioner
//! (docs/workloads.md): VMs, bare-metal instances and clusters reach RUNNING/READY with
//! addresses from their subnets; inbound access through ExternalIPAttachments created before the
//! target has an IP; inventory exhaustion; injected failures; deletion; restarts mid-flow.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use osac_backends::provision::{ProvisionOp, SimMachine};
use osac_backends::sim::PortLocation;
use osac_backends::{FailureKind, Operation};
use serde_json::{Value, json};

use crate::both_backends;
use crate::common::*;

/// Tenant `acme` with VN `net` (10.0.0.0/16), subnets `a` (10.0.1.0/24) and `b`
/// (10.0.2.0/24), SG `web`.
async fn network(s: &TestServer) -> Api {
    let t = s.tenant("acme").await;
    t.ready_vn("net", "10.0.0.0/16").await;
    t.ready_subnet("a", "net", "10.0.1.0/24").await;
    t.ready_subnet("b", "net", "10.0.2.0/24").await;
    t.ready_sg("web", "net").await;
    t
}

fn ip(v: &Value) -> Ipv4Addr {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an IPv4 address: {v}"))
}

fn net(cidr: &str) -> Ipv4Net {
    cidr.parse().expect("cidr")
}

/// Every condition of `types` is TRUE.
#[track_caller]
fn all_true(obj: &Value, types: &[&str]) {
    for ty in types {
        let c = condition(obj, ty).unwrap_or_else(|| panic!("no condition {ty}: {obj}"));
        assert_eq!(c["status"], "CONDITION_STATUS_TRUE", "{ty}: {obj}");
    }
}

async fn get_id(api: &Api, prefix: &str, collection: &str, key: &str) -> String {
    id(&api.get(&format!("{prefix}/{collection}/{key}")).await.ok())
}

/// The MAC of a dev host's interface (see `osac_server::dev::dev_hosts`).
async fn host_mac(s: &TestServer, host: &str, interface: &str) -> String {
    let h = s.admin.get(&format!("{PRIV}/hosts/{host}")).await.ok();
    h["spec"]["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == interface)
        .map(|i| i["mac_address"].as_str().unwrap().to_string())
        .unwrap()
}

async fn host_state(s: &TestServer, host: &str) -> Value {
    s.admin.get(&format!("{PRIV}/hosts/{host}")).await.ok()["status"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vm_and_bare_metal_on_one_subnet() {
    let s = TestServer::sqlite().await;
    let t = network(&s).await;
    let a = get_id(&t, PUB, "subnets", "a").await;
    let web = get_id(&t, PUB, "security_groups", "web").await;
    let vm = t
        .create(
            "compute_instances",
            vm_body("vm", json!([{"subnet": "a", "security_groups": ["web"]}])),
        )
        .await;
    let bm = t.create_bm("bm", "a").await;
    let vm = t
        .wait(
            "compute_instances",
            &id(&vm),
            "COMPUTE_INSTANCE_STATE_RUNNING",
        )
        .await;
    let bm = t
        .wait(
            "baremetal_instances",
            &id(&bm),
            "BARE_METAL_INSTANCE_STATE_RUNNING",
        )
        .await;
    let subnet = net("10.0.1.0/24");
    let vip = net(
        t.get(&format!("{PUB}/subnets/a")).await.ok()["status"]["vip_cidr"]
            .as_str()
            .unwrap(),
    );

    // The VM: one attachment, primary, an address of the subnet (never of the VIP block).
    all_true(
        &vm,
        &["NetworkingConfigured", "Provisioned", "IPDiscoveryComplete"],
    );
    let st = &vm["status"]["compute_network_attachment_statuses"];
    assert_eq!(st.as_array().unwrap().len(), 1, "{vm}");
    assert_eq!(st[0]["subnet_ref"], a);
    assert_eq!(st[0]["primary"], true);
    let vm_ip = ip(&st[0]["ip_address"]);
    assert!(subnet.contains(&vm_ip) && !vip.contains(&vm_ip), "{vm_ip}");
    assert_eq!(ip(&vm["status"]["internal_ip_address"]), vm_ip);

    // The bare-metal instance: the first FREE baremetal host (name order), data-0.
    all_true(
        &bm,
        &[
            "InventoryAssigned",
            "NetworkingConfigured",
            "ProvisioningComplete",
            "IPDiscoveryComplete",
            "Ready",
        ],
    );
    let host = get_id(&s.admin, PRIV, "hosts", "baremetal-0").await;
    assert_eq!(bm["status"]["host"], host);
    let st = &bm["status"]["network_attachment_statuses"];
    assert_eq!(st[0]["interface"], "data-0");
    assert_eq!(st[0]["subnet_ref"], a);
    assert_eq!(st[0]["primary"], true);
    let bm_ip = ip(&st[0]["ip_address"]);
    assert!(subnet.contains(&bm_ip) && !vip.contains(&bm_ip), "{bm_ip}");
    assert_ne!(vm_ip, bm_ip);
    assert_eq!(ip(&bm["status"]["internal_ip_address"]), bm_ip);
    let hs = host_state(&s, "baremetal-0").await;
    assert_eq!(hs["state"], "HOST_STATE_ASSIGNED");
    assert_eq!(hs["assigned_to"], bm["id"]);
    assert_eq!(
        host_state(&s, "baremetal-1").await["state"],
        "HOST_STATE_FREE"
    );

    // The fabric: one port each, with the inventory MAC for bare metal and the SGs.
    let sim = s.sim_fabric();
    let vm_port = sim
        .network_attachment(&format!("{}/0", id(&vm)))
        .await
        .expect("VM port");
    assert_eq!(
        (vm_port.subnet_id.as_str(), vm_port.primary),
        (a.as_str(), true)
    );
    assert_eq!(vm_port.security_groups, vec![web.clone()]);
    assert!(vm_port.mac_address.starts_with("02:"), "{vm_port:?}");
    let bm_port = sim
        .network_attachment(&format!("{}/0", id(&bm)))
        .await
        .expect("BM port");
    assert_eq!(bm_port.host, host);
    assert_eq!(bm_port.interface, "data-0");
    assert_eq!(
        bm_port.mac_address,
        host_mac(&s, "baremetal-0", "data-0").await
    );
    let prov = s.provisioner();
    assert!(matches!(
        prov.machine(&id(&vm)).await,
        Some(SimMachine::Vm(_))
    ));
    assert!(matches!(
        prov.machine(&id(&bm)).await,
        Some(SimMachine::BareMetal(_))
    ));

    // Deletion undoes everything: machines, ports, the host reservation.
    t.delete(&format!("{PUB}/compute_instances/vm")).await.ok();
    t.delete(&format!("{PUB}/baremetal_instances/bm"))
        .await
        .ok();
    t.wait_gone(PUB, "compute_instances", &id(&vm)).await;
    t.wait_gone(PUB, "baremetal_instances", &id(&bm)).await;
    assert!(
        sim.network_attachment(&format!("{}/0", id(&vm)))
            .await
            .is_none()
    );
    assert!(
        sim.network_attachment(&format!("{}/0", id(&bm)))
            .await
            .is_none()
    );
    assert_eq!(prov.machine_count().await, 0);
    let hs = host_state(&s, "baremetal-0").await;
    assert_eq!(hs["state"], "HOST_STATE_FREE");
    assert!(hs.get("assigned_to").is_none(), "{hs}");
    // Nothing uses the subnet any more.
    t.delete(&format!("{PUB}/subnets/a")).await.ok();
    t.wait_gone(PUB, "subnets", &a).await;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_homed_bare_metal_with_primary_second() {
    let s = TestServer::sqlite().await;
    let t = network(&s).await;
    let (a, b, web) = (
        get_id(&t, PUB, "subnets", "a").await,
        get_id(&t, PUB, "subnets", "b").await,
        get_id(&t, PUB, "security_groups", "web").await,
    );
    let bm = t
        .create(
            "baremetal_instances",
            bm_body(
                "mh",
                json!([
                    {"subnet": "a", "interface": "data-0"},
                    {"subnet": "b", "interface": "data-1", "primary": true}
                ]),
            ),
        )
        .await;
    let bm = t
        .wait(
            "baremetal_instances",
            &id(&bm),
            "BARE_METAL_INSTANCE_STATE_RUNNING",
        )
        .await;
    let st = bm["status"]["network_attachment_statuses"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(st.len(), 2, "{bm}");
    assert_eq!(
        (
            &st[0]["interface"],
            &st[0]["subnet_ref"],
            st[0].get("primary")
        ),
        (&json!("data-0"), &json!(a), None)
    );
    assert_eq!(
        (&st[1]["interface"], &st[1]["subnet_ref"], &st[1]["primary"]),
        (&json!("data-1"), &json!(b), &json!(true))
    );
    assert!(net("10.0.1.0/24").contains(&ip(&st[0]["ip_address"])));
    assert!(net("10.0.2.0/24").contains(&ip(&st[1]["ip_address"])));
    // The primary interface's address is the instance's address (DNAT and SNAT use it).
    assert_eq!(bm["status"]["internal_ip_address"], st[1]["ip_address"]);
    let sim = s.sim_fabric();
    let p0 = sim
        .network_attachment(&format!("{}/0", id(&bm)))
        .await
        .unwrap();
    let p1 = sim
        .network_attachment(&format!("{}/1", id(&bm)))
        .await
        .unwrap();
    assert!(!p0.primary && p1.primary);
    assert_eq!(p1.mac_address, host_mac(&s, "baremetal-0", "data-1").await);
    let Some(SimMachine::BareMetal(m)) = s.provisioner().machine(&id(&bm)).await else {
        panic!("no machine")
    };
    assert_eq!(
        m.nics
            .iter()
            .map(|n| (n.name.as_str(), n.primary))
            .collect::<Vec<_>>(),
        [("data-0", false), ("data-1", true)]
    );

    // Security groups are the one mutable part: the change is re-applied to the port.
    t.patch(
        &format!("{PUB}/baremetal_instances/mh"),
        json!({"spec": {"network_attachments": [
            {"subnet": "a", "security_groups": ["web"]},
            {"subnet": "b"}
        ]}}),
    )
    .await
    .ok();
    let start = std::time::Instant::now();
    loop {
        let p = sim
            .network_attachment(&format!("{}/0", id(&bm)))
            .await
            .unwrap();
        if p.security_groups == vec![web.clone()] {
            break;
        }
        assert!(start.elapsed() < WAIT, "SG not applied: {p:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let bm = t
        .wait(
            "baremetal_instances",
            "mh",
            "BARE_METAL_INSTANCE_STATE_RUNNING",
        )
        .await;
    assert_eq!(bm["status"]["internal_ip_address"], st[1]["ip_address"]);
    s.finish().await;
}

/// A three-node cluster whose API and ingress ExternalIPAttachments exist before it has VIPs;
/// the provisioning phase fails (transiently) until the server restarts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_with_external_access() {
    let mut s = TestServer::sqlite().await;
    let t = network(&s).await;
    let a = get_id(&t, PUB, "subnets", "a").await;
    let vip = net(
        t.get(&format!("{PUB}/subnets/a")).await.ok()["status"]["vip_cidr"]
            .as_str()
            .unwrap(),
    );
    let api_ip = t.allocated_eip("api-ip", "").await;
    let ingress_ip = t.allocated_eip("ingress-ip", "").await;

    let mut ctl = s.pause().await;
    let c = t
        .create("clusters", cluster_body("k", "a", json!(["web"]), 3))
        .await;
    let eipa = |name: &str, eip: &str, endpoint: &str| json!({"metadata": {"name": name}, "spec": {"external_ip": eip, "cluster": "k", "target_endpoint": endpoint}});
    let api = t
        .create(
            "external_ip_attachments",
            eipa("api", "api-ip", "EXTERNAL_IP_ATTACHMENT_ENDPOINT_API"),
        )
        .await;
    assert_eq!(api["spec"]["cluster"], c["id"]);
    assert_eq!(
        api["status"]["state"],
        "EXTERNAL_IP_ATTACHMENT_STATE_PENDING"
    );
    t.create(
        "external_ip_attachments",
        eipa(
            "ingress",
            "ingress-ip",
            "EXTERNAL_IP_ATTACHMENT_ENDPOINT_INGRESS",
        ),
    )
    .await;
    ctl.provisioner.inject_failure(
        ProvisionOp::ProvisionCluster,
        &id(&c),
        u32::MAX,
        FailureKind::Transient,
    );
    ctl.run();
    t.wait_until(
        &format!("{PUB}/external_ip_attachments/api"),
        "the waiting message",
        |o| {
            o["status"]["state"] == "EXTERNAL_IP_ATTACHMENT_STATE_PENDING"
                && o["status"]["message"] == "waiting for Cluster 'k' to have an API VIP"
        },
    )
    .await;
    t.wait_until(
        &format!("{PUB}/external_ip_attachments/ingress"),
        "the waiting message",
        |o| o["status"]["message"] == "waiting for Cluster 'k' to have an ingress VIP",
    )
    .await;
    // Hosts reserved, agents on the subnet with addresses; provisioning retries.
    let waiting = t
        .wait_until(&format!("{PUB}/clusters/k"), "provisioning retries", |o| {
            condition(o, "ProvisioningComplete")
                .is_some_and(|c| c["message"].as_str().unwrap_or("").contains("injected"))
        })
        .await;
    all_true(
        &waiting,
        &[
            "InventoryAssigned",
            "NetworkingConfigured",
            "IPDiscoveryComplete",
        ],
    );
    assert_eq!(waiting["status"]["state"], "CLUSTER_STATE_PROGRESSING");
    ctl.stop().await;

    // A restart (fresh provisioner, no failure) converges.
    s.restart().await;
    let c = t.wait("clusters", "k", "CLUSTER_STATE_READY").await;
    let api_vip = ip(&c["status"]["api_endpoint"]);
    let ingress_vip = ip(&c["status"]["ingress_endpoint"]);
    assert!(vip.contains(&api_vip) && vip.contains(&ingress_vip), "{c}");
    assert_ne!(api_vip, ingress_vip);
    assert_eq!(
        api_vip,
        vip.hosts().next().unwrap(),
        "lowest free VIP first"
    );
    let agents = c["status"]["node_sets"]["workers"]["agents"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(agents.len(), 3, "{c}");
    let mut agent_hosts = Vec::new();
    for agent in &agents {
        let a_ip = ip(&agent["ip_address"]);
        assert!(net("10.0.1.0/24").contains(&a_ip) && !vip.contains(&a_ip));
        agent_hosts.push(agent["host"].as_str().unwrap().to_string());
    }
    let mut caas = Vec::new();
    for i in 0..3 {
        caas.push(get_id(&s.admin, PRIV, "hosts", &format!("caas-{i}")).await);
    }
    agent_hosts.sort();
    caas.sort();
    assert_eq!(agent_hosts, caas, "the first caas hosts by name");
    let sim = s.sim_fabric();
    for h in &caas {
        assert_eq!(
            sim.port(h, "data-0").await,
            Some(PortLocation::Attached {
                attachment_id: osac_controller::agent_attachment_id(&id(&c), h),
                subnet_id: a.clone()
            })
        );
    }
    for i in 0..3 {
        let hs = host_state(&s, &format!("caas-{i}")).await;
        assert_eq!(
            (&hs["state"], &hs["assigned_to"]),
            (&json!("HOST_STATE_ASSIGNED"), &c["id"])
        );
    }
    // Inbound access to both endpoints.
    for (name, eip, target) in [
        ("api", &api_ip, api_vip),
        ("ingress", &ingress_ip, ingress_vip),
    ] {
        let att = t
            .wait(
                "external_ip_attachments",
                name,
                "EXTERNAL_IP_ATTACHMENT_STATE_READY",
            )
            .await;
        assert_eq!(ip(&att["status"]["target_ip"]), target);
        assert_eq!(
            att["status"]["external_ip_address"],
            eip["status"]["address"]
        );
        let rule = sim
            .dnat_rules()
            .await
            .into_iter()
            .find(|r| r.attachment_id == id(&att))
            .expect("DNAT rule");
        assert_eq!(rule.target_ip.to_string(), target.to_string());
    }
    // The cluster shows the external addresses of its API and ingress endpoints.
    let api_address = api_ip["status"]["address"].clone();
    let ingress_address = ingress_ip["status"]["address"].clone();
    t.wait_until(
        &format!("{PUB}/clusters/{}", id(&c)),
        "status.external_ip_address and status.ingress_external_ip_address",
        |o| {
            o["status"]["external_ip_address"] == api_address
                && o["status"]["ingress_external_ip_address"] == ingress_address
        },
    )
    .await;
    // The ExternalIPs cannot go while attached.
    t.delete(&format!("{PUB}/external_ips/api-ip")).await.err(
        412,
        "FAILED_PRECONDITION",
        &["ExternalIPAttachment 'api'"],
    );

    // Deleting the cluster: VIPs released, agents parked and FREE, attachments PENDING.
    t.delete(&format!("{PUB}/clusters/k")).await.ok();
    t.wait_gone(PUB, "clusters", &id(&c)).await;
    for h in &caas {
        assert_eq!(sim.port(h, "data-0").await, Some(PortLocation::Parked));
    }
    for i in 0..3 {
        assert_eq!(
            host_state(&s, &format!("caas-{i}")).await["state"],
            "HOST_STATE_FREE"
        );
    }
    let att = t
        .wait_until(
            &format!("{PUB}/external_ip_attachments/api"),
            "PENDING after the target is gone",
            |o| {
                // (While the cluster was being deleted it said so; then it is gone, and the
                // attachment waits for a cluster of that name again.)
                o["status"]["state"] == "EXTERNAL_IP_ATTACHMENT_STATE_PENDING"
                    && o["status"]["message"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("waiting for Cluster 'k' to be created")
            },
        )
        .await;
    assert_eq!(
        att["status"]["state"], "EXTERNAL_IP_ATTACHMENT_STATE_PENDING",
        "{att}"
    );
    let start = std::time::Instant::now();
    while !sim.dnat_rules().await.is_empty() {
        assert!(start.elapsed() < WAIT, "DNAT rules left");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(s.provisioner().machine_count().await, 0);
    s.finish().await;
}

/// ExternalIPAttachments for a VM and a bare-metal instance, created before either has an IP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_access_to_vm_and_bare_metal() {
    let mut s = TestServer::sqlite().await;
    let t = network(&s).await;
    let vm_eip = t.allocated_eip("vm-ip", "").await;
    let bm_eip = t.allocated_eip("bm-ip", "").await;
    let mut ctl = s.pause().await;
    let vm = t
        .create(
            "compute_instances",
            vm_body("vm", json!([{"subnet": "a", "security_groups": ["web"]}])),
        )
        .await;
    t.create_bm("bm", "a").await;
    for (name, eip, field, target) in [
        ("to-vm", "vm-ip", "compute_instance", "vm"),
        ("to-bm", "bm-ip", "baremetal_instance", "bm"),
    ] {
        t.create(
            "external_ip_attachments",
            json!({"metadata": {"name": name}, "spec": {"external_ip": eip, field: target}}),
        )
        .await;
    }
    // Both machines are slow to get their DHCP lease.
    let vm_mac = osac_controller::vm_mac(&id(&vm), 0);
    let bm_mac = host_mac(&s, "baremetal-0", "data-0").await;
    let sim = ctl.sim_fabric();
    sim.hold_lease(&vm_mac, u32::MAX);
    sim.hold_lease(&bm_mac, u32::MAX);
    ctl.run();
    for (name, what) in [
        (
            "to-vm",
            "waiting for ComputeInstance 'vm' to have a primary IP",
        ),
        (
            "to-bm",
            "waiting for BareMetalInstance 'bm' to have a primary IP",
        ),
    ] {
        t.wait_until(
            &format!("{PUB}/external_ip_attachments/{name}"),
            what,
            |o| {
                o["status"]["state"] == "EXTERNAL_IP_ATTACHMENT_STATE_PENDING"
                    && o["status"]["message"] == what
            },
        )
        .await;
    }
    let waiting = t
        .wait_until(
            &format!("{PUB}/compute_instances/vm"),
            "IP discovery waiting",
            |o| {
                condition(o, "IPDiscoveryComplete")
                    .is_some_and(|c| c["status"] == "CONDITION_STATUS_FALSE")
            },
        )
        .await;
    assert_eq!(
        waiting["status"]["state"],
        "COMPUTE_INSTANCE_STATE_STARTING"
    );
    assert_eq!(
        condition(&waiting, "IPDiscoveryComplete").unwrap()["reason"],
        "WaitingForLease"
    );
    sim.hold_lease(&vm_mac, 0);
    sim.hold_lease(&bm_mac, 0);
    let vm = t
        .wait("compute_instances", "vm", "COMPUTE_INSTANCE_STATE_RUNNING")
        .await;
    let bm = t
        .wait(
            "baremetal_instances",
            "bm",
            "BARE_METAL_INSTANCE_STATE_RUNNING",
        )
        .await;
    for (name, w, eip, collection) in [
        ("to-vm", &vm, &vm_eip, "compute_instances"),
        ("to-bm", &bm, &bm_eip, "baremetal_instances"),
    ] {
        let att = t
            .wait(
                "external_ip_attachments",
                name,
                "EXTERNAL_IP_ATTACHMENT_STATE_READY",
            )
            .await;
        assert_eq!(
            att["status"]["target_ip"],
            w["status"]["internal_ip_address"]
        );
        assert_eq!(
            att["status"]["external_ip_address"],
            eip["status"]["address"]
        );
        let address = eip["status"]["address"].clone();
        t.wait_until(
            &format!("{PUB}/{collection}/{}", id(w)),
            "status.external_ip_address",
            |o| o["status"]["external_ip_address"] == address,
        )
        .await;
    }
    assert_eq!(sim.dnat_rules().await.len(), 2);
    // Deleting the VM returns its attachment to PENDING and removes its DNAT.
    t.delete(&format!("{PUB}/compute_instances/vm")).await.ok();
    t.wait_gone(PUB, "compute_instances", &id(&vm)).await;
    t.wait_until(
        &format!("{PUB}/external_ip_attachments/to-vm"),
        "PENDING",
        |o| o["status"]["state"] == "EXTERNAL_IP_ATTACHMENT_STATE_PENDING",
    )
    .await;
    let start = std::time::Instant::now();
    while sim.dnat_rules().await.len() != 1 {
        assert!(start.elapsed() < WAIT, "the VM's DNAT rule stayed");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    ctl.stop().await;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inventory_exhaustion_waits_for_hosts() {
    let s = TestServer::sqlite().await;
    let t = network(&s).await;
    // Four baremetal hosts in dev mode: the fifth instance waits.
    for i in 0..5 {
        t.create_bm(&format!("bm-{i}"), "a").await;
    }
    // Six caas hosts: a seven-node cluster waits too.
    t.create("clusters", cluster_body("big", "b", json!([]), 7))
        .await;
    let mut running = 0;
    let mut waiting = Vec::new();
    for i in 0..5 {
        let path = format!("{PUB}/baremetal_instances/bm-{i}");
        let o = t
            .wait_until(&path, "RUNNING or waiting for a host", |o| {
                o["status"]["state"] == "BARE_METAL_INSTANCE_STATE_RUNNING"
                    || condition(o, "InventoryAssigned")
                        .is_some_and(|c| c["reason"] == "NoFreeHost")
            })
            .await;
        if o["status"]["state"] == "BARE_METAL_INSTANCE_STATE_RUNNING" {
            running += 1;
        } else {
            waiting.push(o);
        }
    }
    assert_eq!((running, waiting.len()), (4, 1));
    let w = &waiting[0];
    assert_eq!(
        w["status"]["state"],
        "BARE_METAL_INSTANCE_STATE_PROVISIONING"
    );
    let c = condition(w, "InventoryAssigned").unwrap();
    assert_eq!(c["status"], "CONDITION_STATUS_FALSE");
    assert!(!c["message"].as_str().unwrap_or("").is_empty(), "{w}");
    let big = t
        .wait_until(&format!("{PUB}/clusters/big"), "waiting for hosts", |o| {
            condition(o, "InventoryAssigned").is_some_and(|c| c["reason"] == "NoFreeHost")
        })
        .await;
    assert_eq!(big["status"]["state"], "CLUSTER_STATE_PROGRESSING");

    // New inventory unblocks both.
    let host = |name: &str, pool: &str, n: u8| {
        let interfaces: Vec<Value> = ["data-0", "data-1", "mgmt-0", "bmc-0"]
            .iter()
            .enumerate()
            .map(|(k, i)| json!({"name": i, "mac_address": format!("0a:00:00:00:{n:02x}:{k:02x}")}))
            .collect();
        json!({"metadata": {"name": name}, "spec": {"host_type": "bm-standard", "pool": pool, "interfaces": interfaces}})
    };
    s.admin
        .post(&format!("{PRIV}/hosts"), host("extra-bm", "baremetal", 1))
        .await
        .ok();
    s.admin
        .post(&format!("{PRIV}/hosts"), host("extra-caas", "caas", 2))
        .await
        .ok();
    let w = t
        .wait(
            "baremetal_instances",
            &id(w),
            "BARE_METAL_INSTANCE_STATE_RUNNING",
        )
        .await;
    assert_eq!(
        w["status"]["host"],
        json!(get_id(&s.admin, PRIV, "hosts", "extra-bm").await)
    );
    let big = t.wait("clusters", "big", "CLUSTER_STATE_READY").await;
    assert_eq!(
        big["status"]["node_sets"]["workers"]["agents"]
            .as_array()
            .unwrap()
            .len(),
        7
    );
    // A host in use cannot be deleted.
    s.admin.delete(&format!("{PRIV}/hosts/extra-bm")).await.err(
        412,
        "FAILED_PRECONDITION",
        &[
            "Host 'extra-bm' cannot be deleted",
            "ASSIGNED for BareMetalInstance",
        ],
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_failures_are_retried_or_fail_the_workload() {
    let mut s = TestServer::sqlite().await;
    let t = network(&s).await;
    let mut ctl = s.pause().await;
    let vm = t.create_vm("vm", "a").await;
    let bm = t.create_bm("bm", "b").await;
    let broken = t.create_bm("broken", "b").await;
    let sim = ctl.sim_fabric();
    sim.inject_failure(
        Operation::CreateNetworkAttachment,
        &format!("{}/0", id(&vm)),
        3,
        FailureKind::Transient,
    );
    sim.inject_failure(
        Operation::QueryDhcpLease,
        &osac_controller::vm_mac(&id(&vm), 0),
        2,
        FailureKind::Transient,
    );
    ctl.provisioner
        .inject_failure(ProvisionOp::BootVm, &id(&vm), 2, FailureKind::Transient);
    ctl.provisioner.inject_failure(
        ProvisionOp::ProvisionBareMetal,
        &id(&bm),
        2,
        FailureKind::Transient,
    );
    ctl.provisioner.inject_failure(
        ProvisionOp::ProvisionBareMetal,
        &id(&broken),
        1,
        FailureKind::Permanent,
    );
    ctl.run();
    t.wait("compute_instances", "vm", "COMPUTE_INSTANCE_STATE_RUNNING")
        .await;
    t.wait(
        "baremetal_instances",
        "bm",
        "BARE_METAL_INSTANCE_STATE_RUNNING",
    )
    .await;
    assert!(sim.call_count(Operation::CreateNetworkAttachment) >= 4);
    assert!(sim.call_count(Operation::QueryDhcpLease) >= 3);
    assert!(ctl.provisioner.call_count(ProvisionOp::BootVm) >= 3);
    assert!(ctl.provisioner.call_count(ProvisionOp::ProvisionBareMetal) >= 3);
    let failed = t
        .wait(
            "baremetal_instances",
            "broken",
            "BARE_METAL_INSTANCE_STATE_FAILED",
        )
        .await;
    assert!(
        failed["status"]["message"]
            .as_str()
            .unwrap()
            .contains("injected failure of ProvisionBareMetal"),
        "{failed}"
    );
    let c = condition(&failed, "ProvisioningComplete").unwrap();
    assert_eq!(
        (&c["status"], &c["reason"]),
        (&json!("CONDITION_STATUS_FALSE"), &json!("Failed"))
    );
    // A FAILED instance can be deleted; its host returns to the pool.
    let host = failed["status"]["host"].as_str().unwrap().to_string();
    t.delete(&format!("{PUB}/baremetal_instances/broken"))
        .await
        .ok();
    t.wait_gone(PUB, "baremetal_instances", &id(&broken)).await;
    assert_eq!(host_state(&s, &host).await["state"], "HOST_STATE_FREE");
    ctl.stop().await;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_ip_discovery_timeout_is_shown_and_retried() {
    let mut s = TestServer::sqlite().await;
    s.ip_discovery_timeout = std::time::Duration::from_millis(200);
    s.restart().await;
    let t = network(&s).await;
    let mac = host_mac(&s, "caas-0", "data-0").await;
    s.sim_fabric().hold_lease(&mac, u32::MAX);
    t.create("clusters", cluster_body("k", "a", json!([]), 1))
        .await;
    let c = t
        .wait_until(&format!("{PUB}/clusters/k"), "the timeout condition", |o| {
            condition(o, "NetworkingIPDiscoveryTimeout")
                .is_some_and(|c| c["status"] == "CONDITION_STATUS_TRUE")
        })
        .await;
    assert_eq!(c["status"]["state"], "CLUSTER_STATE_PROGRESSING");
    s.sim_fabric().hold_lease(&mac, 0);
    let c = t.wait("clusters", "k", "CLUSTER_STATE_READY").await;
    assert!(
        condition(&c, "NetworkingIPDiscoveryTimeout")
            .is_none_or(|c| c["status"] == "CONDITION_STATUS_FALSE"),
        "{c}"
    );
    s.finish().await;
}

both_backends!(restart_in_the_middle_converges);

/// Workloads stopped mid-flow (hosts reserved, ports attached, provisioning failing; a delete
/// failing) converge after a restart on the same database.
async fn restart_in_the_middle_converges(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    let t = network(&s).await;
    let doomed = t.create_vm("doomed", "b").await;
    t.wait(
        "compute_instances",
        "doomed",
        "COMPUTE_INSTANCE_STATE_RUNNING",
    )
    .await;
    let mut ctl = s.pause().await;
    let vm = t.create_vm("vm", "a").await;
    let bm = t
        .create(
            "baremetal_instances",
            bm_body(
                "bm",
                json!([{"subnet": "a", "interface": "data-0", "primary": true}, {"subnet": "b", "interface": "data-1"}]),
            ),
        )
        .await;
    let c = t
        .create("clusters", cluster_body("k", "a", json!([]), 2))
        .await;
    t.delete(&format!("{PUB}/compute_instances/doomed"))
        .await
        .ok();
    let p = &ctl.provisioner;
    p.inject_failure(
        ProvisionOp::BootVm,
        &id(&vm),
        u32::MAX,
        FailureKind::Transient,
    );
    p.inject_failure(
        ProvisionOp::ProvisionBareMetal,
        &id(&bm),
        u32::MAX,
        FailureKind::Transient,
    );
    p.inject_failure(
        ProvisionOp::ProvisionCluster,
        &id(&c),
        u32::MAX,
        FailureKind::Transient,
    );
    p.inject_failure(
        ProvisionOp::DeleteVm,
        &id(&doomed),
        u32::MAX,
        FailureKind::Transient,
    );
    ctl.run();
    let networked = |o: &Value| {
        condition(o, "NetworkingConfigured").is_some_and(|c| c["status"] == "CONDITION_STATUS_TRUE")
    };
    t.wait_until(&format!("{PUB}/compute_instances/vm"), "ports", networked)
        .await;
    let bm_mid = t
        .wait_until(&format!("{PUB}/baremetal_instances/bm"), "ports", networked)
        .await;
    let c_mid = t
        .wait_until(&format!("{PUB}/clusters/k"), "agents on the subnet", |o| {
            condition(o, "IPDiscoveryComplete")
                .is_some_and(|c| c["status"] == "CONDITION_STATUS_TRUE")
        })
        .await;
    t.wait_until(
        &format!("{PUB}/compute_instances/doomed"),
        "a failing delete",
        |o| {
            o["status"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("injected")
        },
    )
    .await;
    ctl.stop().await;

    s.restart().await;
    t.wait("compute_instances", "vm", "COMPUTE_INSTANCE_STATE_RUNNING")
        .await;
    let bm_done = t
        .wait(
            "baremetal_instances",
            "bm",
            "BARE_METAL_INSTANCE_STATE_RUNNING",
        )
        .await;
    assert_eq!(
        bm_done["status"]["host"], bm_mid["status"]["host"],
        "the reserved host is kept"
    );
    let c_done = t.wait("clusters", "k", "CLUSTER_STATE_READY").await;
    assert_eq!(
        c_done["status"]["node_sets"], c_mid["status"]["node_sets"],
        "the reserved agents are kept"
    );
    t.wait_gone(PUB, "compute_instances", &id(&doomed)).await;
    let sim = s.sim_fabric();
    assert!(
        sim.network_attachment(&format!("{}/0", id(&doomed)))
            .await
            .is_none()
    );
    // Exactly the hosts of the instance and the cluster are in use.
    let hosts = s.admin.get(&format!("{PRIV}/hosts")).await.ok();
    let used: Vec<&Value> = hosts["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["status"]["state"] != "HOST_STATE_FREE")
        .collect();
    assert_eq!(used.len(), 3, "{hosts}");
    assert!(
        used.iter()
            .all(|h| h["status"]["state"] == "HOST_STATE_ASSIGNED")
    );
    s.finish().await;
}
