//! The manager contract between the controllers and the networking backends: roles,
//! capabilities, operations, failures as values, and the two traits drivers implement,
//! [`FabricManager`] and [`K8sManager`].
//!
//! The traits are typed: one async method per operation, taking the request of
//! [`crate::types`] by reference and answering its typed response (`()` when the wire result
//! is `{}`). A registration's role decides which trait object the registry builds, so an
//! operation of the other role cannot be called. JSON is the wire format of the `exec` driver
//! only ([`crate::exec`]): in-process drivers (sim, linux) never see it.
//!
//! Each request type implements [`Request`] (its [`Operation`], its response type, the id of
//! the object it is about) and [`FabricRequest`] or [`K8sRequest`] (how to call it on a
//! manager). Code that treats every operation alike — the controllers' metering wrapper, test
//! doubles, the exec driver — implements [`FabricLayer`] / [`K8sLayer`] with one generic
//! `call` instead of one method per operation; a blanket implementation turns a layer into a
//! manager. The operation table below lists every operation once and generates those
//! implementations.

use std::fmt;
use std::str::FromStr;

use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::exec::WireResponse;
use crate::registration::Registration;
use crate::types::*;

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

/// The future every manager operation returns (what `#[async_trait]` methods return).
pub type OpFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, OpError>> + Send + 'a>>;

/// A request of the manager contract: the operation it is for, what that operation answers,
/// and the object it is about. Implemented by every request type of [`crate::types`].
pub trait Request: Serialize + fmt::Debug + Send + Sync + 'static {
    /// What the operation answers; `()` when its wire result is `{}`.
    type Response: WireResponse;
    /// The operation (its wire name, metrics label and failure-injection key).
    const OPERATION: Operation;
    /// The id of the object the operation is about (failure injection and logs key on it).
    fn primary_id(&self) -> &str;
}

/// The request of a fabric operation: how to call it on any [`FabricManager`].
pub trait FabricRequest: Request {
    /// Calls this request's operation on `manager`.
    fn call_on<'a>(&'a self, manager: &'a dyn FabricManager) -> OpFuture<'a, Self::Response>;
}

/// The request of a k8s operation: how to call it on any [`K8sManager`].
pub trait K8sRequest: Request {
    /// Calls this request's operation on `manager`.
    fn call_on<'a>(&'a self, manager: &'a dyn K8sManager) -> OpFuture<'a, Self::Response>;
}

/// A manager of role fabric: all physical networking. Every operation is idempotent and
/// reports failures as [`OpError`] values.
#[async_trait]
pub trait FabricManager: Send + Sync {
    /// The configuration this manager was registered with.
    fn registration(&self) -> &Registration;
    /// Creates the isolated router of a VirtualNetwork.
    async fn create_virtual_network(
        &self,
        req: &CreateVirtualNetworkRequest,
    ) -> Result<(), OpError>;
    /// Removes a VirtualNetwork's router.
    async fn delete_virtual_network(
        &self,
        req: &DeleteVirtualNetworkRequest,
    ) -> Result<(), OpError>;
    /// Creates a subnet segment; answers its segment id and gateways.
    async fn create_subnet(
        &self,
        req: &CreateSubnetRequest,
    ) -> Result<CreateSubnetResponse, OpError>;
    /// Removes a subnet segment.
    async fn delete_subnet(&self, req: &DeleteSubnetRequest) -> Result<(), OpError>;
    /// Programs the full desired rule set of a security group.
    async fn apply_security_group(&self, req: &ApplySecurityGroupRequest) -> Result<(), OpError>;
    /// Removes a security group.
    async fn delete_security_group(&self, req: &DeleteSecurityGroupRequest) -> Result<(), OpError>;
    /// Allocates an address from an external pool (the same id always gets the same one).
    async fn allocate_external_ip(
        &self,
        req: &AllocateExternalIpRequest,
    ) -> Result<AllocateExternalIpResponse, OpError>;
    /// Releases an external address.
    async fn release_external_ip(&self, req: &ReleaseExternalIpRequest) -> Result<(), OpError>;
    /// Inbound DNAT external address → target IP.
    async fn create_external_ip_attachment(
        &self,
        req: &CreateExternalIpAttachmentRequest,
    ) -> Result<(), OpError>;
    /// Removes an inbound DNAT.
    async fn delete_external_ip_attachment(
        &self,
        req: &DeleteExternalIpAttachmentRequest,
    ) -> Result<(), OpError>;
    /// Outbound SNAT of a VirtualNetwork to one external address.
    async fn create_nat_gateway(&self, req: &CreateNatGatewayRequest) -> Result<(), OpError>;
    /// Removes the outbound SNAT.
    async fn delete_nat_gateway(&self, req: &DeleteNatGatewayRequest) -> Result<(), OpError>;
    /// Moves a host port onto a subnet (off the parking network); answers its addresses.
    async fn create_network_attachment(
        &self,
        req: &CreateNetworkAttachmentRequest,
    ) -> Result<PortAddresses, OpError>;
    /// Detaches a host port (back to parking for agents).
    async fn delete_network_attachment(
        &self,
        req: &DeleteNetworkAttachmentRequest,
    ) -> Result<(), OpError>;
    /// Which addresses a MAC got on a subnet (empty = no lease yet).
    async fn query_dhcp_lease(&self, req: &QueryDhcpLeaseRequest)
    -> Result<PortAddresses, OpError>;
    /// How often the controllers ask this manager to [`repair_drift`](Self::repair_drift):
    /// `None` (the default) for a manager whose state is put back by the controllers' periodic
    /// resync of every object (each operation converges what it owns), or that cannot drift.
    fn drift_check_interval(&self) -> Option<std::time::Duration> {
        None
    }
    /// Compares the backend with what this manager wants and puts back what was changed behind
    /// its back (an object edited or deleted by hand); answers what it repaired.
    async fn repair_drift(&self) -> Result<DriftRepair, OpError> {
        Ok(DriftRepair::default())
    }
    /// The cumulative byte counters of every NAT path this manager programs (one per
    /// ExternalIPAttachment, one per NATGateway); `None` (the default) when this driver has no
    /// counters, so bandwidth is not metered on its classes.
    async fn nat_counters(&self) -> Result<Option<Vec<NatPathCounter>>, OpError> {
        Ok(None)
    }
}

