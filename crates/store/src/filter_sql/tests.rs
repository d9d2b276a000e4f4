use super::*;
use osac_model::filter::{parse_filter, parse_order};

fn enums(path: &[String], n: i64) -> Option<String> {
    if path != ["status", "state"] {
        return None;
    }
    let name = match n {
        0 => "SUBNET_STATE_UNSPECIFIED",
        1 => "SUBNET_STATE_PENDING",
        2 => "SUBNET_STATE_READY",
        3 => "SUBNET_STATE_FAILED",
        _ => return None,
    };
    Some(name.to_string())
}

fn sql(src: &str, dialect: Dialect, first: usize) -> SqlFragment {
    let e = parse_filter(src).unwrap();
    filter_to_sql(&e, dialect, first, &enums).unwrap()
}

fn sql_err(src: &str) -> FilterError {
    let e = parse_filter(src).unwrap();
    let a = filter_to_sql(&e, Dialect::Sqlite, 1, &enums).unwrap_err();
    let b = filter_to_sql(&e, Dialect::Postgres, 1, &enums).unwrap_err();
    assert_eq!(a, b);
    a
}

fn text(s: &str) -> SqlValue {
    SqlValue::Text(s.to_string())
}

#[test]
fn body_string_sqlite_and_postgres() {
    let f = sql(r#"this.spec.virtual_network == "vn""#, Dialect::Sqlite, 1);
    assert_eq!(
        f.sql,
        r#"(COALESCE(json_extract(o.body, '$."spec"."virtual_network"'), '') = ?)"#
    );
    assert_eq!(f.params, vec![text("vn")]);
    let f = sql(r#"this.spec.virtual_network == "vn""#, Dialect::Postgres, 3);
    assert_eq!(
        f.sql,
        "(COALESCE((o.body #>> '{spec,virtual_network}'), '') = $3)"
    );
}

#[test]
fn labels() {
    let src = r#"this.metadata.labels["osac.openshift.io/default"] == "true""#;
    let f = sql(src, Dialect::Sqlite, 1);
    assert_eq!(
        f.sql,
        "o.id IN (SELECT l.object_id FROM object_labels l WHERE 1 = 1 AND l.key = ? AND l.value = ?)"
    );
    assert_eq!(
        f.params,
        vec![text("osac.openshift.io/default"), text("true")]
    );
    let f = sql(
        r#"this.metadata.labels.env != "prod""#,
        Dialect::Postgres,
        5,
    );
    assert_eq!(
        f.sql,
        "o.id NOT IN (SELECT l.object_id FROM object_labels l WHERE 1 = 1 AND l.key = $5 AND l.value = $6)"
    );
    let f = sql(r#"has(this.metadata.labels.env)"#, Dialect::Postgres, 1);
    assert_eq!(
        f.sql,
        "o.id IN (SELECT l.object_id FROM object_labels l WHERE 1 = 1 AND l.key = $1)"
    );
}

#[test]
fn enums_by_number_and_defaults() {
    let f = sql("this.status.state == 2", Dialect::Postgres, 2);
    assert_eq!(f.sql, "(COALESCE((o.body #>> '{status,state}'), $2) = $3)");
    assert_eq!(
        f.params,
        vec![text("SUBNET_STATE_UNSPECIFIED"), text("SUBNET_STATE_READY")]
    );
    let f = sql(
        "this.status.state != 'SUBNET_STATE_READY'",
        Dialect::Sqlite,
        1,
    );
    assert_eq!(
        f.sql,
        r#"(COALESCE(json_extract(o.body, '$."status"."state"'), ?) <> ?)"#
    );
    // Unknown enum number: kept as a number.
    let f = sql("this.status.state == 9", Dialect::Sqlite, 1);
    assert_eq!(f.params, vec![SqlValue::Int(9)]);
}

#[test]
fn numbers_bools_and_null() {
    let f = sql("this.status.count > 10", Dialect::Sqlite, 1);
    assert_eq!(
        f.sql,
        r#"(CAST(COALESCE(json_extract(o.body, '$."status"."count"'), 0) AS NUMERIC) > ?)"#
    );
    assert_eq!(f.params, vec![SqlValue::Int(10)]);
    let f = sql("this.status.count > 1.5", Dialect::Postgres, 1);
    assert!(
        f.sql
            .starts_with("COALESCE((CASE WHEN COALESCE((o.body #>> '{status,count}'), '0') ~"),
        "{}",
        f.sql
    );
    assert!(f.sql.ends_with(" > $1::numeric, FALSE)"), "{}", f.sql);
    assert_eq!(f.params, vec![SqlValue::Float(1.5)]);

    let f = sql("this.status.attached == false", Dialect::Sqlite, 1);
    assert_eq!(
        f.sql,
        r#"(COALESCE(json_extract(o.body, '$."status"."attached"'), 0) = ?)"#
    );
    assert_eq!(f.params, vec![SqlValue::Bool(false)]);
    let f = sql("!this.status.attached", Dialect::Postgres, 1);
    assert_eq!(
        f.sql,
        "(NOT (COALESCE((o.body #> '{status,attached}'), 'false'::jsonb) = to_jsonb($1::boolean)))"
    );
    let f = sql("this.spec.x == null", Dialect::Postgres, 1);
    assert_eq!(f.sql, "((o.body #>> '{spec,x}') IS NULL)");
    assert!(f.params.is_empty());
}

#[test]
fn metadata_columns() {
    let f = sql("this.metadata.name == ''", Dialect::Sqlite, 1);
    assert_eq!(f.sql, "(COALESCE(o.name, '') = ?)");
    let f = sql("this.metadata.name < 'm'", Dialect::Postgres, 1);
    assert_eq!(f.sql, "(COALESCE(o.name, '') COLLATE \"C\" < $1)");
    let f = sql(
        "this.metadata.version >= 2 && this.id == 'x'",
        Dialect::Postgres,
        1,
    );
    assert_eq!(f.sql, "((o.version >= $1) AND (o.id = $2))");
    let f = sql(
        "this.metadata.creation_timestamp >= '2024-01-02T01:00:00+01:00'",
        Dialect::Sqlite,
        1,
    );
    assert_eq!(f.sql, "(o.created_at >= ?)");
    assert_eq!(f.params, vec![text("2024-01-02T00:00:00.000000Z")]);
    let f = sql(
        "this.metadata.deletion_timestamp != '2024-01-02T00:00:00Z'",
        Dialect::Postgres,
        1,
    );
    assert_eq!(
        f.sql,
        "(o.deleted_at IS NULL OR o.deleted_at <> $1::timestamptz)"
    );
    let f = sql(
        "has(this.metadata.deletion_timestamp)",
        Dialect::Postgres,
        1,
    );
    assert_eq!(f.sql, "(o.deleted_at IS NOT NULL)");
}

#[test]
fn methods_in_and_logic() {
    let f = sql("this.metadata.name.startsWith('we_b%')", Dialect::Sqlite, 1);
    assert_eq!(f.sql, "(substr(COALESCE(o.name, ''), 1, 5) = ?)");
    assert_eq!(f.params, vec![text("we_b%")]);
    let f = sql("this.metadata.name.endsWith('é%')", Dialect::Postgres, 1);
    assert_eq!(f.sql, "(right(COALESCE(o.name, ''), 2) = $1)");
    let f = sql("this.spec.x.contains('')", Dialect::Postgres, 1);
    assert_eq!(f.sql, "(1 = 1)");
    let f = sql(
        "this.metadata.labels.env.contains('o') || this.metadata.annotations['a b'] == 'x'",
        Dialect::Postgres,
        4,
    );
    assert_eq!(
        f.sql,
        "(o.id IN (SELECT l.object_id FROM object_labels l WHERE 1 = 1 AND l.key = $4 AND (strpos(l.value, $5) > 0)) OR \
         EXISTS (SELECT 1 FROM (SELECT o.annotations ->> $6 AS value) l WHERE l.value IS NOT NULL AND l.value = $7))"
    );
    let f = sql(
        "this.status.state in [1, 'SUBNET_STATE_FAILED']",
        Dialect::Postgres,
        1,
    );
    assert_eq!(
        f.sql,
        "(COALESCE((o.body #>> '{status,state}'), $1) IN ($2, $3))"
    );
    let f = sql("this.metadata.name in []", Dialect::Sqlite, 1);
    assert_eq!(f.sql, "(1 = 0)");
    let f = sql("this.metadata.name in ['a', 'b']", Dialect::Sqlite, 1);
    assert_eq!(f.sql, "(COALESCE(o.name, '') IN (?, ?))");
}

#[test]
fn static_type_errors() {
    let cases: &[(&str, usize, &str)] = &[
        (
            "this.metadata.name > 3",
            21,
            "is a string and cannot be compared with an integer",
        ),
        ("this.metadata.labels.k == 1", 26, "is a label (string)"),
        ("this.metadata.version == 'x'", 25, "is an integer"),
        (
            "this.metadata.creation_timestamp < 'yesterday'",
            35,
            "invalid timestamp",
        ),
        ("this.metadata.creation_timestamp < 5", 35, "is a timestamp"),
        (
            "this.metadata.version.startsWith('1')",
            0,
            "needs a string field",
        ),
        ("this.metadata.labels == 'x'", 0, "whole map"),
        ("this.metadata.labels.a.b == 'x'", 0, "have no fields"),
        ("this.metadata.foo == 'x'", 0, "unknown metadata field"),
        ("this.id.x == 'x'", 0, "has no fields"),
        ("this.spec['a b'] == 'x'", 0, "unsupported field name"),
        ("this.status.state > 1", 20, "not supported on enum fields"),
        ("this.status.state == true", 21, "is an enum"),
        (
            "this.status.attached < true",
            23,
            "not supported on bool values",
        ),
        ("this.spec.x < null", 14, "not supported on null"),
        ("this.spec.x in [1, 'a']", 19, "same type"),
        ("this.spec.x in [null]", 16, "null is not allowed"),
        ("this.metadata.name in ['a', 1]", 28, "is a string"),
    ];
    for (src, pos, msg) in cases {
        let e = sql_err(src);
        assert_eq!(e.position, *pos, "{src}: {}", e.message);
        assert!(e.message.contains(msg), "{src}: {}", e.message);
    }
}

#[test]
fn order() {
    let terms =
        parse_order("metadata.name desc, this.metadata.creation_timestamp, status.port").unwrap();
    assert_eq!(
        order_to_sql(&terms, Dialect::Sqlite).unwrap(),
        r#"o.name DESC, o.created_at ASC, json_extract(o.body, '$."status"."port"') ASC"#
    );
    assert_eq!(
        order_to_sql(&terms, Dialect::Postgres).unwrap(),
        r#"o.name COLLATE "C" DESC NULLS LAST, o.created_at ASC NULLS FIRST, (o.body #> '{status,port}') ASC NULLS FIRST"#
    );
    assert_eq!(order_to_sql(&[], Dialect::Sqlite).unwrap(), "");
    for (src, msg) in [
        ("spec.Name", "invalid order field segment 'Name'"),
        ("metadata.labels", "cannot order by"),
        ("metadata.foo", "cannot order by"),
    ] {
        let terms = parse_order(src).unwrap();
        let e = order_to_sql(&terms, Dialect::Postgres).unwrap_err();
        assert!(e.message.contains(msg), "{src}: {}", e.message);
    }
    let terms = vec![OrderTerm {
        path: Path {
            segments: vec!["spec".into(), "x') --".into()],
            pos: 3,
        },
        descending: false,
    }];
    assert_eq!(
        order_to_sql(&terms, Dialect::Sqlite).unwrap_err().position,
        3
    );
}

// -----------------------------------------------------------------------------------------
// Execution against real databases.

struct Row {
    id: &'static str,
    name: Option<&'static str>,
    version: i64,
    created: &'static str,
    deleted: Option<&'static str>,
    labels: &'static [(&'static str, &'static str)],
    annotations: &'static str,
    body: &'static str,
}

const ROWS: &[Row] = &[
    Row {
        id: "a",
        name: Some("web-1"),
        version: 1,
        created: "2024-01-01T00:00:00.000000Z",
        deleted: None,
        labels: &[("osac.openshift.io/default", "true"), ("env", "prod")],
        annotations: "{}",
        body: r#"{"spec":{"virtual_network":"vn1"},"status":{"state":"SUBNET_STATE_READY","attached":true,"count":"12","port":5}}"#,
    },
    Row {
        id: "b",
        name: Some("web_2%"),
        version: 2,
        created: "2024-01-02T00:00:00.000000Z",
        deleted: None,
        labels: &[("env", "dev")],
        annotations: r#"{"note":"x","a b":"y"}"#,
        body: r#"{"spec":{"virtual_network":"vn2"},"status":{"state":"SUBNET_STATE_PENDING","count":"9"}}"#,
    },
    Row {
        id: "c",
        name: None,
        version: 3,
        created: "2024-01-03T00:00:00.500000Z",
        deleted: Some("2024-02-01T00:00:00.000000Z"),
        labels: &[],
        annotations: "{}",
        body: r#"{"spec":{},"status":{}}"#,
    },
    Row {
        id: "d",
        name: Some("webX2"),
        version: 4,
        created: "2024-01-04T00:00:00.000000Z",
        deleted: None,
        labels: &[("env", "prod")],
        annotations: "{}",
        body: r#"{"spec":{"virtual_network":"vn1","tags":["x"]},"status":{"state":"SUBNET_STATE_FAILED","attached":true,"message":"a_b%c\\d"}}"#,
    },
    Row {
        id: "e",
        name: Some("Web"),
        version: 5,
        created: "2024-01-05T00:00:00.000000Z",
        deleted: None,
        labels: &[("env", "pr%d")],
        annotations: "{}",
        body: r#"{"spec":{"virtual_network":"","tags":[]},"status":{"state":"SUBNET_STATE_READY","port":-3,"message":"A_B"}}"#,
    },
];

const FILTER_CASES: &[(&str, &[&str])] = &[
    (r#"this.spec.virtual_network == "vn1""#, &["a", "d"]),
    (r#"this.spec.virtual_network == """#, &["c", "e"]),
    (
        r#"this.metadata.labels["osac.openshift.io/default"] == "true""#,
        &["a"],
    ),
    (r#"this.metadata.labels["env"] != "prod""#, &["b", "c", "e"]),
    (
        r#"this.metadata.labels.env in ["dev", "pr%d"]"#,
        &["b", "e"],
    ),
    ("this.metadata.labels.env.startsWith('pr%')", &["e"]),
    (
        "this.metadata.labels.env.startsWith('pr')",
        &["a", "d", "e"],
    ),
    ("this.metadata.labels.env < 'p'", &["b"]),
    ("this.metadata.labels.env == null", &["c"]),
    ("has(this.metadata.labels.env)", &["a", "b", "d", "e"]),
    ("has(this.metadata.labels)", &["a", "b", "d", "e"]),
    ("has(this.metadata.annotations)", &["b"]),
    ("this.metadata.annotations.note == 'x'", &["b"]),
    ("this.metadata.annotations['a b'].endsWith('y')", &["b"]),
    (
        "this.metadata.annotations.note != 'x'",
        &["a", "c", "d", "e"],
    ),
    ("this.status.attached == false", &["b", "c", "e"]),
    ("this.status.attached != false", &["a", "d"]),
    ("this.status.attached", &["a", "d"]),
    ("!this.status.attached", &["b", "c", "e"]),
    ("this.status.state == 2", &["a", "e"]),
    ("this.status.state == 0", &["c"]),
    ("this.status.state == 'SUBNET_STATE_UNSPECIFIED'", &["c"]),
    ("this.status.state != 2", &["b", "c", "d"]),
    (
        "this.status.state in [1, 'SUBNET_STATE_FAILED']",
        &["b", "d"],
    ),
    ("this.status.state in [0]", &["c"]),
    ("this.status.state.endsWith('_READY')", &["a", "e"]),
    ("this.status.count > 10", &["a"]),
    ("this.status.count < 10", &["b", "c", "d", "e"]),
    ("this.status.count == 9.0", &["b"]),
    ("this.status.port == 0", &["b", "c", "d"]),
    ("this.status.port < 0", &["e"]),
    ("this.status.port in [5, -3]", &["a", "e"]),
    (
        "this.status.port >= 0 && this.status.port <= 5.5",
        &["a", "b", "c", "d"],
    ),
    ("this.metadata.name.startsWith('web_')", &["b"]),
    ("this.metadata.name.startsWith('web')", &["a", "b", "d"]),
    ("this.metadata.name.endsWith('%')", &["b"]),
    ("this.metadata.name.contains('_2')", &["b"]),
    ("this.metadata.name.contains('b')", &["a", "b", "d", "e"]),
    ("this.metadata.name == ''", &["c"]),
    ("this.metadata.name > 'web-1'", &["b", "d"]),
    ("this.metadata.name in ['web-1', 'webX2']", &["a", "d"]),
    ("this.metadata.name in []", &[]),
    ("!(this.metadata.name in [])", &["a", "b", "c", "d", "e"]),
    ("this.status.message.contains('b%c\\\\d')", &["d"]),
    ("this.status.message.startsWith('a_')", &["d"]),
    ("this.status.message.startsWith('A_')", &["e"]),
    (
        "this.status.message.startsWith('')",
        &["a", "b", "c", "d", "e"],
    ),
    ("has(this.spec.virtual_network)", &["a", "b", "d"]),
    ("has(this.spec.tags)", &["d"]),
    ("has(this.status.port)", &["a", "e"]),
    ("has(this.status.attached)", &["a", "d"]),
    ("has(this.spec)", &["a", "b", "c", "d", "e"]),
    ("!has(this.status.message)", &["a", "b", "c"]),
    ("this.spec.tags == null", &["a", "b", "c"]),
    ("this.spec.tags != null", &["d", "e"]),
    ("has(this.metadata.deletion_timestamp)", &["c"]),
    ("has(this.metadata.name)", &["a", "b", "d", "e"]),
    (
        "this.metadata.deletion_timestamp == null",
        &["a", "b", "d", "e"],
    ),
    (
        "this.metadata.deletion_timestamp > '2024-01-15T00:00:00Z'",
        &["c"],
    ),
    (
        "!(this.metadata.deletion_timestamp > '2024-01-15T00:00:00Z')",
        &["a", "b", "d", "e"],
    ),
    (
        "this.metadata.deletion_timestamp != '2024-02-01T00:00:00Z'",
        &["a", "b", "d", "e"],
    ),
    (
        "this.metadata.creation_timestamp >= '2024-01-02T01:00:00+01:00'",
        &["b", "c", "d", "e"],
    ),
    (
        "this.metadata.creation_timestamp > '2024-01-03T00:00:00Z'",
        &["c", "d", "e"],
    ),
    (
        "this.metadata.creation_timestamp in ['2024-01-03T00:00:00.5Z']",
        &["c"],
    ),
    (
        "this.metadata.version >= 4 || this.id == 'a'",
        &["a", "d", "e"],
    ),
    ("this.metadata.version in [2, 3]", &["b", "c"]),
    (
        "this.metadata.tenant == 't1' && this.metadata.creator == 'u'",
        &["a", "b", "c", "d", "e"],
    ),
    (
        "(this.spec.virtual_network == 'vn2' || this.metadata.name == 'webX2') && !has(this.metadata.deletion_timestamp)",
        &["b", "d"],
    ),
];

const ORDER_CASES: &[(&str, &[&str])] = &[
    ("metadata.name desc", &["b", "d", "a", "e", "c"]),
    ("this.metadata.name", &["c", "e", "a", "d", "b"]),
    (
        "this.metadata.creation_timestamp desc",
        &["e", "d", "c", "b", "a"],
    ),
    // Missing fields are NULL and sort first ascending (not as their default value).
    ("status.port", &["b", "c", "d", "e", "a"]),
    ("status.port desc", &["a", "e", "b", "c", "d"]),
    (
        "spec.virtual_network, metadata.version desc",
        &["c", "e", "d", "a", "b"],
    ),
    ("metadata.labels.env desc", &["a", "d", "e", "b", "c"]),
    (
        "metadata.deletion_timestamp desc, id desc",
        &["c", "e", "d", "b", "a"],
    ),
];

const SQLITE_SCHEMA: &[&str] = &[
    "CREATE TABLE objects (id TEXT PRIMARY KEY, kind TEXT NOT NULL, tenant TEXT NOT NULL, name TEXT, \
     creator TEXT NOT NULL, version BIGINT NOT NULL, seq INTEGER NOT NULL, created_at TEXT NOT NULL, \
     deleted_at TEXT, annotations TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE TABLE object_labels (object_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, \
     PRIMARY KEY (object_id, key))",
    "CREATE INDEX object_labels_kv ON object_labels (key, value)",
];

const PG_SCHEMA: &[&str] = &[
    "CREATE TEMP TABLE objects (id TEXT PRIMARY KEY, kind TEXT NOT NULL, tenant TEXT NOT NULL, name TEXT, \
     creator TEXT NOT NULL, version BIGINT NOT NULL, seq BIGINT NOT NULL, created_at TIMESTAMPTZ NOT NULL, \
     deleted_at TIMESTAMPTZ, annotations JSONB NOT NULL, body JSONB NOT NULL)",
    "CREATE TEMP TABLE object_labels (object_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, \
     PRIMARY KEY (object_id, key))",
    "CREATE INDEX object_labels_kv ON object_labels (key, value)",
];

const PG_INSERT: &str = "INSERT INTO objects VALUES ($1, 'subnets', 't1', $2, 'u', $3, $4, $5::timestamptz, \
     $6::timestamptz, $7::jsonb, $8::jsonb)";
const SQLITE_INSERT: &str =
    "INSERT INTO objects VALUES (?, 'subnets', 't1', ?, 'u', ?, ?, ?, ?, ?, ?)";

/// Builds `SELECT o.id … WHERE o.kind = <p1> AND (<filter>) ORDER BY <order>, o.seq` with
/// the filter's parameters numbered after the kind.
fn query_sql(dialect: Dialect, filter: &str, order: &str) -> (String, Vec<SqlValue>) {
    let kind_ph = if dialect == Dialect::Postgres {
        "$1"
    } else {
        "?"
    };
    let mut params = vec![text("subnets")];
    let mut sql = format!("SELECT o.id FROM objects o WHERE o.kind = {kind_ph}");
    if !filter.is_empty() {
        let e = parse_filter(filter).unwrap();
        let f = filter_to_sql(&e, dialect, params.len() + 1, &enums).unwrap();
        sql.push_str(&format!(" AND ({})", f.sql));
        params.extend(f.params);
    }
    let order = order_to_sql(&parse_order(order).unwrap(), dialect).unwrap();
    if order.is_empty() {
        sql.push_str(" ORDER BY o.seq");
    } else {
        sql.push_str(&format!(" ORDER BY {order}, o.seq"));
    }
    (sql, params)
}

macro_rules! bind_all {
    ($q:expr, $params:expr) => {{
        let mut q = $q;
        for p in $params {
            q = match p {
                SqlValue::Text(s) => q.bind(s.clone()),
                SqlValue::Int(i) => q.bind(*i),
                SqlValue::Float(f) => q.bind(*f),
                SqlValue::Bool(b) => q.bind(*b),
            };
        }
        q
    }};
}

fn check(filter: &str, order: &str, got: Vec<String>, want: &[&str], db: &str) {
    assert_eq!(got, want, "{db}: filter {filter:?} order {order:?}");
}

/// Inserts [`ROWS`] (and their labels) over `$conn`, then runs every filter and order case
/// with `$dialect` and checks the ids returned. `$insert` and `$label_insert` are the INSERT
/// statements in the dialect's placeholder syntax.
macro_rules! load_rows_and_check_cases {
    ($conn:expr, $dialect:expr, $insert:expr, $label_insert:expr, $db:expr) => {{
        let conn = $conn;
        for (seq, r) in ROWS.iter().enumerate() {
            sqlx::query($insert)
                .bind(r.id)
                .bind(r.name)
                .bind(r.version)
                .bind(seq as i64)
                .bind(r.created)
                .bind(r.deleted)
                .bind(r.annotations)
                .bind(r.body)
                .execute(&mut *conn)
                .await
                .unwrap();
            for (k, v) in r.labels {
                sqlx::query($label_insert)
                    .bind(r.id)
                    .bind(*k)
                    .bind(*v)
                    .execute(&mut *conn)
                    .await
                    .unwrap();
            }
        }
        let cases = FILTER_CASES
            .iter()
            .map(|(f, w)| (*f, "", *w))
            .chain(ORDER_CASES.iter().map(|(o, w)| ("", *o, *w)));
        for (filter, order, want) in cases {
            let (sql, params) = query_sql($dialect, filter, order);
            let q = bind_all!(sqlx::query_scalar::<_, String>(&sql), &params);
            let got = q
                .fetch_all(&mut *conn)
                .await
                .unwrap_or_else(|e| panic!("{filter:?} {order:?}: {sql}: {e}"));
            check(filter, order, got, want, $db);
        }
    }};
}

#[tokio::test]
async fn execute_sqlite() {
    use sqlx::Connection;
    let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
        .await
        .unwrap();
    for stmt in SQLITE_SCHEMA {
        sqlx::query(stmt).execute(&mut conn).await.unwrap();
    }
    load_rows_and_check_cases!(
        &mut conn,
        Dialect::Sqlite,
        SQLITE_INSERT,
        "INSERT INTO object_labels VALUES (?, ?, ?)",
        "sqlite"
    );
}

#[tokio::test]
async fn execute_postgres() {
    use sqlx::Connection;
    let Ok(url) = std::env::var("OSAC_TEST_DATABASE_URL") else {
        eprintln!("OSAC_TEST_DATABASE_URL not set; skipping the PostgreSQL execution test");
        return;
    };
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    for stmt in PG_SCHEMA {
        sqlx::query(stmt).execute(&mut conn).await.unwrap();
    }
    load_rows_and_check_cases!(
        &mut conn,
        Dialect::Postgres,
        PG_INSERT,
        "INSERT INTO object_labels VALUES ($1, $2, $3)",
        "postgres"
    );
}
