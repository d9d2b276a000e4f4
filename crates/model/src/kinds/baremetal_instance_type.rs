//! BareMetalInstanceType: a provider-defined bare-metal flavor that tenants pick: catalog text,
//! the machines' network ports (name, role, type, speed) and the HostTypes of the inventory
//! whose hosts serve it. A port is an interface of every serving HostType with the same role,
//! so an instance's attachments name ports and its host's inventory gives their MACs.

use std::collections::HashSet;

use crate::kinds::KindSpec;
use crate::kinds::host_type::LIFECYCLE_ROLE;
use crate::labels::check_name;
use crate::refs::RefField;
use crate::validate::metadata;
use crate::{Invalid, Kind, Scope, pb};

/// The facts about BareMetalInstanceTypes. The hardware never changes (instances were checked
/// against its ports); title, description and the serving HostTypes may. No state: usable once
/// stored.
pub const SPEC: KindSpec = KindSpec {
    aliases: &["bmit", "bmtype", "bmtypes"],
    immutable_fields: &["spec.hardware"],
    references: &[RefField::to("spec.host_types[]", Kind::HostType)],
    ..KindSpec::new(
        "BareMetalInstanceType",
        "baremetal_instance_types",
        "baremetalinstancetype",
        "baremetalinstancetypes",
        Scope::Provider,
    )
};

/// Roles a network port may have.
pub const PORT_ROLES: [&str; 4] = ["fabric", "management", "storage", LIFECYCLE_ROLE];
/// Link technologies a network port may have.
pub const PORT_TYPES: [&str; 2] = ["ethernet", "infiniband"];
/// Fastest link speed accepted, in Gbit/s.
pub const MAX_PORT_SPEED_GBPS: u32 = 1600;
/// Network ports of one type.
pub const MAX_NETWORK_PORTS: usize = 16;

/// Checks a BareMetalInstanceType on its own: metadata, at least one port and one HostType,
/// port names unique and DNS-like, roles and types known, speeds in range, HostTypes each once.
pub fn validate(t: &pb::BareMetalInstanceType) -> Result<(), Invalid> {
    metadata(t.metadata.as_ref())?;
    let spec = t.spec.clone().unwrap_or_default();
    let ports = spec.hardware.unwrap_or_default().network_ports;
    let field = "spec.hardware.network_ports";
    if ports.is_empty() {
        return Err(Invalid::new(field, "at least one network port is required"));
    }
    if ports.len() > MAX_NETWORK_PORTS {
        return Err(Invalid::new(
            field,
            format!(
                "{} network ports are too many: at most {MAX_NETWORK_PORTS}",
                ports.len()
            ),
        ));
    }
    let mut seen = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let at = format!("{field}[{i}]");
        if p.name.is_empty() {
            return Err(Invalid::new(format!("{at}.name"), "port name is required"));
        }
        check_name(&format!("{at}.name"), &p.name)?;
        if !seen.insert(p.name.as_str()) {
            return Err(Invalid::new(
                format!("{at}.name"),
                format!(
                    "port '{}' appears twice; names are unique in a type",
                    p.name
                ),
            ));
        }
        if !PORT_ROLES.contains(&p.role.as_str()) {
            return Err(Invalid::new(
                format!("{at}.role"),
                format!("role '{}' is not one of {}", p.role, PORT_ROLES.join(", ")),
            ));
        }
        if !PORT_TYPES.contains(&p.r#type.as_str()) {
            return Err(Invalid::new(
                format!("{at}.type"),
                format!(
                    "type '{}' is not one of {}",
                    p.r#type,
                    PORT_TYPES.join(", ")
                ),
            ));
        }
        if p.speed_gbps == 0 || p.speed_gbps > MAX_PORT_SPEED_GBPS {
            return Err(Invalid::new(
                format!("{at}.speed_gbps"),
                format!(
                    "speed {} Gbit/s is out of range: 1 to {MAX_PORT_SPEED_GBPS}",
                    p.speed_gbps
                ),
            ));
        }
    }
    if spec.host_types.is_empty() {
        return Err(Invalid::new(
            "spec.host_types",
            "at least one HostType serving the type is required",
        ));
    }
    let mut seen = HashSet::new();
    for (i, h) in spec.host_types.iter().enumerate() {
        if h.is_empty() {
            return Err(Invalid::new(
                format!("spec.host_types[{i}]"),
                "HostType is required",
            ));
        }
        if !seen.insert(h.as_str()) {
            return Err(Invalid::new(
                format!("spec.host_types[{i}]"),
                format!("HostType '{h}' is listed twice"),
            ));
        }
    }
    Ok(())
}

