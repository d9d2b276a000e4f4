//! Metering of networking allocations: which objects accrue resource-seconds, the dimensions
//! an interval is attributed to, when intervals open and close, the CloudEvents that record
//! them, and the grouping of usage rows into the query's answer. Pure: the store resolves the
//! dimensions and writes the intervals in the transaction of the state change.

pub mod aggregate;
pub mod cloudevent;
pub mod event_text;

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use crate::Kind;

pub use aggregate::{BandwidthRow, Group, IntervalRow, UsageQuery, aggregate};
pub use cloudevent::{CloudEvent, EventAction, SOURCE};

/// The kinds that accrue resource-seconds: every tenant-facing networking object.
pub const METERED: [Kind; 5] = [
    Kind::VirtualNetwork,
    Kind::Subnet,
    Kind::SecurityGroup,
    Kind::ExternalIp,
    Kind::NatGateway,
];

/// Whether objects of `kind` accrue resource-seconds.
pub fn metered(kind: Kind) -> bool {
    METERED.contains(&kind)
}

/// The `status.state` in which an object of a metered kind is usable (and accrues).
pub fn accruing_state(kind: Kind) -> Option<&'static str> {
    Some(match kind {
        Kind::VirtualNetwork => "VIRTUAL_NETWORK_STATE_READY",
        Kind::Subnet => "SUBNET_STATE_READY",
        Kind::SecurityGroup => "SECURITY_GROUP_STATE_READY",
        Kind::ExternalIp => "EXTERNAL_IP_STATE_ALLOCATED",
        Kind::NatGateway => "NAT_GATEWAY_STATE_READY",
        _ => return None,
    })
}

/// What of an object's own record decides its open interval, or None when it accrues nothing
/// (not a metered kind, not in its usable state, or its deletion requested). Two writes with the
/// same signature leave the open interval as it is; a different one closes it and opens the
/// next. The record's references that feed the dimensions are part of it, and for an
/// ExternalIP whether it is attached (an attachment changes the dimension mid-life).
pub fn signature(kind: Kind, body: &Value, deletion_requested: bool) -> Option<String> {
    let state = accruing_state(kind)?;
    if deletion_requested || body.pointer("/status/state").and_then(Value::as_str) != Some(state) {
        return None;
    }
    let text = |path: &str| body.pointer(path).and_then(Value::as_str).unwrap_or("");
    Some(match kind {
        Kind::VirtualNetwork => format!("class={}", text("/spec/network_class")),
        Kind::Subnet | Kind::SecurityGroup => format!("vn={}", text("/spec/virtual_network")),
        Kind::NatGateway => format!(
            "vn={};eip={}",
            text("/spec/virtual_network"),
            text("/spec/external_ip")
        ),
        Kind::ExternalIp => format!("attached={}", attached(body)),
        _ => return None,
    })
}

/// An ExternalIP's `status.attached`.
pub fn attached(body: &Value) -> bool {
    body.pointer("/status/attached")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// What a write does to an object's intervals, from the signature of its open interval (None:
/// none open) and the signature of the record written (None: it accrues nothing now).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Nothing changes: a repeated write of the same state writes nothing.
    Keep,
    /// The object starts accruing.
    Open,
    /// The object stops accruing.
    Close,
    /// A dimension changed: the open interval ends and the next one starts at the same moment.
    Reopen,
}

/// The transition from the open interval's signature to the written record's.
pub fn transition(open: Option<&str>, written: Option<&str>) -> Transition {
    match (open, written) {
        (None, None) => Transition::Keep,
        (None, Some(_)) => Transition::Open,
        (Some(_), None) => Transition::Close,
        (Some(a), Some(b)) if a == b => Transition::Keep,
        (Some(_), Some(_)) => Transition::Reopen,
    }
}

/// The id of the interval an object's write of version `ordinal` opened: deterministic, so a
/// write retried or made by another replica names the same interval and nothing is counted
/// twice, and unique, as an object's versions only grow and a write opens at most one.
pub fn interval_id(object_id: &str, ordinal: i64) -> String {
    format!("{object_id}.{ordinal}")
}

/// The meters the query answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meter {
    /// Resource-seconds of allocated objects.
    Allocation,
    /// Bytes through ExternalIPs and NAT gateways.
    Bandwidth,
}

impl FromStr for Meter {
    type Err = crate::Invalid;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allocation" => Ok(Meter::Allocation),
            "bandwidth" => Ok(Meter::Bandwidth),
            _ => Err(crate::Invalid::new(
                "meter",
                format!("unknown meter {s:?}: allocation or bandwidth"),
            )),
        }
    }
}

