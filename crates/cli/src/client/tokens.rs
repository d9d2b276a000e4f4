//! `osac admin get tokens` and `osac admin delete token ID…`: the bearer tokens the server keeps
//! (never their secrets; a secret is printed only by `osac admin create token`).

use serde_json::Value;

use super::kind::Scope;
use super::ops::{ClientCtx, list_text, provider_list};
use super::output::{OutputFormat, Table, emit};

/// Lists the tokens.
pub async fn list(ctx: &ClientCtx, format: OutputFormat) -> anyhow::Result<()> {
    let (_, items) = provider_list(ctx, "tokens").await?;
    emit(&list_text(items, format, table, "id")?)
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

/// Revokes tokens by id; `force` also revokes the token the command is using.
pub async fn revoke(ctx: &ClientCtx, ids: &[String], force: bool) -> anyhow::Result<()> {
    for id in ids {
        let mut url = ctx.api.endpoint(Scope::Provider, &["tokens", id]);
        if force {
            url.query_pairs_mut().append_pair("force", "true");
        }
        ctx.api.call(osac_client::Method::DELETE, url, None).await?;
        emit(&format!("token/{id} revoked\n"))?;
    }
    Ok(())
}
