//! The snapshot a question is answered over (a tenant's objects, as stored) and the index
//! built from it: every workload port with its addresses, subnet, VirtualNetwork and groups.

use std::collections::HashMap;
use std::net::IpAddr;

use ipnet::IpNet;

use super::{ClusterEndpoint, ObjectRef};
use crate::kinds::workload::MachineAttachment;
use crate::{Kind, pb};

/// A tenant's network as stored: the objects the explainer reads.
#[derive(Debug, Clone, Default)]
pub struct Network {
    /// The tenant's VirtualNetworks.
    pub virtual_networks: Vec<pb::VirtualNetwork>,
    /// Its Subnets.
    pub subnets: Vec<pb::Subnet>,
    /// Its SecurityGroups.
    pub security_groups: Vec<pb::SecurityGroup>,
    /// Its ComputeInstances.
    pub compute_instances: Vec<pb::ComputeInstance>,
    /// Its BareMetalInstances.
    pub baremetal_instances: Vec<pb::BareMetalInstance>,
    /// Its Clusters.
    pub clusters: Vec<pb::Cluster>,
    /// Its ExternalIPs.
    pub external_ips: Vec<pb::ExternalIp>,
    /// Its ExternalIPAttachments.
    pub external_ip_attachments: Vec<pb::ExternalIpAttachment>,
    /// Its NATGateways.
    pub nat_gateways: Vec<pb::NatGateway>,
    /// The provider's router transit prefixes, when known: a router without a NAT gateway
    /// masquerades to an address of these. Unknown (empty) = a security rule allows the
    /// transit address only when it allows every address of the family.
    pub transit_prefixes: Vec<IpNet>,
}

/// A workload (or its cluster) as the explainer sees it.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The object.
    pub object: ObjectRef,
    /// `None` when it is running (READY for a cluster), else its state's name.
    pub not_running: Option<String>,
    /// Its `status.message`.
    pub message: String,
}

/// One network port: a workload attachment, a cluster agent, or a cluster VIP.
#[derive(Debug, Clone)]
pub struct Port {
    /// Index of the owner in [`Index::workloads`].
    pub workload: usize,
    /// The interface name ("eth0", "data-0", "agent host-1", "api VIP").
    pub interface: String,
    /// Subnet id.
    pub subnet: String,
    /// VirtualNetwork id.
    pub vn: String,
    /// IPv4 address.
    pub v4: Option<IpAddr>,
    /// IPv6 address.
    pub v6: Option<IpAddr>,
    /// SecurityGroup ids (empty = a closed port).
    pub sgs: Vec<String>,
    /// The workload's primary port.
    pub primary: bool,
    /// Filtered in a hosting cluster (a VM's port): egress before the router's DNAT, ingress
    /// after its NAT. Bare metal, agents and VIPs are filtered in the router.
    pub hosted: bool,
    /// The cluster VIP this port stands for.
    pub vip: Option<ClusterEndpoint>,
}

impl Port {
    /// Whether `other` is this very switch port of a router's subnet bridge (a bare-metal
    /// server's or agent's own port): a hairpin cannot return through it. VMs reach the
    /// router through their hosting cluster's overlay link, which hairpins.
    pub fn same_switch_port(&self, other: &Port) -> bool {
        !self.hosted
            && !other.hosted
            && self.subnet == other.subnet
            && self.workload == other.workload
            && self.interface == other.interface
    }

    /// The port's address of a family.
    pub fn address(&self, v4: bool) -> Option<IpAddr> {
        if v4 { self.v4 } else { self.v6 }
    }

    /// Whether `a` is one of the port's addresses.
    pub fn has(&self, a: IpAddr) -> bool {
        self.v4 == Some(a) || self.v6 == Some(a)
    }
}

/// The snapshot, indexed. Owns the snapshot, so that it is built once and kept to answer
/// many questions (building it walks every workload).
#[derive(Debug)]
pub struct Index {
    /// The snapshot.
    pub net: Network,
    /// Every workload.
    pub workloads: Vec<Workload>,
    /// Every port.
    pub ports: Vec<Port>,
    /// Ports by address (several across VNs with overlapping CIDRs).
    pub by_address: HashMap<IpAddr, Vec<usize>>,
    /// Subnets by id: their index in `net.subnets`.
    subnets: HashMap<String, usize>,
    /// SecurityGroups by id: their index in `net.security_groups`.
    security_groups: HashMap<String, usize>,
}

fn name_of(m: Option<&pb::Metadata>) -> &str {
    m.map_or("", |m| m.name.as_str())
}

