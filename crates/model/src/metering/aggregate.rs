//! The usage query's arithmetic: intervals clipped to `[from, to)` and bandwidth rows, summed
//! per group of dimensions. Pure, so a closed period gives the same answer every time.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::{Dimension, Dimensions, Meter};

/// An interval as stored (not clipped).
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalRow {
    pub interval_id: String,
    pub dims: Dimensions,
    pub started_at: DateTime<Utc>,
    /// None while open.
    pub ended_at: Option<DateTime<Utc>>,
}

/// Bytes through one ExternalIP attachment or NAT gateway in one time bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BandwidthRow {
    /// The owning tenant's name.
    pub tenant: String,
    /// The owning tenant's id.
    pub tenant_id: String,
    /// `external_ip_attachment` or `nat_gateway`.
    pub kind: String,
    /// The attachment's or NAT gateway's id.
    pub object_id: String,
    /// The ExternalIP the bytes went through.
    pub external_ip_id: String,
    pub ingress_bytes: i64,
    pub egress_bytes: i64,
}

/// What to sum and how to group it.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageQuery {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// Open intervals count up to the earlier of this and `to`.
    pub now: DateTime<Utc>,
    /// None: both meters.
    pub meter: Option<Meter>,
    pub group_by: Vec<Dimension>,
}

/// One group of the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The value of each `group_by` dimension, by name.
    pub dimensions: BTreeMap<String, String>,
    /// Resource-seconds in microseconds (the answer rounds to seconds).
    pub resource_micros: i64,
    pub ingress_bytes: i64,
    pub egress_bytes: i64,
}

impl Group {
    /// Whole resource-seconds, rounded to the nearest.
    pub fn resource_seconds(&self) -> i64 {
        (self.resource_micros + 500_000).div_euclid(1_000_000)
    }
}

/// The microseconds of `row` inside `[q.from, min(q.to, q.now))` for an open one.
pub fn clipped_micros(q: &UsageQuery, row: &IntervalRow) -> i64 {
    let start = row.started_at.max(q.from);
    let end = row.ended_at.unwrap_or(q.now.min(q.to)).min(q.to);
    (end - start).num_microseconds().unwrap_or(0).max(0)
}

/// The dimensions of a bandwidth row: those of the ExternalIP (or NAT gateway) interval it
/// belongs to when one is known, else what the row itself says.
fn bandwidth_dims(row: &BandwidthRow, by_object: &BTreeMap<&str, &Dimensions>) -> Dimensions {
    let metered_object = match row.kind.as_str() {
        "nat_gateway" => row.object_id.as_str(),
        _ => row.external_ip_id.as_str(),
    };
    if let Some(d) = by_object.get(metered_object) {
        return (*d).clone();
    }
    Dimensions {
        tenant: row.tenant.clone(),
        tenant_id: row.tenant_id.clone(),
        kind: match row.kind.as_str() {
            "nat_gateway" => "NATGateway".into(),
            _ => "ExternalIP".into(),
        },
        object: metered_object.to_string(),
        ..Default::default()
    }
}

/// Sums intervals (resource-seconds) and bandwidth rows (bytes) per group of `q.group_by`,
/// groups in order of their dimension values.
pub fn aggregate(
    q: &UsageQuery,
    intervals: &[IntervalRow],
    bandwidth: &[BandwidthRow],
) -> Vec<Group> {
    let mut groups: BTreeMap<Vec<String>, Group> = BTreeMap::new();
    if q.meter != Some(Meter::Bandwidth) {
        for row in intervals {
            let micros = clipped_micros(q, row);
            if micros > 0 {
                let g = entry(&mut groups, &q.group_by, &row.dims);
                g.resource_micros = g.resource_micros.saturating_add(micros);
            }
        }
    }
    if q.meter != Some(Meter::Allocation) {
        // The latest interval of each object gives its dimensions (ordered by start).
        let mut latest: BTreeMap<&str, &IntervalRow> = BTreeMap::new();
        for row in intervals {
            let slot = latest.entry(row.dims.object.as_str()).or_insert(row);
            if row.started_at > slot.started_at {
                *slot = row;
            }
        }
        let by_object: BTreeMap<&str, &Dimensions> =
            latest.into_iter().map(|(k, v)| (k, &v.dims)).collect();
        for row in bandwidth {
            let g = entry(&mut groups, &q.group_by, &bandwidth_dims(row, &by_object));
            g.ingress_bytes = g.ingress_bytes.saturating_add(row.ingress_bytes);
            g.egress_bytes = g.egress_bytes.saturating_add(row.egress_bytes);
        }
    }
    groups.into_values().collect()
}

/// The group of `d` (created empty when new).
fn entry<'a>(
    groups: &'a mut BTreeMap<Vec<String>, Group>,
    group_by: &[Dimension],
    d: &Dimensions,
) -> &'a mut Group {
    let key: Vec<String> = group_by.iter().map(|g| d.get(*g).to_string()).collect();
    groups.entry(key).or_insert_with(|| Group {
        dimensions: group_by
            .iter()
            .map(|g| (g.name().to_string(), d.get(*g).to_string()))
            .collect(),
        resource_micros: 0,
        ingress_bytes: 0,
        egress_bytes: 0,
    })
}
