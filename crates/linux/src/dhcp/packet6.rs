//! DHCPv6 messages (RFC 8415 subset): encoding of the client's Solicit, Request, Renew and
//! Release for one IA_NA, decoding of the server's Advertise and Reply. Hand-written (the
//! subset is a dozen fields; a full DHCP crate would cost more to build than this file) and
//! pure, so the wire format is unit-tested without privileges.
//!
//! The client id is a DUID-LL (type 3) built from the interface MAC: dnsmasq then finds the
//! port's `dhcp-host` entry by MAC (it learns the MAC of a directly connected client from the
//! neighbour table of the Solicit's link-local source, which is the same interface).

use std::net::Ipv6Addr;

/// UDP port DHCPv6 clients listen on.
pub const CLIENT_PORT: u16 = 546;
/// UDP port DHCPv6 servers and relays listen on.
pub const SERVER_PORT: u16 = 547;
/// All_DHCP_Relay_Agents_and_Servers (link-scoped multicast).
pub const ALL_SERVERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 1, 2);

const OPT_CLIENTID: u16 = 1;
const OPT_SERVERID: u16 = 2;
const OPT_IA_NA: u16 = 3;
const OPT_IAADDR: u16 = 5;
const OPT_ORO: u16 = 6;
const OPT_PREFERENCE: u16 = 7;
const OPT_ELAPSED_TIME: u16 = 8;
const OPT_STATUS_CODE: u16 = 13;
const OPT_DNS_SERVERS: u16 = 23;
const OPT_SOL_MAX_RT: u16 = 82;

/// DUID type 3: link-layer address.
const DUID_LL: u16 = 3;
/// Hardware type 1: Ethernet.
const HW_ETHERNET: u16 = 1;

/// DHCPv6 message types this client sends or understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageType {
    /// Client looks for servers.
    Solicit = 1,
    /// Server offers addresses.
    Advertise = 2,
    /// Client asks the chosen server for the addresses.
    Request = 3,
    /// Client extends the lifetimes with the server that granted them.
    Renew = 5,
    /// Client extends the lifetimes with any server.
    Rebind = 6,
    /// Server answers Request, Renew, Rebind or Release.
    Reply = 7,
    /// Client gives addresses back.
    Release = 8,
}

impl MessageType {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => Self::Solicit,
            2 => Self::Advertise,
            3 => Self::Request,
            5 => Self::Renew,
            6 => Self::Rebind,
            7 => Self::Reply,
            8 => Self::Release,
            _ => return None,
        })
    }
}

/// Status codes (RFC 8415 §21.13) the client acts on.
pub mod status {
    /// Success (also what an absent status option means).
    pub const SUCCESS: u16 = 0;
    /// The server has no addresses for this client.
    pub const NO_ADDRS_AVAIL: u16 = 2;
    /// The server has no binding for the IA (Renew after the port moved).
    pub const NO_BINDING: u16 = 3;
    /// The addresses are not appropriate for the link.
    pub const NOT_ON_LINK: u16 = 4;
}

/// Why a received datagram is not a server message we can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Shorter than the 4-byte header.
    #[error("datagram of {0} bytes is too short for DHCPv6")]
    TooShort(usize),
    /// Not an Advertise or a Reply.
    #[error("DHCPv6 message type {0} is not a server reply")]
    NotFromServer(u8),
    /// An option runs past the end of its container.
    #[error("DHCPv6 option {0} is truncated")]
    Truncated(u16),
}

/// A Status Code option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusCode {
    /// See [`status`].
    pub code: u16,
    /// The server's text.
    pub message: String,
}

/// An IA Address option: one leased address with its lifetimes (seconds, `u32::MAX` =
/// infinite).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IaAddress {
    /// The address.
    pub address: Ipv6Addr,
    /// Preferred lifetime.
    pub preferred: u32,
    /// Valid lifetime (0: the server withdraws the address).
    pub valid: u32,
    /// A per-address status, if the server sent one.
    pub status: Option<StatusCode>,
}

/// An IA_NA option of a server message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IaNa {
    /// Identity association id (ours).
    pub iaid: u32,
    /// Renew after this many seconds (0: the client chooses).
    pub t1: u32,
    /// Rebind after this many seconds (0: the client chooses).
    pub t2: u32,
    /// The addresses of the IA.
    pub addresses: Vec<IaAddress>,
    /// The IA's status, if the server sent one.
    pub status: Option<StatusCode>,
}

impl IaNa {
    /// The status code of the IA (absent = success).
    pub fn status_code(&self) -> u16 {
        self.status.as_ref().map_or(status::SUCCESS, |s| s.code)
    }

