//! Bearer tokens kept in the store, so every replica sees a mint or a revocation at once.
//!
//! Rules:
//! - Only the SHA-256 of a token's secret is stored (the key of its row); the secret itself is
//!   shown once, in the mint answer, and never kept.
//! - A token names its tenant by **id**: a tenant deleted and re-created with the same name is a
//!   new tenant, and the old tokens do not work for it.
//! - A request resolves its token in the store, then the tenant id to the live tenant's name;
//!   an unknown, revoked or expired token, or one whose tenant is gone or being deleted, is
//!   UNAUTHENTICATED. Token rows are cached for a second (revocations reach every replica's
//!   cache through the change feed, `auth::cache`); the tenant is read on every request.

use std::path::Path;

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use osac_model::Kind;
use osac_store::{Change, Store};
use rand::Rng;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Caller, Role};
use crate::error::{ApiError, ApiResult};

/// Key/value namespace of the token rows: key = SHA-256 (hex) of the secret.
pub const NAMESPACE: &str = "auth.tokens";

/// Prefix of every secret this server mints.
const SECRET_PREFIX: &str = "osac_";

/// One token row (the value stored under the hash of its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredToken {
    pub id: String,
    pub subject: String,
    pub role: Role,
    /// Id of the tenant the token acts in; None for provider tokens without a tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    pub created: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<DateTime<Utc>>,
}

/// What the API shows of a token: never the secret, never its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenView {
    pub id: String,
    pub subject: String,
    pub role: Role,
    /// The tenant's current name; empty when the token has no tenant or its tenant is gone.
    pub tenant: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    pub created: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires: Option<DateTime<Utc>>,
}

/// SHA-256 of a secret, lower-case hex: the only form of a secret the store holds.
pub fn hash(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A new high-entropy secret: `osac_` + 32 random bytes in hex.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{SECRET_PREFIX}{hex}")
}

fn unauth(message: &str) -> ApiError {
    ApiError::new(crate::error::Code::Unauthenticated, message.to_string())
}

/// Resolves a secret to its caller, or UNAUTHENTICATED (unknown or revoked, expired, tenant
/// gone or being deleted); reads the store.
pub async fn resolve(store: &dyn Store, secret: &str) -> ApiResult<Caller> {
    caller_of(store, &stored(store, &hash(secret)).await?).await
}

/// The token row stored under the hash of a secret, or UNAUTHENTICATED (unknown or revoked).
pub(crate) async fn stored(store: &dyn Store, key: &str) -> ApiResult<StoredToken> {
    let row = store
        .kv_get(NAMESPACE, key)
        .await?
        .ok_or_else(|| unauth("invalid token (unknown or revoked)"))?;
    serde_json::from_str(&row).map_err(|e| {
        ApiError::new(
            crate::error::Code::Internal,
            format!("stored token is unreadable: {e}"),
        )
    })
}

/// The caller of a stored token, or UNAUTHENTICATED (expired, tenant gone or being deleted).
/// Looks the tenant up every time, through the store's record cache (see
/// `Store::get_cached`): a tenant's deletion stops its tokens at once on the replica that
/// deleted it, and on the others as soon as its change notification arrives.
pub(crate) async fn caller_of(store: &dyn Store, token: &StoredToken) -> ApiResult<Caller> {
    if token.expires.is_some_and(|e| e <= Utc::now()) {
        return Err(unauth("token expired"));
    }
    let tenant = match &token.tenant_id {
        None => None,
        Some(id) => Some(
            live_tenant_name(store, id)
                .await?
                .ok_or_else(|| unauth("the token's tenant no longer exists"))?,
        ),
    };
    Ok(Caller {
        subject: token.subject.clone(),
        tenant,
        role: token.role,
    })
}

/// The name of the tenant with this id, if it exists and is not being deleted.
async fn live_tenant_name(store: &dyn Store, id: &str) -> ApiResult<Option<String>> {
    Ok(store
        .get_cached(id)
        .await?
        .filter(|r| r.kind == Kind::Tenant && r.deleted_at.is_none())
        .and_then(|r| r.name))
}

/// Stores a new token and returns its secret (the only time it exists outside the caller).
pub async fn mint(
    store: &dyn Store,
    subject: String,
    role: Role,
    tenant_id: Option<String>,
    expires: Option<DateTime<Utc>>,
) -> ApiResult<(String, StoredToken)> {
    let secret = new_secret();
    let token = StoredToken {
        id: uuid::Uuid::now_v7().to_string(),
        subject,
        role,
        tenant_id,
        created: Utc::now(),
        expires,
    };
    store
        .kv_put(NAMESPACE, &hash(&secret), &encode(&token)?)
        .await?;
    Ok((secret, token))
}

fn encode(token: &StoredToken) -> ApiResult<String> {
    serde_json::to_string(token).map_err(|e| {
        ApiError::new(
            crate::error::Code::Internal,
            format!("cannot encode token: {e}"),
        )
    })
}

