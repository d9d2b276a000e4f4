//! JWT authentication against a JWKS the test serves over HTTPS (its own CA): key rotation,
//! kid rules, issuer/audience, tenant claim, algorithm confusion, token times (`exp`, `nbf`,
//! leeway), refresh rate limits, and the settings the server refuses to start without.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use osac_api::auth::{AuthConfig, JwtConfig};
use osac_server::{RunningServer, ServerConfig};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::*;

const ISSUER: &str = "https://idp.test";
const AUDIENCE: &str = "osac-net";

fn b64url(bytes: &[u8]) -> String {
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

/// An EC P-256 signing key with its kid.
pub(crate) struct SigningKey {
    kid: String,
    pair: KeyPair,
}

impl SigningKey {
    pub(crate) fn new(kid: &str) -> Self {
        Self {
            kid: kid.into(),
            pair: KeyPair::generate().expect("P-256 key"),
        }
    }

    /// The public JWK (`x`, `y` from the uncompressed point 04‖X‖Y).
    fn jwk(&self) -> Value {
        let raw = self.pair.public_key_raw();
        json!({"kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": self.kid,
               "x": b64url(&raw[1..33]), "y": b64url(&raw[33..65])})
    }

    fn sign_with(&self, kid: Option<&str>, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = kid.map(str::to_string);
        encode(
            &header,
            claims,
            &EncodingKey::from_ec_der(&self.pair.serialize_der()),
        )
        .expect("sign")
    }

    pub(crate) fn sign(&self, claims: &Value) -> String {
        self.sign_with(Some(&self.kid.clone()), claims)
    }
}

pub(crate) fn claims(role: &str, tenant: Option<&str>) -> Value {
    let mut c = json!({"sub": "alice", "roles": [role], "iss": ISSUER, "aud": AUDIENCE,
                       "exp": chrono::Utc::now().timestamp() + 600});
    if let Some(t) = tenant {
        c["tenant"] = json!(t);
    }
    c
}

pub(crate) fn set(keys: &[&SigningKey]) -> Value {
    json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()})
}

/// A JWKS served over HTTPS with a certificate of the test's own CA; counts its fetches.
pub(crate) struct JwksServer {
    url: String,
    ca_file: PathBuf,
    body: Arc<Mutex<String>>,
    fetches: Arc<AtomicUsize>,
}

impl JwksServer {
    pub(crate) async fn start(dir: &std::path::Path, initial: Value) -> Self {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "osac test CA");
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let srv_key = KeyPair::generate().unwrap();
        let srv_cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&srv_key, &ca_cert, &ca_key)
            .unwrap();
        let ca_file = dir.join("jwks-ca.pem");
        std::fs::write(&ca_file, ca_cert.pem()).unwrap();

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![srv_cert.der().clone()],
                rustls_pki_types::PrivateKeyDer::Pkcs8(srv_key.serialize_der().into()),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}/jwks.json", listener.local_addr().unwrap());
        let body = Arc::new(Mutex::new(initial.to_string()));
        let fetches = Arc::new(AtomicUsize::new(0));
        let (b, f) = (body.clone(), fetches.clone());
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    break;
                };
                let (acceptor, b, f) = (acceptor.clone(), b.clone(), f.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut req = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => req.extend_from_slice(&buf[..n]),
                        }
                    }
                    f.fetch_add(1, Ordering::SeqCst);
                    let text = b.lock().unwrap().clone();
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                        text.len()
                    );
                    let _ = tls.write_all(resp.as_bytes()).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        Self {
            url,
            ca_file,
            body,
            fetches,
        }
    }

    fn serve(&self, set: Value) {
        *self.body.lock().unwrap() = set.to_string();
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }

    pub(crate) fn config(&self) -> JwtConfig {
        JwtConfig {
            ca_file: Some(self.ca_file.clone()),
            ..JwtConfig::new(self.url.clone(), Some(ISSUER.into()), Some(AUDIENCE.into()))
        }
    }
}

