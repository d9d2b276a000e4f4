//! Translation of parsed list filters and orders ([`osac_model::filter`]) to SQL over the
//! `objects o` table (and `object_labels`), for SQLite and PostgreSQL.
//!
//! Values always travel as bound parameters; identifiers that end up in the SQL text (JSON path
//! segments, order fields) are validated against a strict character set first.
//!
//! Objects keep spec and status as proto-JSON, which omits fields holding their default value,
//! so comparisons treat a missing body field as the default of the literal's type (`""`, `0`,
//! `false`, or the enum's zero value).

use chrono::{DateTime, Utc};
use osac_model::filter::{
    CompareOp, Expr, FilterError, Literal, LiteralAt, OrderTerm, Path, StringMethod,
};

/// The SQL dialect to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite: `?` placeholders, JSON in TEXT columns, timestamps as RFC 3339 text.
    Sqlite,
    /// PostgreSQL: `$n` placeholders, JSONB columns, TIMESTAMPTZ.
    Postgres,
}

/// A bound parameter value.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    /// Text.
    Text(String),
    /// 64-bit integer.
    Int(i64),
    /// Double.
    Float(f64),
    /// Boolean.
    Bool(bool),
}

/// A piece of SQL and the parameters its placeholders refer to, in placeholder order.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlFragment {
    /// The SQL text (a boolean expression for filters).
    pub sql: String,
    /// Parameters, in the order of the placeholders.
    pub params: Vec<SqlValue>,
}

/// Callback naming enum value `n` of the enum field at a body path (e.g. `["status", "state"]`),
/// or `None` if the path is not an enum field or `n` is not one of its values.
pub type EnumNames<'a> = &'a dyn Fn(&[String], i64) -> Option<String>;

/// Translates a filter to a boolean SQL expression over `objects o`.
///
/// Placeholders are `?` for SQLite and `$first_param`, `$first_param + 1`, … for PostgreSQL
/// (`first_param` is ignored for SQLite). `enums` names enum values so `this.status.state == 2`
/// matches the stored name; it is also asked for value 0 to learn whether a field is an enum.
pub fn filter_to_sql(
    expr: &Expr,
    dialect: Dialect,
    first_param: usize,
    enums: EnumNames<'_>,
) -> Result<SqlFragment, FilterError> {
    let mut t = Translator {
        dialect,
        next: first_param,
        params: Vec::new(),
        enums,
    };
    let sql = t.expr(expr)?;
    Ok(SqlFragment {
        sql,
        params: t.params,
    })
}

/// Translates order terms to a comma list of `expr ASC|DESC` (without `ORDER BY` and without a
/// tiebreak). Fields are inlined as identifiers, so every segment must match `[a-z0-9_]+`.
/// Missing values sort first ascending and last descending in both dialects.
pub fn order_to_sql(terms: &[OrderTerm], dialect: Dialect) -> Result<String, FilterError> {
    let mut parts = Vec::with_capacity(terms.len());
    for term in terms {
        let path = &term.path;
        if let Some(bad) = path.segments.iter().find(|s| !is_order_segment(s)) {
            return Err(FilterError::new(
                path.pos,
                format!("invalid order field segment '{bad}' (allowed: a-z, 0-9, _)"),
            ));
        }
        let pg = dialect == Dialect::Postgres;
        let collate = if pg { " COLLATE \"C\"" } else { "" };
        let segs: Vec<&str> = path.segments.iter().map(String::as_str).collect();
        let expr = match segs.as_slice() {
            ["id"] => format!("o.id{collate}"),
            ["metadata", "name"] => format!("o.name{collate}"),
            ["metadata", "tenant"] => format!("o.tenant{collate}"),
            ["metadata", "creator"] => format!("o.creator{collate}"),
            ["metadata", "version"] => "o.version".to_string(),
            ["metadata", "creation_timestamp"] => "o.created_at".to_string(),
            ["metadata", "deletion_timestamp"] => "o.deleted_at".to_string(),
            ["metadata", "labels", key] => format!(
                "(SELECT l.value FROM object_labels l WHERE l.object_id = o.id AND l.key = '{key}'){collate}"
            ),
            ["metadata", "annotations", key] => match dialect {
                Dialect::Sqlite => format!("json_extract(o.annotations, '$.\"{key}\"')"),
                Dialect::Postgres => format!("(o.annotations ->> '{key}'){collate}"),
            },
            ["metadata", ..] | ["id", ..] => {
                return Err(FilterError::new(
                    path.pos,
                    format!("cannot order by '{path}'"),
                ));
            }
            _ => body_json(dialect, &path.segments),
        };
        let dir = match (term.descending, pg) {
            (false, false) => "ASC",
            (true, false) => "DESC",
            (false, true) => "ASC NULLS FIRST",
            (true, true) => "DESC NULLS LAST",
        };
        parts.push(format!("{expr} {dir}"));
    }
    Ok(parts.join(", "))
}

