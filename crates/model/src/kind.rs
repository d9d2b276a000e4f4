//! The resource kinds and the facts about them that every layer needs.

use std::fmt;
use std::str::FromStr;

use crate::kinds::{self, KindSpec};

/// Every kind of object the store keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    NetworkClass,
    ExternalIpPool,
    HostType,
    /// A provider catalog item for bare-metal instances: a HostType plus default parameters.
    BareMetalTemplate,
    /// A provider-defined bare-metal flavor: network ports and the HostTypes serving it.
    BareMetalInstanceType,
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

/// The two sides of the product: the provider and its tenants. It says who owns objects of a
/// kind ([`Kind::scope`]) and which API a call came through: the provider's private API
/// (`/api/private/v1`, `osacnet.admin.v1`) or the tenants' public API
/// (`/api/fulfillment/v1`, `osacnet.v1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Provider,
    Tenant,
}

/// What one API allows on a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Not served by that API.
    None,
    /// List/get only.
    ReadOnly,
    /// Create, read, update and delete (subject to the caller's role and the kind's rules).
    ReadWrite,
}

impl Kind {
    /// All kinds, in dependency order (a kind only references kinds before it).
    pub const ALL: [Kind; 17] = [
        Kind::NetworkClass,
        Kind::ExternalIpPool,
        Kind::HostType,
        Kind::BareMetalTemplate,
        Kind::BareMetalInstanceType,
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

    /// The static facts about the kind, from its module in [`crate::kinds`].
    pub const fn spec(self) -> &'static KindSpec {
        match self {
            Kind::NetworkClass => &kinds::network_class::SPEC,
            Kind::ExternalIpPool => &kinds::external_ip_pool::SPEC,
            Kind::HostType => &kinds::host_type::SPEC,
            Kind::BareMetalTemplate => &kinds::baremetal_template::SPEC,
            Kind::BareMetalInstanceType => &kinds::baremetal_instance_type::SPEC,
            Kind::Host => &kinds::host::SPEC,
            Kind::Tenant => &kinds::tenant::SPEC,
            Kind::VirtualNetwork => &kinds::virtual_network::SPEC,
            Kind::Subnet => &kinds::subnet::SPEC,
            Kind::SecurityGroup => &kinds::security_group::SPEC,
            Kind::ExternalIp => &kinds::external_ip::SPEC,
            Kind::ComputeInstance => &kinds::compute_instance::SPEC,
            Kind::BareMetalInstance => &kinds::baremetal_instance::SPEC,
            Kind::Cluster => &kinds::cluster::SPEC,
            Kind::ExternalIpAttachment => &kinds::external_ip_attachment::SPEC,
            Kind::NatGateway => &kinds::nat_gateway::SPEC,
            Kind::Event => &kinds::event::SPEC,
        }
    }