/// Every stored row as (hash, token); unreadable rows are skipped with a warning.
async fn rows(store: &dyn Store) -> ApiResult<Vec<(String, StoredToken)>> {
    Ok(store
        .kv_load(NAMESPACE)
        .await?
        .into_iter()
        .filter_map(|(key, value)| match serde_json::from_str(&value) {
            Ok(t) => Some((key, t)),
            Err(e) => {
                tracing::warn!(error = %e, "skipping an unreadable token row");
                None
            }
        })
        .collect())
}

/// The view of a token, with its tenant's current name.
pub async fn view(store: &dyn Store, token: StoredToken) -> ApiResult<TokenView> {
    let tenant = match &token.tenant_id {
        Some(id) => live_tenant_name(store, id).await?.unwrap_or_default(),
        None => String::new(),
    };
    Ok(TokenView {
        id: token.id,
        subject: token.subject,
        role: token.role,
        tenant,
        tenant_id: token.tenant_id,
        created: token.created,
        expires: token.expires,
    })
}

/// Every token, oldest first, without secrets or hashes.
pub async fn list(store: &dyn Store) -> ApiResult<Vec<TokenView>> {
    let mut tokens: Vec<StoredToken> = rows(store).await?.into_iter().map(|(_, t)| t).collect();
    tokens.sort_by(|a, b| a.created.cmp(&b.created).then(a.id.cmp(&b.id)));
    let mut out = Vec::with_capacity(tokens.len());
    for t in tokens {
        out.push(view(store, t).await?);
    }
    Ok(out)
}

/// Removes the token with this id (NOT_FOUND when there is none). `presented_key` is the hash
/// of the secret the request authenticated with (None for another kind of credential).
///
/// FAILED_PRECONDITION, nothing removed:
/// - the token is the one the request is using and `force` is false (automation that revokes
///   "all tokens" would otherwise lock itself out);
/// - it is the last unexpired provider-admin token, force or not (nobody could administer
///   the tokens any more).
///
/// Concurrent revocations are serialised in this process, so two requests cannot each revoke
/// one of the last two provider-admin tokens here.
pub async fn revoke(
    store: &dyn Store,
    id: &str,
    presented_key: Option<&str>,
    force: bool,
) -> ApiResult<()> {
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _serialised = ONE_AT_A_TIME.lock().await;
    let all = rows(store).await?;
    let (key, token) = all
        .iter()
        .find(|(_, t)| t.id == id)
        .ok_or_else(|| ApiError::not_found(format!("token: no token with id '{id}'")))?;
    if presented_key == Some(key.as_str()) && !force {
        return Err(ApiError::precondition(format!(
            "token '{id}' is the token this request is using: revoking it locks this caller out; \
             to do so anyway, say force (REST ?force=true, gRPC force: true, CLI --force)"
        )));
    }
    let now = Utc::now();
    let live_admin =
        |t: &StoredToken| t.role == Role::ProviderAdmin && t.expires.is_none_or(|e| e > now);
    if live_admin(token) && !all.iter().any(|(k, t)| k != key && live_admin(t)) {
        return Err(ApiError::precondition(format!(
            "token '{id}' is the last provider-admin token and is never revoked, even with \
             force; mint another provider-admin token first"
        )));
    }
    remove_rows(store, vec![key.clone()]).await
}

/// Removes token rows and announces it on the change feed, so every replica's token cache
/// forgets them at once (see `auth::cache`).
async fn remove_rows(store: &dyn Store, keys: Vec<String>) -> ApiResult<()> {
    if keys.is_empty() {
        return Ok(());
    }
    let changes: Vec<(String, Option<String>)> = keys.into_iter().map(|k| (k, None)).collect();
    let mut tx = store.begin().await?;
    tx.kv_write(NAMESPACE, &changes).await?;
    tx.publish(revocation());
    tx.commit().await?;
    Ok(())
}

/// The change-feed notice of a revocation (it names no token: caches drop everything).
pub(crate) fn revocation() -> Change {
    Change {
        kind: NAMESPACE.to_string(),
        id: String::new(),
        tenant: String::new(),
        gone: true,
        refs: Vec::new(),
        version: None,
    }
}

/// Removes every token of a tenant (by tenant id); returns how many.
pub async fn revoke_tenant(store: &dyn Store, tenant_id: &str) -> ApiResult<usize> {
    let keys: Vec<String> = rows(store)
        .await?
        .into_iter()
        .filter(|(_, t)| t.tenant_id.as_deref() == Some(tenant_id))
        .map(|(k, _)| k)
        .collect();
    let n = keys.len();
    remove_rows(store, keys).await?;
    Ok(n)
}

/// Parses a lifetime such as `90s`, `30m`, `24h`, `7d` or `1h30m` (units s, m, h, d).
pub fn parse_lifetime(text: &str) -> Result<ChronoDuration, String> {
    let bad =
        || format!("expires_in: '{text}' is not a duration like 30m, 24h or 7d (units s, m, h, d)");
    let mut total = ChronoDuration::zero();
    let mut digits = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let n: i64 = digits.parse().map_err(|_| bad())?;
        digits.clear();
        let part = match c {
            's' => ChronoDuration::try_seconds(n),
            'm' => ChronoDuration::try_minutes(n),
            'h' => ChronoDuration::try_hours(n),
            'd' => ChronoDuration::try_days(n),
            _ => None,
        }
        .ok_or_else(bad)?;
        total = total.checked_add(&part).ok_or_else(bad)?;
    }
    if !digits.is_empty() || total <= ChronoDuration::zero() {
        return Err(bad());
    }
    Ok(total)
}

