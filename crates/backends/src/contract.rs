//! The manager contract between the controllers and the networking backends: roles, capabilities, operations, failures as values and
//! the [`Manager`] trait every driver implements.

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::registration::Registration;

/// What a manager is registered for: the fabric does all physical networking, a k8s manager
/// bridges hosting-cluster overlays into fabric segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Physical networking: segments, ACLs, DHCP/IPAM, NAT, routing.
    Fabric,
    /// Overlay bridging on hosting clusters.
    K8s,
}

impl Role {
    /// The YAML / CLI spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Fabric => "fabric",
            Role::K8s => "k8s",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a manager declares it supports; a NetworkClass gets the intersection over its managers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// IPv4 subnets and addresses.
    #[serde(alias = "supports_ipv4")]
    Ipv4,
    /// IPv6 subnets and addresses.
    #[serde(alias = "supports_ipv6")]
    Ipv6,
    /// Subnets carrying both families at once.
    #[serde(alias = "supports_dual_stack")]
    DualStack,
    /// Offload to DPUs.
    DpuSupport,
}

impl Capability {
    /// Every capability, in declaration order.
    pub const ALL: [Capability; 4] = [
        Capability::Ipv4,
        Capability::Ipv6,
        Capability::DualStack,
        Capability::DpuSupport,
    ];

    /// The YAML spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Ipv4 => "ipv4",
            Capability::Ipv6 => "ipv6",
            Capability::DualStack => "dual_stack",
            Capability::DpuSupport => "dpu_support",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every operation of the manager contract. The snake_case name is the wire name
/// (the `exec` driver passes it as the last argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// Create the isolated tenant segment/router of a VirtualNetwork.
    CreateVirtualNetwork,
    /// Remove a VirtualNetwork's router.
    DeleteVirtualNetwork,
    /// Create a subnet segment; returns its segment id and gateways.
    CreateSubnet,
    /// Remove a subnet segment.
    DeleteSubnet,
    /// Program the full desired rule set of a security group.
    ApplySecurityGroup,
    /// Remove a security group.
    DeleteSecurityGroup,
    /// Allocate an address from an external pool.
    AllocateExternalIp,
    /// Release an external address.
    ReleaseExternalIp,
    /// Inbound DNAT external address → target IP.
    CreateExternalIpAttachment,
    /// Remove an inbound DNAT.
    DeleteExternalIpAttachment,
    /// Outbound SNAT of a VirtualNetwork to one external address.
    CreateNatGateway,
    /// Remove the outbound SNAT.
    DeleteNatGateway,
    /// Move a host port onto a subnet (off the parking network) and pick its addresses.
    CreateNetworkAttachment,
    /// Detach a host port (back to parking for agents).
    DeleteNetworkAttachment,
    /// Which address did a MAC get on a subnet (or not yet).
    QueryDhcpLease,
    /// k8s: bridge a subnet into a hosting cluster's overlay.
    CreateSubnetOverlay,
    /// k8s: remove a subnet's overlay from a hosting cluster.
    DeleteSubnetOverlay,
}

impl Operation {
    /// Every operation, fabric ones first.
    pub const ALL: [Operation; 17] = [
        Operation::CreateVirtualNetwork,
        Operation::DeleteVirtualNetwork,
        Operation::CreateSubnet,
        Operation::DeleteSubnet,
        Operation::ApplySecurityGroup,
        Operation::DeleteSecurityGroup,
        Operation::AllocateExternalIp,
        Operation::ReleaseExternalIp,
        Operation::CreateExternalIpAttachment,
        Operation::DeleteExternalIpAttachment,
        Operation::CreateNatGateway,
        Operation::DeleteNatGateway,
        Operation::CreateNetworkAttachment,
        Operation::DeleteNetworkAttachment,
        Operation::QueryDhcpLease,
        Operation::CreateSubnetOverlay,
        Operation::DeleteSubnetOverlay,
    ];