    /// REST collection name, also the kind's stable identifier in the store.
    pub const fn collection(self) -> &'static str {
        self.spec().collection
    }

    /// Human name used in messages ("VirtualNetwork 'net'").
    pub const fn display_name(self) -> &'static str {
        self.spec().display_name
    }

    /// The name users type, singular, lower case (`virtualnetwork`).
    pub const fn singular(self) -> &'static str {
        self.spec().singular
    }

    /// The name users type, plural, lower case (`virtualnetworks`).
    pub const fn plural(self) -> &'static str {
        self.spec().plural
    }

    /// Short names users may type besides the singular and plural (`vn`, `vns`, …).
    pub const fn aliases(self) -> &'static [&'static str] {
        self.spec().aliases
    }

    /// Whether objects of this kind belong to the provider or to a tenant.
    pub const fn scope(self) -> Scope {
        self.spec().scope
    }

    /// What the API of `api` allows on this kind. The private API serves the provider kinds;
    /// the public API serves the tenant kinds and lets tenants read the provider's catalog
    /// (classes, pools, host types, templates, bare-metal instance types) but not the inventory (hosts) nor the tenants
    /// themselves. Roles and per-kind rules (events are never written by clients) narrow this
    /// further.
    pub const fn access(self, api: Scope) -> Access {
        match (api, self.scope()) {
            (Scope::Provider, Scope::Provider) | (Scope::Tenant, Scope::Tenant) => {
                Access::ReadWrite
            }
            (Scope::Provider, Scope::Tenant) => Access::None,
            (Scope::Tenant, Scope::Provider) => match self {
                Kind::Tenant | Kind::Host => Access::None,
                _ => Access::ReadOnly,
            },
        }
    }

    /// Whether a `tenant-user` may create, update and delete objects of this tenant kind: the
    /// persona who runs workloads on the networks a tenant admin prepared — workloads and
    /// their external addresses (ExternalIPs, ExternalIPAttachments). VirtualNetworks,
    /// Subnets, SecurityGroups and NATGateways shape every workload of the tenant and stay the
    /// tenant admin's.
    pub const fn tenant_user_may_write(self) -> bool {
        self.spec().tenant_user_may_write
    }

    /// The JSON name of the kind's state enum prefix, e.g. `SUBNET_STATE`; None for kinds
    /// without `status.state` (HostTypes, Events).
    pub const fn state_prefix(self) -> Option<&'static str> {
        self.spec().state_prefix
    }

    /// Whether objects of this kind carry `status.state`.
    pub const fn has_state(self) -> bool {
        self.state_prefix().is_some()
    }

    /// The state a new object starts in (its enum's first working state, without prefix).
    pub const fn initial_state(self) -> &'static str {
        self.spec().initial_state
    }

    /// Whether objects of this kind have a lifecycle that controllers reconcile and that a
    /// tenant's deletion must wait for. Events do not: they are records that expire.
    pub const fn is_reconciled(self) -> bool {
        self.spec().reconciled
    }

    /// Whether a controller must undo fabric state before the object may disappear.
    pub const fn needs_fabric_finalizer(self) -> bool {
        self.spec().needs_fabric_finalizer
    }

    /// The kind a user means by `name`: its singular, plural, collection, display name or a
    /// short alias; case and the separators `-`, `_` and space are ignored
    /// (`security-group`, `SecurityGroups`, `security_groups`, `sg`).
    pub fn from_name(name: &str) -> Option<Kind> {
        let norm: String = name
            .chars()
            .filter(|c| !matches!(c, '-' | '_' | ' '))
            .flat_map(char::to_lowercase)
            .collect();
        Kind::ALL.into_iter().find(|k| {
            k.singular() == norm || k.plural() == norm || k.aliases().contains(&norm.as_str())
        })
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
        Kind::from_name(s).ok_or_else(|| UnknownKind(s.to_string()))
    }
}

/// Finalizer that keeps an object until its fabric state is undone.
pub const FABRIC_FINALIZER: &str = crate::defaults::reserved_key!("fabric");

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
        assert_eq!(
            "Security_Groups".parse::<Kind>().ok(),
            Some(Kind::SecurityGroup)
        );
        assert!("bogus".parse::<Kind>().is_err());
    }

    #[test]
    fn names_follow_the_display_name_and_collection() {
        let mut seen = std::collections::HashSet::new();
        for k in Kind::ALL {
            assert_eq!(k.singular(), k.display_name().to_ascii_lowercase());
            assert_eq!(k.plural(), k.collection().replace('_', ""));
            for n in [k.singular(), k.plural()]
                .into_iter()
                .chain(k.aliases().iter().copied())
            {
                assert!(seen.insert(n), "duplicate spelling {n}");
                assert_eq!(Kind::from_name(n), Some(k));
            }
        }
    }

    #[test]
    fn access_by_api() {
        assert_eq!(Kind::Tenant.access(Scope::Tenant), Access::None);
        assert_eq!(Kind::Host.access(Scope::Tenant), Access::None);
        assert_eq!(Kind::Tenant.access(Scope::Provider), Access::ReadWrite);
        assert_eq!(Kind::NetworkClass.access(Scope::Tenant), Access::ReadOnly);
        assert_eq!(Kind::Subnet.access(Scope::Provider), Access::None);
        assert_eq!(Kind::Subnet.access(Scope::Tenant), Access::ReadWrite);
    }
}
