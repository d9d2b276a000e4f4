//! Pure builders of forged Ethernet frames for the adversarial dataplane tests: IPv4 (UDP, TCP
//! SYN), IPv6 behind an optional chain of extension headers (UDP, ICMPv6), and VXLAN/Geneve
//! payloads wrapping an inner frame. Every checksum is computed: IPv4 header, UDP and TCP over
//! IPv4, UDP and ICMPv6 over IPv6 (pseudo-header with the final destination).
//!
//! Neighbour Discovery and DHCP messages built on these are in [`super::spoof`]; put a frame on
//! the wire with [`super::send_frame`], read one back with [`super::dissect`].

use std::net::{Ipv4Addr, Ipv6Addr};

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// EtherType of Transparent Ethernet Bridging (Geneve protocol type of an inner frame).
pub const ETHERTYPE_TEB: u16 = 0x6558;
/// IP protocol / next header: TCP.
pub const PROTO_TCP: u8 = 6;
/// IP protocol / next header: UDP.
pub const PROTO_UDP: u8 = 17;
/// IPv6 next header: ICMPv6.
pub const PROTO_ICMPV6: u8 = 58;
/// IPv6 next header: Hop-by-Hop Options.
pub const NH_HOP_BY_HOP: u8 = 0;
/// IPv6 next header: Fragment.
pub const NH_FRAGMENT: u8 = 44;
/// IPv6 next header: Destination Options.
pub const NH_DEST_OPTS: u8 = 60;
/// IANA VXLAN UDP port.
pub const VXLAN_PORT: u16 = 4789;
/// The Linux kernel's historical VXLAN UDP port.
pub const VXLAN_LINUX_PORT: u16 = 8472;
/// Geneve UDP port.
pub const GENEVE_PORT: u16 = 6081;
/// Smallest Ethernet frame without FCS; shorter frames are zero-padded to it.
pub const MIN_FRAME: usize = 60;

/// The Internet checksum (RFC 1071) of `data`: 0 over data whose checksum field is correct.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for c in data.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(u16::try_from(sum).unwrap_or(0xffff))
}

/// The checksum of a TCP/UDP segment `l4` over IPv4 (pseudo-header included): the value to
/// store when the segment's checksum field is zero, 0 when the stored one is correct.
pub fn checksum_v4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, l4: &[u8]) -> u16 {
    let mut p = Vec::with_capacity(12 + l4.len());
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(&[0, proto]);
    p.extend_from_slice(&be16(l4.len()));
    p.extend_from_slice(l4);
    checksum(&p)
}

/// The checksum of an upper-layer packet `l4` (UDP, TCP, ICMPv6) over IPv6 (RFC 8200 §8.1
/// pseudo-header): the value to store when its checksum field is zero, 0 when it is correct.
pub fn checksum_v6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, l4: &[u8]) -> u16 {
    let mut p = Vec::with_capacity(40 + l4.len());
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(&u32::try_from(l4.len()).unwrap_or(u32::MAX).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, next]);
    p.extend_from_slice(l4);
    checksum(&p)
}

fn be16(n: usize) -> [u8; 2] {
    u16::try_from(n).unwrap_or(u16::MAX).to_be_bytes()
}

/// An Ethernet frame: `dst`, `src`, `ethertype`, `payload`, zero-padded to [`MIN_FRAME`].
pub fn ethernet(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity((14 + payload.len()).max(MIN_FRAME));
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    if f.len() < MIN_FRAME {
        f.resize(MIN_FRAME, 0);
    }
    f
}

/// The Ethernet address of an IPv6 multicast group (`33:33` + its last four bytes).
pub fn ipv6_multicast_mac(group: Ipv6Addr) -> [u8; 6] {
    let o = group.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}

/// A UDP header (checksum zero) followed by `payload`.
fn udp_segment(src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = Vec::with_capacity(8 + payload.len());
    u.extend_from_slice(&src_port.to_be_bytes());
    u.extend_from_slice(&dst_port.to_be_bytes());
    u.extend_from_slice(&be16(8 + payload.len()));
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    u
}

/// Stores a UDP checksum (0 computed is sent as 0xffff, RFC 768 / RFC 8200).
fn set_udp_checksum(u: &mut [u8], c: u16) {
    let c = if c == 0 { 0xffff } else { c };
    u[6..8].copy_from_slice(&c.to_be_bytes());
}

/// Addresses of a forged IPv4 frame; every field may be forged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Frame {
    /// Ethernet source.
    pub src_mac: [u8; 6],
    /// Ethernet destination.
    pub dst_mac: [u8; 6],
    /// IP source.
    pub src_ip: Ipv4Addr,
    /// IP destination.
    pub dst_ip: Ipv4Addr,
    /// Time to live.
    pub ttl: u8,
    /// IP identification.
    pub id: u16,
}

impl Ipv4Frame {
    /// A frame from `src_mac`/`src_ip` to `dst_mac`/`dst_ip`, TTL 64.
    pub fn new(src_mac: [u8; 6], dst_mac: [u8; 6], src_ip: Ipv4Addr, dst_ip: Ipv4Addr) -> Self {
        Ipv4Frame {
            src_mac,
            dst_mac,
            src_ip,
            dst_ip,
            ttl: 64,
            id: 0,
        }
    }

