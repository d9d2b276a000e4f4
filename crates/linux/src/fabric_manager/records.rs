//! What the fabric has programmed, as records (persisted by [`super::record_files::RecordStore`]) and
//! the in-memory tables the operations consult.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use osac_backends::checks;
use osac_backends::{OpError, SecurityRule};
use serde::{Deserialize, Serialize};

use crate::fabric_manager::render::PortKeys;
use crate::names;

/// Record kinds (directory names in the state dir).
pub mod kind {
    /// VirtualNetworks.
    pub const VN: &str = "vn";
    /// Subnets.
    pub const SUBNET: &str = "subnet";
    /// Security groups.
    pub const SG: &str = "sg";
    /// External IP allocations.
    pub const EIP: &str = "eip";
    /// DNAT attachments.
    pub const DNAT: &str = "dnat";
    /// NAT gateways.
    pub const SNAT: &str = "snat";
    /// Network attachments (ports).
    pub const PORT: &str = "port";
}

/// A VirtualNetwork's router.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VnRec {
    /// VirtualNetwork id.
    pub id: String,
    /// Tenant.
    pub tenant: String,
    /// IPv4 range.
    pub ipv4_cidr: Option<Ipv4Net>,
    /// IPv6 range.
    pub ipv6_cidr: Option<Ipv6Net>,
    /// Router uplink IPv4 transit address.
    pub transit_v4: Ipv4Addr,
    /// Router uplink IPv6 transit address.
    pub transit_v6: Ipv6Addr,
}

/// A subnet segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubnetRec {
    /// Subnet id.
    pub id: String,
    /// VirtualNetwork id.
    pub vn: String,
    /// Segment id = VXLAN VNI.
    pub segment_id: i64,
    /// IPv4 prefix.
    pub ipv4_cidr: Option<Ipv4Net>,
    /// IPv6 prefix.
    pub ipv6_cidr: Option<Ipv6Net>,
    /// Reserved VIP block.
    pub vip_cidr: Option<IpNet>,
}

impl SubnetRec {
    /// First usable IPv4 address.
    pub fn gw4(&self) -> Option<Ipv4Addr> {
        self.ipv4_cidr.map(osac_backends::net::ipv4_gateway)
    }
    /// `::1` of the IPv6 prefix.
    pub fn gw6(&self) -> Option<Ipv6Addr> {
        self.ipv6_cidr.map(osac_backends::net::ipv6_gateway)
    }
}

/// A security group's rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SgRec {
    /// SecurityGroup id.
    pub id: String,
    /// VirtualNetwork id.
    pub vn: String,
    /// Inbound allow rules.
    pub ingress: Vec<SecurityRule>,
    /// Outbound allow rules.
    pub egress: Vec<SecurityRule>,
}

/// An allocated external address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EipRec {
    /// ExternalIP id.
    pub id: String,
    /// Pool id.
    pub pool: String,
    /// The address.
    pub address: IpAddr,
}

/// An inbound DNAT (ExternalIPAttachment).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnatRec {
    /// Attachment id.
    pub id: String,
    /// VirtualNetwork id.
    pub vn: String,
    /// External address.
    pub external: IpAddr,
    /// Target inside the VN.
    pub target: IpAddr,
}

/// An outbound SNAT (NATGateway).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnatRec {
    /// NATGateway id.
    pub id: String,
    /// VirtualNetwork id.
    pub vn: String,
    /// External address.
    pub external: IpAddr,
    /// Translated sources.
    pub sources: Vec<IpNet>,
}