    /// The wire name, e.g. `create_subnet`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::CreateVirtualNetwork => "create_virtual_network",
            Operation::DeleteVirtualNetwork => "delete_virtual_network",
            Operation::CreateSubnet => "create_subnet",
            Operation::DeleteSubnet => "delete_subnet",
            Operation::ApplySecurityGroup => "apply_security_group",
            Operation::DeleteSecurityGroup => "delete_security_group",
            Operation::AllocateExternalIp => "allocate_external_ip",
            Operation::ReleaseExternalIp => "release_external_ip",
            Operation::CreateExternalIpAttachment => "create_external_ip_attachment",
            Operation::DeleteExternalIpAttachment => "delete_external_ip_attachment",
            Operation::CreateNatGateway => "create_nat_gateway",
            Operation::DeleteNatGateway => "delete_nat_gateway",
            Operation::CreateNetworkAttachment => "create_network_attachment",
            Operation::DeleteNetworkAttachment => "delete_network_attachment",
            Operation::QueryDhcpLease => "query_dhcp_lease",
            Operation::CreateSubnetOverlay => "create_subnet_overlay",
            Operation::DeleteSubnetOverlay => "delete_subnet_overlay",
        }
    }

    /// Which kind of manager implements this operation.
    pub fn role(self) -> Role {
        match self {
            Operation::CreateSubnetOverlay | Operation::DeleteSubnetOverlay => Role::K8s,
            _ => Role::Fabric,
        }
    }

    /// The request field naming the object the operation is about; failure injection and
    /// logs key on it.
    pub fn primary_id_field(self) -> &'static str {
        match self {
            Operation::CreateVirtualNetwork | Operation::DeleteVirtualNetwork => {
                "virtual_network_id"
            }
            Operation::CreateSubnet
            | Operation::DeleteSubnet
            | Operation::CreateSubnetOverlay
            | Operation::DeleteSubnetOverlay => "subnet_id",
            Operation::ApplySecurityGroup | Operation::DeleteSecurityGroup => "security_group_id",
            Operation::AllocateExternalIp | Operation::ReleaseExternalIp => "external_ip_id",
            Operation::CreateExternalIpAttachment
            | Operation::DeleteExternalIpAttachment
            | Operation::CreateNetworkAttachment
            | Operation::DeleteNetworkAttachment => "attachment_id",
            Operation::CreateNatGateway | Operation::DeleteNatGateway => "nat_gateway_id",
            Operation::QueryDhcpLease => "mac_address",
        }
    }

    /// The operations a manager of `role` implements.
    pub fn for_role(role: Role) -> impl Iterator<Item = Operation> {
        Operation::ALL
            .into_iter()
            .filter(move |op| op.role() == role)
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An operation name that is not part of the contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown operation '{0}'")]
pub struct UnknownOperation(pub String);

impl FromStr for Operation {
    type Err = UnknownOperation;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Operation::ALL
            .into_iter()
            .find(|op| op.as_str() == s)
            .ok_or_else(|| UnknownOperation(s.to_string()))
    }
}

/// A failed operation. Failures are values so the caller can decide: transient ⇒ retry with
/// backoff, permanent ⇒ the object goes FAILED with the message.
///
/// Who may read the message is part of the type:
/// - [`OpError::Transient`] and [`OpError::Permanent`] carry a message our own code wrote for
///   the object's owner: it names only the request's own fields and objects (a CIDR that
///   overlaps, a pool that is exhausted, a dependency that does not exist) and becomes the
///   tenant-visible `status.message` as is.
/// - [`OpError::Backend`] carries backend detail: an exec program's stderr, a kernel tool's
///   command line and output, I/O errors with file paths, malformed manager output. Tenants
///   never see it: the controller shows them a plain message with a reference, and the detail
///   goes to the server log and a provider-only event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    /// Retrying later may succeed (backend busy, timeout, lock held…).
    #[error("{0}")]
    Transient(String),
    /// Retrying the same request will not help (invalid request, conflict, missing dependency).
    #[error("{0}")]
    Permanent(String),
    /// The backend failed; the detail is for the provider only.
    #[error(transparent)]
    Backend(BackendFailure),
}

/// A backend failure: what the provider needs to find the cause, never shown to tenants.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct BackendFailure {
    /// Whether retrying later may succeed.
    pub transient: bool,
    /// The operation that failed (`create_subnet`), when known.
    pub operation: Option<String>,
    /// The backend's own words: stderr, command lines, paths, OS errors.
    pub detail: String,
}

impl OpError {
    /// Shorthand for a transient failure.
    pub fn transient(msg: impl Into<String>) -> Self {
        OpError::Transient(msg.into())
    }

    /// Shorthand for a permanent failure.
    pub fn permanent(msg: impl Into<String>) -> Self {
        OpError::Permanent(msg.into())
    }

    /// A transient backend failure (provider-only detail).
    pub fn backend_transient(detail: impl Into<String>) -> Self {
        OpError::Backend(BackendFailure {
            transient: true,
            operation: None,
            detail: detail.into(),
        })
    }

    /// A permanent backend failure (provider-only detail).
    pub fn backend_permanent(detail: impl Into<String>) -> Self {
        OpError::Backend(BackendFailure {
            transient: false,
            operation: None,
            detail: detail.into(),
        })
    }

    /// Whether the caller should retry.
    pub fn is_transient(&self) -> bool {
        match self {
            OpError::Transient(_) => true,
            OpError::Permanent(_) => false,
            OpError::Backend(b) => b.transient,
        }
    }

    /// The full message, backend detail included: for logs and the provider, not for tenants
    /// (see [`OpError::tenant_message`]).
    pub fn message(&self) -> &str {
        match self {
            OpError::Transient(m) | OpError::Permanent(m) => m,
            OpError::Backend(b) => &b.detail,
        }
    }

