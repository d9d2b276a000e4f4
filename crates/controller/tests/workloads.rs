//! Workloads (VMs, bare-metal instances, clusters) and hosts under the real runtime: in-memory
//! SQLite, the sim fabric, sim k8s and the sim provisioner. Records are inserted directly, with
//! specs shaped as the API stores them (references resolved, primary flags, BM interfaces and
//! node-set fabric interfaces filled in).

use std::sync::Arc;
use std::time::Duration;

use osac_backends::provision::{ProvisionOp, SimMachine, SimProvisioner};
use osac_backends::sim::PortLocation;
use osac_backends::{FailureKind, Operation, Registry, SimFabric, SimK8s};
use osac_controller::{
    ControllerConfig, Controllers, Dispatcher, HOSTING_CLUSTER_ANNOTATION, PARKED_ANNOTATION,
    agent_attachment_id, vm_mac,
};
use osac_model::Kind;
use osac_store::{Record, Store};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;

mod support;
use support::{Objects, SimWorld, message, state_of, status};

const TIMEOUT: Duration = Duration::from_secs(20);

fn config() -> ControllerConfig {
    ControllerConfig {
        workers: 4,
        resync_interval: Duration::from_secs(3600),
        backoff_base: Duration::from_millis(20),
        backoff_cap: Duration::from_millis(200),
        ..ControllerConfig::default()
    }
}

struct Env {
    store: Arc<dyn Store>,
    registry: Arc<Registry>,
    sim: Arc<SimFabric>,
    _k8s: Arc<SimK8s>,
    prov: Arc<SimProvisioner>,
    class: String,
    ip_timeout: Duration,
    with_provisioner: bool,
    stop: Option<(watch::Sender<bool>, JoinHandle<()>)>,
}

/// One tenant network: VN 10.0.0.0/16, subnet 10.0.1.0/24 and an SG, READY.
struct Net {
    vn: String,
    subnet: String,
    sg: String,
}

impl Objects for Env {
    fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    fn timeout(&self) -> Duration {
        TIMEOUT
    }
}

impl Env {
    async fn new() -> Env {
        let world = SimWorld::new().await;
        let prov = SimProvisioner::open(world.state.clone()).await.unwrap();
        let mut env = Env {
            store: world.store,
            registry: world.registry,
            sim: world.sim,
            _k8s: world.k8s,
            prov,
            class: String::new(),
            ip_timeout: Duration::from_secs(300),
            with_provisioner: true,
            stop: None,
        };
        env.class = env.default_class().await;
        env
    }

    fn controllers(&self) -> Controllers {
        let c = Controllers::new(
            self.store.clone(),
            Dispatcher::new(self.registry.clone()),
            config(),
        )
        .with_ip_discovery_timeout(self.ip_timeout);
        if self.with_provisioner {
            c.with_provisioner(self.prov.clone())
        } else {
            c
        }
    }

    fn start(&mut self) {
        let c = self.controllers();
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(c.run(rx));
        self.stop = Some((tx, task));
    }

    async fn stop(&mut self) {
        if let Some((tx, task)) = self.stop.take() {
            tx.send(true).unwrap();
            tokio::time::timeout(TIMEOUT, task).await.unwrap().unwrap();
        }
    }

    /// Drops the controllers abruptly (a crash), wherever they are.
    async fn crash(&mut self) {
        if let Some((_tx, task)) = self.stop.take() {
            task.abort();
            let _ = task.await;
        }
    }

    async fn net(&self) -> Net {
        let vn = self
            .insert(
                Kind::VirtualNetwork,
                "t1",
                "net",
                json!({
                    "spec": {"network_class": self.class, "ipv4_cidr": "10.0.0.0/16"},
                    "status": {"state": "VIRTUAL_NETWORK_STATE_PENDING"}
                }),
            )
            .await;
        let subnet = self.subnet(&vn, "sub", "10.0.1.0/24").await;
        let sg = self.sg(&vn, "sg").await;
        Net { vn, subnet, sg }
    }

    async fn subnet(&self, vn: &str, name: &str, cidr: &str) -> String {
        self.insert(
            Kind::Subnet,
            "t1",
            name,
            json!({
                "spec": {"virtual_network": vn, "ipv4_cidr": cidr},
                "status": {"state": "SUBNET_STATE_PENDING"}
            }),
        )
        .await
    }

    async fn sg(&self, vn: &str, name: &str) -> String {
        self.insert(
            Kind::SecurityGroup,
            "t1",
            name,
            json!({
                "spec": {"virtual_network": vn, "ingress": [
                    {"protocol": "PROTOCOL_TCP", "port_from": 22, "port_to": 22, "ipv4_cidr": "0.0.0.0/0"}
                ]},
                "status": {"state": "SECURITY_GROUP_STATE_PENDING"}
            }),
        )
        .await
    }

    /// HostType `bm-standard`: data-0, data-1 (fabric), bmc (lifecycle).
    async fn host_type(&self) -> String {
        self.insert(
            Kind::HostType,
            "",
            "bm-standard",
            json!({
                "title": "Standard bare metal",
                "interfaces": [
                    {"name": "data-0", "role": "fabric"},
                    {"name": "data-1", "role": "fabric"},
                    {"name": "bmc", "role": "lifecycle"}
                ]
            }),
        )
        .await
    }