fn parse(s: &str) -> Option<IpAddr> {
    s.parse().ok()
}

fn state_name<E>(state: i32, running: E, name: fn(&E) -> &'static str) -> Option<String>
where
    E: TryFrom<i32> + PartialEq,
{
    match E::try_from(state) {
        Ok(s) if s == running => None,
        Ok(s) => Some(name(&s).to_string()),
        Err(_) => Some(format!("state {state}")),
    }
}

/// Looks up an object of `items` by id or name.
pub fn find<'a, T>(
    items: &'a [T],
    key: &str,
    id: impl Fn(&T) -> &str,
    meta: impl Fn(&T) -> Option<&pb::Metadata>,
) -> Option<&'a T> {
    items
        .iter()
        .find(|o| id(o) == key)
        .or_else(|| items.iter().find(|o| name_of(meta(o)) == key))
}

impl Index {
    /// Indexes `net`.
    pub fn build(net: Network) -> Self {
        let mut ix = Index {
            workloads: Vec::new(),
            ports: Vec::new(),
            by_address: HashMap::new(),
            subnets: positions(&net.subnets, |s| &s.id),
            security_groups: positions(&net.security_groups, |g| &g.id),
            net,
        };
        // Taken out while their ports are added (which reads the subnets), then put back.
        let vms = std::mem::take(&mut ix.net.compute_instances);
        for vm in &vms {
            let status = vm.status.as_ref();
            let spec = vm.spec.as_ref();
            ix.machine(
                ObjectRef::new(Kind::ComputeInstance, &vm.id, name_of(vm.metadata.as_ref())),
                state_name(
                    status.map_or(0, |s| s.state),
                    pb::ComputeInstanceState::Running,
                    pb::ComputeInstanceState::as_str_name,
                ),
                status.map(|s| s.message.clone()).unwrap_or_default(),
                status.map_or(&[][..], |s| &s.compute_network_attachment_statuses[..]),
                spec.map_or(&[][..], |s| &s.compute_network_attachments[..]),
                true,
            );
        }
        ix.net.compute_instances = vms;
        let metal = std::mem::take(&mut ix.net.baremetal_instances);
        for bm in &metal {
            let status = bm.status.as_ref();
            let spec = bm.spec.as_ref();
            ix.machine(
                ObjectRef::new(
                    Kind::BareMetalInstance,
                    &bm.id,
                    name_of(bm.metadata.as_ref()),
                ),
                state_name(
                    status.map_or(0, |s| s.state),
                    pb::BareMetalInstanceState::Running,
                    pb::BareMetalInstanceState::as_str_name,
                ),
                status.map(|s| s.message.clone()).unwrap_or_default(),
                status.map_or(&[][..], |s| &s.network_attachment_statuses[..]),
                spec.map_or(&[][..], |s| &s.network_attachments[..]),
                false,
            );
        }
        ix.net.baremetal_instances = metal;
        let clusters = std::mem::take(&mut ix.net.clusters);
        for c in &clusters {
            ix.cluster(c);
        }
        ix.net.clusters = clusters;
        ix
    }

    /// A subnet of the snapshot by id.
    pub fn subnet(&self, id: &str) -> Option<&pb::Subnet> {
        self.subnets.get(id).map(|&n| &self.net.subnets[n])
    }

    /// A SecurityGroup of the snapshot by id.
    pub fn security_group(&self, id: &str) -> Option<&pb::SecurityGroup> {
        self.security_groups
            .get(id)
            .map(|&n| &self.net.security_groups[n])
    }

    fn workload(
        &mut self,
        object: ObjectRef,
        not_running: Option<String>,
        message: String,
    ) -> usize {
        self.workloads.push(Workload {
            object,
            not_running,
            message,
        });
        self.workloads.len() - 1
    }

    /// A VM (`hosted`: filtered in its hosting cluster) or bare-metal server: the workload and
    /// a port per attachment status, with the security groups of the spec's attachment of the
    /// same position (`attachments`).
    fn machine(
        &mut self,
        object: ObjectRef,
        not_running: Option<String>,
        message: String,
        statuses: &[pb::AttachmentStatus],
        attachments: &[impl MachineAttachment],
        hosted: bool,
    ) {
        let w = self.workload(object, not_running, message);
        for (n, a) in statuses.iter().enumerate() {
            let groups = attachments
                .get(n)
                .map(|s| s.subnet_and_groups().1.to_vec())
                .unwrap_or_default();
            self.attachment(w, a, groups, hosted);
        }
    }

