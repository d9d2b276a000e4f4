//! The resource kinds and the facts about them that every layer needs.

use std::fmt;
use std::str::FromStr;

/// Every kind of object the store keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    NetworkClass,
    ExternalIpPool,
    HostType,
    /// A provider catalog item for bare-metal instances: a HostType plus default parameters.
    BareMetalTemplate,
    Host,
    Tenant,
    VirtualNetwork,
    Subnet,
    SecurityGroup,
    ExternalIp,
    ComputeInstance,
    BareMetalInstance,
    Cluster,
    ExternalIpAttachment,
    NatGateway,
    /// A read-only record of something that happened to another object (server-written,
    /// expires after a TTL); no state, no controller.
    Event,
}

/// Who owns objects of a kind: the provider (private API) or a tenant (public API).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Provider,
    Tenant,
}

impl Kind {
    /// All kinds, in dependency order (a kind only references kinds before it).
    pub const ALL: [Kind; 16] = [
        Kind::NetworkClass,
        Kind::ExternalIpPool,
        Kind::HostType,
        Kind::BareMetalTemplate,
        Kind::Host,
        Kind::Tenant,
        Kind::VirtualNetwork,
        Kind::Subnet,
        Kind::SecurityGroup,
        Kind::ExternalIp,
        Kind::ComputeInstance,
        Kind::BareMetalInstance,
        Kind::Cluster,
        Kind::ExternalIpAttachment,
        Kind::NatGateway,
        Kind::Event,
    ];

    /// The workload kinds (network consumers).
    pub const WORKLOADS: [Kind; 3] = [
        Kind::ComputeInstance,
        Kind::BareMetalInstance,
        Kind::Cluster,
    ];