    /// The frame carrying `l4` as protocol `proto` (header checksum set, DF set); `l4` is
    /// taken as is (its checksum is the caller's business).
    pub fn packet(&self, proto: u8, l4: &[u8]) -> Vec<u8> {
        let mut ip = Vec::with_capacity(20 + l4.len());
        ip.extend_from_slice(&[0x45, 0]);
        ip.extend_from_slice(&be16(20 + l4.len()));
        ip.extend_from_slice(&self.id.to_be_bytes());
        ip.extend_from_slice(&[0x40, 0, self.ttl, proto, 0, 0]);
        ip.extend_from_slice(&self.src_ip.octets());
        ip.extend_from_slice(&self.dst_ip.octets());
        let c = checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        ip.extend_from_slice(l4);
        ethernet(self.dst_mac, self.src_mac, ETHERTYPE_IPV4, &ip)
    }

    /// A UDP datagram carrying `payload`, with its UDP checksum.
    pub fn udp(&self, src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
        let mut u = udp_segment(src_port, dst_port, payload);
        let c = checksum_v4(self.src_ip, self.dst_ip, PROTO_UDP, &u);
        set_udp_checksum(&mut u, c);
        self.packet(PROTO_UDP, &u)
    }

    /// A TCP SYN with sequence number `seq` (window 64240, no options) carrying `payload` as
    /// SYN data (legal; a marker for captures), with its TCP checksum.
    pub fn tcp_syn(&self, src_port: u16, dst_port: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let mut t = Vec::with_capacity(20 + payload.len());
        t.extend_from_slice(&src_port.to_be_bytes());
        t.extend_from_slice(&dst_port.to_be_bytes());
        t.extend_from_slice(&seq.to_be_bytes());
        t.extend_from_slice(&0u32.to_be_bytes());
        // Data offset 5 words, flags SYN, window 64240, checksum 0, urgent pointer 0.
        t.extend_from_slice(&[0x50, 0x02, 0xfa, 0xf0, 0, 0, 0, 0]);
        t.extend_from_slice(payload);
        let c = checksum_v4(self.src_ip, self.dst_ip, PROTO_TCP, &t);
        t[16..18].copy_from_slice(&c.to_be_bytes());
        self.packet(PROTO_TCP, &t)
    }
}

/// One IPv6 extension header placed before the upper-layer header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtHeader {
    /// Hop-by-Hop Options with these TLV options (padded to 8 bytes with Pad1/PadN).
    HopByHop(Vec<u8>),
    /// Destination Options with these TLV options (padded to 8 bytes with Pad1/PadN).
    DestOpts(Vec<u8>),
    /// A Fragment header: `offset` in 8-byte units, more-fragments flag, identification.
    /// Offset 0 without M is an atomic fragment (RFC 6946).
    Fragment {
        /// Fragment offset in 8-byte units (13 bits).
        offset: u16,
        /// The M (more fragments) flag.
        more: bool,
        /// Identification.
        id: u32,
    },
}

impl ExtHeader {
    /// Hop-by-Hop Options holding only padding.
    pub fn hop_by_hop() -> Self {
        ExtHeader::HopByHop(Vec::new())
    }

    /// Hop-by-Hop Options with a Router Alert option (value 0, MLD), as MLD reports carry.
    pub fn router_alert() -> Self {
        ExtHeader::HopByHop(vec![5, 2, 0, 0])
    }

    /// Destination Options holding only padding.
    pub fn dest_opts() -> Self {
        ExtHeader::DestOpts(Vec::new())
    }

    /// An atomic fragment header (offset 0, M = 0) with identification `id`.
    pub fn atomic_fragment(id: u32) -> Self {
        ExtHeader::Fragment {
            offset: 0,
            more: false,
            id,
        }
    }

    /// The next-header value identifying this header.
    pub fn protocol(&self) -> u8 {
        match self {
            ExtHeader::HopByHop(_) => NH_HOP_BY_HOP,
            ExtHeader::DestOpts(_) => NH_DEST_OPTS,
            ExtHeader::Fragment { .. } => NH_FRAGMENT,
        }
    }

    /// The header's bytes, with `next` as its next-header field.
    pub fn encode(&self, next: u8) -> Vec<u8> {
        match self {
            ExtHeader::HopByHop(opts) | ExtHeader::DestOpts(opts) => {
                let mut h = vec![next, 0];
                h.extend_from_slice(opts);
                match (8 - h.len() % 8) % 8 {
                    0 => {}
                    1 => h.push(0),
                    pad => {
                        h.extend_from_slice(&[1, u8::try_from(pad - 2).unwrap_or(0)]);
                        h.resize(h.len() + pad - 2, 0);
                    }
                }
                h[1] = u8::try_from(h.len() / 8 - 1).unwrap_or(u8::MAX);
                h
            }
            ExtHeader::Fragment { offset, more, id } => {
                let off = ((offset & 0x1fff) << 3) | u16::from(*more);
                let mut h = vec![next, 0];
                h.extend_from_slice(&off.to_be_bytes());
                h.extend_from_slice(&id.to_be_bytes());
                h
            }
        }
    }
}

