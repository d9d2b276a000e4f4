//! The statements both SQL stores run word for word. They are written once here and expanded
//! once per backend by [`sql_common_statements!`]: written generically over `sqlx::Database`,
//! every function would carry more executor, encode and decode bounds than it has lines.
//!
//! Parameters are written `$N`, which PostgreSQL takes and sqlx's SQLite driver binds by
//! number too. What differs between the backends is passed in: the connection and pool types,
//! the list-query dialect, the `decode` of a row, and how a timestamp and a JSON column are
//! bound (PostgreSQL: `timestamptz` and `jsonb`; SQLite: text).

/// The metadata columns of an object row (all but the body), as a literal for `concat!`.
macro_rules! meta_columns {
    () => {
        "o.id, o.kind, o.tenant, o.name, o.creator, o.version, o.created_at, o.deleted_at, o.labels, o.annotations, o.finalizers"
    };
}
pub(crate) use meta_columns;

/// Binds `$1`–`$12` of an object row's insert (`INSERT INTO objects (id, kind, tenant, name,
/// creator, version, created_at, deleted_at, labels, annotations, finalizers, body)`) from a
/// record, with the backend's timestamp and JSON encodings.
macro_rules! bind_object_row {
    ($query:expr, $rec:expr, ts: $ts:path, json: $json:path) => {
        $query
            .bind(&$rec.id)
            .bind($rec.kind.collection())
            .bind(&$rec.tenant)
            .bind(&$rec.name)
            .bind(&$rec.creator)
            .bind($rec.version)
            .bind($ts(&$rec.created_at))
            .bind($rec.deleted_at.as_ref().map($ts))
            .bind(crate::record::to_json(&$rec.labels))
            .bind($json(&$rec.annotations))
            .bind(crate::record::to_json(&$rec.finalizers))
            .bind($json(&$rec.body))
    };
}
pub(crate) use bind_object_row;

/// Binds a list query's filter parameters (see [`crate::query::list_sql`]), in order.
macro_rules! bind_list_params {
    ($query:expr, $params:expr) => {{
        let mut query = $query;
        for p in $params {
            query = match p {
                crate::filter_sql::SqlValue::Text(s) => query.bind(s.clone()),
                crate::filter_sql::SqlValue::Int(i) => query.bind(*i),
                crate::filter_sql::SqlValue::Float(f) => query.bind(*f),
                crate::filter_sql::SqlValue::Bool(b) => query.bind(*b),
            };
        }
        query
    }};
}
pub(crate) use bind_list_params;

/// Rows of a label or reference insert per statement (three parameters each: well under
/// both backends' parameter limits).
pub(crate) const ROWS_PER_INSERT: usize = 300;

/// The columns of an object row, in the order `decode` reads them.
pub(crate) const COLUMNS: &str = concat!(meta_columns!(), ", o.body");

/// Refuses a write whose expected version is not the stored one.
pub(crate) fn check_version(id: &str, expected: i64, found: i64) -> crate::Result<()> {
    if found != expected {
        return Err(crate::StoreError::Conflict {
            id: id.to_string(),
            expected,
            found,
        });
    }
    Ok(())
}

/// The upserts of a `kv_write` batch, a bounded number of rows each (the deletes differ: an
/// array parameter on PostgreSQL, a list of parameters on SQLite).
pub(crate) fn kv_upserts<'a, DB>(
    ns: &'a str,
    puts: &[(&'a str, &'a str)],
) -> Vec<sqlx::QueryBuilder<'a, DB>>
where
    DB: sqlx::Database,
    &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    puts.chunks(crate::KV_CHUNK)
        .map(|chunk| {
            let mut q = sqlx::QueryBuilder::new("INSERT INTO kv (ns, key, value) ");
            q.push_values(chunk, |mut row, (key, value)| {
                row.push_bind(ns).push_bind(*key).push_bind(*value);
            });
            q.push(" ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value");
            q
        })
        .collect()
}