    fn vn_of(&self, subnet: &str) -> String {
        self.subnet(subnet)
            .and_then(|s| s.spec.as_ref())
            .map(|s| s.virtual_network.clone())
            .unwrap_or_default()
    }

    fn add_port(&mut self, port: Port) {
        let n = self.ports.len();
        for a in [port.v4, port.v6].into_iter().flatten() {
            self.by_address.entry(a).or_default().push(n);
        }
        self.ports.push(port);
    }

    fn attachment(&mut self, w: usize, a: &pb::AttachmentStatus, sgs: Vec<String>, hosted: bool) {
        let vn = self.vn_of(&a.subnet_ref);
        self.add_port(Port {
            workload: w,
            interface: a.interface.clone(),
            subnet: a.subnet_ref.clone(),
            vn,
            v4: parse(&a.ip_address),
            v6: parse(&a.ipv6_address),
            sgs,
            primary: a.primary,
            hosted,
            vip: None,
        });
    }

    fn cluster(&mut self, c: &pb::Cluster) {
        let status = c.status.clone().unwrap_or_default();
        let w = self.workload(
            ObjectRef::new(Kind::Cluster, &c.id, name_of(c.metadata.as_ref())),
            state_name(
                status.state,
                pb::ClusterState::Ready,
                pb::ClusterState::as_str_name,
            ),
            status.message.clone(),
        );
        let att = c
            .spec
            .as_ref()
            .and_then(|s| s.network_attachment.clone())
            .unwrap_or_default();
        let vn = self.vn_of(&att.subnet);
        let mut first = true;
        let mut sets: Vec<_> = status.node_sets.iter().collect();
        sets.sort_by(|a, b| a.0.cmp(b.0));
        for (_, set) in sets {
            for agent in &set.agents {
                self.add_port(Port {
                    workload: w,
                    interface: format!("agent on host '{}'", agent.host),
                    subnet: att.subnet.clone(),
                    vn: vn.clone(),
                    v4: parse(&agent.ip_address),
                    v6: parse(&agent.ipv6_address),
                    sgs: att.security_groups.clone(),
                    primary: first,
                    hosted: false,
                    vip: None,
                });
                first = false;
            }
        }
        for (endpoint, address, label) in [
            (ClusterEndpoint::Api, &status.api_endpoint, "API VIP"),
            (
                ClusterEndpoint::Ingress,
                &status.ingress_endpoint,
                "ingress VIP",
            ),
        ] {
            let Some(a) = parse(address) else { continue };
            self.add_port(Port {
                workload: w,
                interface: label.to_string(),
                subnet: att.subnet.clone(),
                vn: vn.clone(),
                v4: a.is_ipv4().then_some(a),
                v6: a.is_ipv6().then_some(a),
                sgs: att.security_groups.clone(),
                primary: false,
                hosted: false,
                vip: Some(endpoint),
            });
        }
    }

    /// The ports of workload `w`.
    pub fn ports_of(&self, w: usize) -> impl Iterator<Item = (usize, &Port)> {
        self.ports
            .iter()
            .enumerate()
            .filter(move |(_, p)| p.workload == w)
    }

    /// A subnet as an object reference (the id alone when it is not in the snapshot).
    pub fn subnet_ref(&self, id: &str) -> ObjectRef {
        let name = self.subnet(id).map_or("", |s| name_of(s.metadata.as_ref()));
        ObjectRef::new(Kind::Subnet, id, name)
    }

    /// A VirtualNetwork as an object reference.
    pub fn vn_ref(&self, id: &str) -> ObjectRef {
        let name = self
            .net
            .virtual_networks
            .iter()
            .find(|v| v.id == id)
            .map_or("", |v| name_of(v.metadata.as_ref()));
        ObjectRef::new(Kind::VirtualNetwork, id, name)
    }

    /// A subnet's gateway address of a family (from its status).
    pub fn gateway(&self, subnet: &str, v4: bool) -> Option<IpAddr> {
        let st = self.subnet(subnet)?.status.as_ref()?;
        parse(if v4 {
            &st.ipv4_gateway
        } else {
            &st.ipv6_gateway
        })
    }
}

/// Where each object of `items` is, by id.
fn positions<T>(items: &[T], id: impl Fn(&T) -> &String) -> HashMap<String, usize> {
    items
        .iter()
        .enumerate()
        .map(|(n, o)| (id(o).clone(), n))
        .collect()
}

/// The name in a metadata (for objects of the snapshot).
pub fn object_name(m: Option<&pb::Metadata>) -> &str {
    name_of(m)
}
