//! The random tenant networks of one run, generated from the seed and programmed through the
//! `ovn` driver's fabric operations, and the same objects as the API stores them (the `pb`
//! types) for the explainer: VirtualNetworks with overlapping CIDRs (across VNs and tenants),
//! IPv4 and dual-stack subnets, security groups with random rules, VMs with 0, 1 or 2 groups,
//! ExternalIPs attached to VMs and NAT gateways.

use std::net::IpAddr;

use ipnet::IpNet;
use osac_backends::{
    AllocateExternalIpRequest, ApplySecurityGroupRequest, CreateExternalIpAttachmentRequest,
    CreateNatGatewayRequest, CreateNetworkAttachmentRequest, CreateSubnetRequest,
    CreateVirtualNetworkRequest, FabricManager,
};
use osac_model::pb;
use osac_model::reachability::Network;

use super::rng::Rng;
use super::rules::{fabric_rule, pb_rule, rule};

/// The ExternalIP pool's prefix (an outside address is never picked from it).
pub const POOL: &str = "203.0.113.0/24";
const POOL_ID: &str = "pool";

/// A VM's port, as the question generator and `ovn-trace` need it.
#[derive(Debug, Clone)]
pub struct Port {
    /// The ComputeInstance (id and name).
    pub vm: String,
    /// The network attachment (its logical switch port is `osac-p-<attachment>`).
    pub attachment: String,
    pub subnet: String,
    pub vn: String,
    pub mac: String,
    pub v4: Option<IpAddr>,
    pub v6: Option<IpAddr>,
}

#[derive(Debug, Clone)]
pub struct Vn {
    pub id: String,
    pub v4: IpNet,
    pub v6: Option<IpNet>,
    /// (id, IPv4 prefix, IPv6 prefix).
    pub subnets: Vec<(String, IpNet, Option<IpNet>)>,
}

/// One tenant: what the explainer reads and what the questions are drawn from.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub network: Network,
    pub vns: Vec<Vn>,
    pub ports: Vec<Port>,
    /// Attached ExternalIPs: (address, VN, index of the target in `ports`).
    pub external_ips: Vec<(IpAddr, String, usize)>,
    /// NAT gateways: (address, VN).
    pub nat_gateways: Vec<(IpAddr, String)>,
}

const V4_CIDRS: [&str; 2] = ["10.0.0.0/16", "10.1.0.0/16"];
const V6_CIDRS: [&str; 2] = ["fd00:1::/48", "fd00:2::/48"];
fn meta(name: &str) -> Option<pb::Metadata> {
    Some(pb::Metadata {
        name: name.into(),
        ..Default::default()
    })
}

fn net(s: impl AsRef<str>) -> IpNet {
    s.as_ref().parse().expect("a CIDR of the generator")
}

fn text(a: Option<IpAddr>) -> String {
    a.map(|a| a.to_string()).unwrap_or_default()
}

