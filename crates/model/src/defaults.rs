//! Default networking: every new tenant gets a VirtualNetwork, subnets, a security group and a
//! NAT gateway from its NetworkClass defaults, which workloads created without attachments
//! use. Here: the well-known labels and finalizer, and which objects a tenant's onboarding
//! creates from its NetworkClass defaults. Pure: the API layer inserts what
//! this describes in the tenant's transaction.

use serde_json::{Value, json};

use crate::Kind;
use crate::pb;

/// `name` under [`RESERVED_PREFIX`], as a string literal (usable in `const`s): every key the
/// server keeps for itself is written through it, so none misses the prefix.
macro_rules! reserved_key {
    ($name:literal) => {
        concat!("osac.openshift.io/", $name)
    };
}
pub(crate) use reserved_key;

/// Prefix of the labels and annotations the server keeps for itself: clients may not set,
/// change or remove them (the cleanup and the tenant controller trust them).
pub const RESERVED_PREFIX: &str = reserved_key!("");

/// Whether a label or annotation key is reserved for the server.
pub fn is_reserved_key(key: &str) -> bool {
    key.starts_with(RESERVED_PREFIX)
}

/// Label on every object created at tenant onboarding.
pub const DEFAULT_LABEL: &str = reserved_key!("default");
/// Label on ExternalIPs and ExternalIPAttachments created by `auto_external_ip_attachment`.
pub const AUTO_PROVISIONED_LABEL: &str = reserved_key!("auto-provisioned");
/// Label naming the workload (id) an auto-provisioned object was created for.
pub const AUTO_PROVISIONED_FOR_LABEL: &str = reserved_key!("auto-provisioned-for");
/// Label on leftovers of a cleanup that gave up (listed by `osac admin orphans`).
pub const ORPHANED_LABEL: &str = reserved_key!("orphaned");
/// Finalizer of a workload with auto-provisioned resources: held until they are gone (or
/// orphaned after the retry limit).
pub const CLEANUP_FINALIZER: &str = reserved_key!("cleanup");

/// Names of the default objects.
pub const DEFAULT_VIRTUAL_NETWORK: &str = "default";
/// The default IPv4 subnet.
pub const DEFAULT_SUBNET_V4: &str = "default-ipv4";
/// The default IPv6 subnet.
pub const DEFAULT_SUBNET_V6: &str = "default-ipv6";
/// The default security group.
pub const DEFAULT_SECURITY_GROUP: &str = "default";
/// The default NAT gateway's ExternalIP.
pub const DEFAULT_NAT_EXTERNAL_IP: &str = "default-nat";
/// The default NAT gateway.
pub const DEFAULT_NAT_GATEWAY: &str = "default";

/// The exact message when a workload omits attachments and its tenant has no default
/// networking (clients match it word for word).
pub const NO_DEFAULTS_MESSAGE: &str =
    "No default networking resources available. Please contact your administrator.";

/// One object of a tenant's default networking, in creation order. References to earlier
/// objects are by name (resolved in the tenant like any request).
#[derive(Debug, Clone, PartialEq)]
pub struct DefaultObject {
    /// Kind of the object.
    pub kind: Kind,
    /// Its well-known name.
    pub name: &'static str,
    /// The create body (`{"metadata": …, "spec": …}`).
    pub body: Value,
}

/// The objects onboarding creates for a class with these defaults. The NAT gateway
/// is last and references the VN and the ExternalIP by name.
pub fn onboarding_objects(class_id: &str, d: &pb::NetworkClassDefaults) -> Vec<DefaultObject> {
    let meta = |name: &str| json!({"name": name, "labels": {DEFAULT_LABEL: "true"}});
    let mut out = Vec::new();
    let mut vn = json!({"network_class": class_id});
    if !d.virtual_network_ipv4_cidr.is_empty() {
        vn["ipv4_cidr"] = json!(d.virtual_network_ipv4_cidr);
    }
    if !d.virtual_network_ipv6_cidr.is_empty() {
        vn["ipv6_cidr"] = json!(d.virtual_network_ipv6_cidr);
    }
    out.push(DefaultObject {
        kind: Kind::VirtualNetwork,
        name: DEFAULT_VIRTUAL_NETWORK,
        body: json!({"metadata": meta(DEFAULT_VIRTUAL_NETWORK), "spec": vn}),
    });
    for (name, field, cidr) in [
        (DEFAULT_SUBNET_V4, "ipv4_cidr", &d.subnet_ipv4_cidr),
        (DEFAULT_SUBNET_V6, "ipv6_cidr", &d.subnet_ipv6_cidr),
    ] {
        if cidr.is_empty() {
            continue;
        }
        out.push(DefaultObject {
            kind: Kind::Subnet,
            name,
            body: json!({
                "metadata": meta(name),
                "spec": {"virtual_network": DEFAULT_VIRTUAL_NETWORK, field: cidr},
            }),
        });
    }
    let rules = |rules: &[pb::SecurityRule]| -> Value {
        serde_json::to_value(rules).unwrap_or_else(|_| json!([]))
    };
    out.push(DefaultObject {
        kind: Kind::SecurityGroup,
        name: DEFAULT_SECURITY_GROUP,
        body: json!({
            "metadata": meta(DEFAULT_SECURITY_GROUP),
            "spec": {
                "virtual_network": DEFAULT_VIRTUAL_NETWORK,
                "ingress": rules(&d.ingress_rules),
                "egress": rules(&d.egress_rules),
            },
        }),
    });
    // Unset means on: only an explicit `false` leaves the tenant without a NAT gateway.
    if d.enable_nat_gateway.unwrap_or(true) {
        out.push(DefaultObject {
            kind: Kind::ExternalIp,
            name: DEFAULT_NAT_EXTERNAL_IP,
            body: json!({"metadata": meta(DEFAULT_NAT_EXTERNAL_IP), "spec": {}}),
        });
        out.push(DefaultObject {
            kind: Kind::NatGateway,
            name: DEFAULT_NAT_GATEWAY,
            body: json!({
                "metadata": meta(DEFAULT_NAT_GATEWAY),
                "spec": {
                    "virtual_network": DEFAULT_VIRTUAL_NETWORK,
                    "external_ip": DEFAULT_NAT_EXTERNAL_IP,
                },
            }),
        });
    }
    out
}

