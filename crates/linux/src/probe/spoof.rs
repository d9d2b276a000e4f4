//! Forged control-plane messages a hostile workload could send: IPv6 Router and Neighbour
//! Advertisements (optionally behind extension headers), DHCPv6 Advertise/Reply and DHCPv4
//! OFFER/ACK from the server ports. Each can carry a marker (an ND experimental option, a
//! DHCPv6 vendor option, a DHCPv4 private option) so a capture can recognise it.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::forge::{ExtHeader, Ipv4Frame, Ipv6Frame};

/// ICMPv6 type of a Router Advertisement.
pub const ICMPV6_ROUTER_ADVERT: u8 = 134;
/// ICMPv6 type of a Neighbour Advertisement.
pub const ICMPV6_NEIGHBOUR_ADVERT: u8 = 136;
/// ND option type of the markers (RFC 4727 experimental; receivers ignore it).
pub const ND_OPT_MARKER: u8 = 253;
/// All-nodes multicast group.
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
/// DHCPv6 server/relay UDP port.
pub const DHCPV6_SERVER_PORT: u16 = 547;
/// DHCPv6 client UDP port.
pub const DHCPV6_CLIENT_PORT: u16 = 546;
/// DHCPv6 Advertise message type.
pub const DHCPV6_ADVERTISE: u8 = 2;
/// DHCPv6 Reply message type.
pub const DHCPV6_REPLY: u8 = 7;
/// DHCPv4 server UDP port.
pub const DHCP_SERVER_PORT: u16 = 67;
/// DHCPv4 client UDP port.
pub const DHCP_CLIENT_PORT: u16 = 68;
/// DHCPv4 OFFER (option 53 value).
pub const DHCPOFFER: u8 = 2;
/// DHCPv4 ACK (option 53 value).
pub const DHCPACK: u8 = 5;
/// Enterprise number used in the DHCPv6 marker option (RFC 5612 documentation number).
pub const MARKER_ENTERPRISE: u32 = 32473;

/// An ND option: type, length in 8-byte units, `data` zero-padded.
fn nd_option(kind: u8, data: &[u8]) -> Vec<u8> {
    let mut o = vec![kind, 0];
    o.extend_from_slice(data);
    o.resize(o.len().div_ceil(8) * 8, 0);
    o[1] = u8::try_from(o.len() / 8).unwrap_or(u8::MAX);
    o
}

/// The marker ND option, or nothing for an empty marker.
fn marker_option(marker: &[u8]) -> Vec<u8> {
    if marker.is_empty() {
        Vec::new()
    } else {
        nd_option(ND_OPT_MARKER, marker)
    }
}

/// A Prefix Information option of a Router Advertisement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixInfo {
    /// The prefix (host bits are sent as given).
    pub prefix: Ipv6Addr,
    /// Prefix length.
    pub len: u8,
    /// The L (on-link) flag.
    pub on_link: bool,
    /// The A (autonomous address configuration, SLAAC) flag.
    pub autonomous: bool,
    /// Valid lifetime, seconds.
    pub valid: u32,
    /// Preferred lifetime, seconds.
    pub preferred: u32,
}

impl PrefixInfo {
    /// An on-link SLAAC prefix (L and A set, valid 1 day, preferred 4 hours).
    pub fn slaac(prefix: Ipv6Addr, len: u8) -> Self {
        PrefixInfo {
            prefix,
            len,
            on_link: true,
            autonomous: true,
            valid: 86_400,
            preferred: 14_400,
        }
    }

    fn encode(&self) -> Vec<u8> {
        let flags = (u8::from(self.on_link) << 7) | (u8::from(self.autonomous) << 6);
        let mut d = vec![self.len, flags];
        d.extend_from_slice(&self.valid.to_be_bytes());
        d.extend_from_slice(&self.preferred.to_be_bytes());
        d.extend_from_slice(&[0; 4]);
        d.extend_from_slice(&self.prefix.octets());
        nd_option(3, &d)
    }
}

/// A Router Advertisement from `src_mac`/`src_ip` to all nodes (ff02::1), hop limit 255,
/// with the prefixes, a source link-layer address option and the marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterAdvert {
    /// Ethernet source, also sent as the source link-layer address option.
    pub src_mac: [u8; 6],
    /// IP source (a link-local address for a valid RA).
    pub src_ip: Ipv6Addr,
    /// Router lifetime, seconds (0: not a default router).
    pub router_lifetime: u16,
    /// The M (managed, use DHCPv6) flag.
    pub managed: bool,
    /// The O (other configuration) flag.
    pub other: bool,
    /// Prefix Information options.
    pub prefixes: Vec<PrefixInfo>,
    /// Extension headers before the ICMPv6 header.
    pub ext: Vec<ExtHeader>,
    /// Bytes carried in an [`ND_OPT_MARKER`] option (none if empty).
    pub marker: Vec<u8>,
}

