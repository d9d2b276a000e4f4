//! Cluster: a tenant Kubernetes cluster built from bare-metal agents in named node sets, on
//! one subnet.

use crate::kinds::KindSpec;
use crate::kinds::host_type::first_fabric_interface;
use crate::kinds::workload::security_group_refs;
use crate::labels::check_name;
use crate::refs::RefField;
use crate::validate::{metadata, required};
use crate::{Invalid, Kind, Scope, pb};

/// The facts about Clusters. A new cluster is progressing; the Hosts of its agents are
/// recorded per node set in `status.node_sets`.
pub const SPEC: KindSpec = KindSpec {
    state_prefix: Some("CLUSTER_STATE"),
    initial_state: "PROGRESSING",
    immutable_fields: &[
        "spec.template",
        "spec.template_parameters",
        "spec.auto_external_ip_attachment",
        "spec.node_sets",
        "spec.network_attachment.subnet",
    ],
    references: &[
        RefField::to("spec.network_attachment.subnet", Kind::Subnet),
        RefField::to(
            "spec.network_attachment.security_groups[]",
            Kind::SecurityGroup,
        ),
        RefField::to("spec.node_sets{}.host_type", Kind::HostType),
        RefField::to("status.node_sets{}.agents[].host", Kind::Host),
    ],
    tenant_user_may_write: true,
    needs_fabric_finalizer: true,
    ..KindSpec::new("Cluster", "clusters", "cluster", "clusters", Scope::Tenant)
};

/// Checks the shape of a Cluster: node sets named (DNS labels), each with a host type and a
/// size ≥ 1; the attachment's SG references well-formed. Host types are checked with
/// [`node_set_interface`] once resolved.
pub fn validate(c: &pb::Cluster) -> Result<(), Invalid> {
    metadata(c.metadata.as_ref())?;
    let spec = c.spec.clone().unwrap_or_default();
    if spec.node_sets.is_empty() {
        return Err(Invalid::new(
            "spec.node_sets",
            "at least one node set is required",
        ));
    }
    let mut names: Vec<&String> = spec.node_sets.keys().collect();
    names.sort();
    for name in names {
        let at = format!("spec.node_sets.{name}");
        if name.is_empty() {
            return Err(Invalid::new("spec.node_sets", "a node set needs a name"));
        }
        check_name(&at, name)?;
        let ns = &spec.node_sets[name];
        required(format!("{at}.host_type"), &ns.host_type)?;
        if ns.size < 1 {
            return Err(Invalid::new(
                format!("{at}.size"),
                format!("size must be at least 1 (got {})", ns.size),
            ));
        }
    }
    if let Some(a) = &spec.network_attachment {
        security_group_refs(
            "spec.network_attachment.security_groups",
            &a.security_groups,
        )?;
    }
    Ok(())
}

/// The `fabric_interface` of a cluster node set: the first `fabric` interface of its HostType.
/// v1 builds clusters from bare-metal agents only.
pub fn node_set_interface(
    name: &str,
    ht: &pb::HostType,
    type_label: &str,
) -> Result<String, Invalid> {
    let at = format!("spec.node_sets.{name}.host_type");
    if ht.interfaces.is_empty() {
        return Err(Invalid::new(
            at,
            format!(
                "HostType '{type_label}' has no interfaces (a virtual-machine type); v1 supports bare-metal node sets only"
            ),
        ));
    }
    first_fabric_interface(ht)
        .map(str::to_string)
        .ok_or_else(|| {
            Invalid::new(
                at,
                format!(
                    "HostType '{type_label}' has no fabric interface; cluster agents join the subnet through one"
                ),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::kinds::host_type::bare_metal_sample;

    #[test]
    fn cluster_rules() {
        let mut c = pb::Cluster {
            spec: Some(pb::ClusterSpec::default()),
            ..Default::default()
        };
        assert_eq!(validate(&c).unwrap_err().field, "spec.node_sets");
        let ns = |ht: &str, size: i32| pb::ClusterNodeSet {
            host_type: ht.into(),
            size,
            fabric_interface: String::new(),
        };
        let spec = c.spec.as_mut().unwrap();
        spec.node_sets.insert("workers".into(), ns("bm", 0));
        assert_eq!(
            validate(&c).unwrap_err().field,
            "spec.node_sets.workers.size"
        );
        let spec = c.spec.as_mut().unwrap();
        spec.node_sets.insert("workers".into(), ns("", 3));
        assert_eq!(
            validate(&c).unwrap_err().field,
            "spec.node_sets.workers.host_type"
        );
        let spec = c.spec.as_mut().unwrap();
        spec.node_sets.clear();
        spec.node_sets.insert("Bad_Name".into(), ns("bm", 3));
        assert!(validate(&c).is_err());
        let spec = c.spec.as_mut().unwrap();
        spec.node_sets.clear();
        spec.node_sets.insert("workers".into(), ns("bm", 3));
        assert!(validate(&c).is_ok());
        assert_eq!(
            node_set_interface("workers", &bare_metal_sample(), "bm").unwrap(),
            "data-0"
        );
        assert!(
            node_set_interface("workers", &pb::HostType::default(), "vm")
                .unwrap_err()
                .message
                .contains("bare-metal node sets only")
        );
    }
}
