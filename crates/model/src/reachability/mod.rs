//! The reachability explainer: "can A reach B, and why (not)?" — computed from a tenant's
//! stored objects alone, with the semantics of the `linux` dataplane (see
//! docs/reachability.md, one section per rule). Pure: no I/O.
//!
//! [`explain`] takes a [`Network`] snapshot and a [`Question`] and answers an [`Explanation`]:
//! the verdict, the hops the packet crosses with its addresses as translated at each, and the
//! element that decides (the security-group rule that allows it, or why it is blocked).

mod inbound;
mod inside;
mod network;
mod outbound;
mod path;
mod request;
mod resolve;
mod security_groups;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_external;

use std::net::IpAddr;

pub use network::Network;
pub use request::{question_from_request, to_response};

use crate::{Invalid, Kind, pb};

/// The protocol of the probe (security rules with PROTOCOL_ALL match every one of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// A TCP connection to a port.
    Tcp,
    /// A UDP datagram to a port.
    Udp,
    /// An ICMP (ICMPv6 for IPv6) echo request.
    Icmp,
}

impl Protocol {
    /// `tcp` / `udp` / `icmp`.
    pub const fn label(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Icmp => "icmp",
        }
    }
}

/// Which VIP of a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterEndpoint {
    /// The API VIP (`status.api_endpoint`).
    Api,
    /// The ingress VIP (`status.ingress_endpoint`).
    Ingress,
}

/// One end of a question, as the caller names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// A ComputeInstance by id or name.
    ComputeInstance(String),
    /// A BareMetalInstance by id or name.
    BareMetalInstance(String),
    /// A Cluster by id or name, and which of its VIPs.
    Cluster(String, ClusterEndpoint),
    /// An address: a port or an ExternalIP of the tenant, else an address outside the cloud.
    Address {
        /// The address.
        address: IpAddr,
        /// The VirtualNetwork (id or name) the address is in, for overlapping CIDRs.
        virtual_network: Option<String>,
    },
    /// Any address outside the cloud.
    Internet,
}

/// "Can `source` reach `destination` with `protocol` to `port`?"
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// Where the packet starts.
    pub source: End,
    /// Where it should arrive.
    pub destination: End,
    /// TCP, UDP or ICMP echo.
    pub protocol: Protocol,
    /// Destination port (TCP/UDP); 0 for ICMP.
    pub port: u16,
}

/// The answer's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The packet arrives (and its replies return: the dataplane is stateful).
    Reachable,
    /// The packet is dropped or never sent; `deciding` says where and why.
    Blocked,
}

/// An object the path crosses or that decides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    /// The kind.
    pub kind: Kind,
    /// Its id.
    pub id: String,
    /// Its name ("" when it has none).
    pub name: String,
}

impl ObjectRef {
    /// A reference to an object of `kind`.
    pub fn new(kind: Kind, id: &str, name: &str) -> Self {
        Self {
            kind,
            id: id.to_string(),
            name: name.to_string(),
        }
    }

    /// "ComputeInstance 'vm1'" (the id when the object has no name).
    pub fn describe(&self) -> String {
        format!("{} '{}'", self.kind.display_name(), self.label())
    }

    /// The name, else the id.
    pub fn label(&self) -> &str {
        if self.name.is_empty() {
            &self.id
        } else {
            &self.name
        }
    }
}

/// The kind of place a hop is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HopKind {
    /// A workload's network port (or a cluster VIP).
    Port,
    /// A subnet's bridge.
    Subnet,
    /// A VirtualNetwork's router.
    Router,
    /// Destination NAT by an ExternalIPAttachment.
    Dnat,
    /// Source NAT: a NAT gateway, the router's transit address, or a hairpin masquerade.
    Snat,
    /// The router's uplink to the provider's external network.
    Uplink,
    /// The provider's external network.
    External,
    /// Outside the cloud.
    Internet,
}

impl HopKind {
    /// The wire name ("port", "subnet", …).
    pub const fn as_str(self) -> &'static str {
        match self {
            HopKind::Port => "port",
            HopKind::Subnet => "subnet",
            HopKind::Router => "router",
            HopKind::Dnat => "dnat",
            HopKind::Snat => "snat",
            HopKind::Uplink => "uplink",
            HopKind::External => "external",
            HopKind::Internet => "internet",
        }
    }
}

/// One place the packet passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    /// What kind of place.
    pub kind: HopKind,
    /// One human sentence.
    pub description: String,
    /// The object of the hop, when it is one.
    pub object: Option<ObjectRef>,
    /// The source address as seen here.
    pub source_address: String,
    /// The destination address as seen here.
    pub destination_address: String,
}

/// The verdict, the path as far as the packet gets, and what decided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// REACHABLE or BLOCKED.
    pub verdict: Verdict,
    /// The hops, in order.
    pub hops: Vec<Hop>,
    /// The allowing rule, or why it is blocked, in words.
    pub deciding: String,
    /// The object `deciding` names.
    pub deciding_object: Option<ObjectRef>,
    /// 1-based rule number within `deciding_object` (a security group), 0 if none.
    pub deciding_rule_index: u32,
}

/// Why a question cannot be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExplainError {
    /// An end names an object the tenant does not have.
    #[error("{field}: {kind} '{key}' not found", kind = kind.display_name())]
    NotFound {
        /// The request field.
        field: String,
        /// The kind looked for.
        kind: Kind,
        /// The id or name given.
        key: String,
    },
    /// The question breaks a rule.
    #[error(transparent)]
    Invalid(#[from] Invalid),
}

/// A tenant's network indexed once (every workload port by address, subnets and groups by
/// id), to answer many questions over it: keep one per snapshot, not one per question.
#[derive(Debug)]
pub struct IndexedNetwork(network::Index);

impl IndexedNetwork {
    /// Indexes the tenant's `network`.
    pub fn new(network: Network) -> Self {
        Self(network::Index::build(network))
    }

    /// Answers `question` over the network.
    pub fn explain(&self, question: &Question) -> Result<Explanation, ExplainError> {
        path::explain(&self.0, question)
    }
}

/// Answers `question` over the tenant's `network` (indexing it for this one question; see
/// [`IndexedNetwork`] to answer several).
pub fn explain(network: &Network, question: &Question) -> Result<Explanation, ExplainError> {
    IndexedNetwork::new(network.clone()).explain(question)
}
