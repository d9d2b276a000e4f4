//! An SQLite database file is served by one process (its object cache and change feed live in
//! that process): a second `osac server` on the same file is refused with a message saying so.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_on_one_sqlite_file_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("osac.db");
    // This test process holds the file, as a running server would.
    let _held = osac_store::open(&format!("sqlite://{}", file.display()))
        .await
        .expect("open the database");
    let mut child = Command::new(env!("CARGO_BIN_EXE_osac"))
        .args(["server", "--dev", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start osac server");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a second server on the same SQLite file kept running");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let output = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!status.success(), "refused start must fail: {stderr}");
    assert!(
        stderr.contains("open in another osac process"),
        "the refusal says why: {stderr}"
    );
}
