//! DHCPv4 messages (RFC 2131 / 2132 / 3442): encoding of the client's DISCOVER, REQUEST and
//! RELEASE, decoding of the server's OFFER, ACK and NAK. Pure functions, so the wire format is
//! unit-tested without privileges.

use std::net::Ipv4Addr;

/// UDP port DHCP servers listen on.
pub const SERVER_PORT: u16 = 67;
/// UDP port DHCP clients listen on.
pub const CLIENT_PORT: u16 = 68;

const MAGIC: [u8; 4] = [99, 130, 83, 99];
const FIXED_LEN: usize = 236;
/// "Please broadcast your reply": we may have no address yet.
const FLAG_BROADCAST: u16 = 0x8000;

const OPT_PAD: u8 = 0;
const OPT_SUBNET_MASK: u8 = 1;
const OPT_ROUTER: u8 = 3;
const OPT_DNS: u8 = 6;
const OPT_HOSTNAME: u8 = 12;
const OPT_MTU: u8 = 26;
const OPT_REQUESTED_IP: u8 = 50;
const OPT_LEASE_TIME: u8 = 51;
const OPT_MESSAGE_TYPE: u8 = 53;
const OPT_SERVER_ID: u8 = 54;
const OPT_PARAMS: u8 = 55;
const OPT_MAX_SIZE: u8 = 57;
const OPT_RENEWAL: u8 = 58;
const OPT_REBINDING: u8 = 59;
const OPT_CLIENT_ID: u8 = 61;
const OPT_CLASSLESS_ROUTES: u8 = 121;
const OPT_END: u8 = 255;

/// DHCP message types (option 53).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageType {
    /// Client looks for servers.
    Discover = 1,
    /// Server offers an address.
    Offer = 2,
    /// Client asks for (or renews) an address.
    Request = 3,
    /// Client found the address in use.
    Decline = 4,
    /// Server confirms.
    Ack = 5,
    /// Server refuses.
    Nak = 6,
    /// Client gives the address back.
    Release = 7,
    /// Client asks for parameters only.
    Inform = 8,
}

impl MessageType {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => Self::Discover,
            2 => Self::Offer,
            3 => Self::Request,
            4 => Self::Decline,
            5 => Self::Ack,
            6 => Self::Nak,
            7 => Self::Release,
            8 => Self::Inform,
            _ => return None,
        })
    }
}

/// Why a received datagram is not a DHCP reply we can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Shorter than the fixed header plus the magic cookie.
    #[error("datagram of {0} bytes is too short for DHCP")]
    TooShort(usize),
    /// Not a BOOTREPLY for Ethernet.
    #[error("not a BOOTREPLY for Ethernet")]
    NotReply,
    /// Missing magic cookie.
    #[error("missing DHCP magic cookie")]
    NoMagic,
    /// An option runs past the end.
    #[error("option {0} is truncated")]
    Truncated(u8),
    /// No or unknown message type.
    #[error("missing or unknown DHCP message type")]
    NoMessageType,
}

/// A route from option 121: destination prefix and gateway (0.0.0.0 = on-link).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Destination network address.
    pub destination: Ipv4Addr,
    /// Destination prefix length.
    pub prefix_len: u8,
    /// Next hop; unspecified means directly connected.
    pub gateway: Ipv4Addr,
}

/// A server reply (OFFER, ACK or NAK) with the options a machine applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// OFFER, ACK or NAK.
    pub message_type: MessageType,
    /// Transaction id, matched against the request.
    pub xid: u32,
    /// Hardware address the reply is for.
    pub chaddr: [u8; 6],
    /// "Your" address.
    pub yiaddr: Ipv4Addr,
    /// Option 54.
    pub server_id: Option<Ipv4Addr>,
    /// Prefix length from option 1.
    pub prefix_len: Option<u8>,
    /// Option 3 (only sent to primary interfaces by our fabric).
    pub routers: Vec<Ipv4Addr>,
    /// Option 6.
    pub dns: Vec<Ipv4Addr>,
    /// Option 26.
    pub mtu: Option<u16>,
    /// Option 51, seconds (`u32::MAX` = infinite).
    pub lease_seconds: Option<u32>,
    /// Option 58, seconds.
    pub renewal_seconds: Option<u32>,
    /// Option 59, seconds.
    pub rebinding_seconds: Option<u32>,
    /// Option 121 (takes precedence over routers when present, RFC 3442).
    pub classless_routes: Vec<Route>,
}

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// DISCOVER, REQUEST or RELEASE.
    pub message_type: MessageType,
    /// Transaction id.
    pub xid: u32,
    /// Seconds since the client started trying.
    pub secs: u16,
    /// Our MAC.
    pub chaddr: [u8; 6],
    /// Our current address (renewing, release), else unspecified.
    pub ciaddr: Ipv4Addr,
    /// Option 50 (selecting / init-reboot).
    pub requested_ip: Option<Ipv4Addr>,
    /// Option 54 (selecting, release).
    pub server_id: Option<Ipv4Addr>,
    /// Option 12.
    pub hostname: Option<String>,
}

