//! The exec driver: exit codes, stderr messages, timeouts, stdin/stdout plumbing.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use osac_backends::{
    DriverConfig, ExecManager, FabricClient, Manager, OpError, Operation, Registration, Role,
};
use serde_json::json;

mod support;
use support::{examples, load};

/// An exec manager running `sh <dir>/script.sh <op>` (through sh, so the freshly written file
/// is never exec'd directly: no ETXTBSY races between parallel tests).
fn script_manager(dir: &Path, body: &str, timeout: u64) -> ExecManager {
    std::fs::write(dir.join("script.sh"), body).unwrap();
    let yaml = format!(
        "name: script\nrole: fabric\ndriver: exec\nexec:\n  command: sh\n  args: [script.sh]\n  timeout_seconds: {timeout}\n  env: {{GREETING: hello}}\n"
    );
    ExecManager::new(Registration::from_yaml(&yaml, dir).unwrap()).unwrap()
}

fn req() -> serde_json::Value {
    json!({"virtual_network_id": "vn-1", "tenant": "t"})
}

/// Runs `script` (with `timeout` seconds) for a CreateVirtualNetwork of [`req`] and returns
/// the error it must fail with.
async fn create_vn_error(script: &str, timeout: u64) -> OpError {
    let dir = tempfile::tempdir().unwrap();
    script_manager(dir.path(), script, timeout)
        .call(Operation::CreateVirtualNetwork, req())
        .await
        .unwrap_err()
}

#[tokio::test]
async fn exit_75_is_transient_with_the_stderr_message() {
    let err = create_vn_error(
        "echo starting >&2\necho 'backend busy' >&2\necho >&2\nexit 75\n",
        5,
    )
    .await;
    // A program's stderr is backend detail (provider-only), with the operation it failed in.
    assert_eq!(
        err,
        OpError::backend_transient("backend busy").in_operation("create_virtual_network")
    );
    assert_eq!(err.tenant_message(), None);
}

#[tokio::test]
async fn exit_1_is_permanent_with_the_last_stderr_line() {
    let err = create_vn_error(
        "echo 'warning: x' >&2\necho 'VLAN pool empty' >&2\nexit 1\n",
        5,
    )
    .await;
    assert_eq!(
        err,
        OpError::backend_permanent("VLAN pool empty").in_operation("create_virtual_network")
    );
}

#[tokio::test]
async fn silent_failure_mentions_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let m = script_manager(dir.path(), "exit 3\n", 5);
    let err = m
        .call(Operation::DeleteSubnet, json!({}))
        .await
        .unwrap_err();
    assert!(!err.is_transient());
    assert!(err.message().contains("exited with code 3"), "{err}");
    assert!(err.message().contains("delete_subnet"), "{err}");
}