/// Checks that a HostType can serve a type with `ports`: every port is an interface of the
/// HostType with the same role (`field` and `label` name the HostType in the error).
pub fn check_served_by(
    ports: &[pb::BareMetalNetworkPort],
    ht: &pb::HostType,
    field: &str,
    label: &str,
) -> Result<(), Invalid> {
    for p in ports {
        match ht.interfaces.iter().find(|i| i.name == p.name) {
            None => {
                return Err(Invalid::new(
                    field,
                    format!(
                        "HostType '{label}' has no interface '{}' for the network port of that name",
                        p.name
                    ),
                ));
            }
            Some(i) if i.role != p.role => {
                return Err(Invalid::new(
                    field,
                    format!(
                        "interface '{}' of HostType '{label}' has role '{}' but the network port has role '{}'",
                        p.name, i.role, p.role
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// The type's ports as the (name, role) interfaces an instance's attachments are checked
/// against.
pub fn port_interfaces(t: &pb::BareMetalInstanceType) -> Vec<pb::HostTypeInterface> {
    t.spec
        .as_ref()
        .and_then(|s| s.hardware.as_ref())
        .map(|h| {
            h.network_ports
                .iter()
                .map(|p| pb::HostTypeInterface {
                    name: p.name.clone(),
                    role: p.role.clone(),
                    description: String::new(),
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::kinds::host_type::bare_metal_sample;

    fn port(name: &str, role: &str) -> pb::BareMetalNetworkPort {
        pb::BareMetalNetworkPort {
            name: name.into(),
            role: role.into(),
            r#type: "ethernet".into(),
            speed_gbps: 100,
        }
    }

    fn sample(ports: Vec<pb::BareMetalNetworkPort>) -> pb::BareMetalInstanceType {
        pb::BareMetalInstanceType {
            spec: Some(pb::BareMetalInstanceTypeSpec {
                hardware: Some(pb::BareMetalHardware {
                    network_ports: ports,
                }),
                host_types: vec!["ht-1".into()],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn field_of(t: &pb::BareMetalInstanceType) -> String {
        validate(t).unwrap_err().field
    }

    #[test]
    fn a_type_needs_known_roles_types_and_speeds() {
        let good = sample(vec![port("data-0", "fabric"), port("bmc-0", "lifecycle")]);
        validate(&good).unwrap();
        assert_eq!(field_of(&sample(vec![])), "spec.hardware.network_ports");
        let twice = sample(vec![port("data-0", "fabric"), port("data-0", "storage")]);
        assert_eq!(field_of(&twice), "spec.hardware.network_ports[1].name");
        assert_eq!(
            field_of(&sample(vec![port("data-0", "uplink")])),
            "spec.hardware.network_ports[0].role"
        );
        let mut odd = port("data-0", "fabric");
        odd.r#type = "token-ring".into();
        let e = validate(&sample(vec![odd])).unwrap_err();
        assert_eq!(e.field, "spec.hardware.network_ports[0].type");
        assert!(e.message.contains("ethernet, infiniband"), "{}", e.message);
        for speed in [0, MAX_PORT_SPEED_GBPS + 1] {
            let mut p = port("data-0", "fabric");
            p.speed_gbps = speed;
            assert_eq!(
                field_of(&sample(vec![p])),
                "spec.hardware.network_ports[0].speed_gbps"
            );
        }
        let mut none = good.clone();
        none.spec.as_mut().unwrap().host_types.clear();
        assert_eq!(field_of(&none), "spec.host_types");
        let mut dup = good;
        dup.spec.as_mut().unwrap().host_types = vec!["a".into(), "a".into()];
        assert_eq!(field_of(&dup), "spec.host_types[1]");
    }

    #[test]
    fn a_host_type_serves_a_type_when_every_port_is_its_interface_of_the_same_role() {
        let ht = bare_metal_sample();
        let ok = [port("data-0", "fabric"), port("mgmt-0", "management")];
        check_served_by(&ok, &ht, "spec.host_types[0]", "bm").unwrap();
        let missing = check_served_by(&[port("ib-0", "fabric")], &ht, "f", "bm").unwrap_err();
        assert!(missing.message.contains("no interface 'ib-0'"));
        let role = check_served_by(&[port("data-0", "storage")], &ht, "f", "bm").unwrap_err();
        assert!(
            role.message.contains("has role 'fabric'"),
            "{}",
            role.message
        );
    }
}
