//! The harness of the replica tests: a fresh PostgreSQL database per test, real
//! `osac server --dev` processes on it, and calls to any of them through one REST client.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::Connection;

pub const PUB: &str = "/api/fulfillment/v1";
pub const PRIV: &str = "/api/private/v1";

/// A fresh database, dropped with the test.
pub struct Db {
    base: String,
    name: String,
    pub url: String,
}

impl Db {
    pub async fn new() -> Option<Db> {
        let Ok(base) = std::env::var("OSAC_TEST_DATABASE_URL") else {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true but OSAC_TEST_DATABASE_URL is not set: the replica tests must run in CI"
            );
            eprintln!("OSAC_TEST_DATABASE_URL not set: replica tests skipped");
            return None;
        };
        let name = format!("osac_r_{}", uuid::Uuid::new_v4().simple());
        let mut conn = sqlx::PgConnection::connect(&base).await.expect("connect");
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await
            .expect("create database");
        let path_start = base.find("://").map_or(0, |i| i + 3);
        let url = match base[path_start..].rfind('/') {
            Some(i) => format!("{}/{name}", &base[..path_start + i]),
            None => format!("{base}/{name}"),
        };
        Some(Db { base, name, url })
    }

    pub async fn query(&self, sql: &str) -> Vec<(String, i64)> {
        sqlx::query_as(sql)
            .fetch_all(&mut self.connect().await)
            .await
            .expect(sql)
    }

    pub async fn connect(&self) -> sqlx::PgConnection {
        sqlx::PgConnection::connect(&self.url)
            .await
            .expect("connect")
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let (base, name) = (self.base.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                if let Ok(mut c) = sqlx::PgConnection::connect(&base).await {
                    let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .execute(&mut c)
                        .await;
                }
            });
        })
        .join();
    }
}

/// One `osac server --dev` process on the shared database.
pub struct Replica {
    child: Child,
    pub url: String,
    pub dir: PathBuf,
}

