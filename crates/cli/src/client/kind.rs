//! Object kinds as the CLI offers them: which kinds (in help order) and how a typed kind is
//! parsed, which states end a `--wait`, and which kinds a table resolves ids of. The kinds
//! themselves, their names and aliases, and what each API allows on them are the model's
//! ([`osac_model::Kind`]); the REST root of each API is the client's
//! ([`osac_client::api_root`]).

pub use osac_model::{Access, Kind, Scope};

/// The kinds the CLI offers, in help order (events have their own command).
pub const CLI_KINDS: [Kind; 16] = [
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
    Kind::BareMetalInstanceType,
    Kind::Tenant,
    Kind::Host,
    Kind::ComputeInstance,
    Kind::BareMetalInstance,
    Kind::Cluster,
];

/// Parses a kind from any accepted spelling: singular, plural, short alias; case and
/// `-`/`_` are ignored (`security-group`, `SecurityGroups`, `sg`).
pub fn parse(s: &str) -> Result<Kind, String> {
    Kind::from_name(s)
        .filter(|k| CLI_KINDS.contains(k))
        .ok_or_else(|| format!("unknown kind '{s}'; expected one of: {}", help_list()))
}

/// `virtualnetwork (vn), subnet (sn), …` for messages.
pub fn help_list() -> String {
    CLI_KINDS
        .iter()
        .map(|k| match k.aliases().first() {
            Some(a) => format!("{} ({a})", k.singular()),
            None => k.singular().to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `state` (without the enum prefix) is the end of a successful create.
pub fn is_ready(kind: Kind, state: &str) -> bool {
    match kind {
        Kind::Host => matches!(state, "FREE" | "RESERVED" | "ASSIGNED"),
        _ => matches!(state, "READY" | "ALLOCATED" | "RUNNING"),
    }
}

/// Kinds whose ids appear in `kind`'s table columns (resolved to names for display).
pub fn table_refs(kind: Kind) -> &'static [Kind] {
    match kind {
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
        Kind::Host | Kind::BareMetalTemplate | Kind::BareMetalInstanceType => &[Kind::HostType],
        Kind::BareMetalInstance => &[Kind::ExternalIpAttachment, Kind::BareMetalInstanceType],
        // Attachments give the workloads' external addresses (see output::add_external_ips).
        Kind::ComputeInstance => &[Kind::Subnet, Kind::ExternalIpAttachment],
        Kind::Cluster => &[Kind::ExternalIpAttachment],
        _ => &[],
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
            ("baremetalinstancetypes", Kind::BareMetalInstanceType),
            ("baremetal-instance-type", Kind::BareMetalInstanceType),
            ("bmit", Kind::BareMetalInstanceType),
            ("tenant", Kind::Tenant),
            ("tenants", Kind::Tenant),
            ("hosts", Kind::Host),
            ("vm", Kind::ComputeInstance),
            ("cluster", Kind::Cluster),
        ];
        for (s, k) in cases {
            assert_eq!(parse(s), Ok(k), "{s}");
        }
    }

    #[test]
    fn unknown_kind_lists_choices() {
        let err = parse("widget").unwrap_err();
        assert!(err.contains("unknown kind 'widget'"), "{err}");
        assert!(err.contains("virtualnetwork (vn)"), "{err}");
    }

    #[test]
    fn names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for k in CLI_KINDS {
            for n in [k.singular(), k.plural()]
                .into_iter()
                .chain(k.aliases().iter().copied())
            {
                assert!(seen.insert(n), "duplicate spelling {n}");
                assert_eq!(parse(n), Ok(k));
            }
        }
        for events in ["event", "events", "ev"] {
            assert!(parse(events).is_err(), "{events}");
        }
    }

    #[test]
    fn access_rules() {
        assert_eq!(Kind::Tenant.access(Scope::Tenant), Access::None);
        assert_eq!(Kind::Tenant.access(Scope::Provider), Access::ReadWrite);
        assert_eq!(Kind::NetworkClass.access(Scope::Tenant), Access::ReadOnly);
        assert_eq!(Kind::Subnet.access(Scope::Provider), Access::None);
    }

    #[test]
    fn states() {
        assert_eq!(short_state("SUBNET_STATE_READY"), "READY");
        assert_eq!(
            short_state("NETWORK_CLASS_STATE_DELETE_FAILED"),
            "DELETE_FAILED"
        );
        assert_eq!(short_state("READY"), "READY");
        assert!(is_ready(Kind::ExternalIp, "ALLOCATED"));
        assert!(!is_ready(Kind::Subnet, "PENDING"));
    }
}
