//! Bearer-token authentication: tokens kept in the store (embedded mode, minted and revoked
//! through the private API) or JWTs verified against an identity provider's JWKS (production).
//! Produces the [`Caller`] every request is scoped by.

mod cache;
pub mod jwt;
mod stream;
pub mod tokens;

use std::path::PathBuf;
use std::sync::Arc;

use osac_store::Store;
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ApiResult, Code};

pub use jwt::JwtConfig;
pub use stream::{Authenticated, Credential};
pub use tokens::ensure_admin_token;

/// What a caller may do: the provider admin uses the private API; tenant roles act inside one
/// tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// The cloud provider: private API, every tenant.
    ProviderAdmin,
    /// Manages everything inside one tenant.
    TenantAdmin,
    /// Reads everything inside one tenant; writes are for tenant admins.
    TenantUser,
}

impl Role {
    /// Parses `provider-admin` / `tenant-admin` / `tenant-user`.
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "provider-admin" => Some(Role::ProviderAdmin),
            "tenant-admin" => Some(Role::TenantAdmin),
            "tenant-user" => Some(Role::TenantUser),
            _ => None,
        }
    }

    /// The role's name as [`Role::parse`] reads it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::ProviderAdmin => "provider-admin",
            Role::TenantAdmin => "tenant-admin",
            Role::TenantUser => "tenant-user",
        }
    }
}

/// The authenticated identity of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    pub subject: String,
    /// The tenant the caller acts in; provider admins may have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub role: Role,
}

impl Caller {
    /// Whether this caller is the provider.
    pub fn is_provider(&self) -> bool {
        self.role == Role::ProviderAdmin
    }
}

/// How requests are authenticated.
#[derive(Debug, Clone)]
pub enum AuthConfig {
    /// Bearer tokens kept in the store (minted with `POST /api/private/v1/tokens`). The path is
    /// a legacy token file `{"tokens":[{"token","subject","tenant","role"}]}`: if it exists at
    /// start it is imported into the store once and renamed `<file>.migrated`.
    TokenFile(PathBuf),
    /// JWTs signed by a key of an identity provider's JWKS.
    Jwt(JwtConfig),
}

/// Authenticates bearer tokens.
pub struct Authenticator {
    store: Arc<dyn Store>,
    mode: Mode,
}

enum Mode {
    Store(Arc<cache::TokenCache>),
    Jwt(Arc<jwt::JwtVerifier>),
}

/// Failure to set up authentication.
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    #[error("cannot read token file {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("token file {path} is not valid: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("cannot import the token file into the store: {0}")]
    Store(String),
    #[error("cannot load JWKS from {source_name}: {message}")]
    Jwks {
        source_name: String,
        message: String,
    },
    #[error("{flag} is required with --jwks: {why}")]
    MissingJwtSetting {
        flag: &'static str,
        why: &'static str,
    },
}

impl Authenticator {
    /// Store tokens (importing the legacy token file once) or a JWT verifier with its JWKS
    /// loaded.
    pub async fn new(config: &AuthConfig, store: Arc<dyn Store>) -> Result<Self, AuthSetupError> {
        let mode = match config {
            AuthConfig::TokenFile(path) => {
                tokens::import_file(store.as_ref(), path).await?;
                Mode::Store(cache::TokenCache::watching(store.as_ref()))
            }
            AuthConfig::Jwt(jwt) => Mode::Jwt(jwt::JwtVerifier::start(jwt.clone()).await?),
        };
        Ok(Self { store, mode })
    }

    /// The JWT verifier, in JWT mode.
    pub fn jwt(&self) -> Option<&jwt::JwtVerifier> {
        match &self.mode {
            Mode::Jwt(v) => Some(v),
            Mode::Store(_) => None,
        }
    }

    /// Resolves an `Authorization` header value to a caller.
    pub async fn authenticate(&self, header: Option<&str>) -> ApiResult<Caller> {
        let unauth = |m: &str| ApiError::new(Code::Unauthenticated, m.to_string());
        let header =
            header.ok_or_else(|| unauth("missing bearer token (Authorization: Bearer <token>)"))?;
        let token = bearer_secret(header)
            .ok_or_else(|| unauth("the Authorization header must be 'Bearer <token>'"))?;
        if token.is_empty() {
            return Err(unauth("empty bearer token"));
        }
        match &self.mode {
            Mode::Store(cache) => {
                let key = tokens::hash(token);
                let stored = match cache.get(&key) {
                    Some(t) => t,
                    None => {
                        let t = tokens::stored(self.store.as_ref(), &key).await?;
                        cache.put(key, t.clone());
                        t
                    }
                };
                tokens::caller_of(self.store.as_ref(), &stored).await
            }
            Mode::Jwt(v) => v.verify(token).await,
        }
    }

    /// Forgets every cached token resolution (after a revocation, so it holds at once here).
    pub fn forget_cached_tokens(&self) {
        if let Mode::Store(cache) = &self.mode {
            cache.clear();
        }
    }

    /// The store that keeps the tokens, or FAILED_PRECONDITION in JWT mode (tokens then come
    /// from the identity provider).
    pub fn token_store(&self) -> ApiResult<&dyn Store> {
        match &self.mode {
            Mode::Store(_) => Ok(self.store.as_ref()),
            Mode::Jwt(_) => Err(ApiError::precondition(
                "tokens are managed by the identity provider (the server runs with --jwks)",
            )),
        }
    }
}

/// The secret of an `Authorization: Bearer <secret>` header value (trimmed), or None for
/// another scheme.
pub fn bearer_secret(header: &str) -> Option<&str> {
    header
        .strip_prefix("Bearer ")
        .or_else(|| header.strip_prefix("bearer "))
        .map(str::trim)
}
