//! `promtool check metrics` (Prometheus's own linter) accepts the server's `/metrics` text:
//! counters are counters, each family is registered once. Skipped with a reason when promtool
//! is not installed here, except under `CI=true`, where `.ci/run` installs it (Debian
//! `prometheus`) and the test must run.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::common::*;

/// Runs `promtool check metrics` on `text`: its exit status and what it printed.
fn promtool_check(text: String) -> std::io::Result<(bool, String)> {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(text.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    Ok((
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    ))
}

/// The `# TYPE` of a family, and how many times the text declares it.
fn declared_type<'a>(text: &'a str, family: &str) -> (Option<&'a str>, usize) {
    let prefix = format!("# TYPE {family} ");
    let declared: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .collect();
    (declared.first().copied(), declared.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promtool_accepts_the_metrics() {
    if Command::new("promtool").arg("--version").output().is_err() {
        let reason = "promtool is not installed (Debian package prometheus)";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("the promtool test must run under CI but cannot: {reason}");
        }
        eprintln!("skipping the promtool test: {reason}");
        return;
    }
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    t.ready_vn("net-a", "10.0.0.0/16").await;
    t.get(&format!("{PUB}/subnets")).await.ok();
    s.admin.get(&format!("{PRIV}/external_ip_pools")).await.ok();

    let text = s.admin.get("/metrics").await.text;
    let (ok, said) = tokio::task::spawn_blocking(move || promtool_check(text))
        .await
        .expect("join")
        .expect("run promtool");
    assert!(ok, "promtool check metrics refused /metrics:\n{said}");

    let text = s.admin.get("/metrics").await.text;
    for counter in [
        "osac_store_write_transactions_total",
        "osac_store_group_commits_total",
        "osac_store_group_commit_sets_total",
        "osac_api_requests_total",
        "process_cpu_seconds_total",
    ] {
        assert_eq!(
            declared_type(&text, counter),
            (Some("counter"), 1),
            "{counter}"
        );
    }
    assert_eq!(
        declared_type(&text, "process_start_time_seconds"),
        (Some("gauge"), 1)
    );
    // Each collection has its own route label.
    for route in [
        r#"route="/api/fulfillment/v1/subnets""#,
        r#"route="/api/fulfillment/v1/virtual_networks""#,
        r#"route="/api/private/v1/external_ip_pools""#,
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("osac_api_requests_total{") && l.contains(route)),
            "no request counted with {route}"
        );
    }
    assert!(
        !text.contains("{collection}\""),
        "a served collection kept the template"
    );
    s.finish().await;
}
