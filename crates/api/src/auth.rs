//! Bearer-token authentication: a token file (embedded/dev mode, with minting) or JWT verified
//! against a JWKS (production). Produces the [`Caller`] every request is scoped by.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{DecodingKey, Validation, decode, decode_header};
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ApiResult, Code};

/// What a caller may do (SPEC §9).
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

/// One entry of the token file.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct TokenEntry {
    token: String,
    #[serde(flatten)]
    caller: Caller,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TokenFile {
    tokens: Vec<TokenEntry>,
}

/// How requests are authenticated.
#[derive(Debug, Clone)]
pub enum AuthConfig {
    /// Tokens listed in a JSON file `{"tokens":[{"token","subject","tenant","role"}]}`.
    TokenFile(PathBuf),
    /// JWTs signed by a key of the JWKS (file path or http(s) URL). Claims: `sub`, `tenant`,
    /// `roles` (array) or `role`.
    Jwt {
        jwks: String,
        issuer: Option<String>,
        audience: Option<String>,
    },
}

/// Authenticates bearer tokens.
pub struct Authenticator {
    mode: Mode,
}

enum Mode {
    Tokens {
        path: PathBuf,
        tokens: RwLock<HashMap<String, Caller>>,
    },
    Jwt {
        keys: JwkSet,
        issuer: Option<String>,
        audience: Option<String>,
    },
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
    #[error("cannot load JWKS from {source_name}: {message}")]
    Jwks {
        source_name: String,
        message: String,
    },
}

#[derive(Debug, Deserialize)]
struct Claims {
    sub: String,
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    roles: Vec<String>,
    #[serde(default)]
    role: Option<String>,
}

impl Authenticator {
    /// Loads the token file or the JWKS.
    pub async fn new(config: &AuthConfig) -> Result<Self, AuthSetupError> {
        match config {
            AuthConfig::TokenFile(path) => {
                let file = if path.exists() {
                    let text =
                        std::fs::read_to_string(path).map_err(|source| AuthSetupError::Read {
                            path: path.clone(),
                            source,
                        })?;
                    serde_json::from_str::<TokenFile>(&text).map_err(|e| {
                        AuthSetupError::Invalid {
                            path: path.clone(),
                            message: e.to_string(),
                        }
                    })?
                } else {
                    TokenFile::default()
                };
                let tokens = file
                    .tokens
                    .into_iter()
                    .map(|t| (t.token, t.caller))
                    .collect();
                Ok(Self {
                    mode: Mode::Tokens {
                        path: path.clone(),
                        tokens: RwLock::new(tokens),
                    },
                })
            }
            AuthConfig::Jwt {
                jwks,
                issuer,
                audience,
            } => {
                let text = if jwks.starts_with("http://") || jwks.starts_with("https://") {
                    let resp =
                        reqwest::get(jwks.as_str())
                            .await
                            .map_err(|e| AuthSetupError::Jwks {
                                source_name: jwks.clone(),
                                message: e.to_string(),
                            })?;
                    resp.text().await.map_err(|e| AuthSetupError::Jwks {
                        source_name: jwks.clone(),
                        message: e.to_string(),
                    })?
                } else {
                    std::fs::read_to_string(jwks).map_err(|e| AuthSetupError::Jwks {
                        source_name: jwks.clone(),
                        message: e.to_string(),
                    })?
                };
                let keys: JwkSet =
                    serde_json::from_str(&text).map_err(|e| AuthSetupError::Jwks {
                        source_name: jwks.clone(),
                        message: e.to_string(),
                    })?;
                Ok(Self {
                    mode: Mode::Jwt {
                        keys,
                        issuer: issuer.clone(),
                        audience: audience.clone(),
                    },
                })
            }
        }
    }

