//! The generic commands, shared by the tenant (`osac get …`) and provider (`osac admin get …`)
//! surfaces: get, delete, label, update; plus object-file loading and merging for create.

use std::io::{Read, Write};
use std::path::Path;

use anyhow::{Context, anyhow, bail};
use osac_client::{Api, ClientError, ListQuery};
use serde_json::{Map, Value, json};

use super::args::{DeleteOpts, GetOpts, LabelOpts, UpdateOpts};
use super::kind::{Access, Kind, Scope, table_refs};
use super::output::{
    OutputFormat, RefNames, Table, add_external_ips, emit, list_object, managers_table,
    object_label, render_raw, replicas_table, table, to_json, to_yaml, wide_table,
};
use super::parse::{Direction, apply_label_ops, parse_label_op, parse_rules, rule_summary};
use super::wait::{Goal, wait};
use super::watch::print_events;

/// A connected client and the API it talks to.
pub struct ClientCtx {
    pub api: Api,
    pub scope: Scope,
}

/// A note on stderr (best effort).
pub fn note(msg: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{msg}");
}

/// Refuses a kind the API does not serve (or serves read-only), pointing at the right command.
pub fn check_access(kind: Kind, scope: Scope, verb: &str, write: bool) -> anyhow::Result<()> {
    match (kind.access(scope), write) {
        (Access::ReadWrite, _) | (Access::ReadOnly, false) => Ok(()),
        (Access::ReadOnly, true) => bail!(
            "{} are managed by the provider: use `osac admin {verb} {}` with a provider-admin token",
            kind.plural(),
            kind.singular()
        ),
        (Access::None, _) => match scope {
            Scope::Tenant => bail!(
                "{} is a provider object: use `osac admin {verb} {}`",
                kind.singular(),
                kind.singular()
            ),
            Scope::Provider => {
                bail!(
                    "{} is a tenant object: use `osac {verb} {}`",
                    kind.singular(),
                    kind.singular()
                )
            }
        },
    }
}

/// Id → name of every object of the kinds that `kind`'s table refers to (best effort).
async fn ref_names(ctx: &ClientCtx, kind: Kind) -> RefNames {
    let mut names = RefNames::new();
    for r in table_refs(kind) {
        if r.access(ctx.scope) == Access::None {
            continue;
        }
        let Ok(items) = ctx
            .api
            .list(ctx.scope, r.collection(), &ListQuery::default())
            .await
        else {
            continue;
        };
        if *r == Kind::ExternalIpAttachment {
            add_external_ips(&mut names, &items);
        }
        for v in items {
            let id = v.get("id").and_then(Value::as_str);
            let name = v.pointer("/metadata/name").and_then(Value::as_str);
            if let (Some(id), Some(name)) = (id, name) {
                names.insert(id.to_string(), name.to_string());
            }
        }
    }
    names
}

/// Prints objects in `format`; `single` prints one object rather than a list.
pub async fn print_objects(
    ctx: &ClientCtx,
    kind: Kind,
    items: &[Value],
    format: OutputFormat,
    single: bool,
    total: Option<u64>,
) -> anyhow::Result<()> {
    if format == OutputFormat::Table {
        let names = ref_names(ctx, kind).await;
        return emit(&table(kind, items, &names).render());
    }
    if format == OutputFormat::Wide {
        let names = ref_names(ctx, kind).await;
        return emit(&wide_table(kind, items, &names).render());
    }
    emit(&render_raw(format, kind, items, single, total)?)
}

/// Reads one object by name or id.
async fn fetch(ctx: &ClientCtx, kind: Kind, name: &str) -> Result<Value, ClientError> {
    ctx.api.get(ctx.scope, kind.collection(), name).await
}