impl Request {
    /// Encodes the message (BOOTREQUEST, broadcast flag set, client id = 1 + MAC).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; FIXED_LEN];
        b[0] = 1; // BOOTREQUEST
        b[1] = 1; // Ethernet
        b[2] = 6;
        b[4..8].copy_from_slice(&self.xid.to_be_bytes());
        b[8..10].copy_from_slice(&self.secs.to_be_bytes());
        let flags = if self.message_type == MessageType::Release {
            0
        } else {
            FLAG_BROADCAST
        };
        b[10..12].copy_from_slice(&flags.to_be_bytes());
        b[12..16].copy_from_slice(&self.ciaddr.octets());
        b[28..34].copy_from_slice(&self.chaddr);
        b.extend_from_slice(&MAGIC);
        push_opt(&mut b, OPT_MESSAGE_TYPE, &[self.message_type as u8]);
        let mut client_id = vec![1u8];
        client_id.extend_from_slice(&self.chaddr);
        push_opt(&mut b, OPT_CLIENT_ID, &client_id);
        if let Some(ip) = self.requested_ip {
            push_opt(&mut b, OPT_REQUESTED_IP, &ip.octets());
        }
        if let Some(ip) = self.server_id {
            push_opt(&mut b, OPT_SERVER_ID, &ip.octets());
        }
        if self.message_type != MessageType::Release {
            push_opt(&mut b, OPT_MAX_SIZE, &1500u16.to_be_bytes());
            push_opt(
                &mut b,
                OPT_PARAMS,
                &[
                    OPT_SUBNET_MASK,
                    OPT_CLASSLESS_ROUTES,
                    OPT_ROUTER,
                    OPT_DNS,
                    OPT_MTU,
                    OPT_LEASE_TIME,
                    OPT_RENEWAL,
                    OPT_REBINDING,
                ],
            );
            if let Some(h) = &self.hostname {
                let bytes = h.as_bytes();
                push_opt(&mut b, OPT_HOSTNAME, &bytes[..bytes.len().min(255)]);
            }
        }
        b.push(OPT_END);
        // Some relays drop BOOTP messages shorter than 300 bytes.
        if b.len() < 300 {
            b.resize(300, OPT_PAD);
        }
        b
    }
}

fn push_opt(b: &mut Vec<u8>, code: u8, data: &[u8]) {
    b.push(code);
    b.push(u8::try_from(data.len()).unwrap_or(u8::MAX));
    b.extend_from_slice(&data[..data.len().min(255)]);
}

fn ip_at(d: &[u8], i: usize) -> Option<Ipv4Addr> {
    d.get(i..i + 4)
        .map(|s| Ipv4Addr::new(s[0], s[1], s[2], s[3]))
}

fn ips(d: &[u8]) -> Vec<Ipv4Addr> {
    d.chunks_exact(4)
        .map(|s| Ipv4Addr::new(s[0], s[1], s[2], s[3]))
        .collect()
}

fn u32_of(d: &[u8]) -> Option<u32> {
    d.get(..4)
        .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// Prefix length of a contiguous netmask (None for a non-contiguous one).
pub fn mask_to_prefix(mask: Ipv4Addr) -> Option<u8> {
    let m = u32::from(mask);
    let len = m.leading_ones();
    (m.checked_shl(len).unwrap_or(0) == 0).then(|| u8::try_from(len).unwrap_or(32))
}

/// Decodes option 121: (width, significant destination octets, gateway) entries.
pub fn decode_classless_routes(d: &[u8]) -> Vec<Route> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < d.len() {
        let width = d[i];
        if width > 32 {
            break;
        }
        let n = usize::from(width).div_ceil(8);
        let Some(dest) = d.get(i + 1..i + 1 + n) else {
            break;
        };
        let mut octets = [0u8; 4];
        octets[..n].copy_from_slice(dest);
        let Some(gateway) = ip_at(d, i + 1 + n) else {
            break;
        };
        out.push(Route {
            destination: Ipv4Addr::from(octets),
            prefix_len: width,
            gateway,
        });
        i += 1 + n + 4;
    }
    out
}

/// Encodes option 121 (servers and tests).
pub fn encode_classless_routes(routes: &[Route]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in routes {
        let n = usize::from(r.prefix_len).div_ceil(8);
        out.push(r.prefix_len);
        out.extend_from_slice(&r.destination.octets()[..n]);
        out.extend_from_slice(&r.gateway.octets());
    }
    out
}

