//! Running the `osac` binary against a test server, shared by the CLI end-to-end harness
//! (`common`) and the dataplane suite's (`dataplane/harness.rs`).

use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs `osac args…` with `token` against `url` on a blocking thread (the server runs on the
/// test's runtime); `config` keeps the CLI away from the user's own configuration.
pub async fn run(url: String, token: &str, config: PathBuf, args: &[&str]) -> Output {
    let token = token.to_string();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_osac"))
            .args(&args)
            .env("OSAC_URL", url)
            .env("OSAC_TOKEN", token)
            .env("OSAC_CONFIG", config)
            .env_remove("RUST_LOG")
            .output()
            .expect("run osac")
    })
    .await
    .expect("join")
}

/// The trimmed stdout of a run that must have succeeded (else a panic showing both streams).
pub fn stdout_of_success(args: &[&str], out: &Output) -> String {
    assert!(
        out.status.success(),
        "osac {args:?} failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
