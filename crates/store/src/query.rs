//! SQL for list queries, shared by both backends (only placeholders and JSON access differ).

use osac_model::filter::{parse_filter, parse_order};

use crate::Result;
use crate::filter_sql::{Dialect, SqlValue, filter_to_sql, order_to_sql};
use crate::record::{ListQuery, enum_resolver};

/// The WHERE clause, its parameters (after the kind and optional tenant) and ORDER BY.
pub(crate) struct ListSql {
    pub where_sql: String,
    pub params: Vec<SqlValue>,
    pub order_sql: String,
}

/// Builds the SQL of a list query. Kind is always parameter 1, tenant parameter 2 when scoped.
pub(crate) fn list_sql(dialect: Dialect, q: &ListQuery) -> Result<ListSql> {
    let ph = |n: usize| match dialect {
        Dialect::Sqlite => "?".to_string(),
        Dialect::Postgres => format!("${n}"),
    };
    let mut where_sql = format!("o.kind = {}", ph(1));
    let mut params = vec![SqlValue::Text(q.kind.collection().to_string())];
    if let Some(t) = &q.tenant {
        where_sql.push_str(&format!(" AND o.tenant = {}", ph(2)));
        params.push(SqlValue::Text(t.clone()));
    }
    if !q.filter.trim().is_empty() {
        let expr = parse_filter(&q.filter)?;
        let resolver = enum_resolver(q.kind);
        let frag = filter_to_sql(&expr, dialect, params.len() + 1, &resolver)?;
        if dialect == Dialect::Sqlite && selects_by_label(&frag.sql) {
            // `+col` keeps SQLite from walking the (kind, tenant, seq) index and probing every
            // row; it then starts from the few label rows that match and sorts the page.
            where_sql = where_sql
                .replace("o.kind =", "+o.kind =")
                .replace("o.tenant =", "+o.tenant =");
        }
        where_sql.push_str(&format!(" AND ({})", frag.sql));
        params.extend(frag.params);
    }
    let mut order_sql = String::new();
    if !q.order.trim().is_empty() {
        let terms = parse_order(&q.order)?;
        order_sql = order_to_sql(&terms, dialect)?;
    }
    order_sql = if order_sql.is_empty() {
        "o.seq".to_string()
    } else {
        format!("{order_sql}, o.seq")
    };
    Ok(ListSql {
        where_sql,
        params,
        order_sql,
    })
}

/// Whether a translated filter narrows by a positive label match (then the label index is the
/// selective way in; negated label tests and alternatives are not).
fn selects_by_label(sql: &str) -> bool {
    sql.contains("o.id IN (SELECT l.object_id FROM object_labels")
        && !sql.contains(" OR ")
        && !sql.contains("NOT ")
}
