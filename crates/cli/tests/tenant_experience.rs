//! What a tenant expects from a cloud CLI: `get --watch` and `events --watch` print changes as
//! they happen, `describe` shows an object with what it uses and what uses it, `-o wide`,
//! shell completion, exit codes (1 API error, 2 usage, 3 --wait timed out, 4 FAILED), and
//! counters shown when zero.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::start;

/// A running `osac … --watch` whose stdout lines arrive on a channel.
struct Watching {
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
}

impl Watching {
    fn start(url: String, token: &str, args: &[&str]) -> Watching {
        let mut child = Command::new(env!("CARGO_BIN_EXE_osac"))
            .args(args)
            .env("OSAC_URL", url)
            .env("OSAC_TOKEN", token)
            .env("OSAC_CONFIG", "/nonexistent/osac-config.json")
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn osac");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Watching { child, lines }
    }

    /// Lines until one contains every fragment (panics after 20 s).
    async fn until(&self, fragments: &[&str]) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut seen = Vec::new();
        loop {
            match self.lines.try_recv() {
                Ok(line) if fragments.iter().all(|f| line.contains(f)) => return line,
                Ok(line) => seen.push(line),
                Err(_) => {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "no line with {fragments:?}; saw {seen:#?}"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watch_describe_wide_completion_and_exit_codes() {
    let env = start().await;
    let token = env.tenant_admin("acme").await;

    // get --watch: the current objects first, then a new one as it is created and readied.
    let watch = Watching::start(env.server.url(), &token, &["get", "subnets", "--watch"]);
    watch.until(&["EVENT", "NAME", "STATE"]).await;
    watch.until(&["ADDED", "default-ipv4"]).await;
    let json_watch = Watching::start(
        env.server.url(),
        &token,
        &["get", "subnet", "default-ipv4", "--watch", "-o", "json"],
    );
    let first: serde_json::Value =
        serde_json::from_str(&json_watch.until(&["\"ADDED\""]).await).expect("a JSON line");
    assert_eq!(first["object"]["metadata"]["name"], "default-ipv4");
    let events = Watching::start(env.server.url(), &token, &["events", "--watch"]);
    env.ok(
        &token,
        &[
            "create",
            "subnet",
            "--virtual-network",
            "default",
            "--cidr",
            "10.0.7.0/24",
            "--name",
            "watched",
        ],
    )
    .await;
    // READY comes as a MODIFIED, or already with the ADDED when the controller was quicker
    // than the watch's first read.
    let added = watch.until(&["ADDED", "watched"]).await;
    if !added.contains("READY") {
        watch.until(&["MODIFIED", "watched", "READY"]).await;
    }
    events.until(&["Subnet/watched"]).await;
    // The named watch only reports its object.
    env.ok(&token, &["label", "subnet", "default-ipv4", "seen=yes"])
        .await;
    let modified: serde_json::Value =
        serde_json::from_str(&json_watch.until(&["\"MODIFIED\""]).await).expect("a JSON line");
    assert_eq!(modified["object"]["metadata"]["labels"]["seen"], "yes");
    assert!(
        json_watch.lines.try_iter().all(|l| !l.contains("watched")),
        "a watch of one subnet reported another"
    );

    // describe: state, what it uses, what uses it, events.
    env.ok(
        &token,
        &[
            "create",
            "computeinstance",
            "--template",
            "small",
            "--network-attachment",
            "subnet=watched",
            "--name",
            "vm1",
            "--wait",
        ],
    )
    .await;
    let described = env.ok(&token, &["describe", "subnet", "watched"]).await;
    assert!(described.contains("State:     READY"), "{described}");
    assert!(
        described.contains("Uses:      virtualnetwork/default"),
        "{described}"
    );
    assert!(described.contains("computeinstance/vm1"), "{described}");
    assert!(described.contains("Events:"), "{described}");

    // -o wide: full ids, labels, creation time.
    let wide = env.ok(&token, &["get", "subnets", "-o", "wide"]).await;
    let header = wide.lines().next().expect("header");
    assert!(
        header.contains("LABELS") && header.contains("CREATED"),
        "{wide}"
    );
    let subnet = env
        .json(&token, &["get", "subnet", "default-ipv4", "-o", "json"])
        .await;
    assert!(
        wide.contains(subnet["id"].as_str().expect("id")),
        "wide shows the full id: {wide}"
    );
    assert!(wide.contains("seen=yes"), "{wide}");

    // Completion scripts.
    for shell in ["bash", "zsh", "fish"] {
        let script = env.ok(&token, &["completion", shell]).await;
        assert!(script.contains("describe"), "{shell}: {script}");
    }

    // Exit codes.
    let code = |out: &std::process::Output| out.status.code();
    let missing = env.osac(&token, &["get", "subnet", "nope"]).await;
    assert_eq!(code(&missing), Some(1), "an API error");
    let usage = env.osac(&token, &["get", "subnet", "--no-such-flag"]).await;
    assert_eq!(code(&usage), Some(2), "a usage error");
    let timed_out = env
        .osac(
            &token,
            &[
                "create",
                "computeinstance",
                "--template",
                "small",
                "--name",
                "slow",
                "--wait",
                "--timeout",
                "0s",
            ],
        )
        .await;
    assert_eq!(
        code(&timed_out),
        Some(3),
        "--wait timed out: {}",
        String::from_utf8_lossy(&timed_out.stderr)
    );

    // Counters are shown when zero: the test pool has no allocations yet in this class.
    env.ok(
        &env.admin,
        &[
            "admin",
            "create",
            "externalippool",
            "--cidrs",
            "198.51.100.0/30",
            "--ip-family",
            "ipv4",
            "--name",
            "tiny",
            "--wait",
        ],
    )
    .await;
    let pool = env
        .ok(&env.admin, &["admin", "get", "pool", "tiny", "-o", "yaml"])
        .await;
    assert!(pool.contains("allocated: '0'"), "{pool}");
}
