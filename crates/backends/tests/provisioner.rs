//! The provisioner contract suite against the sim provisioner and the example `exec`
//! provisioner program, and the provisioner registration in a managers directory.

use std::path::Path;
use std::sync::Arc;

use osac_backends::provision::conformance::{ProvisionerFixture, provisioner_suite};
use osac_backends::provision::{
    ExecProvisioner, MachineRef, PowerState, ProvisionOp, Provisioner, ProvisionerRegistration,
    RunStrategy, SimProvisioner,
};
use osac_backends::{DriverConfig, FailureKind, MemorySimState, OpError};

mod support;
use support::{dir_with, examples, load, load_err};

/// The example provisioner registration, with its state in `state_dir`.
async fn demo_provisioner(state_dir: &Path) -> ExecProvisioner {
    let reg = load(&examples()).await;
    let mut registration: ProvisionerRegistration = reg
        .provisioner()
        .expect("the examples register one")
        .clone();
    assert_eq!(registration.name, "demo-provisioner");
    let DriverConfig::Exec(exec) = &mut registration.driver else {
        panic!("demo-provisioner is not exec")
    };
    exec.env.insert(
        "OSAC_DEMO_PROVISIONER_STATE".into(),
        state_dir.display().to_string(),
    );
    ExecProvisioner::new(registration).unwrap()
}

fn machines(state_dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(state_dir.join("state.json")).unwrap();
    serde_json::from_str::<serde_json::Value>(&text).unwrap()["machines"].clone()
}

#[tokio::test]
async fn sim_provisioner_conforms() {
    let sim = SimProvisioner::open(Arc::new(MemorySimState::new()))
        .await
        .unwrap();
    provisioner_suite(sim.clone(), &ProvisionerFixture::new("c1"))
        .await
        .unwrap();
    assert_eq!(sim.machine_count().await, 0, "everything was deleted");
    assert_eq!(sim.call_count(ProvisionOp::Power), 9);
    provisioner_suite(sim, &ProvisionerFixture::new("c2"))
        .await
        .unwrap();
}

#[tokio::test]
async fn demo_exec_provisioner_conforms() {
    let state = tempfile::tempdir().unwrap();
    let demo: Arc<dyn Provisioner> = Arc::new(demo_provisioner(state.path()).await);
    provisioner_suite(demo.clone(), &ProvisionerFixture::new("c1"))
        .await
        .unwrap();
    assert_eq!(machines(state.path()), serde_json::json!({}));
    provisioner_suite(demo, &ProvisionerFixture::new("c2"))
        .await
        .unwrap();
}

#[tokio::test]
async fn demo_exec_provisioner_keeps_machines_and_reports_failures_as_values() {
    let state = tempfile::tempdir().unwrap();
    let demo = demo_provisioner(state.path()).await;
    let fixture = ProvisionerFixture::new("f");
    demo.boot_vm(&fixture.vm).await.unwrap();
    let vm = MachineRef::Vm {
        instance_id: fixture.vm.instance_id.clone(),
    };
    demo.power(&vm, PowerState::Off).await.unwrap();
    let recorded = &machines(state.path())[&fixture.vm.instance_id];
    assert_eq!(recorded["power"], "off", "{recorded}");
    assert_eq!(recorded["nics"][1]["mac_address"], "02:00:00:00:01:02");
    let found = demo.discover_addresses(&vm).await.unwrap();
    assert_eq!(found.len(), 2);

    // A different request for the same VM is refused, with the program's message.
    let mut other = fixture.vm.clone();
    other.template = "large".into();
    match demo.boot_vm(&other).await {
        Err(e @ OpError::Backend(_)) if !e.is_transient() => {
            assert!(e.message().contains("different shape"), "{e}")
        }
        r => panic!("expected a permanent error, got {r:?}"),
    }
    std::fs::write(state.path().join("FAIL_TRANSIENT"), "delete_vm\n").unwrap();
    match demo.delete_vm(&fixture.vm.instance_id).await {
        Err(e @ OpError::Backend(_)) if e.is_transient() => {
            assert!(e.message().contains("FAIL_TRANSIENT"), "{e}")
        }
        r => panic!("expected a transient error, got {r:?}"),
    }
    std::fs::remove_file(state.path().join("FAIL_TRANSIENT")).unwrap();
    demo.delete_vm(&fixture.vm.instance_id).await.unwrap();
    assert_eq!(machines(state.path()), serde_json::json!({}));
}

