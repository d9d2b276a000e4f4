//! Byte counters of the NAT paths (bandwidth metering), in each VN's router table.
//!
//! Each ExternalIPAttachment and NATGateway gets two named counters (`<kind><hash>i`, ingress
//! into the VN, and `<kind><hash>e`, egress out of it; `d` for DNAT, `s` for SNAT), declared in
//! the VN's table with the rest of its state, so garbage collection and the table's removal
//! take them with it. Counter maps keyed by the external address pick the counter:
//!
//! - DNAT, in the `mtrfwd` forward chain (after every filter: only delivered packets count):
//!   ingress is what enters by the uplink in the original direction of a DNAT'ed flow, egress
//!   its replies leaving by the uplink; both keyed by the flow's original destination (the
//!   external address).
//! - SNAT: egress in the `mtrpost` postrouting chain after source NAT (so a flow's first
//!   packet, translated there, counts too), keyed by the flow's reply destination (the
//!   gateway's address); ingress, the replies entering by the uplink, in `mtrfwd`.
//!
//! Hairpin traffic (a workload reaching an ExternalIP of its own VN) never crosses the uplink
//! and is not counted. Counters count IP packets, headers included.

use std::net::IpAddr;

use super::line;
use crate::names::{self, UPLINK_IF};

/// Which path, for counter and map names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeterPath {
    /// An ExternalIPAttachment's DNAT.
    Dnat,
    /// A NATGateway's SNAT.
    Snat,
}

impl MeterPath {
    fn letter(self) -> char {
        match self {
            MeterPath::Dnat => 'd',
            MeterPath::Snat => 's',
        }
    }
}

/// The names of an object's two counters: (ingress, egress).
pub fn counter_names(path: MeterPath, object_id: &str) -> (String, String) {
    let base = format!("{}{}", path.letter(), names::short_hash(object_id));
    (format!("{base}i"), format!("{base}e"))
}

/// The counter map of a path, direction (`i`/`e`) and address family.
fn map_name(path: MeterPath, dir: char, v4: bool) -> String {
    format!("m{}{dir}{}", path.letter(), if v4 { 4 } else { 6 })
}

/// Declares the counter maps and (re)writes the metering chains of a router table `t`
/// (`inet <name>`); the counters and map elements are left alone.
pub(super) fn chains(s: &mut String, t: &str) {
    for path in [MeterPath::Dnat, MeterPath::Snat] {
        for dir in ['i', 'e'] {
            for v4 in [true, false] {
                let ty = if v4 { "ipv4_addr" } else { "ipv6_addr" };
                let map = map_name(path, dir, v4);
                line(s, format!("add map {t} {map} {{ type {ty} : counter; }}"));
            }
        }
    }
    line(
        s,
        format!("add chain {t} mtrfwd {{ type filter hook forward priority 50; policy accept; }}"),
    );
    line(s, format!("flush chain {t} mtrfwd"));
    line(
        s,
        format!(
            "add chain {t} mtrpost {{ type filter hook postrouting priority 200; policy accept; }}"
        ),
    );
    line(s, format!("flush chain {t} mtrpost"));
    let up = format!("\"{UPLINK_IF}\"");
    for (v4, fam) in [(true, "ip"), (false, "ip6")] {
        let m = |path, dir| map_name(path, dir, v4);
        for (chain, rule) in [
            (
                "mtrfwd",
                format!(
                    "iifname {up} ct status dnat ct direction original counter name ct original {fam} daddr map @{}",
                    m(MeterPath::Dnat, 'i')
                ),
            ),
            (
                "mtrfwd",
                format!(
                    "oifname {up} ct status dnat ct direction reply counter name ct original {fam} daddr map @{}",
                    m(MeterPath::Dnat, 'e')
                ),
            ),
            (
                "mtrfwd",
                format!(
                    "iifname {up} ct status snat ct direction reply counter name ct reply {fam} daddr map @{}",
                    m(MeterPath::Snat, 'i')
                ),
            ),
            (
                "mtrpost",
                format!(
                    "oifname {up} ct status snat ct direction original counter name ct reply {fam} daddr map @{}",
                    m(MeterPath::Snat, 'e')
                ),
            ),
        ] {
            line(s, format!("add rule {t} {chain} {rule}"));
        }
    }
}

/// Declares an object's counters (idempotent: an existing counter keeps its value) and points
/// the maps at them for `external` (apply with `cmd::nft_converge`: an address that pointed
/// at another object's counters is repointed).
pub fn attach(table: &str, path: MeterPath, object_id: &str, external: IpAddr) -> String {
    let t = format!("inet {table}");
    let (cin, cout) = counter_names(path, object_id);
    let v4 = external.is_ipv4();
    let mut s = String::new();
    for (name, dir) in [(&cin, 'i'), (&cout, 'e')] {
        line(&mut s, format!("add counter {t} {name}"));
        let map = map_name(path, dir, v4);
        line(
            &mut s,
            format!("add element {t} {map} {{ {external} : \"{name}\" }}"),
        );
    }
    s
}

