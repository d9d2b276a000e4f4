//! Workloads provisioned by a registered `exec` provisioner: the example program of
//! `examples/managers/demo-provisioner` beside the simulated fabric and k8s managers. A VM
//! and a bare-metal instance reach RUNNING through it (the simulated provisioner is not
//! called), `osac admin managers` lists it with role `provisioner`, and deleting the
//! workloads deprovisions them in the program's state.

use std::path::{Path, PathBuf};

use osac_backends::provision::ProvisionOp;
use serde_json::{Value, json};

use crate::common::*;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/managers")
}

/// A managers directory with the sim managers and the demo provisioner keeping its state in
/// `state`.
fn managers_dir(dir: &Path, state: &Path) {
    for file in ["sim-fabric.yaml", "sim-k8s.yaml"] {
        std::fs::copy(examples().join(file), dir.join(file)).unwrap();
    }
    let program = examples().join("demo-provisioner/provisioner.py");
    std::fs::write(
        dir.join("demo-provisioner.yaml"),
        format!(
            "name: demo-provisioner\nrole: provisioner\ndescription: test\ndriver: exec\nexec:\n  command: {}\n  env:\n    OSAC_DEMO_PROVISIONER_STATE: {}\n    PYTHONDONTWRITEBYTECODE: \"1\"\n",
            program.display(),
            state.display()
        ),
    )
    .unwrap();
}

/// The program's state file.
fn demo_state(state: &Path) -> Value {
    match std::fs::read_to_string(state.join("state.json")) {
        Ok(text) => serde_json::from_str(&text).unwrap(),
        Err(_) => json!({"machines": {}, "history": []}),
    }
}

fn history(state: &Path) -> Vec<(String, String)> {
    demo_state(state)["history"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|h| {
            (
                h["operation"].as_str().unwrap_or_default().to_string(),
                h["id"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_exec_provisioner_runs_vms_and_bare_metal() {
    let managers = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    managers_dir(managers.path(), state.path());
    let s = TestServer::start_bare(Backend::Sqlite, Some(managers.path().to_path_buf()))
        .await
        .unwrap();
    s.bootstrap().await;

    let list = s.admin.get(&format!("{PRIV}/managers")).await.ok();
    assert_eq!(list["total"], 3, "{list}");
    let listed = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "demo-provisioner")
        .cloned()
        .unwrap_or_else(|| panic!("provisioner not listed: {list}"));
    assert_eq!(listed["role"], "provisioner");
    assert_eq!(listed["driver"], "exec");

    let t = s.tenant("acme").await;
    t.ready_vn("net", "10.0.0.0/16").await;
    t.ready_subnet("a", "net", "10.0.1.0/24").await;
    let vm = t.create_vm("vm", "a").await;
    let bm = t.create_bm("bm", "a").await;
    let (vm_id, bm_id) = (id(&vm), id(&bm));
    t.wait(
        "compute_instances",
        &vm_id,
        "COMPUTE_INSTANCE_STATE_RUNNING",
    )
    .await;
    let bm = t
        .wait(
            "baremetal_instances",
            &bm_id,
            "BARE_METAL_INSTANCE_STATE_RUNNING",
        )
        .await;

    // The program holds both machines, with the MACs the fabric attached.
    let machines = demo_state(state.path())["machines"].clone();
    let recorded_vm = &machines[&vm_id];
    assert_eq!(recorded_vm["kind"], "vm", "{machines}");
    assert_eq!(recorded_vm["template"], "small");
    assert_eq!(recorded_vm["nics"].as_array().map(Vec::len), Some(1));
    let recorded_bm = &machines[&bm_id];
    assert_eq!(recorded_bm["kind"], "bare_metal", "{machines}");
    assert_eq!(recorded_bm["host_id"], bm["status"]["host"], "{bm}");
    // The simulated provisioner was not used.
    let sim = s.provisioner();
    assert_eq!(sim.call_count(ProvisionOp::BootVm), 0);
    assert_eq!(sim.call_count(ProvisionOp::ProvisionBareMetal), 0);

    // Deleting deprovisions through the program.
    t.delete(&format!("{PUB}/compute_instances/{vm_id}"))
        .await
        .ok();
    t.delete(&format!("{PUB}/baremetal_instances/{bm_id}"))
        .await
        .ok();
    t.wait_gone(PUB, "compute_instances", &vm_id).await;
    t.wait_gone(PUB, "baremetal_instances", &bm_id).await;
    let calls = history(state.path());
    assert!(
        calls.contains(&("delete_vm".into(), vm_id.clone())),
        "{calls:?}"
    );
    assert!(
        calls.contains(&("deprovision_baremetal".into(), bm_id.clone())),
        "{calls:?}"
    );
    assert_eq!(demo_state(state.path())["machines"], json!({}));
    s.finish().await;
}