    /// The message a tenant may read, or None for backend detail.
    pub fn tenant_message(&self) -> Option<&str> {
        match self {
            OpError::Transient(m) | OpError::Permanent(m) => Some(m),
            OpError::Backend(_) => None,
        }
    }

    /// Whether this is backend detail (provider-only).
    pub fn is_backend(&self) -> bool {
        matches!(self, OpError::Backend(_))
    }

    /// The same failure with its message (or backend detail) rewritten, e.g. prefixed with
    /// context; the kind and the audience stay.
    pub fn map_message(self, f: impl FnOnce(&str) -> String) -> Self {
        match self {
            OpError::Transient(m) => OpError::Transient(f(&m)),
            OpError::Permanent(m) => OpError::Permanent(f(&m)),
            OpError::Backend(mut b) => {
                b.detail = f(&b.detail);
                OpError::Backend(b)
            }
        }
    }

    /// Records which operation failed on a backend failure that does not say yet.
    pub fn in_operation(self, op: &str) -> Self {
        match self {
            OpError::Backend(mut b) if b.operation.is_none() => {
                b.operation = Some(op.to_string());
                OpError::Backend(b)
            }
            other => other,
        }
    }
}

/// A named implementation of the operations of one role. Every operation is idempotent and
/// reports failures as [`OpError`] values; calling an operation of the other role is a
/// permanent error.
#[async_trait]
pub trait Manager: Send + Sync {
    /// The configuration this manager was registered with.
    fn registration(&self) -> &Registration;

    /// Run one operation with its JSON request; returns the JSON result.
    async fn call(
        &self,
        op: Operation,
        request: serde_json::Value,
    ) -> Result<serde_json::Value, OpError>;
}

/// A driver's side of a [`Manager`]: implementing it implements [`Manager`], whose `call`
/// rejects an operation of the other role ([`ensure_role`]) before the driver sees it.
#[async_trait]
pub trait Driver: Send + Sync {
    /// The configuration this driver was registered with.
    fn registration(&self) -> &Registration;

    /// Runs one operation of the registration's role with its JSON request.
    async fn handle(
        &self,
        op: Operation,
        request: serde_json::Value,
    ) -> Result<serde_json::Value, OpError>;
}

#[async_trait]
impl<D: Driver> Manager for D {
    fn registration(&self) -> &Registration {
        Driver::registration(self)
    }

    async fn call(
        &self,
        op: Operation,
        request: serde_json::Value,
    ) -> Result<serde_json::Value, OpError> {
        ensure_role(Driver::registration(self), op)?;
        self.handle(op, request).await
    }
}

/// Rejects an operation that does not belong to the manager's role (shared by all drivers).
pub fn ensure_role(registration: &Registration, op: Operation) -> Result<(), OpError> {
    if op.role() == registration.role {
        Ok(())
    } else {
        Err(OpError::permanent(format!(
            "operation {op} belongs to role {}, but manager '{}' is registered for role {}",
            op.role(),
            registration.name,
            registration.role
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_names_roundtrip() {
        for op in Operation::ALL {
            assert_eq!(op.as_str().parse::<Operation>().unwrap(), op);
            let json = serde_json::to_value(op).unwrap();
            assert_eq!(json, serde_json::Value::String(op.as_str().into()));
        }
        assert!("nope".parse::<Operation>().is_err());
        assert_eq!(Operation::for_role(Role::K8s).count(), 2);
        assert_eq!(Operation::for_role(Role::Fabric).count(), 15);
    }

    #[test]
    fn backend_detail_is_not_for_tenants() {
        let e = OpError::backend_permanent("/usr/sbin/ip link add x: exit 2")
            .in_operation("create_subnet");
        assert_eq!(e.tenant_message(), None);
        assert!(!e.is_transient() && e.is_backend());
        assert!(e.message().contains("/usr/sbin/ip"));
        let e = e.map_message(|m| format!("cluster a: {m}"));
        assert!(e.is_backend() && e.message().starts_with("cluster a: /usr"));
        match &e {
            OpError::Backend(b) => assert_eq!(b.operation.as_deref(), Some("create_subnet")),
            _ => unreachable!(),
        }
        let ours = OpError::permanent("subnet 'a' overlaps subnet 'b'");
        assert_eq!(
            ours.tenant_message(),
            Some("subnet 'a' overlaps subnet 'b'")
        );
        assert!(OpError::backend_transient("x").is_transient());
    }

    #[test]
    fn capability_aliases() {
        let caps: Vec<Capability> =
            serde_yaml_ng::from_str("[ipv4, supports_ipv6, dual_stack, dpu_support]").unwrap();
        assert_eq!(caps, Capability::ALL.to_vec());
    }
}