/// Generates and programs `tenants` tenants through `fabric`.
pub async fn build(rng: &mut Rng, fabric: &dyn FabricManager, tenants: usize) -> Vec<Tenant> {
    let mut out = Vec::new();
    for t in 0..tenants {
        out.push(build_tenant(rng, fabric, t).await);
    }
    // Rules last: a peer may be any port of any tenant, or a NAT gateway's address.
    let everyone: Vec<Port> = out.iter().flat_map(|t| t.ports.clone()).collect();
    for tenant in &mut out {
        let groups = std::mem::take(&mut tenant.network.security_groups);
        for mut g in groups {
            let vn = g.spec.as_ref().map(|s| s.virtual_network.clone());
            let vn = tenant
                .vns
                .iter()
                .find(|v| Some(&v.id) == vn.as_ref())
                .cloned();
            let vn = vn.expect("the group's VN");
            let spec = g.spec.get_or_insert_with(Default::default);
            spec.ingress = (0..rng.range(0, 4))
                .map(|_| rule(rng, &vn, &everyone, &tenant.nat_gateways))
                .collect();
            // Most groups open a service wide, so that many questions are answered REACHABLE.
            if rng.chance(70) {
                let v4 = vn.v4.to_string();
                let (protocol, range, peer) = *rng.pick(&[
                    (pb::Protocol::All, (0, 0), v4.as_str()),
                    (pb::Protocol::Tcp, (1, 1024), "10.0.0.0/8"),
                    (pb::Protocol::Icmp, (0, 0), "0.0.0.0/0"),
                    (pb::Protocol::Udp, (5353, 0), "0.0.0.0/0"),
                    (pb::Protocol::All, (0, 0), "0.0.0.0/0"),
                ]);
                spec.ingress.push(pb_rule(protocol, range, peer));
            }
            if let Some(v6) = vn.v6.filter(|_| rng.chance(60)) {
                let v6 = v6.to_string();
                let peer = *rng.pick(&["::/0", v6.as_str()]);
                spec.ingress.push(pb_rule(pb::Protocol::All, (0, 0), peer));
            }
            spec.egress = if rng.chance(65) {
                let mut all = vec![pb_rule(pb::Protocol::All, (0, 0), "0.0.0.0/0")];
                if vn.v6.is_some() && rng.chance(70) {
                    all.push(pb_rule(pb::Protocol::All, (0, 0), "::/0"));
                }
                all
            } else {
                (0..rng.range(0, 3))
                    .map(|_| rule(rng, &vn, &everyone, &tenant.nat_gateways))
                    .collect()
            };
            fabric
                .apply_security_group(&ApplySecurityGroupRequest {
                    security_group_id: g.id.clone(),
                    virtual_network_id: vn.id.clone(),
                    ingress: spec.ingress.iter().map(fabric_rule).collect(),
                    egress: spec.egress.iter().map(fabric_rule).collect(),
                })
                .await
                .expect("apply_security_group");
            tenant.network.security_groups.push(g);
        }
    }
    out
}

