//! Host: one provider machine of a HostType, with the MAC address of each interface, in a
//! pool (bare-metal instances or cluster agents).

use crate::kinds::KindSpec;
use crate::refs::RefField;
use crate::validate::metadata;
use crate::{Invalid, Kind, Scope, pb};

/// The facts about Hosts. A new host is free for assignment.
pub const SPEC: KindSpec = KindSpec {
    state_prefix: Some("HOST_STATE"),
    initial_state: "FREE",
    immutable_fields: &["spec.host_type"],
    references: &[RefField::to("spec.host_type", Kind::HostType)],
    ..KindSpec::new("Host", "hosts", "host", "hosts", Scope::Provider)
};

/// The pools a host may serve.
pub const HOST_POOLS: [&str; 2] = ["baremetal", "caas"];

/// Normalises a MAC address with the one MAC rule ([`crate::MacAddress`]): six hex octets
/// separated by `:` or `-` → lowercase, `:`-separated; multicast and all-zero addresses are not
/// interface addresses.
pub fn mac_address(field: &str, mac: &str) -> Result<String, Invalid> {
    mac.parse::<crate::MacAddress>()
        .map(|m| m.to_string())
        .map_err(|e| Invalid::new(field, e.to_string()))
}

/// Checks a Host against its HostType and returns the spec to store: every interface of the
/// type exactly once (in the type's order) with a normalised MAC, no MAC twice, a known pool.
/// `host_type` is the resolved id to store.
pub fn validate(
    h: &pb::Host,
    ht: &pb::HostType,
    type_label: &str,
    host_type: &str,
) -> Result<pb::HostSpec, Invalid> {
    metadata(h.metadata.as_ref())?;
    let spec = h.spec.clone().unwrap_or_default();
    if !HOST_POOLS.contains(&spec.pool.as_str()) {
        return Err(Invalid::new(
            "spec.pool",
            if spec.pool.is_empty() {
                "pool is required (baremetal or caas)".to_string()
            } else {
                format!("pool '{}' is not one of baremetal, caas", spec.pool)
            },
        ));
    }
    if ht.interfaces.is_empty() {
        return Err(Invalid::new(
            "spec.host_type",
            format!(
                "HostType '{type_label}' has no interfaces (a virtual-machine type); a host needs a bare-metal type"
            ),
        ));
    }
    let names: Vec<&str> = ht.interfaces.iter().map(|i| i.name.as_str()).collect();
    let mut given: std::collections::HashMap<&str, (usize, String)> =
        std::collections::HashMap::new();
    let mut macs: std::collections::HashMap<String, &str> = std::collections::HashMap::new();
    for (i, iface) in spec.interfaces.iter().enumerate() {
        let at = format!("spec.interfaces[{i}]");
        if !names.contains(&iface.name.as_str()) {
            return Err(Invalid::new(
                format!("{at}.name"),
                format!(
                    "HostType '{type_label}' has no interface '{}' (it has {})",
                    iface.name,
                    names.join(", ")
                ),
            ));
        }
        if given.contains_key(iface.name.as_str()) {
            return Err(Invalid::new(
                format!("{at}.name"),
                format!("interface '{}' is listed twice", iface.name),
            ));
        }
        let mac = mac_address(&format!("{at}.mac_address"), &iface.mac_address)?;
        if let Some(other) = macs.get(&mac) {
            return Err(Invalid::new(
                format!("{at}.mac_address"),
                format!("MAC {mac} is also given for interface '{other}'; MACs are unique"),
            ));
        }
        macs.insert(mac.clone(), iface.name.as_str());
        given.insert(iface.name.as_str(), (i, mac));
    }
    let missing: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !given.contains_key(n))
        .collect();
    if !missing.is_empty() {
        return Err(Invalid::new(
            "spec.interfaces",
            format!(
                "every interface of HostType '{type_label}' needs its MAC address; missing: {}",
                missing.join(", ")
            ),
        ));
    }
    Ok(pb::HostSpec {
        host_type: host_type.to_string(),
        interfaces: names
            .iter()
            .filter_map(|n| {
                given.get(n).map(|(_, mac)| pb::HostInterface {
                    name: (*n).to_string(),
                    mac_address: mac.clone(),
                })
            })
            .collect(),
        pool: spec.pool,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::kinds::host_type::bare_metal_sample;

    #[test]
    fn macs_normalise_and_reject_non_unicast() {
        assert_eq!(
            mac_address("m", "0E-AA-bb-00-01-FF").unwrap(),
            "0e:aa:bb:00:01:ff"
        );
        assert!(mac_address("m", "0e:aa:bb:00:01").is_err());
        assert!(mac_address("m", "0e:aa:bb:00:01:zz").is_err());
        assert!(mac_address("m", "0e:aa-bb:00:01:ff").is_err());
        assert!(
            mac_address("m", "01:00:5e:00:00:01")
                .unwrap_err()
                .message
                .contains("multicast")
        );
        assert!(mac_address("m", "00:00:00:00:00:00").is_err());
    }

    #[test]
    fn host_interfaces_match_the_type() {
        let ht = bare_metal_sample();
        let ifaces = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(n, m)| pb::HostInterface {
                    name: (*n).into(),
                    mac_address: (*m).into(),
                })
                .collect::<Vec<_>>()
        };
        let all = [
            ("data-1", "0E:00:00:00:00:02"),
            ("data-0", "0e:00:00:00:00:01"),
            ("mgmt-0", "0e:00:00:00:00:03"),
            ("bmc-0", "0e:00:00:00:00:04"),
        ];
        let mut h = pb::Host {
            spec: Some(pb::HostSpec {
                host_type: "bm".into(),
                interfaces: ifaces(&all),
                pool: "caas".into(),
            }),
            ..Default::default()
        };
        let spec = validate(&h, &ht, "bm", "id-1").unwrap();
        assert_eq!(spec.host_type, "id-1");
        let order: Vec<_> = spec.interfaces.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(order, ["mgmt-0", "data-0", "data-1", "bmc-0"]);
        assert_eq!(spec.interfaces[2].mac_address, "0e:00:00:00:00:02");

        h.spec.as_mut().unwrap().pool = "vm".into();
        assert_eq!(validate(&h, &ht, "bm", "i").unwrap_err().field, "spec.pool");
        h.spec.as_mut().unwrap().pool = "baremetal".into();
        h.spec.as_mut().unwrap().interfaces = ifaces(&all[..3]);
        assert!(
            validate(&h, &ht, "bm", "i")
                .unwrap_err()
                .message
                .contains("missing: bmc-0")
        );
        let mut extra = ifaces(&all);
        extra.push(pb::HostInterface {
            name: "eth9".into(),
            mac_address: "0e:00:00:00:00:09".into(),
        });
        h.spec.as_mut().unwrap().interfaces = extra;
        assert_eq!(
            validate(&h, &ht, "bm", "i").unwrap_err().field,
            "spec.interfaces[4].name"
        );
        let mut dup = ifaces(&all);
        dup[1].mac_address = "0e:00:00:00:00:02".into();
        h.spec.as_mut().unwrap().interfaces = dup;
        assert_eq!(
            validate(&h, &ht, "bm", "i").unwrap_err().field,
            "spec.interfaces[1].mac_address"
        );
        assert!(validate(&h, &pb::HostType::default(), "vm", "i").is_err());
    }
}
