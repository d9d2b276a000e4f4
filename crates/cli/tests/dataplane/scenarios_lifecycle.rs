//! Lifecycle scenarios of the dataplane suite: VMs on both hosting clusters, a multi-homed
//! bare-metal server, garbage collection of leaked nft tables, and a server restart in the
//! middle of a create (last: it replaces the shared server).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use osac_controller::HOSTING_CLUSTER_ANNOTATION;
use osac_linux::names;
use osac_linux::probe::{self, Listener};

use crate::harness::{Dp, EXT_GATEWAY, EXT_NS, HOSTING_CLUSTERS, Machine, blocking};
use crate::probes::{listen_tcp, ping, ping_once, reaches};

fn any_v4() -> IpAddr {
    IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)
}

mod restart;
pub use restart::restart_mid_create;

/// `ip -n ns link show dev ifname` succeeds.
fn has_link(ns: &str, ifname: &str) -> bool {
    Command::new("ip")
        .args(["-n", ns, "link", "show", "dev", ifname])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `nft list tables` inside `ns`, one `table <family> <name>` per line.
fn nft_tables(ns: &str) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "list", "tables"])
        .output()
        .unwrap_or_else(|e| panic!("nft list tables in {ns}: {e}"));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

fn nft_add_table(ns: &str, family: &str, name: &str) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "add", "table", family, name])
        .output()
        .expect("run nft");
    assert!(
        out.status.success(),
        "nft add table {family} {name} in {ns}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The gateway of `ns`'s (first) IPv4 default route.
fn gateway_of(ns: &str) -> Option<IpAddr> {
    probe::default_routes(ns).iter().find_map(|r| {
        let mut w = r.split_whitespace();
        w.find(|x| *x == "via")
            .and_then(|_| w.next())
            .and_then(|g| g.parse().ok())
    })
}

/// The hosting cluster the controller recorded on the ComputeInstance (an internal
/// annotation: clients never see it, so it is read from the store).
pub(crate) async fn hosting_cluster(dp: &Dp, id: &str) -> String {
    let store = dp.server().await.store.clone();
    let rec = store
        .get(id)
        .await
        .unwrap_or_else(|e| panic!("store get {id}: {e}"))
        .unwrap_or_else(|| panic!("no record {id}"));
    rec.annotations
        .get(HOSTING_CLUSTER_ANNOTATION)
        .cloned()
        .unwrap_or_else(|| panic!("{id} has no {HOSTING_CLUSTER_ANNOTATION}: {rec:?}"))
}

/// The subnet's IPv4 gateway as the API reports it.
async fn subnet_gateway(dp: &Dp, token: &str, subnet: &str) -> IpAddr {
    let s = dp.json(token, &["get", "subnet", subnet]).await;
    s["status"]["ipv4_gateway"]
        .as_str()
        .and_then(|g| g.parse().ok())
        .unwrap_or_else(|| panic!("subnet {subnet}: no ipv4_gateway in {s}"))
}

/// VMs on one subnet are placed on both hosting clusters (recorded on the instance, their
/// ports in the clusters' namespaces); across clusters they ping and open TCP to each other,
/// and a bare-metal server on the subnet reaches both.
pub async fn two_hosting_clusters(dp: Arc<Dp>) {
    let t = dp.tenant("lc-hosting").await;
    let mut by_cluster: BTreeMap<String, Machine> = BTreeMap::new();
    for i in 0..12 {
        if by_cluster.len() == HOSTING_CLUSTERS.len() {
            break;
        }
        let vm = dp.vm(&t, &format!("h{i}"), &[]).await;
        let cluster = hosting_cluster(&dp, &vm.id).await;
        assert!(
            HOSTING_CLUSTERS.contains(&cluster.as_str()),
            "{}: hosting cluster '{cluster}' is not one of {HOSTING_CLUSTERS:?}",
            vm.name
        );
        let sw = names::port_switch_end(&vm.id, &vm.ifname);
        for c in HOSTING_CLUSTERS {
            let here = has_link(&names::hosting_ns(c), &sw);
            assert_eq!(
                here,
                c == cluster,
                "{}: port {sw} in {c}'s namespace = {here}, recorded cluster {cluster}",
                vm.name
            );
        }
        by_cluster.entry(cluster).or_insert(vm);
    }
    assert_eq!(
        by_cluster.len(),
        HOSTING_CLUSTERS.len(),
        "12 VMs and still not on every hosting cluster: {:?}",
        by_cluster.keys()
    );
    let vms: Vec<Machine> = by_cluster.into_values().collect();
    let (a, b) = (&vms[0], &vms[1]);
    assert!(
        ping(&a.ns, b.ip).await,
        "{} cannot ping {} across clusters",
        a.name,
        b.name
    );
    assert!(
        ping(&b.ns, a.ip).await,
        "{} cannot ping {} across clusters",
        b.name,
        a.name
    );
    // tcp/22: what the tenant's default security group (on all three machines) lets in.
    let _la = listen_tcp(&a.ns, any_v4(), 22).await;
    let _lb = listen_tcp(&b.ns, any_v4(), 22).await;
    assert!(
        reaches(&a.ns, b.ip, 22).await,
        "tcp {} -> {}",
        a.name,
        b.name
    );
    assert!(
        reaches(&b.ns, a.ip, 22).await,
        "tcp {} -> {}",
        b.name,
        a.name
    );
    let bm = dp.bm(&t, "metal", &[]).await;
    for vm in [a, b] {
        assert!(ping(&bm.ns, vm.ip).await, "the BM cannot ping {}", vm.name);
        assert!(reaches(&bm.ns, vm.ip, 22).await, "tcp BM -> {}", vm.name);
        assert!(ping(&vm.ns, bm.ip).await, "{} cannot ping the BM", vm.name);
    }
}

/// A bare-metal server on two subnets (primary on the second) gets both addresses by DHCP,
/// exactly one default route (via the primary subnet's gateway), and answers on each address
/// to a VM of that subnet.
pub async fn multi_homed_bare_metal(dp: Arc<Dp>) {
    let t = dp.tenant("lc-multihome").await;
    dp.subnet(&t, "default", "second", &["10.0.2.0/24"]).await;
    dp.open_group(&t, "default", "open").await;
    let bm = dp
        .bm(
            &t,
            "multi",
            &[
                "--network-attachment",
                "interface=data-0,subnet=default-ipv4,security-groups=open",
                "--network-attachment",
                "interface=data-1,subnet=second,primary,security-groups=open",
            ],
        )
        .await;
    assert_eq!(bm.ifname, "data-1", "the primary interface: {bm:?}");
    let nic = |ifname: &str| -> IpAddr {
        bm.nics
            .iter()
            .find(|(i, _)| i == ifname)
            .and_then(|(_, ip)| ip.parse().ok())
            .unwrap_or_else(|| panic!("no address for {ifname} in {:?}", bm.nics))
    };
    let (ip0, ip1) = (nic("data-0"), nic("data-1"));
    assert!(ip0.to_string().starts_with("10.0.1."), "data-0 got {ip0}");
    assert!(ip1.to_string().starts_with("10.0.2."), "data-1 got {ip1}");
    // The primary is configured (the harness waited for it); the other one by its own client.
    let ns = bm.ns.clone();
    let configured = blocking(move || {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let a0 = probe::ipv4_addrs(&ns, "data-0");
            let a1 = probe::ipv4_addrs(&ns, "data-1");
            let ok = a0.iter().any(|a| a.starts_with(&format!("{ip0}/")))
                && a1.iter().any(|a| a.starts_with(&format!("{ip1}/")));
            if ok || Instant::now() > until {
                return (ok, a0, a1);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    })
    .await;
    assert!(
        configured.0,
        "DHCP addresses: data-0 {:?} (want {ip0}), data-1 {:?} (want {ip1})",
        configured.1, configured.2
    );
    let gw = subnet_gateway(&dp, &t, "second").await;
    let routes = blocking({
        let ns = bm.ns.clone();
        move || probe::default_routes(&ns)
    })
    .await;
    assert_eq!(routes.len(), 1, "exactly one default route: {routes:?}");
    assert!(
        routes[0].contains(&format!("via {gw} ")) && routes[0].contains("dev data-1"),
        "the default route goes via the primary subnet's gateway {gw} on data-1: {routes:?}"
    );
    let v0 = dp.vm(&t, "v0", &[]).await;
    let v1 = dp
        .vm(
            &t,
            "v1",
            &[
                "--network-attachment",
                "subnet=second,security-groups=default",
            ],
        )
        .await;
    let _l = listen_tcp(&bm.ns, any_v4(), 7002).await;
    for (vm, ip) in [(&v0, ip0), (&v1, ip1)] {
        assert!(
            ping(&vm.ns, ip).await,
            "{} cannot ping the BM at {ip}",
            vm.name
        );
        assert!(
            reaches(&vm.ns, ip, 7002).await,
            "tcp {} -> BM {ip}",
            vm.name
        );
        assert!(ping(&bm.ns, vm.ip).await, "the BM cannot ping {}", vm.name);
    }
    // Not asserted: the BM's address on the *other* subnet answers a VM only if the reply may
    // leave through the interface its route picks, which per-port anti-spoofing forbids
    // (the same as a cloud's per-interface source check).
    let cross = ping_once(&v0.ns, ip1).await;
    eprintln!("    v0 (10.0.1.x) -> BM data-1 {ip1} (asymmetric route): {cross}");
}

/// A leaked VN table (our prefix) in one of our router and hosting namespaces goes with
/// `osac admin dataplane gc`; the VN's own tables, foreign tables in our namespaces and every
/// table of a namespace that is not ours stay, and the VM behind the router still works.
pub async fn gc_leaked_nft_table(dp: Arc<Dp>) {
    let t = dp.tenant("lc-gcnft").await;
    let keep = dp.vm(&t, "keep", &[]).await;
    let vn = dp.json(&t, &["get", "virtualnetwork", "default"]).await;
    let vn_id = vn["id"].as_str().expect("vn id").to_string();
    let router = names::router_ns(&vn_id);
    let hosting = names::hosting_ns(HOSTING_CLUSTERS[0]);
    let foreign = format!("dp-foreign-nft-{}", std::process::id());
    let _ = Command::new("ip").args(["netns", "add", &foreign]).output();
    let leaked = "osac-0000deadbeef";
    let own = format!("table inet {}", names::vn_table(&vn_id));
    let bridge = format!("table bridge {}", names::BRIDGE_TABLE);
    blocking({
        let (router, hosting, foreign) = (router.clone(), hosting.clone(), foreign.clone());
        move || {
            for ns in [&router, &hosting, &foreign] {
                nft_add_table(ns, "inet", leaked);
            }
            for ns in [&router, &foreign] {
                nft_add_table(ns, "inet", "dpforeign");
            }
        }
    })
    .await;
    let before = nft_tables(&router);
    assert!(
        before.contains(&own) && before.contains(&bridge),
        "{before:?}"
    );
    let out = dp
        .ok(
            &dp.admin,
            &[
                "admin",
                "dataplane",
                "gc",
                "--scope",
                &router,
                "--scope",
                &hosting,
                "--scope",
                &foreign,
                "--scope",
                &keep.ns,
            ],
        )
        .await;
    let (in_router, in_hosting, in_foreign) = (
        nft_tables(&router),
        nft_tables(&hosting),
        nft_tables(&foreign),
    );
    let _ = Command::new("ip").args(["netns", "del", &foreign]).output();
    let leaked_line = format!("table inet {leaked}");
    assert!(
        !in_router.contains(&leaked_line),
        "leaked table not collected in the router: {in_router:?}\n{out}"
    );
    assert!(
        !in_hosting.contains(&leaked_line),
        "leaked table not collected in the hosting cluster: {in_hosting:?}\n{out}"
    );
    assert!(
        in_router.contains(&own) && in_router.contains(&bridge),
        "gc removed the VN's own tables: {in_router:?}\n{out}"
    );
    assert!(
        in_router.contains(&"table inet dpforeign".to_string()),
        "gc removed a table without our prefix: {in_router:?}\n{out}"
    );
    assert!(
        in_foreign.contains(&leaked_line) && in_foreign.contains(&"table inet dpforeign".into()),
        "gc touched a namespace that is not ours: {in_foreign:?}\n{out}"
    );
    assert!(out.contains(leaked), "the report names the table: {out}");
    assert!(has_link(&keep.ns, &keep.ifname), "gc removed the kept VM");
    let gw = gateway_of(&keep.ns).expect("kept VM's gateway");
    assert!(
        ping(&keep.ns, gw).await,
        "the kept VM still reaches its gateway"
    );
    let ext: IpAddr = EXT_GATEWAY.parse().expect("ip");
    let _l = blocking(move || Listener::tcp(EXT_NS, SocketAddr::new(ext, 7103)))
        .await
        .expect("listener in osac-ext");
    assert!(
        reaches(&keep.ns, ext, 7103).await,
        "the kept VM's NAT (in the VN table) still works"
    );
}
