//! ExternalIPAttachment: binds an ExternalIP to exactly one workload (for a cluster, to its
//! API or ingress endpoint).

use crate::kinds::KindSpec;
use crate::refs::RefField;
use crate::validate::{metadata, required};
use crate::{Invalid, Kind, Scope, pb};

/// The facts about ExternalIPAttachments. Nothing references them. Tenant users may create
/// them for their workloads.
pub const SPEC: KindSpec = KindSpec {
    aliases: &["eipa", "eipattachment", "eipattachments"],
    state_prefix: Some("EXTERNAL_IP_ATTACHMENT_STATE"),
    immutable_fields: &[
        "spec.external_ip",
        "spec.compute_instance",
        "spec.cluster",
        "spec.baremetal_instance",
        "spec.target_endpoint",
    ],
    references: &[
        RefField::to("spec.external_ip", Kind::ExternalIp),
        RefField::workload("spec.compute_instance"),
        RefField::workload("spec.cluster"),
        RefField::workload("spec.baremetal_instance"),
    ],
    tenant_user_may_write: true,
    needs_fabric_finalizer: true,
    ..KindSpec::new(
        "ExternalIPAttachment",
        "external_ip_attachments",
        "externalipattachment",
        "externalipattachments",
        Scope::Tenant,
    )
};

/// The target of an ExternalIPAttachment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttachmentTarget {
    ComputeInstance(String),
    Cluster(String, pb::ExternalIpAttachmentEndpoint),
    BaremetalInstance(String),
}

/// Checks an ExternalIPAttachment: external IP named, exactly one target, endpoint rules.
pub fn validate(a: &pb::ExternalIpAttachment) -> Result<AttachmentTarget, Invalid> {
    use pb::ExternalIpAttachmentEndpoint as Ep;
    metadata(a.metadata.as_ref())?;
    let spec = a.spec.clone().unwrap_or_default();
    required("spec.external_ip", &spec.external_ip)?;
    let set: Vec<&str> = [
        ("compute_instance", &spec.compute_instance),
        ("cluster", &spec.cluster),
        ("baremetal_instance", &spec.baremetal_instance),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(n, _)| n)
    .collect();
    if set.len() != 1 {
        return Err(Invalid::new(
            "spec",
            format!(
                "exactly one target of compute_instance, cluster, baremetal_instance is required (got {})",
                if set.is_empty() {
                    "none".to_string()
                } else {
                    set.join(", ")
                }
            ),
        ));
    }
    let endpoint = Ep::try_from(spec.target_endpoint).map_err(|_| {
        Invalid::new(
            "spec.target_endpoint",
            format!("{} is not a valid endpoint", spec.target_endpoint),
        )
    })?;
    match set[0] {
        "cluster" if endpoint == Ep::Unspecified => Err(Invalid::new(
            "spec.target_endpoint",
            "target_endpoint (API or INGRESS) is required when the target is a cluster",
        )),
        "cluster" => Ok(AttachmentTarget::Cluster(spec.cluster, endpoint)),
        other if endpoint != Ep::Unspecified => Err(Invalid::new(
            "spec.target_endpoint",
            format!("target_endpoint must be unset when the target is a {other}"),
        )),
        "compute_instance" => Ok(AttachmentTarget::ComputeInstance(spec.compute_instance)),
        _ => Ok(AttachmentTarget::BaremetalInstance(spec.baremetal_instance)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachment_targets() {
        let mut a = pb::ExternalIpAttachment::default();
        assert!(validate(&a).is_err());
        a.spec = Some(pb::ExternalIpAttachmentSpec {
            external_ip: "e".into(),
            ..Default::default()
        });
        assert!(validate(&a).unwrap_err().message.contains("exactly one"));
        a.spec.as_mut().unwrap().cluster = "c".into();
        assert_eq!(validate(&a).unwrap_err().field, "spec.target_endpoint");
        a.spec.as_mut().unwrap().target_endpoint = 1;
        assert!(validate(&a).is_ok());
        a.spec.as_mut().unwrap().cluster.clear();
        a.spec.as_mut().unwrap().compute_instance = "vm".into();
        assert_eq!(validate(&a).unwrap_err().field, "spec.target_endpoint");
    }
}
