//! Scenarios around clusters and bare-metal servers: a cluster's API and ingress VIPs reached
//! from the external network through its ExternalIPAttachments, security groups on bare-metal
//! servers and cluster agents, and what a removed rule does to flows already open.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use osac_linux::names::machine_ns;
use osac_linux::probe;
use serde_json::Value;

use crate::harness::{
    Dp, EXT_GATEWAY, EXT_NS, IN_GROUP_OPEN, IN_GROUP_WEB, IN_NO_GROUP, blocking, items,
};
use crate::probes::{
    WAIT, accepted_by, alive, any, connects, listen_tcp, ping_once, reaches, session, sock,
    wait_until,
};

/// A cluster as the tests see it.
struct Cluster {
    name: String,
    id: String,
    api_vip: IpAddr,
    ingress_vip: IpAddr,
    agents: Vec<Agent>,
}

/// One agent of a cluster: a host (machine namespace) on the cluster's subnet.
struct Agent {
    host: String,
    ns: String,
    ip: IpAddr,
}

impl Cluster {
    /// The namespace of the one agent whose fabric interface holds `vip` (the provisioner puts
    /// each VIP on exactly one agent, MetalLB-style).
    async fn holder(&self, vip: IpAddr) -> String {
        let namespaces: Vec<String> = self.agents.iter().map(|a| a.ns.clone()).collect();
        let holders = blocking(move || {
            let want = format!("{vip}/32");
            namespaces
                .into_iter()
                .filter(|ns| probe::ipv4_addrs(ns, FABRIC_IF).contains(&want))
                .collect::<Vec<_>>()
        })
        .await;
        let hosts: Vec<&str> = self.agents.iter().map(|a| a.host.as_str()).collect();
        assert_eq!(
            holders.len(),
            1,
            "{}: VIP {vip} must be on exactly one agent of {hosts:?}, found on {holders:?}",
            self.name
        );
        holders[0].clone()
    }
}

/// The fabric interface of `bm-standard` agents (its first `fabric` interface).
const FABRIC_IF: &str = "data-0";

fn str_of<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

fn ip_at(v: &Value, ptr: &str, what: &str) -> IpAddr {
    let s = str_of(v, ptr);
    s.parse()
        .unwrap_or_else(|_| panic!("{what}: bad address '{s}' at {ptr} in {v}"))
}

/// Creates a cluster of `size` `bm-standard` agents (single call) and waits until it is READY
/// and every agent's DHCP client configured its address.
async fn cluster(dp: &Dp, token: &str, name: &str, size: usize, extra: &[&str]) -> Cluster {
    let node_set = format!("workers=bm-standard,size={size}");
    let mut args = vec![
        "create",
        "cluster",
        "--template",
        "ocp",
        "--node-set",
        &node_set,
        "--name",
        name,
        "--wait",
        "--timeout",
        "180s",
    ];
    args.extend_from_slice(extra);
    dp.ok(token, &args).await;
    let v = dp.json(token, &["get", "cluster", name]).await;
    let mut agents = Vec::new();
    if let Some(sets) = v["status"]["node_sets"].as_object() {
        for set in sets.values() {
            for a in set["agents"].as_array().into_iter().flatten() {
                let host = str_of(a, "/host").to_string();
                agents.push(Agent {
                    ns: machine_ns(&host),
                    ip: ip_at(a, "/ip_address", "agent"),
                    host,
                });
            }
        }
    }
    assert_eq!(agents.len(), size, "{name}: agents in {v}");
    for a in &agents {
        let (ns, want) = (a.ns.clone(), format!("{}/", a.ip));
        wait_until(
            move || {
                probe::ipv4_addrs(&ns, FABRIC_IF)
                    .iter()
                    .any(|x| x.starts_with(&want))
                    && !probe::default_routes(&ns).is_empty()
            },
            "an agent configured by DHCP",
        )
        .await;
    }
    Cluster {
        name: name.to_string(),
        id: str_of(&v, "/id").to_string(),
        api_vip: ip_at(&v, "/status/api_endpoint", "api endpoint"),
        ingress_vip: ip_at(&v, "/status/ingress_endpoint", "ingress endpoint"),
        agents,
    }
}

