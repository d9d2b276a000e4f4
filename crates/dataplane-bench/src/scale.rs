//! Measures 1 and 2: programming 5,000 ExternalIPAttachments and 5,000 security groups into one
//! VirtualNetwork (time of the 1st vs the 5,000th), then first-packet latency through the DNAT:
//! our nft map vs the same mappings as a linear iptables-nft chain (Neutron's approach) in a
//! second, identical VirtualNetwork.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipnet::{IpNet, Ipv4Net};
use osac_backends::*;
use osac_linux::{LinuxFabric, cmd, names};

use crate::latency::{Acceptor, connect_samples};
use crate::world::{BenchError, World, configure, registration};

/// Port the targets listen on.
const PORT: u16 = 5201;

/// What measures 1 and 2 found.
pub struct ScaleResult {
    /// Duration of each `create_external_ip_attachment`, in order.
    pub attach: Vec<Duration>,
    /// Duration of each `apply_security_group` of a new group, in order.
    pub groups: Vec<Duration>,
    /// Re-applies (rule change) of the first group with 10 groups present.
    pub reapply_small: Vec<Duration>,
    /// Re-applies of the first group with every group present.
    pub reapply_large: Vec<Duration>,
    /// Latency measure (None when skipped, with the reason).
    pub latency: Result<LatencyResult, String>,
    /// Free-form detail lines.
    pub details: Vec<String>,
}

/// Connect-time samples through the DNAT.
pub struct LatencyResult {
    /// Ours, with one mapping programmed.
    pub ours_one: Vec<Duration>,
    /// Ours, to the last of N mappings.
    pub ours_n: Vec<Duration>,
    /// iptables-nft linear chain, to the last of N rules.
    pub linear_n: Vec<Duration>,
}

/// A VirtualNetwork with one subnet and one reachable target port.
struct Vn {
    id: String,
    router: String,
    target: Ipv4Addr,
}

async fn build_vn(
    world: &World,
    c: &Arc<dyn FabricManager>,
    name: &str,
    mac: &str,
) -> Result<Vn, BenchError> {
    let id = world.id(&format!("vn-{name}"));
    c.create_virtual_network(&CreateVirtualNetworkRequest {
        virtual_network_id: id.clone(),
        tenant: "bench".into(),
        ipv4_cidr: Some("10.0.0.0/16".parse()?),
        ipv6_cidr: None,
    })
    .await?;
    let subnet = world.id(&format!("subnet-{name}"));
    let s = c
        .create_subnet(&CreateSubnetRequest {
            subnet_id: subnet.clone(),
            virtual_network_id: id.clone(),
            ipv4_cidr: Some("10.0.0.0/24".parse()?),
            ipv6_cidr: None,
            vip_cidr: None,
        })
        .await?;
    // The target answers everything (a port without groups would be closed).
    let open = world.id(&format!("open-{name}"));
    let all = vec![SecurityRule {
        protocol: Protocol::All,
        port_from: None,
        port_to: None,
        cidr: "0.0.0.0/0".parse()?,
    }];
    c.apply_security_group(&ApplySecurityGroupRequest {
        security_group_id: open.clone(),
        virtual_network_id: id.clone(),
        ingress: all.clone(),
        egress: all,
    })
    .await?;
    let host = world.id(&format!("target-{name}"));
    let p = c
        .create_network_attachment(&CreateNetworkAttachmentRequest {
            attachment_id: world.id(&format!("port-{name}")),
            host: host.clone(),
            interface: "eth0".into(),
            mac_address: mac.into(),
            subnet_id: subnet,
            virtual_network_id: id.clone(),
            security_groups: vec![open],
            primary: true,
            allowed_addresses: vec![],
        })
        .await?;
    let Some(IpAddr::V4(target)) = p.ipv4_address else {
        return Err("the target port got no IPv4 address".into());
    };
    let gw = s.ipv4_gateway.ok_or("subnet without gateway")?.to_string();
    configure(
        &names::machine_ns(&host),
        "eth0",
        &format!("{target}/24"),
        &gw,
    )
    .await?;
    Ok(Vn {
        router: names::router_ns(&id),
        id,
        target,
    })
}

/// The smallest IPv4 prefix at `base` with at least `n` usable addresses.
fn pool(base: Ipv4Addr, n: usize) -> Result<Ipv4Net, BenchError> {
    let mut len = 30u8;
    while len > 16 && (1usize << (32 - len)) - 2 < n {
        len -= 1;
    }
    Ok(Ipv4Net::new(base, len)?.trunc())
}

