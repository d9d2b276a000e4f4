//! Bandwidth metering: the bytes each NAT path (an ExternalIPAttachment's DNAT, a NATGateway's
//! SNAT) moved, accumulated per 60-second bucket from the dataplane's cumulative counters.
//!
//! The dataplane's counters are cumulative and may start again from zero (a rebuild, a
//! restart). The store keeps the last raw reading of each counter (`traffic_counters`) and adds
//! only the difference to the bucket the reading falls in (`traffic_usage`): a reading below
//! the last one, or one of another counter incarnation (`epoch`), means the counter was
//! recreated, and then the new reading itself is what it counted since. So a reset neither
//! loses nor doubles bytes, and reading the same counter twice adds nothing. Reading and
//! accumulating happen in one transaction.
//!
//! The SQL is written once here and expanded once per backend by [`traffic_statements!`].

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, TimeZone, Utc};

/// The length of a usage bucket: bytes are accumulated per counter and per bucket of this many
/// seconds (aligned on the Unix epoch), the bucket in which the reading was taken.
pub const BUCKET_SECONDS: i64 = 60;

/// The stored spelling of an ExternalIPAttachment's DNAT path.
pub const KIND_EXTERNAL_IP_ATTACHMENT: &str = "external_ip_attachment";
/// The stored spelling of a NATGateway's SNAT path.
pub const KIND_NAT_GATEWAY: &str = "nat_gateway";

/// One reading of one counter, with the object it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrafficSample {
    /// [`KIND_EXTERNAL_IP_ATTACHMENT`] or [`KIND_NAT_GATEWAY`].
    pub kind: String,
    /// The attachment's or the gateway's id.
    pub object_id: String,
    /// The name of the tenant owning the object.
    pub tenant: String,
    /// The id of the tenant owning the object (its Tenant object's): what usage queries
    /// select by.
    pub tenant_id: String,
    /// The ExternalIP whose address the path uses.
    pub external_ip_id: String,
    /// The counter's incarnation as the dataplane tells it (empty when unknown).
    pub epoch: String,
    /// Cumulative bytes into the tenant's network.
    pub ingress_bytes: u64,
    /// Cumulative bytes out of the tenant's network.
    pub egress_bytes: u64,
}

/// The bytes one path moved in one bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrafficUsageRow {
    /// The name of the tenant owning the object.
    pub tenant: String,
    /// The id of the tenant owning the object ('' for rows whose owner could not be told).
    pub tenant_id: String,
    /// [`KIND_EXTERNAL_IP_ATTACHMENT`] or [`KIND_NAT_GATEWAY`].
    pub kind: String,
    /// The attachment's or the gateway's id.
    pub object_id: String,
    /// The ExternalIP whose address the path uses.
    pub external_ip_id: String,
    /// Start of the [`BUCKET_SECONDS`] bucket.
    pub bucket_start: DateTime<Utc>,
    /// Bytes into the tenant's network in the bucket.
    pub ingress_bytes: i64,
    /// Bytes out of the tenant's network in the bucket.
    pub egress_bytes: i64,
}

/// A counter's raw reading as kept between sweeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// The counter's incarnation (empty when the dataplane cannot tell).
    pub epoch: String,
    /// Cumulative ingress bytes.
    pub ingress: u64,
    /// Cumulative egress bytes.
    pub egress: u64,
}

/// What a new reading adds to the usage, given the last stored reading of the same counter:
/// - no last reading: the counter counts from its creation, so all of it;
/// - another epoch, or either direction below the last reading: the counter was recreated and
///   started again from zero, so the new reading itself;
/// - otherwise the growth since the last reading.
pub fn delta(last: Option<&Reading>, now: &Reading) -> (u64, u64) {
    match last {
        Some(last)
            if last.epoch == now.epoch
                && now.ingress >= last.ingress
                && now.egress >= last.egress =>
        {
            (now.ingress - last.ingress, now.egress - last.egress)
        }
        _ => (now.ingress, now.egress),
    }
}

/// The start (Unix seconds) of the bucket `at` falls in.
pub fn bucket_of(at: DateTime<Utc>) -> i64 {
    at.timestamp().div_euclid(BUCKET_SECONDS) * BUCKET_SECONDS
}