    /// A FREE host of `pool`; MACs derived from `n`.
    async fn host(&self, host_type: &str, name: &str, pool: &str, n: u8) -> String {
        self.insert(
            Kind::Host,
            "",
            name,
            json!({
                "spec": {"host_type": host_type, "pool": pool, "interfaces": [
                    {"name": "data-0", "mac_address": host_mac(n, 0)},
                    {"name": "data-1", "mac_address": host_mac(n, 1)},
                    {"name": "bmc", "mac_address": host_mac(n, 9)}
                ]},
                "status": {"state": "HOST_STATE_FREE"}
            }),
        )
        .await
    }

    fn vm_record(&self, name: &str, attachments: Value) -> Record {
        let mut rec = Record::new(
            Kind::ComputeInstance,
            "t1",
            json!({
                "spec": {"template": "small", "compute_network_attachments": attachments},
                "status": {"state": "COMPUTE_INSTANCE_STATE_STARTING"}
            }),
        );
        rec.name = Some(name.to_string());
        rec
    }

    async fn vm(&self, name: &str, net: &Net) -> String {
        let atts = json!([{"subnet": net.subnet, "security_groups": [net.sg], "primary": true}]);
        self.insert_record(self.vm_record(name, atts)).await
    }

    fn bm_record(&self, name: &str, host_type: &str, attachments: Value) -> Record {
        let mut rec = Record::new(
            Kind::BareMetalInstance,
            "t1",
            json!({
                "spec": {"host_type": host_type, "network_attachments": attachments},
                "status": {"state": "BARE_METAL_INSTANCE_STATE_PROVISIONING"}
            }),
        );
        rec.name = Some(name.to_string());
        rec
    }

    async fn bm(&self, name: &str, host_type: &str, net: &Net) -> String {
        let atts = json!([{"subnet": net.subnet, "security_groups": [net.sg], "interface": "data-0", "primary": true}]);
        self.insert_record(self.bm_record(name, host_type, atts))
            .await
    }

    fn cluster_record(&self, name: &str, host_type: &str, size: i32, net: &Net) -> Record {
        let mut rec = Record::new(
            Kind::Cluster,
            "t1",
            json!({
                "spec": {
                    "template": "ocp_4_17_small",
                    "node_sets": {"workers": {"host_type": host_type, "size": size, "fabric_interface": "data-0"}},
                    "network_attachment": {"subnet": net.subnet, "security_groups": [net.sg]}
                },
                "status": {"state": "CLUSTER_STATE_PROGRESSING"}
            }),
        );
        rec.name = Some(name.to_string());
        rec
    }

    async fn cluster(&self, name: &str, host_type: &str, size: i32, net: &Net) -> String {
        self.insert_record(self.cluster_record(name, host_type, size, net))
            .await
    }

    async fn pool(&self) -> String {
        self.insert(
            Kind::ExternalIpPool,
            "",
            "pool",
            json!({
                "spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": ["203.0.113.0/28"]},
                "status": {"state": "EXTERNAL_IP_POOL_STATE_PENDING"}
            }),
        )
        .await
    }

    async fn eip(&self, pool: &str, name: &str) -> String {
        self.insert(
            Kind::ExternalIp,
            "t1",
            name,
            json!({"spec": {"pool": pool}, "status": {"state": "EXTERNAL_IP_STATE_PENDING"}}),
        )
        .await
    }

    async fn attachment(&self, name: &str, eip: &str, target: Value) -> String {
        let mut spec = json!({"external_ip": eip});
        if let (Some(s), Some(t)) = (spec.as_object_mut(), target.as_object()) {
            s.extend(t.clone());
        }
        self.insert(
            Kind::ExternalIpAttachment,
            "t1",
            name,
            json!({"spec": spec, "status": {"state": "EXTERNAL_IP_ATTACHMENT_STATE_PENDING"}}),
        )
        .await
    }

    /// Waits until condition `kind` has `status` (and `reason` when given).
    async fn wait_condition(&self, id: &str, kind: &str, status: &str, reason: &str) -> Record {
        self.wait(id, &format!("condition {kind} {status} {reason}"), |r| {
            r.and_then(|r| cond(r, kind)).is_some_and(|c| {
                c["status"] == status && (reason.is_empty() || c["reason"] == reason)
            })
        })
        .await
        .unwrap()
    }

    /// Waits until condition `kind` is FALSE for `reason` (the object is held up), then checks
    /// the object is in `state` and its message names `in_message`.
    async fn wait_held_up(
        &self,
        id: &str,
        kind: &str,
        reason: &str,
        state: &str,
        in_message: &str,
    ) -> Record {
        let r = self
            .wait_condition(id, kind, "CONDITION_STATUS_FALSE", reason)
            .await;
        assert_eq!(state_of(&r), state);
        assert!(message(&r).contains(in_message), "{}", message(&r));
        r
    }

    /// Waits until a sim port is where `want` says.
    async fn wait_port(&self, host: &str, interface: &str, want: fn(&PortLocation) -> bool) {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let p = self.sim.port(host, interface).await;
            if p.as_ref().is_some_and(want) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "port {host}/{interface} is {p:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn host_mac(n: u8, i: u8) -> String {
    format!("aa:bb:cc:00:{n:02x}:{i:02x}")
}

