//! Bearer tokens kept in the store: mint, use, list (no secrets anywhere), revoke (at once, on
//! every replica), expiry, tenant deletion and re-creation, token-file migration, dev
//! credentials.

use std::sync::{Arc, RwLock};

use osac_api::auth::tokens::{NAMESPACE, hash};
use serde_json::{Value, json};

use crate::common::*;

fn secret_of(minted: &Value) -> String {
    minted["token"]
        .as_str()
        .expect("token in mint answer")
        .to_string()
}

/// Asserts the store holds this secret only as its SHA-256: the row key is the hash, no row
/// (key or value) of any namespace contains the secret, and for SQLite the database files do
/// not contain it either.
async fn assert_not_at_rest(s: &TestServer, secret: &str) {
    let rows = s.store().kv_load(NAMESPACE).await.unwrap();
    assert!(
        rows.iter().any(|(k, _)| *k == hash(secret)),
        "no row keyed by the hash"
    );
    for (k, v) in &rows {
        assert!(
            !k.contains(secret) && !v.contains(secret),
            "secret at rest: {k} {v}"
        );
    }
    if s.db.url.starts_with("sqlite://") {
        let path = s.db.url.trim_start_matches("sqlite://").to_string();
        for file in [path.clone(), format!("{path}-wal")] {
            if let Ok(bytes) = std::fs::read(&file) {
                let found = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
                assert!(!found, "the secret is in {file}");
            }
        }
    } else {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&s.db.url).await.unwrap();
        let hits: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM kv WHERE key LIKE '%' || $1 || '%' OR value LIKE '%' || $1 || '%'",
        )
        .bind(secret)
        .fetch_one(&mut conn)
        .await
        .unwrap();
        assert_eq!(hits, 0, "the secret is in the kv table");
    }
}