/// A manager of role k8s: bridges subnets into hosting-cluster overlays. Every operation is
/// idempotent and reports failures as [`OpError`] values.
#[async_trait]
pub trait K8sManager: Send + Sync {
    /// The configuration this manager was registered with.
    fn registration(&self) -> &Registration;
    /// Bridges a subnet's segment into one hosting cluster's overlay.
    async fn create_subnet_overlay(&self, req: &CreateSubnetOverlayRequest) -> Result<(), OpError>;
    /// Removes a subnet's overlay from one hosting cluster.
    async fn delete_subnet_overlay(&self, req: &DeleteSubnetOverlayRequest) -> Result<(), OpError>;

    /// The hosting clusters to call `create_subnet_overlay` on (the registration's).
    fn hosting_clusters(&self) -> &[String] {
        &self.registration().hosting_clusters
    }
}

/// A fabric manager that handles every operation the same way — a wrapper that meters,
/// injects failures or fakes answers, or a driver that encodes every request alike (exec).
/// It writes one generic [`FabricLayer::call`]; the blanket implementation makes it a
/// [`FabricManager`] whose every method calls it. A wrapper forwards with
/// [`FabricRequest::call_on`].
#[async_trait]
pub trait FabricLayer: Send + Sync {
    /// The configuration this manager was registered with.
    fn registration(&self) -> &Registration;
    /// Runs one fabric operation.
    async fn call<R: FabricRequest>(&self, request: &R) -> Result<R::Response, OpError>;
    /// [`FabricManager::nat_counters`]: a wrapper forwards it to the manager it wraps; a
    /// driver without counters keeps the default.
    async fn nat_counters(&self) -> Result<Option<Vec<NatPathCounter>>, OpError> {
        Ok(None)
    }
}

/// [`FabricLayer`] for k8s managers.
#[async_trait]
pub trait K8sLayer: Send + Sync {
    /// The configuration this manager was registered with.
    fn registration(&self) -> &Registration;
    /// Runs one k8s operation.
    async fn call<R: K8sRequest>(&self, request: &R) -> Result<R::Response, OpError>;
}

