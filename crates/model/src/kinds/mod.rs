//! One module per resource kind, holding everything the model knows about that kind: its names
//! and aliases, who owns it, its state enum, the fields that never change, the fields that
//! reference other objects, and the request validation that needs nothing but the object.
//!
//! Each `kinds/<kind>.rs` exposes `pub const SPEC: KindSpec` plus its validation functions
//! (the table starts from [`KindSpec::new`] and states every rule where the kind differs);
//! [`Kind::spec`](crate::Kind::spec) maps a kind to its table, and the generic machinery
//! (`update.rs` for immutability, `refs.rs` for references, `validate.rs` for the shared
//! checks) reads the tables.
//!
//! Adding a kind to the model:
//! 1. add the variant to [`Kind`](crate::Kind) and to `Kind::ALL` (in dependency order: a
//!    kind only references kinds before it);
//! 2. write `kinds/<kind>.rs` with its `SPEC` (and its `validate` function), declare the
//!    module below and map the variant in `Kind::spec`;
//! 3. add its protobuf message in `osac-proto`.
//!
//! The API (its `resources/<kind>.rs`) and the controller (its `reconcile/<kind>.rs`) then add
//! the rules that need other objects or the fabric.

pub mod baremetal_instance;
pub mod baremetal_instance_type;
pub mod baremetal_template;
pub mod cluster;
pub mod compute_instance;
pub mod event;
pub mod external_ip;
pub mod external_ip_attachment;
pub mod external_ip_pool;
pub mod host;
pub mod host_type;
pub mod nat_gateway;
pub mod network_class;
pub mod security_group;
pub mod subnet;
pub mod tenant;
pub mod virtual_network;
pub mod workload;

use crate::Scope;
use crate::refs::RefField;

/// The static facts about one kind.
#[derive(Debug, Clone, Copy)]
pub struct KindSpec {
    /// Human name used in messages ("VirtualNetwork 'net'") and in events' `object_kind`.
    pub display_name: &'static str,
    /// REST collection name, also the kind's stable identifier in the store.
    pub collection: &'static str,
    /// The name users type, singular: lower case, no separators (`virtualnetwork`); the CLI's
    /// `kind/name` labels use it.
    pub singular: &'static str,
    /// The plural of [`KindSpec::singular`] (`virtualnetworks`).
    pub plural: &'static str,
    /// Further short names users may type, lower case without separators (`vn`); the first
    /// one is shown in help.
    pub aliases: &'static [&'static str],
    /// Whether objects belong to the provider or to a tenant.
    pub scope: Scope,
    /// The prefix of the kind's state enum in JSON (`SUBNET_STATE`); None for kinds without
    /// `status.state`.
    pub state_prefix: Option<&'static str>,
    /// The state a new object starts in (its enum's first working state, without prefix);
    /// unused when `state_prefix` is None.
    pub initial_state: &'static str,
    /// Fields that never change after creation (dotted paths; `list[]` walks every element).
    pub immutable_fields: &'static [&'static str],
    /// Fields that may be set once (from empty) and never changed afterwards.
    pub set_once_fields: &'static [&'static str],
    /// The fields that hold ids of other objects.
    pub references: &'static [RefField],
    /// Whether a `tenant-user` may create, update and delete objects of this tenant kind.
    pub tenant_user_may_write: bool,
    /// Whether a controller must undo fabric state before the object may disappear.
    pub needs_fabric_finalizer: bool,
    /// Whether controllers reconcile the kind's lifecycle (and a tenant's deletion waits for
    /// its objects).
    pub reconciled: bool,
}

impl KindSpec {
    /// A kind's names and scope with the common case for every other fact: no aliases, no state
    /// enum (`initial_state` "PENDING"), nothing immutable or set once, no references, written by
    /// admins only, no fabric finalizer, reconciled. A kind's `SPEC` states what differs and
    /// ends with `..KindSpec::new(..)`.
    pub const fn new(
        display_name: &'static str,
        collection: &'static str,
        singular: &'static str,
        plural: &'static str,
        scope: Scope,
    ) -> KindSpec {
        KindSpec {
            display_name,
            collection,
            singular,
            plural,
            aliases: &[],
            scope,
            state_prefix: None,
            initial_state: "PENDING",
            immutable_fields: &[],
            set_once_fields: &[],
            references: &[],
            tenant_user_may_write: false,
            needs_fabric_finalizer: false,
            reconciled: true,
        }
    }
}