impl RouterAdvert {
    /// A default-router RA (lifetime 1800 s) announcing one SLAAC prefix.
    pub fn new(src_mac: [u8; 6], src_ip: Ipv6Addr, prefix: Ipv6Addr, len: u8) -> Self {
        RouterAdvert {
            src_mac,
            src_ip,
            router_lifetime: 1800,
            managed: false,
            other: false,
            prefixes: vec![PrefixInfo::slaac(prefix, len)],
            ext: Vec::new(),
            marker: Vec::new(),
        }
    }

    /// The Ethernet frame.
    pub fn encode(&self) -> Vec<u8> {
        let flags = (u8::from(self.managed) << 7) | (u8::from(self.other) << 6);
        // Current hop limit 64, flags, router lifetime, reachable time, retrans timer (0).
        let mut body = vec![64, flags];
        body.extend_from_slice(&self.router_lifetime.to_be_bytes());
        body.extend_from_slice(&[0; 8]);
        for p in &self.prefixes {
            body.extend_from_slice(&p.encode());
        }
        body.extend_from_slice(&nd_option(1, &self.src_mac));
        body.extend_from_slice(&marker_option(&self.marker));
        let mut ip = Ipv6Frame::multicast(self.src_mac, self.src_ip, ALL_NODES).with_hop_limit(255);
        ip.ext.clone_from(&self.ext);
        ip.icmpv6(ICMPV6_ROUTER_ADVERT, 0, &body)
    }
}

/// A Neighbour Advertisement (hop limit 255) claiming `target` is at `target_mac`, with a
/// target link-layer address option and the marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeighbourAdvert {
    /// Ethernet source.
    pub src_mac: [u8; 6],
    /// Ethernet destination.
    pub dst_mac: [u8; 6],
    /// IP source.
    pub src_ip: Ipv6Addr,
    /// IP destination.
    pub dst_ip: Ipv6Addr,
    /// The address advertised.
    pub target: Ipv6Addr,
    /// The link-layer address claimed for it.
    pub target_mac: [u8; 6],
    /// The R (router) flag.
    pub router: bool,
    /// The S (solicited) flag.
    pub solicited: bool,
    /// The O (override) flag.
    pub override_flag: bool,
    /// Extension headers before the ICMPv6 header.
    pub ext: Vec<ExtHeader>,
    /// Bytes carried in an [`ND_OPT_MARKER`] option (none if empty).
    pub marker: Vec<u8>,
}

impl NeighbourAdvert {
    /// An unsolicited, overriding NA from `mac`/`src_ip` to all nodes claiming `target` is at
    /// `mac` (`src_ip == target` for a plain announcement).
    pub fn unsolicited(mac: [u8; 6], src_ip: Ipv6Addr, target: Ipv6Addr) -> Self {
        NeighbourAdvert {
            src_mac: mac,
            dst_mac: super::forge::ipv6_multicast_mac(ALL_NODES),
            src_ip,
            dst_ip: ALL_NODES,
            target,
            target_mac: mac,
            router: false,
            solicited: false,
            override_flag: true,
            ext: Vec::new(),
            marker: Vec::new(),
        }
    }

    /// The Ethernet frame.
    pub fn encode(&self) -> Vec<u8> {
        let flags = (u8::from(self.router) << 7)
            | (u8::from(self.solicited) << 6)
            | (u8::from(self.override_flag) << 5);
        let mut body = vec![flags, 0, 0, 0];
        body.extend_from_slice(&self.target.octets());
        body.extend_from_slice(&nd_option(2, &self.target_mac));
        body.extend_from_slice(&marker_option(&self.marker));
        let mut ip = Ipv6Frame::new(self.src_mac, self.dst_mac, self.src_ip, self.dst_ip)
            .with_hop_limit(255);
        ip.ext.clone_from(&self.ext);
        ip.icmpv6(ICMPV6_NEIGHBOUR_ADVERT, 0, &body)
    }
}

/// A DHCPv6 option: code, length, data.
fn dhcpv6_option(code: u16, data: &[u8]) -> Vec<u8> {
    let mut o = code.to_be_bytes().to_vec();
    o.extend_from_slice(&u16::try_from(data.len()).unwrap_or(u16::MAX).to_be_bytes());
    o.extend_from_slice(data);
    o
}

