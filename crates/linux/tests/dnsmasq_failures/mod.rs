//! dnsmasq failures are never a silent wait for a lease: a hosts directory dnsmasq cannot
//! reach once unprivileged is refused at start-up with the setting to change, and a problem
//! dnsmasq logs is the subnet operation's error (in dnsmasq's words) until it is fixed.
//!
//! Mutation-checked: without `dnsmasq::ensure_hosts_root` in `LinuxFabric::new` the fabric
//! started on the unreachable directory; with `dnsmasq::health` always answering Ok the
//! broken subnet's operation succeeded (the silent wait of the report).

use osac_backends::*;
use osac_linux::fabric_manager::dnsmasq::{self, DnsmasqFiles};
use osac_linux::{LinuxFabric, LinuxSettings};

use super::common::{self, Env};
use super::{subnet_req, vn_req};

#[tokio::test]
async fn a_hosts_directory_dnsmasq_cannot_reach_refuses_start_up_naming_the_setting() {
    if !common::ready().await {
        return;
    }
    // A private directory (0700): `nobody` cannot traverse it.
    let private = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        private.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let settings = LinuxSettings {
        state_dir: private.path().join("state"),
        dhcp_hosts_dir: Some(private.path().join("hosts")),
        ..LinuxSettings::default()
    };
    let err = LinuxFabric::new(
        common::registration("linux-fabric", Role::Fabric, &[]),
        settings,
    )
    .await
    .err()
    .expect("refused")
    .to_string();
    assert!(
        err.contains("dhcp_hosts_dir") && err.contains(&private.path().display().to_string()),
        "{err}"
    );
    // The default keeps host entries out of the private state directory: it starts.
    let settings = LinuxSettings {
        state_dir: private.path().join("state"),
        ..LinuxSettings::default()
    };
    let root = settings.dhcp_hosts_root();
    assert!(!root.starts_with(private.path()));
    LinuxFabric::new(
        common::registration("linux-fabric", Role::Fabric, &[]),
        settings,
    )
    .await
    .expect("a private state directory is fine");
    let _ = std::fs::remove_dir_all(root);
}

#[tokio::test]
async fn a_problem_dnsmasq_logs_is_the_subnets_error_until_fixed() {
    if !common::ready().await {
        return;
    }
    let env = Env::new(22).await;
    let c = &env.client;
    c.create_virtual_network(&vn_req(&env, "vn")).await.unwrap();
    let req = subnet_req(&env, "vn", "s1", 1);
    c.create_subnet(&req).await.unwrap();
    let files = DnsmasqFiles::of(&env.settings, &env.id("s1"));
    // Break it: the hosts directory becomes unreadable for dnsmasq's user, and dnsmasq
    // restarts (as after a reboot or a crash).
    let chmod = |mode: u32| {
        std::fs::set_permissions(
            &files.hosts,
            std::os::unix::fs::PermissionsExt::from_mode(mode),
        )
        .unwrap()
    };
    chmod(0o700);
    dnsmasq::stop(&files).await.unwrap();
    // The operation that starts dnsmasq, or at the latest the next one, reports it.
    let mut outcome = c.create_subnet(&req).await;
    for _ in 0..10 {
        if outcome.is_err() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        outcome = c.create_subnet(&req).await;
    }
    let err = outcome.expect_err("the subnet operation reports dnsmasq's problem");
    assert!(err.is_transient(), "retried: {err:?}");
    let msg = err.message();
    assert!(
        msg.contains("DHCP server (dnsmasq)")
            && msg.contains(&files.hosts.display().to_string())
            && msg.contains("Permission denied"),
        "{msg}"
    );
    // A workload waiting for its lease is told too.
    let lease = c
        .query_dhcp_lease(&QueryDhcpLeaseRequest {
            subnet_id: env.id("s1"),
            mac_address: "02:16:00:00:00:01".into(),
        })
        .await;
    let lease_err = lease.expect_err("the lease query reports the problem");
    assert!(
        lease_err.message().contains("Permission denied"),
        "{lease_err:?}"
    );
    // Fixed by the operator: the next operation restarts dnsmasq and succeeds.
    chmod(0o755);
    c.create_subnet(&req).await.expect("healthy again");
    assert!(dnsmasq::running_pid(&files).await.is_some());
    env.teardown().await;
}
