//! Measure 3: the whole dataplane of 500 workloads (10 VNs × 5 subnets × 10 ports, half VMs on
//! two hosting clusters, half bare-metal servers, two security groups per VN, an
//! ExternalIPAttachment per subnet and a NAT gateway per VN) is built, its kernel state wiped as
//! by a reboot (namespaces, dnsmasq, routes gone; the state directory kept), and rebuilt by new
//! manager instances re-running every operation the way the controllers' start-up resync does.
//! The rebuilt kernel state is compared with the original.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use osac_backends::*;
use osac_linux::fabric_manager::dnsmasq::{self, DnsmasqFiles};
use osac_linux::{LinuxFabric, LinuxK8s, cmd, names};

use crate::world::{BenchError, World, registration};

/// Shape of the workload set.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// VirtualNetworks.
    pub vns: usize,
    /// Subnets per VN.
    pub subnets: usize,
    /// Ports per subnet (even ones are VMs, odd ones bare-metal servers).
    pub ports: usize,
}

/// What measure 3 found.
pub struct RebuildResult {
    /// Workloads (ports) in the set.
    pub workloads: usize,
    /// First build, from nothing.
    pub initial: Duration,
    /// Restart + full resync after the wipe.
    pub rebuild: Duration,
    /// Stages of the rebuild.
    pub stages: Vec<(String, Duration)>,
    /// Namespaces wiped.
    pub wiped: usize,
    /// Namespaces whose state differs after the rebuild (empty = identical).
    pub differing: Vec<String>,
    /// Namespaces compared.
    pub compared: usize,
    /// Number of operations replayed.
    pub operations: usize,
    /// Subnets whose dnsmasq runs after the rebuild, of all subnets.
    pub dnsmasq: (usize, usize),
    /// How long the kernel took to finish destroying the wiped namespaces (not timed).
    pub settle: Duration,
    /// Duration of one rtnl probe on the settled machine.
    pub baseline: Duration,
}

/// A scratch namespace timing one rtnl round trip (create and delete a bridge), to tell when
/// the kernel has finished tearing down deleted namespaces.
struct Probe {
    ns: String,
}

impl Probe {
    async fn new() -> Result<Probe, BenchError> {
        let ns = format!("osac-bench-{}", std::process::id());
        cmd::ensure_netns(&ns).await?;
        Ok(Probe { ns })
    }

    async fn once(&self) -> Result<Duration, BenchError> {
        let t = Instant::now();
        cmd::ip(Some(&self.ns), &["link", "add", "pb0", "type", "bridge"]).await?;
        cmd::ip(Some(&self.ns), &["link", "del", "pb0"]).await?;
        Ok(t.elapsed())
    }

    /// Median of five probes.
    async fn baseline(&self) -> Result<Duration, BenchError> {
        let mut v = Vec::new();
        for _ in 0..5 {
            v.push(self.once().await?);
        }
        Ok(crate::stats::percentile(&v, 50.0))
    }