/// Removes the map elements of `external` and the object's counters (apply with
/// `cmd::nft_converge`: what is already gone is skipped).
pub fn detach(table: &str, path: MeterPath, object_id: &str, external: IpAddr) -> String {
    let t = format!("inet {table}");
    let (cin, cout) = counter_names(path, object_id);
    let v4 = external.is_ipv4();
    let mut s = String::new();
    for dir in ['i', 'e'] {
        let map = map_name(path, dir, v4);
        line(&mut s, format!("delete element {t} {map} {{ {external} }}"));
    }
    for name in [cin, cout] {
        line(&mut s, format!("delete counter {t} {name}"));
    }
    s
}

/// One counter as `nft -j list counters` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterReading {
    /// The counter's name.
    pub name: String,
    /// Its kernel handle (changes when the counter is recreated).
    pub handle: u64,
    /// Bytes counted.
    pub bytes: u64,
}

/// Parses the output of `nft -j list counters table inet <table>`: every counter of that
/// table. The error names what is malformed.
pub fn parse_counters(json: &str, table: &str) -> Result<Vec<CounterReading>, String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("nft counters are not JSON: {e}"))?;
    let items = v["nftables"]
        .as_array()
        .ok_or("nft counters: no `nftables` array")?;
    let mut out = Vec::new();
    for item in items {
        let Some(c) = item.get("counter") else {
            continue;
        };
        if c["table"].as_str() != Some(table) {
            continue;
        }
        let field = |k: &str| {
            c[k].as_u64()
                .ok_or_else(|| format!("nft counter without a numeric `{k}`: {c}"))
        };
        out.push(CounterReading {
            name: c["name"]
                .as_str()
                .ok_or_else(|| format!("nft counter without a name: {c}"))?
                .to_string(),
            handle: field("handle")?,
            bytes: field("bytes")?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_named_per_object_and_direction() {
        let (i, e) = counter_names(MeterPath::Dnat, "att-1");
        assert_eq!(i, format!("d{}i", names::short_hash("att-1")));
        assert_eq!(e, format!("d{}e", names::short_hash("att-1")));
        let (si, _) = counter_names(MeterPath::Snat, "att-1");
        assert_ne!(si, i);
    }

    #[test]
    fn attach_points_both_maps_of_the_family_at_the_counters() {
        let s = attach("vt", MeterPath::Snat, "gw", "203.0.113.9".parse().unwrap());
        let (i, e) = counter_names(MeterPath::Snat, "gw");
        assert!(s.contains(&format!("add counter inet vt {i}\n")));
        assert!(s.contains(&format!(
            "add element inet vt msi4 {{ 203.0.113.9 : \"{i}\" }}"
        )));
        assert!(s.contains(&format!(
            "add element inet vt mse4 {{ 203.0.113.9 : \"{e}\" }}"
        )));
        let s6 = attach("vt", MeterPath::Dnat, "a", "2001:db8::5".parse().unwrap());
        assert!(s6.contains("add element inet vt mdi6 { 2001:db8::5 : "));
        let d = detach("vt", MeterPath::Dnat, "a", "2001:db8::5".parse().unwrap());
        assert!(d.contains("delete element inet vt mde6 { 2001:db8::5 }"));
        assert!(d.contains("delete counter inet vt d"));
    }

    #[test]
    fn chains_count_only_uplink_traffic_of_nat_flows() {
        let mut s = String::new();
        chains(&mut s, "inet vt");
        assert!(s.contains(
            "add rule inet vt mtrfwd iifname \"up0\" ct status dnat ct direction original counter name ct original ip daddr map @mdi4"
        ));
        assert!(s.contains(
            "add rule inet vt mtrpost oifname \"up0\" ct status snat ct direction original counter name ct reply ip6 daddr map @mse6"
        ));
        assert_eq!(s.matches("add rule").count(), 8);
    }

    #[test]
    fn parses_the_counters_of_one_table() {
        let json = r#"{"nftables": [{"metainfo": {"version": "1.0.6"}},
            {"counter": {"family": "inet", "name": "dabci", "table": "vt", "handle": 3, "packets": 2, "bytes": 180}},
            {"counter": {"family": "inet", "name": "x", "table": "other", "handle": 4, "packets": 0, "bytes": 0}}]}"#;
        assert_eq!(
            parse_counters(json, "vt").unwrap(),
            vec![CounterReading {
                name: "dabci".into(),
                handle: 3,
                bytes: 180
            }]
        );
        assert!(
            parse_counters("nope", "vt")
                .unwrap_err()
                .contains("not JSON")
        );
        let bad = r#"{"nftables": [{"counter": {"name": "a", "table": "vt", "handle": 1}}]}"#;
        assert!(parse_counters(bad, "vt").unwrap_err().contains("`bytes`"));
    }
}
