//! Streams end when the trust that opened them ends, and are capped: a hostile tenant keeps a
//! watch open (REST `?watch=true`, the console's combined stream, gRPC `Watch`) after its token
//! is revoked, after it expires, after its tenant is deleted (and a new tenant takes the name),
//! or opens watches without end.
//!
//! Rules under attack and how removing each made these tests fail (checked once):
//! - A watch re-checks its credential on every token or tenant change of the change feed and
//!   on a timer (`Watcher::run` in crates/api/src/watch.rs, `Authenticator::recheck`). With
//!   the re-check arms removed from the watcher's loop, every stream below kept delivering:
//!   the revoked token's streams received `after-revoke`, the expired token's, the deleted
//!   tenant's and the streams of a token revoked through another replica (PostgreSQL) stayed
//!   open past the 5 s deadline ("still open" panics).
//! - Watch caps (`WatchSlots::take`, crates/api/src/watch_slots.rs). With the cap check
//!   removed, the fourth watch of a token opened (200, not 429: "REST: opened beyond the cap").
//! - JWT streams end at `exp` and with the tenant they opened on (`Authenticator::recheck`):
//!   with the expiry check removed, and separately with the tenant check removed, the JWT
//!   test's streams stayed open ("rest: still open").

use std::sync::{Arc, RwLock};
use std::time::Duration;

use osac_proto::v1 as pb;
use serde_json::{Value, json};
use tonic::Request;

use crate::both_backends;
use crate::common::*;

/// A stream must end this soon after its credential did.
const END_WITHIN: Duration = Duration::from_secs(5);

#[derive(Clone)]
struct Bearer(String);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, tonic::Status> {
        req.metadata_mut().insert(
            "authorization",
            format!("Bearer {}", self.0).parse().expect("header"),
        );
        Ok(req)
    }
}

/// A watch of virtual networks over one of the three transports.
enum Watch {
    Sse(reqwest::Response),
    Grpc(tonic::Streaming<pb::VirtualNetworkWatchEvent>),
}

/// Why a watch was not opened: its error code (`RESOURCE_EXHAUSTED`, …) and message.
#[derive(Debug)]
struct Refused {
    code: String,
    message: String,
}

/// How a watch ended: the names of the objects it delivered, its final error code and message.
#[derive(Debug)]
struct Ended {
    names: Vec<String>,
    code: String,
    message: String,
}

async fn sse(url: String, token: &str) -> Result<Watch, Refused> {
    let resp = reqwest::Client::new()
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .expect("watch request");
    if resp.status() != 200 {
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        let code = body["code"].as_str().unwrap_or_default().to_string();
        if code == "RESOURCE_EXHAUSTED" {
            assert_eq!(status, 429, "{body}");
        }
        return Err(Refused {
            code,
            message: body["message"].as_str().unwrap_or_default().to_string(),
        });
    }
    Ok(Watch::Sse(resp))
}

impl Watch {
    /// `GET /api/fulfillment/v1/virtual_networks?watch=true`.
    async fn rest(base: &str, token: &str) -> Result<Watch, Refused> {
        sse(format!("{base}{PUB}/virtual_networks?watch=true"), token).await
    }

    /// The console's combined stream of `collections`.
    async fn console(base: &str, token: &str, collections: &str) -> Result<Watch, Refused> {
        sse(
            format!("{base}/console/api/watch?collections={collections}"),
            token,
        )
        .await
    }

    /// gRPC `VirtualNetworks.Watch`.
    async fn grpc(base: &str, token: &str) -> Result<Watch, Refused> {
        let channel = tonic::transport::Channel::from_shared(base.to_string())
            .expect("uri")
            .connect()
            .await
            .expect("connect");
        let mut client = pb::virtual_networks_client::VirtualNetworksClient::with_interceptor(
            channel,
            Bearer(token.to_string()),
        );
        match client
            .watch(pb::WatchRequest {
                filter: String::new(),
            })
            .await
        {
            Ok(r) => Ok(Watch::Grpc(r.into_inner())),
            Err(status) => Err(Refused {
                code: grpc_code(status.code()),
                message: status.message().to_string(),
            }),
        }
    }

