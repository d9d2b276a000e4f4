//! PostgreSQL side of replica coordination: registrations, shard leases with fencing tokens,
//! and journalled write batches of shared driver namespaces.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Postgres, Row, Transaction};

use crate::lease::{Held, Leases, ReplicaInfo, ReplicaRow, ShardLease};
use crate::shared_kv::{KvBatch, Missed};
use crate::{PostgresStore, Result};

/// Journal rows older than this many generations are pruned (checked every
/// [`PRUNE_EVERY`] generations); a replica further behind reloads the namespace.
const JOURNAL_KEEP: i64 = 8192;
const PRUNE_EVERY: i64 = 256;
/// Registrations gone for longer than this are forgotten.
const FORGET_AFTER_SECS: f64 = 3600.0;

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

const REPLICA_COLUMNS: &str =
    "id, name, address, dataplane, started_at, expires_at, expires_at > now() AS live";

fn replica_row(r: &sqlx::postgres::PgRow) -> Result<ReplicaRow> {
    Ok(ReplicaRow {
        info: ReplicaInfo {
            id: r.try_get("id")?,
            name: r.try_get("name")?,
            address: r.try_get("address")?,
            dataplane: r.try_get("dataplane")?,
        },
        started_at: r.try_get::<DateTime<Utc>, _>("started_at")?,
        expires_at: r.try_get::<DateTime<Utc>, _>("expires_at")?,
        live: r.try_get("live")?,
    })
}

/// Registers `me` (or extends its registration) until `ttl` from now.
async fn register(conn: &mut sqlx::PgConnection, me: &ReplicaInfo, ttl: Duration) -> Result<()> {
    sqlx::query(
        "INSERT INTO replicas (id, name, address, dataplane, started_at, expires_at) \
         VALUES ($1, $2, $3, $4, now(), now() + make_interval(secs => $5)) \
         ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at",
    )
    .bind(&me.id)
    .bind(&me.name)
    .bind(&me.address)
    .bind(me.dataplane)
    .bind(secs(ttl))
    .execute(conn)
    .await?;
    Ok(())
}

#[async_trait]
impl Leases for PostgresStore {
    async fn join(&self, me: &ReplicaInfo, ttl: Duration) -> Result<Vec<ReplicaRow>> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('osac-replicas'))")
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM replicas WHERE expires_at < now() - make_interval(secs => $1)")
            .bind(FORGET_AFTER_SECS)
            .execute(&mut *tx)
            .await?;
        let others = sqlx::query(&format!(
            "SELECT {REPLICA_COLUMNS} FROM replicas WHERE expires_at > now() AND id <> $1 ORDER BY started_at"
        ))
        .bind(&me.id)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(replica_row)
        .collect::<Result<Vec<_>>>()?;
        register(&mut tx, me, ttl).await?;
        tx.commit().await?;
        Ok(others)
    }

    async fn heartbeat(&self, me: &ReplicaInfo, ttl: Duration) -> Result<Vec<ReplicaRow>> {
        // Re-inserts a registration that was forgotten meanwhile (a long pause).
        let mut conn = self.pool.acquire().await?;
        register(&mut conn, me, ttl).await?;
        sqlx::query(&format!(
            "SELECT {REPLICA_COLUMNS} FROM replicas WHERE expires_at > now() ORDER BY started_at"
        ))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(replica_row)
        .collect()
    }

    async fn renew(&self, me: &str, shards: &[i32], ttl: Duration) -> Result<Vec<Held>> {
        Ok(sqlx::query_as(
            "UPDATE shard_leases SET expires_at = now() + make_interval(secs => $3) \
             WHERE owner = $1 AND shard = ANY($2) AND expires_at > now() RETURNING shard, fence",
        )
        .bind(me)
        .bind(shards)
        .bind(secs(ttl))
        .fetch_all(&self.pool)
        .await?)
    }

    async fn acquire(&self, me: &str, shards: &[i32], ttl: Duration) -> Result<Vec<Held>> {
        // A lease row that a transaction fenced with it still holds (`FOR KEY SHARE`, see
        // `fence_holds`) is skipped, not waited for: its holder's write commits under the
        // token it checked, and a later round takes the shard. Only this takeover conflicts
        // with the fence's lock; the owner's renewals never wait for its writers.
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO shard_leases (shard, owner, fence, expires_at) \
             SELECT s, NULL, 0, now() FROM unnest($1::int4[]) AS s ON CONFLICT (shard) DO NOTHING",
        )
        .bind(shards)
        .execute(&mut *tx)
        .await?;
        let mut taken: Vec<Held> = sqlx::query_as(
            "UPDATE shard_leases l SET owner = $1, fence = l.fence + 1, \
                 expires_at = now() + make_interval(secs => $3) \
             FROM (SELECT shard FROM shard_leases \
                   WHERE shard = ANY($2) AND (owner IS NULL OR expires_at <= now()) \
                   FOR UPDATE SKIP LOCKED) free \
             WHERE l.shard = free.shard \
             RETURNING l.shard, l.fence",
        )
        .bind(me)
        .bind(shards)
        .bind(secs(ttl))
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        taken.sort_unstable();
        Ok(taken)
    }

    async fn release(&self, me: &str, shards: &[i32]) -> Result<()> {
        sqlx::query(
            "UPDATE shard_leases SET owner = NULL, expires_at = now() WHERE owner = $1 AND shard = ANY($2)",
        )
        .bind(me)
        .bind(shards)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn leave(&self, me: &str) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE shard_leases SET owner = NULL, expires_at = now() WHERE owner = $1")
            .bind(me)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE replicas SET expires_at = now() WHERE id = $1")
            .bind(me)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn replicas(&self) -> Result<Vec<ReplicaRow>> {
        sqlx::query(&format!(
            "SELECT {REPLICA_COLUMNS} FROM replicas ORDER BY started_at"
        ))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(replica_row)
        .collect()
    }

    async fn shard_leases(&self) -> Result<Vec<ShardLease>> {
        sqlx::query(
            "SELECT shard, owner, fence, expires_at, (owner IS NOT NULL AND expires_at > now()) AS live \
             FROM shard_leases ORDER BY shard",
        )
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|r| {
            Ok(ShardLease {
                shard: r.try_get("shard")?,
                owner: r.try_get("owner")?,
                fence: r.try_get("fence")?,
                expires_at: r.try_get::<DateTime<Utc>, _>("expires_at")?,
                live: r.try_get("live")?,
            })
        })
        .collect()
    }
}