fn is_order_segment(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

fn is_body_segment(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The JSON value at a body path (segments already validated): SQLite `json_extract` (SQL
/// typed), PostgreSQL `#>` (jsonb).
fn body_json(dialect: Dialect, segments: &[String]) -> String {
    match dialect {
        Dialect::Sqlite => format!("json_extract(o.body, {})", sqlite_json_path(segments)),
        Dialect::Postgres => format!("(o.body #> {})", pg_text_path(segments)),
    }
}

/// The body value as text (PostgreSQL `#>>`) or as SQLite's typed value.
fn body_text(dialect: Dialect, segments: &[String]) -> String {
    match dialect {
        Dialect::Sqlite => body_json(dialect, segments),
        Dialect::Postgres => format!("(o.body #>> {})", pg_text_path(segments)),
    }
}

fn sqlite_json_path(segments: &[String]) -> String {
    let mut p = String::from("'$");
    for s in segments {
        p.push_str(".\"");
        p.push_str(s);
        p.push('"');
    }
    p.push('\'');
    p
}

fn pg_text_path(segments: &[String]) -> String {
    format!("'{{{}}}'", segments.join(","))
}

/// Which map a `metadata.labels` / `metadata.annotations` path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MapKind {
    Labels,
    Annotations,
}

impl MapKind {
    fn noun(self) -> &'static str {
        match self {
            MapKind::Labels => "label",
            MapKind::Annotations => "annotation",
        }
    }
}

/// What a path refers to.
enum Target<'p> {
    /// A non-null text expression over a column.
    Text(&'static str),
    /// An integer column.
    Int(&'static str),
    /// A timestamp column; `true` when it may be NULL.
    Time(&'static str, bool),
    /// A whole map (only `has()`).
    Map(MapKind),
    /// One entry of a map.
    Entry(MapKind, &'p str),
    /// A field of the JSON body.
    Body(&'p [String]),
}

fn classify(path: &Path) -> Result<Target<'_>, FilterError> {
    let segs: Vec<&str> = path.segments.iter().map(String::as_str).collect();
    let unknown = |what: String| Err(FilterError::new(path.pos, what));
    match segs.as_slice() {
        ["id"] => Ok(Target::Text("o.id")),
        ["metadata", "name"] => Ok(Target::Text("COALESCE(o.name, '')")),
        ["metadata", "tenant"] => Ok(Target::Text("o.tenant")),
        ["metadata", "creator"] => Ok(Target::Text("o.creator")),
        ["metadata", "version"] => Ok(Target::Int("o.version")),
        ["metadata", "creation_timestamp"] => Ok(Target::Time("o.created_at", false)),
        ["metadata", "deletion_timestamp"] => Ok(Target::Time("o.deleted_at", true)),
        ["metadata", "labels"] => Ok(Target::Map(MapKind::Labels)),
        ["metadata", "annotations"] => Ok(Target::Map(MapKind::Annotations)),
        ["metadata", "labels" | "annotations", _] => {
            let kind = if segs[1] == "labels" {
                MapKind::Labels
            } else {
                MapKind::Annotations
            };
            Ok(Target::Entry(kind, &path.segments[2]))
        }
        ["metadata", "labels" | "annotations", ..] => unknown(format!(
            "'{path}': {} values are strings and have no fields",
            &segs[1][..segs[1].len() - 1]
        )),
        ["metadata"] => unknown("'metadata' is not a comparable field".to_string()),
        ["metadata", ..] => unknown(format!("unknown metadata field '{path}'")),
        ["id", ..] => unknown(format!("'{path}': id is a string and has no fields")),
        _ => {
            if let Some(bad) = path.segments.iter().find(|s| !is_body_segment(s)) {
                return unknown(format!(
                    "unsupported field name {bad:?} in '{path}' (allowed: A-Z, a-z, 0-9, _)"
                ));
            }
            Ok(Target::Body(&path.segments))
        }
    }
}

/// The items of an `in` list on a string field, which must all be strings.
fn strings(
    path: &Path,
    values: &[LiteralAt],
    field_type: &str,
) -> Result<Vec<String>, FilterError> {
    values
        .iter()
        .map(|v| match &v.value {
            Literal::String(s) => Ok(s.clone()),
            other => Err(mismatch(v.pos, path, field_type, other)),
        })
        .collect()
}

fn mismatch(pos: usize, path: &Path, field_type: &str, lit: &Literal) -> FilterError {
    FilterError::new(
        pos,
        format!(
            "field '{path}' is {field_type} and cannot be compared with {} {}",
            article(lit.type_name()),
            lit.type_name()
        ),
    )
}

fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

fn sql_op(op: CompareOp) -> &'static str {
    match op {
        CompareOp::Eq => "=",
        CompareOp::Ne => "<>",
        CompareOp::Lt => "<",
        CompareOp::Le => "<=",
        CompareOp::Gt => ">",
        CompareOp::Ge => ">=",
    }
}

/// Normalises an RFC 3339 literal to the stored SQLite format (UTC, microseconds, `Z`).
fn timestamp(lit: &LiteralAt) -> Result<String, FilterError> {
    let Literal::String(s) = &lit.value else {
        return Err(FilterError::new(lit.pos, "expected a timestamp string"));
    };
    let t = DateTime::parse_from_rfc3339(s).map_err(|e| {
        FilterError::new(
            lit.pos,
            format!("invalid timestamp {s:?} (expected RFC 3339, e.g. 2024-01-31T12:00:00Z): {e}"),
        )
    })?;
    Ok(t.with_timezone(&Utc)
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string())
}

/// The comparable class of a literal once enum numbers are resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Text,
    Num,
    Bool,
}

struct Translator<'a> {
    dialect: Dialect,
    next: usize,
    params: Vec<SqlValue>,
    enums: EnumNames<'a>,
}

impl Translator<'_> {
    fn pg(&self) -> bool {
        self.dialect == Dialect::Postgres
    }

    /// Adds a parameter and returns its placeholder. Parameters must be added in the order
    /// their placeholders appear in the text (SQLite `?` are positional).
    fn param(&mut self, v: SqlValue) -> String {
        self.params.push(v);
        match self.dialect {
            Dialect::Sqlite => "?".to_string(),
            Dialect::Postgres => {
                let p = format!("${}", self.next);
                self.next += 1;
                p
            }
        }
    }

    fn text(&mut self, s: &str) -> String {
        self.param(SqlValue::Text(s.to_string()))
    }

    /// ` COLLATE "C"` for PostgreSQL ordering comparisons, so text orders bytewise as in SQLite.
    fn collate(&self, op: CompareOp) -> &'static str {
        if self.pg() && op.is_ordering() {
            " COLLATE \"C\""
        } else {
            ""
        }
    }

    /// `FALSE` for a possibly NULL boolean (so `NOT` of it stays two-valued).
    fn non_null(&self, cond: String) -> String {
        format!("COALESCE({cond}, FALSE)")
    }

    fn expr(&mut self, e: &Expr) -> Result<String, FilterError> {
        match e {
            Expr::And(a, b) => {
                let a = self.expr(a)?;
                let b = self.expr(b)?;
                Ok(format!("({a} AND {b})"))
            }
            Expr::Or(a, b) => {
                let a = self.expr(a)?;
                let b = self.expr(b)?;
                Ok(format!("({a} OR {b})"))
            }
            Expr::Not(a) => {
                let a = self.expr(a)?;
                Ok(format!("(NOT {a})"))
            }
            Expr::Has(path) => self.has(path),
            Expr::Compare { path, op, value } => self.compare(path, *op, value),
            Expr::In { path, values } => self.in_list(path, values),
            Expr::Method {
                path, method, arg, ..
            } => self.method(path, *method, arg),
        }
    }

    /// `EXISTS` over the entries of a map with key `key` (when given) and an extra condition on
    /// `l.value`, built after the key parameter so placeholders stay in order.
    fn map_exists(
        &mut self,
        kind: MapKind,
        key: Option<&str>,
        negate: bool,
        cond: impl FnOnce(&mut Self) -> String,
    ) -> String {
        // Labels use `o.id IN (…)` rather than a correlated EXISTS: the planner can then drive
        // the query from the (key, value) index instead of probing it once per object.
        let mut sql = String::from(match (kind, negate) {
            (MapKind::Labels, false) => "o.id IN (",
            (MapKind::Labels, true) => "o.id NOT IN (",
            (MapKind::Annotations, false) => "EXISTS (",
            (MapKind::Annotations, true) => "NOT EXISTS (",
        });
        match (kind, self.dialect, key) {
            (MapKind::Labels, _, _) => {
                sql.push_str("SELECT l.object_id FROM object_labels l WHERE 1 = 1");
                if let Some(k) = key {
                    let p = self.text(k);
                    sql.push_str(&format!(" AND l.key = {p}"));
                }
            }
            (MapKind::Annotations, Dialect::Sqlite, _) => {
                sql.push_str("SELECT 1 FROM json_each(o.annotations) l WHERE 1 = 1");
                if let Some(k) = key {
                    let p = self.text(k);
                    sql.push_str(&format!(" AND l.key = {p}"));
                }
            }
            (MapKind::Annotations, Dialect::Postgres, Some(k)) => {
                let p = self.text(k);
                sql.push_str(&format!(
                    "SELECT 1 FROM (SELECT o.annotations ->> {p} AS value) l WHERE l.value IS NOT NULL"
                ));
            }
            (MapKind::Annotations, Dialect::Postgres, None) => {
                sql.push_str(
                    "SELECT 1 FROM jsonb_object_keys(CASE WHEN jsonb_typeof(o.annotations) = 'object' THEN o.annotations END) l",
                );
            }
        }
        let c = cond(self);
        if !c.is_empty() {
            sql.push_str(" AND ");
            sql.push_str(&c);
        }
        sql.push(')');
        sql
    }

    fn has(&mut self, path: &Path) -> Result<String, FilterError> {
        Ok(match classify(path)? {
            Target::Text(col) => format!("({col} <> '')"),
            Target::Int(col) => format!("({col} <> 0)"),
            Target::Time(col, _) => format!("({col} IS NOT NULL)"),
            Target::Map(kind) => self.map_exists(kind, None, false, |_| String::new()),
            Target::Entry(kind, key) => self.map_exists(kind, Some(key), false, |_| String::new()),
            Target::Body(segs) => match self.dialect {
                Dialect::Sqlite => {
                    let p = sqlite_json_path(segs);
                    let ty = format!("json_type(o.body, {p})");
                    let v = format!("json_extract(o.body, {p})");
                    format!(
                        "COALESCE({ty} NOT IN ('null', 'false') \
                         AND NOT ({ty} IN ('integer', 'real') AND {v} = 0) \
                         AND NOT ({ty} = 'text' AND {v} = '') \
                         AND NOT ({ty} = 'array' AND json_array_length(o.body, {p}) = 0), FALSE)"
                    )
                }
                Dialect::Postgres => format!(
                    "COALESCE({} NOT IN ('null'::jsonb, '\"\"'::jsonb, '[]'::jsonb, 'false'::jsonb, '0'::jsonb), FALSE)",
                    body_json(self.dialect, segs)
                ),
            },
        })
    }

    /// Resolves a literal compared with a body field: enum numbers become names.
    fn body_literal(&self, segs: &[String], lit: &Literal) -> (Class, Option<SqlValue>) {
        match lit {
            Literal::Int(n) => match (self.enums)(segs, *n) {
                Some(name) => (Class::Text, Some(SqlValue::Text(name))),
                None => (Class::Num, Some(SqlValue::Int(*n))),
            },
            Literal::Float(x) => (Class::Num, Some(SqlValue::Float(*x))),
            Literal::String(s) => (Class::Text, Some(SqlValue::Text(s.clone()))),
            Literal::Bool(b) => (Class::Bool, Some(SqlValue::Bool(*b))),
            Literal::Null => (Class::Text, None),
        }
    }

    /// The body value as seen by a comparison of class `class`, missing → default. May add a
    /// parameter (the enum default), so call it before rendering the right-hand side.
    fn body_lhs(&mut self, segs: &[String], class: Class, enum0: Option<&str>) -> String {
        let pg = self.pg();
        match class {
            Class::Text => {
                let default = match enum0 {
                    Some(name) => self.text(name),
                    None => "''".to_string(),
                };
                format!("COALESCE({}, {default})", body_text(self.dialect, segs))
            }
            Class::Num if pg => {
                let v = format!("COALESCE({}, '0')", body_text(self.dialect, segs));
                format!(
                    "(CASE WHEN {v} ~ '^-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?$' THEN ({v})::numeric END)"
                )
            }
            Class::Num => format!(
                "CAST(COALESCE({}, 0) AS NUMERIC)",
                body_text(self.dialect, segs)
            ),
            Class::Bool if pg => format!(
                "COALESCE({}, 'false'::jsonb)",
                body_json(self.dialect, segs)
            ),
            Class::Bool => format!("COALESCE({}, 0)", body_text(self.dialect, segs)),
        }
    }

    /// Renders the placeholder of a value compared with a body field of class `class`.
    fn body_rhs(&mut self, class: Class, v: SqlValue) -> String {
        let p = self.param(v);
        match (class, self.dialect) {
            (Class::Num, Dialect::Postgres) => format!("{p}::numeric"),
            (Class::Bool, Dialect::Postgres) => format!("to_jsonb({p}::boolean)"),
            _ => p,
        }
    }

    fn compare(
        &mut self,
        path: &Path,
        op: CompareOp,
        value: &LiteralAt,
    ) -> Result<String, FilterError> {
        let sym = sql_op(op);
        let lit = &value.value;
        let only_equality = |what: &str| {
            if op.is_ordering() {
                Err(FilterError::new(
                    value.pos,
                    format!("'{}' is not supported on {what}", op.symbol()),
                ))
            } else {
                Ok(())
            }
        };
        match classify(path)? {
            Target::Map(kind) => Err(FilterError::new(
                path.pos,
                format!(
                    "cannot compare a whole map; name one {}, e.g. this.{path}[\"key\"]",
                    kind.noun()
                ),
            )),
            Target::Entry(kind, key) => match lit {
                Literal::Null => {
                    only_equality("null")?;
                    Ok(self.map_exists(kind, Some(key), op == CompareOp::Eq, |_| String::new()))
                }
                Literal::String(s) => {
                    // `!=` means "missing or different".
                    let negate = op == CompareOp::Ne;
                    let sym = if negate { "=" } else { sym };
                    let collate = self.collate(op);
                    Ok(self.map_exists(kind, Some(key), negate, |t| {
                        let p = t.text(s);
                        format!("l.value{collate} {sym} {p}")
                    }))
                }
                _ => Err(mismatch(
                    value.pos,
                    path,
                    &format!("a {} (string)", kind.noun()),
                    lit,
                )),
            },
            Target::Text(col) => match lit {
                Literal::String(s) => {
                    let collate = self.collate(op);
                    let p = self.text(s);
                    Ok(format!("({col}{collate} {sym} {p})"))
                }
                _ => Err(mismatch(value.pos, path, "a string", lit)),
            },
            Target::Int(col) => {
                let v = match lit {
                    Literal::Int(n) => SqlValue::Int(*n),
                    Literal::Float(x) => SqlValue::Float(*x),
                    _ => return Err(mismatch(value.pos, path, "an integer", lit)),
                };
                let p = self.param(v);
                Ok(format!("({col} {sym} {p})"))
            }
            Target::Time(col, nullable) => match lit {
                Literal::Null => {
                    only_equality("null")?;
                    let is = if op == CompareOp::Eq { "IS" } else { "IS NOT" };
                    Ok(format!("({col} {is} NULL)"))
                }
                Literal::String(_) => {
                    let ts = timestamp(value)?;
                    let p = self.time_param(ts);
                    let cmp = format!("{col} {sym} {p}");
                    Ok(match (nullable, op) {
                        (false, _) => format!("({cmp})"),
                        (true, CompareOp::Ne) => format!("({col} IS NULL OR {cmp})"),
                        (true, _) => self.non_null(cmp),
                    })
                }
                _ => Err(mismatch(value.pos, path, "a timestamp", lit)),
            },
            Target::Body(segs) => {
                let enum0 = (self.enums)(segs, 0);
                let (class, v) = self.body_literal(segs, lit);
                let Some(v) = v else {
                    only_equality("null")?;
                    let is = if op == CompareOp::Eq { "IS" } else { "IS NOT" };
                    return Ok(format!("({} {is} NULL)", body_text(self.dialect, segs)));
                };
                if enum0.is_some() {
                    only_equality("enum fields")?;
                    if class == Class::Bool || matches!(lit, Literal::Float(_)) {
                        return Err(mismatch(value.pos, path, "an enum", lit));
                    }
                } else if class == Class::Bool {
                    only_equality("bool values")?;
                }
                let lhs = self.body_lhs(segs, class, enum0.as_deref());
                let collate = if class == Class::Text {
                    self.collate(op)
                } else {
                    ""
                };
                let rhs = self.body_rhs(class, v);
                let cmp = format!("{lhs}{collate} {sym} {rhs}");
                Ok(if self.pg() && class == Class::Num {
                    self.non_null(cmp)
                } else {
                    format!("({cmp})")
                })
            }
        }
    }

    fn time_param(&mut self, ts: String) -> String {
        let p = self.param(SqlValue::Text(ts));
        if self.pg() {
            format!("{p}::timestamptz")
        } else {
            p
        }
    }

    fn in_list(&mut self, path: &Path, values: &[LiteralAt]) -> Result<String, FilterError> {
        if let Some(null) = values.iter().find(|v| v.value == Literal::Null) {
            return Err(FilterError::new(
                null.pos,
                "null is not allowed in an 'in' list; use == null",
            ));
        }
        let target = classify(path)?;
        if values.is_empty() && !matches!(target, Target::Map(_)) {
            return Ok("(1 = 0)".to_string());
        }
        match target {
            Target::Map(kind) => Err(FilterError::new(
                path.pos,
                format!(
                    "cannot use 'in' on a whole map; name one {}, e.g. this.{path}[\"key\"]",
                    kind.noun()
                ),
            )),
            Target::Entry(kind, key) => {
                let items = strings(path, values, &format!("a {} (string)", kind.noun()))?;
                Ok(self.map_exists(kind, Some(key), false, |t| {
                    let ps: Vec<String> = items.into_iter().map(|s| t.text(&s)).collect();
                    format!("l.value IN ({})", ps.join(", "))
                }))
            }
            Target::Text(col) => {
                let items = strings(path, values, "a string")?;
                let ps: Vec<String> = items.iter().map(|s| self.text(s)).collect();
                Ok(format!("({col} IN ({}))", ps.join(", ")))
            }
            Target::Int(col) => {
                let mut ps = Vec::new();
                for v in values {
                    let sv = match v.value {
                        Literal::Int(n) => SqlValue::Int(n),
                        Literal::Float(x) => SqlValue::Float(x),
                        ref other => return Err(mismatch(v.pos, path, "an integer", other)),
                    };
                    ps.push(self.param(sv));
                }
                Ok(format!("({col} IN ({}))", ps.join(", ")))
            }
            Target::Time(col, nullable) => {
                let mut stamps = Vec::new();
                for v in values {
                    if !matches!(v.value, Literal::String(_)) {
                        return Err(mismatch(v.pos, path, "a timestamp", &v.value));
                    }
                    stamps.push(timestamp(v)?);
                }
                let ps: Vec<String> = stamps.into_iter().map(|s| self.time_param(s)).collect();
                let cmp = format!("{col} IN ({})", ps.join(", "));
                Ok(if nullable {
                    self.non_null(cmp)
                } else {
                    format!("({cmp})")
                })
            }
            Target::Body(segs) => {
                let enum0 = (self.enums)(segs, 0);
                let mut class = None;
                let mut resolved = Vec::new();
                for v in values {
                    let (c, sv) = self.body_literal(segs, &v.value);
                    let bad_for_enum = enum0.is_some()
                        && (c == Class::Bool || matches!(v.value, Literal::Float(_)));
                    if bad_for_enum {
                        return Err(mismatch(v.pos, path, "an enum", &v.value));
                    }
                    match class {
                        None => class = Some(c),
                        Some(prev) if prev != c => {
                            return Err(FilterError::new(
                                v.pos,
                                format!(
                                    "all items of an 'in' list must have the same type (found {} after {})",
                                    v.value.type_name(),
                                    values[0].value.type_name()
                                ),
                            ));
                        }
                        Some(_) => {}
                    }
                    if let Some(sv) = sv {
                        resolved.push(sv);
                    }
                }
                let class = class.unwrap_or(Class::Text);
                let lhs = self.body_lhs(segs, class, enum0.as_deref());
                let ps: Vec<String> = resolved
                    .into_iter()
                    .map(|sv| self.body_rhs(class, sv))
                    .collect();
                let cmp = format!("{lhs} IN ({})", ps.join(", "));
                Ok(if self.pg() && class == Class::Num {
                    self.non_null(cmp)
                } else {
                    format!("({cmp})")
                })
            }
        }
    }

    /// `startsWith` / `endsWith` / `contains` on a string expression, without LIKE (which is
    /// case-insensitive in SQLite and needs escaping): prefix/suffix by character count.
    fn string_test(&mut self, x: &str, method: StringMethod, arg: &str) -> String {
        let n = arg.chars().count();
        if n == 0 {
            return "(1 = 1)".to_string();
        }
        let p = self.text(arg);
        match (method, self.dialect) {
            (StringMethod::StartsWith, Dialect::Sqlite) => format!("(substr({x}, 1, {n}) = {p})"),
            (StringMethod::StartsWith, Dialect::Postgres) => format!("(left({x}, {n}) = {p})"),
            (StringMethod::EndsWith, Dialect::Sqlite) => format!("(substr({x}, -{n}) = {p})"),
            (StringMethod::EndsWith, Dialect::Postgres) => format!("(right({x}, {n}) = {p})"),
            (StringMethod::Contains, Dialect::Sqlite) => format!("(instr({x}, {p}) > 0)"),
            (StringMethod::Contains, Dialect::Postgres) => format!("(strpos({x}, {p}) > 0)"),
        }
    }

    fn method(
        &mut self,
        path: &Path,
        method: StringMethod,
        arg: &str,
    ) -> Result<String, FilterError> {
        let not_string = |what: &str| {
            Err(FilterError::new(
                path.pos,
                format!(
                    "'{}' needs a string field, but '{path}' is {what}",
                    method.name()
                ),
            ))
        };
        match classify(path)? {
            Target::Text(col) => Ok(self.string_test(col, method, arg)),
            Target::Entry(kind, key) => Ok(self.map_exists(kind, Some(key), false, |t| {
                t.string_test("l.value", method, arg)
            })),
            Target::Body(segs) => {
                let enum0 = (self.enums)(segs, 0);
                let x = self.body_lhs(segs, Class::Text, enum0.as_deref());
                Ok(self.string_test(&x, method, arg))
            }
            Target::Int(_) => not_string("an integer"),
            Target::Time(..) => not_string("a timestamp"),
            Target::Map(_) => not_string("a map"),
        }
    }
}

#[cfg(test)]
mod tests;