/// Every operation once: `Variant, method, Request, Response, primary id field;` for each
/// fabric operation, handed to `$then`.
macro_rules! fabric_operations {
    ($then:ident) => {
        $then! {
            CreateVirtualNetwork, create_virtual_network, CreateVirtualNetworkRequest, (),
                virtual_network_id;
            DeleteVirtualNetwork, delete_virtual_network, DeleteVirtualNetworkRequest, (),
                virtual_network_id;
            CreateSubnet, create_subnet, CreateSubnetRequest, CreateSubnetResponse, subnet_id;
            DeleteSubnet, delete_subnet, DeleteSubnetRequest, (), subnet_id;
            ApplySecurityGroup, apply_security_group, ApplySecurityGroupRequest, (),
                security_group_id;
            DeleteSecurityGroup, delete_security_group, DeleteSecurityGroupRequest, (),
                security_group_id;
            AllocateExternalIp, allocate_external_ip, AllocateExternalIpRequest,
                AllocateExternalIpResponse, external_ip_id;
            ReleaseExternalIp, release_external_ip, ReleaseExternalIpRequest, (), external_ip_id;
            CreateExternalIpAttachment, create_external_ip_attachment,
                CreateExternalIpAttachmentRequest, (), attachment_id;
            DeleteExternalIpAttachment, delete_external_ip_attachment,
                DeleteExternalIpAttachmentRequest, (), attachment_id;
            CreateNatGateway, create_nat_gateway, CreateNatGatewayRequest, (), nat_gateway_id;
            DeleteNatGateway, delete_nat_gateway, DeleteNatGatewayRequest, (), nat_gateway_id;
            CreateNetworkAttachment, create_network_attachment, CreateNetworkAttachmentRequest,
                PortAddresses, attachment_id;
            DeleteNetworkAttachment, delete_network_attachment, DeleteNetworkAttachmentRequest,
                (), attachment_id;
            QueryDhcpLease, query_dhcp_lease, QueryDhcpLeaseRequest, PortAddresses, mac_address;
        }
    };
}

/// The same for the k8s operations.
macro_rules! k8s_operations {
    ($then:ident) => {
        $then! {
            CreateSubnetOverlay, create_subnet_overlay, CreateSubnetOverlayRequest, (), subnet_id;
            DeleteSubnetOverlay, delete_subnet_overlay, DeleteSubnetOverlayRequest, (), subnet_id;
        }
    };
}

/// The [`Request`] implementations of an operation table.
macro_rules! requests {
    ($($op:ident, $method:ident, $req:ident, $resp:ty, $id:ident;)*) => {
        $(
            impl Request for $req {
                type Response = $resp;
                const OPERATION: Operation = Operation::$op;
                fn primary_id(&self) -> &str {
                    &self.$id
                }
            }
        )*
    };
}

/// The role-specific request trait, and the blanket implementation of the manager trait for
/// every layer, of an operation table.
macro_rules! role_dispatch {
    ($request:ident, $manager:ident, $layer:ident, { $($extra:tt)* };
     $($op:ident, $method:ident, $req:ident, $resp:ty, $id:ident;)*) => {
        $(
            impl $request for $req {
                fn call_on<'a>(&'a self, manager: &'a dyn $manager) -> OpFuture<'a, $resp> {
                    manager.$method(self)
                }
            }
        )*

        #[async_trait]
        impl<L: $layer> $manager for L {
            fn registration(&self) -> &Registration {
                $layer::registration(self)
            }
            $(
                async fn $method(&self, request: &$req) -> Result<$resp, OpError> {
                    $layer::call(self, request).await
                }
            )*
            $($extra)*
        }
    };
}

macro_rules! fabric_dispatch {
    ($($t:tt)*) => {
        role_dispatch! {
            FabricRequest, FabricManager, FabricLayer, {
                async fn nat_counters(&self) -> Result<Option<Vec<NatPathCounter>>, OpError> {
                    FabricLayer::nat_counters(self).await
                }
            };
            $($t)*
        }
    };
}

macro_rules! k8s_dispatch {
    ($($t:tt)*) => { role_dispatch! { K8sRequest, K8sManager, K8sLayer, {}; $($t)* } };
}

fabric_operations!(requests);
k8s_operations!(requests);
fabric_operations!(fabric_dispatch);
k8s_operations!(k8s_dispatch);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_names_roundtrip() {
        for op in Operation::ALL {
            assert_eq!(op.as_str().parse::<Operation>().unwrap(), op);
            let json = serde_json::to_string(&op).unwrap();
            assert_eq!(json, format!("\"{}\"", op.as_str()));
        }
        assert!("nope".parse::<Operation>().is_err());
        assert_eq!(Operation::for_role(Role::K8s).count(), 2);
        assert_eq!(Operation::for_role(Role::Fabric).count(), 15);
    }

    /// Each row of the operation tables names one operation: its method is its wire name, and
    /// every operation of a role has its row.
    #[test]
    fn operation_tables_match_the_operations() {
        macro_rules! rows {
            ($($op:ident, $method:ident, $req:ident, $resp:ty, $id:ident;)*) => {
                vec![$({
                    assert_eq!(Operation::$op.as_str(), stringify!($method));
                    assert_eq!(<$req as Request>::OPERATION, Operation::$op);
                    Operation::$op
                }),*]
            };
        }
        let fabric: Vec<Operation> = fabric_operations!(rows);
        assert_eq!(
            fabric,
            Operation::for_role(Role::Fabric).collect::<Vec<_>>()
        );
        let k8s: Vec<Operation> = k8s_operations!(rows);
        assert_eq!(k8s, Operation::for_role(Role::K8s).collect::<Vec<_>>());
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