    /// The first address the server actually grants (valid lifetime > 0, no error status).
    pub fn granted(&self) -> Option<&IaAddress> {
        if self.status_code() != status::SUCCESS {
            return None;
        }
        self.addresses
            .iter()
            .find(|a| a.valid > 0 && a.status.as_ref().is_none_or(|s| s.code == status::SUCCESS))
    }
}

/// What the client sends: one IA_NA, optionally with the address it holds or was offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientMessage {
    /// Solicit, Request, Renew, Rebind or Release.
    pub message_type: MessageType,
    /// Transaction id (24 bits; the top byte is ignored).
    pub xid: u32,
    /// Our DUID (see [`duid_ll`]).
    pub client_id: Vec<u8>,
    /// The chosen server's DUID (Request, Renew, Release).
    pub server_id: Option<Vec<u8>>,
    /// Our IA_NA id.
    pub iaid: u32,
    /// The address asked for or held (lifetimes sent as 0: the server decides).
    pub address: Option<Ipv6Addr>,
    /// Time since the exchange started, in hundredths of a second.
    pub elapsed_cs: u16,
}

/// The DUID-LL (RFC 8415 §11.4) of an Ethernet interface: type 3, hardware type 1, MAC.
pub fn duid_ll(mac: &[u8; 6]) -> Vec<u8> {
    let mut d = Vec::with_capacity(10);
    d.extend_from_slice(&DUID_LL.to_be_bytes());
    d.extend_from_slice(&HW_ETHERNET.to_be_bytes());
    d.extend_from_slice(mac);
    d
}

/// A stable IAID for an interface: the low 4 bytes of its MAC.
pub fn iaid_of(mac: &[u8; 6]) -> u32 {
    u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]])
}

fn push_opt(b: &mut Vec<u8>, code: u16, data: &[u8]) {
    b.extend_from_slice(&code.to_be_bytes());
    b.extend_from_slice(&u16::try_from(data.len()).unwrap_or(u16::MAX).to_be_bytes());
    b.extend_from_slice(&data[..data.len().min(usize::from(u16::MAX))]);
}

impl ClientMessage {
    /// Encodes the message.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![self.message_type as u8];
        b.extend_from_slice(&self.xid.to_be_bytes()[1..]);
        push_opt(&mut b, OPT_CLIENTID, &self.client_id);
        if let Some(s) = &self.server_id {
            push_opt(&mut b, OPT_SERVERID, s);
        }
        let mut ia = Vec::with_capacity(40);
        ia.extend_from_slice(&self.iaid.to_be_bytes());
        ia.extend_from_slice(&[0; 8]); // T1, T2: the server decides
        if let Some(a) = self.address {
            let mut addr = a.octets().to_vec();
            addr.extend_from_slice(&[0; 8]); // preferred, valid
            push_opt(&mut ia, OPT_IAADDR, &addr);
        }
        push_opt(&mut b, OPT_IA_NA, &ia);
        push_opt(&mut b, OPT_ELAPSED_TIME, &self.elapsed_cs.to_be_bytes());
        if self.message_type != MessageType::Release {
            let mut oro = OPT_DNS_SERVERS.to_be_bytes().to_vec();
            if self.message_type == MessageType::Solicit {
                // RFC 8415 §18.2.1: a Solicit asks for SOL_MAX_RT.
                oro.extend_from_slice(&OPT_SOL_MAX_RT.to_be_bytes());
            }
            push_opt(&mut b, OPT_ORO, &oro);
        }
        b
    }
}

/// A server message (Advertise or Reply) with what the client uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerMessage {
    /// Advertise or Reply.
    pub message_type: MessageType,
    /// Transaction id (24 bits).
    pub xid: u32,
    /// The client id the server echoes (must be ours).
    pub client_id: Option<Vec<u8>>,
    /// The server's DUID.
    pub server_id: Option<Vec<u8>>,
    /// Server preference (Advertise).
    pub preference: Option<u8>,
    /// Message-level status.
    pub status: Option<StatusCode>,
    /// IA_NA options.
    pub ia_na: Vec<IaNa>,
    /// Recursive DNS servers (option 23).
    pub dns: Vec<Ipv6Addr>,
}

/// Iterates the (code, data) options of `b`.
fn options(mut b: &[u8]) -> impl Iterator<Item = Result<(u16, &[u8]), DecodeError>> {
    std::iter::from_fn(move || {
        if b.is_empty() {
            return None;
        }
        if b.len() < 4 {
            b = &[];
            return Some(Err(DecodeError::Truncated(0)));
        }
        let code = u16::from_be_bytes([b[0], b[1]]);
        let len = usize::from(u16::from_be_bytes([b[2], b[3]]));
        let Some(data) = b.get(4..4 + len) else {
            b = &[];
            return Some(Err(DecodeError::Truncated(code)));
        };
        b = &b[4 + len..];
        Some(Ok((code, data)))
    })
}

