//! The client against a real `ovsdb-server` holding the OVN northbound schema (Debian packages
//! `openvswitch-common` and `ovn-central`, installed by `.ci/run`). Without them the tests say
//! so and pass, except under CI, where they must run.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use osac_ovsdb::{Address, Client, Error, Tls, TlsFiles, datum, op};
use serde_json::{Value, json};

const NB: &str = "OVN_Northbound";
const NB_SCHEMA: &str = "/usr/share/ovn/ovn-nb.ovsschema";

/// An `ovsdb-server` with an empty northbound database, stopped on drop.
struct Server {
    child: Child,
    unix: Address,
    tcp: Address,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn missing_tools() -> Option<String> {
    let have = |bin: &str| {
        Command::new(bin)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    };
    let mut missing: Vec<&str> = ["ovsdb-server", "ovsdb-tool"]
        .into_iter()
        .filter(|b| !have(b))
        .collect();
    if !Path::new(NB_SCHEMA).exists() {
        missing.push(NB_SCHEMA);
    }
    (!missing.is_empty()).then(|| missing.join(", "))
}

/// Starts a server, or None (with a note) when the tools are not installed outside CI.
fn server() -> Option<Server> {
    tools_or_skip()?;
    Some(start(tempfile::tempdir().expect("temp dir"), Vec::new()))
}

/// None (with a note) when the tools are not installed; under CI they must be.
fn tools_or_skip() -> Option<()> {
    if let Some(missing) = missing_tools() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the OVSDB tests must run under CI but cannot: missing {missing} (apt-get install openvswitch-common ovn-central)"
        );
        eprintln!("skipped: missing {missing}");
        return None;
    }
    Some(())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Starts a server in `dir` with a unix and a TCP remote and the `extra` arguments.
