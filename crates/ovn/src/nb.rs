//! The rows osac-net owns in an OVN northbound database, and how they are brought to what they
//! should be: the database is the state, with no records of our own beside it.
//!
//! Every row we write carries `external_ids` [`MANAGED_KEY`]`=true` and [`ID_KEY`] (a key
//! unique in its table naming the osac object and the row's role, e.g. `subnet:<id>`). Rows
//! without them belong to someone else and are never read for a decision, changed or deleted.
//!
//! [`converge`] compares the wanted rows ([`Row`]: a root row and the rows it references, such
//! as a logical switch and its ports) with what the database holds and changes only the
//! difference, in one transaction: missing rows are inserted, changed columns are set back,
//! rows no longer wanted are deleted. Run with nothing to change it writes nothing; run after a
//! row was deleted or edited behind our back it puts the row back.
//!
//! Besides its children, a row may name other rows of ours by key: a column holding a
//! reference ([`Row::with_reference`], e.g. a port's DHCP options) is resolved to the row's
//! UUID, or to the name of its insert when the same transaction creates it; a membership
//! ([`Row::member_of`], e.g. a port in port groups) makes exactly the named rows of ours in a
//! table reference this row through a column, and removes it from the others of ours.

use std::collections::{BTreeMap, BTreeSet};

use osac_ovsdb::{Client, datum, op};
use serde_json::{Map, Value};

mod read;
use read::{Holders, holders_in, read_by_key, read_ours, read_related, rows_named};

/// The northbound database's name.
pub const DATABASE: &str = "OVN_Northbound";
/// `external_ids` key marking a row as ours.
pub const MANAGED_KEY: &str = "osac-managed";
/// `external_ids` key naming the row: unique in its table.
pub const ID_KEY: &str = "osac-id";

/// A row as it should be: its table, its key ([`ID_KEY`]), the columns we set, and the rows it
/// references by column (children of a root table are garbage collected by the database when
/// no row references them any more).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The table.
    pub table: &'static str,
    /// The row's key, unique in its table.
    pub key: String,
    /// The columns we own (not `external_ids`, which [`Row::new`] fills in).
    pub columns: Map<String, Value>,
    /// Extra `external_ids` (e.g. the tenant).
    pub external_ids: BTreeMap<String, String>,
    /// Referenced rows by the referencing column, e.g. `("ports", port)`.
    pub children: Vec<(&'static str, Row)>,
    /// Whether children of ours not listed stay referenced (a row several objects add
    /// children to, such as a router and the ports of its subnets); otherwise they are dropped.
    pub keeps_other_children: bool,
    /// Columns holding a reference to another row of ours: `(column, table, key)`.
    pub references: Vec<(&'static str, &'static str, String)>,
    /// The rows of ours that reference this one, by table: see [`Membership`].
    pub memberships: Vec<Membership>,
}

/// The rows of ours in `table` whose set column `column` references a row: exactly those keyed
/// `keys` (which must exist); every other row of ours in `table` loses its reference to it.
/// Rows of others are never changed. Finding the rows to leave reads every row of ours in
/// `table`, so a membership costs a read of that table per converge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// The referencing table (e.g. `Port_Group`).
    pub table: &'static str,
    /// Its set column of references (e.g. `ports`).
    pub column: &'static str,
    /// The keys of the rows that must reference this row.
    pub keys: BTreeSet<String>,
}

/// A [`converge`] that could not be done; nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum ConvergeError {
    /// The database refused or could not be reached.
    #[error(transparent)]
    Ovsdb(#[from] osac_ovsdb::Error),
    /// A wanted row names a row of ours that neither exists nor is created before it.
    #[error("{from} refers to {table}:{key}, which does not exist")]
    MissingReference {
        /// The referring row, as `table:key`.
        from: String,
        /// The table of the missing row.
        table: &'static str,
        /// Its key.
        key: String,
    },
}

