//! JWTs verified against an identity provider's JWKS (production mode).
//!
//! Rules:
//! - The issuer and the audience are required settings: a token of another issuer, or minted for
//!   another service, is refused.
//! - The JWKS is fetched over HTTPS (system roots, or only the CA of `ca_file`) with a timeout,
//!   or read from a file; plain `http://` is refused (anyone on the path could swap the keys).
//! - The set is cached and refreshed periodically and on an unknown `kid`; on-demand refreshes
//!   happen at most once per `min_refetch_interval`, so a flood of bogus kids cannot hammer the
//!   identity provider. Key rotation needs no restart.
//! - Only asymmetric signatures are accepted, and only with a key of the matching type (RSA:
//!   RS*/PS*; EC: ES256 on P-256, ES384 on P-384; OKP: EdDSA): `alg: none`, HS* (the classic
//!   confusion of a public key used as an HMAC secret) and symmetric (`oct`) keys are refused.
//! - A token without `kid` is refused when the set has several keys.
//! - Tenant roles need a non-empty `tenant` claim.
//! - Times: `exp` is required and `nbf` honoured when present; a token is refused from
//!   `exp` + `leeway` on and before `nbf` − `leeway` (the leeway absorbs clock skew between the
//!   identity provider and this server; [`JwtConfig::DEFAULT_LEEWAY`] unless set).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde::Deserialize;

use super::{AuthSetupError, Caller, Role};
use crate::error::{ApiError, ApiResult, Code};

/// Settings of JWT authentication.
#[derive(Debug, Clone)]
pub struct JwtConfig {
    /// `https://…` URL or file path of the JWKS.
    pub jwks: String,
    /// Required `iss` claim (`--jwt-issuer`).
    pub issuer: Option<String>,
    /// Required `aud` claim (`--jwt-audience`).
    pub audience: Option<String>,
    /// PEM file of the CA(s) that sign the JWKS server's certificate; None = system roots.
    pub ca_file: Option<PathBuf>,
    /// Timeout of one JWKS fetch (connect and response).
    pub fetch_timeout: Duration,
    /// Period of the background refresh.
    pub refresh_interval: Duration,
    /// Least time between two fetches triggered by an unknown `kid`.
    pub min_refetch_interval: Duration,
    /// Clock skew allowed on `exp` and `nbf` (whole seconds; `--jwt-leeway-seconds`).
    pub leeway: Duration,
}

impl JwtConfig {
    /// Default fetch timeout: 10 s.
    pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(10);
    /// Default periodic refresh: every 10 minutes.
    pub const DEFAULT_REFRESH_INTERVAL: Duration = Duration::from_secs(600);
    /// Default least time between on-demand fetches: 30 s.
    pub const DEFAULT_MIN_REFETCH_INTERVAL: Duration = Duration::from_secs(30);
    /// Default clock skew allowed on `exp` and `nbf`: 30 s.
    pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(30);

    /// Settings with the default timings and system roots.
    pub fn new(jwks: impl Into<String>, issuer: Option<String>, audience: Option<String>) -> Self {
        Self {
            jwks: jwks.into(),
            issuer,
            audience,
            ca_file: None,
            fetch_timeout: Self::DEFAULT_FETCH_TIMEOUT,
            refresh_interval: Self::DEFAULT_REFRESH_INTERVAL,
            min_refetch_interval: Self::DEFAULT_MIN_REFETCH_INTERVAL,
            leeway: Self::DEFAULT_LEEWAY,
        }
    }
}

