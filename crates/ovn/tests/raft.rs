//! A clustered northbound database (RAFT, three members): the leader killed mid-run, the
//! driver reconnects to another member on its next operation and nothing it recorded is lost.
//! No root needed (the members talk RAFT over loopback TCP, clients use unix sockets).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use osac_backends::{
    Capability, CreateSubnetRequest, CreateVirtualNetworkRequest, DriverConfig, FabricManager,
    OpError, Registration, Role,
};
use osac_ovn::sandbox::{self, NB_SCHEMA};
use osac_ovn::{OvnFabric, OvnSettings};

const DB: &str = "OVN_Northbound";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn run(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect(args[0]);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One member: its database file, client socket, control socket and pid file.
struct Member {
    dir: PathBuf,
    n: usize,
}

impl Member {
    fn path(&self, ext: &str) -> String {
        self.dir
            .join(format!("m{}.{ext}", self.n))
            .display()
            .to_string()
    }

    fn start(&self) {
        run(&[
            "ovsdb-server",
            &self.path("db"),
            &format!("--remote=punix:{}", self.path("sock")),
            &format!("--unixctl={}", self.path("ctl")),
            &format!("--pidfile={}", self.path("pid")),
            &format!("--log-file={}", self.path("log")),
            "--detach",
            "--no-chdir",
        ]);
    }

    fn status(&self) -> String {
        Command::new("ovs-appctl")
            .args(["-t", &self.path("ctl"), "cluster/status", DB])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    fn kill(&self) {
        if let Ok(pid) = std::fs::read_to_string(self.path("pid")) {
            let _ = Command::new("kill").args(["-9", pid.trim()]).status();
        }
    }
}

fn cluster(dir: &Path) -> Vec<Member> {
    let ports = [free_port(), free_port(), free_port()];
    let members: Vec<Member> = (1..=3)
        .map(|n| Member {
            dir: dir.to_path_buf(),
            n,
        })
        .collect();
    let raft = |i: usize| format!("tcp:127.0.0.1:{}", ports[i]);
    run(&[
        "ovsdb-tool",
        "create-cluster",
        &members[0].path("db"),
        NB_SCHEMA,
        &raft(0),
    ]);
    for (i, m) in members.iter().enumerate().skip(1) {
        run(&[
            "ovsdb-tool",
            "join-cluster",
            &m.path("db"),
            DB,
            &raft(i),
            &raft(0),
        ]);
    }
    for m in &members {
        m.start();
    }
    members
}

fn registration() -> Registration {
    Registration {
        name: "ovn-fabric".into(),
        role: Role::Fabric,
        description: "test".into(),
        capabilities: [Capability::Ipv4].into_iter().collect(),
        driver: DriverConfig::Ovn(serde_yaml_ng::Value::Null),
        hosting_clusters: Vec::new(),
    }
}

fn settings(members: &[&Member]) -> OvnSettings {
    let northbound: Vec<String> = members
        .iter()
        .map(|m| format!("unix:{}", m.path("sock")))
        .collect();
    let yaml = format!(
        "northbound: {}\nprovider_network: physnet\ntransit_cidr: 100.64.0.0/24\nprovider_gateway: 100.64.0.1\ngateway_chassis: [hv1]\n",
        northbound.join(",")
    );
    serde_yaml_ng::from_str(&yaml).unwrap()
}

fn subnet(id: &str, cidr: &str) -> CreateSubnetRequest {
    CreateSubnetRequest {
        subnet_id: id.into(),
        virtual_network_id: "v".into(),
        ipv4_cidr: Some(cidr.parse().unwrap()),
        ipv6_cidr: None,
        vip_cidr: None,
    }
}

/// Retries an operation the way the controllers do: transient failures again, until it
/// succeeds or `limit` passed.
async fn until_done<T, F: std::future::Future<Output = Result<T, OpError>>>(
    mut call: impl FnMut() -> F,
    limit: Duration,
) -> (T, u32) {
    let start = Instant::now();
    let mut failures = 0;
    loop {
        match call().await {
            Ok(v) => return (v, failures),
            Err(e) if e.is_transient() && start.elapsed() < limit => {
                failures += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("gave up after {failures} failures: {e}"),
        }
    }
}

#[tokio::test]
async fn the_leader_killed_mid_run_the_driver_moves_to_another_member_and_loses_nothing() {
    if let Some(missing) = sandbox::missing_tools() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the OVN tests must run under CI but cannot: missing {missing}"
        );
        eprintln!("skipped: missing {missing}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let members = cluster(dir.path());
    let start = Instant::now();
    // Every member joined (else killing the leader may leave no majority) and one leads.
    let leader = loop {
        let status: Vec<String> = members.iter().map(Member::status).collect();
        let joined = status.iter().all(|s| s.contains("Status: cluster member"));
        let leading = status.iter().position(|s| s.contains("Role: leader"));
        if let (true, Some(l)) = (joined, leading) {
            break l;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no cluster formed: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // The leader first: the driver connects to it.
    let mut order: Vec<&Member> = vec![&members[leader]];
    order.extend(
        members
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != leader)
            .map(|(_, m)| m),
    );
    let fabric = until_done(
        || async {
            OvnFabric::open(registration(), settings(&order))
                .await
                .map_err(|e| OpError::transient(e.to_string()))
        },
        Duration::from_secs(30),
    )
    .await
    .0;
    let vn = CreateVirtualNetworkRequest {
        virtual_network_id: "v".into(),
        tenant: "t".into(),
        ipv4_cidr: Some("10.2.0.0/16".parse().unwrap()),
        ipv6_cidr: None,
    };
    fabric.create_virtual_network(&vn).await.unwrap();
    let first = fabric
        .create_subnet(&subnet("s1", "10.2.1.0/24"))
        .await
        .unwrap();

    members[leader].kill();
    let s2 = subnet("s2", "10.2.2.0/24");
    let (second, failures) =
        until_done(|| fabric.create_subnet(&s2), Duration::from_secs(60)).await;
    eprintln!("the write after the leader's death succeeded after {failures} transient failures");

    // A driver opened on the surviving members knows everything: nothing was lost.
    let survivors: Vec<&Member> = order[1..].to_vec();
    let again = until_done(
        || async {
            OvnFabric::open(registration(), settings(&survivors))
                .await
                .map_err(|e| OpError::transient(e.to_string()))
        },
        Duration::from_secs(30),
    )
    .await
    .0;
    let state = again.state().await;
    assert!(state.vn("v").is_some());
    assert_eq!(
        state.subnet("s1").map(|s| s.segment_id),
        Some(first.segment_id)
    );
    assert_eq!(
        state.subnet("s2").map(|s| s.segment_id),
        Some(second.segment_id)
    );
    for m in &members {
        m.kill();
    }
}