impl Row {
    /// A row of `table` keyed `key` with `columns`.
    pub fn new(table: &'static str, key: impl Into<String>, columns: Map<String, Value>) -> Self {
        Row {
            table,
            key: key.into(),
            columns,
            external_ids: BTreeMap::new(),
            children: Vec::new(),
            keeps_other_children: false,
            references: Vec::new(),
            memberships: Vec::new(),
        }
    }

    /// The same row with `column` referencing the row of ours `table:key` — existing, or
    /// created by the same converge before this row (listed earlier, or as a child).
    pub fn with_reference(mut self, column: &'static str, table: &'static str, key: &str) -> Self {
        self.references.push((column, table, key.to_string()));
        self
    }

    /// The same row referenced through `column` by exactly the rows of ours in `table` keyed
    /// `keys` (see [`Membership`]); they must exist.
    pub fn member_of<K: AsRef<str>>(
        mut self,
        table: &'static str,
        column: &'static str,
        keys: impl IntoIterator<Item = K>,
    ) -> Self {
        self.memberships.push(Membership {
            table,
            column,
            keys: keys.into_iter().map(|k| k.as_ref().to_string()).collect(),
        });
        self
    }

    /// The same row, keeping children of ours it does not list (see
    /// [`Row::keeps_other_children`]).
    pub fn keeping_other_children(mut self) -> Self {
        self.keeps_other_children = true;
        self
    }

    /// The same row with `external_ids` `k`=`v` added.
    pub fn with_external_id(mut self, k: &str, v: &str) -> Self {
        self.external_ids.insert(k.to_string(), v.to_string());
        self
    }

    /// The same row referencing `child` through `column`.
    pub fn with_child(mut self, column: &'static str, child: Row) -> Self {
        self.children.push((column, child));
        self
    }

    /// The full `external_ids` we write: ours plus the markers.
    fn all_external_ids(&self) -> BTreeMap<String, String> {
        let mut ids = self.external_ids.clone();
        ids.insert(MANAGED_KEY.into(), "true".into());
        ids.insert(ID_KEY.into(), self.key.clone());
        ids
    }

    /// The columns to write, `external_ids` included (references excluded).
    fn written(&self) -> Map<String, Value> {
        let mut cols = self.columns.clone();
        cols.insert(
            "external_ids".into(),
            datum::string_map(self.all_external_ids()),
        );
        cols
    }

    /// The tables of this row and its children.
    fn tables(&self, into: &mut BTreeSet<&'static str>) {
        into.insert(self.table);
        into.extend(self.references.iter().map(|(_, t, _)| *t));
        into.extend(self.memberships.iter().map(|m| m.table));
        for (_, c) in &self.children {
            c.tables(into);
        }
    }
}

/// A row of ours as the database holds it.
#[derive(Debug, Clone)]
struct Actual {
    uuid: String,
    row: Map<String, Value>,
}