/// A bucket start (Unix seconds) as a time.
pub(crate) fn bucket_time(start: i64) -> crate::Result<DateTime<Utc>> {
    Utc.timestamp_opt(start, 0)
        .single()
        .ok_or_else(|| crate::StoreError::Corrupt(format!("bucket start {start} is not a time")))
}

/// Bytes as stored (BIGINT): counters beyond `i64::MAX` bytes are held at it.
pub(crate) fn stored(bytes: u64) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

/// A stored byte count read back (never negative when written by [`stored`]).
pub(crate) fn loaded(bytes: i64) -> u64 {
    u64::try_from(bytes).unwrap_or(0)
}

/// A bucket row as the periodic usage records read it: its bytes and how many of them earlier
/// records already carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportRow {
    /// [`KIND_EXTERNAL_IP_ATTACHMENT`] or [`KIND_NAT_GATEWAY`].
    pub kind: String,
    /// The attachment's or the gateway's id.
    pub object_id: String,
    /// The ExternalIP whose address the path uses.
    pub external_ip_id: String,
    /// Start of the bucket (Unix seconds).
    pub bucket_start: i64,
    pub ingress_bytes: i64,
    pub egress_bytes: i64,
    /// Of `ingress_bytes`, what usage records already carried.
    pub reported_ingress: i64,
    /// Of `egress_bytes`, what usage records already carried.
    pub reported_egress: i64,
}

/// The metered object whose intervals a path's bytes belong to — the same attribution as the
/// usage query's: a NAT gateway's SNAT path its NATGateway, an attachment's DNAT path the
/// ExternalIP it uses. So no byte belongs to two objects.
pub fn metered_object<'a>(kind: &str, object_id: &'a str, external_ip_id: &'a str) -> &'a str {
    if kind == KIND_NAT_GATEWAY {
        object_id
    } else {
        external_ip_id
    }
}

/// The bytes the usage records being written now carry, for the objects in `recording` (those
/// with an open ExternalIP or NATGateway interval recorded now): per object, what its rows
/// counted beyond what earlier records carried; and the rows whose carried counts move up to
/// what they hold. Rows of objects not recorded now keep their uncarried bytes for the
/// object's next record. Each byte is carried once: a row's carried count only grows, to the
/// bytes read in the same transaction, and bytes added later are carried by a later record.
pub fn due<'a>(
    rows: &'a [ReportRow],
    recording: &HashSet<&str>,
) -> (HashMap<String, (i64, i64)>, Vec<&'a ReportRow>) {
    let mut bytes: HashMap<String, (i64, i64)> = HashMap::new();
    let mut carried = Vec::new();
    for r in rows {
        let object = metered_object(&r.kind, &r.object_id, &r.external_ip_id);
        if !recording.contains(object) {
            continue;
        }
        let ingress = (r.ingress_bytes - r.reported_ingress).max(0);
        let egress = (r.egress_bytes - r.reported_egress).max(0);
        let sum = bytes.entry(object.to_string()).or_default();
        sum.0 = sum.0.saturating_add(ingress);
        sum.1 = sum.1.saturating_add(egress);
        carried.push(r);
    }
    (bytes, carried)
}

