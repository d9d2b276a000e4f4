//! The random topology of one run, generated from the seed before anything is built: tenants
//! with overlapping CIDRs, their VirtualNetworks and subnets, security groups, workloads (VMs
//! and bare-metal servers), ExternalIP attachments and NAT gateways. Rule peers that name a
//! real address (a workload's, a NAT gateway's) are resolved once the topology is built.

use super::rng::Rng;

/// The ports every workload and the internet client listen on (TCP and UDP).
pub const PORTS: [u16; 5] = [22, 80, 443, 5353, 8080];

#[derive(Debug, Clone)]
pub struct Plan {
    pub tenants: Vec<TenantPlan>,
}

#[derive(Debug, Clone)]
pub struct TenantPlan {
    pub name: String,
    pub vns: Vec<VnPlan>,
    pub groups: Vec<GroupPlan>,
    pub workloads: Vec<WorkloadPlan>,
}

#[derive(Debug, Clone)]
pub struct VnPlan {
    pub name: String,
    /// The tenant's `default` VN exists from onboarding (10.0.0.0/16, `default-ipv4`, group
    /// `default`, NAT gateway `default`).
    pub is_default: bool,
    pub cidr: String,
    /// (name, CIDR); for the default VN the extra subnets beside `default-ipv4`.
    pub subnets: Vec<(String, String)>,
    /// Whether the VN ends up with a NAT gateway (the default one is deleted when false).
    pub nat_gateway: bool,
}

#[derive(Debug, Clone)]
pub struct GroupPlan {
    pub name: String,
    pub vn: String,
    pub ingress: Vec<RulePlan>,
    pub egress: Vec<RulePlan>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Tcp,
    Udp,
    Icmp,
    All,
}

impl Proto {
    pub fn cli(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Icmp => "icmp",
            Proto::All => "all",
        }
    }
}

#[derive(Debug, Clone)]
pub struct RulePlan {
    pub proto: Proto,
    /// TCP/UDP port range; `None` = every port.
    pub ports: Option<(u16, u16)>,
    pub peer: Peer,
}

