//! The fabric model: what every fabric driver knows about the objects it programs, and the
//! rules it applies before programming them.
//!
//! One record per object ([`Record`]: a VirtualNetwork, a subnet segment, a security group, an
//! allocated external address, a DNAT entry of an ExternalIPAttachment, the SNAT entry of a
//! NATGateway, a network attachment with its DHCP reservation, and where each host port is
//! plugged), the indexes derived from them ([`FabricState`]), and for every operation a *plan*:
//! a pure function of the state and the typed request that validates it (the preconditions in
//! [`crate::checks`]), allocates (segment ids, port and external addresses) and answers with the
//! records to write and the response, or refuses with an [`OpError`]. Plans do no I/O.
//!
//! A driver is its rendering: it plans an operation here, makes its backend match the records
//! the plan writes, persists them where it keeps its state, and then [`FabricState::apply`]s
//! them. The `sim` driver keeps the records in its state store and renders nothing; the `linux`
//! driver renders kernel objects from them. One file per resource holds its record type and the
//! plans of its operations.

pub mod external_ip;
pub mod external_ip_attachment;
pub mod nat_gateway;
pub mod network_attachment;
pub mod security_group;
pub mod subnet;
mod tables;
pub mod virtual_network;

pub use external_ip::ExternalIpRecord;
pub use external_ip_attachment::ExternalIpAttachmentRecord;
pub use nat_gateway::NatGatewayRecord;
pub use network_attachment::{NetworkAttachmentRecord, PortLocation, PortRecord};
pub use security_group::SecurityGroupRecord;
pub use subnet::SubnetRecord;
pub use tables::{Change, FabricState, Record};
pub use virtual_network::VirtualNetworkRecord;

use crate::contract::OpError;

/// What planning an operation gives: the records to write (a put or a delete by key) and the
/// response, or the refusal.
pub type Plan<A = ()> = Result<(Vec<Change>, A), OpError>;

fn put(r: Record) -> Change {
    (r.key(), Some(r))
}

/// Deletes the record under `key`; deleting what is gone changes nothing.
fn remove(state: &FabricState, key: String) -> Plan {
    let changes = if state.get(&key).is_some() {
        vec![(key, None)]
    } else {
        vec![]
    };
    Ok((changes, ()))
}