#[tokio::test]
async fn timeout_kills_and_is_transient() {
    let start = Instant::now();
    let err = create_vn_error("sleep 30\necho '{}'\n", 1).await;
    let took = start.elapsed();
    assert!(err.is_transient(), "{err:?}");
    assert!(err.message().contains("timed out after 1s"), "{err}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[tokio::test]
async fn request_on_stdin_operation_as_last_argument_result_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    // Echo back the request, wrapped with the argument and environment we got.
    let m = script_manager(
        dir.path(),
        "req=$(cat)\nprintf '{\"op\": \"%s\", \"env\": \"%s\", \"op_env\": \"%s\", \"manager\": \"%s\", \"req\": %s}' \"$1\" \"$GREETING\" \"$OSAC_OPERATION\" \"$OSAC_MANAGER\" \"$req\"\n",
        5,
    );
    let out = m
        .call(Operation::CreateVirtualNetwork, req())
        .await
        .unwrap();
    assert_eq!(
        out,
        json!({"op": "create_virtual_network", "env": "hello", "op_env": "create_virtual_network", "manager": "script", "req": req()})
    );
}

#[tokio::test]
async fn empty_stdout_is_an_empty_object_and_bad_json_is_permanent() {
    let dir = tempfile::tempdir().unwrap();
    let m = script_manager(dir.path(), "exit 0\n", 5);
    assert_eq!(
        m.call(Operation::CreateVirtualNetwork, req())
            .await
            .unwrap(),
        json!({})
    );

    let err = create_vn_error("echo 'not json'\n", 5).await;
    assert!(!err.is_transient());
    assert!(err.message().contains("invalid JSON"), "{err}");

    // A typed client rejects a well-formed but wrong-shaped response as permanent.
    let dir = tempfile::tempdir().unwrap();
    let m = script_manager(dir.path(), "echo '{\"segment_id\": \"ten\"}'\n", 5);
    let client = FabricClient::new(Arc::new(m));
    let err = client
        .create_subnet(&osac_backends::CreateSubnetRequest {
            subnet_id: "s".into(),
            virtual_network_id: "v".into(),
            ipv4_cidr: None,
            ipv6_cidr: None,
            vip_cidr: None,
        })
        .await
        .unwrap_err();
    assert!(!err.is_transient());
    assert!(
        err.message().contains("malformed create_subnet response"),
        "{err}"
    );
}

#[tokio::test]
async fn missing_command_is_permanent_and_wrong_role_never_runs() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = "name: gone\nrole: fabric\ndriver: exec\nexec: {command: ./does-not-exist.sh}\n";
    let m = ExecManager::new(Registration::from_yaml(yaml, dir.path()).unwrap()).unwrap();
    let err = m
        .call(Operation::CreateVirtualNetwork, req())
        .await
        .unwrap_err();
    assert!(!err.is_transient(), "{err:?}");
    assert!(err.message().contains("cannot run"), "{err}");

    let err = m
        .call(Operation::CreateSubnetOverlay, json!({}))
        .await
        .unwrap_err();
    assert!(
        err.message().contains("registered for role fabric"),
        "{err}"
    );
    assert!(ExecManager::new(Registration::sim("s", Role::Fabric)).is_err());
}

async fn demo_exec(state: &Path) -> ExecManager {
    let reg = load(&examples()).await;
    let mut registration = reg.check("demo-exec", Role::Fabric).unwrap().clone();
    let DriverConfig::Exec(exec) = &mut registration.driver else {
        panic!("demo-exec is not exec")
    };
    exec.env
        .insert("OSAC_DEMO_EXEC_STATE".into(), state.display().to_string());
    ExecManager::new(registration).unwrap()
}

#[tokio::test]
async fn demo_exec_failure_hooks_and_validation() {
    let state = tempfile::tempdir().unwrap();
    let m = demo_exec(state.path()).await;

    std::fs::write(state.path().join("FAIL_TRANSIENT"), "").unwrap();
    let err = m
        .call(Operation::CreateVirtualNetwork, req())
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert!(err.message().contains("FAIL_TRANSIENT"), "{err}");

    // Only the listed operations fail.
    std::fs::write(state.path().join("FAIL_TRANSIENT"), "create_subnet\n").unwrap();
    m.call(Operation::CreateVirtualNetwork, req())
        .await
        .unwrap();
    std::fs::remove_file(state.path().join("FAIL_TRANSIENT")).unwrap();

    std::fs::write(state.path().join("FAIL_PERMANENT"), "").unwrap();
    let err = m
        .call(Operation::CreateVirtualNetwork, req())
        .await
        .unwrap_err();
    assert!(!err.is_transient(), "{err:?}");
    std::fs::remove_file(state.path().join("FAIL_PERMANENT")).unwrap();

    let err = m
        .call(
            Operation::CreateSubnet,
            json!({"subnet_id": "s", "virtual_network_id": "nope", "ipv4_cidr": "10.0.0.0/24"}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        OpError::backend_permanent("virtual network 'nope' does not exist")
            .in_operation("create_subnet")
    );

    // Pool exhaustion: a /30 has two usable addresses.
    for (i, want) in ["192.0.2.1", "192.0.2.2"].iter().enumerate() {
        let out = m
            .call(
                Operation::AllocateExternalIp,
                json!({"external_ip_id": format!("e{i}"), "pool_id": "p", "cidrs": ["192.0.2.0/30"]}),
            )
            .await
            .unwrap();
        assert_eq!(out, json!({"address": want}));
    }
    let err = m
        .call(
            Operation::AllocateExternalIp,
            json!({"external_ip_id": "e3", "pool_id": "p", "cidrs": ["192.0.2.0/30"]}),
        )
        .await
        .unwrap_err();
    assert!(
        !err.is_transient() && err.message().contains("pool exhausted"),
        "{err:?}"
    );
}