/// Fences as the three arrays a statement binds (shards, owners, tokens; the statement pairs
/// them up by `array_position` of the shard).
pub(crate) fn fence_arrays(fences: &[crate::Fence]) -> (Vec<i32>, Vec<&str>, Vec<i64>) {
    let shards = fences.iter().map(|f| f.0).collect();
    let owners = fences.iter().map(|f| f.1.as_str()).collect();
    let tokens = fences.iter().map(|f| f.2).collect();
    (shards, owners, tokens)
}

/// Checks a fencing token inside `tx` and key-share-locks the lease row until `tx` ends: a
/// takeover (`acquire`, `FOR UPDATE`) cannot take the shard while the transaction is open,
/// while the owner's renewals (an `UPDATE` of `expires_at` only, which takes no lock that
/// conflicts with `FOR KEY SHARE`) and other fenced writers never wait for it. (`FOR SHARE`
/// made every renewal wait for the writers in flight, and writers queued behind the renewal:
/// a convoy only PostgreSQL's deadlock check, after `deadlock_timeout`, broke up.)
pub(crate) async fn fence_holds(
    tx: &mut sqlx::PgConnection,
    shard: i32,
    replica: &str,
    token: i64,
) -> Result<bool> {
    let row = sqlx::query(
        "SELECT 1 FROM shard_leases WHERE shard = $1 AND owner = $2 AND fence = $3 AND expires_at > now() FOR KEY SHARE",
    )
    .bind(shard)
    .bind(replica)
    .bind(token)
    .fetch_optional(tx)
    .await?;
    Ok(row.is_some())
}

/// Locks the row of namespace `ns` and reads its generation and pruning horizon (None: it was
/// never written).
async fn lock_namespace(tx: &mut sqlx::PgConnection, ns: &str) -> Result<Option<(i64, i64)>> {
    Ok(sqlx::query_as(
        "SELECT generation, pruned_below FROM kv_namespaces WHERE ns = $1 FOR UPDATE",
    )
    .bind(ns)
    .fetch_optional(tx)
    .await?)
}

/// A locked write batch of a shared namespace.
pub(crate) struct PgKvBatch {
    tx: Transaction<'static, Postgres>,
    ns: String,
    generation: i64,
    pruned_below: i64,
    missed: Option<Missed>,
}