pub(crate) async fn start_server(
    dir: &std::path::Path,
    jwt: JwtConfig,
) -> Result<RunningServer, osac_server::ServerError> {
    osac_server::start(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        database_url: format!("sqlite://{}", dir.join("osac.db").display()),
        auth: AuthConfig::Jwt(jwt),
        managers_dir: None,
        controller: controller_config(),
        ip_discovery_timeout: ServerConfig::DEFAULT_IP_DISCOVERY_TIMEOUT,
        fabric: Default::default(),
        sim_latency: Default::default(),
        limits: Default::default(),
        transport: Default::default(),
    })
    .await
}

pub(crate) fn client(server: &RunningServer, token: &str) -> Api {
    Api::new(&Arc::new(RwLock::new(server.url())), Some(token))
}

/// GET on the tenant API: 200 when the token is accepted.
async fn status_of(server: &RunningServer, token: &str) -> Resp {
    client(server, token)
        .get(&format!("{PUB}/virtual_networks"))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwks_over_https_with_key_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (SigningKey::new("key-a"), SigningKey::new("key-b"));
    let jwks = JwksServer::start(dir.path(), set(&[&a])).await;
    let server = start_server(
        dir.path(),
        JwtConfig {
            min_refetch_interval: Duration::from_millis(300),
            ..jwks.config()
        },
    )
    .await
    .unwrap();
    assert_eq!(jwks.fetches(), 1, "fetched once at start");

    let tenant_a = a.sign(&claims("tenant-admin", Some("acme")));
    status_of(&server, &tenant_a).await.ok();
    // One key in the set: a token without kid is verified with it.
    status_of(
        &server,
        &a.sign_with(None, &claims("tenant-user", Some("acme"))),
    )
    .await
    .ok();
    let provider = a.sign(&claims("provider-admin", None));
    client(&server, &provider)
        .get(&format!("{PRIV}/network_classes"))
        .await
        .ok();

    // Rotation: the IdP now publishes only key B; a token of B works after the on-demand
    // refresh, with no restart.
    jwks.serve(set(&[&b]));
    tokio::time::sleep(Duration::from_millis(400)).await;
    status_of(&server, &b.sign(&claims("tenant-admin", Some("acme"))))
        .await
        .ok();
    assert_eq!(jwks.fetches(), 2);
    status_of(&server, &tenant_a)
        .await
        .err(401, "UNAUTHENTICATED", &["unknown key", "key-a"]);

    // Both keys published: a token without kid is refused (which key?).
    jwks.serve(set(&[&a, &b]));
    tokio::time::sleep(Duration::from_millis(400)).await;
    status_of(&server, &tenant_a).await.ok();
    status_of(
        &server,
        &a.sign_with(None, &claims("tenant-admin", Some("acme"))),
    )
    .await
    .err(401, "UNAUTHENTICATED", &["no kid", "2 keys"]);
    status_of(
        &server,
        &b.sign_with(None, &claims("tenant-admin", Some("acme"))),
    )
    .await
    .err(401, "UNAUTHENTICATED", &["no kid"]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_claims_and_algorithms_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let a = SigningKey::new("key-a");
    let jwks = JwksServer::start(dir.path(), set(&[&a])).await;
    let server = start_server(dir.path(), jwks.config()).await.unwrap();
    let with = |patch: Value| {
        let mut c = claims("tenant-admin", Some("acme"));
        for (k, v) in patch.as_object().unwrap() {
            if v.is_null() {
                c.as_object_mut().unwrap().remove(k);
            } else {
                c[k] = v.clone();
            }
        }
        a.sign(&c)
    };
    status_of(&server, &with(json!({}))).await.ok();
    for (patch, fragment) in [
        (json!({"iss": "https://evil.test"}), "invalid token"),
        (json!({"iss": null}), "invalid token"),
        (json!({"aud": "another-service"}), "invalid token"),
        (json!({"aud": null}), "invalid token"),
        (json!({"exp": 1000}), "invalid token"),
        (json!({"tenant": ""}), "tenant claim"),
        (json!({"tenant": "  "}), "tenant claim"),
        (json!({"tenant": null}), "tenant claim"),
    ] {
        status_of(&server, &with(patch.clone()))
            .await
            .err(401, "UNAUTHENTICATED", &[fragment]);
    }

    // alg "none": no signature at all.
    let header = b64url(br#"{"alg":"none","typ":"JWT","kid":"key-a"}"#);
    let body = b64url(claims("provider-admin", None).to_string().as_bytes());
    status_of(&server, &format!("{header}.{body}.")).await.err(
        401,
        "UNAUTHENTICATED",
        &["invalid token"],
    );

    // Algorithm confusion: HS256 with the published public key as the HMAC secret.
    let public_jwk = a.jwk().to_string();
    for secret in [public_jwk.as_bytes(), a.pair.public_key_raw()] {
        let mut h = Header::new(Algorithm::HS256);
        h.kid = Some("key-a".into());
        let forged = encode(
            &h,
            &claims("provider-admin", None),
            &EncodingKey::from_secret(secret),
        )
        .unwrap();
        client(&server, &forged)
            .get(&format!("{PRIV}/network_classes"))
            .await
            .err(401, "UNAUTHENTICATED", &["not allowed"]);
    }
    server.shutdown().await;
}

/// A token's times: `nbf` is honoured and `exp` has no more slack than the configured leeway
/// (default 30 s). Stopped by `validate_nbf` and the leeway taken from `JwtConfig::leeway` in
/// `auth::jwt::JwtVerifier::verify`. Mutation-checked: without `validate_nbf` the token valid
/// from tomorrow was accepted; without setting the leeway (the library's 60 s) the token
/// expired 55 s ago was accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_times_nbf_and_leeway() {
    let dir = tempfile::tempdir().unwrap();
    let a = SigningKey::new("key-a");
    let jwks = JwksServer::start(dir.path(), set(&[&a])).await;
    let now = chrono::Utc::now().timestamp();
    let with = |times: Value| {
        let mut c = claims("tenant-admin", Some("acme"));
        for (k, v) in times.as_object().unwrap() {
            c[k] = v.clone();
        }
        a.sign(&c)
    };

    let server = start_server(dir.path(), jwks.config()).await.unwrap();
    assert_eq!(JwtConfig::DEFAULT_LEEWAY, Duration::from_secs(30));
    // Expired 55 s ago: refused with the default leeway.
    status_of(&server, &with(json!({"exp": now - 55})))
        .await
        .err(401, "UNAUTHENTICATED", &["expired"]);
    // Valid from tomorrow: refused.
    status_of(&server, &with(json!({"nbf": now + 86_400})))
        .await
        .err(401, "UNAUTHENTICATED", &["not valid yet", "nbf", "30 s"]);
    // Within the leeway, both ways: accepted (clock skew).
    status_of(&server, &with(json!({"exp": now - 10})))
        .await
        .ok();
    status_of(&server, &with(json!({"nbf": now + 10})))
        .await
        .ok();
    status_of(&server, &with(json!({"nbf": now - 10})))
        .await
        .ok();
    server.shutdown().await;

    // The leeway is a setting: with none, the same skews are refused; with 90 s, the token
    // expired 55 s ago passes.
    let strict = start_server(
        dir.path(),
        JwtConfig {
            leeway: Duration::ZERO,
            ..jwks.config()
        },
    )
    .await
    .unwrap();
    status_of(&strict, &with(json!({"exp": now - 10})))
        .await
        .err(401, "UNAUTHENTICATED", &["expired"]);
    status_of(&strict, &with(json!({"nbf": now + 10})))
        .await
        .err(401, "UNAUTHENTICATED", &["not valid yet"]);
    strict.shutdown().await;
    let lenient = start_server(
        dir.path(),
        JwtConfig {
            leeway: Duration::from_secs(90),
            ..jwks.config()
        },
    )
    .await
    .unwrap();
    status_of(&lenient, &with(json!({"exp": now - 55})))
        .await
        .ok();
    lenient.shutdown().await;
}

/// A symmetric (`oct`) key in the set never verifies a token, even a correctly signed one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symmetric_keys_in_the_set_are_never_used() {
    let dir = tempfile::tempdir().unwrap();
    let secret = b"a-shared-secret-that-must-not-work";
    let jwks = JwksServer::start(
        dir.path(),
        json!({"keys": [{"kty": "oct", "kid": "hmac", "k": b64url(secret)}]}),
    )
    .await;
    let server = start_server(dir.path(), jwks.config()).await.unwrap();
    for alg in [Algorithm::HS256, Algorithm::HS512] {
        let mut h = Header::new(alg);
        h.kid = Some("hmac".into());
        let t = encode(
            &h,
            &claims("provider-admin", None),
            &EncodingKey::from_secret(secret),
        )
        .unwrap();
        client(&server, &t)
            .get(&format!("{PRIV}/network_classes"))
            .await
            .err(401, "UNAUTHENTICATED", &[]);
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_unknown_kids_fetches_at_most_once_per_interval() {
    let dir = tempfile::tempdir().unwrap();
    let a = SigningKey::new("key-a");
    let jwks = JwksServer::start(dir.path(), set(&[&a])).await;
    let server = start_server(
        dir.path(),
        JwtConfig {
            min_refetch_interval: Duration::from_secs(1),
            ..jwks.config()
        },
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let before = jwks.fetches();
    let mut calls = Vec::new();
    for i in 0..40 {
        let forged = a.sign_with(
            Some(&format!("bogus-{i}")),
            &claims("tenant-admin", Some("acme")),
        );
        let url = server.url();
        calls.push(tokio::spawn(async move {
            let api = Api::new(&Arc::new(RwLock::new(url)), Some(&forged));
            api.get(&format!("{PUB}/virtual_networks")).await.status
        }));
    }
    for c in calls {
        assert_eq!(c.await.unwrap(), 401);
    }
    let during = jwks.fetches() - before;
    assert!(during <= 1, "{during} fetches for 40 unknown kids");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_set_is_refreshed_periodically() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (SigningKey::new("key-a"), SigningKey::new("key-b"));
    let jwks = JwksServer::start(dir.path(), set(&[&a])).await;
    let server = start_server(
        dir.path(),
        JwtConfig {
            refresh_interval: Duration::from_millis(300),
            // No on-demand refresh within the test: only the periodic one can pick up B.
            min_refetch_interval: Duration::from_secs(3600),
            ..jwks.config()
        },
    )
    .await
    .unwrap();
    jwks.serve(set(&[&b]));
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(jwks.fetches() >= 2, "periodic fetches: {}", jwks.fetches());
    status_of(&server, &b.sign(&claims("tenant-admin", Some("acme"))))
        .await
        .ok();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_refuses_to_start_without_strict_jwt_settings() {
    let dir = tempfile::tempdir().unwrap();
    let a = SigningKey::new("key-a");
    let jwks = JwksServer::start(dir.path(), set(&[&a])).await;
    let message = |r: Result<RunningServer, osac_server::ServerError>| match r {
        Ok(_) => panic!("the server started"),
        Err(e) => {
            let mut s = e.to_string();
            let mut cur = std::error::Error::source(&e);
            while let Some(c) = cur {
                s.push_str(": ");
                s.push_str(&c.to_string());
                cur = c.source();
            }
            s
        }
    };
    for (cfg, fragment) in [
        (
            JwtConfig {
                issuer: None,
                ..jwks.config()
            },
            "--jwt-issuer",
        ),
        (
            JwtConfig {
                issuer: Some(" ".into()),
                ..jwks.config()
            },
            "--jwt-issuer",
        ),
        (
            JwtConfig {
                audience: None,
                ..jwks.config()
            },
            "--jwt-audience",
        ),
        (
            JwtConfig {
                jwks: jwks.url.replace("https://", "http://"),
                ..jwks.config()
            },
            "https://",
        ),
        // The system roots do not trust the test CA: the certificate is refused.
        (
            JwtConfig {
                ca_file: None,
                ..jwks.config()
            },
            "cannot load JWKS",
        ),
    ] {
        let m = message(start_server(dir.path(), cfg).await);
        assert!(m.contains(fragment), "{m:?} lacks {fragment:?}");
    }
    assert_eq!(
        jwks.fetches(),
        0,
        "no key was fetched over an untrusted connection"
    );
}