    /// The three transports' watches of `token`.
    async fn all(base: &str, token: &str) -> Vec<(&'static str, Watch)> {
        vec![
            ("rest", Watch::rest(base, token).await.expect("REST watch")),
            (
                "console",
                Watch::console(base, token, "virtual_networks,subnets")
                    .await
                    .expect("console watch"),
            ),
            ("grpc", Watch::grpc(base, token).await.expect("gRPC watch")),
        ]
    }

    /// Reads the stream until it ends; panics if it is still open at `deadline`.
    async fn ended_by(self, what: &str, deadline: tokio::time::Instant) -> Ended {
        let mut names = Vec::new();
        match self {
            Watch::Sse(mut resp) => {
                let mut buffer = String::new();
                let mut error = None;
                loop {
                    while let Some(end) = buffer.find("\n\n") {
                        let block: String = buffer.drain(..end + 2).collect();
                        let data: String = block
                            .lines()
                            .filter_map(|l| l.strip_prefix("data:"))
                            .map(str::trim_start)
                            .collect();
                        if data.is_empty() {
                            continue;
                        }
                        let v: Value = serde_json::from_str(&data).expect("event JSON");
                        if block.contains("event: error") {
                            error = Some(v);
                        } else if let Some(name) = v["object"]["metadata"]["name"].as_str() {
                            names.push(name.to_string());
                        }
                    }
                    let chunk = tokio::time::timeout_at(deadline, resp.chunk())
                        .await
                        .unwrap_or_else(|_| panic!("{what}: still open; delivered {names:?}"));
                    match chunk.expect("stream read") {
                        Some(bytes) => buffer.push_str(&String::from_utf8_lossy(&bytes)),
                        None => break,
                    }
                }
                let error = error.unwrap_or_else(|| panic!("{what}: ended without an error"));
                Ended {
                    names,
                    code: error["code"].as_str().unwrap_or_default().to_string(),
                    message: error["message"].as_str().unwrap_or_default().to_string(),
                }
            }
            Watch::Grpc(mut stream) => loop {
                let next = tokio::time::timeout_at(deadline, stream.message())
                    .await
                    .unwrap_or_else(|_| panic!("{what}: still open; delivered {names:?}"));
                match next {
                    Ok(Some(event)) => {
                        if let Some(meta) = event.object.and_then(|o| o.metadata) {
                            names.push(meta.name);
                        }
                    }
                    Ok(None) => panic!("{what}: ended without a status"),
                    Err(status) => {
                        return Ended {
                            names,
                            code: grpc_code(status.code()),
                            message: status.message().to_string(),
                        };
                    }
                }
            },
        }
    }
}

fn grpc_code(code: tonic::Code) -> String {
    match code {
        tonic::Code::Unauthenticated => "UNAUTHENTICATED".into(),
        tonic::Code::ResourceExhausted => "RESOURCE_EXHAUSTED".into(),
        other => format!("{other:?}"),
    }
}

/// Mints a token of `tenant` (`expires_in` optional); returns (secret, id).
async fn mint(
    s: &TestServer,
    tenant: &str,
    role: &str,
    expires_in: Option<&str>,
) -> (String, String) {
    let mut body = json!({"tenant": tenant, "role": role, "subject": format!("{tenant}-{role}")});
    if let Some(e) = expires_in {
        body["expires_in"] = json!(e);
    }
    let r = s.admin.post(&format!("{PRIV}/tokens"), body).await.ok();
    (
        r["token"].as_str().expect("token").to_string(),
        r["id"].as_str().expect("id").to_string(),
    )
}