async fn build_tenant(rng: &mut Rng, fabric: &dyn FabricManager, t: usize) -> Tenant {
    let tenant_name = format!("t{t}");
    let mut tenant = Tenant {
        network: Network::default(),
        vns: Vec::new(),
        ports: Vec::new(),
        external_ips: Vec::new(),
        nat_gateways: Vec::new(),
    };
    let mut vm_count = 0;
    for v in 0..rng.range(1, 2) {
        let id = format!("t{t}-vn{v}");
        let v4 = net(rng.pick(&V4_CIDRS));
        let v6 = rng.chance(50).then(|| net(rng.pick(&V6_CIDRS)));
        fabric
            .create_virtual_network(&CreateVirtualNetworkRequest {
                virtual_network_id: id.clone(),
                tenant: tenant_name.clone(),
                ipv4_cidr: match v4 {
                    IpNet::V4(n) => Some(n),
                    IpNet::V6(_) => None,
                },
                ipv6_cidr: match v6 {
                    Some(IpNet::V6(n)) => Some(n),
                    _ => None,
                },
            })
            .await
            .expect("create_virtual_network");
        tenant.network.virtual_networks.push(pb::VirtualNetwork {
            id: id.clone(),
            metadata: meta(&id),
            spec: Some(pb::VirtualNetworkSpec {
                ipv4_cidr: v4.to_string(),
                ipv6_cidr: v6.map(|n| n.to_string()).unwrap_or_default(),
                ..Default::default()
            }),
            status: Some(pb::VirtualNetworkStatus {
                state: pb::VirtualNetworkState::Ready as i32,
                ..Default::default()
            }),
        });
        let mut vn = Vn {
            id: id.clone(),
            v4,
            v6,
            subnets: Vec::new(),
        };
        for s in 0..rng.range(1, 3) {
            let sid = format!("{id}-s{s}");
            let octets = match v4 {
                IpNet::V4(n) => n.network().octets(),
                IpNet::V6(_) => [10, 0, 0, 0],
            };
            let s4 = net(format!("{}.{}.{}.0/24", octets[0], octets[1], s + 1));
            let s6 = match v6 {
                Some(IpNet::V6(n)) if rng.chance(70) => {
                    let seg = n.network().segments();
                    Some(net(format!("{:x}:{:x}:0:{:x}::/64", seg[0], seg[1], s + 1)))
                }
                _ => None,
            };
            let made = fabric
                .create_subnet(&CreateSubnetRequest {
                    subnet_id: sid.clone(),
                    virtual_network_id: id.clone(),
                    ipv4_cidr: match s4 {
                        IpNet::V4(n) => Some(n),
                        IpNet::V6(_) => None,
                    },
                    ipv6_cidr: match s6 {
                        Some(IpNet::V6(n)) => Some(n),
                        _ => None,
                    },
                    vip_cidr: None,
                })
                .await
                .expect("create_subnet");
            tenant.network.subnets.push(pb::Subnet {
                id: sid.clone(),
                metadata: meta(&sid),
                spec: Some(pb::SubnetSpec {
                    virtual_network: id.clone(),
                    ipv4_cidr: s4.to_string(),
                    ipv6_cidr: s6.map(|n| n.to_string()).unwrap_or_default(),
                }),
                status: Some(pb::SubnetStatus {
                    state: pb::SubnetState::Ready as i32,
                    segment_id: made.segment_id,
                    ipv4_gateway: text(made.ipv4_gateway),
                    ipv6_gateway: text(made.ipv6_gateway),
                    ..Default::default()
                }),
            });
            vn.subnets.push((sid, s4, s6));
        }
        // Groups without rules first (ports name them); their rules once every address is known.
        let groups: Vec<String> = (0..rng.range(1, 3)).map(|g| format!("{id}-g{g}")).collect();
        for g in &groups {
            fabric
                .apply_security_group(&ApplySecurityGroupRequest {
                    security_group_id: g.clone(),
                    virtual_network_id: id.clone(),
                    ingress: Vec::new(),
                    egress: Vec::new(),
                })
                .await
                .expect("apply_security_group");
            tenant.network.security_groups.push(pb::SecurityGroup {
                id: g.clone(),
                metadata: meta(g),
                spec: Some(pb::SecurityGroupSpec {
                    virtual_network: id.clone(),
                    ingress: Vec::new(),
                    egress: Vec::new(),
                }),
                status: None,
            });
        }
        for _ in 0..rng.range(3, 5) {
            let vm = format!("t{t}-vm{vm_count}");
            let mac = format!("0a:00:00:00:{t:02x}:{vm_count:02x}");
            vm_count += 1;
            let subnet = rng.pick(&vn.subnets).0.clone();
            let mut sgs: Vec<String> = Vec::new();
            let n_groups = match rng.range(0, 9) {
                0 => 0,
                1..=6 => 1,
                _ => 2,
            };
            for _ in 0..n_groups {
                let g = rng.pick(&groups).clone();
                if !sgs.contains(&g) {
                    sgs.push(g);
                }
            }
            let port = add_vm(fabric, &mut tenant.network, &vm, &mac, &subnet, &id, sgs).await;
            tenant.ports.push(port);
        }
        if rng.chance(50) {
            let nat = format!("{id}-nat");
            let address = allocate(fabric, &mut tenant.network, &format!("{nat}-eip")).await;
            fabric
                .create_nat_gateway(&CreateNatGatewayRequest {
                    nat_gateway_id: nat.clone(),
                    virtual_network_id: id.clone(),
                    external_address: address,
                    source_cidrs: [Some(v4), v6].into_iter().flatten().collect(),
                })
                .await
                .expect("create_nat_gateway");
            tenant.network.nat_gateways.push(pb::NatGateway {
                id: nat.clone(),
                metadata: meta(&nat),
                spec: Some(pb::NatGatewaySpec {
                    virtual_network: id.clone(),
                    external_ip: format!("{nat}-eip"),
                }),
                status: Some(pb::NatGatewayStatus {
                    state: pb::NatGatewayState::Ready as i32,
                    message: String::new(),
                    address: address.to_string(),
                }),
            });
            tenant.nat_gateways.push((address, id.clone()));
        }
        tenant.vns.push(vn);
    }
    for (n, port) in tenant.ports.clone().iter().enumerate() {
        let Some(target) = port.v4.filter(|_| rng.chance(45)) else {
            continue;
        };
        let eip = format!("{}-eip", port.vm);
        let address = allocate(fabric, &mut tenant.network, &eip).await;
        let attachment = format!("{}-eipa", port.vm);
        fabric
            .create_external_ip_attachment(&CreateExternalIpAttachmentRequest {
                attachment_id: attachment.clone(),
                virtual_network_id: port.vn.clone(),
                external_address: address,
                target_ip: target,
            })
            .await
            .expect("create_external_ip_attachment");
        tenant
            .network
            .external_ip_attachments
            .push(pb::ExternalIpAttachment {
                id: attachment.clone(),
                metadata: meta(&attachment),
                spec: Some(pb::ExternalIpAttachmentSpec {
                    external_ip: eip,
                    compute_instance: port.vm.clone(),
                    ..Default::default()
                }),
                status: Some(pb::ExternalIpAttachmentStatus {
                    state: pb::ExternalIpAttachmentState::Ready as i32,
                    message: String::new(),
                    external_ip_address: address.to_string(),
                    target_ip: target.to_string(),
                    ..Default::default()
                }),
            });
        tenant.external_ips.push((address, port.vn.clone(), n));
    }
    tenant
}