fn id_of(obj: &Value) -> anyhow::Result<String> {
    obj.get("id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| anyhow!("the server returned an object without an id"))
}

/// `get`.
pub async fn get(ctx: &ClientCtx, o: &GetOpts) -> anyhow::Result<()> {
    check_access(o.kind, ctx.scope, "get", false)?;
    if o.watch {
        return watch(ctx, o).await;
    }
    let (items, total) = if o.names.is_empty() {
        // `labels["k"]="v"` (the designs' and kubectl's shorthand) is sent as a label match.
        let q = ListQuery {
            filter: get_filter(o)?,
            order: match &o.sort_by {
                Some(field) => Some(super::selector::sort_by_order(field).map_err(|e| anyhow!(e))?),
                None => o.order.clone(),
            },
            limit: o.limit,
            offset: o.offset,
        };
        let page = ctx
            .api
            .list_counted(ctx.scope, o.kind.collection(), &q)
            .await?;
        (page.items, page.total)
    } else {
        let mut items = Vec::new();
        for n in &o.names {
            items.push(fetch(ctx, o.kind, n).await?);
        }
        (items, None)
    };
    if items.is_empty() && matches!(o.output, OutputFormat::Table | OutputFormat::Wide) {
        note(&format!("no {} found", o.kind.plural()));
        return Ok(());
    }
    print_objects(ctx, o.kind, &items, o.output, o.names.len() == 1, total).await
}

/// The filter of `get`: `--filter` (a `labels["k"]="v"` shorthand sent as a label match) and
/// `--selector`, both holding when both are given.
fn get_filter(o: &GetOpts) -> anyhow::Result<Option<String>> {
    let filter = o
        .filter
        .as_deref()
        .map(|f| osac_model::filter::label_shorthand(f).unwrap_or_else(|| f.to_string()));
    let selector = o
        .selector
        .as_deref()
        .map(super::selector::selector_filter)
        .transpose()
        .map_err(|e| anyhow!(e))?;
    Ok(match (filter, selector) {
        (Some(f), Some(s)) => Some(format!("({f}) && {s}")),
        (f, s) => f.or(s),
    })
}

/// `get --watch`: named objects are watched by id, others through the filter.
async fn watch(ctx: &ClientCtx, o: &GetOpts) -> anyhow::Result<()> {
    let filter = if o.names.is_empty() {
        get_filter(o)?
    } else {
        let mut ids = Vec::new();
        for n in &o.names {
            ids.push(serde_json::to_string(&id_of(
                &fetch(ctx, o.kind, n).await?,
            )?)?);
        }
        Some(format!("this.id in [{}]", ids.join(", ")))
    };
    let stream = ctx
        .api
        .watch(ctx.scope, o.kind.collection(), filter.as_deref())
        .await?;
    let names = ref_names(ctx, o.kind).await;
    print_events(stream, o.kind, o.output, &names).await
}

/// `delete`.
pub async fn delete(ctx: &ClientCtx, o: &DeleteOpts) -> anyhow::Result<()> {
    check_access(o.kind, ctx.scope, "delete", true)?;
    let mut pending = Vec::new();
    for n in &o.names {
        let obj = match fetch(ctx, o.kind, n).await {
            Ok(obj) => obj,
            Err(e) if e.is_not_found() && o.ignore_not_found => continue,
            Err(e) => return Err(e.into()),
        };
        let (id, label) = (id_of(&obj)?, object_label(o.kind, &obj));
        match ctx.api.delete(ctx.scope, o.kind.collection(), &id).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() && o.ignore_not_found => continue,
            Err(e) => return Err(e.into()),
        }
        if !o.wait.wait {
            emit(&format!("{label} deleting\n"))?;
        }
        pending.push((id, label));
    }
    if o.wait.wait {
        for (id, label) in pending {
            wait(
                &ctx.api,
                ctx.scope,
                o.kind,
                &id,
                &label,
                Goal::Gone,
                o.wait.timeout,
                false,
            )
            .await?;
        }
    }
    Ok(())
}