/// Verifies JWTs against a cached, refreshed JWKS.
pub struct JwtVerifier {
    config: JwtConfig,
    issuer: String,
    audience: String,
    /// None when the JWKS is a file.
    client: Option<reqwest::Client>,
    keys: RwLock<Arc<JwkSet>>,
    /// When the last fetch started; held during a fetch so only one runs at a time.
    last_fetch: tokio::sync::Mutex<Instant>,
    fetches: AtomicU64,
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

fn unauth(message: impl Into<String>) -> ApiError {
    ApiError::new(Code::Unauthenticated, message.into())
}

fn required(
    value: &Option<String>,
    flag: &'static str,
    why: &'static str,
) -> Result<String, AuthSetupError> {
    value
        .as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .ok_or(AuthSetupError::MissingJwtSetting { flag, why })
}

impl JwtVerifier {
    /// Checks the settings, loads the JWKS once (failing start if it cannot) and starts the
    /// periodic refresh, which ends when the verifier is dropped.
    pub async fn start(config: JwtConfig) -> Result<Arc<Self>, AuthSetupError> {
        let issuer = required(
            &config.issuer,
            "--jwt-issuer",
            "without it a token of any issuer using these keys would be accepted",
        )?;
        let audience = required(
            &config.audience,
            "--jwt-audience",
            "without it a token minted for another service would be accepted",
        )?;
        let source_name = config.jwks.clone();
        let setup = |message: String| AuthSetupError::Jwks {
            source_name: source_name.clone(),
            message,
        };
        let client = if config.jwks.starts_with("https://") {
            Some(build_client(&config).map_err(setup)?)
        } else if config.jwks.contains("://") {
            return Err(setup(
                "the JWKS URL must be https:// (or a file path): over plain HTTP anyone on the path could replace the keys".into(),
            ));
        } else {
            None
        };
        let verifier = Arc::new(Self {
            issuer,
            audience,
            client,
            keys: RwLock::new(Arc::new(JwkSet { keys: Vec::new() })),
            last_fetch: tokio::sync::Mutex::new(Instant::now()),
            fetches: AtomicU64::new(0),
            config,
        });
        let set = verifier.fetch().await.map_err(setup)?;
        verifier.install(set);
        let weak = Arc::downgrade(&verifier);
        let period = verifier.config.refresh_interval;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(v) = weak.upgrade() else { break };
                v.refresh(false).await;
            }
        });
        Ok(verifier)
    }

    /// How many times the JWKS was fetched (start, periodic and on-demand).
    pub fn fetch_count(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }

    async fn fetch(&self) -> Result<JwkSet, String> {
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let text = match &self.client {
            Some(client) => client
                .get(&self.config.jwks)
                .send()
                .await
                .and_then(|r| r.error_for_status())
                .map_err(|e| error_chain(&e))?
                .text()
                .await
                .map_err(|e| error_chain(&e))?,
            None => tokio::fs::read_to_string(&self.config.jwks)
                .await
                .map_err(|e| e.to_string())?,
        };
        serde_json::from_str(&text).map_err(|e| format!("not a JWKS: {e}"))
    }

    fn install(&self, set: JwkSet) {
        if let Ok(mut keys) = self.keys.write() {
            *keys = Arc::new(set);
        }
    }

    fn current(&self) -> Arc<JwkSet> {
        match self.keys.read() {
            Ok(k) => k.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Fetches the set again; an on-demand refresh is skipped when the last fetch started less
    /// than `min_refetch_interval` ago. A failed fetch keeps the cached keys. Returns whether a
    /// new set was installed.
    async fn refresh(&self, on_demand: bool) -> bool {
        let mut last = self.last_fetch.lock().await;
        if on_demand && last.elapsed() < self.config.min_refetch_interval {
            return false;
        }
        *last = Instant::now();
        match self.fetch().await {
            Ok(set) => {
                self.install(set);
                true
            }
            Err(e) => {
                tracing::warn!(jwks = %self.config.jwks, error = %e, "JWKS refresh failed; keeping the cached keys");
                false
            }
        }
    }

    /// The key that must have signed a token with this `kid`.
    async fn key_for(&self, kid: Option<&str>) -> ApiResult<Jwk> {
        let keys = self.current();
        match kid {
            Some(kid) => {
                if let Some(k) = keys.find(kid) {
                    return Ok(k.clone());
                }
                if self.refresh(true).await
                    && let Some(k) = self.current().find(kid)
                {
                    return Ok(k.clone());
                }
                Err(unauth(format!(
                    "token signed by an unknown key (kid '{kid}')"
                )))
            }
            None => match keys.keys.as_slice() {
                [only] => Ok(only.clone()),
                [] => Err(unauth("the identity provider's key set is empty")),
                many => Err(unauth(format!(
                    "the token has no kid and the key set has {} keys: a kid is required",
                    many.len()
                ))),
            },
        }
    }

    /// Verifies a JWT and maps its claims to the caller.
    pub async fn verify(&self, token: &str) -> ApiResult<Caller> {
        let header = decode_header(token).map_err(|e| unauth(format!("invalid token: {e}")))?;
        if !ASYMMETRIC.contains(&header.alg) {
            return Err(unauth(format!(
                "token algorithm {:?} is not allowed: only asymmetric signatures (RS*, PS*, ES256, ES384, EdDSA)",
                header.alg
            )));
        }
        let jwk = self.key_for(header.kid.as_deref()).await?;
        key_allows(&jwk, header.alg)?;
        let key = DecodingKey::from_jwk(&jwk).map_err(|e| unauth(format!("unusable key: {e}")))?;
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.leeway = self.config.leeway.as_secs();
        let leeway = validation.leeway;
        let claims = decode::<Claims>(token, &key, &validation)
            .map_err(|e| match e.kind() {
                ErrorKind::ExpiredSignature => unauth(format!(
                    "invalid token: expired (exp is more than the allowed clock skew of {leeway} s in the past)"
                )),
                ErrorKind::ImmatureSignature => unauth(format!(
                    "invalid token: not valid yet (nbf is more than the allowed clock skew of {leeway} s in the future)"
                )),
                _ => unauth(format!("invalid token: {e}")),
            })?
            .claims;
        let role = claims
            .roles
            .iter()
            .map(String::as_str)
            .chain(claims.role.as_deref())
            .filter_map(Role::parse)
            .min_by_key(|r| *r as u8)
            .ok_or_else(|| ApiError::denied("token carries no known role"))?;
        let tenant = claims
            .tenant
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty());
        if role != Role::ProviderAdmin && tenant.is_none() {
            return Err(unauth(
                "the token's tenant claim is empty or missing: tenant roles need a tenant",
            ));
        }
        Ok(Caller {
            subject: claims.sub,
            tenant,
            role,
        })
    }
}