/// A DHCPv6 server message (UDP payload): `msg_type` ([`DHCPV6_ADVERTISE`],
/// [`DHCPV6_REPLY`]), 24-bit transaction id `xid`, a Server Identifier (DUID-LL of
/// `server_mac`), and, if `marker` is not empty, a Vendor-specific Information option
/// (enterprise [`MARKER_ENTERPRISE`], sub-option 1 = marker).
pub fn dhcpv6_server_message(
    msg_type: u8,
    xid: u32,
    server_mac: [u8; 6],
    marker: &[u8],
) -> Vec<u8> {
    let mut m = vec![msg_type];
    m.extend_from_slice(&xid.to_be_bytes()[1..]);
    let mut duid = vec![0, 3, 0, 1];
    duid.extend_from_slice(&server_mac);
    m.extend_from_slice(&dhcpv6_option(2, &duid));
    if !marker.is_empty() {
        let mut vendor = MARKER_ENTERPRISE.to_be_bytes().to_vec();
        vendor.extend_from_slice(&dhcpv6_option(1, marker));
        m.extend_from_slice(&dhcpv6_option(17, &vendor));
    }
    m
}

/// The frame of [`dhcpv6_server_message`] sent by `ip` (server DUID from `ip.src_mac`) from
/// UDP 547 to 546, behind `ip.ext` if any.
pub fn dhcpv6_server_frame(ip: &Ipv6Frame, msg_type: u8, xid: u32, marker: &[u8]) -> Vec<u8> {
    let m = dhcpv6_server_message(msg_type, xid, ip.src_mac, marker);
    ip.udp(DHCPV6_SERVER_PORT, DHCPV6_CLIENT_PORT, &m)
}

/// A DHCPv4 server reply (BOOTREPLY): OFFER or ACK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dhcp4Reply {
    /// [`DHCPOFFER`] or [`DHCPACK`] (option 53).
    pub msg_type: u8,
    /// Transaction id.
    pub xid: u32,
    /// The client hardware address (chaddr).
    pub client_mac: [u8; 6],
    /// The address offered (yiaddr).
    pub your_ip: Ipv4Addr,
    /// The server identifier (siaddr and option 54).
    pub server_ip: Ipv4Addr,
    /// Subnet mask (option 1).
    pub subnet_mask: Ipv4Addr,
    /// Router (option 3), if any.
    pub router: Option<Ipv4Addr>,
    /// Lease time, seconds (option 51).
    pub lease_secs: u32,
    /// Bytes carried in private option 224 (split across repeated options past 255 bytes;
    /// none if empty).
    pub marker: Vec<u8>,
}

impl Dhcp4Reply {
    /// A reply of `msg_type` offering `your_ip`/24 to `client_mac`, with `server_ip` as server
    /// and router, lease one hour, no marker.
    pub fn new(
        msg_type: u8,
        xid: u32,
        client_mac: [u8; 6],
        your_ip: Ipv4Addr,
        server_ip: Ipv4Addr,
    ) -> Self {
        Dhcp4Reply {
            msg_type,
            xid,
            client_mac,
            your_ip,
            server_ip,
            subnet_mask: Ipv4Addr::new(255, 255, 255, 0),
            router: Some(server_ip),
            lease_secs: 3600,
            marker: Vec::new(),
        }
    }

    /// The UDP payload: BOOTP header (broadcast flag set), magic cookie, options, end, padded
    /// to the 300-byte BOOTP minimum.
    pub fn payload(&self) -> Vec<u8> {
        let mut p = vec![2, 1, 6, 0];
        p.extend_from_slice(&self.xid.to_be_bytes());
        p.extend_from_slice(&[0, 0, 0x80, 0]);
        p.extend_from_slice(&[0; 4]);
        p.extend_from_slice(&self.your_ip.octets());
        p.extend_from_slice(&self.server_ip.octets());
        p.extend_from_slice(&[0; 4]);
        p.extend_from_slice(&self.client_mac);
        p.resize(p.len() + 10 + 64 + 128, 0);
        p.extend_from_slice(&[99, 130, 83, 99]);
        p.extend_from_slice(&[53, 1, self.msg_type, 54, 4]);
        p.extend_from_slice(&self.server_ip.octets());
        p.extend_from_slice(&[51, 4]);
        p.extend_from_slice(&self.lease_secs.to_be_bytes());
        p.extend_from_slice(&[1, 4]);
        p.extend_from_slice(&self.subnet_mask.octets());
        if let Some(r) = self.router {
            p.extend_from_slice(&[3, 4]);
            p.extend_from_slice(&r.octets());
        }
        for chunk in self.marker.chunks(255) {
            p.extend_from_slice(&[224, u8::try_from(chunk.len()).unwrap_or(u8::MAX)]);
            p.extend_from_slice(chunk);
        }
        p.push(255);
        if p.len() < 300 {
            p.resize(300, 0);
        }
        p
    }

    /// The frame sent by `ip` from UDP 67 to 68.
    pub fn frame(&self, ip: &Ipv4Frame) -> Vec<u8> {
        ip.udp(DHCP_SERVER_PORT, DHCP_CLIENT_PORT, &self.payload())
    }
}

#[cfg(test)]
#[path = "spoof_tests.rs"]
mod tests;