impl PgKvBatch {
    pub(crate) async fn open(store: &PostgresStore, ns: &str, seen: i64) -> Result<Self> {
        let mut tx = store.pool.begin().await?;
        // Writers of a namespace take turns on its row (`FOR UPDATE` also reads the row as the
        // last writer committed it). Before its first write there is no row: they take turns
        // on an advisory lock, and look again — the row may have come meanwhile.
        let mut current = lock_namespace(&mut tx, ns).await?;
        if current.is_none() {
            sqlx::query("SELECT pg_advisory_xact_lock(hashtext('osac-kv:' || $1))")
                .bind(ns)
                .execute(&mut *tx)
                .await?;
            current = lock_namespace(&mut tx, ns).await?;
        }
        let (generation, pruned_below) = current.unwrap_or((0, 0));
        let missed = if generation == seen {
            Missed::Changes(Vec::new())
        } else if seen >= pruned_below && seen < generation {
            Missed::Changes(
                sqlx::query_as(
                    "SELECT key, value FROM kv_journal WHERE ns = $1 AND generation > $2 ORDER BY generation, key",
                )
                .bind(ns)
                .bind(seen)
                .fetch_all(&mut *tx)
                .await?,
            )
        } else {
            Missed::Everything(
                sqlx::query_as("SELECT key, value FROM kv WHERE ns = $1 ORDER BY key")
                    .bind(ns)
                    .fetch_all(&mut *tx)
                    .await?,
            )
        };
        Ok(PgKvBatch {
            tx,
            ns: ns.to_string(),
            generation,
            pruned_below,
            missed: Some(missed),
        })
    }
}

#[async_trait]
impl KvBatch for PgKvBatch {
    fn generation(&self) -> i64 {
        self.generation
    }

    fn take_missed(&mut self) -> Missed {
        self.missed.take().unwrap_or(Missed::Changes(Vec::new()))
    }

    async fn fence_holds(&mut self, shard: i32, replica: &str, token: i64) -> Result<bool> {
        fence_holds(&mut self.tx, shard, replica, token).await
    }

    async fn commit(self: Box<Self>, changes: &[(String, Option<String>)]) -> Result<i64> {
        let mut this = *self;
        let (puts, deletes) = crate::kv_coalesce(changes);
        if puts.is_empty() && deletes.is_empty() {
            this.tx.commit().await?;
            return Ok(this.generation);
        }
        let generation = this.generation + 1;
        let ns = this.ns.as_str();
        let mut pruned_below = this.pruned_below;
        if generation % PRUNE_EVERY == 0 && generation > JOURNAL_KEEP {
            pruned_below = generation - JOURNAL_KEEP;
            sqlx::query("DELETE FROM kv_journal WHERE ns = $1 AND generation <= $2")
                .bind(ns)
                .bind(pruned_below)
                .execute(&mut *this.tx)
                .await?;
        }
        // The records, their journal entries and the namespace's new generation, in one
        // statement (each key once: the parts touch different rows).
        let rows = KvRows::of(&puts, &deletes);
        let statement = sqlx::query(
            "WITH puts AS ( \
                 INSERT INTO kv (ns, key, value) \
                 SELECT $1, k, v FROM unnest($2::text[], $3::text[]) AS u(k, v) \
                 ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value), \
             deletes AS (DELETE FROM kv WHERE ns = $1 AND key = ANY($4::text[])), \
             journal AS ( \
                 INSERT INTO kv_journal (ns, generation, key, value) \
                 SELECT $1, $5, k, v FROM unnest($6::text[], $7::text[]) AS u(k, v)) \
             INSERT INTO kv_namespaces (ns, generation, pruned_below) VALUES ($1, $5, $8) \
             ON CONFLICT (ns) DO UPDATE \
             SET generation = excluded.generation, pruned_below = excluded.pruned_below",
        );
        let statement = rows.bind_batch(statement, ns, generation);
        statement.bind(pruned_below).execute(&mut *this.tx).await?;
        this.tx.commit().await?;
        crate::count_write();
        Ok(generation)
    }
}

/// A batch's puts and deletes as the arrays its statement binds: the keys and values put, the
/// keys deleted, and the journal's entries (the puts, then the deletes with no value).
struct KvRows<'a> {
    put_keys: Vec<&'a str>,
    put_values: Vec<&'a str>,
    deletes: Vec<&'a str>,
    journal_keys: Vec<&'a str>,
    journal_values: Vec<Option<&'a str>>,
}

impl<'a> KvRows<'a> {
    /// Binds `$1`–`$7` of a batch's write statement: the namespace, the keys and values put,
    /// the keys deleted, the new generation, the journal's keys and values.
    fn bind_batch<'q>(
        &'q self,
        statement: sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>,
        ns: &'q str,
        generation: i64,
    ) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
        statement
            .bind(ns)
            .bind(&self.put_keys)
            .bind(&self.put_values)
            .bind(&self.deletes)
            .bind(generation)
            .bind(&self.journal_keys)
            .bind(&self.journal_values)
    }

    fn of(puts: &[(&'a str, &'a str)], deletes: &[&'a str]) -> Self {
        let (put_keys, put_values): (Vec<&str>, Vec<&str>) = puts.iter().copied().unzip();
        let journal_values = put_values
            .iter()
            .map(|v| Some(*v))
            .chain(deletes.iter().map(|_| None))
            .collect();
        let journal_keys = put_keys.iter().chain(deletes).copied().collect();
        KvRows {
            put_keys,
            put_values,
            deletes: deletes.to_vec(),
            journal_keys,
            journal_values,
        }
    }
}