/// The signature algorithms accepted: asymmetric ones only.
const ASYMMETRIC: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Whether `jwk` may verify a token signed with `alg`: the key type must match the algorithm,
/// a key's own `alg` (if set) must equal it, and encryption keys never verify signatures.
fn key_allows(jwk: &Jwk, alg: Algorithm) -> ApiResult<()> {
    let fits = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => matches!(
            alg,
            Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512
        ),
        AlgorithmParameters::EllipticCurve(p) => matches!(
            (&p.curve, alg),
            (EllipticCurve::P256, Algorithm::ES256) | (EllipticCurve::P384, Algorithm::ES384)
        ),
        AlgorithmParameters::OctetKeyPair(_) => alg == Algorithm::EdDSA,
        // Symmetric keys never verify tokens.
        AlgorithmParameters::OctetKey(_) => false,
    };
    let own_alg_differs = jwk
        .common
        .key_algorithm
        .is_some_and(|k| format!("{k:?}") != format!("{alg:?}"));
    let for_encryption = matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption));
    if !fits || own_alg_differs || for_encryption {
        return Err(unauth(format!(
            "token algorithm {alg:?} does not match its signing key (kid {:?})",
            jwk.common.key_id.as_deref().unwrap_or("")
        )));
    }
    Ok(())
}

/// An HTTPS-only client with the fetch timeout; with a CA file, it trusts only that CA.
fn build_client(config: &JwtConfig) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .https_only(true)
        .timeout(config.fetch_timeout)
        .connect_timeout(config.fetch_timeout);
    if let Some(ca) = &config.ca_file {
        let pem =
            std::fs::read(ca).map_err(|e| format!("cannot read CA file {}: {e}", ca.display()))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| format!("CA file {} is not PEM: {e}", ca.display()))?;
        if certs.is_empty() {
            return Err(format!("CA file {} holds no certificate", ca.display()));
        }
        builder = builder.tls_built_in_root_certs(false);
        for c in certs {
            builder = builder.add_root_certificate(c);
        }
    }
    builder.build().map_err(|e| error_chain(&e))
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
