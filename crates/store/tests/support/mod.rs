//! What the store's integration tests share.

/// The URL of a fresh, empty PostgreSQL database for this run, or None when no server is
/// configured (`OSAC_TEST_DATABASE_URL` unset).
pub async fn fresh_postgres_url() -> Option<String> {
    let base = std::env::var("OSAC_TEST_DATABASE_URL").ok()?;
    let pool = sqlx::PgPool::connect(&base)
        .await
        .expect("connect to OSAC_TEST_DATABASE_URL");
    let name = format!(
        "osac_store_{:x}",
        chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default()
    );
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&pool)
        .await
        .expect("create database");
    Some(match base.rfind('/') {
        Some(i) if base[..i].contains("://") && i > base.find("://").unwrap_or(0) + 2 => {
            format!("{}/{name}", &base[..i])
        }
        _ => format!("{base}/{name}"),
    })
}

/// Whether the test runs in CI, where the PostgreSQL suites must run.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// A replica's registration for lease tests (not every test binary takes leases).
#[allow(dead_code)]
pub fn replica(id: &str) -> osac_store::ReplicaInfo {
    osac_store::ReplicaInfo {
        id: id.into(),
        name: id.into(),
        address: "127.0.0.1:1".into(),
        dataplane: false,
    }
}
