//! Operations of a `transact` (RFC 7047 §5.2) and their conditions (§5.1).

use serde_json::{Map, Value, json};

/// A condition `[column, function, value]`: `function` is `==`, `!=`, `includes`, `excludes`
/// (and `<`, `<=`, `>`, `>=` for numbers).
pub fn cond(column: &str, function: &str, value: Value) -> Value {
    json!([column, function, value])
}

/// The row whose `_uuid` is `id`.
pub fn by_uuid(id: &str) -> Vec<Value> {
    vec![cond("_uuid", "==", crate::datum::uuid(id))]
}

/// Rows whose string map `column` holds `key` = `value` (e.g. `external_ids` naming an object).
pub fn map_has(column: &str, key: &str, value: &str) -> Value {
    cond(column, "includes", crate::datum::string_map([(key, value)]))
}

/// Inserts `row` into `table`; `uuid_name` lets later operations of the transaction refer to
/// it with [`crate::datum::named_uuid`].
pub fn insert(table: &str, row: Map<String, Value>, uuid_name: Option<&str>) -> Value {
    let mut op = json!({"op": "insert", "table": table, "row": row});
    if let Some(name) = uuid_name {
        op["uuid-name"] = Value::from(name);
    }
    op
}

/// Sets the columns of `row` in the rows of `table` matching `conditions`.
pub fn update(table: &str, conditions: Vec<Value>, row: Map<String, Value>) -> Value {
    json!({"op": "update", "table": table, "where": conditions, "row": row})
}

/// Deletes the rows of `table` matching `conditions`.
pub fn delete(table: &str, conditions: Vec<Value>) -> Value {
    json!({"op": "delete", "table": table, "where": conditions})
}

/// Applies `mutations` (`[column, mutator, value]`, mutator `insert`/`delete` for sets and
/// maps, `+=`… for numbers) to the rows of `table` matching `conditions`.
pub fn mutate(table: &str, conditions: Vec<Value>, mutations: Vec<Value>) -> Value {
    json!({"op": "mutate", "table": table, "where": conditions, "mutations": mutations})
}

/// A mutation `[column, mutator, value]`.
pub fn mutation(column: &str, mutator: &str, value: Value) -> Value {
    json!([column, mutator, value])
}

/// Selects `columns` (all when None) of the rows of `table` matching `conditions`.
pub fn select(table: &str, conditions: Vec<Value>, columns: Option<&[&str]>) -> Value {
    let mut op = json!({"op": "select", "table": table, "where": conditions});
    if let Some(cols) = columns {
        op["columns"] = json!(cols);
    }
    op
}

/// Fails the transaction (error `timed out`) unless the row of `table` with UUID `id` exists:
/// placed before operations on that row, it makes a write against a row deleted since it was
/// read fail as a whole instead of silently matching nothing.
pub fn exists(table: &str, id: &str) -> Value {
    json!({
        "op": "wait",
        "timeout": 0,
        "table": table,
        "where": by_uuid(id),
        "columns": ["_uuid"],
        "until": "==",
        "rows": [{"_uuid": crate::datum::uuid(id)}],
    })
}

/// A comment recorded in the server's log with the transaction.
pub fn comment(text: &str) -> Value {
    json!({"op": "comment", "comment": text})
}

/// A row from `(column, value)` pairs.
pub fn row<const N: usize>(columns: [(&str, Value); N]) -> Map<String, Value> {
    columns
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_the_rfc_shapes() {
        let i = insert("Logical_Switch", row([("name", json!("ls"))]), Some("new"));
        assert_eq!(
            i,
            json!({"op": "insert", "table": "Logical_Switch", "row": {"name": "ls"}, "uuid-name": "new"})
        );
        let d = delete("ACL", by_uuid("abc"));
        assert_eq!(d["where"], json!([["_uuid", "==", ["uuid", "abc"]]]));
        let s = select(
            "ACL",
            vec![map_has("external_ids", "osac-id", "x")],
            Some(&["_uuid"]),
        );
        assert_eq!(
            s["where"][0],
            json!(["external_ids", "includes", ["map", [["osac-id", "x"]]]])
        );
        assert_eq!(s["columns"], json!(["_uuid"]));
        let m = mutate(
            "Logical_Switch",
            by_uuid("ls"),
            vec![mutation("ports", "insert", crate::datum::set([]))],
        );
        assert_eq!(m["mutations"][0][1], "insert");
    }
}