fn start(dir: tempfile::TempDir, extra: Vec<String>) -> Server {
    let db: PathBuf = dir.path().join("nb.db");
    let ok = Command::new("ovsdb-tool")
        .args(["create"])
        .arg(&db)
        .arg(NB_SCHEMA)
        .status()
        .expect("ovsdb-tool");
    assert!(ok.success(), "ovsdb-tool create failed");
    let sock = dir.path().join("nb.sock");
    let port = free_port();
    let child = Command::new("ovsdb-server")
        .arg(&db)
        .arg(format!("--remote=punix:{}", sock.display()))
        .arg(format!("--remote=ptcp:{port}:127.0.0.1"))
        .args(extra)
        .arg(format!("--unixctl={}", dir.path().join("ctl").display()))
        .arg(format!("--log-file={}", dir.path().join("log").display()))
        .arg("--no-chdir")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ovsdb-server");
    let until = Instant::now() + Duration::from_secs(10);
    while !sock.exists() {
        assert!(
            Instant::now() < until,
            "ovsdb-server did not create {sock:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Server {
        child,
        unix: Address::Unix(sock),
        tcp: Address::Tcp("127.0.0.1".into(), port),
        _dir: dir,
    }
}

/// Runs `ovs-pki` (the PKI tool Open vSwitch ships) in `dir` with `args`.
fn ovs_pki(dir: &Path, args: &[&str]) {
    let ok = Command::new("ovs-pki")
        .current_dir(dir)
        .args(args)
        .arg(format!("--log={}", dir.join("pki.log").display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("ovs-pki");
    assert!(ok.success(), "ovs-pki {args:?} failed");
}

/// An `ovs-pki` CA in `dir/<name>` and, in `dir`, the certificates `<cert>-cert.pem` /
/// `<cert>-privkey.pem` it signs.
fn pki(dir: &Path, name: &str, certs: &[&str]) -> PathBuf {
    let ca_dir = dir.join(name);
    ovs_pki(dir, &["init", &format!("--dir={}", ca_dir.display())]);
    for cert in certs {
        ovs_pki(
            dir,
            &[
                "req+sign",
                &format!("--dir={}", ca_dir.display()),
                cert,
                "switch",
            ],
        );
    }
    ca_dir.join("switchca/cacert.pem")
}

async fn connect(a: &Address) -> Client {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        match Client::connect(a).await {
            Ok((c, _)) => return c,
            Err(e) if Instant::now() < until => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
}

fn switch(name: &str, owner: &str) -> Value {
    op::insert(
        "Logical_Switch",
        op::row([
            ("name", json!(name)),
            ("external_ids", datum::string_map([("osac-id", owner)])),
        ]),
        None,
    )
}

async fn switches_owned_by(c: &Client, owner: &str) -> Vec<String> {
    let r = c
        .transact(
            NB,
            vec![op::select(
                "Logical_Switch",
                vec![op::map_has("external_ids", "osac-id", owner)],
                Some(&["name"]),
            )],
        )
        .await
        .expect("select");
    let mut names: Vec<String> = r[0]["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|row| row["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn transactions_insert_select_and_delete_by_external_ids() {
    let Some(s) = server() else { return };
    let c = connect(&s.unix).await;
    assert!(c.list_databases().await.unwrap().contains(&NB.to_string()));
    let r = c
        .transact(
            NB,
            vec![
                switch("a", "net-1"),
                switch("b", "net-1"),
                switch("c", "other"),
            ],
        )
        .await
        .unwrap();
    assert!(datum::as_uuid(&r[0]["uuid"]).is_some(), "{r:?}");
    assert_eq!(switches_owned_by(&c, "net-1").await, ["a", "b"]);
    let r = c
        .transact(
            NB,
            vec![op::delete(
                "Logical_Switch",
                vec![op::map_has("external_ids", "osac-id", "net-1")],
            )],
        )
        .await
        .unwrap();
    assert_eq!(r[0]["count"], 2);
    assert!(switches_owned_by(&c, "net-1").await.is_empty());
    assert_eq!(switches_owned_by(&c, "other").await, ["c"]);
}

#[tokio::test]
async fn a_refused_transaction_changes_nothing_and_says_why() {
    let Some(s) = server() else { return };
    let c = connect(&s.unix).await;
    // The second operation references a port that does not exist.
    let bad = op::mutate(
        "Logical_Switch",
        vec![op::cond("name", "==", json!("kept-out"))],
        vec![op::mutation(
            "ports",
            "insert",
            datum::set([datum::uuid("6f1e1f5e-0000-4000-8000-000000000000")]),
        )],
    );
    let e = c
        .transact(NB, vec![switch("kept-out", "net-2"), bad])
        .await
        .unwrap_err();
    match &e {
        Error::Transaction { error, .. } => {
            assert!(error.contains("referential integrity"), "{e}")
        }
        other => panic!("{other}"),
    }
    assert!(switches_owned_by(&c, "net-2").await.is_empty());
}

/// A write guarded by `op::exists` applies while its row is there and fails as a whole once the
/// row was deleted behind the writer's back.
#[tokio::test]
async fn a_write_guarded_by_exists_fails_once_its_row_is_gone() {
    let Some(s) = server() else { return };
    let c = connect(&s.unix).await;
    let inserted = c
        .transact(NB, vec![switch("guarded", "net-3")])
        .await
        .unwrap();
    let uuid = datum::as_uuid(&inserted[0]["uuid"]).unwrap().to_string();
    let rename = |name: &str| {
        vec![
            op::exists("Logical_Switch", &uuid),
            op::update(
                "Logical_Switch",
                op::by_uuid(&uuid),
                op::row([("name", json!(name))]),
            ),
            switch(&format!("beside-{name}"), "net-3"),
        ]
    };
    c.transact(NB, rename("renamed")).await.unwrap();
    c.transact(NB, vec![op::delete("Logical_Switch", op::by_uuid(&uuid))])
        .await
        .unwrap();
    let e = c.transact(NB, rename("again")).await.unwrap_err();
    match &e {
        Error::Transaction { operation, .. } => assert_eq!(*operation, Some(0), "{e}"),
        other => panic!("{other}"),
    }
    // Nothing of the failed transaction was applied.
    assert_eq!(switches_owned_by(&c, "net-3").await, ["beside-renamed"]);
}

#[tokio::test]
async fn a_monitor_sees_the_rows_and_the_changes_of_another_client() {
    let Some(s) = server() else { return };
    let (watcher, mut updates) = Client::connect(&s.unix).await.unwrap();
    let writer = connect(&s.unix).await;
    writer
        .transact(NB, vec![switch("before", "m")])
        .await
        .unwrap();
    let initial = watcher
        .monitor(
            NB,
            json!("ls"),
            json!({"Logical_Switch": {"columns": ["name"]}}),
        )
        .await
        .unwrap();
    let rows = initial["Logical_Switch"].as_object().unwrap();
    assert_eq!(rows.len(), 1);
    writer
        .transact(NB, vec![switch("after", "m")])
        .await
        .unwrap();
    let u = tokio::time::timeout(Duration::from_secs(5), updates.recv())
        .await
        .expect("an update within 5 s")
        .expect("the channel is open");
    assert_eq!(u.monitor, json!("ls"));
    let changed: Vec<&Value> = u.tables["Logical_Switch"]
        .as_object()
        .unwrap()
        .values()
        .collect();
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0]["new"]["name"], "after");
    assert!(changed[0].get("old").is_none());
}

#[tokio::test]
async fn a_server_that_goes_away_fails_pending_and_later_calls() {
    let Some(mut s) = server() else { return };
    let c = connect(&s.unix).await;
    c.transact(NB, vec![switch("x", "gone")]).await.unwrap();
    let _ = s.child.kill();
    let _ = s.child.wait();
    let e = tokio::time::timeout(
        Duration::from_secs(5),
        c.transact(NB, vec![switch("y", "gone")]),
    )
    .await
    .expect("no call waits forever on a dead server")
    .unwrap_err();
    assert!(e.is_disconnect(), "{e}");
}

/// ovsdb-server probes a TCP connection idle for 5 s with an echo request and drops it when
/// no reply comes within 5 s more: a client that answers keeps its connection.
#[tokio::test]
async fn an_idle_tcp_connection_answers_the_servers_echo_and_stays_open() {
    let Some(s) = server() else { return };
    let c = connect(&s.tcp).await;
    c.transact(NB, vec![switch("idle", "echo")]).await.unwrap();
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(c.closed(), None);
    assert_eq!(switches_owned_by(&c, "echo").await, ["idle"]);
}

/// `ssl:` as OVN deployments secure their databases: certificates made by `ovs-pki` (the
/// server's names a role, not a host), the client presenting its own. A server whose
/// certificate another CA signed is refused, and an `ssl:` address without TLS files says what
/// it needs.
#[tokio::test]
async fn an_ssl_address_talks_tls_with_certificates_made_by_ovs_pki() {
    if tools_or_skip().is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = pki(dir.path(), "pki", &["ovnnb", "osac"]);
    let rogue_ca = pki(dir.path(), "rogue", &[]);
    let path = |f: &str| dir.path().join(f);
    let port = free_port();
    let extra = vec![
        format!("--remote=pssl:{port}:127.0.0.1"),
        format!("--private-key={}", path("ovnnb-privkey.pem").display()),
        format!("--certificate={}", path("ovnnb-cert.pem").display()),
        format!("--ca-cert={}", ca.display()),
    ];
    let s = start(dir, extra);
    let ssl: Address = format!("ssl:127.0.0.1:{port}").parse().unwrap();
    let files = |ca_certificate: &Path| TlsFiles {
        private_key: s._dir.path().join("osac-privkey.pem"),
        certificate: s._dir.path().join("osac-cert.pem"),
        ca_certificate: ca_certificate.to_path_buf(),
    };
    let tls = Tls::load(&files(&ca)).expect("the ovs-pki files load");
    let until = Instant::now() + Duration::from_secs(10);
    let (c, _) = loop {
        match Client::connect_with(&ssl, Some(&tls)).await {
            Ok(c) => break c,
            Err(e) if Instant::now() < until => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    c.transact(NB, vec![switch("over-tls", "tls")])
        .await
        .unwrap();
    assert_eq!(switches_owned_by(&c, "tls").await, ["over-tls"]);

    let rogue = Tls::load(&files(&rogue_ca)).expect("the rogue files load");
    let refused = match Client::connect_with(&ssl, Some(&rogue)).await {
        Ok((c, _)) => c.transact(NB, vec![switch("x", "rogue")]).await.map(|_| ()),
        Err(e) => Err(e),
    };
    let e = refused.expect_err("a server certificate of another CA is refused");
    assert!(e.to_string().contains("certificate"), "{e}");

    let e = Client::connect(&ssl).await.err().expect("no TLS files");
    assert!(e.to_string().contains("needs a private key"), "{e}");
}