    /// Waits until five probes in a row are close to `baseline` (at most 10 minutes).
    async fn settle(&self, baseline: Duration) -> Result<Duration, BenchError> {
        let started = Instant::now();
        let limit = (baseline * 2).max(baseline + Duration::from_millis(20));
        let mut good = 0;
        while good < 5 {
            if started.elapsed() > Duration::from_secs(600) {
                return Err("the kernel did not settle within 10 minutes after the wipe".into());
            }
            if self.once().await? <= limit {
                good += 1;
            } else {
                good = 0;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(started.elapsed())
    }

    async fn remove(self) {
        let _ = cmd::delete_netns(&self.ns).await;
    }
}

/// Every operation of the workload set, in the order the resync replays them.
#[derive(Default)]
struct Plan {
    vns: Vec<CreateVirtualNetworkRequest>,
    sgs: Vec<ApplySecurityGroupRequest>,
    subnets: Vec<CreateSubnetRequest>,
    overlays: Vec<CreateSubnetOverlayRequest>,
    ports: Vec<CreateNetworkAttachmentRequest>,
    eips: Vec<AllocateExternalIpRequest>,
    dnats: Vec<CreateExternalIpAttachmentRequest>,
    natgws: Vec<CreateNatGatewayRequest>,
}

impl Plan {
    fn len(&self) -> usize {
        self.vns.len()
            + self.sgs.len()
            + self.subnets.len()
            + self.overlays.len()
            + self.ports.len()
            + self.eips.len()
            + self.dnats.len()
            + self.natgws.len()
    }
}

struct Managers {
    fabric: Arc<dyn FabricManager>,
    k8s: Arc<dyn K8sManager>,
}

async fn start(world: &World, clusters: &[String]) -> Result<Managers, BenchError> {
    let fabric = LinuxFabric::new(
        registration("bench-fabric", Role::Fabric, &[]),
        world.settings.clone(),
    )
    .await?;
    let k8s = LinuxK8s::new(
        registration("bench-k8s", Role::K8s, clusters),
        world.settings.clone(),
    )
    .await?;
    Ok(Managers {
        fabric: Arc::new(fabric),
        k8s: Arc::new(k8s),
    })
}

fn rule(protocol: Protocol, port: Option<u16>, cidr: &str) -> Result<SecurityRule, BenchError> {
    Ok(SecurityRule {
        protocol,
        port_from: port,
        port_to: port,
        cidr: cidr.parse()?,
    })
}

/// Runs measure 3 in a world of its own and removes it afterwards.
pub async fn run(shape: Shape) -> Result<RebuildResult, BenchError> {
    if shape.vns > 255 || shape.subnets > 250 || shape.ports > 255 {
        return Err("rebuild shape too large (at most 255 VNs, 250 subnets, 255 ports)".into());
    }
    if shape.vns * shape.subnets + shape.vns > 250 {
        return Err(
            "too many external addresses for the rebuild pool (VNs × (subnets + 1) ≤ 250)".into(),
        );
    }
    let world = World::new("rebuild", 121)?;
    let result = run_in(&world, shape).await;
    world.cleanup().await;
    result
}

async fn run_in(world: &World, shape: Shape) -> Result<RebuildResult, BenchError> {
    let clusters = vec![world.id("hc-a"), world.id("hc-b")];
    let m = start(world, &clusters).await?;
    let started = Instant::now();
    let plan = build(world, &m, &clusters, shape).await?;
    let initial = started.elapsed();
    drop(m);
    let before = snapshot(world).await?;

    // The "reboot": kernel state gone, state directory kept. Deleted namespaces are destroyed
    // asynchronously by the kernel, holding the rtnl lock for long stretches (seconds for
    // hundreds of namespaces with VXLAN devices); after a real reboot there is no such
    // teardown, so the clock starts only once the kernel has settled.
    let probe = Probe::new().await?;
    let baseline = probe.baseline().await?;
    let wiped = world.wipe_kernel().await?;
    let settle = probe.settle(baseline).await;
    probe.remove().await;
    let settle = settle?;

    let mut stages = Vec::new();
    let started = Instant::now();
    let t = Instant::now();
    let m = start(world, &clusters).await?;
    stages.push((
        "managers start (load state, external ns, hosting clusters)".into(),
        t.elapsed(),
    ));
    replay(&m, &plan, &mut stages).await?;
    let rebuild = started.elapsed();

    let after = snapshot(world).await?;
    let mut running = 0;
    for s in &plan.subnets {
        let files = DnsmasqFiles::of(&world.settings, &s.subnet_id);
        running += usize::from(dnsmasq::running_pid(&files).await.is_some());
    }
    let differing = before
        .iter()
        .filter(|(ns, s)| after.get(*ns) != Some(s))
        .map(|(ns, _)| ns.clone())
        .chain(after.keys().filter(|ns| !before.contains_key(*ns)).cloned())
        .collect();
    Ok(RebuildResult {
        workloads: plan.ports.len(),
        initial,
        rebuild,
        stages,
        wiped,
        differing,
        compared: before.len(),
        operations: plan.len(),
        dnsmasq: (running, plan.subnets.len()),
        settle,
        baseline,
    })
}

/// Builds the workload set from nothing, recording every operation.
async fn build(
    world: &World,
    m: &Managers,
    clusters: &[String],
    shape: Shape,
) -> Result<Plan, BenchError> {
    let mut plan = Plan::default();
    let pool: ipnet::IpNet = "198.19.250.0/24".parse()?;
    for v in 0..shape.vns {
        let vn = world.id(&format!("vn-{v}"));
        let req = CreateVirtualNetworkRequest {
            virtual_network_id: vn.clone(),
            tenant: format!("tenant-{}", v % 3),
            ipv4_cidr: Some("10.0.0.0/16".parse()?),
            ipv6_cidr: Some("fd10::/48".parse()?),
        };
        m.fabric.create_virtual_network(&req).await?;
        plan.vns.push(req);
        let (ssh, web) = (
            world.id(&format!("sg-ssh-{v}")),
            world.id(&format!("sg-web-{v}")),
        );
        for (id, ingress) in [
            (
                ssh.clone(),
                vec![
                    rule(Protocol::Tcp, Some(22), "0.0.0.0/0")?,
                    rule(Protocol::Icmp, None, "0.0.0.0/0")?,
                ],
            ),
            (
                web.clone(),
                vec![
                    rule(Protocol::Tcp, Some(80), "0.0.0.0/0")?,
                    rule(Protocol::Tcp, Some(443), "::/0")?,
                ],
            ),
        ] {
            let req = ApplySecurityGroupRequest {
                security_group_id: id,
                virtual_network_id: vn.clone(),
                ingress,
                egress: vec![
                    rule(Protocol::All, None, "0.0.0.0/0")?,
                    rule(Protocol::All, None, "::/0")?,
                ],
            };
            m.fabric.apply_security_group(&req).await?;
            plan.sgs.push(req);
        }
        for s in 0..shape.subnets {
            let subnet = world.id(&format!("subnet-{v}-{s}"));
            let req = CreateSubnetRequest {
                subnet_id: subnet.clone(),
                virtual_network_id: vn.clone(),
                ipv4_cidr: Some(format!("10.0.{s}.0/24").parse()?),
                ipv6_cidr: Some(format!("fd10:0:0:{s:x}::/64").parse()?),
                vip_cidr: Some(format!("10.0.{s}.240/28").parse()?),
            };
            let created = m.fabric.create_subnet(&req).await?;
            for cluster in clusters {
                let o = CreateSubnetOverlayRequest {
                    subnet_id: subnet.clone(),
                    segment_id: created.segment_id,
                    hosting_cluster: cluster.clone(),
                    ipv4_cidr: req.ipv4_cidr,
                    ipv6_cidr: req.ipv6_cidr,
                    vip_cidr: req.vip_cidr,
                };
                m.k8s.create_subnet_overlay(&o).await?;
                plan.overlays.push(o);
            }
            plan.subnets.push(req);
            let mut first_v4 = None;
            for p in 0..shape.ports {
                let (host, interface) = if p % 2 == 0 {
                    let vm = world.id(&format!("vm-{v}-{s}-{p}"));
                    (
                        clusters[(p / 2) % clusters.len()].clone(),
                        format!("{vm}/eth0"),
                    )
                } else {
                    (world.id(&format!("bm-{v}-{s}-{p}")), "eth0".to_string())
                };
                let mut sgs = vec![ssh.clone()];
                if p % 3 == 0 {
                    sgs.push(web.clone());
                }
                let req = CreateNetworkAttachmentRequest {
                    attachment_id: world.id(&format!("na-{v}-{s}-{p}")),
                    host,
                    interface,
                    mac_address: format!("02:{v:02x}:{s:02x}:{p:02x}:00:01"),
                    subnet_id: subnet.clone(),
                    virtual_network_id: vn.clone(),
                    security_groups: sgs,
                    primary: true,
                    allowed_addresses: vec![],
                };
                let addrs = m.fabric.create_network_attachment(&req).await?;
                first_v4 = first_v4.or(addrs.ipv4_address);
                plan.ports.push(req);
            }
            if let Some(target) = first_v4 {
                let eip = alloc(m, world, &mut plan, pool, &format!("eip-{v}-{s}")).await?;
                let req = CreateExternalIpAttachmentRequest {
                    attachment_id: world.id(&format!("dnat-{v}-{s}")),
                    virtual_network_id: vn.clone(),
                    external_address: eip,
                    target_ip: target,
                };
                m.fabric.create_external_ip_attachment(&req).await?;
                plan.dnats.push(req);
            }
        }
        let eip = alloc(m, world, &mut plan, pool, &format!("eip-nat-{v}")).await?;
        let req = CreateNatGatewayRequest {
            nat_gateway_id: world.id(&format!("nat-{v}")),
            virtual_network_id: vn.clone(),
            external_address: eip,
            source_cidrs: vec![],
        };
        m.fabric.create_nat_gateway(&req).await?;
        plan.natgws.push(req);
    }
    Ok(plan)
}

async fn alloc(
    m: &Managers,
    world: &World,
    plan: &mut Plan,
    pool: ipnet::IpNet,
    name: &str,
) -> Result<IpAddr, BenchError> {
    let req = AllocateExternalIpRequest {
        external_ip_id: world.id(name),
        pool_id: world.id("pool"),
        cidrs: vec![pool],
    };
    let a = m.fabric.allocate_external_ip(&req).await?;
    plan.eips.push(req);
    Ok(a.address)
}

async fn timed<F: std::future::Future<Output = Result<(), BenchError>>>(
    stages: &mut Vec<(String, Duration)>,
    name: String,
    f: F,
) -> Result<(), BenchError> {
    let t = Instant::now();
    f.await?;
    stages.push((name, t.elapsed()));
    Ok(())
}

/// Re-runs every operation of the plan (the controllers' resync): routers and groups, then
/// subnets (fabric) alongside overlays (k8s manager), then ports, then external addresses.
async fn replay(
    m: &Managers,
    plan: &Plan,
    stages: &mut Vec<(String, Duration)>,
) -> Result<(), BenchError> {
    timed(
        stages,
        format!(
            "{} VNs + {} security groups",
            plan.vns.len(),
            plan.sgs.len()
        ),
        async {
            for r in &plan.vns {
                m.fabric.create_virtual_network(r).await?;
            }
            for r in &plan.sgs {
                m.fabric.apply_security_group(r).await?;
            }
            Ok(())
        },
    )
    .await?;
    timed(
        stages,
        format!(
            "{} subnets ∥ {} overlays",
            plan.subnets.len(),
            plan.overlays.len()
        ),
        async {
            let subnets = async {
                for r in &plan.subnets {
                    m.fabric.create_subnet(r).await?;
                }
                Ok::<(), BenchError>(())
            };
            let overlays = async {
                for r in &plan.overlays {
                    m.k8s.create_subnet_overlay(r).await?;
                }
                Ok::<(), BenchError>(())
            };
            let (a, b) = tokio::join!(subnets, overlays);
            a.and(b)
        },
    )
    .await?;
    timed(stages, format!("{} ports", plan.ports.len()), async {
        for r in &plan.ports {
            m.fabric.create_network_attachment(r).await?;
        }
        Ok(())
    })
    .await?;
    timed(
        stages,
        format!(
            "{} external IPs + {} attachments + {} NAT gateways",
            plan.eips.len(),
            plan.dnats.len(),
            plan.natgws.len()
        ),
        async {
            for r in &plan.eips {
                m.fabric.allocate_external_ip(r).await?;
            }
            for r in &plan.dnats {
                m.fabric.create_external_ip_attachment(r).await?;
            }
            for r in &plan.natgws {
                m.fabric.create_nat_gateway(r).await?;
            }
            Ok(())
        },
    )
    .await
}

/// Kernel state of every namespace of the world, normalised so a faithful rebuild compares
/// equal: links (name, bridge, up), addresses (no link-local: derived from random veth MACs),
/// the nft ruleset (lines sorted), and the world's routes in the external namespace. Machine
/// namespaces contribute their links only.
async fn snapshot(world: &World) -> Result<BTreeMap<String, String>, BenchError> {
    let mut out = BTreeMap::new();
    for ns in world.namespaces().await? {
        let mut lines: Vec<String> = cmd::links(&ns)
            .await?
            .into_iter()
            .map(|l| format!("link {} master={:?} up={}", l.ifname, l.master, l.is_up()))
            .collect();
        // A machine's addresses come from its DHCP client (the provisioner), not the fabric:
        // only its interfaces are the fabric's.
        if ns.starts_with(names::MACHINE_NS_PREFIX) {
            lines.sort();
            out.insert(ns, lines.join("\n"));
            continue;
        }
        let addrs: serde_json::Value =
            serde_json::from_str(&cmd::ip(Some(&ns), &["-j", "addr", "show"]).await?)?;
        for link in addrs.as_array().into_iter().flatten() {
            let name = link["ifname"].as_str().unwrap_or("");
            for a in link["addr_info"].as_array().into_iter().flatten() {
                let local = a["local"].as_str().unwrap_or("");
                if !local.starts_with("fe80:") {
                    lines.push(format!("addr {name} {local}/{}", a["prefixlen"]));
                }
            }
        }
        let rules = cmd::in_ns(&ns, "nft", &["list", "ruleset"], None).await?;
        lines.extend(rules.lines().map(|l| format!("nft {}", l.trim())));
        lines.sort();
        out.insert(ns, lines.join("\n"));
    }
    let t4 = world.settings.transit_ipv4_cidr;
    let mut routes: Vec<String> = cmd::ip(Some(names::EXT_NS), &["-4", "route", "show"])
        .await?
        .lines()
        .filter(|l| {
            l.split("via ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .and_then(|v| v.parse::<std::net::Ipv4Addr>().ok())
                .is_some_and(|v| t4.contains(&v))
        })
        .map(str::to_string)
        .collect();
    routes.sort();
    out.insert(format!("{} routes", names::EXT_NS), routes.join("\n"));
    Ok(out)
}
