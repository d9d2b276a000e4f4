//! ComputeInstance: a tenant virtual machine with one or more network attachments.

use crate::kinds::KindSpec;
use crate::kinds::workload::{primary_flags, security_group_refs};
use crate::refs::RefField;
use crate::validate::required;
use crate::{Invalid, Kind, Scope, pb};

/// The facts about ComputeInstances. A new instance is starting.
pub const SPEC: KindSpec = KindSpec {
    aliases: &["ci", "vm", "vms"],
    state_prefix: Some("COMPUTE_INSTANCE_STATE"),
    initial_state: "STARTING",
    immutable_fields: &[
        "spec.template",
        "spec.template_parameters",
        "spec.auto_external_ip_attachment",
        "spec.compute_network_attachments[].subnet",
        "spec.compute_network_attachments[].primary",
    ],
    references: &[
        RefField::to("spec.compute_network_attachments[].subnet", Kind::Subnet),
        RefField::to(
            "spec.compute_network_attachments[].security_groups[]",
            Kind::SecurityGroup,
        ),
    ],
    tenant_user_may_write: true,
    needs_fabric_finalizer: true,
    ..KindSpec::new(
        "ComputeInstance",
        "compute_instances",
        "computeinstance",
        "computeinstances",
        Scope::Tenant,
    )
};

/// The network attachments of a ComputeInstance as stored: the deprecated
/// `network_attachments` input converted, subnets named, SG references well-formed, the
/// primary rule applied. An empty list is returned as is (the caller decides).
pub fn network_attachments(
    spec: &pb::ComputeInstanceSpec,
) -> Result<Vec<pb::ComputeNetworkAttachment>, Invalid> {
    let (field, atts): (&str, Vec<pb::ComputeNetworkAttachment>) = match (
        spec.compute_network_attachments.is_empty(),
        spec.network_attachments.is_empty(),
    ) {
        (false, false) => {
            return Err(Invalid::new(
                "spec.network_attachments",
                "set either compute_network_attachments or the deprecated network_attachments, not both",
            ));
        }
        (true, false) => (
            "spec.network_attachments",
            spec.network_attachments
                .iter()
                .map(|a| pb::ComputeNetworkAttachment {
                    subnet: a.subnet.clone(),
                    security_groups: a.security_groups.clone(),
                    primary: false,
                })
                .collect(),
        ),
        _ => (
            "spec.compute_network_attachments",
            spec.compute_network_attachments.clone(),
        ),
    };
    for (i, a) in atts.iter().enumerate() {
        required(format!("{field}[{i}].subnet"), &a.subnet)?;
        security_group_refs(&format!("{field}[{i}].security_groups"), &a.security_groups)?;
    }
    let flags: Vec<bool> = if field == "spec.network_attachments" && atts.len() > 1 {
        // The deprecated form has no `primary`: its first attachment is the primary one.
        (0..atts.len()).map(|i| i == 0).collect()
    } else {
        atts.iter().map(|a| a.primary).collect()
    };
    let flags = primary_flags(field, &flags)?;
    Ok(atts
        .into_iter()
        .zip(flags)
        .map(|(mut a, p)| {
            a.primary = p;
            a
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_attachment_rules() {
        let att = |subnet: &str, primary: bool| pb::ComputeNetworkAttachment {
            subnet: subnet.into(),
            security_groups: vec![],
            primary,
        };
        let mut spec = pb::ComputeInstanceSpec {
            compute_network_attachments: vec![att("a", false)],
            ..Default::default()
        };
        assert!(network_attachments(&spec).unwrap()[0].primary);
        spec.compute_network_attachments = vec![att("a", false), att("b", false)];
        let e = network_attachments(&spec).unwrap_err();
        assert!(e.message.contains("exactly one must be primary"), "{e}");
        spec.compute_network_attachments = vec![att("a", true), att("b", true)];
        assert!(network_attachments(&spec).is_err());
        spec.compute_network_attachments = vec![att("a", false), att("b", true)];
        let out = network_attachments(&spec).unwrap();
        assert_eq!(
            out.iter().map(|a| a.primary).collect::<Vec<_>>(),
            [false, true]
        );
        spec.network_attachments = vec![pb::NetworkAttachment {
            subnet: "c".into(),
            security_groups: vec![],
        }];
        assert_eq!(
            network_attachments(&spec).unwrap_err().field,
            "spec.network_attachments"
        );
        spec.compute_network_attachments.clear();
        spec.network_attachments.push(pb::NetworkAttachment {
            subnet: "d".into(),
            security_groups: vec!["x".into(), "x".into()],
        });
        assert_eq!(
            network_attachments(&spec).unwrap_err().field,
            "spec.network_attachments[1].security_groups[1]"
        );
        spec.network_attachments[1].security_groups.pop();
        let out = network_attachments(&spec).unwrap();
        assert_eq!(
            out.iter()
                .map(|a| (a.subnet.as_str(), a.primary))
                .collect::<Vec<_>>(),
            [("c", true), ("d", false)]
        );
        spec.network_attachments.clear();
        assert!(network_attachments(&spec).unwrap().is_empty());
        spec.compute_network_attachments = vec![att("", true)];
        assert_eq!(
            network_attachments(&spec).unwrap_err().field,
            "spec.compute_network_attachments[0].subnet"
        );
    }
}
