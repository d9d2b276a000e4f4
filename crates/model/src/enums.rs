//! Enum fields by path, so filters may compare them by number (objects store enums by name).

use crate::{Kind, pb};

/// Name of enum value `n` of the enum field at `path` of `kind`, if that field is an enum.
pub fn enum_name(kind: Kind, path: &[String], n: i64) -> Option<String> {
    let n = i32::try_from(n).ok()?;
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    let name = match (kind, path.as_slice()) {
        (Kind::NetworkClass, ["status", "state"]) => {
            pb::NetworkClassState::try_from(n).ok()?.as_str_name()
        }
        (Kind::ExternalIpPool, ["status", "state"]) => {
            pb::ExternalIpPoolState::try_from(n).ok()?.as_str_name()
        }
        (Kind::Tenant, ["status", "state"]) => pb::TenantState::try_from(n).ok()?.as_str_name(),
        (Kind::VirtualNetwork, ["status", "state"]) => {
            pb::VirtualNetworkState::try_from(n).ok()?.as_str_name()
        }
        (Kind::Subnet, ["status", "state"]) => pb::SubnetState::try_from(n).ok()?.as_str_name(),
        (Kind::SecurityGroup, ["status", "state"]) => {
            pb::SecurityGroupState::try_from(n).ok()?.as_str_name()
        }
        (Kind::ExternalIp, ["status", "state"]) => {
            pb::ExternalIpState::try_from(n).ok()?.as_str_name()
        }
        (Kind::ExternalIpAttachment, ["status", "state"]) => {
            pb::ExternalIpAttachmentState::try_from(n)
                .ok()?
                .as_str_name()
        }
        (Kind::Host, ["status", "state"]) => pb::HostState::try_from(n).ok()?.as_str_name(),
        (Kind::ComputeInstance, ["status", "state"]) => {
            pb::ComputeInstanceState::try_from(n).ok()?.as_str_name()
        }
        (Kind::BareMetalInstance, ["status", "state"]) => {
            pb::BareMetalInstanceState::try_from(n).ok()?.as_str_name()
        }
        (Kind::Cluster, ["status", "state"]) => pb::ClusterState::try_from(n).ok()?.as_str_name(),
        (Kind::NatGateway, ["status", "state"]) => {
            pb::NatGatewayState::try_from(n).ok()?.as_str_name()
        }
        (Kind::Event, ["spec", "type"]) => pb::EventType::try_from(n).ok()?.as_str_name(),
        (Kind::ExternalIpPool | Kind::ExternalIp, ["spec", "ip_family"]) => {
            pb::IpFamily::try_from(n).ok()?.as_str_name()
        }
        (Kind::ExternalIpAttachment, ["spec", "target_endpoint"]) => {
            pb::ExternalIpAttachmentEndpoint::try_from(n)
                .ok()?
                .as_str_name()
        }
        _ => return None,
    };
    Some(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_numbers_map_to_names() {
        let p = vec!["status".to_string(), "state".to_string()];
        assert_eq!(
            enum_name(Kind::Subnet, &p, 2).as_deref(),
            Some("SUBNET_STATE_READY")
        );
        assert_eq!(enum_name(Kind::Subnet, &["spec".into()], 2), None);
    }
}
