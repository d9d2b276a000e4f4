//! Object kinds as the CLI names them: aliases, REST collections, which API may read or write
//! them, and which states end a `--wait`.

use std::fmt;

/// Which REST surface a request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The tenant API, `/api/fulfillment/v1`.
    Public,
    /// The provider API, `/api/private/v1`.
    Private,
}

impl Scope {
    /// Path segments of the API root.
    pub fn prefix(self) -> [&'static str; 3] {
        match self {
            Scope::Public => ["api", "fulfillment", "v1"],
            Scope::Private => ["api", "private", "v1"],
        }
    }
}

/// What one API allows on a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Not served by that API.
    None,
    /// List/get only.
    ReadOnly,
    /// Everything.
    ReadWrite,
}

/// An object kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    VirtualNetwork,
    Subnet,
    SecurityGroup,
    ExternalIp,
    ExternalIpAttachment,
    NatGateway,
    ExternalIpPool,
    NetworkClass,
    HostType,
    BareMetalTemplate,
    Tenant,
    Host,
    ComputeInstance,
    BareMetalInstance,
    Cluster,
}

impl Kind {
    /// Every kind, in help order.
    pub const ALL: [Kind; 15] = [
        Kind::VirtualNetwork,
        Kind::Subnet,
        Kind::SecurityGroup,
        Kind::ExternalIp,
        Kind::ExternalIpAttachment,
        Kind::NatGateway,
        Kind::ExternalIpPool,
        Kind::NetworkClass,
        Kind::HostType,
        Kind::BareMetalTemplate,
        Kind::Tenant,
        Kind::Host,
        Kind::ComputeInstance,
        Kind::BareMetalInstance,
        Kind::Cluster,
    ];

