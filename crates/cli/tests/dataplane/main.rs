//! The dataplane suite (root): the public API drives the real `linux` dataplane and real
//! packets check that the network does what the API promises. One server for the whole suite
//! (kernel names are global: scenarios run one after the other, each in its own tenant);
//! every scenario runs even when an earlier one failed, and the suite fails listing them.
//! Without root or tools it skips with a reason, except under `CI=true`, where it fails.
//! Before and after, `harness::sweep` removes the kernel state this suite left (also that of
//! an aborted earlier run) and nothing else, so a rerun on the same machine starts clean.

mod diagnose;
mod differential;
mod harness;
#[path = "../support/osac_cli.rs"]
mod osac_cli;
mod probes;
mod scenarios;
mod scenarios_cluster;
mod scenarios_ipv6;
mod scenarios_lifecycle;
mod scenarios_metering;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use harness::Dp;

type Scenario = fn(Arc<Dp>) -> Pin<Box<dyn Future<Output = ()> + Send>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dataplane_suite() {
    if !harness::can_run().await {
        return;
    }
    let dp = Arc::new(harness::start().await);
    let only = std::env::var("OSAC_DATAPLANE_ONLY").unwrap_or_default();
    let mut failed = Vec::new();
    for (name, scenario) in scenarios::ALL {
        if !only.is_empty() && !only.split(',').any(|o| name.contains(o)) {
            continue;
        }
        eprintln!("--- dataplane: {name}");
        let started = std::time::Instant::now();
        let outcome = tokio::spawn(scenario(dp.clone())).await;
        match outcome {
            Ok(()) => eprintln!("--- dataplane: {name}: ok ({:.1?})", started.elapsed()),
            Err(e) => {
                eprintln!("--- dataplane: {name}: FAILED: {e}");
                failed.push(*name);
            }
        }
    }
    let started = std::time::Instant::now();
    scenarios::cleanup(dp.clone()).await;
    dp.stop().await;
    // Whatever the API did not remove (a failed scenario, a failed delete) goes now.
    harness::sweep().await;
    eprintln!("--- dataplane: cleanup ({:.1?})", started.elapsed());
    assert!(failed.is_empty(), "dataplane scenarios failed: {failed:?}");
}

/// Boxes an async scenario function.
#[macro_export]
macro_rules! scenario {
    ($f:path) => {
        (|dp| Box::pin($f(dp))) as $crate::Scenario
    };
}
