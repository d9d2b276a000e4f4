//! Pure domain logic of osac-net: no I/O, no async, no database.

pub mod annotations;
pub mod bounds;
pub mod defaults;
pub mod enums;
pub mod filter;
pub mod hash;
pub mod kind;
pub mod kinds;
pub mod labels;
pub mod mac;
pub mod metering;
pub mod net;
pub mod quota;
pub mod reachability;
pub mod refs;
pub mod update;
pub mod validate;

pub use kind::{Access, FABRIC_FINALIZER, Kind, Scope};
pub use mac::MacAddress;
pub use osac_proto::v1 as pb;

/// A request field broke a rule; the message names the field and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct Invalid {
    /// Dotted path of the offending field, e.g. `spec.ipv4_cidr`.
    pub field: String,
    /// The rule that was broken, in words.
    pub message: String,
}

impl Invalid {
    /// Builds an error for `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}
