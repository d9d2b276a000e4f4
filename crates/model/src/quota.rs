//! Per-tenant quotas: what each one counts, the provider defaults, and how a tenant's own
//! `spec.quotas` combine with them (a limit the tenant leaves unset takes the default; 0 allows
//! none). Enforcement needs the store and lives in the API.

use crate::{Invalid, Kind, pb};

/// One quota of a tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quota {
    VirtualNetworks,
    Subnets,
    SecurityGroups,
    /// Ingress plus egress rules over all of the tenant's SecurityGroups.
    SecurityGroupRules,
    ExternalIps,
    ComputeInstances,
    BaremetalInstances,
    Clusters,
}

impl Quota {
    /// Every quota, in the order of the `TenantQuotas` message.
    pub const ALL: [Quota; 8] = [
        Quota::VirtualNetworks,
        Quota::Subnets,
        Quota::SecurityGroups,
        Quota::SecurityGroupRules,
        Quota::ExternalIps,
        Quota::ComputeInstances,
        Quota::BaremetalInstances,
        Quota::Clusters,
    ];

    /// The field name in `spec.quotas`, `status.usage` and `--quota name=value`.
    pub const fn name(self) -> &'static str {
        match self {
            Quota::VirtualNetworks => "virtual_networks",
            Quota::Subnets => "subnets",
            Quota::SecurityGroups => "security_groups",
            Quota::SecurityGroupRules => "security_group_rules",
            Quota::ExternalIps => "external_ips",
            Quota::ComputeInstances => "compute_instances",
            Quota::BaremetalInstances => "baremetal_instances",
            Quota::Clusters => "clusters",
        }
    }

    /// The quota named `name`.
    pub fn parse(name: &str) -> Option<Quota> {
        Quota::ALL.into_iter().find(|q| q.name() == name)
    }

    /// The kind whose objects this quota counts (or, for rules, whose rules it sums).
    pub const fn kind(self) -> Kind {
        match self {
            Quota::VirtualNetworks => Kind::VirtualNetwork,
            Quota::Subnets => Kind::Subnet,
            Quota::SecurityGroups | Quota::SecurityGroupRules => Kind::SecurityGroup,
            Quota::ExternalIps => Kind::ExternalIp,
            Quota::ComputeInstances => Kind::ComputeInstance,
            Quota::BaremetalInstances => Kind::BareMetalInstance,
            Quota::Clusters => Kind::Cluster,
        }
    }

    /// The quota limiting how many objects of `kind` a tenant owns (None: no object quota).
    pub fn of_kind(kind: Kind) -> Option<Quota> {
        Quota::ALL
            .into_iter()
            .find(|q| *q != Quota::SecurityGroupRules && q.kind() == kind)
    }

    /// The provider default when the server configuration sets none.
    pub const fn default_limit(self) -> u32 {
        match self {
            Quota::VirtualNetworks => 50,
            Quota::Subnets => 250,
            Quota::SecurityGroups => 250,
            Quota::SecurityGroupRules => 5000,
            Quota::ExternalIps => 100,
            Quota::ComputeInstances => 1000,
            Quota::BaremetalInstances => 200,
            Quota::Clusters => 50,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Written as a limit's value: no limit at all (e.g. `--default-quota clusters=unlimited`).
pub const UNLIMITED: u32 = u32::MAX;

/// A value for every quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaLimits([u32; 8]);

impl Default for QuotaLimits {
    /// The built-in provider defaults ([`Quota::default_limit`]).
    fn default() -> Self {
        QuotaLimits(Quota::ALL.map(Quota::default_limit))
    }
}

impl QuotaLimits {
    /// No limit on anything (benchmarks).
    pub const fn unlimited() -> Self {
        QuotaLimits([UNLIMITED; 8])
    }

    /// The limit of one quota.
    pub fn get(&self, q: Quota) -> u32 {
        self.0[q.index()]
    }

    /// Sets the limit of one quota.
    pub fn set(&mut self, q: Quota, limit: u32) {
        self.0[q.index()] = limit;
    }

    /// Applies `name=value[,name=value…]` (value a number or `unlimited`) over these limits.
    pub fn apply_overrides(&mut self, field: &str, text: &str) -> Result<(), Invalid> {
        for (quota, limit) in parse_assignments(field, text)? {
            self.set(quota, limit);
        }
        Ok(())
    }

    /// The limits in force for a tenant: its own quotas where set, these defaults elsewhere.
    pub fn for_tenant(&self, quotas: Option<&pb::TenantQuotas>) -> QuotaLimits {
        let mut out = *self;
        if let Some(t) = quotas {
            for q in Quota::ALL {
                if let Some(v) = tenant_value(t, q) {
                    out.set(q, v);
                }
            }
        }
        out
    }
}

/// The value a tenant set for one quota.
pub fn tenant_value(t: &pb::TenantQuotas, q: Quota) -> Option<u32> {
    match q {
        Quota::VirtualNetworks => t.virtual_networks,
        Quota::Subnets => t.subnets,
        Quota::SecurityGroups => t.security_groups,
        Quota::SecurityGroupRules => t.security_group_rules,
        Quota::ExternalIps => t.external_ips,
        Quota::ComputeInstances => t.compute_instances,
        Quota::BaremetalInstances => t.baremetal_instances,
        Quota::Clusters => t.clusters,
    }
}

/// Sets one quota of a tenant's `spec.quotas`.
pub fn set_tenant_value(t: &mut pb::TenantQuotas, q: Quota, v: Option<u32>) {
    let slot = match q {
        Quota::VirtualNetworks => &mut t.virtual_networks,
        Quota::Subnets => &mut t.subnets,
        Quota::SecurityGroups => &mut t.security_groups,
        Quota::SecurityGroupRules => &mut t.security_group_rules,
        Quota::ExternalIps => &mut t.external_ips,
        Quota::ComputeInstances => &mut t.compute_instances,
        Quota::BaremetalInstances => &mut t.baremetal_instances,
        Quota::Clusters => &mut t.clusters,
    };
    *slot = v;
}

/// Parses `name=value[,name=value…]`: names from [`Quota::name`], values a non-negative
/// integer or `unlimited`. Errors name `field`, the entry and the rule.
pub fn parse_assignments(field: &str, text: &str) -> Result<Vec<(Quota, u32)>, Invalid> {
    let names = || {
        Quota::ALL
            .iter()
            .map(|q| q.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((name, value)) = entry.split_once('=') else {
            return Err(Invalid::new(
                field,
                format!("'{entry}' is not name=value (names: {})", names()),
            ));
        };
        let quota = Quota::parse(name.trim()).ok_or_else(|| {
            Invalid::new(
                field,
                format!("'{}' is not a quota (quotas: {})", name.trim(), names()),
            )
        })?;
        let value = value.trim();
        let limit = if value == "unlimited" {
            UNLIMITED
        } else {
            value.parse::<u32>().map_err(|_| {
                Invalid::new(
                    field,
                    format!(
                        "'{value}' for {} is not a non-negative integer or 'unlimited'",
                        quota.name()
                    ),
                )
            })?
        };
        out.push((quota, limit));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_kinds() {
        for q in Quota::ALL {
            assert_eq!(Quota::parse(q.name()), Some(q));
        }
        assert_eq!(
            Quota::of_kind(Kind::SecurityGroup),
            Some(Quota::SecurityGroups)
        );
        assert_eq!(Quota::of_kind(Kind::ExternalIp), Some(Quota::ExternalIps));
        assert_eq!(Quota::of_kind(Kind::NatGateway), None);
        assert_eq!(Quota::SecurityGroupRules.kind(), Kind::SecurityGroup);
    }

    #[test]
    fn overrides_and_tenant_values() {
        let mut d = QuotaLimits::default();
        assert_eq!(d.get(Quota::Subnets), 250);
        d.apply_overrides("--default-quota", "subnets=3, clusters=unlimited")
            .unwrap();
        assert_eq!(d.get(Quota::Subnets), 3);
        assert_eq!(d.get(Quota::Clusters), UNLIMITED);
        let t = pb::TenantQuotas {
            subnets: Some(0),
            ..Default::default()
        };
        let eff = d.for_tenant(Some(&t));
        assert_eq!(eff.get(Quota::Subnets), 0);
        assert_eq!(eff.get(Quota::Clusters), UNLIMITED);
        assert_eq!(eff.get(Quota::VirtualNetworks), 50);
    }

    #[test]
    fn bad_assignments_name_the_entry() {
        let e = parse_assignments("--quota", "subnet=3").unwrap_err();
        assert!(e.message.contains("'subnet' is not a quota"), "{e}");
        let e = parse_assignments("--quota", "subnets=-1").unwrap_err();
        assert!(e.message.contains("'-1' for subnets"), "{e}");
        let e = parse_assignments("--quota", "subnets").unwrap_err();
        assert!(e.message.contains("not name=value"), "{e}");
    }
}
