//! The stock Python gRPC reflection client (`grpcio-reflection`, which asks for
//! `grpc.reflection.v1alpha`) lists the services and resolves their descriptors. Skipped with a
//! reason when no Python with `grpc` and `grpc_reflection` is installed here, except under
//! `CI=true`, where `.ci/run` installs them and the test must run.

use std::path::PathBuf;
use std::process::Command;

use crate::common::*;

/// A Python interpreter that imports the stock client, or why there is none.
fn python_with_reflection_client() -> Result<String, String> {
    let candidates = ["/usr/bin/python3", "python3"];
    let mut tried = Vec::new();
    for python in candidates {
        match Command::new(python)
            .args(["-c", "import grpc, grpc_reflection.v1alpha"])
            .output()
        {
            Ok(out) if out.status.success() => return Ok(python.to_string()),
            Ok(out) => tried.push(format!(
                "{python}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => tried.push(format!("{python}: {e}")),
        }
    }
    Err(format!(
        "no python3 imports grpc and grpc_reflection (Debian python3-grpcio and pip grpcio-reflection; .ci/run installs them): {}",
        tried.join("; ")
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stock_python_reflection_client_lists_the_services() {
    let python = match python_with_reflection_client() {
        Ok(p) => p,
        Err(reason) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("the stock reflection client test must run under CI but cannot: {reason}")
        }
        Err(reason) => {
            eprintln!("skipping the stock reflection client test: {reason}");
            return;
        }
    };
    let s = TestServer::sqlite().await;
    let target = s
        .url()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/tools/grpc_reflection_list.py");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .arg(target)
            .arg("osacnet.v1.Subnets")
            .output()
    })
    .await
    .expect("join")
    .expect("run the reflection client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the stock reflection client failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    for expected in [
        "osacnet.v1.VirtualNetworks",
        "osacnet.v1.Subnets",
        "osacnet.v1.SecurityGroups",
        "osacnet.admin.v1.Tenants",
        "osacnet.admin.v1.Tokens",
        "grpc.health.v1.Health",
        "method osacnet.v1.Subnets/Create",
        "method osacnet.v1.Subnets/List",
    ] {
        assert!(
            lines.contains(&expected),
            "{expected} missing from {lines:?}"
        );
    }
    s.finish().await;
}