/// Dummy DNAT target number `i` inside 10.0.0.0/16 (off the target's /24).
fn dummy(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 1 + (i / 250) as u8, 1 + (i % 250) as u8)
}

fn rule(protocol: Protocol, port: Option<u16>, cidr: &str) -> Result<SecurityRule, BenchError> {
    Ok(SecurityRule {
        protocol,
        port_from: port,
        port_to: port,
        cidr: cidr.parse()?,
    })
}

fn group(
    vn: &str,
    id: String,
    i: usize,
    variant: bool,
) -> Result<ApplySecurityGroupRequest, BenchError> {
    let mut ingress = vec![
        rule(Protocol::Tcp, Some(22), "10.0.0.0/8")?,
        rule(Protocol::Tcp, Some(1000 + (i % 60000) as u16), "0.0.0.0/0")?,
    ];
    if variant {
        ingress.push(rule(Protocol::Icmp, None, "0.0.0.0/0")?);
    }
    Ok(ApplySecurityGroupRequest {
        security_group_id: id,
        virtual_network_id: vn.to_string(),
        ingress,
        egress: vec![rule(Protocol::All, None, "0.0.0.0/0")?],
    })
}

/// Runs measures 1 and 2 in a world of their own and removes it afterwards.
pub async fn run(
    attachments: usize,
    groups: usize,
    samples: usize,
) -> Result<ScaleResult, BenchError> {
    let world = World::new("dnat", 120)?;
    let result = run_in(&world, attachments, groups, samples).await;
    world.cleanup().await;
    result
}

async fn run_in(
    world: &World,
    n: usize,
    groups: usize,
    samples: usize,
) -> Result<ScaleResult, BenchError> {
    let mut details = Vec::new();
    let fabric = Arc::new(
        LinuxFabric::new(
            registration("bench-fabric", Role::Fabric, &[]),
            world.settings.clone(),
        )
        .await?,
    );
    let c: Arc<dyn FabricManager> = fabric.clone();
    let map_vn = build_vn(world, &c, "map", "02:be:00:00:00:01").await?;
    let _acc_map = Acceptor::start(&names::machine_ns(&world.id("target-map")), PORT)?;

    // External addresses, untimed.
    let pool_a = pool(Ipv4Addr::new(198, 18, 0, 0), n)?;
    let started = Instant::now();
    let mut externals = Vec::with_capacity(n);
    for i in 0..n {
        let a = c
            .allocate_external_ip(&AllocateExternalIpRequest {
                external_ip_id: world.id(&format!("eip-{i}")),
                pool_id: world.id("pool"),
                cidrs: vec![IpNet::V4(pool_a)],
            })
            .await?;
        externals.push(a.address);
    }
    details.push(format!(
        "[1] {n} external IPs allocated from {pool_a} in {:.1} s (untimed setup)",
        started.elapsed().as_secs_f64()
    ));

    // Measure 1a: attachments, each timed; the first and the last map to the real target.
    let mut attach = Vec::with_capacity(n);
    let mut ours_one = Vec::new();
    let started = Instant::now();
    for (i, ext) in externals.iter().enumerate() {
        let target = if i == 0 || i == n - 1 {
            map_vn.target
        } else {
            dummy(i)
        };
        let req = CreateExternalIpAttachmentRequest {
            attachment_id: world.id(&format!("dnat-{i}")),
            virtual_network_id: map_vn.id.clone(),
            external_address: *ext,
            target_ip: IpAddr::V4(target),
        };
        let t = Instant::now();
        c.create_external_ip_attachment(&req).await?;
        attach.push(t.elapsed());
        if i == 0 {
            let s = connect_samples(
                names::EXT_NS,
                vec![SocketAddr::new(*ext, PORT)],
                samples,
                samples / 20 + 5,
            )
            .await?;
            ours_one = s.into_iter().next().unwrap_or_default();
        }
    }
    details.push(format!(
        "[1] {n} ExternalIPAttachments programmed in {:.1} s; mean per block (ms): {}",
        started.elapsed().as_secs_f64(),
        crate::stats::curve_ms(&attach, (n / 10).max(1))
    ));

    // Measure 1b: security groups, each a new group (its chains join the VN's table).
    let mut times = Vec::with_capacity(groups);
    let mut reapply_small = Vec::new();
    let first_group = world.id("sg-0");
    let started = Instant::now();
    for i in 0..groups {
        let req = group(&map_vn.id, world.id(&format!("sg-{i}")), i, false)?;
        let t = Instant::now();
        c.apply_security_group(&req).await?;
        times.push(t.elapsed());
        if i + 1 == groups.min(10) {
            for k in 0..10 {
                let req = group(&map_vn.id, first_group.clone(), 0, k % 2 == 0)?;
                let t = Instant::now();
                c.apply_security_group(&req).await?;
                reapply_small.push(t.elapsed());
            }
        }
    }
    details.push(format!(
        "[1] {groups} security groups applied in {:.1} s; mean per block (ms): {}",
        started.elapsed().as_secs_f64(),
        crate::stats::curve_ms(&times, (groups / 10).max(1))
    ));
    let mut reapply_large = Vec::new();
    for k in 0..10 {
        let req = group(&map_vn.id, first_group.clone(), 0, k % 2 == 0)?;
        let t = Instant::now();
        c.apply_security_group(&req).await?;
        reapply_large.push(t.elapsed());
    }

    let latency = if !cmd::on_path("iptables-restore") {
        Err("iptables-restore not found (apt-get install -y iptables)".to_string())
    } else {
        Ok(linear_latency(
            world,
            &fabric,
            &c,
            &externals,
            ours_one,
            samples,
            &mut details,
        )
        .await?)
    };
    Ok(ScaleResult {
        attach,
        groups: times,
        reapply_small,
        reapply_large,
        latency,
        details,
    })
}

