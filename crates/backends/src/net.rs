//! Small address arithmetic shared by the drivers: usable ranges, lowest free address. The
//! gateway rule is the domain model's (re-exported here for the drivers).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
pub use osac_model::net::{ipv4_gateway, ipv6_gateway};

/// Inclusive range of addresses that may be handed out in `net`, as integers: IPv4 skips the
/// network and broadcast addresses below /31; IPv6 skips the subnet-router anycast address
/// (all zeros) below /127.
pub fn usable_range(net: IpNet) -> (u128, u128) {
    let (lo, hi) = (to_u128(net.network()), to_u128(net.broadcast()));
    let skip_ends = match net {
        IpNet::V4(n) => n.prefix_len() < 31,
        IpNet::V6(_) => false,
    };
    let skip_first = match net {
        IpNet::V4(n) => n.prefix_len() < 31,
        IpNet::V6(n) => n.prefix_len() < 127,
    };
    let lo = if skip_first { lo + 1 } else { lo };
    let hi = if skip_ends { hi - 1 } else { hi };
    (lo, hi)
}

/// Integer form of an address (IPv4 in the low 32 bits).
pub fn to_u128(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// Address of the same family as `like` from its integer form.
pub fn from_u128(like: IpAddr, value: u128) -> IpAddr {
    match like {
        // Values come from ranges of IPv4 nets, so they fit in 32 bits.
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(value as u32)),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(value)),
    }
}

/// Lowest address of `net`'s usable range that is neither `used` nor inside one of the
/// `blocked` prefixes; `None` when the range is full.
pub fn lowest_free(
    net: IpNet,
    used: &dyn Fn(&IpAddr) -> bool,
    blocked: &[IpNet],
) -> Option<IpAddr> {
    let like = net.network();
    let (lo, hi) = usable_range(net);
    let blocked: Vec<(u128, u128)> = blocked
        .iter()
        .filter(|b| b.network().is_ipv4() == like.is_ipv4())
        .map(|b| (to_u128(b.network()), to_u128(b.broadcast())))
        .collect();
    let mut x = lo;
    'search: while x <= hi {
        for &(a, b) in &blocked {
            if a <= x && x <= b {
                x = b.checked_add(1)?;
                continue 'search;
            }
        }
        let addr = from_u128(like, x);
        if !used(&addr) {
            return Some(addr);
        }
        x = x.checked_add(1)?;
    }
    None
}

/// Whether a prefix has host bits set (`10.0.1.5/24`), which backends reject.
pub fn has_host_bits(net: IpNet) -> bool {
    net.trunc() != net
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn n(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn lowest_free_skips_used_and_blocked() {
        let mut used: BTreeSet<IpAddr> = BTreeSet::new();
        let net = n("192.0.2.0/30");
        assert_eq!(
            lowest_free(net, &|a| used.contains(a), &[]),
            Some("192.0.2.1".parse().unwrap())
        );
        used.insert("192.0.2.1".parse().unwrap());
        assert_eq!(
            lowest_free(net, &|a| used.contains(a), &[]),
            Some("192.0.2.2".parse().unwrap())
        );
        used.insert("192.0.2.2".parse().unwrap());
        assert_eq!(
            lowest_free(net, &|a| used.contains(a), &[]),
            None,
            "broadcast is not usable"
        );
        assert_eq!(
            lowest_free(n("192.0.2.0/31"), &|_| false, &[]),
            Some("192.0.2.0".parse().unwrap())
        );
        assert_eq!(
            lowest_free(
                n("10.0.1.0/24"),
                &|_| false,
                &[n("10.0.1.1/32"), n("10.0.1.0/28")]
            ),
            Some("10.0.1.16".parse().unwrap())
        );
        assert_eq!(
            lowest_free(n("fd00::/64"), &|_| false, &[]),
            Some("fd00::1".parse().unwrap())
        );
        assert!(has_host_bits(n("10.0.1.5/24")));
        assert!(!has_host_bits(n("10.0.1.0/24")));
    }
}
