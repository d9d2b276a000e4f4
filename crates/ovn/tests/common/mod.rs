//! A northbound database of its own (`ovsdb-server` with the OVN schema, no root needed) for
//! the tests that converge rows into it.

#![allow(dead_code)]

pub mod net;

use std::collections::BTreeSet;

use osac_ovn::nb;
use osac_ovn::sandbox::{self, NB_SCHEMA};
use osac_ovsdb::{Client, datum, op};
use serde_json::Value;

/// The northbound database's name.
pub const NB: &str = nb::DATABASE;

/// A northbound `ovsdb-server` in a temporary directory and a client of it.
pub struct Db {
    pub dir: tempfile::TempDir,
    pub client: Client,
}

/// Starts a database, or None (the test passes) when the OVN packages are missing outside CI.
pub async fn db() -> Option<Db> {
    if let Some(missing) = sandbox::missing_tools() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the OVN tests must run under CI but cannot: missing {missing}"
        );
        eprintln!("skipped: missing {missing}");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let address = sandbox::serve_database(dir.path(), "nb", NB_SCHEMA)
        .await
        .expect("ovsdb-server");
    let (client, _) = Client::connect(&address).await.expect("connect");
    Some(Db { dir, client })
}

impl Db {
    pub async fn stop(self) {
        drop(self.client);
        sandbox::stop_database(self.dir.path(), "nb").await;
    }

    pub async fn rows(&self, table: &str) -> Vec<Value> {
        let r = self
            .client
            .transact(NB, vec![op::select(table, vec![], None)])
            .await
            .unwrap();
        r[0]["rows"].as_array().cloned().unwrap_or_default()
    }

    pub async fn names(&self, table: &str) -> BTreeSet<String> {
        self.rows(table)
            .await
            .iter()
            .filter_map(|r| r["name"].as_str().map(str::to_string))
            .collect()
    }

    pub async fn uuid_of(&self, table: &str, name: &str) -> String {
        let rows = self.rows(table).await;
        let row = rows.iter().find(|r| r["name"] == name).expect(name);
        datum::as_uuid(&row["_uuid"]).unwrap().to_string()
    }
}