impl Replica {
    pub fn start(db: &Db, dir: &Path, extra: &[&str]) -> Replica {
        std::fs::create_dir_all(dir).expect("data dir");
        let log = std::fs::File::create(dir.join("server.log")).expect("log file");
        let mut child = Command::new(env!("CARGO_BIN_EXE_osac"))
            .args([
                "server",
                "--dev",
                "--listen",
                "127.0.0.1:0",
                "--database-url",
            ])
            .arg(&db.url)
            .arg("--data-dir")
            .arg(dir)
            .args(extra)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn osac server");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let url = loop {
            let line = lines
                .next()
                .and_then(Result::ok)
                .unwrap_or_else(|| panic!("server exited; see {}", dir.display()));
            if let Some(rest) = line.split("listening on ").nth(1) {
                break rest
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_string();
            }
        };
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines.by_ref() {});
        Replica {
            child,
            url,
            dir: dir.to_path_buf(),
        }
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    pub fn admin_token(&self) -> String {
        let path = self.dir.join("dev-credentials.json");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(text) = std::fs::read_to_string(&path)
                && let Ok(v) = serde_json::from_str::<Value>(&text)
                && let Some(t) = v["admin_token"].as_str()
            {
                return t.to_string();
            }
            assert!(Instant::now() < deadline, "no dev credentials");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Calls to any replica with any token, through the shared REST client (one connection pool).
pub struct Rest {
    client: osac_client::Api,
}

impl Rest {
    pub fn new() -> Rest {
        let client = osac_client::Api::new("http://127.0.0.1", "").expect("client");
        Rest { client }
    }

    /// Sends the request to `url` and asserts a 2xx answer; returns its JSON (Null if none).
    pub async fn call(
        &self,
        method: osac_client::Method,
        url: String,
        token: &str,
        body: Option<Value>,
    ) -> Value {
        let target = osac_client::Url::parse(&url).unwrap_or_else(|e| panic!("{url}: {e}"));
        let reply = self
            .client
            .with_token(token)
            .send(method, target, body.map(|b| b.to_string().into_bytes()))
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        let v = reply.json().unwrap_or(Value::Null);
        assert!(reply.status.is_success(), "{url}: {} {v}", reply.status);
        v
    }
    pub async fn get(&self, base: &str, path: &str, token: &str) -> Value {
        self.call(
            osac_client::Method::GET,
            format!("{base}{path}"),
            token,
            None,
        )
        .await
    }
    pub async fn post(&self, base: &str, path: &str, token: &str, body: Value) -> Value {
        self.call(
            osac_client::Method::POST,
            format!("{base}{path}"),
            token,
            Some(body),
        )
        .await
    }

    /// Waits until every object of `collection` named in `names` is in `state` (60 s).
    pub async fn wait_all(
        &self,
        base: &str,
        token: &str,
        collection: &str,
        names: &[String],
        state: &str,
    ) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let list = self
                .get(base, &format!("{PUB}/{collection}?limit=1000"), token)
                .await;
            let items = list["items"].as_array().cloned().unwrap_or_default();
            let pending: Vec<String> = names
                .iter()
                .filter(|n| {
                    !items.iter().any(|i| {
                        i["metadata"]["name"] == n.as_str() && i["status"]["state"] == state
                    })
                })
                .cloned()
                .collect();
            if pending.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{collection} not {state}: {pending:?}\n{items:#?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The replica listing; waits until every live replica holds shards and none is unowned.
    pub async fn settled_replicas(&self, base: &str, admin: &str, live: usize) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = self.get(base, &format!("{PRIV}/replicas"), admin).await;
            let items = r["items"].as_array().cloned().unwrap_or_default();
            let holding = items
                .iter()
                .filter(|i| i["live"] == true && i["shard_count"].as_u64() > Some(0))
                .count();
            if r["unowned_shards"] == 0 && holding == live {
                return r;
            }
            assert!(Instant::now() < deadline, "replicas never settled: {r:#}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Sets up tenant `acme` with a VirtualNetwork and a subnet; returns the tenant's token.
pub async fn tenant(api: &Rest, base: &str, admin: &str) -> String {
    api.post(
        base,
        &format!("{PRIV}/tenants"),
        admin,
        json!({"metadata": {"name": "acme"}}),
    )
    .await;
    let minted = api
        .post(
            base,
            &format!("{PRIV}/tokens"),
            admin,
            json!({"tenant": "acme", "role": "tenant-admin"}),
        )
        .await;
    let token = minted["token"].as_str().expect("token").to_string();
    api.post(
        base,
        &format!("{PUB}/virtual_networks"),
        &token,
        json!({"metadata": {"name": "net"}, "spec": {"ipv4_cidr": "10.8.0.0/16"}}),
    )
    .await;
    api.post(base, &format!("{PUB}/subnets"), &token, json!({"metadata": {"name": "sub"}, "spec": {"virtual_network": "net", "ipv4_cidr": "10.8.1.0/24"}}))
        .await;
    api.wait_all(
        base,
        &token,
        "subnets",
        &["sub".to_string()],
        "SUBNET_STATE_READY",
    )
    .await;
    token
}

/// Index (in the listing) of the live replica owning the most of `ids`.
pub fn busiest(listing: &Value, ids: &[String]) -> usize {
    let items = listing["items"].as_array().cloned().unwrap_or_default();
    (0..items.len())
        .filter(|i| items[*i]["live"] == true)
        .max_by_key(|i| {
            let shards: Vec<i64> = items[*i]["shards"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_i64).collect())
                .unwrap_or_default();
            ids.iter()
                .filter(|id| shards.contains(&i64::from(osac_controller::shard_of(id))))
                .count()
        })
        .expect("a live replica")
}

/// Index in `urls` of the live replica owning the most of `ids`.
pub async fn busiest_url(api: &Rest, urls: &[String], admin: &str, ids: &[String]) -> usize {
    let owners = api.get(&urls[0], &format!("{PRIV}/replicas"), admin).await;
    let victim = busiest(&owners, ids);
    urls.iter()
        .position(|u| {
            owners["items"][victim]["address"]
                .as_str()
                .is_some_and(|a| u.ends_with(a))
        })
        .expect("the busiest replica is one of ours")
}
