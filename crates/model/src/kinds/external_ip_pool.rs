//! ExternalIPPool: a provider range of public addresses, of one family, on one NetworkClass.

use ipnet::IpNet;

use crate::kinds::KindSpec;
use crate::net::{Family, overlaps, parse_cidr};
use crate::refs::RefField;
use crate::validate::metadata;
use crate::{Invalid, Kind, Scope, pb};

/// The facts about ExternalIPPools.
pub const SPEC: KindSpec = KindSpec {
    aliases: &["pool", "pools", "eippool", "eippools", "ippool", "ippools"],
    state_prefix: Some("EXTERNAL_IP_POOL_STATE"),
    immutable_fields: &["spec.ip_family", "spec.cidrs", "spec.network_class"],
    references: &[RefField::to("spec.network_class", Kind::NetworkClass)],
    ..KindSpec::new(
        "ExternalIPPool",
        "external_ip_pools",
        "externalippool",
        "externalippools",
        Scope::Provider,
    )
};

/// Checks an ExternalIPPool: family set, ≥1 CIDR, all valid, same family, no overlap inside.
pub fn validate(pool: &pb::ExternalIpPool) -> Result<Vec<IpNet>, Invalid> {
    metadata(pool.metadata.as_ref())?;
    let spec = pool.spec.clone().unwrap_or_default();
    let family = match pb::IpFamily::try_from(spec.ip_family) {
        Ok(pb::IpFamily::Ipv4) => Family::V4,
        Ok(pb::IpFamily::Ipv6) => Family::V6,
        _ => {
            return Err(Invalid::new(
                "spec.ip_family",
                "ip_family is required (IP_FAMILY_IPV4 or IP_FAMILY_IPV6)",
            ));
        }
    };
    if spec.cidrs.is_empty() {
        return Err(Invalid::new("spec.cidrs", "at least one CIDR is required"));
    }
    let mut nets: Vec<IpNet> = Vec::new();
    for (i, c) in spec.cidrs.iter().enumerate() {
        let net = parse_cidr(&format!("spec.cidrs[{i}]"), c, family)?;
        if let Some(other) = nets.iter().find(|o| overlaps(o, &net)) {
            return Err(Invalid::new(
                format!("spec.cidrs[{i}]"),
                format!("CIDR '{net}' overlaps with '{other}' of the same pool"),
            ));
        }
        nets.push(net);
    }
    Ok(nets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools() {
        let mut p = pb::ExternalIpPool {
            spec: Some(pb::ExternalIpPoolSpec {
                ip_family: 1,
                cidrs: vec!["203.0.113.0/24".into(), "203.0.113.128/25".into()],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(validate(&p).unwrap_err().message.contains("overlaps"));
        p.spec.as_mut().unwrap().cidrs = vec!["2001:db8::/64".into()];
        assert!(validate(&p).unwrap_err().message.contains("IPv6"));
    }
}
