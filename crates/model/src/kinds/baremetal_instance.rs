//! BareMetalInstance: a tenant workload on a whole Host of a HostType, attached to subnets
//! through the type's interfaces.

use crate::kinds::KindSpec;
use crate::kinds::host_type::{LIFECYCLE_ROLE, first_fabric_interface};
use crate::kinds::workload::{primary_flags, security_group_refs};
use crate::refs::RefField;
use crate::validate::required;
use crate::{Invalid, Kind, Scope, pb};

/// The facts about BareMetalInstances. A new instance is provisioning; the Host it runs on is
/// recorded in `status.host`.
pub const SPEC: KindSpec = KindSpec {
    aliases: &["bmi", "bm", "baremetal"],
    state_prefix: Some("BARE_METAL_INSTANCE_STATE"),
    initial_state: "PROVISIONING",
    immutable_fields: &[
        "spec.host_type",
        "spec.template",
        "spec.catalog_item",
        "spec.template_parameters",
        "spec.auto_external_ip_attachment",
        "spec.network_attachments[].subnet",
        "spec.network_attachments[].interface",
        "spec.network_attachments[].primary",
    ],
    references: &[
        RefField::to("spec.host_type", Kind::HostType),
        RefField::to("spec.template", Kind::BareMetalTemplate),
        RefField::to("spec.network_attachments[].subnet", Kind::Subnet),
        RefField::to(
            "spec.network_attachments[].security_groups[]",
            Kind::SecurityGroup,
        ),
        RefField::to("status.host", Kind::Host),
    ],
    tenant_user_may_write: true,
    needs_fabric_finalizer: true,
    ..KindSpec::new(
        "BareMetalInstance",
        "baremetal_instances",
        "baremetalinstance",
        "baremetalinstances",
        Scope::Tenant,
    )
};

/// The network attachments of a BareMetalInstance checked against its HostType:
/// interfaces exist, never `lifecycle`, none twice, named when there are several, no more than
/// the attachable interfaces; a single attachment without interface gets the first `fabric`
/// one; the primary rule. Returns the attachments to store.
pub fn network_attachments(
    atts: &[pb::BareMetalNetworkAttachment],
    ht: &pb::HostType,
    type_label: &str,
) -> Result<Vec<pb::BareMetalNetworkAttachment>, Invalid> {
    let field = "spec.network_attachments";
    if ht.interfaces.is_empty() {
        return Err(Invalid::new(
            "spec.host_type",
            format!(
                "HostType '{type_label}' has no interfaces (a virtual-machine type); a bare-metal instance needs a bare-metal type"
            ),
        ));
    }
    let attachable: Vec<&str> = ht
        .interfaces
        .iter()
        .filter(|i| i.role != LIFECYCLE_ROLE)
        .map(|i| i.name.as_str())
        .collect();
    if atts.len() > attachable.len() {
        return Err(Invalid::new(
            field,
            format!(
                "{} network attachments but HostType '{type_label}' has only {} tenant-attachable interfaces ({})",
                atts.len(),
                attachable.len(),
                attachable.join(", ")
            ),
        ));
    }
    let mut out = Vec::with_capacity(atts.len());
    let mut used = std::collections::HashSet::new();
    for (i, a) in atts.iter().enumerate() {
        let at = format!("{field}[{i}]");
        required(format!("{at}.subnet"), &a.subnet)?;
        security_group_refs(&format!("{at}.security_groups"), &a.security_groups)?;
        let mut a = a.clone();
        if a.interface.is_empty() {
            if atts.len() > 1 {
                return Err(Invalid::new(
                    format!("{at}.interface"),
                    "with several network attachments every attachment must name its interface",
                ));
            }
            a.interface = first_fabric_interface(ht)
                .ok_or_else(|| {
                    Invalid::new(
                        format!("{at}.interface"),
                        format!(
                            "HostType '{type_label}' has no fabric interface to default to; name the interface"
                        ),
                    )
                })?
                .to_string();
        }
        let Some(iface) = ht.interfaces.iter().find(|x| x.name == a.interface) else {
            return Err(Invalid::new(
                format!("{at}.interface"),
                format!(
                    "HostType '{type_label}' has no interface '{}' (attachable: {})",
                    a.interface,
                    attachable.join(", ")
                ),
            ));
        };
        if iface.role == LIFECYCLE_ROLE {
            return Err(Invalid::new(
                format!("{at}.interface"),
                format!(
                    "interface '{}' is a lifecycle interface and is never tenant-attachable",
                    a.interface
                ),
            ));
        }
        if !used.insert(a.interface.clone()) {
            return Err(Invalid::new(
                format!("{at}.interface"),
                format!("interface '{}' is attached twice", a.interface),
            ));
        }
        out.push(a);
    }
    let flags = primary_flags(field, &out.iter().map(|a| a.primary).collect::<Vec<_>>())?;
    for (a, p) in out.iter_mut().zip(flags) {
        a.primary = p;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::kinds::host_type::bare_metal_sample;

    #[test]
    fn baremetal_attachment_rules() {
        let ht = bare_metal_sample();
        let att = |iface: &str, primary: bool| pb::BareMetalNetworkAttachment {
            subnet: "s".into(),
            security_groups: vec![],
            interface: iface.into(),
            primary,
        };
        let check = |atts: &[pb::BareMetalNetworkAttachment]| network_attachments(atts, &ht, "bm");
        // A single attachment defaults to the first fabric interface and is primary.
        let out = check(&[att("", false)]).unwrap();
        assert_eq!(
            (out[0].interface.as_str(), out[0].primary),
            ("data-0", true)
        );
        let e = check(&[att("eth7", false)]).unwrap_err();
        assert_eq!(e.field, "spec.network_attachments[0].interface");
        assert!(e.message.contains("no interface 'eth7'"));
        assert!(
            check(&[att("bmc-0", false)])
                .unwrap_err()
                .message
                .contains("lifecycle")
        );
        assert!(
            check(&[att("data-0", true), att("data-0", false)])
                .unwrap_err()
                .message
                .contains("attached twice")
        );
        assert!(
            check(&[att("data-0", true), att("", false)])
                .unwrap_err()
                .message
                .contains("must name its interface")
        );
        assert!(
            check(&[att("data-0", false), att("data-1", false)])
                .unwrap_err()
                .message
                .contains("exactly one must be primary")
        );
        let out = check(&[att("data-0", false), att("data-1", true)]).unwrap();
        assert!(!out[0].primary && out[1].primary);
        let four = [
            att("data-0", true),
            att("data-1", false),
            att("mgmt-0", false),
            att("bmc-0", false),
        ];
        assert!(
            check(&four)
                .unwrap_err()
                .message
                .contains("only 3 tenant-attachable")
        );
        let no_fabric = pb::HostType {
            interfaces: vec![ht.interfaces[0].clone()],
            ..Default::default()
        };
        assert!(
            network_attachments(&[att("", false)], &no_fabric, "x")
                .unwrap_err()
                .message
                .contains("no fabric interface")
        );
        assert_eq!(
            network_attachments(&[att("", false)], &pb::HostType::default(), "vm")
                .unwrap_err()
                .field,
            "spec.host_type"
        );
    }
}
