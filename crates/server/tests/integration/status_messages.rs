//! Tenant-visible status messages never carry backend detail: an exec fabric manager that
//! fails with a path and a command line on stderr leaves the tenant a plain message with a
//! reference; the detail is in a provider-only event that tenants cannot list or get.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::*;

/// What the failing backend prints: a path and a command line.
const SECRET_PATH: &str = "/etc/osac/backend/credentials.yaml";
const COMMAND_LINE: &str = "/usr/sbin/ip link add vxlan100 type vxlan id 100 dev eth0";

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/managers")
}

/// A managers directory with the sim managers and `failing-exec`: the demo exec fabric
/// manager, except that `create_subnet` fails with backend detail on stderr.
fn managers_dir(dir: &Path, state: &Path) {
    for file in ["sim-fabric.yaml", "sim-k8s.yaml"] {
        std::fs::copy(examples().join(file), dir.join(file)).unwrap();
    }
    let script = dir.join("failing-exec.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ \"$1\" = create_subnet ]; then\n  cat >/dev/null\n  echo 'netctl: starting' >&2\n  echo \"error: command '{COMMAND_LINE}' failed: open {SECRET_PATH}: permission denied\" >&2\n  exit 1\nfi\nexec python3 {} \"$@\"\n",
            examples().join("demo-exec/manager.py").display()
        ),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(
        dir.join("failing-exec.yaml"),
        format!(
            "name: failing-exec\nrole: fabric\ndescription: test\ncapabilities: [ipv4, ipv6, dual_stack]\ndriver: exec\nexec:\n  command: {}\n  env:\n    OSAC_DEMO_EXEC_STATE: {}\n    PYTHONDONTWRITEBYTECODE: \"1\"\n",
            script.display(),
            state.display()
        ),
    )
    .unwrap();
}

fn leaks(text: &str) -> bool {
    text.contains(SECRET_PATH) || text.contains("/usr/sbin/ip") || text.contains("netctl")
}

async fn events_of(api: &Api, object_id: &str) -> Vec<Value> {
    let filter = format!("this.spec.object_id == \"{object_id}\"");
    let r = api.list("events", &[("filter", &filter)]).await.ok();
    r["items"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_detail_reaches_the_provider_not_the_tenant() {
    let managers = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    managers_dir(managers.path(), state.path());
    let s = TestServer::with_class(managers.path(), "exec-class", "failing-exec").await;

    let t = s.tenant("acme").await;
    t.create(
        "virtual_networks",
        json!({"metadata": {"name": "exec-net"}, "spec": {"network_class": "exec-class", "ipv4_cidr": "10.5.0.0/16"}}),
    )
    .await;
    t.wait(
        "virtual_networks",
        "exec-net",
        "VIRTUAL_NETWORK_STATE_READY",
    )
    .await;
    let subnet = t
        .create(
            "subnets",
            json!({"metadata": {"name": "s1"}, "spec": {"virtual_network": "exec-net", "ipv4_cidr": "10.5.1.0/24"}}),
        )
        .await;
    let sid = id(&subnet);

    // The tenant reads a plain message with a reference.
    let failed = t.wait("subnets", &sid, "SUBNET_STATE_FAILED").await;
    let message = failed["status"]["message"].as_str().unwrap().to_string();
    assert!(
        !leaks(&message),
        "backend detail in the tenant's status: {message}"
    );
    assert!(
        message.starts_with("the network backend could not create the subnet; the provider has been notified (reference "),
        "{message}"
    );
    let reference = message
        .rsplit_once("(reference ")
        .and_then(|(_, r)| r.strip_suffix(')'))
        .unwrap()
        .to_string();
    assert_eq!(reference.len(), 8, "{message}");

    // The provider sees the detail, with the same reference, in a provider-only event.
    let provider_events = events_of(&s.admin, &sid).await;
    let detail = provider_events
        .iter()
        .find(|e| e["spec"]["reason"] == "BackendFailure")
        .unwrap_or_else(|| panic!("no BackendFailure event: {provider_events:?}"))
        .clone();
    let text = detail["spec"]["message"].as_str().unwrap();
    assert!(
        text.contains(SECRET_PATH) && text.contains(COMMAND_LINE),
        "{text}"
    );
    assert!(
        text.contains(&reference) && text.contains("create_subnet"),
        "{text}"
    );
    assert!(text.contains("tenant 'acme'"), "{text}");
    assert_eq!(detail["spec"]["type"], "EVENT_TYPE_WARNING");

    // The tenant's event list of the subnet (and all its events) carries no detail, the
    // provider-only event cannot be read by id, and the Failed event says the plain message.
    let tenant_events = events_of(&t, &sid).await;
    assert!(
        tenant_events
            .iter()
            .all(|e| e["spec"]["reason"] != "BackendFailure"),
        "{tenant_events:?}"
    );
    assert!(
        tenant_events
            .iter()
            .any(|e| e["spec"]["reason"] == "Failed" && e["spec"]["message"] == message.as_str()),
        "{tenant_events:?}"
    );
    let all = t.list("events", &[("limit", "1000")]).await.ok();
    assert!(!leaks(&all.to_string()), "{all}");
    t.get(&format!("{PUB}/events/{}", id(&detail)))
        .await
        .err(404, "NOT_FOUND", &[]);
    s.finish().await;
}
