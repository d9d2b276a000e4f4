//! How a converge reads what the database holds of the rows of ours: every row in some tables
//! (a full resync), or only the rows an operation names and the rows of ours referencing them.

use std::collections::{BTreeMap, BTreeSet};

use osac_ovsdb::{Client, datum, op};
use serde_json::Value;

use super::{Actual, DATABASE, ID_KEY, MANAGED_KEY, Row};

/// The rows of ours in `table` that a select returned, added to `out` by `(table, key)`; a row
/// already there is kept (it may have been read with more columns).
fn index_rows(
    table: &'static str,
    result: &Value,
    out: &mut BTreeMap<(&'static str, String), Actual>,
) {
    for row in result["rows"].as_array().into_iter().flatten() {
        let Some(row) = row.as_object() else { continue };
        let ids = row.get("external_ids").map(datum::string_map_items);
        let (Some(key), Some(uuid)) = (
            ids.as_ref().and_then(|m| m.get(ID_KEY)).cloned(),
            row.get("_uuid")
                .and_then(datum::as_uuid)
                .map(str::to_string),
        ) else {
            continue;
        };
        out.entry((table, key)).or_insert_with(|| Actual {
            uuid,
            row: row.clone(),
        });
    }
}

/// Reads every row of ours in `tables`, indexed by `(table, key)`.
pub(super) async fn read_ours(
    nb: &Client,
    tables: &BTreeSet<&'static str>,
) -> Result<BTreeMap<(&'static str, String), Actual>, osac_ovsdb::Error> {
    let tables: Vec<&'static str> = tables.iter().copied().collect();
    let ops = tables
        .iter()
        .map(|t| {
            op::select(
                t,
                vec![op::map_has("external_ids", MANAGED_KEY, "true")],
                None,
            )
        })
        .collect();
    let results = nb.transact(DATABASE, ops).await?;
    let mut out = BTreeMap::new();
    for (table, result) in tables.iter().zip(results) {
        index_rows(table, &result, &mut out);
    }
    Ok(out)
}

/// The columns every read of ours includes: what identifies the row.
const IDENTITY: [&str; 2] = ["_uuid", "external_ids"];

/// A select of the row of ours `table:key`, with `columns` besides its identity.
fn select_by_key(table: &'static str, key: &str, columns: &BTreeSet<String>) -> Value {
    let columns: Vec<&str> = IDENTITY
        .into_iter()
        .chain(columns.iter().map(String::as_str))
        .collect();
    op::select(
        table,
        vec![
            op::map_has("external_ids", MANAGED_KEY, "true"),
            op::map_has("external_ids", ID_KEY, key),
        ],
        Some(&columns),
    )
}

/// Reads the rows of ours `needed` names (`(table, key)` → the columns compared), by key, in one
/// transaction.
pub(super) async fn read_by_key(
    nb: &Client,
    needed: &BTreeMap<(&'static str, String), BTreeSet<String>>,
) -> Result<BTreeMap<(&'static str, String), Actual>, osac_ovsdb::Error> {
    let mut out = BTreeMap::new();
    if needed.is_empty() {
        return Ok(out);
    }
    let ops = needed
        .iter()
        .map(|((table, key), columns)| select_by_key(table, key, columns))
        .collect();
    let results = nb.transact(DATABASE, ops).await?;
    for (((table, _), _), result) in needed.iter().zip(results) {
        index_rows(table, &result, &mut out);
    }
    Ok(out)
}

/// Adds to `needed` the rows `row` and its children name, with the columns a plan compares.
pub(super) fn rows_named(
    row: &Row,
    needed: &mut BTreeMap<(&'static str, String), BTreeSet<String>>,
) {
    let columns = needed.entry((row.table, row.key.clone())).or_default();
    columns.extend(row.columns.keys().cloned());
    columns.extend(row.references.iter().map(|(c, _, _)| (*c).to_string()));
    columns.extend(row.children.iter().map(|(c, _)| (*c).to_string()));
    for (_, table, key) in &row.references {
        needed.entry((table, key.clone())).or_default();
    }
    for m in &row.memberships {
        for key in &m.keys {
            needed.entry((m.table, key.clone())).or_default();
        }
    }
    for (_, child) in &row.children {
        rows_named(child, needed);
    }
}

/// The rows of ours referencing a row through a column: `(table, column, uuid)` → their keys.
pub(super) type Holders = BTreeMap<(&'static str, &'static str, String), BTreeSet<String>>;

/// The rows of `have` referencing others through the memberships' columns of `wanted` (and
/// their children), indexed once: `have` holds every row of ours in those tables.
pub(super) fn holders_in(
    have: &BTreeMap<(&'static str, String), Actual>,
    wanted: &[Row],
) -> Holders {
    let mut columns = BTreeSet::new();
    let mut queue: Vec<&Row> = wanted.iter().collect();
    while let Some(row) = queue.pop() {
        queue.extend(row.children.iter().map(|(_, c)| c));
        columns.extend(row.memberships.iter().map(|m| (m.table, m.column)));
    }
    let mut holders = Holders::new();
    for (table, column) in columns {
        for ((t, key), actual) in have {
            if *t != table {
                continue;
            }
            let held = actual.row.get(column).map(datum::uuid_set_items);
            for uuid in held.unwrap_or_default() {
                holders
                    .entry((table, column, uuid))
                    .or_default()
                    .insert(key.clone());
            }
        }
    }
    holders
}

/// What a keyed converge reads besides the rows it names: for each existing wanted row with
/// memberships, the rows of ours referencing it through the membership's column (they may have
/// to drop it); for each existing row that drops children it does not list, which of the
/// children it holds are ours. One transaction, none when nothing is needed. The rows found
/// are added to `have`; the returned holders say who references whom.
pub(super) async fn read_related(
    nb: &Client,
    wanted: &[Row],
    have: &mut BTreeMap<(&'static str, String), Actual>,
) -> Result<Holders, osac_ovsdb::Error> {
    let known: BTreeSet<String> = have.values().map(|a| a.uuid.clone()).collect();
    let mut ops = Vec::new();
    // What each op looks for: a membership (table, column, uuid) or a child table.
    let mut purposes: Vec<(&'static str, Option<(&'static str, String)>)> = Vec::new();
    let mut queue: Vec<&Row> = wanted.iter().collect();
    let mut asked = BTreeSet::new();
    while let Some(row) = queue.pop() {
        queue.extend(row.children.iter().map(|(_, c)| c));
        let Some(actual) = have.get(&(row.table, row.key.clone())) else {
            continue;
        };
        for m in &row.memberships {
            if !asked.insert((m.table, m.column, actual.uuid.clone())) {
                continue;
            }
            let holds = op::cond(
                m.column,
                "includes",
                datum::set([datum::uuid(&actual.uuid)]),
            );
            ops.push(op::select(
                m.table,
                vec![op::map_has("external_ids", MANAGED_KEY, "true"), holds],
                Some(&IDENTITY),
            ));
            purposes.push((m.table, Some((m.column, actual.uuid.clone()))));
        }
        if row.keeps_other_children {
            continue;
        }
        for (column, child) in &row.children {
            let held = actual
                .row
                .get(*column)
                .map(datum::uuid_set_items)
                .unwrap_or_default();
            for uuid in held {
                if known.contains(&uuid) || !asked.insert((child.table, "_uuid", uuid.clone())) {
                    continue;
                }
                let mut by_uuid = op::by_uuid(&uuid);
                by_uuid.push(op::map_has("external_ids", MANAGED_KEY, "true"));
                ops.push(op::select(child.table, by_uuid, Some(&IDENTITY)));
                purposes.push((child.table, None));
            }
        }
    }
    let mut holders = Holders::new();
    if ops.is_empty() {
        return Ok(holders);
    }
    let results = nb.transact(DATABASE, ops).await?;
    for ((table, membership), result) in purposes.into_iter().zip(results) {
        if let Some((column, uuid)) = membership {
            let mut found = BTreeMap::new();
            index_rows(table, &result, &mut found);
            holders.insert(
                (table, column, uuid),
                found.keys().map(|(_, k)| k.clone()).collect(),
            );
            for (k, a) in found {
                have.entry(k).or_insert(a);
            }
        } else {
            index_rows(table, &result, have);
        }
    }
    Ok(holders)
}
