//! The exec driver: exit codes, stderr messages, timeouts, stdin/stdout plumbing.

use std::path::Path;
use std::time::{Duration, Instant};

use osac_backends::*;
use serde_json::json;

mod support;
use support::{dir_with, examples, load};

/// An exec manager running `sh <dir>/script.sh <op>` (through sh, so the freshly written file
/// is never exec'd directly: no ETXTBSY races between parallel tests).
fn script_manager(dir: &Path, body: &str, timeout: u64) -> ExecManager {
    std::fs::write(dir.join("script.sh"), body).unwrap();
    let yaml = format!(
        "name: script\nrole: fabric\ndriver: exec\nexec:\n  command: sh\n  args: [script.sh]\n  timeout_seconds: {timeout}\n  env: {{GREETING: hello}}\n"
    );
    ExecManager::new(Registration::from_yaml(&yaml, dir).unwrap()).unwrap()
}

fn req() -> CreateVirtualNetworkRequest {
    CreateVirtualNetworkRequest {
        virtual_network_id: "vn-1".into(),
        tenant: "t".into(),
        ipv4_cidr: None,
        ipv6_cidr: None,
    }
}

/// Runs `script` (with `timeout` seconds) for a CreateVirtualNetwork of [`req`] and returns
/// the error it must fail with.
async fn create_vn_error(script: &str, timeout: u64) -> OpError {
    let dir = tempfile::tempdir().unwrap();
    script_manager(dir.path(), script, timeout)
        .create_virtual_network(&req())
        .await
        .unwrap_err()
}

fn subnet_req(vn: &str) -> CreateSubnetRequest {
    CreateSubnetRequest {
        subnet_id: "s".into(),
        virtual_network_id: vn.into(),
        ipv4_cidr: Some("10.0.0.0/24".parse().unwrap()),
        ipv6_cidr: None,
        vip_cidr: None,
    }
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
        .delete_subnet(&DeleteSubnetRequest {
            subnet_id: "s".into(),
            virtual_network_id: "v".into(),
        })
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
    // Record the request, wrapped with the argument and environment we got, in a file; answer
    // an allocation on stdout.
    let m = script_manager(
        dir.path(),
        "req=$(cat)\nprintf '{\"op\": \"%s\", \"env\": \"%s\", \"op_env\": \"%s\", \"manager\": \"%s\", \"req\": %s}' \"$1\" \"$GREETING\" \"$OSAC_OPERATION\" \"$OSAC_MANAGER\" \"$req\" > got.json\necho '{\"address\": \"192.0.2.7\"}'\n",
        5,
    );
    let alloc = AllocateExternalIpRequest {
        external_ip_id: "e".into(),
        pool_id: "p".into(),
        cidrs: vec!["192.0.2.0/24".parse().unwrap()],
    };
    let out = m.allocate_external_ip(&alloc).await.unwrap();
    assert_eq!(
        out.address,
        "192.0.2.7".parse::<std::net::IpAddr>().unwrap()
    );
    let got: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("got.json")).unwrap()).unwrap();
    assert_eq!(
        got,
        json!({"op": "allocate_external_ip", "env": "hello", "op_env": "allocate_external_ip", "manager": "script",
               "req": {"external_ip_id": "e", "pool_id": "p", "cidrs": ["192.0.2.0/24"]}})
    );
}

#[tokio::test]
async fn empty_stdout_is_an_empty_object_and_bad_json_is_permanent() {
    let dir = tempfile::tempdir().unwrap();
    let m = script_manager(dir.path(), "exit 0\n", 5);
    m.create_virtual_network(&req()).await.unwrap();
    let lease = QueryDhcpLeaseRequest {
        subnet_id: "s".into(),
        mac_address: "02:00:00:00:00:01".into(),
    };
    assert_eq!(
        m.query_dhcp_lease(&lease).await.unwrap(),
        PortAddresses::default()
    );

    let err = create_vn_error("echo 'not json'\n", 5).await;
    assert!(!err.is_transient());
    assert!(err.message().contains("invalid JSON"), "{err}");

    // A well-formed but wrong-shaped response is permanent.
    let dir = tempfile::tempdir().unwrap();
    let m = script_manager(dir.path(), "echo '{\"segment_id\": \"ten\"}'\n", 5);
    let err = m.create_subnet(&subnet_req("v")).await.unwrap_err();
    assert!(!err.is_transient());
    assert!(
        err.message().contains("malformed create_subnet response"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let m = script_manager(dir.path(), "echo '{\"address\": \"not an ip\"}'\n", 5);
    let alloc = AllocateExternalIpRequest {
        external_ip_id: "e".into(),
        pool_id: "p".into(),
        cidrs: vec!["192.0.2.0/24".parse().unwrap()],
    };
    let err = m.allocate_external_ip(&alloc).await.unwrap_err();
    assert!(!err.is_transient());
    assert!(
        err.message()
            .contains("malformed allocate_external_ip response"),
        "{err}"
    );
    // Operations answering {} accept anything.
    m.delete_subnet(&DeleteSubnetRequest {
        subnet_id: "s".into(),
        virtual_network_id: "v".into(),
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn missing_command_is_permanent_and_wrong_role_is_never_handed_out() {
    let yaml = "name: gone\nrole: fabric\ndriver: exec\nexec: {command: ./does-not-exist.sh}\n";
    let dir = dir_with(&[("gone.yaml", yaml)]);
    let m = ExecManager::new(Registration::from_yaml(yaml, dir.path()).unwrap()).unwrap();
    let err = m.create_virtual_network(&req()).await.unwrap_err();
    assert!(!err.is_transient(), "{err:?}");
    assert!(err.message().contains("cannot run"), "{err}");

    // The registry hands an exec registration out as a manager of its role only.
    let reg = load(dir.path()).await;
    assert!(reg.fabric("gone").is_ok());
    assert_eq!(
        reg.k8s("gone").err().unwrap().to_string(),
        "manager 'gone' is registered for role fabric, not k8s"
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
    let err = m.create_virtual_network(&req()).await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert!(err.message().contains("FAIL_TRANSIENT"), "{err}");

    // Only the listed operations fail.
    std::fs::write(state.path().join("FAIL_TRANSIENT"), "create_subnet\n").unwrap();
    m.create_virtual_network(&req()).await.unwrap();
    std::fs::remove_file(state.path().join("FAIL_TRANSIENT")).unwrap();

    std::fs::write(state.path().join("FAIL_PERMANENT"), "").unwrap();
    let err = m.create_virtual_network(&req()).await.unwrap_err();
    assert!(!err.is_transient(), "{err:?}");
    std::fs::remove_file(state.path().join("FAIL_PERMANENT")).unwrap();

    let err = m.create_subnet(&subnet_req("nope")).await.unwrap_err();
    assert_eq!(
        err,
        OpError::backend_permanent("virtual network 'nope' does not exist")
            .in_operation("create_subnet")
    );

    // Pool exhaustion: a /30 has two usable addresses.
    let alloc = |id: &str| AllocateExternalIpRequest {
        external_ip_id: id.into(),
        pool_id: "p".into(),
        cidrs: vec!["192.0.2.0/30".parse().unwrap()],
    };
    for (i, want) in ["192.0.2.1", "192.0.2.2"].iter().enumerate() {
        let out = m
            .allocate_external_ip(&alloc(&format!("e{i}")))
            .await
            .unwrap();
        assert_eq!(out.address.to_string(), *want);
    }
    let err = m.allocate_external_ip(&alloc("e3")).await.unwrap_err();
    assert!(
        !err.is_transient() && err.message().contains("pool exhausted"),
        "{err:?}"
    );
}
