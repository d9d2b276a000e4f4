//! Forged UDP frames for the anti-spoofing tests, next to the ARP frames and the raw send of
//! the production [`crate::raw`] module (re-exported here so the tests name one place).

use std::net::Ipv4Addr;

pub use crate::raw::{ARP_REQUEST, BROADCAST_MAC, arp_frame, gratuitous_arp, send_frame};

/// ARP reply opcode.
pub const ARP_REPLY: u16 = 2;

fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for c in data.chunks(2) {
        let word = u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]);
        sum += u32::from(word);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(u16::try_from(sum).unwrap_or(0xffff))
}

/// Addresses of a forged UDP frame.
#[derive(Debug, Clone, Copy)]
pub struct UdpFrame {
    /// Ethernet source (may be forged).
    pub src_mac: [u8; 6],
    /// Ethernet destination.
    pub dst_mac: [u8; 6],
    /// IP source (may be forged).
    pub src_ip: Ipv4Addr,
    /// IP destination.
    pub dst_ip: Ipv4Addr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
}

impl UdpFrame {
    /// The frame with `payload` (IPv4 header checksum set, UDP checksum 0 = none).
    pub fn encode(&self, payload: &[u8]) -> Vec<u8> {
        let udp_len = 8 + payload.len();
        let total = 20 + udp_len;
        let mut f = Vec::with_capacity(14 + total);
        f.extend_from_slice(&self.dst_mac);
        f.extend_from_slice(&self.src_mac);
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&u16::try_from(total).unwrap_or(u16::MAX).to_be_bytes());
        ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
        ip.extend_from_slice(&self.src_ip.octets());
        ip.extend_from_slice(&self.dst_ip.octets());
        let c = checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&self.src_port.to_be_bytes());
        f.extend_from_slice(&self.dst_port.to_be_bytes());
        f.extend_from_slice(&u16::try_from(udp_len).unwrap_or(u16::MAX).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(payload);
        if f.len() < 60 {
            f.resize(60, 0);
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_frame_has_a_valid_ip_checksum() {
        let f = UdpFrame {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: Ipv4Addr::new(10, 0, 1, 99),
            dst_ip: Ipv4Addr::new(10, 0, 1, 3),
            src_port: 4000,
            dst_port: 5000,
        }
        .encode(b"hi");
        assert_eq!(checksum(&f[14..34]), 0, "header checksums to zero");
        assert_eq!(&f[26..30], &[10, 0, 1, 99]);
        assert_eq!(&f[34..36], &4000u16.to_be_bytes());
        assert_eq!(&f[42..44], b"hi");
    }
}