/// `label`: read, change the label map, write it back with optimistic locking (retried when
/// someone else changed the object in between).
pub async fn label(ctx: &ClientCtx, o: &LabelOpts) -> anyhow::Result<()> {
    check_access(o.kind, ctx.scope, "label", true)?;
    let ops = o
        .changes
        .iter()
        .map(|c| parse_label_op(c).map_err(|e| anyhow!(e)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let obj = fetch(ctx, o.kind, &o.name).await?;
        let id = id_of(&obj)?;
        let mut labels = obj
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        apply_label_ops(&mut labels, &ops);
        let version = obj.pointer("/metadata/version").cloned();
        let mut meta = json!({ "labels": labels });
        if let Some(v) = &version {
            meta["version"] = v.clone();
        }
        let body = json!({ "metadata": meta });
        let mask = ["metadata.labels".to_string()];
        match ctx
            .api
            .patch(
                ctx.scope,
                o.kind.collection(),
                &id,
                &body,
                &mask,
                version.is_some(),
            )
            .await
        {
            Ok(updated) => {
                return emit(&format!(
                    "{} labeled\n",
                    object_label(o.kind, &updated_or(&updated, &obj))
                ));
            }
            Err(e) if e.code() == Some("ABORTED") && attempt < 5 => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// `--quota NAME=VALUE,…` of an update: the quotas to set, `None` for `default` (unset: the
/// provider default applies again).
fn quota_changes(text: &str) -> anyhow::Result<Vec<(&'static str, Option<u32>)>> {
    let mut out = Vec::new();
    let mut rest = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        match entry.split_once('=') {
            Some((name, "default")) => {
                let q = osac_model::quota::Quota::parse(name.trim())
                    .ok_or_else(|| anyhow!("--quota: '{}' is not a quota", name.trim()))?;
                out.push((q.name(), None));
            }
            _ => rest.push(entry),
        }
    }
    for (q, limit) in osac_model::quota::parse_assignments("--quota", &rest.join(","))? {
        out.push((q.name(), Some(limit)));
    }
    Ok(out)
}

/// The PATCH answer when it is an object, else the object read before.
fn updated_or(updated: &Value, before: &Value) -> Value {
    if updated.is_object() {
        updated.clone()
    } else {
        before.clone()
    }
}

/// `update`: security-group rule replacement and/or fields from a file.
pub async fn update(ctx: &ClientCtx, o: &UpdateOpts) -> anyhow::Result<()> {
    check_access(o.kind, ctx.scope, "update", true)?;
    let edits_given = !o.add_ingress.is_empty()
        || !o.remove_ingress.is_empty()
        || !o.add_egress.is_empty()
        || !o.remove_egress.is_empty();
    let rules_given = !o.ingress.is_empty()
        || !o.egress.is_empty()
        || o.clear_ingress
        || o.clear_egress
        || edits_given;
    if rules_given && o.kind != Kind::SecurityGroup {
        bail!("--ingress/--egress/--clear-*/--add-*/--remove-* apply to security groups only");
    }
    if !o.quotas.is_empty() && o.kind != Kind::Tenant {
        bail!("--quota applies to tenants only");
    }
    if edits_given {
        return edit_rules(ctx, o).await;
    }
    let mut body = match &o.from_file {
        Some(p) => strip_read_only(o.kind, load_object_file(p)?),
        None => json!({}),
    };
    let mut mask: Vec<String> = match (&o.update_mask, &o.from_file) {
        (Some(m), _) => m
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        (None, Some(_)) => mask_of(&body),
        (None, None) => Vec::new(),
    };
    for (dir, flag, list, clear) in [
        (Direction::Ingress, "ingress", &o.ingress, o.clear_ingress),
        (Direction::Egress, "egress", &o.egress, o.clear_egress),
    ] {
        if list.is_empty() && !clear {
            continue;
        }
        let rules = parse_rules(list, dir).map_err(|e| anyhow!("--{flag}: {e}"))?;
        merge(&mut body, json!({ "spec": { flag: rules } }));
        let path = format!("spec.{flag}");
        if !mask.contains(&path) {
            mask.push(path);
        }
    }
    for text in &o.quotas {
        for (name, limit) in quota_changes(text)? {
            if let Some(limit) = limit {
                merge(&mut body, json!({ "spec": { "quotas": { name: limit } } }));
            }
            let path = format!("spec.quotas.{name}");
            if !mask.contains(&path) {
                mask.push(path);
            }
        }
    }
    if mask.is_empty() {
        bail!(
            "nothing to update: give --from-file FILE (or, for security groups, --ingress/--egress; for tenants, --quota)"
        );
    }
    let obj = fetch(ctx, o.kind, &o.name).await?;
    let id = id_of(&obj)?;
    let updated = ctx
        .api
        .patch(ctx.scope, o.kind.collection(), &id, &body, &mask, false)
        .await?;
    let updated = updated_or(&updated, &obj);
    match o.output {
        Some(f) => print_objects(ctx, o.kind, std::slice::from_ref(&updated), f, true, None).await,
        None => emit(&format!("{} updated\n", object_label(o.kind, &updated))),
    }
}

/// `update security-group NAME --add-ingress R --remove-egress R …`: the group's current rules
/// with these added (a rule already there is left alone) and removed (a rule that is not there
/// is an error naming it), written with the version read (`lock=true`), so a concurrent change
/// is not overwritten.
async fn edit_rules(ctx: &ClientCtx, o: &UpdateOpts) -> anyhow::Result<()> {
    let obj = fetch(ctx, o.kind, &o.name).await?;
    let id = id_of(&obj)?;
    let label = object_label(o.kind, &obj);
    let mut spec = serde_json::Map::new();
    let mut mask = Vec::new();
    for (dir, field, add, remove) in [
        (
            Direction::Ingress,
            "ingress",
            &o.add_ingress,
            &o.remove_ingress,
        ),
        (Direction::Egress, "egress", &o.add_egress, &o.remove_egress),
    ] {
        if add.is_empty() && remove.is_empty() {
            continue;
        }
        let current = obj["spec"][field].as_array().cloned().unwrap_or_default();
        let rules =
            edited_rules(current, add, remove, dir).map_err(|e| anyhow!("{e} of {label}"))?;
        spec.insert(field.to_string(), Value::Array(rules));
        mask.push(format!("spec.{field}"));
    }
    let body = json!({"metadata": {"version": obj["metadata"]["version"]}, "spec": spec});
    let updated = ctx
        .api
        .patch(ctx.scope, o.kind.collection(), &id, &body, &mask, true)
        .await?;
    let updated = updated_or(&updated, &obj);
    match o.output {
        Some(f) => print_objects(ctx, o.kind, std::slice::from_ref(&updated), f, true, None).await,
        None => emit(&format!("{label} updated\n")),
    }
}

/// `current` with the rules of `add` appended unless present and those of `remove` taken out
/// (each must be present). Rules compare by protocol, ports and peer, whatever the spelling.
fn edited_rules(
    mut current: Vec<Value>,
    add: &[String],
    remove: &[String],
    dir: Direction,
) -> Result<Vec<Value>, String> {
    let flag = match dir {
        Direction::Ingress => "ingress",
        Direction::Egress => "egress",
    };
    let parsed = |specs: &[String], verb: &str| -> Result<Vec<Value>, String> {
        match parse_rules(specs, dir).map_err(|e| format!("--{verb}-{flag}: {e}"))? {
            Value::Array(a) => Ok(a),
            _ => Ok(Vec::new()),
        }
    };
    for rule in parsed(remove, "remove")? {
        let key = rule_key(&rule);
        let before = current.len();
        current.retain(|r| rule_key(r) != key);
        if current.len() == before {
            return Err(format!(
                "--remove-{flag}: rule '{}' is not among the {flag} rules",
                rule_summary(&rule)
            ));
        }
    }
    for rule in parsed(add, "add")? {
        if !current.iter().any(|r| rule_key(r) == rule_key(&rule)) {
            current.push(rule);
        }
    }
    Ok(current)
}

/// What makes two rules the same: protocol, port range and peer CIDR (absent = zero/empty).
fn rule_key(rule: &Value) -> (String, i64, i64, String) {
    let text = |k: &str| {
        rule.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let num = |k: &str| {
        rule.get(k)
            .and_then(|v| {
                v.as_i64()
                    .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            })
            .unwrap_or(0)
    };
    let peer = [text("ipv4_cidr"), text("ipv6_cidr")].concat();
    (text("protocol"), num("port_from"), num("port_to"), peer)
}

/// `osac admin managers`.
pub async fn managers(ctx: &ClientCtx, format: OutputFormat) -> anyhow::Result<()> {
    let (_, items) = provider_list(ctx, "managers").await?;
    emit(&list_text(items, format, managers_table, "name")?)
}

/// `osac admin get replicas`.
pub async fn replicas(ctx: &ClientCtx, format: OutputFormat) -> anyhow::Result<()> {
    let (resp, items) = provider_list(ctx, "replicas").await?;
    let text = match format {
        OutputFormat::Table | OutputFormat::Wide => {
            let mut out = replicas_table(&items).render();
            if resp.get("shared") == Some(&Value::Bool(false)) {
                out.push_str("one process on an embedded store: it reconciles everything\n");
            } else if let Some(n) = resp.get("unowned_shards").and_then(Value::as_i64)
                && n > 0
            {
                out.push_str(&format!("{n} shards held by no replica right now\n"));
            }
            out
        }
        OutputFormat::Json => to_json(&resp)?,
        OutputFormat::Yaml => to_yaml(&resp)?,
        OutputFormat::Name | OutputFormat::Id => key_lines(&items, "id"),
    };
    emit(&text)
}

/// GETs a provider list that is not a kind's collection (`managers`, `replicas`, `tokens`):
/// the whole reply and its `items`.
pub async fn provider_list(
    ctx: &ClientCtx,
    collection: &str,
) -> anyhow::Result<(Value, Vec<Value>)> {
    let url = ctx.api.endpoint(Scope::Provider, &[collection]);
    let resp = ctx.api.call(osac_client::Method::GET, url, None).await?;
    let items = match resp.get("items") {
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    };
    Ok((resp, items))
}

/// `items` in `format`: their table (`to_table`), the list object as JSON or YAML, or (name and id formats)
/// each item's `key` on a line of its own.
pub fn list_text(
    items: Vec<Value>,
    format: OutputFormat,
    to_table: fn(&[Value]) -> Table,
    key: &str,
) -> anyhow::Result<String> {
    Ok(match format {
        OutputFormat::Table | OutputFormat::Wide => to_table(&items).render(),
        OutputFormat::Json => to_json(&list_object(items, None))?,
        OutputFormat::Yaml => to_yaml(&list_object(items, None))?,
        OutputFormat::Name | OutputFormat::Id => key_lines(&items, key),
    })
}

/// Each item's string field `key`, one a line (items without it are skipped).
fn key_lines(items: &[Value], key: &str) -> String {
    items
        .iter()
        .filter_map(|m| m.get(key).and_then(Value::as_str))
        .map(|n| format!("{n}\n"))
        .collect()
}

/// The update mask for a partial object: top-level fields, and the fields inside `spec` and
/// `metadata` (so a file with `spec: {ingress: …}` changes only `spec.ingress`).
pub fn mask_of(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(o) = body.as_object() {
        for (k, v) in o {
            match (k.as_str(), v.as_object()) {
                ("spec" | "metadata", Some(inner)) if !inner.is_empty() => {
                    out.extend(
                        inner
                            .keys()
                            .filter(|f| *f != "version")
                            .map(|f| format!("{k}.{f}")),
                    );
                }
                _ => out.push(k.clone()),
            }
        }
    }
    out
}

/// Reads a YAML or JSON object from a file (`-`: stdin).
pub fn load_object_file(path: &Path) -> anyhow::Result<Value> {
    let text = if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read stdin")?;
        s
    } else {
        std::fs::read_to_string(path).map_err(|e| anyhow!("cannot read {}: {e}", path.display()))?
    };
    parse_object(&text).map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// Parses one YAML (or JSON) mapping.
pub fn parse_object(text: &str) -> Result<Value, String> {
    let v: Value = serde_yaml_ng::from_str(text).map_err(|e| format!("invalid YAML/JSON: {e}"))?;
    if !v.is_object() {
        return Err("expected one object (a YAML or JSON mapping)".into());
    }
    Ok(v)
}

/// Drops what the server sets (so `osac get … -o yaml` output can be fed back).
pub fn strip_read_only(kind: Kind, mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("id");
        o.remove("status");
        if kind == Kind::NetworkClass {
            o.remove("capabilities");
        }
        if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in [
                "creation_timestamp",
                "deletion_timestamp",
                "version",
                "creator",
                "finalizers",
            ] {
                m.remove(k);
            }
        }
    }
    v
}

/// Deep-merges `over` into `base`: objects merge key by key, anything else replaces.
pub fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

/// Inserts `value` under `key` when present.
pub fn put(map: &mut Map<String, Value>, key: &str, value: Option<impl Into<Value>>) {
    if let Some(v) = value {
        map.insert(key.to_string(), v.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_overrides_and_keeps() {
        let mut base = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"ipv4_cidr": "10.0.0.0/16"}});
        merge(
            &mut base,
            json!({"metadata": {"labels": {"y": "2"}}, "spec": {"ipv6_cidr": "fd00::/48"}}),
        );
        assert_eq!(
            base,
            json!({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}},
                   "spec": {"ipv4_cidr": "10.0.0.0/16", "ipv6_cidr": "fd00::/48"}})
        );
        merge(&mut base, json!({"spec": {"ipv4_cidr": "10.1.0.0/16"}}));
        assert_eq!(base["spec"]["ipv4_cidr"], "10.1.0.0/16");
    }

    #[test]
    fn file_round_trip_strips_server_fields() {
        let v = parse_object(
            "id: abc\nmetadata:\n  name: web\n  version: \"3\"\n  creation_timestamp: x\n  labels: {a: b}\nspec:\n  ingress: []\nstatus:\n  state: SECURITY_GROUP_STATE_READY\n",
        )
        .unwrap();
        let v = strip_read_only(Kind::SecurityGroup, v);
        assert_eq!(
            v,
            json!({"metadata": {"name": "web", "labels": {"a": "b"}}, "spec": {"ingress": []}})
        );
        assert_eq!(
            mask_of(&v),
            ["metadata.labels", "metadata.name", "spec.ingress"]
        );
        assert!(parse_object("[1, 2]").is_err());
        assert!(parse_object("{\"a\": ").is_err());
        assert_eq!(
            parse_object("{\"title\": \"t\"}").unwrap(),
            json!({"title": "t"})
        );
    }

    #[test]
    fn access_messages_point_to_the_right_command() {
        let e = check_access(Kind::Tenant, Scope::Tenant, "get", false)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "tenant is a provider object: use `osac admin get tenant`"
        );
        let e = check_access(Kind::Subnet, Scope::Provider, "delete", true)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "subnet is a tenant object: use `osac delete subnet`");
        let e = check_access(Kind::NetworkClass, Scope::Tenant, "delete", true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("osac admin delete networkclass"), "{e}");
        assert!(check_access(Kind::NetworkClass, Scope::Tenant, "get", false).is_ok());
    }
}