fn u32_at(d: &[u8], i: usize) -> u32 {
    d.get(i..i + 4)
        .map_or(0, |s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

fn status_of(d: &[u8]) -> Result<StatusCode, DecodeError> {
    if d.len() < 2 {
        return Err(DecodeError::Truncated(OPT_STATUS_CODE));
    }
    Ok(StatusCode {
        code: u16::from_be_bytes([d[0], d[1]]),
        message: String::from_utf8_lossy(&d[2..]).into_owned(),
    })
}

fn v6_at(d: &[u8], i: usize) -> Option<Ipv6Addr> {
    let s: [u8; 16] = d.get(i..i + 16)?.try_into().ok()?;
    Some(Ipv6Addr::from(s))
}

fn ia_address(d: &[u8]) -> Result<IaAddress, DecodeError> {
    let address = v6_at(d, 0).ok_or(DecodeError::Truncated(OPT_IAADDR))?;
    if d.len() < 24 {
        return Err(DecodeError::Truncated(OPT_IAADDR));
    }
    let mut a = IaAddress {
        address,
        preferred: u32_at(d, 16),
        valid: u32_at(d, 20),
        status: None,
    };
    for o in options(&d[24..]) {
        let (code, data) = o?;
        if code == OPT_STATUS_CODE {
            a.status = Some(status_of(data)?);
        }
    }
    Ok(a)
}

fn ia_na(d: &[u8]) -> Result<IaNa, DecodeError> {
    if d.len() < 12 {
        return Err(DecodeError::Truncated(OPT_IA_NA));
    }
    let mut ia = IaNa {
        iaid: u32_at(d, 0),
        t1: u32_at(d, 4),
        t2: u32_at(d, 8),
        addresses: Vec::new(),
        status: None,
    };
    for o in options(&d[12..]) {
        match o? {
            (OPT_IAADDR, data) => ia.addresses.push(ia_address(data)?),
            (OPT_STATUS_CODE, data) => ia.status = Some(status_of(data)?),
            _ => {}
        }
    }
    Ok(ia)
}

impl ServerMessage {
    /// Decodes an Advertise or a Reply.
    pub fn decode(b: &[u8]) -> Result<ServerMessage, DecodeError> {
        if b.len() < 4 {
            return Err(DecodeError::TooShort(b.len()));
        }
        let message_type = match MessageType::from_u8(b[0]) {
            Some(t @ (MessageType::Advertise | MessageType::Reply)) => t,
            _ => return Err(DecodeError::NotFromServer(b[0])),
        };
        let mut m = ServerMessage {
            message_type,
            xid: u32::from_be_bytes([0, b[1], b[2], b[3]]),
            client_id: None,
            server_id: None,
            preference: None,
            status: None,
            ia_na: Vec::new(),
            dns: Vec::new(),
        };
        for o in options(&b[4..]) {
            match o? {
                (OPT_CLIENTID, d) => m.client_id = Some(d.to_vec()),
                (OPT_SERVERID, d) => m.server_id = Some(d.to_vec()),
                (OPT_PREFERENCE, d) => m.preference = d.first().copied(),
                (OPT_STATUS_CODE, d) => m.status = Some(status_of(d)?),
                (OPT_IA_NA, d) => m.ia_na.push(ia_na(d)?),
                (OPT_DNS_SERVERS, d) => {
                    m.dns = (0..d.len() / 16).filter_map(|i| v6_at(d, i * 16)).collect()
                }
                _ => {}
            }
        }
        Ok(m)
    }

    /// The message-level status code (absent = success).
    pub fn status_code(&self) -> u16 {
        self.status.as_ref().map_or(status::SUCCESS, |s| s.code)
    }

    /// The IA_NA with id `iaid`, if the server sent one.
    pub fn ia(&self, iaid: u32) -> Option<&IaNa> {
        self.ia_na.iter().find(|ia| ia.iaid == iaid)
    }

    /// Whether this answers `req`: same transaction, our client id echoed, a server id — the
    /// one `req` addresses when it names one (a Request or Renew): no other server is heard.
    pub fn answers(&self, req: &ClientMessage) -> bool {
        self.xid == req.xid & 0x00ff_ffff
            && self.client_id.as_deref() == Some(req.client_id.as_slice())
            && self.server_id.is_some()
            && (req.server_id.is_none() || self.server_id == req.server_id)
    }
}

#[cfg(test)]
mod tests;
