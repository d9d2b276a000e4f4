//! The provisioner contract suite, written once and run against every provisioner driver
//! (sim and the example `exec` program in this crate's tests, linux in `osac-linux`'s kernel
//! tests). It returns the first violation instead of panicking, so it can also back a
//! provider's check of their own program.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{
    BootVmRequest, ClusterAgent, DiscoveredNic, MachineRef, Nic, PowerState,
    ProvisionBareMetalRequest, ProvisionClusterRequest, Provisioner,
};
use crate::conformance::ConformanceError;
use crate::contract::OpError;

fn fail(step: &str, message: impl Into<String>) -> ConformanceError {
    ConformanceError {
        step: step.to_string(),
        message: message.into(),
    }
}

fn ok<T>(step: &str, r: Result<T, OpError>) -> Result<T, ConformanceError> {
    r.map_err(|e| fail(step, format!("unexpected {e:?}")))
}

fn permanent<T: std::fmt::Debug>(
    step: &str,
    r: Result<T, OpError>,
) -> Result<(), ConformanceError> {
    match r {
        Err(e) if !e.is_transient() => Ok(()),
        other => Err(fail(
            step,
            format!("expected a permanent error, got {other:?}"),
        )),
    }
}

/// The machines the suite provisions. Drivers that need real machines (linux: the machine
/// namespaces the fabric creates) build them first and pass matching requests.
#[derive(Debug, Clone)]
pub struct ProvisionerFixture {
    pub vm: BootVmRequest,
    pub bare_metal: ProvisionBareMetalRequest,
    /// None: the driver's cluster operations are not exercised by this run.
    pub cluster: Option<ProvisionClusterRequest>,
    /// An instance id no machine has.
    pub unknown_instance: String,
}

fn nic(name: &str, mac: &str, subnet: &str, primary: bool) -> Nic {
    Nic {
        name: name.into(),
        mac_address: mac.into(),
        subnet_id: subnet.into(),
        primary,
    }
}

impl ProvisionerFixture {
    /// Requests with ids starting with `prefix` (use a fresh prefix per run against a
    /// persistent backend): a two-NIC VM, a two-NIC server and a two-agent cluster.
    pub fn new(prefix: &str) -> ProvisionerFixture {
        let id = |s: &str| format!("{prefix}-{s}");
        let subnet = id("subnet");
        ProvisionerFixture {
            vm: BootVmRequest {
                instance_id: id("vm"),
                hosting_cluster: "hosting-a".into(),
                template: "small".into(),
                nics: vec![
                    nic("eth0", "02:00:00:00:01:01", &subnet, true),
                    nic("eth1", "02:00:00:00:01:02", &subnet, false),
                ],
            },
            bare_metal: ProvisionBareMetalRequest {
                instance_id: id("bmi"),
                host_id: id("host"),
                nics: vec![
                    nic("data-0", "02:00:00:00:02:01", &subnet, true),
                    nic("data-1", "02:00:00:00:02:02", &subnet, false),
                ],
                image: "rhel-9.4".into(),
                ssh_public_key: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBfYvH0mCVjGkdrZ5ZKZQ1S1nNv3UQtbyH5oEi4pb0mV conformance".into(),
                user_data: "#cloud-config\nhostname: conformance\n".into(),
                ..Default::default()
            },
            cluster: Some(ProvisionClusterRequest {
                cluster_id: id("cluster"),
                template: "ocp-4".into(),
                agents: ["a", "b"]
                    .iter()
                    .enumerate()
                    .map(|(i, a)| ClusterAgent {
                        host_id: id(&format!("agent-{a}")),
                        node_set: "workers".into(),
                        mac_address: format!("02:00:00:00:03:0{}", i + 1),
                        ip_address: format!("10.0.1.{}", 10 + i),
                    })
                    .collect(),
                api_vip: "10.0.1.250".into(),
                ingress_vip: "10.0.1.251".into(),
            }),
            unknown_instance: id("nobody"),
        }
    }

    fn vm_ref(&self) -> MachineRef {
        MachineRef::Vm {
            instance_id: self.vm.instance_id.clone(),
        }
    }

    fn bare_metal_ref(&self) -> MachineRef {
        MachineRef::BareMetal {
            instance_id: self.bare_metal.instance_id.clone(),
            host_id: self.bare_metal.host_id.clone(),
        }
    }
}

/// Discovery reports only the machine's own MACs, each once.
fn check_discovered(
    step: &str,
    found: &[DiscoveredNic],
    nics: &[Nic],
) -> Result<(), ConformanceError> {
    let own: BTreeSet<String> = nics
        .iter()
        .map(|n| n.mac_address.to_ascii_lowercase())
        .collect();
    let mut seen = BTreeSet::new();
    for n in found {
        let mac = n.mac_address.to_ascii_lowercase();
        if !own.contains(&mac) {
            return Err(fail(step, format!("MAC {mac} is not a NIC of the machine")));
        }
        if !seen.insert(mac.clone()) {
            return Err(fail(step, format!("MAC {mac} is reported twice")));
        }
    }
    Ok(())
}