/// A rule's peer, resolved to a CIDR after the build.
#[derive(Debug, Clone)]
pub enum Peer {
    Cidr(String),
    /// `<address>/32` of workload `(tenant index, workload index)`.
    Workload(usize, usize),
    /// `<address>/32` of the NAT gateway of VN `(tenant index, vn index)` (nothing when it
    /// has none: the rule then takes the VN's CIDR).
    NatGateway(usize, usize),
    /// `<address>/32` of the ExternalIP of workload `(tenant, workload)`, or the pool.
    ExternalIp(usize, usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    Vm,
    BareMetal,
}

#[derive(Debug, Clone)]
pub struct WorkloadPlan {
    pub name: String,
    pub kind: WorkloadKind,
    pub vn: String,
    pub subnet: String,
    /// Empty: no security group (a closed port: only DHCP and ND/ARP pass).
    pub groups: Vec<String>,
    pub external_ip: bool,
}

const TENANT_NAMES: [&str; 3] = ["diff-red", "diff-green", "diff-blue"];
/// CIDRs of second VNs: the same as the default VN's or another, so addresses overlap inside
/// a tenant as well as across tenants.
const SECOND_VN_CIDRS: [&str; 2] = ["10.0.0.0/16", "10.1.0.0/16"];
const TCP_UDP_PORTS: [(u16, u16); 9] = [
    (22, 22),
    (80, 80),
    (443, 443),
    (5353, 5353),
    (8080, 8080),
    (1, 1024),
    (23, 79),
    (5000, 6000),
    (8000, 9000),
];

/// The plan for `seed`, with at most `bare_metal` bare-metal servers (free hosts).
pub fn generate(rng: &mut Rng, bare_metal: usize) -> Plan {
    let n_tenants = rng.range(2, 3);
    let mut bm_left = bare_metal.min(3);
    let mut tenants = Vec::new();
    for name in TENANT_NAMES.iter().take(n_tenants) {
        let mut vns = vec![VnPlan {
            name: "default".into(),
            is_default: true,
            cidr: "10.0.0.0/16".into(),
            subnets: extra_subnets(rng, "10.0", "d", 2, true),
            nat_gateway: rng.chance(75),
        }];
        if rng.chance(65) {
            let cidr = rng.pick(&SECOND_VN_CIDRS).to_string();
            let prefix = cidr.trim_end_matches(".0.0/16").to_string();
            vns.push(VnPlan {
                name: "second".into(),
                is_default: false,
                subnets: extra_subnets(rng, &prefix, "s", 2, false),
                cidr,
                nat_gateway: rng.chance(50),
            });
        }
        let mut groups = vec![GroupPlan {
            name: "default".into(),
            vn: "default".into(),
            ingress: Vec::new(),
            egress: Vec::new(),
        }];
        for vn in &vns {
            for g in 0..rng.range(1, 2) {
                groups.push(GroupPlan {
                    name: format!("{}-g{g}", vn.name),
                    vn: vn.name.clone(),
                    ingress: Vec::new(),
                    egress: Vec::new(),
                });
            }
        }
        let mut workloads = Vec::new();
        for w in 0..rng.range(4, 6) {
            let vn = rng.pick(&vns).clone();
            let mut subnets: Vec<String> = vn.subnets.iter().map(|(n, _)| n.clone()).collect();
            if vn.is_default {
                subnets.push("default-ipv4".into());
            }
            let kind = if bm_left > 0 && rng.chance(25) {
                bm_left -= 1;
                WorkloadKind::BareMetal
            } else {
                WorkloadKind::Vm
            };
            let candidates: Vec<String> = groups
                .iter()
                .filter(|g| g.vn == vn.name)
                .map(|g| g.name.clone())
                .collect();
            let n_groups = match rng.range(0, 9) {
                0 | 1 => 0,
                2..=6 => 1,
                _ => 2,
            };
            let mut chosen: Vec<String> = Vec::new();
            for _ in 0..n_groups {
                let g = rng.pick(&candidates).clone();
                if !chosen.contains(&g) {
                    chosen.push(g);
                }
            }
            workloads.push(WorkloadPlan {
                name: format!("w{w}"),
                kind,
                vn: vn.name.clone(),
                subnet: rng.pick(&subnets).clone(),
                groups: chosen,
                external_ip: rng.chance(45),
            });
        }
        tenants.push(TenantPlan {
            name: name.to_string(),
            vns,
            groups,
            workloads,
        });
    }
    // Rules last: their peers may name any workload of the tenant.
    for t in 0..tenants.len() {
        let shape: Vec<usize> = tenants.iter().map(|t| t.workloads.len()).collect();
        let n_vns = tenants[t].vns.len();
        for g in 0..tenants[t].groups.len() {
            if tenants[t].groups[g].name == "default" {
                // The onboarding rules (tcp/22, tcp/443, icmp in; all out), kept as they are.
                continue;
            }
            let ingress = (0..rng.range(0, 4))
                .map(|_| rule(rng, t, &shape, n_vns, &tenants[t]))
                .collect();
            let egress = if rng.chance(55) {
                vec![RulePlan {
                    proto: Proto::All,
                    ports: None,
                    peer: Peer::Cidr("0.0.0.0/0".into()),
                }]
            } else {
                (0..rng.range(0, 3))
                    .map(|_| rule(rng, t, &shape, n_vns, &tenants[t]))
                    .collect()
            };
            tenants[t].groups[g].ingress = ingress;
            tenants[t].groups[g].egress = egress;
        }
    }
    Plan { tenants }
}

fn extra_subnets(
    rng: &mut Rng,
    prefix: &str,
    tag: &str,
    max: usize,
    has_default: bool,
) -> Vec<(String, String)> {
    let (min, first) = if has_default { (0, 2) } else { (1, 1) };
    (0..rng.range(min, max))
        .map(|i| {
            (
                format!("{tag}-sub{}", first + i),
                format!("{prefix}.{}.0/24", first + i),
            )
        })
        .collect()
}

fn rule(rng: &mut Rng, t: usize, shape: &[usize], n_vns: usize, tenant: &TenantPlan) -> RulePlan {
    let proto = *rng.pick(&[
        Proto::Tcp,
        Proto::Tcp,
        Proto::Udp,
        Proto::Udp,
        Proto::Icmp,
        Proto::All,
    ]);
    let ports = match proto {
        Proto::Tcp | Proto::Udp if rng.chance(85) => Some(*rng.pick(&TCP_UDP_PORTS)),
        _ => None,
    };
    let peer = match rng.range(0, 11) {
        0..=2 => Peer::Cidr("0.0.0.0/0".into()),
        3 => Peer::Cidr("10.0.0.0/8".into()),
        4 => Peer::Cidr(rng.pick(&tenant.vns).cidr.clone()),
        5 => {
            let subnets: Vec<&String> = tenant
                .vns
                .iter()
                .flat_map(|v| v.subnets.iter().map(|(_, c)| c))
                .collect();
            match subnets.is_empty() {
                true => Peer::Cidr("10.0.1.0/24".into()),
                false => Peer::Cidr((*rng.pick(&subnets)).clone()),
            }
        }
        6 => Peer::Cidr(super::super::harness::POOL_CIDR.into()),
        7 => Peer::NatGateway(t, rng.range(0, n_vns - 1)),
        8 => Peer::ExternalIp(t, rng.range(0, shape[t] - 1)),
        // Any workload, also another tenant's: the same address may be one of ours too.
        _ => {
            let other = rng.range(0, shape.len() - 1);
            Peer::Workload(other, rng.range(0, shape[other] - 1))
        }
    };
    RulePlan { proto, ports, peer }
}