    /// REST collection name, also the kind's stable identifier in the store.
    pub const fn collection(self) -> &'static str {
        match self {
            Kind::NetworkClass => "network_classes",
            Kind::ExternalIpPool => "external_ip_pools",
            Kind::HostType => "host_types",
            Kind::BareMetalTemplate => "baremetal_templates",
            Kind::Host => "hosts",
            Kind::ComputeInstance => "compute_instances",
            Kind::BareMetalInstance => "baremetal_instances",
            Kind::Cluster => "clusters",
            Kind::Tenant => "tenants",
            Kind::VirtualNetwork => "virtual_networks",
            Kind::Subnet => "subnets",
            Kind::SecurityGroup => "security_groups",
            Kind::ExternalIp => "external_ips",
            Kind::ExternalIpAttachment => "external_ip_attachments",
            Kind::NatGateway => "nat_gateways",
            Kind::Event => "events",
        }
    }

    /// Human name used in messages ("VirtualNetwork 'net'").
    pub const fn display_name(self) -> &'static str {
        match self {
            Kind::NetworkClass => "NetworkClass",
            Kind::ExternalIpPool => "ExternalIPPool",
            Kind::HostType => "HostType",
            Kind::BareMetalTemplate => "BareMetalTemplate",
            Kind::Host => "Host",
            Kind::ComputeInstance => "ComputeInstance",
            Kind::BareMetalInstance => "BareMetalInstance",
            Kind::Cluster => "Cluster",
            Kind::Tenant => "Tenant",
            Kind::VirtualNetwork => "VirtualNetwork",
            Kind::Subnet => "Subnet",
            Kind::SecurityGroup => "SecurityGroup",
            Kind::ExternalIp => "ExternalIP",
            Kind::ExternalIpAttachment => "ExternalIPAttachment",
            Kind::NatGateway => "NATGateway",
            Kind::Event => "Event",
        }
    }

    /// Whether objects of this kind belong to the provider or to a tenant.
    pub const fn scope(self) -> Scope {
        match self {
            Kind::NetworkClass
            | Kind::ExternalIpPool
            | Kind::HostType
            | Kind::BareMetalTemplate
            | Kind::Host
            | Kind::Tenant => Scope::Provider,
            _ => Scope::Tenant,
        }
    }

    /// Whether a `tenant-user` may create, update and delete objects of this tenant kind: the
    /// persona who runs workloads on the networks a tenant admin prepared — workloads and
    /// their external addresses (ExternalIPs, ExternalIPAttachments). VirtualNetworks,
    /// Subnets, SecurityGroups and NATGateways shape every workload of the tenant and stay the
    /// tenant admin's.
    pub const fn tenant_user_may_write(self) -> bool {
        matches!(
            self,
            Kind::ComputeInstance
                | Kind::BareMetalInstance
                | Kind::Cluster
                | Kind::ExternalIp
                | Kind::ExternalIpAttachment
        )
    }

    /// Names the CLI accepts for the kind (singular, plural, short forms).
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Kind::NetworkClass => &["networkclass", "networkclasses", "network-class", "nc"],
            Kind::ExternalIpPool => &[
                "externalippool",
                "externalippools",
                "external-ip-pool",
                "pool",
                "pools",
            ],
            Kind::HostType => &["hosttype", "hosttypes", "host-type", "ht"],
            Kind::BareMetalTemplate => &[
                "baremetaltemplate",
                "baremetaltemplates",
                "baremetal-template",
                "bmt",
            ],
            Kind::Host => &["host", "hosts"],
            Kind::ComputeInstance => &[
                "computeinstance",
                "computeinstances",
                "compute-instance",
                "vm",
                "vms",
                "ci",
            ],
            Kind::BareMetalInstance => &[
                "baremetalinstance",
                "baremetalinstances",
                "baremetal-instance",
                "bm",
                "bmi",
            ],
            Kind::Cluster => &["cluster", "clusters"],
            Kind::Tenant => &["tenant", "tenants"],
            Kind::VirtualNetwork => &[
                "virtualnetwork",
                "virtualnetworks",
                "virtual-network",
                "vn",
                "vns",
            ],
            Kind::Subnet => &["subnet", "subnets"],
            Kind::SecurityGroup => &[
                "securitygroup",
                "securitygroups",
                "security-group",
                "sg",
                "sgs",
            ],
            Kind::ExternalIp => &["externalip", "externalips", "external-ip", "eip", "eips"],
            Kind::ExternalIpAttachment => &[
                "externalipattachment",
                "externalipattachments",
                "external-ip-attachment",
                "eipa",
            ],
            Kind::NatGateway => &["natgateway", "natgateways", "nat-gateway", "nat", "natgw"],
            Kind::Event => &["event", "events", "ev"],
        }
    }

    /// Whether objects of this kind have a lifecycle that controllers reconcile and that a
    /// tenant's deletion must wait for. Events do not: they are records that expire.
    pub const fn is_reconciled(self) -> bool {
        !matches!(self, Kind::Event)
    }

    /// Whether a controller must undo fabric state before the object may disappear.
    pub const fn needs_fabric_finalizer(self) -> bool {
        matches!(
            self,
            Kind::Tenant
                | Kind::VirtualNetwork
                | Kind::Subnet
                | Kind::SecurityGroup
                | Kind::ExternalIp
                | Kind::ExternalIpAttachment
                | Kind::NatGateway
                | Kind::ComputeInstance
                | Kind::BareMetalInstance
                | Kind::Cluster
        )
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.display_name())
    }
}

/// The name is not a known kind, collection or alias.
#[derive(Debug, thiserror::Error)]
#[error("unknown kind '{0}'")]
pub struct UnknownKind(pub String);

impl FromStr for Kind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        Kind::ALL
            .into_iter()
            .find(|k| {
                k.collection() == lower
                    || k.display_name().eq_ignore_ascii_case(&lower)
                    || k.aliases().contains(&lower.as_str())
            })
            .ok_or_else(|| UnknownKind(s.to_string()))
    }
}

/// Finalizer that keeps an object until its fabric state is undone.
pub const FABRIC_FINALIZER: &str = "osac.openshift.io/fabric";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_from_collection_alias_and_name() {
        for k in Kind::ALL {
            assert_eq!(k.collection().parse::<Kind>().ok(), Some(k));
            assert_eq!(k.display_name().parse::<Kind>().ok(), Some(k));
        }
        assert_eq!("vn".parse::<Kind>().ok(), Some(Kind::VirtualNetwork));
        assert!("bogus".parse::<Kind>().is_err());
    }
}
