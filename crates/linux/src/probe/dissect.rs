//! Reading a frame back (forged or captured): Ethernet (one 802.1Q tag skipped), IPv4 or IPv6
//! across its extension headers, and the upper layer, with checksum verification.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::forge::{
    ETHERTYPE_IPV4, ETHERTYPE_IPV6, NH_DEST_OPTS, NH_FRAGMENT, NH_HOP_BY_HOP, PROTO_ICMPV6,
    PROTO_TCP, PROTO_UDP, checksum, checksum_v4, checksum_v6,
};

/// IPv6 next header: Routing.
const NH_ROUTING: u8 = 43;
/// IPv6 next header: Authentication Header.
const NH_AH: u8 = 51;

/// An IP frame taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dissected<'a> {
    /// Ethernet destination.
    pub dst_mac: [u8; 6],
    /// Ethernet source.
    pub src_mac: [u8; 6],
    /// IP source.
    pub src_ip: IpAddr,
    /// IP destination.
    pub dst_ip: IpAddr,
    /// TTL (IPv4) or hop limit (IPv6).
    pub ttl: u8,
    /// IPv4: whether the IP header checksum is correct; IPv6: always true.
    pub ip_checksum_ok: bool,
    /// Next-header values of the IPv6 extension headers crossed, in order (empty for IPv4).
    pub ext: Vec<u8>,
    /// Upper-layer protocol (after the extension headers).
    pub proto: u8,
    /// Upper-layer bytes (header included), cut to the IP length.
    pub l4: &'a [u8],
}

impl Dissected<'_> {
    /// Whether the upper-layer checksum is correct (TCP, UDP, ICMPv6; a zero UDP checksum
    /// over IPv4 means none and counts as correct). Other protocols: true. Frames a local
    /// stack sent over veth may be captured before checksum offload completes them (the field
    /// then holds only the pseudo-header sum): check forged frames, not kernel replies.
    pub fn checksum_ok(&self) -> bool {
        match (self.src_ip, self.dst_ip) {
            (IpAddr::V4(s), IpAddr::V4(d)) => match self.proto {
                PROTO_UDP if self.l4.get(6..8) == Some(&[0, 0]) => true,
                PROTO_UDP | PROTO_TCP => checksum_v4(s, d, self.proto, self.l4) == 0,
                _ => true,
            },
            (IpAddr::V6(s), IpAddr::V6(d)) => match self.proto {
                PROTO_UDP | PROTO_TCP | PROTO_ICMPV6 => checksum_v6(s, d, self.proto, self.l4) == 0,
                _ => true,
            },
            _ => false,
        }
    }

    /// Source and destination ports (TCP, UDP).
    pub fn ports(&self) -> Option<(u16, u16)> {
        if !matches!(self.proto, PROTO_TCP | PROTO_UDP) || self.l4.len() < 4 {
            return None;
        }
        Some((
            u16::from_be_bytes([self.l4[0], self.l4[1]]),
            u16::from_be_bytes([self.l4[2], self.l4[3]]),
        ))
    }

    /// ICMPv6 type and code.
    pub fn icmpv6_type(&self) -> Option<(u8, u8)> {
        match (self.proto, self.l4) {
            (PROTO_ICMPV6, [t, c, ..]) => Some((*t, *c)),
            _ => None,
        }
    }

    /// The bytes after the upper-layer header: UDP payload, TCP data, ICMPv6 body after
    /// type/code/checksum; the whole upper layer for other protocols.
    pub fn payload(&self) -> &[u8] {
        let skip = match self.proto {
            PROTO_UDP => 8,
            PROTO_TCP => self.l4.get(12).map_or(20, |b| usize::from(b >> 4) * 4),
            PROTO_ICMPV6 => 4,
            _ => 0,
        };
        self.l4.get(skip..).unwrap_or(&[])
    }
}

/// Takes an IPv4 or IPv6 Ethernet frame apart; `None` for anything else or a truncated frame.
pub fn dissect(frame: &[u8]) -> Option<Dissected<'_>> {
    let dst_mac: [u8; 6] = frame.get(0..6)?.try_into().ok()?;
    let src_mac: [u8; 6] = frame.get(6..12)?.try_into().ok()?;
    let mut ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let mut off = 14;
    if ethertype == 0x8100 {
        ethertype = u16::from_be_bytes([*frame.get(16)?, *frame.get(17)?]);
        off = 18;
    }
    let ip = frame.get(off..)?;
    match ethertype {
        ETHERTYPE_IPV4 => {
            let ihl = usize::from(ip.first()? & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
            let header = ip.get(..ihl)?;
            let src: [u8; 4] = ip.get(12..16)?.try_into().ok()?;
            let dst: [u8; 4] = ip.get(16..20)?.try_into().ok()?;
            Some(Dissected {
                dst_mac,
                src_mac,
                src_ip: Ipv4Addr::from(src).into(),
                dst_ip: Ipv4Addr::from(dst).into(),
                ttl: *ip.get(8)?,
                ip_checksum_ok: ihl >= 20 && checksum(header) == 0,
                ext: Vec::new(),
                proto: *ip.get(9)?,
                l4: ip.get(ihl..total)?,
            })
        }
        ETHERTYPE_IPV6 => {
            let len = usize::from(u16::from_be_bytes([*ip.get(4)?, *ip.get(5)?]));
            let src: [u8; 16] = ip.get(8..24)?.try_into().ok()?;
            let dst: [u8; 16] = ip.get(24..40)?.try_into().ok()?;
            let body = ip.get(40..40 + len)?;
            let (mut next, mut at, mut ext) = (*ip.get(6)?, 0usize, Vec::new());
            loop {
                let size = match next {
                    NH_HOP_BY_HOP | NH_DEST_OPTS | NH_ROUTING => {
                        (usize::from(*body.get(at + 1)?) + 1) * 8
                    }
                    NH_FRAGMENT => 8,
                    NH_AH => (usize::from(*body.get(at + 1)?) + 2) * 4,
                    _ => break,
                };
                ext.push(next);
                next = *body.get(at)?;
                at += size;
            }
            Some(Dissected {
                dst_mac,
                src_mac,
                src_ip: Ipv6Addr::from(src).into(),
                dst_ip: Ipv6Addr::from(dst).into(),
                ttl: *ip.get(7)?,
                ip_checksum_ok: true,
                ext,
                proto: next,
                l4: body.get(at..)?,
            })
        }
        _ => None,
    }
}