    /// Resolves an `Authorization` header value to a caller.
    pub fn authenticate(&self, header: Option<&str>) -> ApiResult<Caller> {
        let unauth = |m: &str| ApiError::new(Code::Unauthenticated, m.to_string());
        let header =
            header.ok_or_else(|| unauth("missing bearer token (Authorization: Bearer <token>)"))?;
        let token = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .ok_or_else(|| unauth("the Authorization header must be 'Bearer <token>'"))?
            .trim();
        match &self.mode {
            Mode::Tokens { tokens, .. } => tokens
                .read()
                .map_err(|_| ApiError::new(Code::Internal, "token table poisoned"))?
                .get(token)
                .cloned()
                .ok_or_else(|| unauth("invalid token")),
            Mode::Jwt {
                keys,
                issuer,
                audience,
            } => {
                let header =
                    decode_header(token).map_err(|e| unauth(&format!("invalid token: {e}")))?;
                let jwk = match &header.kid {
                    Some(kid) => keys.find(kid),
                    None => keys.keys.first(),
                }
                .ok_or_else(|| unauth("token signed by an unknown key"))?;
                let key = DecodingKey::from_jwk(jwk)
                    .map_err(|e| unauth(&format!("unusable key: {e}")))?;
                let mut validation = Validation::new(header.alg);
                match audience {
                    Some(a) => validation.set_audience(&[a]),
                    None => validation.validate_aud = false,
                }
                if let Some(i) = issuer {
                    validation.set_issuer(&[i]);
                }
                let claims = decode::<Claims>(token, &key, &validation)
                    .map_err(|e| unauth(&format!("invalid token: {e}")))?
                    .claims;
                let role = claims
                    .roles
                    .iter()
                    .map(String::as_str)
                    .chain(claims.role.as_deref())
                    .filter_map(Role::parse)
                    .min_by_key(|r| *r as u8)
                    .ok_or_else(|| ApiError::denied("token carries no known role"))?;
                Ok(Caller {
                    subject: claims.sub,
                    tenant: claims.tenant,
                    role,
                })
            }
        }
    }

    /// Mints a token (token-file mode only) and persists it.
    pub fn mint(&self, caller: Caller) -> ApiResult<String> {
        let Mode::Tokens { path, tokens } = &self.mode else {
            return Err(ApiError::precondition(
                "tokens can only be minted in token-file mode; use your identity provider",
            ));
        };
        let mut bytes = [0u8; 24];
        rand::rng().fill(&mut bytes);
        let token = format!(
            "osac_{}",
            bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
        );
        let mut table = tokens
            .write()
            .map_err(|_| ApiError::new(Code::Internal, "token table poisoned"))?;
        table.insert(token.clone(), caller);
        write_token_file(path, &table)
            .map_err(|e| ApiError::new(Code::Internal, format!("cannot persist token: {e}")))?;
        Ok(token)
    }
}

/// Writes the token table atomically (temp file + rename), readable only by the owner.
fn write_token_file(path: &Path, table: &HashMap<String, Caller>) -> std::io::Result<()> {
    let mut entries: Vec<TokenEntry> = table
        .iter()
        .map(|(t, c)| TokenEntry {
            token: t.clone(),
            caller: c.clone(),
        })
        .collect();
    entries.sort_by(|a, b| {
        a.caller
            .subject
            .cmp(&b.caller.subject)
            .then(a.token.cmp(&b.token))
    });
    let text = serde_json::to_string_pretty(&TokenFile { tokens: entries })
        .map_err(std::io::Error::other)?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
    }
    std::fs::rename(tmp, path)
}

