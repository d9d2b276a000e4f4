//! The MAC address of a network interface, with the one parsing rule every part of osac-net
//! applies (API validation, the sim and linux fabric drivers).
//!
//! The rule: six two-digit hex octets separated all by `:` or all by `-`, in either case
//! (`0E-AA-bb-00-01-ff` reads as `0e:aa:bb:00:01:ff`). An interface address is unicast (the
//! I/G bit, the lowest bit of the first octet, is clear) and not all zeros. The canonical form
//! is lowercase and `:`-separated; that is how it prints and serialises.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A unicast, non-zero interface MAC address (see the module docs for the rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MacAddress([u8; 6]);

/// Why a text is not an interface MAC address; the message names the rule that was broken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MacAddressError {
    /// Not six hex octets with one kind of separator.
    #[error("'{0}' is not a MAC address (six hex octets, e.g. 0e:00:00:00:01:00)")]
    Syntax(String),
    /// The I/G bit is set: a group address, which no interface owns.
    #[error("'{0}' is a multicast MAC address; an interface needs a unicast one")]
    Multicast(String),
    /// `00:00:00:00:00:00`, which no interface owns.
    #[error("'{0}' is the all-zero MAC address")]
    Zero(String),
}

impl MacAddress {
    /// The address from its octets, checked against the rule.
    pub fn from_octets(octets: [u8; 6]) -> Result<Self, MacAddressError> {
        let text = || Self(octets).to_string();
        if octets[0] & 1 == 1 {
            return Err(MacAddressError::Multicast(text()));
        }
        if octets == [0; 6] {
            return Err(MacAddressError::Zero(text()));
        }
        Ok(Self(octets))
    }

    /// The six octets.
    pub fn octets(&self) -> [u8; 6] {
        self.0
    }

    /// Whether the U/L bit is set (a locally administered address, as generated VM MACs are).
    pub fn is_locally_administered(&self) -> bool {
        self.0[0] & 2 == 2
    }
}

impl FromStr for MacAddress {
    type Err = MacAddressError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let syntax = || MacAddressError::Syntax(text.to_string());
        let separator = if text.contains('-') { '-' } else { ':' };
        let parts: Vec<&str> = text.split(separator).collect();
        if parts.len() != 6 || parts.iter().any(|p| p.len() != 2) {
            return Err(syntax());
        }
        let mut octets = [0u8; 6];
        for (octet, part) in octets.iter_mut().zip(&parts) {
            if !part.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(syntax());
            }
            *octet = u8::from_str_radix(part, 16).map_err(|_| syntax())?;
        }
        Self::from_octets(octets).map_err(|e| match e {
            MacAddressError::Multicast(_) => MacAddressError::Multicast(text.to_string()),
            MacAddressError::Zero(_) => MacAddressError::Zero(text.to_string()),
            other => other,
        })
    }
}

impl fmt::Display for MacAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl Serialize for MacAddress {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MacAddress {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<MacAddress, MacAddressError> {
        text.parse()
    }

    #[test]
    fn case_and_separator_fold_to_the_canonical_form() {
        assert_eq!(
            parse("0E-AA-bb-00-01-FF").unwrap().to_string(),
            "0e:aa:bb:00:01:ff"
        );
        assert_eq!(
            parse("AA:bb:CC:dd:EE:f0").unwrap().to_string(),
            "aa:bb:cc:dd:ee:f0"
        );
        assert_eq!(parse("02:00:00:00:00:01"), parse("02-00-00-00-00-01"));
    }

    #[test]
    fn malformed_text_is_refused() {
        for bad in [
            "",
            "0e:aa:bb:00:01",
            "0e:aa:bb:00:01:ff:00",
            "0e:aa:bb:00:01:zz",
            "0e:aa-bb:00:01:ff",
            "0e:aa:bb:00:1:fff",
            "+e:aa:bb:00:01:ff",
            " 0e:aa:bb:00:01:ff",
        ] {
            assert!(
                matches!(parse(bad), Err(MacAddressError::Syntax(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn multicast_is_refused_naming_the_rule() {
        let err = parse("01:00:5E:00:00:01").unwrap_err();
        assert_eq!(err, MacAddressError::Multicast("01:00:5E:00:00:01".into()));
        assert!(err.to_string().contains("multicast"), "{err}");
        assert!(parse("ff:ff:ff:ff:ff:ff").is_err());
        assert!(MacAddress::from_octets([0x33, 0x33, 0, 0, 0, 1]).is_err());
    }

    #[test]
    fn the_zero_address_is_refused() {
        let err = parse("00-00-00-00-00-00").unwrap_err();
        assert!(matches!(err, MacAddressError::Zero(_)));
        assert!(err.to_string().contains("all-zero"), "{err}");
    }

    #[test]
    fn locally_administered_unicast_is_accepted() {
        let mac = parse("02:12:34:56:78:9a").unwrap();
        assert!(mac.is_locally_administered());
        assert_eq!(mac.octets(), [0x02, 0x12, 0x34, 0x56, 0x78, 0x9a]);
        assert!(
            !parse("00:1b:21:00:00:01")
                .unwrap()
                .is_locally_administered()
        );
    }

    #[test]
    fn serde_uses_the_canonical_string() {
        let mac = parse("0A-00-00-00-00-11").unwrap();
        let json = serde_json::to_string(&mac).unwrap();
        assert_eq!(json, "\"0a:00:00:00:00:11\"");
        assert_eq!(serde_json::from_str::<MacAddress>(&json).unwrap(), mac);
        assert!(serde_json::from_str::<MacAddress>("\"01:00:00:00:00:01\"").is_err());
    }
}
