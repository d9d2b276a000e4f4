//! `osac events [--for KIND/NAME]`: what happened to objects (state transitions, onboarding,
//! cleanup, refused requests), as recorded by the server. Events expire after the server's
//! event TTL (default one hour).

use anyhow::anyhow;
use osac_client::ListQuery;
use serde_json::Value;

use super::args::EventsArgs;
use super::kind::{Access, Scope};
use super::ops::{ClientCtx, note};
use super::output::{OutputFormat, Table, emit, list_object, to_json, to_yaml};

/// REST collection of events (public API; a provider token without a tenant sees all).
const COLLECTION: &str = "events";

/// How many events `osac events` shows without `--limit`.
const DEFAULT_LIMIT: u64 = 100;

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The list filter for `--for KIND/NAME`: by the object's id when it can be read, else (a
/// kind the caller cannot read, e.g. a tenant reading its own Tenant) by kind and name.
async fn filter_for(ctx: &ClientCtx, target: &str) -> anyhow::Result<String> {
    let (kind, name) = target
        .split_once('/')
        .filter(|(k, n)| !k.is_empty() && !n.is_empty())
        .ok_or_else(|| anyhow!("--for: expected KIND/NAME, e.g. subnet/my-subnet"))?;
    let kind = super::kind::parse(kind).map_err(|e| anyhow!("--for: {e}"))?;
    let scope = if kind.access(Scope::Tenant) == Access::None {
        Scope::Provider
    } else {
        Scope::Tenant
    };
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_default();
    match ctx.api.get(scope, kind.collection(), name).await {
        Ok(obj) => {
            let id = obj
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| anyhow!("the server returned an object without an id"))?;
            Ok(format!("this.spec.object_id == {}", quoted(id)))
        }
        Err(e) if scope == Scope::Provider && !e.is_transient() => Ok(format!(
            "this.spec.object_kind == {} && this.spec.object_name == {}",
            quoted(kind.display_name()),
            quoted(name)
        )),
        Err(e) => Err(e.into()),
    }
}

/// `osac events`.
pub async fn run(ctx: &ClientCtx, a: &EventsArgs) -> anyhow::Result<()> {
    if a.watch {
        return watch(ctx, a).await;
    }
    let mut items = match &a.target {
        Some(target) => {
            // Everything about one object, in the order it happened.
            let q = ListQuery {
                filter: Some(filter_for(ctx, target).await?),
                order: None,
                limit: a.limit,
                offset: a.offset,
            };
            ctx.api.list(Scope::Tenant, COLLECTION, &q).await?
        }
        None => {
            // The latest ones, shown oldest first.
            let q = ListQuery {
                filter: None,
                order: Some("metadata.creation_timestamp desc".into()),
                limit: Some(a.limit.unwrap_or(DEFAULT_LIMIT)),
                offset: a.offset,
            };
            let mut items = ctx.api.list(Scope::Tenant, COLLECTION, &q).await?;
            items.reverse();
            items
        }
    };
    if items.is_empty() && matches!(a.output, OutputFormat::Table | OutputFormat::Wide) {
        note("no events found");
        return Ok(());
    }
    let out = match a.output {
        OutputFormat::Json => to_json(&list_object(std::mem::take(&mut items), None))?,
        OutputFormat::Yaml => to_yaml(&list_object(std::mem::take(&mut items), None))?,
        OutputFormat::Name => items
            .iter()
            .map(|v| format!("event/{}\n", text(v, "/id")))
            .collect(),
        OutputFormat::Id => items
            .iter()
            .map(|v| format!("{}\n", text(v, "/id")))
            .collect(),
        OutputFormat::Table | OutputFormat::Wide => table(&items).render(),
    };
    emit(&out)
}

/// `osac events --watch`: the retained events, then each new one as it is recorded, as table
/// rows or one JSON/YAML event per line/document. Expiry (DELETED) is not shown.
async fn watch(ctx: &ClientCtx, a: &EventsArgs) -> anyhow::Result<()> {
    let filter = match &a.target {
        Some(target) => Some(filter_for(ctx, target).await?),
        None => None,
    };
    let mut stream = ctx
        .api
        .watch(Scope::Tenant, COLLECTION, filter.as_deref())
        .await?;
    let mut first = true;
    while let Some(event) = stream.next().await? {
        if event.kind != "ADDED" {
            continue;
        }
        let out = match a.output {
            OutputFormat::Json => event.object.to_string() + "\n",
            OutputFormat::Yaml => format!("---\n{}", to_yaml(&event.object)?),
            OutputFormat::Name => format!("event/{}\n", text(&event.object, "/id")),
            OutputFormat::Id => format!("{}\n", text(&event.object, "/id")),
            OutputFormat::Table | OutputFormat::Wide => {
                let rendered = table(std::slice::from_ref(&event.object)).render();
                let skip = if first { 0 } else { 1 };
                rendered
                    .lines()
                    .skip(skip)
                    .map(|l| format!("{l}\n"))
                    .collect()
            }
        };
        first = false;
        emit(&out)?;
    }
    Ok(())
}

/// TIME, TYPE, REASON, OBJECT (Kind/name), MESSAGE.
fn table(items: &[Value]) -> Table {
    let mut t = Table::new(&["TIME", "TYPE", "REASON", "OBJECT", "MESSAGE"]);
    for v in items {
        t.push(row(v));
    }
    t
}

fn row(v: &Value) -> Vec<String> {
    let time = text(v, "/metadata/creation_timestamp");
    // 2024-05-01T12:00:00.123456Z → 2024-05-01 12:00:00
    let time = time.get(..19).unwrap_or(time).replace('T', " ");
    let kind = text(v, "/spec/type");
    let kind = match kind {
        "EVENT_TYPE_WARNING" => "Warning",
        "EVENT_TYPE_NORMAL" => "Normal",
        other => other,
    };
    let name = match text(v, "/spec/object_name") {
        "" => text(v, "/spec/object_id"),
        n => n,
    };
    vec![
        time,
        kind.to_string(),
        text(v, "/spec/reason").to_string(),
        format!("{}/{name}", text(v, "/spec/object_kind")),
        text(v, "/spec/message").to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rows_show_time_type_reason_object_and_message() {
        let v = json!({
            "id": "e1",
            "metadata": {"creation_timestamp": "2024-05-01T12:00:00.123456Z"},
            "spec": {
                "object_kind": "Subnet", "object_id": "s1", "object_name": "web",
                "type": "EVENT_TYPE_WARNING", "reason": "Failed", "message": "boom"
            }
        });
        assert_eq!(
            row(&v),
            [
                "2024-05-01 12:00:00",
                "Warning",
                "Failed",
                "Subnet/web",
                "boom"
            ]
        );
        let unnamed = json!({"spec": {"object_kind": "Host", "object_id": "h1"}});
        assert_eq!(row(&unnamed)[3], "Host/h1");
    }
}