/// Which root rows a [`converge`] is about.
#[derive(Debug, Clone)]
pub enum Scope {
    /// Every root row of ours in the tables involved (a full resync: rows of ours not wanted
    /// are deleted).
    All(BTreeSet<&'static str>),
    /// Only the root rows with these `(table, key)`: those not in the wanted list are deleted,
    /// others are not looked at.
    Keys(BTreeSet<(&'static str, String)>),
}

/// What a [`converge`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Rows inserted, as `table:key`.
    pub inserted: Vec<String>,
    /// Rows whose columns were set back, as `table:key`.
    pub updated: Vec<String>,
    /// Rows deleted (or unreferenced), as `table:key`.
    pub deleted: Vec<String>,
}

impl Changes {
    /// Whether nothing was changed.
    pub fn is_empty(&self) -> bool {
        self.inserted.is_empty() && self.updated.is_empty() && self.deleted.is_empty()
    }
}

/// A value in a form that compares equal however the server spells it: a one-element set as
/// its atom, sets and maps sorted.
fn normalize(v: &Value) -> Value {
    if let Some([tag, Value::Array(items)]) = v.as_array().map(Vec::as_slice) {
        if tag == "set" {
            if items.len() == 1 {
                return normalize(&items[0]);
            }
            let mut items: Vec<Value> = items.iter().map(normalize).collect();
            items.sort_by_key(Value::to_string);
            return Value::Array(vec![tag.clone(), Value::Array(items)]);
        }
        if tag == "map" {
            let mut pairs = items.clone();
            pairs.sort_by_key(Value::to_string);
            return Value::Array(vec![tag.clone(), Value::Array(pairs)]);
        }
    }
    v.clone()
}

/// The columns of `want` whose value in `have` differs.
fn differing(want: &Map<String, Value>, have: &Map<String, Value>) -> Map<String, Value> {
    want.iter()
        .filter(|(k, v)| have.get(*k).map(normalize) != Some(normalize(v)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Builds the operations that make the database hold `wanted` within `scope`.
struct Plan<'a> {
    have: &'a BTreeMap<(&'static str, String), Actual>,
    /// UUID → `table:key` of the rows of ours.
    by_uuid: BTreeMap<String, String>,
    ops: Vec<Value>,
    changes: Changes,
    names: usize,
    /// What refers to each row already ensured by this plan (a row listed twice, e.g. a port
    /// under its switch and elsewhere, is written once, as first listed).
    ensured: BTreeMap<(&'static str, String), Value>,
    /// Who references the wanted rows through their memberships' columns.
    holders: Holders,
}

impl Plan<'_> {
    fn fresh_name(&mut self) -> String {
        self.names += 1;
        format!("row{}", self.names)
    }

    /// What refers to the row of ours `table:key`: its insert in this plan, or its UUID.
    fn resolve(&self, from: &str, table: &'static str, key: &str) -> Result<Value, ConvergeError> {
        let k = (table, key.to_string());
        if let Some(r) = self.ensured.get(&k) {
            return Ok(r.clone());
        }
        match self.have.get(&k) {
            Some(a) => Ok(datum::uuid(&a.uuid)),
            None => Err(ConvergeError::MissingReference {
                from: from.to_string(),
                table,
                key: key.to_string(),
            }),
        }
    }

    /// Makes `row` exist as wanted; returns what refers to it (its UUID or a named UUID).
    fn ensure(&mut self, row: &Row) -> Result<Value, ConvergeError> {
        if let Some(r) = self.ensured.get(&(row.table, row.key.clone())) {
            return Ok(r.clone());
        }
        let id = format!("{}:{}", row.table, row.key);
        // Children first: the parent's reference columns name them.
        let mut refs: BTreeMap<&'static str, Vec<Value>> = BTreeMap::new();
        for (column, child) in &row.children {
            let r = self.ensure(child)?;
            refs.entry(column).or_default().push(r);
        }
        let mut written = row.written();
        for (column, table, key) in &row.references {
            written.insert((*column).to_string(), self.resolve(&id, table, key)?);
        }
        let this = match self.have.get(&(row.table, row.key.clone())) {
            None => {
                let mut columns = written;
                for (column, list) in &refs {
                    columns.insert((*column).to_string(), datum::set(list.iter().cloned()));
                }
                let name = self.fresh_name();
                self.ops.push(op::insert(row.table, columns, Some(&name)));
                self.changes.inserted.push(id.clone());
                datum::named_uuid(&name)
            }
            Some(actual) => self.update(row, &id, actual, &written, &refs),
        };
        self.ensured
            .insert((row.table, row.key.clone()), this.clone());
        self.join(row, &id, &this)?;
        Ok(this)
    }

    /// Makes exactly the rows named by `row`'s memberships reference it (`this`).
    fn join(&mut self, row: &Row, id: &str, this: &Value) -> Result<(), ConvergeError> {
        let this_uuid = datum::as_uuid(this).map(str::to_string);
        for m in &row.memberships {
            for key in &m.keys {
                if !self.have.contains_key(&(m.table, key.clone())) {
                    return Err(ConvergeError::MissingReference {
                        from: id.to_string(),
                        table: m.table,
                        key: key.clone(),
                    });
                }
            }
            let holding = this_uuid
                .as_ref()
                .map(|u| self.holding(m.table, m.column, u))
                .unwrap_or_default();
            let keys: BTreeSet<&String> = m.keys.iter().chain(&holding).collect();
            for key in keys {
                let Some(actual) = self.have.get(&(m.table, key.clone())) else {
                    continue;
                };
                let mutator = match (m.keys.contains(key), holding.contains(key)) {
                    (true, false) => "insert",
                    (false, true) => "delete",
                    _ => continue,
                };
                self.ops.push(op::exists(m.table, &actual.uuid));
                self.ops.push(op::mutate(
                    m.table,
                    op::by_uuid(&actual.uuid),
                    vec![op::mutation(m.column, mutator, datum::set([this.clone()]))],
                ));
                self.changes.updated.push(format!("{}:{key}", m.table));
            }
        }
        Ok(())
    }

    /// The keys of the rows of ours in `table` whose `column` references `uuid`.
    fn holding(&self, table: &'static str, column: &'static str, uuid: &str) -> BTreeSet<String> {
        self.holders
            .get(&(table, column, uuid.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    /// Sets back what differs in the existing row `actual` of `row`; returns its UUID.
    fn update(
        &mut self,
        row: &Row,
        id: &str,
        actual: &Actual,
        written: &Map<String, Value>,
        refs: &BTreeMap<&'static str, Vec<Value>>,
    ) -> Value {
        let diff = differing(written, &actual.row);
        let mut mutations = Vec::new();
        for (column, list) in refs {
            let held: BTreeSet<String> = actual
                .row
                .get(*column)
                .map(datum::uuid_set_items)
                .unwrap_or_default()
                .into_iter()
                .collect();
            let wanted: BTreeSet<String> = list
                .iter()
                .filter_map(datum::as_uuid)
                .map(str::to_string)
                .collect();
            // References to rows inserted now, or to existing rows not referenced yet.
            let add: Vec<Value> = list
                .iter()
                .filter(|r| datum::as_uuid(r).is_none_or(|u| !held.contains(u)))
                .cloned()
                .collect();
            // References to rows of ours that are no longer wanted (foreign rows stay).
            let drop: Vec<(String, String)> = held
                .iter()
                .filter(|u| !row.keeps_other_children && !wanted.contains(*u))
                .filter_map(|u| self.ours_by_uuid(u))
                .collect();
            if !add.is_empty() {
                mutations.push(op::mutation(column, "insert", datum::set(add)));
            }
            if !drop.is_empty() {
                let uuids: Vec<Value> = drop.iter().map(|(u, _)| datum::uuid(u)).collect();
                mutations.push(op::mutation(column, "delete", datum::set(uuids)));
                self.changes
                    .deleted
                    .extend(drop.into_iter().map(|(_, name)| name));
            }
        }
        if !diff.is_empty() || !mutations.is_empty() {
            self.ops.push(op::exists(row.table, &actual.uuid));
            if !diff.is_empty() {
                self.ops
                    .push(op::update(row.table, op::by_uuid(&actual.uuid), diff));
            }
            if !mutations.is_empty() {
                self.ops
                    .push(op::mutate(row.table, op::by_uuid(&actual.uuid), mutations));
            }
            self.changes.updated.push(id.to_string());
        }
        datum::uuid(&actual.uuid)
    }

    /// The UUID and `table:key` of the row of ours with UUID `uuid`, if it is ours.
    fn ours_by_uuid(&self, uuid: &str) -> Option<(String, String)> {
        self.by_uuid
            .get(uuid)
            .map(|name| (uuid.to_string(), name.clone()))
    }
}

/// `wanted` with the root rows of the same table and key merged into the first: their
/// children, references and memberships together (e.g. a router listed once with a NAT rule
/// and once with another).
fn merged(wanted: &[Row]) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::with_capacity(wanted.len());
    let mut position: BTreeMap<(&'static str, &str), usize> = BTreeMap::new();
    for r in wanted {
        match position
            .get(&(r.table, r.key.as_str()))
            .and_then(|i| out.get_mut(*i))
        {
            Some(first) => {
                first.children.extend(r.children.iter().cloned());
                first.references.extend(r.references.iter().cloned());
                first.memberships.extend(r.memberships.iter().cloned());
                first.keeps_other_children |= r.keeps_other_children;
            }
            None => {
                position.insert((r.table, r.key.as_str()), out.len());
                out.push(r.clone());
            }
        }
    }
    out
}

/// How a [`converge`] of [`Scope::Keys`] or a [`detach`] reads what the database holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Reads {
    /// Only the rows it names (by key) and the rows of ours referencing them: its cost does
    /// not grow with the rows of ours that it does not touch.
    #[default]
    Touched,
    /// Every row of ours in every table involved (what [`Scope::All`] always does).
    Everything,
}

/// Makes the rows of ours within `scope` be `wanted` (see the module docs). Children that are
/// no longer wanted disappear with their parent's reference; root rows of ours in the scope
/// that are not wanted are deleted.
pub async fn converge(
    nb: &Client,
    wanted: &[Row],
    scope: &Scope,
) -> Result<Changes, ConvergeError> {
    converge_reading(nb, wanted, scope, Reads::Touched).await
}

/// [`converge`], reading as `reads` says ([`Scope::All`] always reads everything).
pub async fn converge_reading(
    nb: &Client,
    wanted: &[Row],
    scope: &Scope,
    reads: Reads,
) -> Result<Changes, ConvergeError> {
    let wanted = merged(wanted);
    let (have, holders) = match (scope, reads) {
        (Scope::Keys(keys), Reads::Touched) => {
            let mut needed = BTreeMap::new();
            for r in &wanted {
                rows_named(r, &mut needed);
            }
            for (table, key) in keys {
                needed.entry((*table, key.clone())).or_default();
            }
            let mut have = read_by_key(nb, &needed).await?;
            let holders = read_related(nb, &wanted, &mut have).await?;
            (have, holders)
        }
        _ => {
            let mut tables = BTreeSet::new();
            for r in &wanted {
                r.tables(&mut tables);
            }
            match scope {
                Scope::All(t) => tables.extend(t.iter().copied()),
                Scope::Keys(keys) => tables.extend(keys.iter().map(|(t, _)| *t)),
            }
            let have = read_ours(nb, &tables).await?;
            let holders = holders_in(&have, &wanted);
            (have, holders)
        }
    };
    let mut plan = Plan {
        by_uuid: have
            .iter()
            .map(|((t, k), a)| (a.uuid.clone(), format!("{t}:{k}")))
            .collect(),
        have: &have,
        ops: Vec::new(),
        changes: Changes::default(),
        names: 0,
        ensured: BTreeMap::new(),
        holders,
    };
    for r in &wanted {
        plan.ensure(r)?;
    }
    let wanted_roots: BTreeSet<(&'static str, String)> =
        wanted.iter().map(|r| (r.table, r.key.clone())).collect();
    let roots: Vec<(&'static str, String)> = match scope {
        Scope::All(t) => have
            .keys()
            .filter(|(table, _)| t.contains(table))
            .cloned()
            .collect(),
        Scope::Keys(keys) => keys.iter().cloned().collect(),
    };
    for key in roots {
        if wanted_roots.contains(&key) {
            continue;
        }
        if let Some(actual) = have.get(&key) {
            plan.ops.push(op::delete(key.0, op::by_uuid(&actual.uuid)));
            plan.changes.deleted.push(format!("{}:{}", key.0, key.1));
        }
    }
    if !plan.ops.is_empty() {
        nb.transact(DATABASE, plan.ops).await?;
    }
    Ok(plan.changes)
}

/// Removes the reference from the row of ours `parent` (`(table, key)`) through `column` to the
/// row of ours `child`; the database then removes the child when nothing else references it.
/// Either row already gone is success.
pub async fn detach(
    nb: &Client,
    parent: (&'static str, &str),
    column: &str,
    child: (&'static str, &str),
) -> Result<bool, osac_ovsdb::Error> {
    detach_reading(nb, parent, column, child, Reads::Touched).await
}

/// [`detach`], reading as `reads` says.
pub async fn detach_reading(
    nb: &Client,
    parent: (&'static str, &str),
    column: &str,
    child: (&'static str, &str),
    reads: Reads,
) -> Result<bool, osac_ovsdb::Error> {
    let have = match reads {
        Reads::Touched => {
            let needed = BTreeMap::from([
                ((parent.0, parent.1.to_string()), BTreeSet::new()),
                ((child.0, child.1.to_string()), BTreeSet::new()),
            ]);
            read_by_key(nb, &needed).await?
        }
        Reads::Everything => read_ours(nb, &BTreeSet::from([parent.0, child.0])).await?,
    };
    let (Some(p), Some(c)) = (
        have.get(&(parent.0, parent.1.to_string())),
        have.get(&(child.0, child.1.to_string())),
    ) else {
        return Ok(false);
    };
    nb.transact(
        DATABASE,
        vec![op::mutate(
            parent.0,
            op::by_uuid(&p.uuid),
            vec![op::mutation(
                column,
                "delete",
                datum::set([datum::uuid(&c.uuid)]),
            )],
        )],
    )
    .await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_compare_however_the_server_spells_them() {
        assert_eq!(normalize(&json!(["set", ["a"]])), json!("a"));
        assert_eq!(
            normalize(&json!(["set", ["b", "a"]])),
            normalize(&json!(["set", ["a", "b"]]))
        );
        assert_eq!(
            normalize(&json!(["map", [["k2", "v"], ["k1", "v"]]])),
            normalize(&json!(["map", [["k1", "v"], ["k2", "v"]]]))
        );
        let want = op::row([("name", json!("x")), ("addresses", json!(["set", ["m i"]]))]);
        let have = op::row([("name", json!("x")), ("addresses", json!("m i"))]);
        assert!(differing(&want, &have).is_empty());
        let changed = op::row([("name", json!("y")), ("addresses", json!("m i"))]);
        assert_eq!(differing(&want, &changed).len(), 1);
    }

    #[test]
    fn root_rows_listed_twice_are_merged_into_the_first() {
        let nat = |k: &str| Row::new("NAT", k, Map::new());
        let router = || Row::new("Logical_Router", "vn:1", op::row([("name", json!("r"))]));
        let wanted = [
            router().with_child("nat", nat("a")),
            Row::new("Logical_Switch", "s", Map::new()),
            router()
                .with_child("nat", nat("b"))
                .with_reference("options", "X", "y")
                .keeping_other_children(),
        ];
        let m = merged(&wanted);
        assert_eq!(m.len(), 2);
        let keys: Vec<&str> = m[0].children.iter().map(|(_, c)| c.key.as_str()).collect();
        assert_eq!(keys, ["a", "b"]);
        assert_eq!(m[0].references.len(), 1);
        assert!(m[0].keeps_other_children);
    }

    #[test]
    fn rows_carry_the_markers_in_external_ids() {
        let r = Row::new(
            "Logical_Switch",
            "subnet:1",
            op::row([("name", json!("s"))]),
        )
        .with_external_id("osac-tenant", "t-1");
        let ids = datum::string_map_items(&r.written()["external_ids"]);
        assert_eq!(ids[MANAGED_KEY], "true");
        assert_eq!(ids[ID_KEY], "subnet:1");
        assert_eq!(ids["osac-tenant"], "t-1");
    }
}