/// The condition reason when a default object of `kind` failed during onboarding.
pub fn failure_reason(kind: Kind) -> &'static str {
    match kind {
        Kind::VirtualNetwork => "VirtualNetworkProvisioningFailed",
        Kind::Subnet => "SubnetProvisioningFailed",
        Kind::SecurityGroup => "SecurityGroupProvisioningFailed",
        _ => "NATGatewayProvisioningFailed",
    }
}

/// Kinds that make up default networking, in dependency order (creation order; deletion is the
/// reverse).
pub const DEFAULT_KINDS: [Kind; 5] = [
    Kind::VirtualNetwork,
    Kind::Subnet,
    Kind::SecurityGroup,
    Kind::ExternalIp,
    Kind::NatGateway,
];

/// Tenant-owned kinds in the order a tenant's deletion removes them: each tier only after the
/// previous one is gone (consumers before what they consume). The API refuses to delete a
/// tenant with workloads; the first tier only catches one created concurrently with the delete.
pub const TENANT_TEARDOWN_ORDER: [&[Kind]; 5] = [
    &Kind::WORKLOADS,
    &[Kind::ExternalIpAttachment, Kind::NatGateway],
    &[Kind::ExternalIp],
    &[Kind::SecurityGroup, Kind::Subnet],
    &[Kind::VirtualNetwork],
];

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults(nat: bool, v6: bool) -> pb::NetworkClassDefaults {
        pb::NetworkClassDefaults {
            virtual_network_ipv4_cidr: "10.0.0.0/16".into(),
            virtual_network_ipv6_cidr: if v6 {
                "fd00::/48".into()
            } else {
                String::new()
            },
            subnet_ipv4_cidr: "10.0.1.0/24".into(),
            subnet_ipv6_cidr: if v6 {
                "fd00:0:0:1::/64".into()
            } else {
                String::new()
            },
            ingress_rules: vec![pb::SecurityRule {
                protocol: pb::Protocol::Tcp as i32,
                port_from: 22,
                port_to: 22,
                ipv4_cidr: "0.0.0.0/0".into(),
                ..Default::default()
            }],
            egress_rules: vec![],
            enable_nat_gateway: Some(nat),
        }
    }

    #[test]
    fn onboarding_creates_labelled_defaults_in_dependency_order() {
        let objs = onboarding_objects("class-1", &defaults(true, true));
        let names: Vec<(Kind, &str)> = objs.iter().map(|o| (o.kind, o.name)).collect();
        assert_eq!(
            names,
            vec![
                (Kind::VirtualNetwork, "default"),
                (Kind::Subnet, "default-ipv4"),
                (Kind::Subnet, "default-ipv6"),
                (Kind::SecurityGroup, "default"),
                (Kind::ExternalIp, "default-nat"),
                (Kind::NatGateway, "default"),
            ]
        );
        for o in &objs {
            assert_eq!(o.body["metadata"]["labels"][DEFAULT_LABEL], "true");
        }
        assert_eq!(objs[0].body["spec"]["network_class"], "class-1");
        assert_eq!(objs[2].body["spec"]["ipv6_cidr"], "fd00:0:0:1::/64");
        assert_eq!(objs[3].body["spec"]["ingress"][0]["port_from"], 22);
    }

    #[test]
    fn without_nat_and_ipv6_only_what_is_configured() {
        let objs = onboarding_objects("c", &defaults(false, false));
        let kinds: Vec<Kind> = objs.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            vec![Kind::VirtualNetwork, Kind::Subnet, Kind::SecurityGroup]
        );
        assert!(objs[0].body["spec"].get("ipv6_cidr").is_none());
    }

    #[test]
    fn failure_reasons_follow_the_spec() {
        assert_eq!(failure_reason(Kind::Subnet), "SubnetProvisioningFailed");
        assert_eq!(
            failure_reason(Kind::ExternalIp),
            "NATGatewayProvisioningFailed"
        );
    }
}