/// Expands, in the calling backend module, the functions of the statements both stores share.
/// The module provides `decode(&Row) -> Result<Record>` over [`COLUMNS`];
/// `ts` and `json` encode a timestamp and a JSON column (annotations, body) for binding.
macro_rules! sql_common_statements {
    (
        connection: $conn:ty,
        pool: $pool:ty,
        row: $row:ty,
        dialect: $dialect:expr,
        ts: $ts:path,
        json: $json:path $(,)?
    ) => {
        /// The objects of a list query and their total.
        async fn run_list(conn: &mut $conn, q: &crate::ListQuery) -> crate::Result<crate::Page> {
            run_list_as(conn, q, crate::sql_common::COLUMNS, decode).await
        }

        /// The objects of a list query (its page), without counting all that match.
        async fn run_list_items(
            conn: &mut $conn,
            q: &crate::ListQuery,
        ) -> crate::Result<Vec<crate::Record>> {
            let ls = crate::query::list_sql($dialect, q)?;
            run_page_items(conn, q, &ls, crate::sql_common::COLUMNS, decode).await
        }

        /// The objects of a list query (selecting `columns`, read by `decode_row`) and their
        /// total.
        async fn run_list_as<Body>(
            conn: &mut $conn,
            q: &crate::ListQuery,
            columns: &str,
            decode_row: fn(&$row) -> crate::Result<crate::Record<Body>>,
        ) -> crate::Result<crate::Page<Body>> {
            let ls = crate::query::list_sql($dialect, q)?;
            let count_sql = format!("SELECT COUNT(*) FROM objects o WHERE {}", ls.where_sql);
            let count = crate::sql_common::bind_list_params!(sqlx::query_scalar::<_, i64>(&count_sql), &ls.params);
            let total = count.fetch_one(&mut *conn).await?;
            let items = run_page_items(conn, q, &ls, columns, decode_row).await?;
            Ok(crate::Page { total, items })
        }

        /// The page of a list query's objects (its order, limit and offset).
        async fn run_page_items<Body>(
            conn: &mut $conn,
            q: &crate::ListQuery,
            ls: &crate::query::ListSql,
            columns: &str,
            decode_row: fn(&$row) -> crate::Result<crate::Record<Body>>,
        ) -> crate::Result<Vec<crate::Record<Body>>> {
            let limit = match $dialect {
                crate::filter_sql::Dialect::Sqlite => "LIMIT ? OFFSET ?".to_string(),
                crate::filter_sql::Dialect::Postgres => {
                    let n = ls.params.len();
                    format!("LIMIT ${} OFFSET ${}", n + 1, n + 2)
                }
            };
            let sql = format!(
                "SELECT {columns} FROM objects o WHERE {} ORDER BY {} {limit}",
                ls.where_sql,
                ls.order_sql
            );
            let rows = crate::sql_common::bind_list_params!(sqlx::query(&sql), &ls.params)
                .bind(q.limit)
                .bind(q.offset)
                .fetch_all(&mut *conn)
                .await?;
            rows.iter().map(decode_row).collect()
        }

        /// The objects that reference `target`, oldest first.
        async fn referrers_of(
            conn: &mut $conn,
            target: &str,
        ) -> crate::Result<Vec<crate::Reference>> {
            use sqlx::Row;
            // Correlated lookups rather than a join: PostgreSQL plans a join of this shape
            // anew on every execution (its custom plans look cheaper than the generic one for
            // a popular target), and this runs on every controller's referrer lookup.
            let rows = sqlx::query(
                "SELECT r.object_id, r.field, \
                     (SELECT o.kind FROM objects o WHERE o.id = r.object_id) AS kind \
                 FROM object_refs r WHERE r.target_id = $1 \
                 ORDER BY (SELECT o.seq FROM objects o WHERE o.id = r.object_id)",
            )
            .bind(target)
            .fetch_all(conn)
            .await?;
            rows.iter()
                .map(|r| {
                    let kind: String = r.try_get("kind")?;
                    Ok(crate::Reference {
                        source: r.try_get("object_id")?,
                        source_kind: <osac_model::Kind as std::str::FromStr>::from_str(&kind)
                            .map_err(|e| crate::StoreError::Corrupt(e.to_string()))?,
                        field: r.try_get("field")?,
                    })
                })
                .collect()
        }

        /// The object of a kind with a name in a tenant.
        async fn find_row_by_name(
            conn: &mut $conn,
            kind: osac_model::Kind,
            tenant: &str,
            name: &str,
        ) -> crate::Result<Option<crate::Record>> {
            let row = sqlx::query(&format!(
                "SELECT {} FROM objects o WHERE o.kind = $1 AND o.tenant = $2 AND o.name = $3",
                crate::sql_common::COLUMNS
            ))
            .bind(kind.collection())
            .bind(tenant)
            .bind(name)
            .fetch_optional(conn)
            .await?;
            row.as_ref().map(decode).transpose()
        }

        /// Deletes the object row (its label and reference rows cascade).
        async fn delete_row(conn: &mut $conn, id: &str) -> crate::Result<()> {
            sqlx::query("DELETE FROM objects WHERE id = $1")
                .bind(id)
                .execute(conn)
                .await?;
            Ok(())
        }

        /// Writes the label rows of `record`, first removing the old ones when `replace`.
        async fn write_label_rows(
            conn: &mut $conn,
            record: &crate::Record,
            replace: bool,
        ) -> crate::Result<()> {
            if replace {
                sqlx::query("DELETE FROM object_labels WHERE object_id = $1")
                    .bind(&record.id)
                    .execute(&mut *conn)
                    .await?;
            }
            let labels: Vec<(&String, &String)> = record.labels.iter().collect();
            for chunk in labels.chunks(crate::sql_common::ROWS_PER_INSERT) {
                let mut q = sqlx::QueryBuilder::new("INSERT INTO object_labels (object_id, key, value) ");
                q.push_values(chunk, |mut row, (k, v)| {
                    row.push_bind(&record.id).push_bind(*k).push_bind(*v);
                });
                q.build().execute(&mut *conn).await?;
            }
            Ok(())
        }

        /// Writes the (field, target) reference rows `new` of object `id`, first removing the
        /// old ones when `replace`.
        async fn write_ref_rows(
            conn: &mut $conn,
            id: &str,
            new: &[(String, String)],
            replace: bool,
        ) -> crate::Result<()> {
            if replace {
                sqlx::query("DELETE FROM object_refs WHERE object_id = $1")
                    .bind(id)
                    .execute(&mut *conn)
                    .await?;
            }
            for chunk in new.chunks(crate::sql_common::ROWS_PER_INSERT) {
                let mut q =
                    sqlx::QueryBuilder::new("INSERT INTO object_refs (object_id, field, target_id) ");
                q.push_values(chunk, |mut row, (f, t)| {
                    row.push_bind(id).push_bind(f).push_bind(t);
                });
                q.build().execute(&mut *conn).await?;
            }
            Ok(())
        }

        /// Opens the savepoint of one write set inside a batch.
        async fn savepoint(conn: &mut $conn) -> crate::Result<()> {
            sqlx::query("SAVEPOINT osac_set").execute(conn).await?;
            Ok(())
        }

        /// Undoes everything since the savepoint and closes it.
        async fn rollback_to_savepoint(conn: &mut $conn) -> crate::Result<()> {
            sqlx::query("ROLLBACK TO SAVEPOINT osac_set")
                .execute(&mut *conn)
                .await?;
            release_savepoint(conn).await
        }

        /// Keeps everything since the savepoint and closes it.
        async fn release_savepoint(conn: &mut $conn) -> crate::Result<()> {
            sqlx::query("RELEASE SAVEPOINT osac_set")
                .execute(conn)
                .await?;
            Ok(())
        }

        /// The ids of a kind's objects, oldest first.
        async fn ids_of(pool: &$pool, kind: osac_model::Kind) -> crate::Result<Vec<String>> {
            Ok(
                sqlx::query_scalar("SELECT id FROM objects WHERE kind = $1 ORDER BY seq")
                    .bind(kind.collection())
                    .fetch_all(pool)
                    .await?,
            )
        }

        async fn ping(pool: &$pool) -> crate::Result<()> {
            sqlx::query("SELECT 1").execute(pool).await?;
            Ok(())
        }

        /// Deletes up to `limit` events created before `before`, oldest first.
        async fn prune_events(
            pool: &$pool,
            before: chrono::DateTime<chrono::Utc>,
            limit: i64,
        ) -> crate::Result<u64> {
            // The literal kind lets the database use the partial index `objects_event_age`.
            let done = sqlx::query(
                "DELETE FROM objects WHERE id IN (SELECT id FROM objects WHERE kind = 'events' AND created_at < $1 ORDER BY created_at LIMIT $2)",
            )
            .bind($ts(&before))
            .bind(limit)
            .execute(pool)
            .await?;
            Ok(done.rows_affected())
        }

        async fn kv_load(pool: &$pool, ns: &str) -> crate::Result<Vec<(String, String)>> {
            Ok(
                sqlx::query_as("SELECT key, value FROM kv WHERE ns = $1 ORDER BY key")
                    .bind(ns)
                    .fetch_all(pool)
                    .await?,
            )
        }

        async fn kv_get(pool: &$pool, ns: &str, key: &str) -> crate::Result<Option<String>> {
            Ok(
                sqlx::query_scalar("SELECT value FROM kv WHERE ns = $1 AND key = $2")
                    .bind(ns)
                    .bind(key)
                    .fetch_optional(pool)
                    .await?,
            )
        }

        async fn kv_put(pool: &$pool, ns: &str, key: &str, value: &str) -> crate::Result<()> {
            sqlx::query("INSERT INTO kv (ns, key, value) VALUES ($1, $2, $3) ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value")
                .bind(ns)
                .bind(key)
                .bind(value)
                .execute(pool)
                .await?;
            crate::count_write();
            Ok(())
        }

        async fn kv_delete(pool: &$pool, ns: &str, key: &str) -> crate::Result<()> {
            sqlx::query("DELETE FROM kv WHERE ns = $1 AND key = $2")
                .bind(ns)
                .bind(key)
                .execute(pool)
                .await?;
            crate::count_write();
            Ok(())
        }
    };
}

pub(crate) use sql_common_statements;