/// The deletes of [`KV_WRITE_CURRENT`] (left out of a batch that deletes nothing).
macro_rules! kv_deletes {
    () => {
        "deletes AS ( \
             DELETE FROM kv WHERE ns = $1 AND key = ANY($4::text[]) \
               AND EXISTS (SELECT 1 FROM current)), "
    };
}
const KV_DELETES: &str = kv_deletes!();

/// The fast path's write: `$1` namespace, `$2`/`$3` keys and values put, `$4` keys deleted,
/// `$5` the new generation, `$6`/`$7` the journal's entries, `$8` the generation seen,
/// `$9`–`$11` the fences (see [`fence_arrays`]).
const KV_WRITE_CURRENT: &str = concat!(
    "WITH held AS ( \
         SELECT l.shard FROM shard_leases l \
         WHERE l.shard = ANY($9::int[]) \
           AND l.owner = ($10::text[])[array_position($9::int[], l.shard)] \
           AND l.fence = ($11::bigint[])[array_position($9::int[], l.shard)] \
           AND l.expires_at > now() FOR KEY SHARE OF l), \
     current AS ( \
         UPDATE kv_namespaces SET generation = $5 \
         WHERE ns = $1 AND generation = $8 \
           AND (SELECT count(*) FROM held) = cardinality($9::int[]) \
         RETURNING generation), \
     puts AS ( \
         INSERT INTO kv (ns, key, value) \
         SELECT $1, k, v FROM unnest($2::text[], $3::text[]) AS u(k, v) \
         WHERE EXISTS (SELECT 1 FROM current) \
         ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value), ",
    kv_deletes!(),
    "journal AS ( \
         INSERT INTO kv_journal (ns, generation, key, value) \
         SELECT $1, $5, k, v FROM unnest($6::text[], $7::text[]) AS u(k, v) \
         WHERE EXISTS (SELECT 1 FROM current)) \
     SELECT count(*) FROM current"
);

/// See [`crate::Store::kv_write_current`]: one statement, committed on its own. The
/// namespace's row is updated only while it is still at generation `seen` and every fence
/// holds (the lease rows are key-share-locked, as [`fence_holds`] does, until the statement
/// commits); the records and the journal are written only if that update happened. A
/// concurrent batch of another replica holds the namespace's row: this update waits for it,
/// then finds a newer generation and writes nothing.
pub(crate) async fn kv_write_current(
    pool: &sqlx::PgPool,
    ns: &str,
    seen: i64,
    fences: &[crate::Fence],
    changes: &[(String, Option<String>)],
) -> Result<Option<i64>> {
    let (puts, deletes) = crate::kv_coalesce(changes);
    let written = !puts.is_empty() || !deletes.is_empty();
    let generation = if written { seen + 1 } else { seen };
    // A namespace's first write makes its row, and pruning deletes journal rows: both take
    // the locked path.
    if written && (seen == 0 || (generation % PRUNE_EVERY == 0 && generation > JOURNAL_KEEP)) {
        return Ok(None);
    }
    let (shards, owners, tokens) = fence_arrays(fences);
    if !written {
        // Nothing to write: current if nobody wrote since (a namespace never written is at
        // generation 0) and the leases hold (no lock: the answers are as of this statement,
        // and nothing is written under them).
        let current: bool = sqlx::query_scalar(
            "SELECT COALESCE((SELECT generation FROM kv_namespaces WHERE ns = $1), 0) = $2 \
               AND (SELECT count(*) FROM shard_leases l \
                    WHERE l.shard = ANY($3::int[]) \
                      AND l.owner = ($4::text[])[array_position($3::int[], l.shard)] \
                      AND l.fence = ($5::bigint[])[array_position($3::int[], l.shard)] \
                      AND l.expires_at > now()) = cardinality($3::int[])",
        )
        .bind(ns)
        .bind(seen)
        .bind(&shards)
        .bind(&owners)
        .bind(&tokens)
        .fetch_one(pool)
        .await?;
        return Ok(current.then_some(seen));
    }
    let rows = KvRows::of(&puts, &deletes);
    // Without deletes the statement leaves their part out: the `key = ANY(…)` of an array of
    // unknown length made PostgreSQL plan the whole statement anew at every execution.
    let sql = if deletes.is_empty() {
        KV_WRITE_CURRENT.replace(KV_DELETES, "")
    } else {
        KV_WRITE_CURRENT.to_string()
    };
    let statement = sqlx::query(&sql);
    let applied: i64 = rows
        .bind_batch(statement, ns, generation)
        .bind(seen)
        .bind(&shards)
        .bind(&owners)
        .bind(&tokens)
        .fetch_one(pool)
        .await?
        .try_get(0)?;
    if applied == 0 {
        return Ok(None);
    }
    crate::count_write();
    Ok(Some(generation))
}
