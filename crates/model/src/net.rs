//! CIDR and address arithmetic used by validation, capacity accounting and VIP blocks.

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::Invalid;

/// An address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    /// "IPv4" / "IPv6", as users write it.
    pub const fn label(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }

    /// The proto enum name (`IP_FAMILY_IPV4`), as requests spell an `IpFamily`.
    pub fn enum_name(self) -> &'static str {
        match self {
            Family::V4 => crate::pb::IpFamily::Ipv4.as_str_name(),
            Family::V6 => crate::pb::IpFamily::Ipv6.as_str_name(),
        }
    }

    /// Family of a network.
    pub fn of(net: &IpNet) -> Family {
        match net {
            IpNet::V4(_) => Family::V4,
            IpNet::V6(_) => Family::V6,
        }
    }
}

/// Parses `value` (the content of `field`) as a CIDR of `family` with host bits zero.
pub fn parse_cidr(field: &str, value: &str, family: Family) -> Result<IpNet, Invalid> {
    let net: IpNet = value.trim().parse().map_err(|_| {
        Invalid::new(
            field,
            format!("'{value}' is not a valid CIDR (expected address/prefix, e.g. 10.0.0.0/16)"),
        )
    })?;
    if Family::of(&net) != family {
        return Err(Invalid::new(
            field,
            format!(
                "'{value}' is an {} CIDR, expected {}",
                Family::of(&net).label(),
                family.label()
            ),
        ));
    }
    if net.trunc() != net {
        return Err(Invalid::new(
            field,
            format!(
                "'{value}' has host bits set (did you mean '{}'?)",
                net.trunc()
            ),
        ));
    }
    Ok(net)
}

/// Parses an optional CIDR field: empty means "not set".
pub fn parse_optional_cidr(
    field: &str,
    value: &str,
    family: Family,
) -> Result<Option<IpNet>, Invalid> {
    if value.is_empty() {
        Ok(None)
    } else {
        parse_cidr(field, value, family).map(Some)
    }
}

/// Parses a CIDR of either family with host bits zero.
pub fn parse_any_cidr(field: &str, value: &str) -> Result<IpNet, Invalid> {
    let family = if value.contains(':') {
        Family::V6
    } else {
        Family::V4
    };
    parse_cidr(field, value, family)
}

/// Whether two networks share at least one address.
pub fn overlaps(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// Number of assignable addresses: IPv4 excludes network and broadcast below /31.
/// Saturates at `i64::MAX` (an IPv6 /64 has more addresses than any counter needs).
pub fn capacity(net: &IpNet) -> i64 {
    let host_bits = u32::from(net.max_prefix_len() - net.prefix_len());
    let all: u128 = if host_bits >= 127 {
        u128::MAX
    } else {
        1u128 << host_bits
    };
    let usable = match net {
        IpNet::V4(_) if host_bits >= 2 => all - 2,
        _ => all,
    };
    i64::try_from(usable).unwrap_or(i64::MAX)
}

/// Total capacity of several networks, saturating.
pub fn total_capacity<'a>(nets: impl IntoIterator<Item = &'a IpNet>) -> i64 {
    nets.into_iter()
        .fold(0i64, |acc, n| acc.saturating_add(capacity(n)))
}

/// The block reserved for cluster VIPs: the highest `/vip_prefix` of an IPv4 subnet.
/// None when the subnet is not larger than the block (no room for both DHCP and VIPs).
pub fn vip_block(subnet: &Ipv4Net, vip_prefix: u8) -> Option<Ipv4Net> {
    if vip_prefix > 32 || vip_prefix <= subnet.prefix_len() {
        return None;
    }
    let block_size = 1u32 << (32 - u32::from(vip_prefix));
    let last = u32::from(subnet.broadcast());
    let start = last - (block_size - 1);
    Ipv4Net::new(start.into(), vip_prefix).ok()
}

/// The gateway of an IPv4 subnet: its first usable address (the network address itself on a
/// /31 or /32, which have no network address to skip).
pub fn ipv4_gateway(net: Ipv4Net) -> Ipv4Addr {
    let base = u32::from(net.network());
    if net.prefix_len() < 31 {
        Ipv4Addr::from(base.wrapping_add(1))
    } else {
        net.network()
    }
}

/// The gateway of an IPv6 subnet: `::1` of the prefix (the address itself on a /128).
pub fn ipv6_gateway(net: Ipv6Net) -> Ipv6Addr {
    let base = u128::from(net.network());
    if net.prefix_len() < 128 {
        Ipv6Addr::from(base.wrapping_add(1))
    } else {
        net.network()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_rejects_bad_syntax_family_and_host_bits() {
        assert!(parse_cidr("spec.ipv4_cidr", "10.0.0.0/16", Family::V4).is_ok());
        let e = parse_cidr("spec.ipv4_cidr", "10.0.0.1/16", Family::V4).unwrap_err();
        assert!(e.to_string().contains("host bits"), "{e}");
        assert!(e.to_string().contains("10.0.0.0/16"), "{e}");
        let e = parse_cidr("spec.ipv4_cidr", "fd00::/64", Family::V4).unwrap_err();
        assert!(e.to_string().contains("IPv6"), "{e}");
        let e = parse_cidr("spec.ipv4_cidr", "10.0.0/33", Family::V4).unwrap_err();
        assert!(e.to_string().contains("not a valid CIDR"), "{e}");
    }

    #[test]
    fn family_names() {
        assert_eq!(Family::V4.enum_name(), "IP_FAMILY_IPV4");
        assert_eq!(Family::V6.enum_name(), "IP_FAMILY_IPV6");
        assert_eq!(Family::V6.label(), "IPv6");
    }

    #[test]
    fn overlap_and_capacity() {
        let a: IpNet = "10.0.1.0/24".parse().unwrap();
        let b: IpNet = "10.0.1.0/25".parse().unwrap();
        let c: IpNet = "10.0.2.0/24".parse().unwrap();
        assert!(overlaps(&a, &b) && overlaps(&b, &a));
        assert!(!overlaps(&a, &c));
        assert_eq!(capacity(&a), 254);
        assert_eq!(capacity(&"10.0.0.0/31".parse().unwrap()), 2);
        assert_eq!(capacity(&"10.0.0.1/32".parse().unwrap()), 1);
        assert_eq!(capacity(&"fd00::/64".parse().unwrap()), i64::MAX);
        assert_eq!(capacity(&"fd00::/120".parse().unwrap()), 256);
    }

    #[test]
    fn vip_block_is_the_highest_block() {
        let s: Ipv4Net = "10.0.1.0/24".parse().unwrap();
        assert_eq!(vip_block(&s, 28).unwrap().to_string(), "10.0.1.240/28");
        assert!(vip_block(&"10.0.1.0/28".parse().unwrap(), 28).is_none());
    }

    #[test]
    fn gateways() {
        assert_eq!(
            ipv4_gateway("10.0.1.0/24".parse().unwrap()),
            Ipv4Addr::new(10, 0, 1, 1)
        );
        assert_eq!(
            ipv4_gateway("10.0.1.0/31".parse().unwrap()),
            Ipv4Addr::new(10, 0, 1, 0)
        );
        assert_eq!(
            ipv6_gateway("fd00:0:0:1::/64".parse().unwrap()),
            "fd00:0:0:1::1".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            ipv6_gateway("fd00::1/128".parse().unwrap()),
            "fd00::1".parse::<Ipv6Addr>().unwrap()
        );
    }
}