/// A workload port on a subnet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRec {
    /// Attachment id.
    pub id: String,
    /// Host as given (hosting cluster for VMs).
    pub host: String,
    /// Interface as given (`vm/eth0` for VMs).
    pub interface: String,
    /// Normalised MAC.
    pub mac: String,
    /// Subnet id.
    pub subnet: String,
    /// VirtualNetwork id.
    pub vn: String,
    /// Security groups (sorted, unique).
    pub sgs: Vec<String>,
    /// Gets router and DNS options.
    pub primary: bool,
    /// Reserved IPv4.
    pub v4: Option<Ipv4Addr>,
    /// Reserved IPv6.
    pub v6: Option<Ipv6Addr>,
    /// Extra source addresses (cluster VIPs, inside the subnet's VIP block; sorted, unique).
    /// Persisted so a restarted fabric still knows who claims a VIP.
    #[serde(default)]
    pub allowed: Vec<IpAddr>,
    /// Packet mark of frames bridged to this port (security-group ingress key), unique among
    /// the ports of its switch namespace; 0 = not allocated yet (records of older versions).
    #[serde(default)]
    pub mark: u32,
}

impl PortRec {
    /// Its keys in the security-group maps.
    pub fn sg_keys(&self) -> PortKeys {
        PortKeys {
            mac: self.mac.clone(),
            mark: self.mark,
            v4: self.v4,
            v6: self.v6,
        }
    }
    /// Where the port's VN table lives: its hosting cluster (VMs) or its router.
    pub fn table_site(&self) -> crate::fabric_manager::render::TableSite {
        if self.machine().2 {
            crate::fabric_manager::render::TableSite::Hosting
        } else {
            crate::fabric_manager::render::TableSite::Router
        }
    }

    /// (machine key, interface name in the machine, is_vm).
    pub fn machine(&self) -> (String, String, bool) {
        names::machine_of(&self.host, &self.interface)
    }
    /// Switch-end interface name.
    pub fn switch_end(&self) -> String {
        let (key, ifname, _) = self.machine();
        names::port_switch_end(&key, &ifname)
    }
    /// Namespace holding the switch end: the router's, or the hosting cluster's for a VM.
    pub fn switch_ns(&self) -> String {
        let (_, _, vm) = self.machine();
        if vm {
            names::hosting_ns(&self.host)
        } else {
            names::router_ns(&self.vn)
        }
    }
    /// The port's addresses.
    pub fn addrs(&self) -> impl Iterator<Item = IpAddr> {
        self.v4
            .map(IpAddr::V4)
            .into_iter()
            .chain(self.v6.map(IpAddr::V6))
    }
}

/// Everything the fabric knows, loaded at start and kept in step with the record store.
#[derive(Debug, Default)]
pub struct Model {
    /// VirtualNetworks by id.
    pub vns: BTreeMap<String, VnRec>,
    /// Subnets by id.
    pub subnets: BTreeMap<String, SubnetRec>,
    /// Security groups by id.
    pub sgs: BTreeMap<String, SgRec>,
    /// External IPs by id.
    pub eips: BTreeMap<String, EipRec>,
    /// DNATs by attachment id.
    pub dnats: BTreeMap<String, DnatRec>,
    /// SNATs by NAT gateway id.
    pub snats: BTreeMap<String, SnatRec>,
    /// Ports by attachment id.
    pub ports: BTreeMap<String, PortRec>,
}

impl Model {
    /// The VirtualNetwork a request names, or the refusal.
    pub fn vn(&self, id: &str) -> Result<&VnRec, OpError> {
        self.vns
            .get(id)
            .ok_or_else(|| checks::missing_virtual_network(id))
    }

    /// Ports of a subnet.
    pub fn subnet_ports<'a>(&'a self, subnet: &'a str) -> impl Iterator<Item = &'a PortRec> {
        self.ports.values().filter(move |p| p.subnet == subnet)
    }

    /// The lowest packet mark no port of switch namespace `ns` uses (ports' bridged-ingress
    /// keys; 0 means "no port" to the bridge table, so marks start at 1).
    pub fn free_mark(&self, ns: &str) -> u32 {
        let used: std::collections::BTreeSet<u32> = self
            .ports
            .values()
            .filter(|p| p.switch_ns() == ns)
            .map(|p| p.mark)
            .collect();
        // Below the router's hairpin bit, which must never look like a port's mark.
        (1..super::render::HAIRPIN_MARK)
            .find(|m| !used.contains(m))
            .unwrap_or(super::render::HAIRPIN_MARK - 1)
    }