impl fmt::Display for Meter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Meter::Allocation => "allocation",
            Meter::Bandwidth => "bandwidth",
        })
    }
}

/// The dimensions usage can be grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dimension {
    /// The owning tenant's name (its identity in the API).
    Tenant,
    /// The owning tenant's object id.
    TenantId,
    /// The object's kind (`VirtualNetwork`, `ExternalIP`, …).
    Kind,
    /// The object's id.
    Object,
    /// The NetworkClass of the VirtualNetwork the object is or belongs to.
    NetworkClass,
    /// `ipv4`, `ipv6` or `dual` (ExternalIP, Subnet).
    IpFamily,
    /// `true`/`false` (ExternalIP).
    Attached,
    /// The kind of the object the usage is attributed to.
    ParentKind,
    /// The id of the object the usage is attributed to.
    Parent,
}

impl Dimension {
    /// Every dimension, in the order of the answer's columns.
    pub const ALL: [Dimension; 9] = [
        Dimension::Tenant,
        Dimension::TenantId,
        Dimension::Kind,
        Dimension::Object,
        Dimension::NetworkClass,
        Dimension::IpFamily,
        Dimension::Attached,
        Dimension::ParentKind,
        Dimension::Parent,
    ];

    /// The dimension's name in `group_by` and in the answer.
    pub fn name(self) -> &'static str {
        match self {
            Dimension::Tenant => "tenant",
            Dimension::TenantId => "tenant_id",
            Dimension::Kind => "kind",
            Dimension::Object => "object",
            Dimension::NetworkClass => "network_class",
            Dimension::IpFamily => "ip_family",
            Dimension::Attached => "attached",
            Dimension::ParentKind => "parent_kind",
            Dimension::Parent => "parent",
        }
    }

    /// Parses a `group_by` list (comma-separated names, each once).
    pub fn parse_list(list: &str) -> Result<Vec<Dimension>, crate::Invalid> {
        let mut out = Vec::new();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let Some(d) = Dimension::ALL.into_iter().find(|d| d.name() == name) else {
                let known: Vec<&str> = Dimension::ALL.iter().map(|d| d.name()).collect();
                return Err(crate::Invalid::new(
                    "group_by",
                    format!("unknown dimension {name:?}: one of {}", known.join(", ")),
                ));
            };
            if out.contains(&d) {
                return Err(crate::Invalid::new(
                    "group_by",
                    format!("dimension {name:?} given twice"),
                ));
            }
            out.push(d);
        }
        Ok(out)
    }
}

/// The dimensions an interval is attributed to, resolved when it opens and kept as they were.
/// Values a kind does not have are empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Dimensions {
    pub tenant: String,
    pub tenant_id: String,
    pub kind: String,
    pub object: String,
    pub object_name: String,
    pub network_class: String,
    pub ip_family: String,
    pub attached: String,
    pub parent_kind: String,
    pub parent: String,
}

impl Dimensions {
    /// The value of one dimension.
    pub fn get(&self, d: Dimension) -> &str {
        match d {
            Dimension::Tenant => &self.tenant,
            Dimension::TenantId => &self.tenant_id,
            Dimension::Kind => &self.kind,
            Dimension::Object => &self.object,
            Dimension::NetworkClass => &self.network_class,
            Dimension::IpFamily => &self.ip_family,
            Dimension::Attached => &self.attached,
            Dimension::ParentKind => &self.parent_kind,
            Dimension::Parent => &self.parent,
        }
    }
}

/// The IP family of a Subnet or ExternalIP body: `ipv4`, `ipv6` or `dual` (empty when unknown).
pub fn ip_family(kind: Kind, body: &Value) -> String {
    let has = |path: &str| {
        body.pointer(path)
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
    };
    match kind {
        Kind::Subnet => match (has("/spec/ipv4_cidr"), has("/spec/ipv6_cidr")) {
            (true, true) => "dual".into(),
            (true, false) => "ipv4".into(),
            (false, true) => "ipv6".into(),
            (false, false) => String::new(),
        },
        Kind::ExternalIp => {
            let address = body.pointer("/status/address").and_then(Value::as_str);
            match address.map(|a| a.contains(':')) {
                Some(true) => "ipv6".into(),
                Some(false) => "ipv4".into(),
                None => match body.pointer("/spec/ip_family").and_then(Value::as_str) {
                    Some("IP_FAMILY_IPV6") => "ipv6".into(),
                    _ => "ipv4".into(),
                },
            }
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests;