/// Every watch ends by `deadline` with UNAUTHENTICATED and never delivered `unseen`.
async fn all_end(
    watches: Vec<(&'static str, Watch)>,
    deadline: tokio::time::Instant,
    unseen: &str,
) {
    let ends = futures::future::join_all(
        watches
            .into_iter()
            .map(|(what, w)| async move { (what, w.ended_by(what, deadline).await) }),
    )
    .await;
    for (what, ended) in ends {
        assert_eq!(ended.code, "UNAUTHENTICATED", "{what}: {ended:?}");
        assert!(
            ended.message.contains("no longer valid"),
            "{what}: {ended:?}"
        );
        assert!(
            !ended.names.iter().any(|n| n == unseen),
            "{what} delivered {unseen} after its credential ended: {ended:?}"
        );
    }
}

both_backends!(
    streams_end_when_their_token_is_revoked,
    streams_end_when_their_token_expires,
    streams_end_when_their_tenant_is_deleted,
    revocation_through_another_replica_ends_streams,
);

async fn streams_end_when_their_token_is_revoked(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let acme = s.tenant("acme").await;
    let (secret, id) = mint(&s, "acme", "tenant-user", None).await;
    let watches = Watch::all(&s.url(), &secret).await;
    s.admin.delete(&format!("{PRIV}/tokens/{id}")).await.ok();
    let deadline = tokio::time::Instant::now() + END_WITHIN;
    acme.create(
        "virtual_networks",
        json!({"metadata": {"name": "after-revoke"}, "spec": {"ipv4_cidr": "10.9.0.0/16"}}),
    )
    .await;
    all_end(watches, deadline, "after-revoke").await;
    // The token is as dead for new streams.
    let refused = Watch::rest(&s.url(), &secret).await.err().expect("refused");
    assert_eq!(refused.code, "UNAUTHENTICATED", "{refused:?}");
    s.finish().await;
}

async fn streams_end_when_their_token_expires(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    s.tenant("acme").await;
    let (secret, _) = mint(&s, "acme", "tenant-user", Some("3s")).await;
    let expiry = tokio::time::Instant::now() + Duration::from_secs(3);
    let watches = Watch::all(&s.url(), &secret).await;
    all_end(watches, expiry + END_WITHIN, "").await;
    s.finish().await;
}

async fn streams_end_when_their_tenant_is_deleted(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let gamma = s.tenant("gamma").await;
    let token = gamma.token.clone().expect("token");
    let watches = Watch::all(&s.url(), &token).await;
    s.admin.delete(&format!("{PRIV}/tenants/gamma")).await.ok();
    all_end(watches, tokio::time::Instant::now() + END_WITHIN, "").await;
    s.finish().await;
}

async fn revocation_through_another_replica_ends_streams(backend: Backend) {
    // Replicas share a database only on PostgreSQL.
    if backend != Backend::Postgres {
        return;
    }
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    s.tenant("acme").await;
    let (secret, id) = mint(&s, "acme", "tenant-user", None).await;
    let watches = Watch::all(&s.url(), &secret).await;
    let replica = s.replica().await;
    let admin_there = Api::new(
        &Arc::new(RwLock::new(replica.url())),
        s.admin.token.as_deref(),
    );
    admin_there
        .delete(&format!("{PRIV}/tokens/{id}"))
        .await
        .ok();
    all_end(watches, tokio::time::Instant::now() + END_WITHIN, "").await;
    // A tenant deleted through the other replica ends its streams here too.
    let gamma = s.tenant("gamma").await;
    let watches = Watch::all(&s.url(), gamma.token.as_deref().expect("token")).await;
    admin_there
        .delete(&format!("{PRIV}/tenants/gamma"))
        .await
        .ok();
    all_end(watches, tokio::time::Instant::now() + END_WITHIN, "").await;
    replica.shutdown().await;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_are_capped_per_token_and_per_tenant() {
    let limits = osac_server::LimitsConfig {
        watches: osac_api::watch_slots::WatchLimits {
            per_token: 3,
            per_tenant: 5,
        },
        ..Default::default()
    };
    let s = TestServer::start_with_limits(Backend::Sqlite, limits)
        .await
        .expect("SQLite");
    s.tenant("acme").await;
    s.tenant("bravo").await;
    let url = s.url();
    let (a, _) = mint(&s, "acme", "tenant-user", None).await;
    let (b, _) = mint(&s, "acme", "tenant-user", None).await;
    let (other, _) = mint(&s, "bravo", "tenant-user", None).await;
    let token_cap = |r: Result<Watch, Refused>, what: &str| {
        let r = r
            .err()
            .unwrap_or_else(|| panic!("{what}: opened beyond the cap"));
        assert_eq!(r.code, "RESOURCE_EXHAUSTED", "{what}: {r:?}");
        assert!(
            r.message.contains("limit 3") && r.message.contains("--max-watches-per-token"),
            "{what}: {r:?}"
        );
    };

    // Token a: two REST watches and one gRPC watch fill its 3.
    let first = Watch::rest(&url, &a).await.expect("1");
    let _second = Watch::rest(&url, &a).await.expect("2");
    let _third = Watch::grpc(&url, &a).await.expect("3");
    token_cap(Watch::rest(&url, &a).await, "REST");
    token_cap(Watch::grpc(&url, &a).await, "gRPC");
    token_cap(Watch::console(&url, &a, "subnets").await, "console");

    // Token b of the same tenant: a console stream counts one per collection; the tenant's 5
    // are then full for every token of it, not for another tenant.
    let _console = Watch::console(&url, &b, "virtual_networks,subnets")
        .await
        .expect("tenant has 2 left");
    let r = Watch::rest(&url, &b).await.err().expect("tenant full");
    assert_eq!(r.code, "RESOURCE_EXHAUSTED", "{r:?}");
    assert!(
        r.message.contains("limit 5") && r.message.contains("--max-watches-per-tenant"),
        "{r:?}"
    );
    let _bravo = Watch::rest(&url, &other).await.expect("another tenant");

    // A closed stream frees its slot.
    drop(first);
    let deadline = tokio::time::Instant::now() + END_WITHIN;
    loop {
        match Watch::rest(&url, &a).await {
            Ok(_) => break,
            Err(r) if tokio::time::Instant::now() < deadline => {
                assert_eq!(r.code, "RESOURCE_EXHAUSTED", "{r:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(r) => panic!("the closed stream's slot was not freed: {r:?}"),
        }
    }
    s.finish().await;
}

/// A JWT's streams end at its `exp`, and when the tenant it names is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_streams_end_at_exp_and_with_their_tenant() {
    use crate::jwt::{JwksServer, SigningKey, claims, client, set, start_server};
    let dir = tempfile::tempdir().expect("tempdir");
    let key = SigningKey::new("k1");
    let jwks = JwksServer::start(dir.path(), set(&[&key])).await;
    let server = start_server(dir.path(), jwks.config())
        .await
        .expect("start");
    let provider = client(&server, &key.sign(&claims("provider-admin", None)));
    provider
        .post(
            &format!("{PRIV}/tenants"),
            json!({"metadata": {"name": "acme"}}),
        )
        .await
        .ok();
    let url = server.url();

    let mut short = claims("tenant-user", Some("acme"));
    short["exp"] = json!(chrono::Utc::now().timestamp() + 3);
    let expiry = tokio::time::Instant::now() + Duration::from_secs(3);
    let watches = Watch::all(&url, &key.sign(&short)).await;
    all_end(watches, expiry + END_WITHIN, "").await;

    let long = key.sign(&claims("tenant-user", Some("acme")));
    let watches = Watch::all(&url, &long).await;
    provider.delete(&format!("{PRIV}/tenants/acme")).await.ok();
    all_end(watches, tokio::time::Instant::now() + END_WITHIN, "").await;
    server.shutdown().await;
}