fn str_status(r: &Record, field: &str) -> String {
    status(r, field).as_str().unwrap_or("").to_string()
}

fn cond<'a>(r: &'a Record, kind: &str) -> Option<&'a Value> {
    status(r, "conditions")
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

fn assert_true(r: &Record, kinds: &[&str]) {
    for k in kinds {
        let c = cond(r, k).unwrap_or_else(|| panic!("no condition {k}: {r:#?}"));
        assert_eq!(c["status"], "CONDITION_STATUS_TRUE", "{k}: {c}");
    }
}

fn is_parked(p: &PortLocation) -> bool {
    matches!(p, PortLocation::Parked)
}

#[tokio::test]
async fn vm_runs_with_discovered_addresses_and_sg_changes_are_reapplied() {
    let mut env = Env::new().await;
    let net = env.net().await;
    let vm = env.vm("web", &net).await;
    env.start();
    let v = env.wait_state(&vm, "COMPUTE_INSTANCE_STATE_RUNNING").await;
    assert_true(
        &v,
        &["NetworkingConfigured", "Provisioned", "IPDiscoveryComplete"],
    );
    assert_eq!(message(&v), "");
    assert_eq!(str_status(&v, "internal_ip_address"), "10.0.1.2");
    let statuses = status(&v, "compute_network_attachment_statuses");
    assert_eq!(statuses[0]["subnet_ref"], net.subnet.as_str());
    assert_eq!(statuses[0]["ip_address"], "10.0.1.2");
    assert_eq!(statuses[0]["primary"], true);
    assert_eq!(statuses[0]["mac_address"], vm_mac(&vm, 0).as_str());

    let hosting = v.annotations[HOSTING_CLUSTER_ANNOTATION].clone();
    assert!(["hosting-a", "hosting-b"].contains(&hosting.as_str()));
    let port = env
        .sim
        .network_attachment(&format!("{vm}/0"))
        .await
        .unwrap();
    assert_eq!(port.host, hosting);
    assert_eq!(port.interface, format!("{vm}/eth0"));
    assert_eq!(port.mac_address, vm_mac(&vm, 0));
    assert!(port.primary);
    assert_eq!(port.security_groups, vec![net.sg.clone()]);
    match env.prov.machine(&vm).await {
        Some(SimMachine::Vm(m)) => {
            assert_eq!(m.hosting_cluster, hosting);
            assert_eq!(m.nics[0].name, "eth0");
            assert_eq!(m.nics[0].mac_address, vm_mac(&vm, 0));
        }
        other => panic!("no VM machine: {other:?}"),
    }

    // More VMs: several share a hosting cluster (two clusters), each gets its own port and IP.
    let mut ips = vec!["10.0.1.2".to_string()];
    for i in 0..4 {
        let other = env.vm(&format!("web-{i}"), &net).await;
        let o = env
            .wait_state(&other, "COMPUTE_INSTANCE_STATE_RUNNING")
            .await;
        ips.push(str_status(&o, "internal_ip_address"));
    }
    ips.sort();
    ips.dedup();
    assert_eq!(ips.len(), 5, "{ips:?}");

    // A converged VM costs no manager or provisioner call on resync.
    let creates = env.sim.call_count(Operation::CreateNetworkAttachment);
    let boots = env.prov.call_count(ProvisionOp::BootVm);
    tokio::time::sleep(Duration::from_millis(2300)).await;
    assert_eq!(
        env.sim.call_count(Operation::CreateNetworkAttachment),
        creates
    );
    assert_eq!(env.prov.call_count(ProvisionOp::BootVm), boots);

    // Security groups of an attachment are mutable: the port gets the new set.
    let sg2 = env.sg(&net.vn, "sg2").await;
    env.wait_state(&sg2, "SECURITY_GROUP_STATE_READY").await;
    env.set_spec(
        &vm,
        json!({"template": "small", "compute_network_attachments": [
            {"subnet": net.subnet, "security_groups": [net.sg, sg2], "primary": true}
        ]}),
    )
    .await;
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let p = env
            .sim
            .network_attachment(&format!("{vm}/0"))
            .await
            .unwrap();
        if p.security_groups.len() == 2 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "SGs not re-applied");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let v = env.wait_state(&vm, "COMPUTE_INSTANCE_STATE_RUNNING").await;
    assert_eq!(str_status(&v, "internal_ip_address"), "10.0.1.2");

    // Delete: VM, then ports, then the row.
    env.delete_until_gone(&vm, "COMPUTE_INSTANCE_STATE_DELETING")
        .await;
    assert!(
        env.sim
            .network_attachment(&format!("{vm}/0"))
            .await
            .is_none()
    );
    assert!(env.prov.machine(&vm).await.is_none());
    env.stop().await;
}

#[tokio::test]
async fn vm_without_provisioner_waits_with_a_message() {
    let mut env = Env::new().await;
    env.with_provisioner = false;
    let net = env.net().await;
    let vm = env.vm("web", &net).await;
    env.start();
    let v = env
        .wait_held_up(
            &vm,
            "Provisioned",
            "NoProvisioner",
            "COMPUTE_INSTANCE_STATE_STARTING",
            "provisioner: none is configured",
        )
        .await;
    assert_true(&v, &["NetworkingConfigured"]);
    env.stop().await;

    // Configured later: it proceeds.
    env.with_provisioner = true;
    env.start();
    env.wait_state(&vm, "COMPUTE_INSTANCE_STATE_RUNNING").await;
    env.stop().await;
}