impl Reply {
    /// Decodes a server reply.
    pub fn decode(b: &[u8]) -> Result<Reply, DecodeError> {
        if b.len() < FIXED_LEN + MAGIC.len() {
            return Err(DecodeError::TooShort(b.len()));
        }
        if b[0] != 2 || b[1] != 1 || b[2] != 6 {
            return Err(DecodeError::NotReply);
        }
        if b[FIXED_LEN..FIXED_LEN + 4] != MAGIC {
            return Err(DecodeError::NoMagic);
        }
        let mut chaddr = [0u8; 6];
        chaddr.copy_from_slice(&b[28..34]);
        let mut reply = Reply {
            message_type: MessageType::Nak,
            xid: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            chaddr,
            yiaddr: Ipv4Addr::new(b[16], b[17], b[18], b[19]),
            server_id: None,
            prefix_len: None,
            routers: Vec::new(),
            dns: Vec::new(),
            mtu: None,
            lease_seconds: None,
            renewal_seconds: None,
            rebinding_seconds: None,
            classless_routes: Vec::new(),
        };
        let mut message_type = None;
        let mut i = FIXED_LEN + 4;
        while i < b.len() {
            let code = b[i];
            if code == OPT_PAD {
                i += 1;
                continue;
            }
            if code == OPT_END {
                break;
            }
            let len = usize::from(*b.get(i + 1).ok_or(DecodeError::Truncated(code))?);
            let d = b
                .get(i + 2..i + 2 + len)
                .ok_or(DecodeError::Truncated(code))?;
            match code {
                OPT_MESSAGE_TYPE => message_type = d.first().and_then(|v| MessageType::from_u8(*v)),
                OPT_SUBNET_MASK => reply.prefix_len = ip_at(d, 0).and_then(mask_to_prefix),
                OPT_ROUTER => reply.routers = ips(d),
                OPT_DNS => reply.dns = ips(d),
                OPT_MTU if d.len() >= 2 => reply.mtu = Some(u16::from_be_bytes([d[0], d[1]])),
                OPT_LEASE_TIME => reply.lease_seconds = u32_of(d),
                OPT_RENEWAL => reply.renewal_seconds = u32_of(d),
                OPT_REBINDING => reply.rebinding_seconds = u32_of(d),
                OPT_SERVER_ID => reply.server_id = ip_at(d, 0),
                OPT_CLASSLESS_ROUTES => reply.classless_routes = decode_classless_routes(d),
                _ => {}
            }
            i += 2 + len;
        }
        reply.message_type = message_type.ok_or(DecodeError::NoMessageType)?;
        Ok(reply)
    }
}

