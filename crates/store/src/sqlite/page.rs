//! SQLite list pages with their bodies as stored text, read as ONE row.
//!
//! sqlx's SQLite driver runs statements on a thread of its own and hands every result row to
//! the async caller through a channel: a page of 100 rows is 100 hand-overs, each a thread
//! wake-up on a busy server — more than the query itself costs. So the page is aggregated in
//! SQL: one statement returns the total and the page's records joined into one text, records
//! separated by U+001E and columns by U+001F. Neither separator can occur in a column: the JSON
//! columns (labels, annotations, finalizers, body) are serialised JSON, which escapes every
//! control character; the free-text columns (id, tenant, name, creator) are quoted as JSON
//! strings by SQLite (`json_quote`); kind, version and timestamps are ours.

use std::str::FromStr;

use osac_model::Kind;
use sqlx::SqliteConnection;

use crate::filter_sql::Dialect;
use crate::record::{BodyText, parse_json, parse_ts};
use crate::{ListQuery, PageText, Record, RecordText, Result, StoreError};

const RECORD_SEPARATOR: char = '\u{1e}';
const COLUMN_SEPARATOR: char = '\u{1f}';

/// One record as text, in the order [`decode_record`] reads it.
const RECORD_TEXT: &str = "json_quote(o.id) || char(31) || o.kind || char(31) || \
     json_quote(o.tenant) || char(31) || json_quote(o.name) || char(31) || \
     json_quote(o.creator) || char(31) || o.version || char(31) || o.created_at || char(31) || \
     ifnull(o.deleted_at, '') || char(31) || o.labels || char(31) || o.annotations || \
     char(31) || o.finalizers || char(31) || o.body";

/// The page of `q` (filter, order, paging) and the total that match, in one statement.
pub(crate) async fn list_page_text(conn: &mut SqliteConnection, q: &ListQuery) -> Result<PageText> {
    let ls = crate::query::list_sql(Dialect::Sqlite, q)?;
    // The page subquery keeps its order: SQLite runs a subquery with ORDER BY and LIMIT as a
    // co-routine and the aggregate consumes its rows as they come (checked by the store's
    // conformance suite, which compares pages in every order with the row-by-row reads).
    let sql = format!(
        "SELECT (SELECT COUNT(*) FROM objects o WHERE {w}), \
         (SELECT group_concat(r, char(30)) FROM \
           (SELECT {RECORD_TEXT} AS r FROM objects o WHERE {w} ORDER BY {order} LIMIT ? OFFSET ?))",
        w = ls.where_sql,
        order = ls.order_sql,
    );
    let query = crate::sql_common::bind_list_params!(
        sqlx::query_as::<_, (i64, Option<String>)>(&sql),
        ls.params.iter().chain(&ls.params)
    );
    let (total, page) = query
        .bind(q.limit)
        .bind(q.offset)
        .fetch_one(&mut *conn)
        .await?;
    let items = match page.as_deref() {
        None | Some("") => Vec::new(),
        Some(text) => text
            .split(RECORD_SEPARATOR)
            .map(decode_record)
            .collect::<Result<_>>()?,
    };
    Ok(crate::Page { total, items })
}

/// One record of an aggregated page.
fn decode_record(text: &str) -> Result<RecordText> {
    let corrupt = || StoreError::Corrupt(format!("list page record: {text:.80}"));
    let columns: Vec<&str> = text.splitn(12, COLUMN_SEPARATOR).collect();
    let [
        id,
        kind,
        tenant,
        name,
        creator,
        version,
        created_at,
        deleted_at,
        labels,
        annotations,
        finalizers,
        body,
    ] = <[&str; 12]>::try_from(columns).map_err(|_| corrupt())?;
    Ok(Record {
        id: parse_json(id)?,
        kind: Kind::from_str(kind).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        tenant: parse_json(tenant)?,
        name: parse_json(name)?,
        creator: parse_json(creator)?,
        version: version.parse().map_err(|_| corrupt())?,
        created_at: parse_ts(created_at)?,
        deleted_at: (!deleted_at.is_empty())
            .then(|| parse_ts(deleted_at))
            .transpose()?,
        labels: parse_json(labels)?,
        annotations: parse_json(annotations)?,
        finalizers: parse_json(finalizers)?,
        body: BodyText::stored(body.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_read_back_from_its_columns() {
        let s = COLUMN_SEPARATOR;
        let text = format!(
            "\"a\\u001fb\"{s}subnets{s}\"t1\"{s}null{s}\"alice\"{s}3{s}2026-12-03T10:00:00.000Z{s}{s}\
             {{\"app\":\"web\"}}{s}{{}}{s}[\"f\"]{s}{{\"spec\":{{\"x\":1}}}}"
        );
        let r = decode_record(&text).unwrap();
        assert_eq!(r.id, "a\u{1f}b", "a quoted column may hold a separator");
        assert_eq!(r.kind, Kind::Subnet);
        assert_eq!((r.tenant.as_str(), r.name.as_deref()), ("t1", None));
        assert_eq!((r.creator.as_str(), r.version), ("alice", 3));
        assert!(r.deleted_at.is_none());
        assert_eq!(r.labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(r.finalizers, vec!["f".to_string()]);
        assert_eq!(r.body.get(), "{\"spec\":{\"x\":1}}");
        assert!(decode_record("too\u{1f}few").is_err());
    }
}