#[tokio::test]
async fn sim_provisioner_failures_can_be_injected_for_power() {
    let sim = SimProvisioner::open(Arc::new(MemorySimState::new()))
        .await
        .unwrap();
    let fixture = ProvisionerFixture::new("p");
    sim.provision_baremetal(&fixture.bare_metal).await.unwrap();
    let bm = MachineRef::BareMetal {
        instance_id: fixture.bare_metal.instance_id.clone(),
        host_id: fixture.bare_metal.host_id.clone(),
    };
    sim.inject_failure(
        ProvisionOp::Power,
        &fixture.bare_metal.instance_id,
        1,
        FailureKind::Transient,
    );
    assert!(matches!(
        sim.power(&bm, PowerState::Off).await,
        Err(OpError::Transient(_))
    ));
    sim.power(&bm, PowerState::Off).await.unwrap();
    assert_eq!(
        sim.power_state(&fixture.bare_metal.instance_id).await,
        Some(PowerState::Off)
    );
    // Provisioning again boots it.
    sim.provision_baremetal(&fixture.bare_metal).await.unwrap();
    assert_eq!(
        sim.power_state(&fixture.bare_metal.instance_id).await,
        Some(PowerState::On)
    );
    // A bare-metal reference with another host is not this machine.
    let elsewhere = MachineRef::BareMetal {
        instance_id: fixture.bare_metal.instance_id.clone(),
        host_id: "other-host".into(),
    };
    assert!(matches!(
        sim.power(&elsewhere, PowerState::Off).await,
        Err(OpError::Permanent(_))
    ));
}

#[tokio::test]
async fn at_most_one_provisioner_is_registered() {
    let dir = dir_with(&[
        (
            "a-prov.yaml",
            "name: a-prov\nrole: provisioner\ndriver: sim\n",
        ),
        ("fab.yaml", "name: fab\nrole: fabric\ndriver: sim\n"),
    ]);
    let reg = load(dir.path()).await;
    assert_eq!(reg.provisioner().map(|p| p.name.as_str()), Some("a-prov"));
    assert_eq!(reg.len(), 1, "the provisioner is not a manager");
    assert!(reg.origin("a-prov").unwrap().ends_with("a-prov.yaml"));

    std::fs::write(
        dir.path().join("b-prov.yaml"),
        "name: b-prov\nrole: provisioner\ndriver: exec\nexec: {command: /bin/true}\n",
    )
    .unwrap();
    let err = load_err(dir.path()).await;
    assert!(
        err.contains("a-prov.yaml") && err.contains("b-prov.yaml") && err.contains("only one"),
        "{err}"
    );

    // Names are shared with managers.
    std::fs::write(
        dir.path().join("b-prov.yaml"),
        "name: fab\nrole: fabric\ndriver: sim\n",
    )
    .unwrap();
    let err = load_err(dir.path()).await;
    assert!(err.contains("registered twice"), "{err}");
}

#[tokio::test]
async fn no_provisioner_file_means_none_registered() {
    let dir = dir_with(&[("fab.yaml", "name: fab\nrole: fabric\ndriver: sim\n")]);
    let reg = load(dir.path()).await;
    assert!(reg.provisioner().is_none());
}