/// Addresses and extension headers of a forged IPv6 frame; every field may be forged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Frame {
    /// Ethernet source.
    pub src_mac: [u8; 6],
    /// Ethernet destination.
    pub dst_mac: [u8; 6],
    /// IP source.
    pub src_ip: Ipv6Addr,
    /// IP destination.
    pub dst_ip: Ipv6Addr,
    /// Hop limit.
    pub hop_limit: u8,
    /// Extension headers, in order, between the IPv6 header and the upper layer.
    pub ext: Vec<ExtHeader>,
}

impl Ipv6Frame {
    /// A frame from `src_mac`/`src_ip` to `dst_mac`/`dst_ip`, hop limit 64, no extension
    /// headers.
    pub fn new(src_mac: [u8; 6], dst_mac: [u8; 6], src_ip: Ipv6Addr, dst_ip: Ipv6Addr) -> Self {
        Ipv6Frame {
            src_mac,
            dst_mac,
            src_ip,
            dst_ip,
            hop_limit: 64,
            ext: Vec::new(),
        }
    }

    /// A frame to multicast group `group` (destination MAC derived from it).
    pub fn multicast(src_mac: [u8; 6], src_ip: Ipv6Addr, group: Ipv6Addr) -> Self {
        Self::new(src_mac, ipv6_multicast_mac(group), src_ip, group)
    }

    /// The same frame with `h` appended to the extension-header chain.
    pub fn with_ext(mut self, h: ExtHeader) -> Self {
        self.ext.push(h);
        self
    }

    /// The same frame with hop limit `hop_limit`.
    pub fn with_hop_limit(mut self, hop_limit: u8) -> Self {
        self.hop_limit = hop_limit;
        self
    }

    /// The frame carrying the extension headers then `l4` as next header `next`; `l4` is
    /// taken as is (its checksum is the caller's business).
    pub fn packet(&self, next: u8, l4: &[u8]) -> Vec<u8> {
        let mut chain = Vec::new();
        for (i, h) in self.ext.iter().enumerate() {
            let after = self.ext.get(i + 1).map_or(next, ExtHeader::protocol);
            chain.extend_from_slice(&h.encode(after));
        }
        let first = self.ext.first().map_or(next, ExtHeader::protocol);
        let mut ip = Vec::with_capacity(40 + chain.len() + l4.len());
        ip.extend_from_slice(&[0x60, 0, 0, 0]);
        ip.extend_from_slice(&be16(chain.len() + l4.len()));
        ip.extend_from_slice(&[first, self.hop_limit]);
        ip.extend_from_slice(&self.src_ip.octets());
        ip.extend_from_slice(&self.dst_ip.octets());
        ip.extend_from_slice(&chain);
        ip.extend_from_slice(l4);
        ethernet(self.dst_mac, self.src_mac, ETHERTYPE_IPV6, &ip)
    }

    /// A UDP datagram carrying `payload`, with its (mandatory) checksum.
    pub fn udp(&self, src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
        let mut u = udp_segment(src_port, dst_port, payload);
        let c = checksum_v6(self.src_ip, self.dst_ip, PROTO_UDP, &u);
        set_udp_checksum(&mut u, c);
        self.packet(PROTO_UDP, &u)
    }

    /// An ICMPv6 message of type `icmp_type`/`code` whose bytes after the 4-byte
    /// type/code/checksum header are `body`, with its checksum.
    pub fn icmpv6(&self, icmp_type: u8, code: u8, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::with_capacity(4 + body.len());
        m.extend_from_slice(&[icmp_type, code, 0, 0]);
        m.extend_from_slice(body);
        let c = checksum_v6(self.src_ip, self.dst_ip, PROTO_ICMPV6, &m);
        m[2..4].copy_from_slice(&c.to_be_bytes());
        self.packet(PROTO_ICMPV6, &m)
    }
}

/// A VXLAN payload (RFC 7348: flags with I set, 24-bit `vni`) wrapping `inner_frame`, to send
/// in a UDP datagram to [`VXLAN_PORT`] or [`VXLAN_LINUX_PORT`].
pub fn vxlan_payload(vni: u32, inner_frame: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(8 + inner_frame.len());
    p.extend_from_slice(&[0x08, 0, 0, 0]);
    p.extend_from_slice(&((vni & 0x00ff_ffff) << 8).to_be_bytes());
    p.extend_from_slice(inner_frame);
    p
}

/// A Geneve payload (RFC 8926: version 0, no options, protocol [`ETHERTYPE_TEB`], 24-bit
/// `vni`) wrapping `inner_frame`, to send in a UDP datagram to [`GENEVE_PORT`].
pub fn geneve_payload(vni: u32, inner_frame: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(8 + inner_frame.len());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(&ETHERTYPE_TEB.to_be_bytes());
    p.extend_from_slice(&((vni & 0x00ff_ffff) << 8).to_be_bytes());
    p.extend_from_slice(inner_frame);
    p
}

#[cfg(test)]
#[path = "forge_tests.rs"]
mod tests;