/// Programs the same N mappings as a linear iptables-nft PREROUTING chain in a second VN and
/// samples connect times to the last mapping of both, interleaved.
async fn linear_latency(
    world: &World,
    fabric: &LinuxFabric,
    c: &Arc<dyn FabricManager>,
    externals: &[IpAddr],
    ours_one: Vec<Duration>,
    samples: usize,
    details: &mut Vec<String>,
) -> Result<LatencyResult, BenchError> {
    let n = externals.len();
    let ipt_vn = build_vn(world, c, "ipt", "02:be:00:00:00:02").await?;
    let _acc = Acceptor::start(&names::machine_ns(&world.id("target-ipt")), PORT)?;
    let pool_b = pool(Ipv4Addr::new(198, 18, 128, 0), n)?;
    let via = fabric
        .transit(&ipt_vn.id)
        .await
        .ok_or("the VN has no transit addresses")?
        .v4;
    let mut rules = String::from("*nat\n:PREROUTING ACCEPT [0:0]\n");
    let mut routes = String::new();
    let mut last = None;
    for (i, ext) in pool_b.hosts().take(n).enumerate() {
        let target = if i == n - 1 { ipt_vn.target } else { dummy(i) };
        rules.push_str(&format!(
            "-A PREROUTING -d {ext}/32 -j DNAT --to-destination {target}\n"
        ));
        routes.push_str(&format!("route replace {ext}/32 via {via}\n"));
        last = Some(ext);
    }
    rules.push_str("COMMIT\n");
    let last = last.ok_or("no mapping")?;
    let t = Instant::now();
    cmd::in_ns(&ipt_vn.router, "iptables-restore", &[], Some(&rules)).await?;
    let load = t.elapsed();
    cmd::run("ip", &["-n", names::EXT_NS, "-batch", "-"], Some(&routes)).await?;
    let version = cmd::run("iptables", &["-V"], None)
        .await
        .unwrap_or_default();
    details.push(format!(
        "[2] linear chain: {n} rules `-A PREROUTING -d <external>/32 -j DNAT --to-destination <target>` \
         ({}) loaded with one iptables-restore in {:.2} s into an identical VN; the measured mapping is the last rule",
        version.trim(),
        load.as_secs_f64()
    ));
    let Some(ours_last) = externals.last() else {
        return Err("no mapping".into());
    };
    let s = connect_samples(
        names::EXT_NS,
        vec![
            SocketAddr::new(*ours_last, PORT),
            SocketAddr::new(IpAddr::V4(last), PORT),
        ],
        samples,
        samples / 20 + 5,
    )
    .await?;
    let mut it = s.into_iter();
    Ok(LatencyResult {
        ours_one,
        ours_n: it.next().unwrap_or_default(),
        linear_n: it.next().unwrap_or_default(),
    })
}