/// Ensures a token file exists with one provider-admin token; returns that token.
pub fn ensure_admin_token(path: &Path) -> std::io::Result<String> {
    let mut file: TokenFile = if path.exists() {
        serde_json::from_str(&std::fs::read_to_string(path)?).map_err(std::io::Error::other)?
    } else {
        TokenFile::default()
    };
    if let Some(t) = file
        .tokens
        .iter()
        .find(|t| t.caller.role == Role::ProviderAdmin)
    {
        return Ok(t.token.clone());
    }
    let mut bytes = [0u8; 24];
    rand::rng().fill(&mut bytes);
    let token = format!(
        "osac_{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    );
    file.tokens.push(TokenEntry {
        token: token.clone(),
        caller: Caller {
            subject: "admin".into(),
            tenant: None,
            role: Role::ProviderAdmin,
        },
    });
    let table = file
        .tokens
        .into_iter()
        .map(|t| (t.token, t.caller))
        .collect();
    write_token_file(path, &table)?;
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header, encode};

    const SECRET: &[u8] = b"a-test-secret-of-enough-length-32b";

    async fn jwt_auth(dir: &Path) -> Authenticator {
        let k = base64url(SECRET);
        let jwks =
            serde_json::json!({"keys": [{"kty": "oct", "kid": "k1", "alg": "HS256", "k": k}]});
        let path = dir.join("jwks.json");
        std::fs::write(&path, jwks.to_string()).unwrap();
        let config = AuthConfig::Jwt {
            jwks: path.display().to_string(),
            issuer: Some("https://idp.test".into()),
            audience: None,
        };
        Authenticator::new(&config).await.unwrap()
    }

    fn base64url(bytes: &[u8]) -> String {
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
            for i in 0..=chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            }
        }
        out
    }

    fn token(claims: serde_json::Value) -> String {
        let mut header = Header::new(jsonwebtoken::Algorithm::HS256);
        header.kid = Some("k1".into());
        encode(&header, &claims, &EncodingKey::from_secret(SECRET)).unwrap()
    }

    #[tokio::test]
    async fn jwt_claims_become_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let auth = jwt_auth(dir.path()).await;
        let exp = chrono::Utc::now().timestamp() + 600;
        let t = token(
            serde_json::json!({"sub": "alice", "tenant": "acme", "roles": ["tenant-user", "tenant-admin"], "iss": "https://idp.test", "exp": exp}),
        );
        let caller = auth.authenticate(Some(&format!("Bearer {t}"))).unwrap();
        assert_eq!(
            caller,
            Caller {
                subject: "alice".into(),
                tenant: Some("acme".into()),
                role: Role::TenantAdmin
            }
        );

        let wrong_issuer = token(
            serde_json::json!({"sub": "a", "roles": ["tenant-admin"], "iss": "https://evil", "exp": exp}),
        );
        assert_eq!(
            auth.authenticate(Some(&format!("Bearer {wrong_issuer}")))
                .unwrap_err()
                .code,
            Code::Unauthenticated
        );
        let expired = token(
            serde_json::json!({"sub": "a", "roles": ["tenant-admin"], "iss": "https://idp.test", "exp": 1000}),
        );
        assert_eq!(
            auth.authenticate(Some(&format!("Bearer {expired}")))
                .unwrap_err()
                .code,
            Code::Unauthenticated
        );
        let no_role = token(serde_json::json!({"sub": "a", "iss": "https://idp.test", "exp": exp}));
        assert_eq!(
            auth.authenticate(Some(&format!("Bearer {no_role}")))
                .unwrap_err()
                .code,
            Code::PermissionDenied
        );
        assert!(auth.mint(caller).is_err(), "minting is token-file only");
    }

    #[tokio::test]
    async fn token_file_mints_and_persists() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let admin = ensure_admin_token(&path).unwrap();
        assert_eq!(ensure_admin_token(&path).unwrap(), admin, "idempotent");
        let auth = Authenticator::new(&AuthConfig::TokenFile(path.clone()))
            .await
            .unwrap();
        assert!(
            auth.authenticate(Some(&format!("Bearer {admin}")))
                .unwrap()
                .is_provider()
        );
        let minted = auth
            .mint(Caller {
                subject: "bob".into(),
                tenant: Some("acme".into()),
                role: Role::TenantUser,
            })
            .unwrap();
        let reloaded = Authenticator::new(&AuthConfig::TokenFile(path))
            .await
            .unwrap();
        let bob = reloaded
            .authenticate(Some(&format!("Bearer {minted}")))
            .unwrap();
        assert_eq!(bob.tenant.as_deref(), Some("acme"));
        assert_eq!(
            reloaded.authenticate(Some("Bearer nope")).unwrap_err().code,
            Code::Unauthenticated
        );
        assert_eq!(
            reloaded.authenticate(None).unwrap_err().code,
            Code::Unauthenticated
        );
        assert_eq!(
            reloaded.authenticate(Some("Basic x")).unwrap_err().code,
            Code::Unauthenticated
        );
    }
}
