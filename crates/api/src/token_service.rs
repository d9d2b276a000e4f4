//! Token management on the private API (mint, list, revoke): provider administrators only, in
//! store-token mode (with `--jwks` the identity provider issues the tokens).

use chrono::{DateTime, Utc};
use osac_model::Kind;
use serde::Serialize;

use crate::auth::tokens::{self, TokenView};
use crate::auth::{Caller, Role};
use crate::error::{ApiError, ApiResult};
use crate::service::Service;

/// What a mint asks for; empty strings mean "not given".
#[derive(Debug, Clone, Default)]
pub struct MintRequest {
    /// Tenant id or name ("" for a provider-admin token).
    pub tenant: String,
    /// provider-admin, tenant-admin or tenant-user.
    pub role: String,
    /// Who the token identifies; "" = a generated subject.
    pub subject: String,
    /// Lifetime such as `24h`; exclusive with `expires_at`.
    pub expires_in: String,
    /// RFC 3339 expiry time; exclusive with `expires_in`.
    pub expires_at: String,
}

/// A minted token: its secret (shown only here, once) and what the list shows of it.
#[derive(Debug, Clone, Serialize)]
pub struct MintedToken {
    pub token: String,
    #[serde(flatten)]
    pub view: TokenView,
}

fn provider_only(caller: &Caller) -> ApiResult<()> {
    if caller.is_provider() {
        Ok(())
    } else {
        Err(ApiError::denied(
            "the private API is for provider administrators (tokens are managed by them)",
        ))
    }
}

/// The expiry a request asks for (None = never), validated.
fn expiry(req: &MintRequest, now: DateTime<Utc>) -> ApiResult<Option<DateTime<Utc>>> {
    match (req.expires_in.trim(), req.expires_at.trim()) {
        ("", "") => Ok(None),
        (_, "") => {
            let life = tokens::parse_lifetime(&req.expires_in).map_err(ApiError::invalid)?;
            now.checked_add_signed(life)
                .map(Some)
                .ok_or_else(|| ApiError::invalid("expires_in: too far in the future"))
        }
        ("", at) => {
            let at = DateTime::parse_from_rfc3339(at)
                .map_err(|e| {
                    ApiError::invalid(format!(
                        "expires_at: '{at}' is not an RFC 3339 time (e.g. 2030-01-01T00:00:00Z): {e}"
                    ))
                })?
                .with_timezone(&Utc);
            if at <= now {
                return Err(ApiError::invalid(format!(
                    "expires_at: {at} is not in the future"
                )));
            }
            Ok(Some(at))
        }
        _ => Err(ApiError::invalid(
            "expires_in, expires_at: give at most one of them",
        )),
    }
}

impl Service {
    /// Mints a bearer token (provider admin only). The tenant (id or name) must exist and not
    /// be being deleted; the token is bound to its id.
    pub async fn mint_token(&self, caller: &Caller, req: MintRequest) -> ApiResult<MintedToken> {
        provider_only(caller)?;
        let store = self.auth.token_store()?;
        let role = Role::parse(req.role.trim()).ok_or_else(|| {
            ApiError::invalid(format!(
                "role: '{}' is not one of provider-admin, tenant-admin, tenant-user",
                req.role
            ))
        })?;
        let expires = expiry(&req, Utc::now())?;
        let tenant = match (role, req.tenant.trim()) {
            (Role::ProviderAdmin, "") => None,
            (_, "") => {
                return Err(ApiError::invalid(
                    "tenant: a tenant is required for tenant roles",
                ));
            }
            (_, t) => Some(self.live_tenant(t).await?),
        };
        let subject = match req.subject.trim() {
            "" => format!(
                "{}-{}",
                tenant
                    .as_ref()
                    .map_or("provider", |(_, name)| name.as_str()),
                uuid::Uuid::new_v4().simple()
            ),
            s => s.to_string(),
        };
        let (secret, stored) =
            tokens::mint(store, subject, role, tenant.map(|(id, _)| id), expires).await?;
        Ok(MintedToken {
            token: secret,
            view: tokens::view(store, stored).await?,
        })
    }

    /// (id, name) of the live tenant with this id or name.
    pub(crate) async fn live_tenant(&self, key: &str) -> ApiResult<(String, String)> {
        let missing = || ApiError::not_found(format!("tenant: Tenant '{key}' does not exist"));
        let mut tx = self.store.begin().await?;
        let by_id = tx.get(key).await?.filter(|r| r.kind == Kind::Tenant);
        let found = match by_id {
            Some(r) => Some(r),
            None => tx.find_by_name(Kind::Tenant, "", key).await?,
        };
        drop(tx);
        match found {
            Some(r) if r.deleted_at.is_none() => {
                let name = r.name.clone().ok_or_else(missing)?;
                Ok((r.id, name))
            }
            Some(_) => Err(ApiError::precondition(format!(
                "tenant: Tenant '{key}' is being deleted"
            ))),
            None => Err(missing()),
        }
    }

    /// Every token (provider admin only): no secrets, no hashes.
    pub async fn list_tokens(&self, caller: &Caller) -> ApiResult<Vec<TokenView>> {
        provider_only(caller)?;
        tokens::list(self.auth.token_store()?).await
    }

    /// Revokes a token by id at once (provider admin only). `presented` is the secret the
    /// request authenticated with: revoking that very token needs `force`, and the last
    /// provider-admin token is never revoked (see [`tokens::revoke`]).
    pub async fn revoke_token(
        &self,
        caller: &Caller,
        presented: Option<&str>,
        id: &str,
        force: bool,
    ) -> ApiResult<()> {
        provider_only(caller)?;
        let presented = presented.map(tokens::hash);
        let revoked =
            tokens::revoke(self.auth.token_store()?, id, presented.as_deref(), force).await;
        self.auth.forget_cached_tokens();
        revoked
    }

    /// Revokes the tokens of a tenant that is being deleted (they already fail to
    /// authenticate, since their tenant is not live; this removes the rows).
    pub(crate) async fn revoke_tenant_tokens(&self, tenant_id: &str) {
        let Ok(store) = self.auth.token_store() else {
            return;
        };
        let revoked = tokens::revoke_tenant(store, tenant_id).await;
        self.auth.forget_cached_tokens();
        match revoked {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                tenant_id,
                revoked = n,
                "revoked the tokens of a deleted tenant"
            ),
            Err(e) => {
                tracing::warn!(tenant_id, error = %e.message, "cannot revoke the tokens of a deleted tenant (they no longer authenticate)")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_rules() {
        let now = Utc::now();
        let req = |i: &str, a: &str| MintRequest {
            expires_in: i.into(),
            expires_at: a.into(),
            ..Default::default()
        };
        assert_eq!(expiry(&req("", ""), now).unwrap(), None);
        assert_eq!(
            expiry(&req("2h", ""), now).unwrap(),
            Some(now + chrono::Duration::hours(2))
        );
        assert!(
            expiry(&req("", "2999-01-01T00:00:00Z"), now)
                .unwrap()
                .is_some()
        );
        for (i, a) in [
            ("2h", "2999-01-01T00:00:00Z"),
            ("", "2000-01-01T00:00:00Z"),
            ("", "tomorrow"),
            ("soon", ""),
        ] {
            let e = expiry(&req(i, a), now).unwrap_err();
            assert_eq!(e.code, crate::error::Code::InvalidArgument, "{i} {a}");
        }
    }
}
