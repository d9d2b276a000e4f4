//! A sandbox carries packets: two workloads on one logical switch, plugged on different
//! hypervisors, ping each other over Geneve; a third on another switch is not reachable.
//! Needs root (network namespaces) and the OVN packages; without them it says so and passes,
//! except under CI, where it must run.

use std::process::Command;
use std::time::{Duration, Instant};

use osac_ovn::sandbox::{self, Sandbox, SandboxConfig};
use osac_ovsdb::{Client, datum, op};
use serde_json::json;

const PREFIX: &str = "ovnt";

fn can_run() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let why = match (root, sandbox::missing_sandbox_tools()) {
        (true, None) => return true,
        (false, _) => "not root".to_string(),
        (true, Some(missing)) => format!("missing {missing}"),
    };
    assert!(
        std::env::var_os("CI").is_none(),
        "the OVN sandbox test must run under CI but cannot: {why}"
    );
    eprintln!("skipped: {why}");
    false
}

fn sh(args: &[&str]) {
    let ok = Command::new(args[0])
        .args(&args[1..])
        .status()
        .expect(args[0]);
    assert!(ok.success(), "{args:?}");
}

fn remove_ns(ns: &str) {
    let _ = Command::new("ip")
        .args(["netns", "del", ns])
        .stderr(std::process::Stdio::null())
        .status();
}

fn ping(from: &str, to: &str) -> bool {
    Command::new("ip")
        .args(["netns", "exec", from, "ping", "-c1", "-W1", to])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn ping_within(from: &str, to: &str, wait: Duration) -> bool {
    let until = Instant::now() + wait;
    loop {
        if ping(from, to) {
            return true;
        }
        if Instant::now() > until {
            return false;
        }
    }
}

/// A logical switch with ports `(name, mac, ip)`, each pinned to its MAC and address.
fn switch_with_ports(switch: &str, ports: &[(&str, &str, &str)]) -> Vec<serde_json::Value> {
    let mut ops = Vec::new();
    let mut refs = Vec::new();
    for (name, mac, ip) in ports {
        let addr = format!("{mac} {ip}");
        ops.push(op::insert(
            "Logical_Switch_Port",
            op::row([
                ("name", json!(name)),
                ("addresses", datum::string_set([addr.as_str()])),
                ("port_security", datum::string_set([addr.as_str()])),
            ]),
            Some(&format!("p_{name}")),
        ));
        refs.push(datum::named_uuid(&format!("p_{name}")));
    }
    ops.push(op::insert(
        "Logical_Switch",
        op::row([("name", json!(switch)), ("ports", datum::set(refs))]),
        None,
    ));
    ops
}

#[tokio::test]
async fn workloads_on_two_hypervisors_talk_over_geneve_and_other_switches_stay_apart() {
    if !can_run() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sbx = Sandbox::start(SandboxConfig {
        dir: dir.path().to_path_buf(),
        prefix: PREFIX.into(),
        hypervisors: 2,
        provider_network: None,
    })
    .await
    .expect("sandbox");
    let (nb, _) = Client::connect(sbx.nb()).await.expect("northbound");
    let mut ops = switch_with_ports(
        "ls-a",
        &[
            ("a1", "0a:00:00:00:00:01", "10.9.0.1"),
            ("a2", "0a:00:00:00:00:02", "10.9.0.2"),
        ],
    );
    ops.extend(switch_with_ports(
        "ls-b",
        &[("b1", "0a:00:00:00:00:03", "10.9.0.3")],
    ));
    nb.transact("OVN_Northbound", ops).await.expect("switches");

    let workloads = [
        ("a1", "ovnt-w1", "0a:00:00:00:00:01", "10.9.0.1", 0),
        ("a2", "ovnt-w2", "0a:00:00:00:00:02", "10.9.0.2", 1),
        ("b1", "ovnt-w3", "0a:00:00:00:00:03", "10.9.0.3", 1),
    ];
    for (port, ns, mac, ip, hv) in workloads {
        remove_ns(ns);
        sh(&["ip", "netns", "add", ns]);
        sbx.hypervisors()[hv]
            .plug(port, ns, "eth0", mac)
            .await
            .expect("plug");
        sh(&[
            "ip",
            "-n",
            ns,
            "addr",
            "add",
            &format!("{ip}/24"),
            "dev",
            "eth0",
        ]);
        sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
    }
    let across = ping_within("ovnt-w1", "10.9.0.2", Duration::from_secs(60));
    let apart = ping("ovnt-w1", "10.9.0.3");
    for (_, ns, ..) in workloads {
        remove_ns(ns);
    }
    sbx.stop().await;
    assert!(across, "a1 on hv1 cannot ping a2 on hv2");
    assert!(!apart, "a1 reached b1 on another logical switch");
}