/// The id and external address of the READY ExternalIPAttachment whose `spec.<field>` is
/// `target` (id or name) and, for clusters, whose endpoint is `endpoint` (API / INGRESS).
async fn ready_attachment(
    dp: &Dp,
    token: &str,
    field: &str,
    target: (&str, &str),
    endpoint: Option<&str>,
) -> (String, IpAddr) {
    let mut last = Value::Null;
    for _ in 0..300 {
        last = dp.json(token, &["get", "externalipattachments"]).await;
        let found = items(&last).into_iter().find(|a| {
            let t = a["spec"][field].as_str();
            (t == Some(target.0) || t == Some(target.1))
                && endpoint.is_none_or(|e| {
                    a["spec"]["target_endpoint"].as_str()
                        == Some(&format!("EXTERNAL_IP_ATTACHMENT_ENDPOINT_{e}"))
                })
                && a["status"]["state"] == "EXTERNAL_IP_ATTACHMENT_STATE_READY"
        });
        if let Some(a) = found
            && let Ok(ip) = str_of(&a, "/status/external_ip_address").parse()
        {
            return (str_of(&a, "/id").to_string(), ip);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no READY external IP attachment for {target:?} {endpoint:?}: {last}");
}

/// A single-call cluster's API and ingress VIPs, each answered by one agent, are reachable
/// from the external network at the cluster's external addresses on what its groups allow
/// (the tenant's default group: tcp/22, tcp/443, ICMP); deleting an ExternalIPAttachment
/// stops new connections and cuts the open ones, and leaves the other endpoint working.
pub async fn cluster_vips_dnat_from_external(dp: Arc<Dp>) {
    let t = dp.tenant("cvip").await;
    let c = cluster(&dp, &t, "c", 2, &["--external-ip-attachment"]).await;
    let target = (c.id.as_str(), c.name.as_str());
    let (api_id, api_ext) = ready_attachment(&dp, &t, "cluster", target, Some("API")).await;
    let (ing_id, ing_ext) = ready_attachment(&dp, &t, "cluster", target, Some("INGRESS")).await;
    let cluster_ext = dp.json(&t, &["get", "cluster", "c"]).await;
    assert_eq!(
        str_of(&cluster_ext, "/status/external_ip_address"),
        api_ext.to_string(),
        "the cluster's external address is its API attachment's"
    );
    let api_ns = c.holder(c.api_vip).await;
    let ing_ns = c.holder(c.ingress_vip).await;
    // Listeners bound to the VIPs themselves: an accepted connection proves it reached the
    // agent answering that VIP (not merely some host that refused it).
    let api_443 = Arc::new(listen_tcp(&api_ns, c.api_vip, 443).await);
    let api_22 = Arc::new(listen_tcp(&api_ns, c.api_vip, 22).await);
    let api_8080 = Arc::new(listen_tcp(&api_ns, c.api_vip, 8080).await);
    let ing_443 = Arc::new(listen_tcp(&ing_ns, c.ingress_vip, 443).await);
    let ing_8080 = Arc::new(listen_tcp(&ing_ns, c.ingress_vip, 8080).await);
    let client: IpAddr = EXT_GATEWAY.parse().expect("ip");
    assert_eq!(
        accepted_by(EXT_NS, api_ext, 443, &api_443).await,
        vec![client],
        "API: tcp/443 from osac-ext to {api_ext} reaches the API VIP {} (client address kept)",
        c.api_vip
    );
    assert!(
        !accepted_by(EXT_NS, api_ext, 22, &api_22).await.is_empty(),
        "API: tcp/22 (allowed by the default group) reaches the API VIP"
    );
    assert_eq!(
        accepted_by(EXT_NS, ing_ext, 443, &ing_443).await,
        vec![client],
        "INGRESS: tcp/443 from osac-ext to {ing_ext} reaches the ingress VIP {}",
        c.ingress_vip
    );
    assert!(
        api_443.peer_ips().len() == 1,
        "the ingress address must not land on the API VIP's listener"
    );
    // The groups filter the VIPs (a port they do not allow is dropped). Collected, not
    // asserted at once, so the deletion checks below still run.
    let mut sg_failures = Vec::new();
    for (what, ext, l) in [("API", api_ext, &api_8080), ("INGRESS", ing_ext, &ing_8080)] {
        if connects(EXT_NS, ext, 8080).await || !l.peer_ips().is_empty() {
            sg_failures.push(format!(
                "{what}: tcp/8080 (not allowed by the cluster's groups) passed to the VIP"
            ));
        }
    }
    // Deleting the API attachment: new connections stop, the open one is cut, ingress stays.
    let open = session(EXT_NS, api_ext, 443).await;
    let (ok, open) = alive(open).await;
    assert!(ok, "control: the open session to the API carries data");
    dp.ok(&t, &["delete", "externalipattachment", &api_id, "--wait"])
        .await;
    assert!(
        !connects(EXT_NS, api_ext, 443).await,
        "new connections to the API's external address pass after its attachment was deleted"
    );
    let (ok, open) = alive(open).await;
    assert!(
        !ok,
        "an open connection to the API survived its attachment's deletion"
    );
    drop(open);
    assert!(
        !accepted_by(EXT_NS, ing_ext, 443, &ing_443).await.is_empty(),
        "deleting the API attachment must leave ingress reachable"
    );
    dp.ok(&t, &["delete", "externalipattachment", &ing_id, "--wait"])
        .await;
    assert!(
        !connects(EXT_NS, ing_ext, 443).await,
        "new connections to ingress pass after its attachment was deleted"
    );
    drop((api_443, api_22, api_8080, ing_443, ing_8080));
    dp.ok(
        &t,
        &["delete", "cluster", "c", "--wait", "--timeout", "120s"],
    )
    .await;
    assert!(sg_failures.is_empty(), "{sg_failures:?}");
}

/// Security groups apply to a bare-metal server and to a cluster agent (at its subnet
/// address) as to a VM: the allowed port passes, other ports and ICMP are dropped; a server in
/// a wide-open group is open, a machine attached without groups closed (a VM here: the dev
/// inventory's four bare-metal hosts are shared by scenarios running at the same time; the
/// closed bare-metal port is proved by `crates/linux/tests/attacks/closed.rs`). The cluster's
/// VIPs are filtered by its groups too.
pub async fn security_groups_bm_and_cluster_agent(dp: Arc<Dp>) {
    let t = dp.tenant("sgbmc").await;
    dp.security_group(
        &t,
        "default",
        "web",
        &["protocol:tcp,port:8080,source:0.0.0.0/0"],
    )
    .await;
    let client = dp.vm(&t, "client", &[]).await;
    let web = dp.bm(&t, "bm-web", IN_GROUP_WEB).await;
    dp.open_group(&t, "default", "open").await;
    let open = dp.bm(&t, "bm-open", IN_GROUP_OPEN).await;
    let closed = dp.vm(&t, "vm-closed", IN_NO_GROUP).await;
    let c = cluster(&dp, &t, "c", 1, IN_GROUP_WEB).await;
    let agent = &c.agents[0];
    let mut ls = Vec::new();
    // Bound to the subnet addresses: the agent also listens on its VIP below.
    for (ns, ip) in [
        (&web.ns, web.ip),
        (&open.ns, open.ip),
        (&closed.ns, closed.ip),
        (&agent.ns, agent.ip),
    ] {
        for port in [8080, 9090] {
            ls.push(Arc::new(listen_tcp(ns, ip, port).await));
        }
    }
    assert!(
        reaches(&client.ns, web.ip, 8080).await,
        "bare metal: allowed tcp/8080 must pass"
    );
    assert!(
        !connects(&client.ns, web.ip, 9090).await,
        "bare metal: tcp/9090 must be dropped by 'web'"
    );
    assert!(
        !ping_once(&client.ns, web.ip).await,
        "bare metal: ICMP must be dropped by 'web'"
    );
    assert!(
        reaches(&client.ns, open.ip, 9090).await,
        "bare metal in a wide-open group: every port is open"
    );
    assert!(
        !connects(&client.ns, closed.ip, 9090).await,
        "a machine without groups: closed"
    );
    assert!(
        reaches(&client.ns, agent.ip, 8080).await,
        "cluster agent {}: allowed tcp/8080 must pass",
        agent.ip
    );
    assert!(
        !connects(&client.ns, agent.ip, 9090).await,
        "cluster agent: tcp/9090 must be dropped by 'web'"
    );
    assert!(
        !ping_once(&client.ns, agent.ip).await,
        "cluster agent: ICMP must be dropped by 'web'"
    );
    // The VIPs answered by the agent: the cluster's groups apply to them as well.
    let vip_8080 = Arc::new(listen_tcp(&agent.ns, c.api_vip, 8080).await);
    let vip_9090 = Arc::new(listen_tcp(&agent.ns, c.api_vip, 9090).await);
    assert!(
        !accepted_by(&client.ns, c.api_vip, 8080, &vip_8080)
            .await
            .is_empty(),
        "cluster API VIP {}: allowed tcp/8080 must pass",
        c.api_vip
    );
    let vip_open = connects(&client.ns, c.api_vip, 9090).await || !vip_9090.peer_ips().is_empty();
    drop((ls, vip_8080, vip_9090));
    // Free the inventory for later scenarios (and the tenant for cleanup).
    dp.ok(
        &t,
        &["delete", "cluster", "c", "--wait", "--timeout", "120s"],
    )
    .await;
    dp.ok(
        &t,
        &[
            "delete",
            "baremetalinstance",
            "bm-web",
            "bm-open",
            "--wait",
            "--timeout",
            "120s",
        ],
    )
    .await;
    assert!(
        !vip_open,
        "cluster API VIP: tcp/9090 (not allowed by 'web') must be dropped"
    );
}

/// docs/dataplane.md: removing a rule does not cut established flows (AWS semantics) —
/// conntrack keeps accepting connections that were allowed when they started, new ones are
/// evaluated against the new rules. Checked inside the VN (VM to VM) and from the external
/// network through DNAT, with data flowing on the old sessions after the removal.
pub async fn removed_rule_and_established_flows(dp: Arc<Dp>) {
    let t = dp.tenant("estab").await;
    dp.security_group(
        &t,
        "default",
        "app",
        &[
            "protocol:tcp,port:8080,source:0.0.0.0/0",
            "protocol:tcp,port:22,source:0.0.0.0/0",
        ],
    )
    .await;
    let client = dp.vm(&t, "client", &[]).await;
    let server = dp
        .vm(
            &t,
            "server",
            &[
                "--external-ip-attachment",
                "--network-attachment",
                "subnet=default-ipv4,security-groups=app",
            ],
        )
        .await;
    let (_, ext) = ready_attachment(
        &dp,
        &t,
        "compute_instance",
        (&server.id, &server.name),
        None,
    )
    .await;
    let _l8080 = Arc::new(listen_tcp(&server.ns, any(server.ip), 8080).await);
    let _l22 = Arc::new(listen_tcp(&server.ns, any(server.ip), 22).await);
    assert!(
        reaches(&client.ns, server.ip, 8080).await,
        "control: tcp/8080 inside the VN"
    );
    assert!(
        reaches(EXT_NS, ext, 8080).await,
        "control: tcp/8080 from osac-ext through DNAT"
    );
    let inside = session(&client.ns, server.ip, 8080).await;
    let outside = session(EXT_NS, ext, 8080).await;
    // Remove the tcp/8080 rule through the API.
    dp.ok(
        &t,
        &[
            "update",
            "securitygroup",
            "app",
            "--ingress",
            "protocol:tcp,port:22,source:0.0.0.0/0",
        ],
    )
    .await;
    let (cns, sip) = (client.ns.clone(), server.ip);
    wait_until(
        move || !probe::tcp_connects(&cns, sock(sip, 8080), WAIT).unwrap_or(true),
        "the removed rule (tcp/8080) stops new connections inside the VN",
    )
    .await;
    assert!(
        !connects(EXT_NS, ext, 8080).await,
        "the removed rule (tcp/8080) stops new connections through DNAT"
    );
    assert!(
        reaches(&client.ns, server.ip, 22).await,
        "the kept rule (tcp/22) still passes"
    );
    let (inside_ok, _inside) = alive(inside).await;
    let (outside_ok, _outside) = alive(outside).await;
    assert!(
        inside_ok,
        "an established tcp/8080 session inside the VN was cut by the rule removal"
    );
    assert!(
        outside_ok,
        "an established tcp/8080 session through DNAT was cut by the rule removal"
    );
}