    /// The canonical CLI name (singular), used in `kind/name` labels.
    pub fn name(self) -> &'static str {
        match self {
            Kind::VirtualNetwork => "virtualnetwork",
            Kind::Subnet => "subnet",
            Kind::SecurityGroup => "securitygroup",
            Kind::ExternalIp => "externalip",
            Kind::ExternalIpAttachment => "externalipattachment",
            Kind::NatGateway => "natgateway",
            Kind::ExternalIpPool => "externalippool",
            Kind::NetworkClass => "networkclass",
            Kind::HostType => "hosttype",
            Kind::BareMetalTemplate => "baremetaltemplate",
            Kind::Tenant => "tenant",
            Kind::Host => "host",
            Kind::ComputeInstance => "computeinstance",
            Kind::BareMetalInstance => "baremetalinstance",
            Kind::Cluster => "cluster",
        }
    }

    /// The plural CLI name.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::VirtualNetwork => "virtualnetworks",
            Kind::Subnet => "subnets",
            Kind::SecurityGroup => "securitygroups",
            Kind::ExternalIp => "externalips",
            Kind::ExternalIpAttachment => "externalipattachments",
            Kind::NatGateway => "natgateways",
            Kind::ExternalIpPool => "externalippools",
            Kind::NetworkClass => "networkclasses",
            Kind::HostType => "hosttypes",
            Kind::BareMetalTemplate => "baremetaltemplates",
            Kind::Tenant => "tenants",
            Kind::Host => "hosts",
            Kind::ComputeInstance => "computeinstances",
            Kind::BareMetalInstance => "baremetalinstances",
            Kind::Cluster => "clusters",
        }
    }

    /// Short aliases (already normalised: lower case, no `-`/`_`).
    fn aliases(self) -> &'static [&'static str] {
        match self {
            Kind::VirtualNetwork => &["vn", "vns", "vnet", "vnets"],
            Kind::Subnet => &["sn"],
            Kind::SecurityGroup => &["sg", "sgs"],
            Kind::ExternalIp => &["eip", "eips"],
            Kind::ExternalIpAttachment => &["eipa", "eipattachment", "eipattachments"],
            Kind::NatGateway => &["nat", "nats", "natgw", "natgws"],
            Kind::ExternalIpPool => &["pool", "pools", "eippool", "eippools", "ippool", "ippools"],
            Kind::NetworkClass => &["nc", "class", "classes"],
            Kind::HostType => &["ht"],
            Kind::BareMetalTemplate => &["bmt", "bmtemplate", "bmtemplates"],
            Kind::Tenant => &[],
            Kind::Host => &[],
            Kind::ComputeInstance => &["ci", "vm", "vms"],
            Kind::BareMetalInstance => &["bmi", "bm", "baremetal"],
            Kind::Cluster => &[],
        }
    }

    /// The REST collection.
    pub fn collection(self) -> &'static str {
        match self {
            Kind::VirtualNetwork => "virtual_networks",
            Kind::Subnet => "subnets",
            Kind::SecurityGroup => "security_groups",
            Kind::ExternalIp => "external_ips",
            Kind::ExternalIpAttachment => "external_ip_attachments",
            Kind::NatGateway => "nat_gateways",
            Kind::ExternalIpPool => "external_ip_pools",
            Kind::NetworkClass => "network_classes",
            Kind::HostType => "host_types",
            Kind::BareMetalTemplate => "baremetal_templates",
            Kind::Tenant => "tenants",
            Kind::Host => "hosts",
            Kind::ComputeInstance => "compute_instances",
            Kind::BareMetalInstance => "baremetal_instances",
            Kind::Cluster => "clusters",
        }
    }

    /// What the given API allows on this kind.
    pub fn access(self, scope: Scope) -> Access {
        use Kind::*;
        match (scope, self) {
            (
                Scope::Public,
                VirtualNetwork | Subnet | SecurityGroup | ExternalIp | ExternalIpAttachment
                | NatGateway | ComputeInstance | BareMetalInstance | Cluster,
            ) => Access::ReadWrite,
            (Scope::Public, ExternalIpPool | NetworkClass | HostType | BareMetalTemplate) => {
                Access::ReadOnly
            }
            (Scope::Public, Tenant | Host) => Access::None,
            (
                Scope::Private,
                ExternalIpPool | NetworkClass | HostType | BareMetalTemplate | Tenant | Host,
            ) => Access::ReadWrite,
            (Scope::Private, _) => Access::None,
        }
    }

    /// Whether objects of this kind carry `status.state` (HostType does not).
    pub fn has_state(self) -> bool {
        self != Kind::HostType
    }

    /// Whether `state` (without the enum prefix) is the end of a successful create.
    pub fn is_ready(self, state: &str) -> bool {
        match self {
            Kind::Host => matches!(state, "FREE" | "RESERVED" | "ASSIGNED"),
            _ => matches!(state, "READY" | "ALLOCATED" | "RUNNING"),
        }
    }

    /// Kinds whose ids appear in this kind's table columns (resolved to names for display).
    pub fn referenced(self) -> &'static [Kind] {
        match self {
            Kind::VirtualNetwork => &[Kind::NetworkClass],
            Kind::Subnet | Kind::SecurityGroup => &[Kind::VirtualNetwork],
            Kind::NatGateway => &[Kind::VirtualNetwork, Kind::ExternalIp],
            Kind::ExternalIpAttachment => &[
                Kind::ExternalIp,
                Kind::ComputeInstance,
                Kind::Cluster,
                Kind::BareMetalInstance,
            ],
            Kind::ExternalIp => &[Kind::ExternalIpPool],
            Kind::Host | Kind::BareMetalTemplate => &[Kind::HostType],
            // Attachments give the workloads' external addresses (see output::add_external_ips).
            Kind::ComputeInstance => &[Kind::Subnet, Kind::ExternalIpAttachment],
            Kind::BareMetalInstance | Kind::Cluster => &[Kind::ExternalIpAttachment],
            _ => &[],
        }
    }

    /// Parses a kind from any accepted spelling: singular, plural, short alias; case and
    /// `-`/`_` are ignored (`security-group`, `SecurityGroups`, `sg`).
    pub fn parse(s: &str) -> Result<Kind, String> {
        let norm: String = s
            .chars()
            .filter(|c| !matches!(c, '-' | '_' | ' '))
            .flat_map(char::to_lowercase)
            .collect();
        Kind::ALL
            .into_iter()
            .find(|k| {
                k.name() == norm || k.plural() == norm || k.aliases().contains(&norm.as_str())
            })
            .ok_or_else(|| format!("unknown kind '{s}'; expected one of: {}", Kind::help_list()))
    }

    /// `virtualnetwork (vn), subnet, …` for messages.
    pub fn help_list() -> String {
        Kind::ALL
            .iter()
            .map(|k| match k.aliases().first() {
                Some(a) => format!("{} ({a})", k.name()),
                None => k.name().to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Kind::parse(s)
    }
}

/// The state without its enum prefix: `SUBNET_STATE_READY` → `READY`.
pub fn short_state(state: &str) -> &str {
    match state.find("_STATE_") {
        Some(i) => &state[i + "_STATE_".len()..],
        None => state,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_resolve() {
        let cases = [
            ("virtualnetwork", Kind::VirtualNetwork),
            ("virtualnetworks", Kind::VirtualNetwork),
            ("vn", Kind::VirtualNetwork),
            ("virtual-network", Kind::VirtualNetwork),
            ("Virtual_Networks", Kind::VirtualNetwork),
            ("subnet", Kind::Subnet),
            ("subnets", Kind::Subnet),
            ("securitygroup", Kind::SecurityGroup),
            ("security-group", Kind::SecurityGroup),
            ("security-groups", Kind::SecurityGroup),
            ("sg", Kind::SecurityGroup),
            ("externalip", Kind::ExternalIp),
            ("external-ips", Kind::ExternalIp),
            ("eip", Kind::ExternalIp),
            ("externalipattachment", Kind::ExternalIpAttachment),
            ("externalipattachments", Kind::ExternalIpAttachment),
            ("natgateway", Kind::NatGateway),
            ("nat", Kind::NatGateway),
            ("externalippool", Kind::ExternalIpPool),
            ("pool", Kind::ExternalIpPool),
            ("pools", Kind::ExternalIpPool),
            ("networkclass", Kind::NetworkClass),
            ("networkclasses", Kind::NetworkClass),
            ("network-class", Kind::NetworkClass),
            ("hosttype", Kind::HostType),
            ("host-types", Kind::HostType),
            ("baremetaltemplates", Kind::BareMetalTemplate),
            ("baremetal-template", Kind::BareMetalTemplate),
            ("bmt", Kind::BareMetalTemplate),
            ("tenant", Kind::Tenant),
            ("tenants", Kind::Tenant),
            ("hosts", Kind::Host),
            ("vm", Kind::ComputeInstance),
            ("cluster", Kind::Cluster),
        ];
        for (s, k) in cases {
            assert_eq!(Kind::parse(s), Ok(k), "{s}");
        }
    }

    #[test]
    fn unknown_kind_lists_choices() {
        let err = Kind::parse("widget").unwrap_err();
        assert!(err.contains("unknown kind 'widget'"), "{err}");
        assert!(err.contains("virtualnetwork (vn)"), "{err}");
    }

    #[test]
    fn names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for k in Kind::ALL {
            for n in [k.name(), k.plural()]
                .into_iter()
                .chain(k.aliases().iter().copied())
            {
                assert!(seen.insert(n), "duplicate spelling {n}");
                assert_eq!(Kind::parse(n), Ok(k));
            }
        }
    }

    #[test]
    fn access_rules() {
        assert_eq!(Kind::Tenant.access(Scope::Public), Access::None);
        assert_eq!(Kind::Tenant.access(Scope::Private), Access::ReadWrite);
        assert_eq!(Kind::NetworkClass.access(Scope::Public), Access::ReadOnly);
        assert_eq!(Kind::Subnet.access(Scope::Private), Access::None);
    }

    #[test]
    fn states() {
        assert_eq!(short_state("SUBNET_STATE_READY"), "READY");
        assert_eq!(
            short_state("NETWORK_CLASS_STATE_DELETE_FAILED"),
            "DELETE_FAILED"
        );
        assert_eq!(short_state("READY"), "READY");
        assert!(Kind::ExternalIp.is_ready("ALLOCATED"));
        assert!(!Kind::Subnet.is_ready("PENDING"));
    }
}