/// One entry of a legacy token file (`{"tokens":[{"token","subject","tenant","role"}]}`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct FileEntry {
    token: String,
    subject: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tenant: Option<String>,
    role: Role,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TokenFile {
    tokens: Vec<FileEntry>,
}

/// Where an imported token file is moved, so it is not imported twice.
pub fn migrated_path(path: &Path) -> std::path::PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".migrated");
    path.with_file_name(name)
}

/// Imports a legacy token file into the store once: each secret is hashed, tenant names are
/// resolved to ids (entries of unknown tenants are skipped with a warning), secrets already in
/// the store are kept as they are; then the file is renamed to `<file>.migrated`. Returns how
/// many tokens were imported (0 when there is no file).
pub async fn import_file(store: &dyn Store, path: &Path) -> Result<usize, super::AuthSetupError> {
    use super::AuthSetupError;
    if !path.exists() {
        return Ok(0);
    }
    let text = std::fs::read_to_string(path).map_err(|source| AuthSetupError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let file: TokenFile = serde_json::from_str(&text).map_err(|e| AuthSetupError::Invalid {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let store_err = |e: osac_store::StoreError| AuthSetupError::Store(e.to_string());
    let mut changes = Vec::new();
    for entry in file.tokens {
        let key = hash(&entry.token);
        if store
            .kv_get(NAMESPACE, &key)
            .await
            .map_err(store_err)?
            .is_some()
        {
            continue;
        }
        let tenant_id = match entry.tenant.as_deref().filter(|t| !t.is_empty()) {
            None => None,
            Some(name) => {
                let mut tx = store.begin().await.map_err(store_err)?;
                let found = tx
                    .find_by_name(Kind::Tenant, "", name)
                    .await
                    .map_err(store_err)?
                    .filter(|r| r.deleted_at.is_none());
                drop(tx);
                match found {
                    Some(t) => Some(t.id),
                    None => {
                        tracing::warn!(
                            file = %path.display(),
                            subject = %entry.subject,
                            tenant = name,
                            "token file: skipping a token of an unknown tenant"
                        );
                        continue;
                    }
                }
            }
        };
        if tenant_id.is_none() && entry.role != Role::ProviderAdmin {
            tracing::warn!(file = %path.display(), subject = %entry.subject,
                "token file: skipping a tenant-role token without a tenant");
            continue;
        }
        let token = StoredToken {
            id: uuid::Uuid::now_v7().to_string(),
            subject: entry.subject,
            role: entry.role,
            tenant_id,
            created: Utc::now(),
            expires: None,
        };
        let value = serde_json::to_string(&token).map_err(|e| AuthSetupError::Invalid {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        changes.push((key, Some(value)));
    }
    store
        .kv_write(NAMESPACE, &changes)
        .await
        .map_err(store_err)?;
    let target = migrated_path(path);
    std::fs::rename(path, &target).map_err(|source| AuthSetupError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    tracing::info!(imported = changes.len(), from = %path.display(), to = %target.display(),
        "imported the token file into the store");
    Ok(changes.len())
}

/// Writes a token file holding one provider-admin token (subject `admin`) unless it already
/// has one, and returns that token: a way to hand a server its first credential before it
/// starts (the server imports the file into the store at start). The file is created mode 0600.
pub fn ensure_admin_token(path: &Path) -> std::io::Result<String> {
    let mut file: TokenFile = if path.exists() {
        serde_json::from_str(&std::fs::read_to_string(path)?).map_err(std::io::Error::other)?
    } else {
        TokenFile::default()
    };
    if let Some(t) = file.tokens.iter().find(|t| t.role == Role::ProviderAdmin) {
        return Ok(t.token.clone());
    }
    let token = new_secret();
    file.tokens.push(FileEntry {
        token: token.clone(),
        subject: "admin".into(),
        tenant: None,
        role: Role::ProviderAdmin,
    });
    let text = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
    write_private(path, &text)?;
    Ok(token)
}

/// Writes `bytes` to `path` through a new temp file created with mode 0600 (never readable by
/// others, not even for an instant), then renames it into place.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp{}", std::process::id()));
    let tmp = path.with_file_name(name);
    let _ = std::fs::remove_file(&tmp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut f = options.open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes() {
        assert_eq!(parse_lifetime("24h").unwrap(), ChronoDuration::hours(24));
        assert_eq!(
            parse_lifetime("1h30m").unwrap(),
            ChronoDuration::minutes(90)
        );
        assert_eq!(parse_lifetime("7d").unwrap(), ChronoDuration::days(7));
        for bad in ["", "24", "h", "0s", "3w", "-1h", "1.5h"] {
            assert!(parse_lifetime(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn secrets_are_random_and_hashes_are_sha256() {
        let a = new_secret();
        assert!(a.starts_with("osac_") && a.len() == 5 + 64);
        assert_ne!(a, new_secret());
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