#[tokio::test]
async fn baremetal_goes_through_every_phase_and_gives_its_host_back() {
    let mut env = Env::new().await;
    let net = env.net().await;
    let ht = env.host_type().await;
    let h1 = env.host(&ht, "bm-1", "baremetal", 1).await;
    let h2 = env.host(&ht, "bm-2", "baremetal", 2).await;
    let bm = env.bm("s1", &ht, &net).await;
    env.start();
    let b = env
        .wait_state(&bm, "BARE_METAL_INSTANCE_STATE_RUNNING")
        .await;
    assert_true(
        &b,
        &[
            "InventoryAssigned",
            "NetworkingConfigured",
            "ProvisioningComplete",
            "IPDiscoveryComplete",
            "Ready",
        ],
    );
    // Candidates are tried in name order.
    assert_eq!(str_status(&b, "host"), h1);
    assert_eq!(str_status(&b, "internal_ip_address"), "10.0.1.2");
    let s = &status(&b, "network_attachment_statuses")[0];
    assert_eq!(s["interface"], "data-0");
    assert_eq!(s["ip_address"], "10.0.1.2");
    assert_eq!(s["primary"], true);
    let h = env.get(&h1).await.unwrap();
    assert_eq!(state_of(&h), "HOST_STATE_ASSIGNED");
    assert_eq!(str_status(&h, "assigned_to"), bm);
    assert_eq!(
        state_of(&env.get(&h2).await.unwrap()),
        "HOST_STATE_FREE",
        "baremetal hosts are not parked and stay free"
    );
    let port = env
        .sim
        .network_attachment(&format!("{bm}/0"))
        .await
        .unwrap();
    assert_eq!(port.host, h1);
    assert_eq!(port.mac_address, host_mac(1, 0));
    assert!(matches!(
        env.prov.machine(&bm).await,
        Some(SimMachine::BareMetal(_))
    ));

    env.delete_until_gone(&bm, "BARE_METAL_INSTANCE_STATE_DELETING")
        .await;
    let h = env.get(&h1).await.unwrap();
    assert_eq!(state_of(&h), "HOST_STATE_FREE");
    assert_eq!(str_status(&h, "assigned_to"), "");
    assert!(
        env.sim
            .network_attachment(&format!("{bm}/0"))
            .await
            .is_none()
    );
    assert_eq!(
        env.sim.port(&h1, "data-0").await,
        Some(PortLocation::Detached)
    );
    assert!(env.prov.machine(&bm).await.is_none());
    env.stop().await;
}

#[tokio::test]
async fn multi_homed_baremetal_with_primary_on_second_interface() {
    let mut env = Env::new().await;
    let net = env.net().await;
    let storage = env.subnet(&net.vn, "storage", "10.0.2.0/24").await;
    let ht = env.host_type().await;
    env.host(&ht, "bm-1", "baremetal", 1).await;
    let rec = env.bm_record(
        "s2",
        &ht,
        json!([
            {"subnet": storage, "interface": "data-0", "primary": false},
            {"subnet": net.subnet, "security_groups": [net.sg], "interface": "data-1", "primary": true}
        ]),
    );
    let bm = env.insert_record(rec).await;
    env.start();
    let b = env
        .wait_state(&bm, "BARE_METAL_INSTANCE_STATE_RUNNING")
        .await;
    let first = env
        .sim
        .network_attachment(&format!("{bm}/0"))
        .await
        .unwrap();
    let second = env
        .sim
        .network_attachment(&format!("{bm}/1"))
        .await
        .unwrap();
    assert!(!first.primary);
    assert!(second.primary);
    assert_eq!(first.interface, "data-0");
    assert_eq!(first.subnet_id, storage);
    assert_eq!(second.interface, "data-1");
    assert_eq!(second.mac_address, host_mac(1, 1));
    let statuses = status(&b, "network_attachment_statuses");
    assert_eq!(statuses[0]["ip_address"], "10.0.2.2");
    assert_eq!(statuses[0]["primary"], Value::Null, "false is omitted");
    assert_eq!(statuses[1]["ip_address"], "10.0.1.2");
    assert_eq!(statuses[1]["primary"], true);
    assert_eq!(str_status(&b, "internal_ip_address"), "10.0.1.2");
    env.stop().await;
}

