//! The server restarted in the middle of a create (the last scenario: it replaces the
//! suite's shared server).

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use osac_linux::names;
use osac_linux::probe;

use super::{gateway_of, has_link, ping, ping_once, subnet_gateway};
use crate::harness::{Dp, HOSTING_CLUSTERS, Machine, blocking};

/// The state and whether `NetworkingConfigured` holds, from `get computeinstance -o json`.
fn progress(v: &serde_json::Value) -> (String, bool) {
    let state = v["status"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let conds = v["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let networked = conds.iter().any(|c| {
        c["type"] == "NetworkingConfigured"
            && (c["status"] == true
                || c["status"]
                    .as_str()
                    .is_some_and(|s| s.to_ascii_uppercase().ends_with("TRUE")))
    });
    (state, networked)
}

/// A dnsmasq of this suite stopped with SIGSTOP, continued when dropped (also on a panic).
struct Paused(u32);

impl Paused {
    /// Pauses the dnsmasq of the subnet with short hash `hash` (its pid file).
    fn dnsmasq(dp: &Dp, hash: &str) -> Paused {
        let file = dp
            .dir
            .path()
            .join("dataplane")
            .join("dnsmasq")
            .join(format!("{hash}.pid"));
        let pid: u32 = std::fs::read_to_string(&file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(|| panic!("no dnsmasq pid in {}", file.display()));
        let ok = Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "cannot pause dnsmasq {pid}");
        Paused(pid)
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

/// dnsmasq command lines of this suite's state directory, counted per config file.
fn dnsmasq_per_conf(state_dir: &str) -> BTreeMap<String, usize> {
    let out = Command::new("pgrep")
        .args(["-af", "dnsmasq"])
        .output()
        .expect("pgrep");
    let mut per = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if !line.contains(state_dir) {
            continue;
        }
        let conf = line
            .split_whitespace()
            .find_map(|a| a.strip_prefix("--conf-file="))
            .unwrap_or(line)
            .to_string();
        *per.entry(conf).or_insert(0) += 1;
    }
    per
}

/// The server is shut down while a VM is being created and started again on the same database
/// and state directory: the VM converges to RUNNING with one namespace, one port and one
/// address, each subnet keeps one dnsmasq, and the machines made before still work.
pub async fn restart_mid_create(dp: Arc<Dp>) {
    let earlier: Vec<Machine> = dp
        .machines
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .take(8)
        .cloned()
        .collect();
    // What worked before the restart must work after it (some earlier machines are behind
    // groups that drop ICMP to their gateway: those are not counted).
    let mut working = Vec::new();
    for m in &earlier {
        if let Some(gw) = gateway_of(&m.ns)
            && ping_once(&m.ns, gw).await
        {
            working.push((m.clone(), gw));
        }
    }
    let t = dp.tenant("lc-restart").await;
    let peer = dp.vm(&t, "peer", &[]).await;
    // The subnet's DHCP server is paused so the create stops between its network attachment
    // and RUNNING (no lease yet) every time, not only when the restart wins a ~100 ms race.
    let subnet = dp.json(&t, &["get", "subnet", "default-ipv4"]).await;
    let hash = names::short_hash(subnet["id"].as_str().expect("subnet id"));
    let paused = Paused::dnsmasq(&dp, &hash);
    let mid_id = dp
        .ok(
            &t,
            &[
                "create",
                "computeinstance",
                "--template",
                "small",
                "--name",
                "mid",
                "-o",
                "id",
            ],
        )
        .await;
    let store = dp.server().await.store.clone();
    let started = Instant::now();
    let mut seen = ("(not read)".to_string(), false);
    while started.elapsed() < Duration::from_secs(20) {
        if let Ok(Some(rec)) = store.get(&mid_id).await {
            seen = progress(&rec.body);
            if seen.1 || seen.0.ends_with("RUNNING") {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(store);
    assert!(
        seen.1 && !seen.0.ends_with("RUNNING"),
        "mid should be attached but not running (DHCP paused): state {}, networking configured {}",
        seen.0,
        seen.1
    );
    eprintln!(
        "    restarting the server {:.1?} after the create: state {}, networking configured",
        started.elapsed(),
        seen.0,
    );
    // Leaked state for the start-up garbage collection: a router namespace of a VN nobody
    // owns (as a crash between kernel and store would leave) and a namespace without our
    // prefix, which must survive.
    let pid = std::process::id();
    let leaked = format!(
        "{}{}",
        names::ROUTER_NS_PREFIX,
        names::short_hash(&format!("leaked-vn-{pid}"))
    );
    let foreign = format!("dpforeign-{pid}");
    for ns in [&leaked, &foreign] {
        crate::harness::record(ns);
        let added = Command::new("ip")
            .args(["netns", "add", ns])
            .status()
            .expect("ip netns add");
        assert!(added.success(), "ip netns add {ns}");
    }
    let restarted = Instant::now();
    dp.restart_collecting_garbage().await;
    eprintln!("    server restarted in {:.1?}", restarted.elapsed());
    let exists = |ns: &str| std::path::Path::new("/run/netns").join(ns).exists();
    assert!(
        !exists(&leaked),
        "start-up garbage collection left the unowned {leaked}"
    );
    assert!(
        exists(&foreign),
        "start-up garbage collection removed {foreign}"
    );
    let _ = Command::new("ip").args(["netns", "del", &foreign]).status();
    drop(paused);
    let mut last = serde_json::Value::Null;
    for _ in 0..300 {
        last = dp.json(&t, &["get", "computeinstance", "mid"]).await;
        if progress(&last).0.ends_with("RUNNING") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        progress(&last).0.ends_with("RUNNING"),
        "the VM did not converge after the restart: {last}"
    );
    let mid = dp.vm_named(&t, "mid").await;
    assert!(
        ping(&mid.ns, peer.ip).await,
        "mid cannot ping peer after the restart"
    );
    assert!(
        ping(&peer.ns, mid.ip).await,
        "peer cannot ping mid after the restart"
    );
    let gw = subnet_gateway(&dp, &t, "default-ipv4").await;
    assert!(ping(&mid.ns, gw).await, "mid cannot ping its gateway {gw}");

    // One namespace holds its MAC, one hosting cluster its port, its interface one address.
    let holders = blocking({
        let mac = mid.mac.to_ascii_lowercase();
        move || {
            let all = Command::new("ip")
                .args(["netns", "list"])
                .output()
                .expect("ip netns");
            String::from_utf8_lossy(&all.stdout)
                .lines()
                .filter_map(|l| l.split_whitespace().next().map(String::from))
                .filter(|ns| ns.starts_with(names::MACHINE_NS_PREFIX))
                .filter(|ns| {
                    Command::new("ip")
                        .args(["-n", ns, "-o", "link"])
                        .output()
                        .is_ok_and(|o| {
                            String::from_utf8_lossy(&o.stdout)
                                .to_ascii_lowercase()
                                .contains(&format!(" {mac} "))
                        })
                })
                .collect::<Vec<String>>()
        }
    })
    .await;
    assert_eq!(
        holders,
        vec![mid.ns.clone()],
        "namespaces holding mid's MAC"
    );
    let sw = names::port_switch_end(&mid.id, &mid.ifname);
    let ports: Vec<&str> = HOSTING_CLUSTERS
        .iter()
        .copied()
        .filter(|c| has_link(&names::hosting_ns(c), &sw))
        .collect();
    assert_eq!(
        ports.len(),
        1,
        "mid's port {sw} in hosting clusters {ports:?}"
    );
    let addrs = probe::ipv4_addrs(&mid.ns, &mid.ifname);
    assert_eq!(addrs.len(), 1, "mid's addresses: {addrs:?}");

    // One dnsmasq per subnet of this server (none doubled by the restart), ours among them.
    let state_dir = dp.dir.path().display().to_string();
    let per_conf = dnsmasq_per_conf(&state_dir);
    assert!(
        per_conf.values().all(|n| *n == 1),
        "a subnet with several dnsmasq after the restart: {per_conf:?}"
    );
    assert!(
        per_conf
            .keys()
            .any(|c| c.ends_with(&format!("/{hash}.conf"))),
        "no dnsmasq for the tenant's subnet ({hash}): {per_conf:?}"
    );
    let store = dp.server().await.store.clone();
    let subnets = store
        .ids(osac_model::Kind::Subnet)
        .await
        .unwrap_or_default();
    eprintln!(
        "    {} dnsmasq for {} subnets in the store",
        per_conf.len(),
        subnets.len()
    );

    eprintln!(
        "    {} of {} earlier machines checked: they reach their gateways after the restart",
        working.len(),
        earlier.len()
    );
    for (m, gw) in &working {
        assert!(
            ping(&m.ns, *gw).await,
            "{} (an earlier scenario's machine) lost its gateway {gw} after the restart",
            m.name
        );
    }
}
