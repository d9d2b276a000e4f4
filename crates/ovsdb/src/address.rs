//! Where an OVSDB server listens, spelled as Open vSwitch spells it: `unix:PATH` or
//! `tcp:HOST:PORT` (an IPv6 host in brackets), several of them comma-separated for the members
//! of a clustered database.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// One server address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Address {
    /// A unix socket.
    Unix(PathBuf),
    /// A TCP endpoint: host (name or address, brackets stripped) and port.
    Tcp(String, u16),
    /// A TLS endpoint over TCP (`ssl:HOST:PORT`): host and port.
    Ssl(String, u16),
}

/// An address that is not `unix:PATH` or `tcp:HOST:PORT`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "'{given}' is not an OVSDB address: {reason} (expected unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT)"
)]
pub struct AddressError {
    /// What was given.
    pub given: String,
    /// Which rule it broke.
    pub reason: &'static str,
}

impl Address {
    /// Parses a comma-separated list (the members of a clustered database); at least one.
    pub fn parse_list(s: &str) -> Result<Vec<Address>, AddressError> {
        let list: Vec<Address> = s
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::parse)
            .collect::<Result<_, _>>()?;
        if list.is_empty() {
            return Err(AddressError {
                given: s.to_string(),
                reason: "no address",
            });
        }
        Ok(list)
    }
}

impl FromStr for Address {
    type Err = AddressError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason| AddressError {
            given: s.to_string(),
            reason,
        };
        if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(err("the socket path is empty"));
            }
            return Ok(Address::Unix(PathBuf::from(path)));
        }
        let (rest, ssl) = match (s.strip_prefix("tcp:"), s.strip_prefix("ssl:")) {
            (Some(rest), _) => (rest, false),
            (_, Some(rest)) => (rest, true),
            _ => return Err(err("unknown transport")),
        };
        let (host, port) = rest.rsplit_once(':').ok_or_else(|| err("no port"))?;
        let port: u16 = port.parse().map_err(|_| err("the port is not a number"))?;
        if port == 0 {
            return Err(err("port 0"));
        }
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if host.is_empty() {
            return Err(err("the host is empty"));
        }
        if ssl {
            Ok(Address::Ssl(host.to_string(), port))
        } else {
            Ok(Address::Tcp(host.to_string(), port))
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Unix(p) => write!(f, "unix:{}", p.display()),
            Address::Tcp(h, p) if h.contains(':') => write!(f, "tcp:[{h}]:{p}"),
            Address::Tcp(h, p) => write!(f, "tcp:{h}:{p}"),
            Address::Ssl(h, p) if h.contains(':') => write!(f, "ssl:[{h}]:{p}"),
            Address::Ssl(h, p) => write!(f, "ssl:{h}:{p}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_unix_tcp_and_lists() {
        assert_eq!(
            "unix:/run/ovn/nb.sock".parse::<Address>(),
            Ok(Address::Unix("/run/ovn/nb.sock".into()))
        );
        assert_eq!(
            "tcp:127.0.0.1:6641".parse::<Address>(),
            Ok(Address::Tcp("127.0.0.1".into(), 6641))
        );
        let v6: Address = "tcp:[fd00::1]:6641".parse().unwrap();
        assert_eq!(v6, Address::Tcp("fd00::1".into(), 6641));
        assert_eq!(v6.to_string(), "tcp:[fd00::1]:6641");
        let ssl: Address = "ssl:[fd00::1]:6641".parse().unwrap();
        assert_eq!(ssl, Address::Ssl("fd00::1".into(), 6641));
        assert_eq!(ssl.to_string(), "ssl:[fd00::1]:6641");
        let list = Address::parse_list("tcp:10.0.0.1:6641, tcp:10.0.0.2:6641,unix:/x").unwrap();
        assert_eq!(list.len(), 3);
    }

    #[test]
    fn refuses_what_is_not_an_address_and_says_why() {
        for (bad, why) in [
            ("tls:1.2.3.4:6641", "unknown transport"),
            ("ssl:1.2.3.4", "no port"),
            ("unix:", "the socket path is empty"),
            ("tcp:1.2.3.4", "no port"),
            ("tcp:1.2.3.4:x", "the port is not a number"),
            ("tcp:host:0", "port 0"),
            ("tcp::6641", "the host is empty"),
        ] {
            let e = bad.parse::<Address>().unwrap_err();
            assert_eq!(e.reason, why, "{bad}");
            assert!(e.to_string().contains(bad), "{e}");
        }
        assert!(Address::parse_list(" , ").is_err());
    }
}
