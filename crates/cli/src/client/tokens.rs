//! `osac admin get tokens` and `osac admin delete token ID…`: the bearer tokens the server keeps
//! (never their secrets; a secret is printed only by `osac admin create token`).

use serde_json::Value;

use super::kind::Scope;
use super::ops::ClientCtx;
use super::output::{OutputFormat, Table, emit, to_json, to_yaml};

/// Lists the tokens.
pub async fn list(ctx: &ClientCtx, format: OutputFormat) -> anyhow::Result<()> {
    let url = ctx.api.endpoint(Scope::Provider, &["tokens"]);
    let resp = ctx.api.call(reqwest::Method::GET, url, None).await?;
    let items = match resp.get("items") {
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    };
    let text = match format {
        OutputFormat::Table | OutputFormat::Wide => table(&items).render(),
        OutputFormat::Json => to_json(&Value::Array(items))?,
        OutputFormat::Yaml => to_yaml(&Value::Array(items))?,
        OutputFormat::Name | OutputFormat::Id => items
            .iter()
            .filter_map(|t| t.get("id").and_then(Value::as_str))
            .map(|id| format!("{id}\n"))
            .collect(),
    };
    emit(&text)
}

fn table(items: &[Value]) -> Table {
    let field = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let mut t = Table::new(&["ID", "SUBJECT", "ROLE", "TENANT", "CREATED", "EXPIRES"]);
    for v in items {
        let expires = match field(v, "expires") {
            e if e.is_empty() => "never".to_string(),
            e => e,
        };
        t.push(vec![
            field(v, "id"),
            field(v, "subject"),
            field(v, "role"),
            field(v, "tenant"),
            field(v, "created"),
            expires,
        ]);
    }
    t
}

/// Revokes tokens by id.
pub async fn revoke(ctx: &ClientCtx, ids: &[String]) -> anyhow::Result<()> {
    for id in ids {
        let url = ctx.api.endpoint(Scope::Provider, &["tokens", id]);
        ctx.api.call(reqwest::Method::DELETE, url, None).await?;
        emit(&format!("token/{id} revoked\n"))?;
    }
    Ok(())
}