/// The octets of an interface MAC (`aa:bb:cc:dd:ee:ff`), read by the one MAC rule of
/// [`osac_backends::MacAddress`]; None when the text breaks it.
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    text.parse::<osac_backends::MacAddress>()
        .ok()
        .map(|m| m.octets())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];

    /// Builds a server reply the way dnsmasq lays it out.
    fn reply_bytes(kind: MessageType, options: &[(u8, Vec<u8>)]) -> Vec<u8> {
        let mut b = vec![0u8; FIXED_LEN];
        b[0] = 2;
        b[1] = 1;
        b[2] = 6;
        b[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes());
        b[16..20].copy_from_slice(&[10, 0, 1, 5]);
        b[28..34].copy_from_slice(&MAC);
        b.extend_from_slice(&MAGIC);
        push_opt(&mut b, OPT_MESSAGE_TYPE, &[kind as u8]);
        for (c, d) in options {
            push_opt(&mut b, *c, d);
        }
        b.push(OPT_END);
        b
    }

    #[test]
    fn discover_is_a_broadcast_bootrequest_with_our_mac() {
        let r = Request {
            message_type: MessageType::Discover,
            xid: 7,
            secs: 0,
            chaddr: MAC,
            ciaddr: Ipv4Addr::UNSPECIFIED,
            requested_ip: None,
            server_id: None,
            hostname: Some("vm1".into()),
        };
        let b = r.encode();
        assert!(b.len() >= 300);
        assert_eq!(b[0], 1);
        assert_eq!(&b[4..8], &7u32.to_be_bytes());
        assert_eq!(&b[10..12], &FLAG_BROADCAST.to_be_bytes());
        assert_eq!(&b[28..34], &MAC);
        assert_eq!(&b[FIXED_LEN..FIXED_LEN + 4], &MAGIC);
        assert_eq!(&b[FIXED_LEN + 4..FIXED_LEN + 7], &[OPT_MESSAGE_TYPE, 1, 1]);
        assert!(b.windows(3).any(|w| w == [OPT_HOSTNAME, 3, b'v']));
    }

    #[test]
    fn request_in_selecting_carries_requested_ip_and_server() {
        let r = Request {
            message_type: MessageType::Request,
            xid: 9,
            secs: 1,
            chaddr: MAC,
            ciaddr: Ipv4Addr::UNSPECIFIED,
            requested_ip: Some(Ipv4Addr::new(10, 0, 1, 5)),
            server_id: Some(Ipv4Addr::new(10, 0, 1, 1)),
            hostname: None,
        };
        let b = r.encode();
        assert!(
            b.windows(6)
                .any(|w| w == [OPT_REQUESTED_IP, 4, 10, 0, 1, 5])
        );
        assert!(b.windows(6).any(|w| w == [OPT_SERVER_ID, 4, 10, 0, 1, 1]));
        assert!(b.windows(3).any(|w| w == [OPT_MESSAGE_TYPE, 1, 3]));
    }

    #[test]
    fn ack_options_decode() {
        let routes = vec![
            Route {
                destination: Ipv4Addr::new(10, 1, 0, 0),
                prefix_len: 16,
                gateway: Ipv4Addr::new(10, 0, 1, 254),
            },
            Route {
                destination: Ipv4Addr::UNSPECIFIED,
                prefix_len: 0,
                gateway: Ipv4Addr::new(10, 0, 1, 1),
            },
        ];
        let b = reply_bytes(
            MessageType::Ack,
            &[
                (OPT_SUBNET_MASK, vec![255, 255, 255, 0]),
                (OPT_ROUTER, vec![10, 0, 1, 1]),
                (OPT_DNS, vec![10, 0, 1, 1, 8, 8, 8, 8]),
                (OPT_MTU, 1450u16.to_be_bytes().to_vec()),
                (OPT_LEASE_TIME, 3600u32.to_be_bytes().to_vec()),
                (OPT_SERVER_ID, vec![10, 0, 1, 1]),
                (OPT_CLASSLESS_ROUTES, encode_classless_routes(&routes)),
            ],
        );
        let r = Reply::decode(&b).unwrap();
        assert_eq!(r.message_type, MessageType::Ack);
        assert_eq!(r.xid, 0x1234_5678);
        assert_eq!(r.chaddr, MAC);
        assert_eq!(r.yiaddr, Ipv4Addr::new(10, 0, 1, 5));
        assert_eq!(r.prefix_len, Some(24));
        assert_eq!(r.routers, vec![Ipv4Addr::new(10, 0, 1, 1)]);
        assert_eq!(r.dns.len(), 2);
        assert_eq!(r.mtu, Some(1450));
        assert_eq!(r.lease_seconds, Some(3600));
        assert_eq!(r.server_id, Some(Ipv4Addr::new(10, 0, 1, 1)));
        assert_eq!(r.classless_routes, routes);
    }

    #[test]
    fn reply_without_router_has_none() {
        let b = reply_bytes(
            MessageType::Offer,
            &[(OPT_SUBNET_MASK, vec![255, 255, 0, 0])],
        );
        let r = Reply::decode(&b).unwrap();
        assert_eq!(r.message_type, MessageType::Offer);
        assert!(r.routers.is_empty());
        assert_eq!(r.prefix_len, Some(16));
    }

    #[test]
    fn bad_datagrams_are_rejected() {
        assert_eq!(Reply::decode(&[0; 10]), Err(DecodeError::TooShort(10)));
        let mut b = reply_bytes(MessageType::Ack, &[]);
        b[0] = 1;
        assert_eq!(Reply::decode(&b), Err(DecodeError::NotReply));
        let mut b = reply_bytes(MessageType::Ack, &[]);
        b[FIXED_LEN] = 0;
        assert_eq!(Reply::decode(&b), Err(DecodeError::NoMagic));
        let mut b = reply_bytes(MessageType::Ack, &[]);
        b.pop();
        b.extend_from_slice(&[OPT_ROUTER, 8, 10, 0]);
        assert_eq!(Reply::decode(&b), Err(DecodeError::Truncated(OPT_ROUTER)));
        let mut b = reply_bytes(MessageType::Ack, &[]);
        b[FIXED_LEN + 6] = 99;
        assert_eq!(Reply::decode(&b), Err(DecodeError::NoMessageType));
    }

    #[test]
    fn masks_and_macs() {
        assert_eq!(mask_to_prefix(Ipv4Addr::new(255, 255, 255, 0)), Some(24));
        assert_eq!(mask_to_prefix(Ipv4Addr::new(255, 255, 255, 255)), Some(32));
        assert_eq!(mask_to_prefix(Ipv4Addr::UNSPECIFIED), Some(0));
        assert_eq!(mask_to_prefix(Ipv4Addr::new(255, 0, 255, 0)), None);
        assert_eq!(parse_mac("02:00:00:00:00:01"), Some(MAC));
        assert_eq!(parse_mac("02:00:00:00:00"), None);
        assert_eq!(parse_mac("02:00:00:00:00:01:02"), None);
        assert_eq!(parse_mac("zz:00:00:00:00:01"), None);
    }
}
