//! PostgreSQL applies an object write's interval changes directly, in the write's transaction:
//! replicas write concurrently, and the row locks of `usage_intervals` order them.

use sqlx::postgres::PgConnection;

use crate::Result;
use crate::metering::IntervalWrites;

/// Writes one object's interval changes: the close, the opening, the finish of its deletion
/// and the outbox rows, in this order.
pub(super) async fn write(
    conn: &mut PgConnection,
    object_id: &str,
    w: &IntervalWrites,
) -> Result<()> {
    if let Some(c) = &w.close {
        sqlx::query(
            "UPDATE usage_intervals SET ended_us = $1, end_reason = $2, deletion_requested_us = $3 \
             WHERE id = $4 AND ended_us IS NULL",
        )
        .bind(c.ended_us)
        .bind(c.reason)
        .bind(c.deletion_requested_us)
        .bind(&c.id)
        .execute(&mut *conn)
        .await?;
    }
    if let Some(o) = &w.open {
        let d = &o.dims;
        sqlx::query(
            "INSERT INTO usage_intervals (id, object_id, ordinal, signature, tenant, tenant_id, \
             kind, object_name, network_class, ip_family, attached, parent_kind, parent_id, \
             started_us, reported_us) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14)",
        )
        .bind(&o.id)
        .bind(&d.object)
        .bind(o.ordinal)
        .bind(&o.signature)
        .bind(&d.tenant)
        .bind(&d.tenant_id)
        .bind(&d.kind)
        .bind(&d.object_name)
        .bind(&d.network_class)
        .bind(&d.ip_family)
        .bind(&d.attached)
        .bind(&d.parent_kind)
        .bind(&d.parent)
        .bind(o.started_us)
        .execute(&mut *conn)
        .await?;
    }
    if let Some(at) = w.finished_us {
        sqlx::query(
            "UPDATE usage_intervals SET deletion_finished_us = $1 WHERE id = \
             (SELECT id FROM usage_intervals WHERE object_id = $2 ORDER BY ordinal DESC LIMIT 1) \
             AND deletion_finished_us IS NULL",
        )
        .bind(at)
        .bind(object_id)
        .execute(&mut *conn)
        .await?;
    }
    if !w.outbox.is_empty() {
        let mut q =
            sqlx::QueryBuilder::new("INSERT INTO metering_outbox (event_id, subject, payload) ");
        q.push_values(&w.outbox, |mut row, e| {
            row.push_bind(&e.event_id)
                .push_bind(&e.subject)
                .push_bind(&e.payload);
        });
        q.push(" ON CONFLICT (event_id) DO NOTHING");
        q.build().execute(&mut *conn).await?;
    }
    Ok(())
}