#[tokio::test]
async fn clusters_get_distinct_vips_and_agents_move_between_parking_and_subnet() {
    let mut env = Env::new().await;
    let net = env.net().await;
    let ht = env.host_type().await;
    let mut caas = Vec::new();
    for i in 0..4u8 {
        caas.push(env.host(&ht, &format!("agent-{i}"), "caas", 10 + i).await);
    }
    env.start();
    // Idle caas hosts sit on the parking network.
    for h in &caas {
        env.wait_port(h, "data-0", is_parked).await;
        env.wait(h, "parked annotation", |r| {
            r.is_some_and(|r| {
                r.annotations.get(PARKED_ANNOTATION).map(String::as_str) == Some("data-0")
            })
        })
        .await;
    }
    env.wait_state(&net.subnet, "SUBNET_STATE_READY").await;

    let c1 = env.cluster("c1", &ht, 3, &net).await;
    let c = env.wait_state(&c1, "CLUSTER_STATE_READY").await;
    assert_true(
        &c,
        &[
            "InventoryAssigned",
            "NetworkingConfigured",
            "IPDiscoveryComplete",
            "ProvisioningComplete",
        ],
    );
    assert_eq!(str_status(&c, "api_endpoint"), "10.0.1.241");
    assert_eq!(str_status(&c, "ingress_endpoint"), "10.0.1.242");
    let agents = status(&c, "node_sets")["workers"]["agents"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(agents.len(), 3);
    let mut ips: Vec<&str> = agents
        .iter()
        .map(|a| a["ip_address"].as_str().unwrap())
        .collect();
    ips.sort();
    assert_eq!(ips, ["10.0.1.2", "10.0.1.3", "10.0.1.4"]);
    let c1_hosts: Vec<String> = agents
        .iter()
        .map(|a| a["host"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(c1_hosts, caas[..3].to_vec(), "hosts taken in name order");
    for h in &c1_hosts {
        let r = env.get(h).await.unwrap();
        assert_eq!(state_of(&r), "HOST_STATE_ASSIGNED");
        assert_eq!(str_status(&r, "assigned_to"), c1);
        assert!(!r.annotations.contains_key(PARKED_ANNOTATION));
        let p = env
            .sim
            .network_attachment(&agent_attachment_id(&c1, h))
            .await
            .unwrap();
        assert_eq!(p.subnet_id, net.subnet);
        assert_eq!(p.security_groups, vec![net.sg.clone()]);
        assert!(p.primary);
        let vips: Vec<std::net::IpAddr> =
            vec!["10.0.1.241".parse().unwrap(), "10.0.1.242".parse().unwrap()];
        assert_eq!(p.allowed_addresses, vips, "agents may answer for the VIPs");
    }
    match env.prov.machine(&c1).await {
        Some(SimMachine::Cluster(m)) => {
            assert_eq!(m.api_vip, "10.0.1.241");
            assert_eq!(m.agents.len(), 3);
        }
        other => panic!("no cluster machine: {other:?}"),
    }
    env.wait_port(&caas[3], "data-0", is_parked).await;

    // A second cluster on the same subnet gets the next two VIPs.
    let c2 = env.cluster("c2", &ht, 1, &net).await;
    let c = env.wait_state(&c2, "CLUSTER_STATE_READY").await;
    assert_eq!(str_status(&c, "api_endpoint"), "10.0.1.243");
    assert_eq!(str_status(&c, "ingress_endpoint"), "10.0.1.244");
    assert_eq!(
        status(&c, "node_sets")["workers"]["agents"][0]["host"],
        caas[3].as_str()
    );

    // Deleting c1: its agents go back to parking and to the pool, its VIPs are free again.
    env.delete_until_gone(&c1, "CLUSTER_STATE_DELETING").await;
    for h in &c1_hosts {
        let r = env.get(h).await.unwrap();
        assert_eq!(state_of(&r), "HOST_STATE_FREE");
        assert_eq!(str_status(&r, "assigned_to"), "");
        env.wait_port(h, "data-0", is_parked).await;
        assert!(
            env.sim
                .network_attachment(&agent_attachment_id(&c1, h))
                .await
                .is_none()
        );
    }
    assert!(env.prov.machine(&c1).await.is_none());
    let c3 = env.cluster("c3", &ht, 1, &net).await;
    let c = env.wait_state(&c3, "CLUSTER_STATE_READY").await;
    assert_eq!(str_status(&c, "api_endpoint"), "10.0.1.241");
    assert_eq!(str_status(&c, "ingress_endpoint"), "10.0.1.242");
    env.stop().await;
}

#[tokio::test]
async fn no_free_host_waits_then_proceeds_when_one_appears() {
    let mut env = Env::new().await;
    let net = env.net().await;
    let ht = env.host_type().await;
    let bm = env.bm("s1", &ht, &net).await;
    env.host(&ht, "agent-0", "caas", 20).await;
    let cl = env.cluster("c1", &ht, 2, &net).await;
    env.start();
    env.wait_held_up(
        &bm,
        "InventoryAssigned",
        "NoFreeHost",
        "BARE_METAL_INSTANCE_STATE_PROVISIONING",
        "no FREE baremetal host of HostType 'bm-standard'",
    )
    .await;
    env.wait_held_up(
        &cl,
        "InventoryAssigned",
        "NoFreeHost",
        "CLUSTER_STATE_PROGRESSING",
        "node set 'workers' needs 2 FREE caas host(s)",
    )
    .await;
    // All or nothing: the one caas host is not held by the waiting cluster.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let hosts = env
        .store
        .list(&osac_store::ListQuery::all(Kind::Host))
        .await
        .unwrap();
    assert!(hosts.items.iter().all(|h| state_of(h) == "HOST_STATE_FREE"));

    // Hosts appear: both proceed (a FREE host wakes the workloads of its type).
    let h = env.host(&ht, "bm-9", "baremetal", 9).await;
    env.host(&ht, "agent-1", "caas", 21).await;
    let b = env
        .wait_state(&bm, "BARE_METAL_INSTANCE_STATE_RUNNING")
        .await;
    assert_eq!(str_status(&b, "host"), h);
    env.wait_state(&cl, "CLUSTER_STATE_READY").await;
    env.stop().await;
}

#[tokio::test]
async fn held_leases_delay_ip_discovery_and_clusters_show_the_timeout() {
    let mut env = Env::new().await;
    env.ip_timeout = Duration::from_millis(300);
    let net = env.net().await;
    let ht = env.host_type().await;
    env.host(&ht, "bm-1", "baremetal", 1).await;
    env.host(&ht, "agent-0", "caas", 30).await;
    env.sim.hold_lease(&host_mac(1, 0), u32::MAX);
    env.sim.hold_lease(&host_mac(30, 0), u32::MAX);
    let bm = env.bm("s1", &ht, &net).await;
    let cl = env.cluster("c1", &ht, 1, &net).await;
    env.start();

    let b = env
        .wait_held_up(
            &bm,
            "IPDiscoveryComplete",
            "WaitingForLease",
            "BARE_METAL_INSTANCE_STATE_PROVISIONING",
            "data-0",
        )
        .await;
    assert_true(&b, &["NetworkingConfigured", "ProvisioningComplete"]);

    let c = env
        .wait_condition(
            &cl,
            "NetworkingIPDiscoveryTimeout",
            "CONDITION_STATUS_TRUE",
            "Timeout",
        )
        .await;
    assert_eq!(state_of(&c), "CLUSTER_STATE_PROGRESSING");
    assert!(
        cond(&c, "NetworkingIPDiscoveryTimeout").unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("still retrying")
    );
    assert_eq!(
        cond(&c, "IPDiscoveryComplete").unwrap()["status"],
        "CONDITION_STATUS_FALSE"
    );

    // The leases arrive: both complete, the timeout condition clears.
    env.sim.hold_lease(&host_mac(1, 0), 0);
    env.sim.hold_lease(&host_mac(30, 0), 0);
    env.wait_state(&bm, "BARE_METAL_INSTANCE_STATE_RUNNING")
        .await;
    let c = env.wait_state(&cl, "CLUSTER_STATE_READY").await;
    assert_eq!(
        cond(&c, "NetworkingIPDiscoveryTimeout").unwrap()["status"],
        "CONDITION_STATUS_FALSE"
    );
    let agent_ip = status(&c, "node_sets")["workers"]["agents"][0]["ip_address"].clone();
    assert!(
        agent_ip
            .as_str()
            .is_some_and(|ip| ip.starts_with("10.0.1.")),
        "{agent_ip}"
    );
    env.stop().await;
}

#[tokio::test]
async fn injected_failures_are_retried_and_permanent_ones_fail() {
    let mut env = Env::new().await;
    let net = env.net().await;
    let ht = env.host_type().await;
    env.host(&ht, "bm-1", "baremetal", 1).await;
    let flaky = env.vm_record(
        "flaky",
        json!([{"subnet": net.subnet, "security_groups": [net.sg], "primary": true}]),
    );
    env.sim.inject_failure(
        Operation::CreateNetworkAttachment,
        &format!("{}/0", flaky.id),
        3,
        FailureKind::Transient,
    );
    env.prov
        .inject_failure(ProvisionOp::BootVm, &flaky.id, 2, FailureKind::Transient);
    let broken = env.bm_record(
        "broken",
        &ht,
        json!([{"subnet": net.subnet, "interface": "data-0", "primary": true}]),
    );
    env.prov.inject_failure(
        ProvisionOp::ProvisionBareMetal,
        &broken.id,
        1,
        FailureKind::Permanent,
    );
    let flaky = env.insert_record(flaky).await;
    let broken = env.insert_record(broken).await;
    env.start();
    let v = env
        .wait_state(&flaky, "COMPUTE_INSTANCE_STATE_RUNNING")
        .await;
    assert_eq!(message(&v), "");
    assert!(env.prov.call_count(ProvisionOp::BootVm) >= 3);
    assert!(env.sim.call_count(Operation::CreateNetworkAttachment) >= 4);

    let b = env
        .wait_state(&broken, "BARE_METAL_INSTANCE_STATE_FAILED")
        .await;
    assert!(message(&b).contains("injected failure"), "{}", message(&b));
    let c = cond(&b, "ProvisioningComplete").unwrap();
    assert_eq!(c["status"], "CONDITION_STATUS_FALSE");
    assert_eq!(c["reason"], "Failed");
    // FAILED is final for this spec: no more provisioning attempts.
    let calls = env.prov.call_count(ProvisionOp::ProvisionBareMetal);
    tokio::time::sleep(Duration::from_millis(2300)).await;
    assert_eq!(env.prov.call_count(ProvisionOp::ProvisionBareMetal), calls);

    // Deleting the failed instance still undoes everything.
    let host = str_status(&b, "host");
    env.delete_until_gone(&broken, "BARE_METAL_INSTANCE_STATE_DELETING")
        .await;
    assert_eq!(state_of(&env.get(&host).await.unwrap()), "HOST_STATE_FREE");
    assert!(
        env.sim
            .network_attachment(&format!("{broken}/0"))
            .await
            .is_none()
    );
    env.stop().await;
}

#[tokio::test]
async fn external_ip_attachments_follow_their_workloads() {
    let mut env = Env::new().await;
    let net = env.net().await;
    let ht = env.host_type().await;
    env.host(&ht, "agent-0", "caas", 40).await;
    let pool = env.pool().await;
    let web_ip = env.eip(&pool, "web-ip").await;
    let api_ip = env.eip(&pool, "api-ip").await;
    let vm_rec = env.vm_record(
        "web",
        json!([{"subnet": net.subnet, "security_groups": [net.sg], "primary": true}]),
    );
    // The VM's lease is slow: its attachment waits for the primary IP.
    env.sim.hold_lease(&vm_mac(&vm_rec.id, 0), u32::MAX);
    let vm = env.insert_record(vm_rec).await;
    let att = env
        .attachment("web", &web_ip, json!({"compute_instance": vm}))
        .await;
    // The cluster's attachment exists before the cluster does.
    let cl_rec = env.cluster_record("c1", &ht, 1, &net);
    let cl_att = env
        .attachment(
            "api",
            &api_ip,
            json!({"cluster": cl_rec.id, "target_endpoint": "EXTERNAL_IP_ATTACHMENT_ENDPOINT_API"}),
        )
        .await;
    env.start();
    let a = env
        .wait(&att, "attachment waiting for the VM", |r| {
            r.is_some_and(|r| {
                message(r) == "waiting for ComputeInstance 'web' to have a primary IP"
            })
        })
        .await
        .unwrap();
    assert_eq!(state_of(&a), "EXTERNAL_IP_ATTACHMENT_STATE_PENDING");
    let a = env
        .wait(&cl_att, "cluster attachment waiting", |r| {
            r.is_some_and(|r| message(r).contains("no longer exists"))
        })
        .await
        .unwrap();
    assert_eq!(state_of(&a), "EXTERNAL_IP_ATTACHMENT_STATE_PENDING");

    // The VM's IP appears: the attachment becomes READY and the VM shows the address.
    env.sim.hold_lease(&vm_mac(&vm, 0), 0);
    let a = env
        .wait_state(&att, "EXTERNAL_IP_ATTACHMENT_STATE_READY")
        .await;
    assert_eq!(str_status(&a, "target_ip"), "10.0.1.2");
    let address = str_status(&env.get(&web_ip).await.unwrap(), "address");
    assert_eq!(str_status(&a, "external_ip_address"), address);
    env.wait(&vm, "VM external address", |r| {
        r.is_some_and(|r| str_status(r, "external_ip_address") == address)
    })
    .await;
    let dnat = env.sim.dnat_rules().await;
    assert_eq!(dnat.len(), 1);
    assert_eq!(dnat[0].virtual_network_id, net.vn);

    // The cluster arrives and gets its VIPs: its API attachment activates.
    let cl = env.insert_record(cl_rec).await;
    let c = env.wait_state(&cl, "CLUSTER_STATE_READY").await;
    let a = env
        .wait_state(&cl_att, "EXTERNAL_IP_ATTACHMENT_STATE_READY")
        .await;
    assert_eq!(str_status(&a, "target_ip"), str_status(&c, "api_endpoint"));
    assert_eq!(env.sim.dnat_rules().await.len(), 2);

    // The VM is deleted: its attachment's DNAT goes and it waits for a VM of that name again.
    env.delete_until_gone(&vm, "COMPUTE_INSTANCE_STATE_DELETING")
        .await;
    let a = env
        .wait(&att, "attachment back to PENDING", |r| {
            r.is_some_and(|r| {
                state_of(r) == "EXTERNAL_IP_ATTACHMENT_STATE_PENDING"
                    && message(r)
                        == "waiting for ComputeInstance 'web' to be created in this tenant"
            })
        })
        .await
        .unwrap();
    assert_eq!(str_status(&a, "target_ip"), "");
    let dnat = env.sim.dnat_rules().await;
    assert_eq!(dnat.len(), 1);
    assert_eq!(
        dnat[0].target_ip.to_string(),
        str_status(&c, "api_endpoint")
    );
    env.stop().await;
}

#[tokio::test]
async fn restart_in_the_middle_of_each_phase_converges() {
    let mut env = Env::new().await;
    let net = env.net().await;
    let ht = env.host_type().await;
    env.host(&ht, "bm-1", "baremetal", 1).await;
    for i in 0..2u8 {
        env.host(&ht, &format!("agent-{i}"), "caas", 50 + i).await;
    }
    // BM stuck in provisioning, cluster stuck in IP discovery, VM stuck in networking.
    let bm_rec = env.bm_record(
        "s1",
        &ht,
        json!([{"subnet": net.subnet, "security_groups": [net.sg], "interface": "data-0", "primary": true}]),
    );
    env.prov.inject_failure(
        ProvisionOp::ProvisionBareMetal,
        &bm_rec.id,
        u32::MAX,
        FailureKind::Transient,
    );
    let vm_rec = env.vm_record(
        "web",
        json!([{"subnet": net.subnet, "security_groups": [net.sg], "primary": true}]),
    );
    env.sim.inject_failure(
        Operation::CreateNetworkAttachment,
        &format!("{}/0", vm_rec.id),
        u32::MAX,
        FailureKind::Transient,
    );
    env.sim.hold_lease(&host_mac(50, 0), u32::MAX);
    let bm = env.insert_record(bm_rec).await;
    let vm = env.insert_record(vm_rec).await;
    let cl = env.cluster("c1", &ht, 2, &net).await;
    env.start();
    env.wait_condition(
        &bm,
        "ProvisioningComplete",
        "CONDITION_STATUS_FALSE",
        "Retrying",
    )
    .await;
    env.wait_condition(
        &cl,
        "IPDiscoveryComplete",
        "CONDITION_STATUS_FALSE",
        "WaitingForLease",
    )
    .await;
    env.wait_condition(
        &vm,
        "NetworkingConfigured",
        "CONDITION_STATUS_FALSE",
        "Retrying",
    )
    .await;
    env.crash().await;

    env.prov.clear_failures();
    env.sim.clear_failures();
    env.sim.hold_lease(&host_mac(50, 0), 0);
    env.start();
    let b = env
        .wait_state(&bm, "BARE_METAL_INSTANCE_STATE_RUNNING")
        .await;
    let c = env.wait_state(&cl, "CLUSTER_STATE_READY").await;
    env.wait_state(&vm, "COMPUTE_INSTANCE_STATE_RUNNING").await;
    // One host per BM, two per cluster: no reservation leaked or doubled.
    let hosts = env
        .store
        .list(&osac_store::ListQuery::all(Kind::Host))
        .await
        .unwrap();
    let owners: Vec<String> = hosts
        .items
        .iter()
        .map(|h| str_status(h, "assigned_to"))
        .collect();
    assert_eq!(owners.iter().filter(|o| **o == bm).count(), 1);
    assert_eq!(owners.iter().filter(|o| **o == cl).count(), 2);
    assert!(
        hosts
            .items
            .iter()
            .all(|h| state_of(h) == "HOST_STATE_ASSIGNED")
    );
    assert!(!str_status(&b, "internal_ip_address").is_empty());
    assert_eq!(str_status(&c, "api_endpoint"), "10.0.1.241");

    // A crash while deleting converges too.
    env.sim.inject_failure(
        Operation::DeleteNetworkAttachment,
        &agent_attachment_id(
            &cl,
            status(&c, "node_sets")["workers"]["agents"][1]["host"]
                .as_str()
                .unwrap(),
        ),
        u32::MAX,
        FailureKind::Transient,
    );
    env.delete(&cl, "CLUSTER_STATE_DELETING").await;
    env.wait(&cl, "cluster delete retrying", |r| {
        r.is_some_and(|r| message(r).contains("injected"))
    })
    .await;
    env.crash().await;
    env.sim.clear_failures();
    env.start();
    env.wait_gone(&cl).await;
    let agents = status(&c, "node_sets")["workers"]["agents"].clone();
    for a in agents.as_array().unwrap() {
        let h = a["host"].as_str().unwrap();
        env.wait_port(h, "data-0", is_parked).await;
        assert_eq!(state_of(&env.get(h).await.unwrap()), "HOST_STATE_FREE");
    }
    env.stop().await;
}

/// Throughput smoke test (run with `--run-ignored only`): N VMs with an ExternalIPAttachment
/// each, inserted at once; prints the time until every attachment is READY and the phase sums.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore]
async fn throughput_of_vms_with_attachments() {
    let n: usize = std::env::var("OSAC_BENCH_VMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let mut env = Env::new().await;
    let mut net = env.net().await;
    net.subnet = env.subnet(&net.vn, "big", "10.0.64.0/18").await;
    let pool = env
        .insert(
            Kind::ExternalIpPool,
            "",
            "big",
            json!({"spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": ["198.18.0.0/16"]},
               "status": {"state": "EXTERNAL_IP_POOL_STATE_PENDING"}}),
        )
        .await;
    env.start();
    env.wait_state(&net.subnet, "SUBNET_STATE_READY").await;
    env.wait_state(&net.sg, "SECURITY_GROUP_STATE_READY").await;
    let start = std::time::Instant::now();
    let mut atts = Vec::new();
    let mut vms = Vec::new();
    for i in 0..n {
        let vm = env.vm(&format!("vm-{i}"), &net).await;
        let eip = env.eip(&pool, &format!("ip-{i}")).await;
        atts.push(
            env.attachment(&format!("a-{i}"), &eip, json!({"compute_instance": vm}))
                .await,
        );
        vms.push(vm);
    }
    let inserted = start.elapsed();
    for v in &vms {
        env.wait_state(v, "COMPUTE_INSTANCE_STATE_RUNNING").await;
    }
    println!("VMs RUNNING after {:?}", start.elapsed());
    for a in &atts {
        env.wait_state(a, "EXTERNAL_IP_ATTACHMENT_STATE_READY")
            .await;
    }
    let total = start.elapsed();
    println!(
        "{n} VMs + attachments: inserted in {inserted:?}, all READY after {total:?} ({:.0}/s)",
        n as f64 / total.as_secs_f64()
    );
    for f in prometheus::gather() {
        if f.name() == "osac_workload_phase_duration_seconds" {
            for m in f.get_metric() {
                let labels: Vec<String> = m
                    .get_label()
                    .iter()
                    .map(|l| format!("{}={}", l.name(), l.value()))
                    .collect();
                let h = m.get_histogram();
                println!(
                    "  {:<40} count {:>6} sum {:>8.3}s",
                    labels.join(","),
                    h.get_sample_count(),
                    h.get_sample_sum()
                );
            }
        }
    }
    env.stop().await;
}