/// `record_traffic` and `traffic_usage` for one backend: `pool` and `db` its sqlx types,
/// `lock` what follows the last-reading `SELECT` to lock the row until commit (PostgreSQL:
/// `FOR UPDATE`; SQLite serialises writers itself).
macro_rules! traffic_statements {
    (pool: $pool:ty, lock: $lock:literal) => {
        /// Adds the growth of every sample's counter to its bucket and keeps the samples as the
        /// last readings, in one transaction.
        pub(crate) async fn record_traffic(
            pool: &$pool,
            at: chrono::DateTime<chrono::Utc>,
            samples: &[crate::traffic::TrafficSample],
        ) -> crate::Result<()> {
            use crate::traffic::{Reading, bucket_of, delta, loaded, stored};
            let bucket = bucket_of(at);
            let mut tx = pool.begin().await?;
            for s in samples {
                let last: Option<(String, i64, i64)> = sqlx::query_as(concat!(
                    "SELECT epoch, ingress_bytes, egress_bytes FROM traffic_counters WHERE kind = $1 AND object_id = $2",
                    $lock
                ))
                .bind(&s.kind)
                .bind(&s.object_id)
                .fetch_optional(&mut *tx)
                .await?;
                let last = last.map(|(epoch, i, e)| Reading {
                    epoch,
                    ingress: loaded(i),
                    egress: loaded(e),
                });
                let now = Reading {
                    epoch: s.epoch.clone(),
                    ingress: s.ingress_bytes,
                    egress: s.egress_bytes,
                };
                let (ingress, egress) = delta(last.as_ref(), &now);
                sqlx::query(
                    "INSERT INTO traffic_counters (kind, object_id, epoch, ingress_bytes, egress_bytes, read_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (kind, object_id) DO UPDATE SET epoch = excluded.epoch, ingress_bytes = excluded.ingress_bytes, egress_bytes = excluded.egress_bytes, read_at = excluded.read_at",
                )
                .bind(&s.kind)
                .bind(&s.object_id)
                .bind(&s.epoch)
                .bind(stored(s.ingress_bytes))
                .bind(stored(s.egress_bytes))
                .bind(at.timestamp())
                .execute(&mut *tx)
                .await?;
                if ingress == 0 && egress == 0 {
                    continue;
                }
                sqlx::query(
                    "INSERT INTO traffic_usage (kind, object_id, bucket_start, tenant, tenant_id, external_ip_id, ingress_bytes, egress_bytes) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (kind, object_id, bucket_start) DO UPDATE SET ingress_bytes = traffic_usage.ingress_bytes + excluded.ingress_bytes, egress_bytes = traffic_usage.egress_bytes + excluded.egress_bytes",
                )
                .bind(&s.kind)
                .bind(&s.object_id)
                .bind(bucket)
                .bind(&s.tenant)
                .bind(&s.tenant_id)
                .bind(&s.external_ip_id)
                .bind(stored(ingress))
                .bind(stored(egress))
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            Ok(())
        }

        /// The buckets starting in `[from, to)`, of the tenant with id `tenant_id` when given,
        /// in time order.
        pub(crate) async fn traffic_usage(
            pool: &$pool,
            from: chrono::DateTime<chrono::Utc>,
            to: chrono::DateTime<chrono::Utc>,
            tenant_id: Option<&str>,
        ) -> crate::Result<Vec<crate::traffic::TrafficUsageRow>> {
            let rows: Vec<(String, String, String, String, String, i64, i64, i64)> = sqlx::query_as(
                "SELECT tenant, tenant_id, kind, object_id, external_ip_id, bucket_start, ingress_bytes, egress_bytes FROM traffic_usage WHERE bucket_start >= $1 AND bucket_start < $2 AND ($3 IS NULL OR tenant_id = $3) ORDER BY bucket_start, kind, object_id",
            )
            .bind(from.timestamp() + i64::from(from.timestamp_subsec_nanos() > 0))
            .bind(to.timestamp() + i64::from(to.timestamp_subsec_nanos() > 0))
            .bind(tenant_id)
            .fetch_all(pool)
            .await?;
            rows.into_iter()
                .map(
                    |(tenant, tenant_id, kind, object_id, external_ip_id, start, ingress, egress)| {
                        Ok(crate::traffic::TrafficUsageRow {
                            tenant,
                            tenant_id,
                            kind,
                            object_id,
                            external_ip_id,
                            bucket_start: crate::traffic::bucket_time(start)?,
                            ingress_bytes: ingress,
                            egress_bytes: egress,
                        })
                    },
                )
                .collect()
        }
    };
}
pub(crate) use traffic_statements;

#[cfg(test)]
mod tests {
    use super::*;

    fn r(epoch: &str, ingress: u64, egress: u64) -> Reading {
        Reading {
            epoch: epoch.into(),
            ingress,
            egress,
        }
    }

    #[test]
    fn a_first_reading_counts_whole() {
        assert_eq!(delta(None, &r("", 100, 7)), (100, 7));
    }

    #[test]
    fn a_growing_counter_adds_its_growth_and_a_repeat_adds_nothing() {
        assert_eq!(delta(Some(&r("a", 100, 7)), &r("a", 150, 9)), (50, 2));
        assert_eq!(delta(Some(&r("a", 150, 9)), &r("a", 150, 9)), (0, 0));
    }

    #[test]
    fn a_reading_below_the_last_is_a_reset_and_counts_whole() {
        assert_eq!(delta(Some(&r("", 1000, 50)), &r("", 30, 60)), (30, 60));
        assert_eq!(delta(Some(&r("", 1000, 50)), &r("", 2000, 10)), (2000, 10));
    }

    #[test]
    fn a_new_epoch_is_a_reset_even_when_the_reading_grew() {
        // Recreated, then counted past the old reading before the next sweep.
        assert_eq!(delta(Some(&r("1", 100, 10)), &r("2", 500, 20)), (500, 20));
    }

    #[test]
    fn a_counter_that_disappears_and_reappears_counts_from_zero_again() {
        // Gone from the dataplane for a few sweeps (no sample), then recreated: its first
        // reading after that is below the last kept reading, or of a new epoch.
        let kept = r("7", 4096, 4096);
        assert_eq!(delta(Some(&kept), &r("7", 10, 0)), (10, 0));
        assert_eq!(delta(Some(&kept), &r("8", 5000, 5000)), (5000, 5000));
    }

    fn row(
        kind: &str,
        object: &str,
        eip: &str,
        bytes: (i64, i64),
        carried: (i64, i64),
    ) -> ReportRow {
        ReportRow {
            kind: kind.into(),
            object_id: object.into(),
            external_ip_id: eip.into(),
            bucket_start: 0,
            ingress_bytes: bytes.0,
            egress_bytes: bytes.1,
            reported_ingress: carried.0,
            reported_egress: carried.1,
        }
    }

    #[test]
    fn a_record_carries_what_earlier_records_did_not() {
        let rows = [
            // Carried in part: the rest is due.
            row(
                KIND_EXTERNAL_IP_ATTACHMENT,
                "a1",
                "e",
                (1500, 150),
                (1000, 100),
            ),
            // Another attachment of the same ExternalIP, never carried.
            row(KIND_EXTERNAL_IP_ATTACHMENT, "a2", "e", (30, 3), (0, 0)),
            // A NAT gateway using the same ExternalIP: its bytes are the gateway's.
            row(KIND_NAT_GATEWAY, "gw", "e", (9, 90), (7, 70)),
            // An object not recorded now keeps its bytes for its next record.
            row(KIND_EXTERNAL_IP_ATTACHMENT, "a3", "other", (5, 5), (0, 0)),
        ];
        let recording: HashSet<&str> = ["e", "gw"].into_iter().collect();
        let (bytes, carried) = due(&rows, &recording);
        assert_eq!(bytes["e"], (500 + 30, 50 + 3));
        assert_eq!(bytes["gw"], (2, 20));
        assert!(!bytes.contains_key("other"));
        let carried: Vec<&str> = carried.iter().map(|r| r.object_id.as_str()).collect();
        assert_eq!(carried, ["a1", "a2", "gw"]);
    }

    #[test]
    fn records_in_turn_carry_every_byte_once() {
        // A bucket filled over several sweeps, recorded between them: the records' sum is the
        // bucket's total, and a record after the last sweep carries nothing.
        let recording: HashSet<&str> = ["e"].into_iter().collect();
        let mut r = row(KIND_EXTERNAL_IP_ATTACHMENT, "a", "e", (0, 0), (0, 0));
        let mut sum = (0, 0);
        for (i, e) in [(100, 1), (0, 0), (250, 7), (1, 0)] {
            r.ingress_bytes += i;
            r.egress_bytes += e;
            let (bytes, carried) = due(std::slice::from_ref(&r), &recording);
            let got = bytes.get("e").copied().unwrap_or((0, 0));
            sum = (sum.0 + got.0, sum.1 + got.1);
            if !carried.is_empty() {
                r.reported_ingress = r.ingress_bytes;
                r.reported_egress = r.egress_bytes;
            }
        }
        assert_eq!(sum, (351, 8));
        let (bytes, _) = due(std::slice::from_ref(&r), &recording);
        assert_eq!(bytes["e"], (0, 0));
    }

    #[test]
    fn buckets_are_minutes_aligned_on_the_epoch() {
        let at = Utc.timestamp_opt(120 + 59, 999).unwrap();
        assert_eq!(bucket_of(at), 120);
        assert_eq!(bucket_of(Utc.timestamp_opt(180, 0).unwrap()), 180);
        assert_eq!(bucket_of(Utc.timestamp_opt(-1, 0).unwrap()), -60);
    }
}
