//! The credential of a long-lived request (a watch): kept for the whole stream and checked again
//! while it runs, so a stream ends when the trust that opened it ends.
//!
//! Rules:
//! - A stream opened with a stored token ends when the token is revoked, when it expires, and
//!   when its tenant is deleted (deletion requested or the row gone): the same checks a request
//!   makes ([`super::tokens::caller_of`]).
//! - A stream opened with a JWT ends at the JWT's `exp`.
//! - A stream sees one tenant, known by its **id**, for its whole life: the tenant the
//!   credential named when it opened. A tenant deleted and re-created under the same name is
//!   another tenant, and the stream ends rather than show it (a JWT names its tenant by name:
//!   its stream ends when the tenant of that name is no longer the one it opened on).
//! - The watch re-checks on every token or tenant change it sees on the change feed (which
//!   carries revocations and tenant deletions from every replica), reading the token row from
//!   the store then, and on a short timer from the token cache; it ends at a known expiry
//!   without waiting for either.

use chrono::{DateTime, Utc};
use osac_model::Kind;
use osac_store::{ListQuery, Store};
use serde::Deserialize;

use super::{Authenticator, Caller, Mode, tokens};
use crate::error::{ApiError, ApiResult, Code};

/// What a request authenticated with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// A token kept in the store: the SHA-256 of its secret (its row's key) and its id.
    Stored { key: String, id: String },
    /// A JWT of the identity provider, known by its subject.
    Jwt { subject: String },
}

impl Credential {
    /// A key naming this credential among every open stream (for the per-token watch cap).
    pub fn slot_key(&self) -> String {
        match self {
            Credential::Stored { id, .. } => format!("token:{id}"),
            Credential::Jwt { subject } => format!("jwt:{subject}"),
        }
    }
}

/// A caller with the credential it authenticated with and its tenant's id, kept by a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    pub caller: Caller,
    pub credential: Credential,
    /// Id of the caller's tenant when the stream opened (None: no tenant, or for a JWT a
    /// tenant name no tenant has).
    pub tenant_id: Option<String>,
    /// When the credential expires, if it does.
    pub expires: Option<DateTime<Utc>>,
}

/// The claim a JWT's expiry is read from (the signature is verified before).
#[derive(Deserialize)]
struct Expiry {
    #[serde(default)]
    exp: Option<i64>,
}

fn ended(message: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        Code::Unauthenticated,
        format!("the stream's credential is no longer valid: {message}"),
    )
}

/// The id of the live (not being deleted) tenant named `name`.
async fn live_tenant_id(store: &dyn Store, name: &str) -> ApiResult<Option<String>> {
    let quoted = name.replace(['"', '\\'], "");
    let page = store
        .list(&ListQuery {
            tenant: Some(String::new()),
            filter: format!("this.metadata.name == \"{quoted}\""),
            limit: 2,
            ..ListQuery::all(Kind::Tenant)
        })
        .await?;
    Ok(page
        .items
        .into_iter()
        .find(|r| r.deleted_at.is_none() && r.name.as_deref() == Some(name))
        .map(|r| r.id))
}

impl Authenticator {
    /// Authenticates the `Authorization` header of a request that opens a stream, keeping
    /// what the stream needs to check it again ([`Authenticator::recheck`]).
    pub async fn authenticate_stream(&self, header: Option<&str>) -> ApiResult<Authenticated> {
        let caller = self.authenticate(header).await?;
        // `authenticate` accepted the header: it is `Bearer <token>`.
        let token = header
            .and_then(|h| h.get(7..))
            .map(str::trim)
            .unwrap_or_default();
        match &self.mode {
            Mode::Store(_) => {
                let key = tokens::hash(token);
                let stored = tokens::stored(self.store.as_ref(), &key).await?;
                Ok(Authenticated {
                    caller,
                    credential: Credential::Stored {
                        key,
                        id: stored.id.clone(),
                    },
                    tenant_id: stored.tenant_id.clone(),
                    expires: stored.expires,
                })
            }
            Mode::Jwt(_) => {
                let expires = jsonwebtoken::dangerous::insecure_decode::<Expiry>(token)
                    .ok()
                    .and_then(|d| d.claims.exp)
                    .and_then(|s| DateTime::from_timestamp(s, 0));
                let tenant_id = match &caller.tenant {
                    Some(name) => live_tenant_id(self.store.as_ref(), name).await?,
                    None => None,
                };
                Ok(Authenticated {
                    credential: Credential::Jwt {
                        subject: caller.subject.clone(),
                    },
                    caller,
                    tenant_id,
                    expires,
                })
            }
        }
    }

    /// Whether a stream's credential still holds: Ok, or UNAUTHENTICATED saying why it ended.
    /// `fresh` reads the token row from the store (after a revocation notice, which may reach
    /// the stream before it reaches the token cache); otherwise the cache may answer.
    pub async fn recheck(&self, auth: &Authenticated, fresh: bool) -> ApiResult<()> {
        if auth.expires.is_some_and(|e| e <= Utc::now()) {
            return Err(ended("it expired"));
        }
        match (&self.mode, &auth.credential) {
            (Mode::Store(cache), Credential::Stored { key, .. }) => {
                let cached = if fresh { None } else { cache.get(key) };
                let stored = match cached {
                    Some(t) => t,
                    None => {
                        let t = tokens::stored(self.store.as_ref(), key).await.map_err(
                            |e| match e.code {
                                Code::Unauthenticated => ended("the token was revoked"),
                                _ => e,
                            },
                        )?;
                        cache.put(key.clone(), t.clone());
                        t
                    }
                };
                let caller = tokens::caller_of(self.store.as_ref(), &stored)
                    .await
                    .map_err(|e| match e.code {
                        Code::Unauthenticated => ended(e.message),
                        _ => e,
                    })?;
                if stored.tenant_id != auth.tenant_id || caller.tenant != auth.caller.tenant {
                    return Err(ended("the token's tenant changed"));
                }
                Ok(())
            }
            (Mode::Jwt(_), Credential::Jwt { .. }) => {
                let store = self.store.as_ref();
                let same_tenant = match (&auth.tenant_id, &auth.caller.tenant) {
                    // The tenant it opened on, by id, still live (from the record cache).
                    (Some(id), Some(name)) => store.get_cached(id).await?.is_some_and(|r| {
                        r.kind == Kind::Tenant
                            && r.deleted_at.is_none()
                            && r.name.as_deref() == Some(name)
                    }),
                    // Opened on a name no tenant had: still none.
                    (None, Some(name)) => live_tenant_id(store, name).await?.is_none(),
                    (_, None) => true,
                };
                if !same_tenant {
                    return Err(ended(
                        "the tenant it was opened on no longer exists (deleted, or re-created as another tenant)",
                    ));
                }
                Ok(())
            }
            _ => Err(ended("the server's authentication mode changed")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_keys_name_the_credential() {
        let t = Credential::Stored {
            key: "k".into(),
            id: "i".into(),
        };
        assert_eq!(t.slot_key(), "token:i");
        let j = Credential::Jwt {
            subject: "s".into(),
        };
        assert_eq!(j.slot_key(), "jwt:s");
    }
}