    /// Addresses in use on a subnet.
    pub fn used_in_subnet(&self, subnet: &str) -> std::collections::BTreeSet<IpAddr> {
        self.subnet_ports(subnet).flat_map(|p| p.addrs()).collect()
    }

    /// Whether an external address is allocated.
    pub fn external_allocated(&self, addr: IpAddr) -> bool {
        self.eips.values().any(|e| e.address == addr)
    }

    /// Who consumes an external address (DNAT or SNAT), as a human reference.
    pub fn external_consumer(&self, addr: IpAddr) -> Option<String> {
        self.dnats
            .values()
            .find(|d| d.external == addr)
            .map(|d| checks::external_ip_attachment_user(&d.id))
            .or_else(|| {
                self.snats
                    .values()
                    .find(|s| s.external == addr)
                    .map(|s| checks::nat_gateway_user(&s.id))
            })
    }

    /// What still lives in VirtualNetwork `vn` (its subnets, security groups, DNAT and SNAT
    /// rules), as human references.
    pub fn users_of_vn(&self, vn: &str) -> Vec<String> {
        let subnets = self.subnets.values().filter(|s| s.vn == vn);
        let sgs = self.sgs.values().filter(|g| g.vn == vn);
        let dnats = self.dnats.values().filter(|d| d.vn == vn);
        let snats = self.snats.values().filter(|s| s.vn == vn);
        subnets
            .map(|s| format!("subnet '{}'", s.id))
            .chain(sgs.map(|g| format!("security group '{}'", g.id)))
            .chain(dnats.map(|d| checks::external_ip_attachment_user(&d.id)))
            .chain(snats.map(|s| checks::nat_gateway_user(&s.id)))
            .collect()
    }

    /// The external address is allocated and used by nobody but `me`.
    pub fn external_address_free(&self, addr: IpAddr, me: &str) -> Result<(), OpError> {
        checks::external_address_free(
            addr,
            self.external_allocated(addr),
            self.external_consumer(addr).as_deref(),
            me,
        )
    }

    /// The union of the security groups (sorted, unique) of the ports of `vn` in namespace `ns`
    /// that may use `addr` (see [`PortRec::allowed`]), leaving out attachment `except`: what
    /// filters traffic of that address there. `None` when no port claims it there.
    pub fn claimant_groups(
        &self,
        vn: &str,
        ns: &str,
        addr: IpAddr,
        except: &str,
    ) -> Option<Vec<String>> {
        let claimants: Vec<&PortRec> = self
            .ports
            .values()
            .filter(|p| p.id != except && p.vn == vn && p.allowed.contains(&addr))
            .filter(|p| p.switch_ns() == ns)
            .collect();
        if claimants.is_empty() {
            return None;
        }
        let set: std::collections::BTreeSet<String> = claimants
            .iter()
            .flat_map(|p| p.sgs.iter().cloned())
            .collect();
        Some(set.into_iter().collect())
    }

    /// Security-group ids used by ports whose switch end lives in `ns`, for VN `vn`.
    pub fn sgs_in_ns(&self, vn: &str, ns: &str) -> std::collections::BTreeSet<String> {
        self.ports
            .values()
            .filter(|p| p.vn == vn && p.switch_ns() == ns)
            .flat_map(|p| p.sgs.iter().cloned())
            .collect()
    }

    /// Hosting-cluster namespaces holding ports of `vn`.
    pub fn hosting_namespaces_of(&self, vn: &str) -> std::collections::BTreeSet<String> {
        self.ports
            .values()
            .filter(|p| p.vn == vn && p.machine().2)
            .map(|p| p.switch_ns())
            .collect()
    }

    /// Transit addresses in use.
    pub fn transit_used(&self) -> std::collections::BTreeSet<IpAddr> {
        self.vns
            .values()
            .flat_map(|v| [IpAddr::V4(v.transit_v4), IpAddr::V6(v.transit_v6)])
            .collect()
    }
}