/// Powers `machine` off and on, each twice (idempotent).
async fn power_cycle(p: &dyn Provisioner, machine: &MachineRef) -> Result<(), ConformanceError> {
    for state in [
        PowerState::Off,
        PowerState::Off,
        PowerState::On,
        PowerState::On,
    ] {
        let step = format!("power {} {state:?}", machine.instance_id());
        ok(&step, p.power(machine, state).await)?;
    }
    Ok(())
}

/// Runs the suite: provisions the fixture's VM and server (twice each), checks discovery,
/// power cycles them, builds and tears down the cluster (when given), checks the permanent
/// errors of impossible requests, then deletes everything twice.
pub async fn provisioner_suite(
    provisioner: Arc<dyn Provisioner>,
    fixture: &ProvisionerFixture,
) -> Result<(), ConformanceError> {
    let p = provisioner.as_ref();
    let (vm, bm) = (&fixture.vm, &fixture.bare_metal);
    let (vm_ref, bm_ref) = (fixture.vm_ref(), fixture.bare_metal_ref());

    for step in ["boot_vm", "boot_vm again"] {
        ok(step, p.boot_vm(vm).await)?;
    }
    for step in ["provision_baremetal", "provision_baremetal again"] {
        ok(step, p.provision_baremetal(bm).await)?;
    }
    // A new restart trigger (a restart) and back: the same installation asked again.
    let mut restarted = bm.clone();
    restarted.restart_trigger = "conformance-restart".into();
    ok(
        "provision_baremetal with a new restart trigger",
        p.provision_baremetal(&restarted).await,
    )?;
    ok(
        "provision_baremetal with the first restart trigger",
        p.provision_baremetal(bm).await,
    )?;
    let mut no_nics = vm.clone();
    no_nics.instance_id = fixture.unknown_instance.clone();
    no_nics.nics.clear();
    permanent("boot_vm without NICs", p.boot_vm(&no_nics).await)?;

    let found = ok("discover_addresses vm", p.discover_addresses(&vm_ref).await)?;
    check_discovered("discover_addresses vm", &found, &vm.nics)?;
    let found = ok(
        "discover_addresses bare metal",
        p.discover_addresses(&bm_ref).await,
    )?;
    check_discovered("discover_addresses bare metal", &found, &bm.nics)?;
    let unknown_vm = MachineRef::Vm {
        instance_id: fixture.unknown_instance.clone(),
    };
    let found = ok(
        "discover_addresses of an unknown machine",
        p.discover_addresses(&unknown_vm).await,
    )?;
    if !found.is_empty() {
        return Err(fail(
            "discover_addresses of an unknown machine",
            format!("expected no NICs, got {found:?}"),
        ));
    }

    power_cycle(p, &vm_ref).await?;
    power_cycle(p, &bm_ref).await?;
    permanent(
        "power of an unknown machine",
        p.power(&unknown_vm, PowerState::Off).await,
    )?;

    if let Some(cluster) = &fixture.cluster {
        for step in ["provision_cluster", "provision_cluster again"] {
            ok(step, p.provision_cluster(cluster).await)?;
        }
        let mut no_agents = cluster.clone();
        no_agents.cluster_id = fixture.unknown_instance.clone();
        no_agents.agents.clear();
        permanent(
            "provision_cluster without agents",
            p.provision_cluster(&no_agents).await,
        )?;
        for step in ["deprovision_cluster", "deprovision_cluster again"] {
            ok(step, p.deprovision_cluster(&cluster.cluster_id).await)?;
        }
    }

    for step in ["delete_vm", "delete_vm again"] {
        ok(step, p.delete_vm(&vm.instance_id).await)?;
    }
    for step in ["deprovision_baremetal", "deprovision_baremetal again"] {
        ok(
            step,
            p.deprovision_baremetal(&bm.instance_id, &bm.host_id).await,
        )?;
    }
    let found = ok(
        "discover_addresses after delete",
        p.discover_addresses(&vm_ref).await,
    )?;
    if found
        .iter()
        .any(|n| n.ipv4_address.is_some() || n.ipv6_address.is_some())
    {
        return Err(fail(
            "discover_addresses after delete",
            format!("a deleted VM still has addresses: {found:?}"),
        ));
    }
    ok(
        "delete_vm of an unknown VM",
        p.delete_vm(&fixture.unknown_instance).await,
    )?;
    ok(
        "deprovision_baremetal of an unknown instance",
        p.deprovision_baremetal(&fixture.unknown_instance, &fixture.unknown_instance)
            .await,
    )?;
    ok(
        "deprovision_cluster of an unknown cluster",
        p.deprovision_cluster(&fixture.unknown_instance).await,
    )?;
    Ok(())
}
