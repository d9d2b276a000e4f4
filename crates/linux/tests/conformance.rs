//! The contract conformance suites of `osac-backends` (the same ones sim and exec pass), run
//! against the `linux` fabric and k8s managers on the local kernel. Root; skipped (printing
//! why) without root/tools, failing under `CI=true`.

mod common;

use std::sync::Arc;

use common::Env;
use osac_backends::conformance::{
    FabricSuiteOptions, LeaseReporting, fabric_suite_with, k8s_suite,
};
use osac_backends::{FabricManager, K8sManager};
use osac_linux::{cmd, names};

#[tokio::test]
async fn linux_fabric_and_k8s_pass_the_conformance_suites() {
    if !common::ready().await {
        return;
    }
    let mut env = Env::new(15).await;
    // Ids the suites derive from the prefix, registered so the harness cleans their namespaces.
    let (vn, host) = (env.id("vn"), env.id("host"));
    let prefix = env.tag.clone();

    // A real driver reports a lease only after the machine ran DHCP (nothing runs one here).
    let options = FabricSuiteOptions {
        leases: LeaseReporting::AfterDhcp,
    };
    let fabric: Arc<dyn FabricManager> = env.fabric.clone();
    fabric_suite_with(fabric, &prefix, options).await.unwrap();
    assert!(
        !cmd::netns_exists(&names::router_ns(&vn)).await.unwrap(),
        "deleting the virtual network removed its router namespace"
    );
    // The second attachment was detached with park = true: its cable waits on the parking
    // bridge, the first one's is gone.
    let parked = cmd::link(names::PARK_NS, &names::port_switch_end(&host, "data-1"))
        .await
        .unwrap();
    assert_eq!(
        parked.and_then(|l| l.master).as_deref(),
        Some(names::PARK_BRIDGE)
    );
    assert!(
        cmd::link(names::PARK_NS, &names::port_switch_end(&host, "data-0"))
            .await
            .unwrap()
            .is_none()
    );

    let k8s: Arc<dyn K8sManager> = Arc::new(env.k8s().await);
    k8s_suite(k8s, &prefix).await.unwrap();
    for cluster in [env.id("hc-a"), env.id("hc-b")] {
        let bridge = names::subnet_bridge(&format!("{prefix}-subnet"));
        assert!(
            cmd::link(&names::hosting_ns(&cluster), &bridge)
                .await
                .unwrap()
                .is_none(),
            "the overlay bridge is gone from {cluster}"
        );
    }
    env.teardown().await;
}