/// Allocates ExternalIP `id` from the pool and records it as the API would.
async fn allocate(fabric: &dyn FabricManager, network: &mut Network, id: &str) -> IpAddr {
    let address = fabric
        .allocate_external_ip(&AllocateExternalIpRequest {
            external_ip_id: id.into(),
            pool_id: POOL_ID.into(),
            cidrs: vec![net(POOL)],
        })
        .await
        .expect("allocate_external_ip")
        .address;
    network.external_ips.push(pb::ExternalIp {
        id: id.into(),
        metadata: meta(id),
        spec: None,
        status: Some(pb::ExternalIpStatus {
            state: pb::ExternalIpState::Allocated as i32,
            address: address.to_string(),
            attached: true,
            ..Default::default()
        }),
    });
    address
}

/// A running VM with one primary port on `subnet`, attached through the fabric.
async fn add_vm(
    fabric: &dyn FabricManager,
    network: &mut Network,
    vm: &str,
    mac: &str,
    subnet: &str,
    vn: &str,
    sgs: Vec<String>,
) -> Port {
    let attachment = format!("{vm}-eth0");
    let addresses = fabric
        .create_network_attachment(&CreateNetworkAttachmentRequest {
            attachment_id: attachment.clone(),
            // A hypervisor's port per VM (its tap), as a hosting cluster plugs it.
            host: "hv1".into(),
            interface: format!("tap-{vm}"),
            mac_address: mac.into(),
            subnet_id: subnet.into(),
            virtual_network_id: vn.into(),
            security_groups: sgs.clone(),
            primary: true,
            allowed_addresses: Vec::new(),
        })
        .await
        .expect("create_network_attachment");
    network.compute_instances.push(pb::ComputeInstance {
        id: vm.into(),
        metadata: meta(vm),
        spec: Some(pb::ComputeInstanceSpec {
            compute_network_attachments: vec![pb::ComputeNetworkAttachment {
                subnet: subnet.into(),
                security_groups: sgs,
                primary: true,
            }],
            ..Default::default()
        }),
        status: Some(pb::ComputeInstanceStatus {
            state: pb::ComputeInstanceState::Running as i32,
            compute_network_attachment_statuses: vec![pb::AttachmentStatus {
                interface: "eth0".into(),
                subnet_ref: subnet.into(),
                ip_address: text(addresses.ipv4_address),
                ipv6_address: text(addresses.ipv6_address),
                primary: true,
                mac_address: mac.into(),
            }],
            internal_ip_address: text(addresses.ipv4_address),
            ..Default::default()
        }),
    });
    Port {
        vm: vm.into(),
        attachment,
        subnet: subnet.into(),
        vn: vn.into(),
        mac: mac.into(),
        v4: addresses.ipv4_address,
        v6: addresses.ipv6_address,
    }
}