/// An exec provisioner running `sh -c script` (the operation is `$1`).
fn shell_provisioner(script: &str) -> ExecProvisioner {
    ExecProvisioner::new(ProvisionerRegistration {
        name: "shell".into(),
        description: String::new(),
        driver: DriverConfig::Exec(osac_backends::ExecConfig {
            command: "sh".into(),
            args: vec!["-c".into(), script.into(), "sh".into()],
            timeout_seconds: 10,
            env: Default::default(),
            working_dir: std::env::temp_dir(),
        }),
    })
    .unwrap()
}

#[tokio::test]
async fn exec_provisioner_environment_and_malformed_results() {
    let vm = MachineRef::Vm {
        instance_id: "vm-1".into(),
    };
    let p = shell_provisioner("echo \"$OSAC_ROLE $1 $OSAC_MANAGER\" >&2; exit 3");
    match p.power(&vm, PowerState::On).await {
        Err(e @ OpError::Backend(_)) if !e.is_transient() => {
            assert_eq!(e.message(), "provisioner power shell")
        }
        r => panic!("expected a permanent error, got {r:?}"),
    }
    let p = shell_provisioner("echo busy >&2; exit 75");
    assert_eq!(
        p.delete_vm("vm-1").await,
        Err(OpError::backend_transient("busy").in_operation("delete_vm"))
    );
    // The power request carries the machine's fields and the state.
    let p = shell_provisioner("cat >&2; exit 1");
    match p.power(&vm, PowerState::Off).await {
        Err(e @ OpError::Backend(_)) if !e.is_transient() => {
            let sent: serde_json::Value = serde_json::from_str(e.message()).unwrap();
            assert_eq!(
                sent,
                serde_json::json!({"kind": "vm", "instance_id": "vm-1", "state": "off"})
            );
        }
        r => panic!("expected the request echoed, got {r:?}"),
    }
    let p = shell_provisioner("echo '{\"nics\": [{\"mac_address\": 7}]}'");
    assert!(matches!(
        p.discover_addresses(&vm).await,
        Err(e @ OpError::Backend(_)) if !e.is_transient()
    ));
    let p = shell_provisioner(
        "echo '{\"nics\": [{\"mac_address\": \"02:00:00:00:00:01\", \"ipv4_address\": \"10.0.1.5\"}]}'",
    );
    let found = p.discover_addresses(&vm).await.unwrap();
    assert_eq!(found[0].ipv4_address, Some("10.0.1.5".parse().unwrap()));
    // Empty output is an empty result: no NICs.
    let p = shell_provisioner("true");
    assert!(p.discover_addresses(&vm).await.unwrap().is_empty());
}

/// The `exec` request of `provision_baremetal` carries the installation fields, the run
/// strategy and the restart trigger; the demo program records them and powers per strategy.
#[tokio::test]
async fn demo_exec_provisioner_gets_the_bare_metal_machine_fields() {
    let state = tempfile::tempdir().unwrap();
    let demo = demo_provisioner(state.path()).await;
    let fixture = ProvisionerFixture::new("m");
    let mut req = fixture.bare_metal.clone();
    req.run_strategy = RunStrategy::Halted;
    demo.provision_baremetal(&req).await.unwrap();
    let recorded = &machines(state.path())[&req.instance_id];
    assert_eq!(recorded["image"], "rhel-9.4", "{recorded}");
    assert_eq!(recorded["ssh_public_key"], req.ssh_public_key.as_str());
    assert_eq!(recorded["user_data"], req.user_data.as_str());
    assert_eq!(recorded["power"], "off", "{recorded}");
    req.run_strategy = RunStrategy::Always;
    req.restart_trigger = "1".into();
    demo.provision_baremetal(&req).await.unwrap();
    let recorded = &machines(state.path())[&req.instance_id];
    assert_eq!(recorded["power"], "on", "{recorded}");
    assert_eq!(recorded["restart_trigger"], "1", "{recorded}");
    let mut other = req.clone();
    other.image = "ubuntu".into();
    assert!(demo.provision_baremetal(&other).await.is_err());
}