async fn mint_use_list_revoke(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    s.tenant("acme").await;
    let minted = s
        .admin
        .post(
            &format!("{PRIV}/tokens"),
            json!({"tenant": "acme", "role": "tenant-admin", "subject": "alice"}),
        )
        .await
        .ok();
    let secret = secret_of(&minted);
    assert_eq!(minted["subject"], "alice");
    assert_eq!(minted["role"], "tenant-admin");
    assert_eq!(minted["tenant"], "acme");
    assert!(minted["created"].is_string(), "{minted}");
    assert!(minted.get("expires").is_none(), "no expiry asked: {minted}");
    let token_id = minted["id"].as_str().unwrap().to_string();

    // Use it.
    let alice = s.with_token(&secret);
    alice.get(&format!("{PUB}/virtual_networks")).await.ok();

    // The list shows it, without secrets or hashes.
    let list = s.admin.get(&format!("{PRIV}/tokens")).await;
    assert!(!list.text.contains(&secret), "secret in the list");
    assert!(!list.text.contains(&hash(&secret)), "hash in the list");
    let list = list.ok();
    let item = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == token_id.as_str())
        .expect("minted token listed")
        .clone();
    assert_eq!(item["subject"], "alice");
    assert_eq!(item["tenant"], "acme");
    assert!(item.get("token").is_none(), "{item}");
    assert_not_at_rest(&s, &secret).await;

    // A second server on the same database sees it, and sees its revocation.
    let replica = s.replica().await;
    let on_replica = Api::new(&Arc::new(RwLock::new(replica.url())), Some(&secret));
    on_replica
        .get(&format!("{PUB}/virtual_networks"))
        .await
        .ok();
    s.admin
        .delete(&format!("{PRIV}/tokens/{token_id}"))
        .await
        .ok();
    alice.get(&format!("{PUB}/virtual_networks")).await.err(
        401,
        "UNAUTHENTICATED",
        &["invalid token"],
    );
    if s.db.url.starts_with("postgres") {
        // The revocation reaches the replica's token cache through the change feed, well
        // before the entry cached by the request just before the revocation would expire
        // (TOKEN_CACHE_TTL, 1 s): without the notice this still answers 200 at the deadline.
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
        loop {
            let r = on_replica.get(&format!("{PUB}/virtual_networks")).await;
            if r.status == 401 {
                r.err(401, "UNAUTHENTICATED", &["invalid token"]);
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the replica still accepts a revoked token 500 ms after the revocation"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    } else {
        // SQLite has no feed between processes: a second process on the same file trusts
        // its cached resolution for at most the cache's lifetime.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        loop {
            let r = on_replica.get(&format!("{PUB}/virtual_networks")).await;
            if r.status == 401 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "revocation not seen");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    s.admin
        .delete(&format!("{PRIV}/tokens/{token_id}"))
        .await
        .err(404, "NOT_FOUND", &["token", &token_id]);
    replica.shutdown().await;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_minted_used_listed_and_revoked_sqlite() {
    mint_use_list_revoke(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_minted_used_listed_and_revoked_postgres() {
    mint_use_list_revoke(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_provider_admins_manage_tokens_and_bad_input_is_refused() {
    let s = TestServer::sqlite().await;
    let tenant_admin = s.tenant("acme").await;
    let before = s.admin.get(&format!("{PRIV}/tokens")).await.ok()["size"].clone();

    // Tenant admins cannot mint (not even for their own tenant), list or revoke.
    tenant_admin
        .post(
            &format!("{PRIV}/tokens"),
            json!({"tenant": "acme", "role": "tenant-admin"}),
        )
        .await
        .err(403, "PERMISSION_DENIED", &["provider administrators"]);
    tenant_admin
        .post(&format!("{PRIV}/tokens"), json!({"role": "provider-admin"}))
        .await
        .err(403, "PERMISSION_DENIED", &[]);
    tenant_admin
        .get(&format!("{PRIV}/tokens"))
        .await
        .err(403, "PERMISSION_DENIED", &[]);
    let some_id = s.admin.get(&format!("{PRIV}/tokens")).await.ok()["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    tenant_admin
        .delete(&format!("{PRIV}/tokens/{some_id}"))
        .await
        .err(403, "PERMISSION_DENIED", &[]);

    // Bad input: a clear error naming the field, and nothing minted.
    for (body, fragment) in [
        (json!({"tenant": "acme", "role": "root"}), "role"),
        (json!({"role": "tenant-admin"}), "tenant"),
        (
            json!({"tenant": "acme", "role": "tenant-user", "expires_in": "soon"}),
            "expires_in",
        ),
        (
            json!({"tenant": "acme", "role": "tenant-user", "expires_at": "2001-01-01T00:00:00Z"}),
            "expires_at",
        ),
        (
            json!({"tenant": "acme", "role": "tenant-user", "expires_in": "1h", "expires_at": "2999-01-01T00:00:00Z"}),
            "at most one",
        ),
        (
            json!({"tenant": "acme", "role": "tenant-user", "secret": "x"}),
            "secret",
        ),
        (
            json!({"tenant": "acme", "role": "tenant-user", "expires_in": 3600}),
            "expires_in",
        ),
    ] {
        s.admin.post(&format!("{PRIV}/tokens"), body).await.err(
            400,
            "INVALID_ARGUMENT",
            &[fragment],
        );
    }
    s.admin
        .post(
            &format!("{PRIV}/tokens"),
            json!({"tenant": "ghost", "role": "tenant-user"}),
        )
        .await
        .err(404, "NOT_FOUND", &["ghost"]);
    let after = s.admin.get(&format!("{PRIV}/tokens")).await.ok()["size"].clone();
    assert_eq!(before, after, "refused mints store nothing");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_tokens_are_refused() {
    let s = TestServer::sqlite().await;
    s.tenant("acme").await;
    let minted = s
        .admin
        .post(
            &format!("{PRIV}/tokens"),
            json!({"tenant": "acme", "role": "tenant-user", "expires_in": "2s"}),
        )
        .await
        .ok();
    assert!(minted["expires"].is_string(), "{minted}");
    let user = s.with_token(&secret_of(&minted));
    user.get(&format!("{PUB}/virtual_networks")).await.ok();
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    user.get(&format!("{PUB}/virtual_networks"))
        .await
        .err(401, "UNAUTHENTICATED", &["expired"]);

    // expires_at works the same way.
    let at = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let later = s
        .admin
        .post(
            &format!("{PRIV}/tokens"),
            json!({"tenant": "acme", "role": "tenant-user", "expires_at": at}),
        )
        .await
        .ok();
    s.with_token(&secret_of(&later))
        .get(&format!("{PUB}/virtual_networks"))
        .await
        .ok();
    s.finish().await;
}

async fn tenant_deletion(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let old = s.tenant("acme").await;
    old.get(&format!("{PUB}/virtual_networks")).await.ok();
    let tenant = s.admin.get(&format!("{PRIV}/tenants/acme")).await.ok();
    s.admin.delete(&format!("{PRIV}/tenants/acme")).await.ok();
    // At once, while the tenant is still being deleted.
    old.get(&format!("{PUB}/virtual_networks"))
        .await
        .err(401, "UNAUTHENTICATED", &[]);
    let listed = s.admin.get(&format!("{PRIV}/tokens")).await.ok();
    assert!(
        !listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["tenant_id"] == tenant["id"]),
        "the deleted tenant's tokens are revoked: {listed}"
    );
    s.admin.wait_gone(PRIV, "tenants", "acme").await;

    // A new tenant of the same name is another tenant: the old token stays refused.
    let new = s.tenant("acme").await;
    new.get(&format!("{PUB}/virtual_networks")).await.ok();
    old.get(&format!("{PUB}/virtual_networks"))
        .await
        .err(401, "UNAUTHENTICATED", &[]);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_tenant_revokes_its_tokens_sqlite() {
    tenant_deletion(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_tenant_revokes_its_tokens_postgres() {
    tenant_deletion(Backend::Postgres).await;
}

/// A token whose tenant row vanished without the revocation (e.g. a crash between the two)
/// is refused by the tenant check alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_of_a_vanished_tenant_is_refused() {
    let s = TestServer::start_bare(Backend::Sqlite, None).await.unwrap();
    let tenant = s
        .admin
        .post(
            &format!("{PRIV}/tenants"),
            json!({"metadata": {"name": "acme"}}),
        )
        .await
        .ok();
    let t = s.client_for("acme", "tenant-user").await;
    t.get(&format!("{PUB}/virtual_networks")).await.ok();
    let mut tx = s.store().begin().await.unwrap();
    tx.remove(tenant["id"].as_str().unwrap()).await.unwrap();
    tx.commit().await.unwrap();
    t.get(&format!("{PUB}/virtual_networks"))
        .await
        .err(401, "UNAUTHENTICATED", &["tenant"]);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_file_is_imported_once() {
    let mut s = TestServer::start_bare(Backend::Sqlite, None).await.unwrap();
    s.admin
        .post(
            &format!("{PRIV}/tenants"),
            json!({"metadata": {"name": "acme"}}),
        )
        .await
        .ok();
    // The harness's own token file was imported at the first start.
    assert!(!s.token_file.exists());
    let migrated = osac_api::auth::tokens::migrated_path(&s.token_file);
    assert!(migrated.exists());
    s.stop().await;

    let file = json!({"tokens": [
        {"token": "legacy-provider", "subject": "ops", "role": "provider-admin"},
        {"token": "legacy-acme", "subject": "bob", "tenant": "acme", "role": "tenant-user"},
        {"token": "legacy-ghost", "subject": "eve", "tenant": "ghost", "role": "tenant-admin"},
    ]});
    std::fs::write(&s.token_file, file.to_string()).unwrap();
    s.restart().await;
    assert!(
        !s.token_file.exists(),
        "the file is renamed after the import"
    );
    assert!(migrated.exists());
    let imported = s.store().kv_load(NAMESPACE).await.unwrap().len();
    assert_eq!(imported, 3, "harness admin + ops + bob (ghost skipped)");
    let ops = s.with_token("legacy-provider");
    assert!(
        ops.get(&format!("{PRIV}/tenants")).await.ok()["size"]
            .as_i64()
            .is_some()
    );
    s.with_token("legacy-acme")
        .get(&format!("{PUB}/virtual_networks"))
        .await
        .ok();
    s.with_token("legacy-ghost")
        .get(&format!("{PUB}/virtual_networks"))
        .await
        .err(401, "UNAUTHENTICATED", &[]);
    let listed = s.admin.get(&format!("{PRIV}/tokens")).await.ok();
    let bob = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["subject"] == "bob")
        .expect("bob imported")
        .clone();
    assert_eq!(bob["tenant"], "acme");
    assert_not_at_rest(&s, "legacy-acme").await;

    // Not imported twice: another restart adds nothing.
    s.restart().await;
    assert_eq!(s.store().kv_load(NAMESPACE).await.unwrap().len(), imported);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_credentials_are_private_and_their_token_is_reused() {
    use std::os::unix::fs::PermissionsExt;
    let s = TestServer::start_bare(Backend::Sqlite, None).await.unwrap();
    let service = s.service();
    let creds = s.dir.path().join("dev-credentials.json");
    // A world-readable file from an older version is replaced by a 0600 one.
    std::fs::write(&creds, "{}").unwrap();
    std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o644)).unwrap();

    let token = osac_server::dev::admin_token(&service, &creds)
        .await
        .unwrap();
    osac_server::dev::write_credentials(&creds, &json!({"url": s.url(), "admin_token": token}))
        .unwrap();
    let mode = std::fs::metadata(&creds).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "dev-credentials.json is {mode:o}");
    s.with_token(&token)
        .get(&format!("{PRIV}/tokens"))
        .await
        .ok();

    // The next start reuses it while it authenticates…
    let again = osac_server::dev::admin_token(&service, &creds)
        .await
        .unwrap();
    assert_eq!(again, token);
    // …and mints a new one once it was revoked.
    let listed = s.admin.get(&format!("{PRIV}/tokens")).await.ok();
    let id = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["subject"] == "dev-admin")
        .expect("the dev admin token is listed")["id"]
        .as_str()
        .unwrap()
        .to_string();
    s.admin.delete(&format!("{PRIV}/tokens/{id}")).await.ok();
    let fresh = osac_server::dev::admin_token(&service, &creds)
        .await
        .unwrap();
    assert_ne!(fresh, token);
    s.with_token(&fresh)
        .get(&format!("{PRIV}/tokens"))
        .await
        .ok();
    s.with_token(&token)
        .get(&format!("{PRIV}/tokens"))
        .await
        .err(401, "UNAUTHENTICATED", &[]);
    s.finish().await;
}
