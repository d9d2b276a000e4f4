//! The client against a small in-process fake of the REST API: URL building, auth, name
//! resolution, pagination, PATCH masks, errors and `--wait`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use clap::Parser;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use super::{ClientCommand, run};

#[derive(Debug, Clone)]
struct Request {
    method: String,
    path: String,
    query: String,
    auth: String,
    body: Value,
}

#[derive(Default)]
struct State {
    objects: HashMap<String, Vec<Value>>,
    requests: Vec<Request>,
    next_id: u64,
    /// GETs left before a PENDING object becomes READY (or a DELETING one disappears).
    polls: HashMap<String, u32>,
}

type Shared = Arc<Mutex<State>>;

fn error(status: u16, code: &str, message: &str) -> (u16, Value) {
    (
        status,
        json!({"code": code, "message": message, "details": []}),
    )
}

fn find(list: &[Value], key: &str) -> Option<usize> {
    list.iter().position(|o| {
        o["id"].as_str() == Some(key)
            || o.pointer("/metadata/name").and_then(Value::as_str) == Some(key)
    })
}

fn handle(st: &mut State, req: &Request) -> (u16, Value) {
    if req.auth != "Bearer secret" {
        return error(401, "UNAUTHENTICATED", "missing or invalid bearer token");
    }
    let parts: Vec<&str> = req.path.trim_start_matches('/').split('/').collect();
    let (coll, id) = match parts.as_slice() {
        ["api", "fulfillment" | "private", "v1", c] => (c.to_string(), None),
        ["api", "fulfillment" | "private", "v1", c, id] => (c.to_string(), Some(id.to_string())),
        _ => return (404, Value::Null),
    };
    if coll == "tokens" && req.method == "POST" {
        return (
            200,
            json!({"token": format!("tok-{}", req.body["tenant"].as_str().unwrap_or("-"))}),
        );
    }
    if coll == "managers" {
        return (
            200,
            json!({"items": [{"name": "sim-fabric", "role": "fabric", "driver": "sim",
                                        "capabilities": ["ipv4"], "description": "sim"}]}),
        );
    }
    let list = st.objects.entry(coll.clone()).or_default();
    match (req.method.as_str(), id) {
        ("GET", None) => {
            let q: HashMap<String, String> =
                osac_client::Url::parse(&format!("http://x/?{}", req.query))
                    .map(|u| u.query_pairs().into_owned().collect())
                    .unwrap_or_default();
            let offset: usize = q.get("offset").and_then(|s| s.parse().ok()).unwrap_or(0);
            let limit: usize = q
                .get("limit")
                .and_then(|s| s.parse().ok())
                .unwrap_or(100)
                .min(2);
            let items: Vec<Value> = list.iter().skip(offset).take(limit).cloned().collect();
            (
                200,
                json!({"size": items.len(), "total": list.len(), "items": items}),
            )
        }
        ("GET", Some(key)) => {
            let Some(i) = find(list, &key) else {
                return error(404, "NOT_FOUND", &format!("{coll} '{key}' does not exist"));
            };
            let oid = list[i]["id"].as_str().unwrap_or_default().to_string();
            let left = st.polls.entry(oid).or_insert(0);
            if *left > 0 {
                *left -= 1;
            } else {
                let fail = list[i].pointer("/metadata/labels/fail").is_some();
                match list[i]["status"]["state"].as_str() {
                    Some("X_STATE_PENDING") if fail => {
                        list[i]["status"] = json!({"state": "X_STATE_FAILED", "message": "segment allocation failed"});
                    }
                    Some("X_STATE_PENDING") => list[i]["status"]["state"] = json!("X_STATE_READY"),
                    Some("X_STATE_DELETING") => {
                        list.remove(i);
                        return error(404, "NOT_FOUND", "gone");
                    }
                    _ => {}
                }
            }
            (200, list[i].clone())
        }
        ("POST", None) => {
            let name = req.body.pointer("/metadata/name").and_then(Value::as_str);
            if name.is_some_and(|n| find(list, n).is_some()) {
                return error(409, "ALREADY_EXISTS", "name taken");
            }
            st.next_id += 1;
            let id = format!("01939a6e-0000-7000-8000-{:012x}", st.next_id);
            let mut obj = req.body.clone();
            obj["id"] = json!(id);
            obj["metadata"]["version"] = json!("1");
            obj["status"] = json!({"state": "X_STATE_PENDING"});
            st.polls.insert(id, 2);
            list.push(obj.clone());
            (200, obj)
        }
        ("PATCH", Some(key)) => {
            let Some(i) = find(list, &key) else {
                return error(404, "NOT_FOUND", "no such object");
            };
            if req.query.contains("lock=true")
                && req.body.pointer("/metadata/version") != list[i].pointer("/metadata/version")
            {
                return error(409, "ABORTED", "stale version");
            }
            let mask = req
                .query
                .split('&')
                .find_map(|kv| kv.strip_prefix("update_mask="))
                .unwrap_or("");
            for path in mask
                .split("%2C")
                .flat_map(|p| p.split(','))
                .filter(|p| !p.is_empty())
            {
                let ptr = format!("/{}", path.replace('.', "/"));
                let (parent, leaf) = ptr.rsplit_once('/').unwrap_or(("", ""));
                let new = req.body.pointer(&ptr).cloned().unwrap_or(Value::Null);
                if let Some(p) = list[i].pointer_mut(parent) {
                    p[leaf] = new;
                }
            }
            let v: u64 = list[i]["metadata"]["version"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            list[i]["metadata"]["version"] = json!((v + 1).to_string());
            (200, list[i].clone())
        }
        ("DELETE", Some(key)) => {
            let Some(i) = find(list, &key) else {
                return error(404, "NOT_FOUND", "no such object");
            };
            if list[i].pointer("/metadata/labels/in-use").is_some() {
                return error(412, "FAILED_PRECONDITION", "subnet 'a' is in use by 'vm1'");
            }
            let oid = list[i]["id"].as_str().unwrap_or_default().to_string();
            if list[i].pointer("/metadata/labels/delete-fail").is_some() {
                list[i]["status"] =
                    json!({"state": "X_STATE_DELETE_FAILED", "message": "fabric refused"});
                return (200, Value::Null);
            }
            list[i]["status"]["state"] = json!("X_STATE_DELETING");
            let stuck = list[i].pointer("/metadata/labels/stuck").is_some();
            st.polls.insert(oid, if stuck { u32::MAX } else { 1 });
            (200, Value::Null)
        }
        _ => (405, Value::Null),
    }
}

async fn serve_one(stream: tokio::net::TcpStream, state: Shared) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).await?;
    let mut it = line.split_whitespace();
    let method = it.next().unwrap_or_default().to_string();
    let target = it.next().unwrap_or_default().to_string();
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let (mut len, mut auth) = (0usize, String::new());
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).await?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            match k.to_ascii_lowercase().as_str() {
                "content-length" => len = v.trim().parse().unwrap_or(0),
                "authorization" => auth = v.trim().to_string(),
                _ => {}
            }
        }
    }
    let mut body = vec![0; len];
    reader.read_exact(&mut body).await?;
    let req = Request {
        method,
        path: path.to_string(),
        query: query.to_string(),
        auth,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let (status, resp) = {
        let mut st = state.lock().unwrap();
        st.requests.push(req.clone());
        handle(&mut st, &req)
    };
    let text = if resp.is_null() {
        String::new()
    } else {
        resp.to_string()
    };
    let out = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    );
    reader.get_mut().write_all(out.as_bytes()).await
}

async fn start() -> (String, Shared) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let state: Shared = Arc::default();
    let st = state.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let st = st.clone();
            tokio::spawn(async move {
                let _ = serve_one(s, st).await;
            });
        }
    });
    (url, state)
}

#[derive(Debug, Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: ClientCommand,
}

async fn osac(url: &str, line: &str) -> anyhow::Result<()> {
    let args = std::iter::once("osac")
        .chain(line.split_whitespace())
        .chain([
            "--url",
            url,
            "--token",
            "secret",
            "--config",
            "/nonexistent/osac.json",
        ]);
    run(Cli::try_parse_from(args)?.cmd).await
}

/// Runs `osac LINE` against the fake, which must succeed.
async fn osac_ok(url: &str, line: &str) {
    osac(url, line).await.unwrap();
}

/// Runs `osac LINE` against the fake, which must fail; returns the error's message.
async fn osac_err(url: &str, line: &str) -> String {
    osac(url, line).await.unwrap_err().to_string()
}

fn requests(st: &Shared) -> Vec<Request> {
    std::mem::take(&mut st.lock().unwrap().requests)
}

#[tokio::test]
async fn create_get_label_update_delete() {
    let (url, st) = start().await;
    osac_ok(
        &url,
        "create vn --cidr 10.0.0.0/16 --name my-net --wait --timeout 10s",
    )
    .await;
    let reqs = requests(&st);
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path, "/api/fulfillment/v1/virtual_networks");
    assert_eq!(
        reqs[0].body,
        json!({"metadata": {"name": "my-net"}, "spec": {"ipv4_cidr": "10.0.0.0/16"}})
    );
    assert!(reqs.len() >= 4, "waited through PENDING: {reqs:?}");
    assert!(
        reqs[1..]
            .iter()
            .all(|r| r.method == "GET" && r.path.ends_with("-000000000001"))
    );

    for n in ["a", "b", "c"] {
        osac_ok(
            &url,
            &format!("create subnet --vn my-net --cidr 10.0.1.0/24 --name {n}"),
        )
        .await;
    }
    requests(&st);
    // The fake pages by 2: get must follow offsets until total.
    osac_ok(&url, "get subnets -o name").await;
    let reqs = requests(&st);
    let lists: Vec<&Request> = reqs
        .iter()
        .filter(|r| r.path == "/api/fulfillment/v1/subnets")
        .collect();
    assert_eq!(lists.len(), 2, "{reqs:?}");
    assert!(lists[1].query.contains("offset=2"), "{:?}", lists[1]);
    osac_ok(&url, "get subnet a b -o json").await;
    osac_ok(&url, "get sn").await;
    requests(&st);

    osac_ok(&url, "label subnet a team=web env=dev").await;
    osac_ok(&url, "label subnet a env-").await;
    let reqs = requests(&st);
    let patch = reqs.iter().rfind(|r| r.method == "PATCH").unwrap();
    assert!(
        patch.path.ends_with("-000000000002"),
        "patched by id: {patch:?}"
    );
    assert!(
        patch.query.contains("update_mask=metadata.labels") && patch.query.contains("lock=true")
    );
    assert_eq!(patch.body["metadata"]["labels"], json!({"team": "web"}));
    let obj = st.lock().unwrap().objects["subnets"][0].clone();
    assert_eq!(obj["metadata"]["labels"], json!({"team": "web"}));

    osac_ok(
        &url,
        "create sg --vn my-net --name web --ingress protocol:tcp,port:80,source:any",
    )
    .await;
    osac_ok(&url, "update security-group web --ingress protocol:tcp,port:443,source:10.0.0.0/8 --clear-egress").await;
    let reqs = requests(&st);
    let patch = reqs.iter().rfind(|r| r.method == "PATCH").unwrap();
    assert!(
        patch
            .query
            .contains("update_mask=spec.ingress%2Cspec.egress"),
        "{patch:?}"
    );
    assert_eq!(
        patch.body,
        json!({"spec": {"ingress": [{"protocol": "PROTOCOL_TCP", "port_from": 443, "port_to": 443,
                                     "ipv4_cidr": "10.0.0.0/8"}], "egress": []}})
    );

    osac_ok(&url, "delete subnet b c --wait --timeout 10s").await;
    assert_eq!(st.lock().unwrap().objects["subnets"].len(), 1);
    let e = osac_err(&url, "delete subnet zz").await;
    assert_eq!(e, "subnets 'zz' does not exist (NOT_FOUND)");
    osac_ok(&url, "delete subnet zz --ignore-not-found").await;
}

#[tokio::test]
async fn errors_and_admin() {
    let (url, st) = start().await;
    osac_ok(&url, "create vn --cidr 10.0.0.0/16 --name n").await;
    let e = osac_err(&url, "create vn --cidr 10.0.0.0/16 --name n").await;
    assert_eq!(e, "name taken (ALREADY_EXISTS)");
    osac_ok(
        &url,
        "create subnet --vn n --cidr 10.0.1.0/24 --name a --label in-use=yes",
    )
    .await;
    let e = osac_err(&url, "delete subnet a").await;
    assert_eq!(e, "subnet 'a' is in use by 'vm1' (FAILED_PRECONDITION)");
    let e = osac_err(&url, "get tenants").await;
    assert!(e.contains("osac admin get tenant"), "{e}");

    let args = [
        "osac",
        "get",
        "vn",
        "--url",
        &url,
        "--token",
        "wrong",
        "--config",
        "/nonexistent/x",
    ];
    let e = run(Cli::try_parse_from(args).unwrap().cmd)
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(e, "missing or invalid bearer token (UNAUTHENTICATED)");

    requests(&st);
    osac_ok(&url, "admin create tenant --name acme --wait --timeout 10s").await;
    osac_ok(&url, "admin create token --tenant acme --role tenant-admin").await;
    osac_ok(&url, "admin managers").await;
    osac_ok(&url, "admin get tenants -o yaml").await;
    let reqs = requests(&st);
    assert_eq!(reqs[0].path, "/api/private/v1/tenants");
    let tok = reqs
        .iter()
        .find(|r| r.path == "/api/private/v1/tokens")
        .unwrap();
    assert_eq!(tok.body, json!({"tenant": "acme", "role": "tenant-admin"}));
    assert!(reqs.iter().any(|r| r.path == "/api/private/v1/managers"));

    // Nothing listens on a just-closed port.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dead = format!("http://127.0.0.1:{port}");
    let e = osac_err(&dead, "get vn").await;
    assert_eq!(
        e,
        format!("cannot reach osac at {dead}: is `osac server --dev` running?")
    );
}

#[tokio::test]
async fn wait_reports_failure_and_timeout() {
    let (url, _st) = start().await;
    let line =
        "create subnet --vn n --cidr 10.0.1.0/24 --name f --label fail=yes --wait --timeout 10s";
    let e = osac_err(&url, line).await;
    assert_eq!(e, "subnet/f is FAILED: segment allocation failed");

    osac_ok(
        &url,
        "create subnet --vn n --cidr 10.0.2.0/24 --name g --label delete-fail=yes",
    )
    .await;
    let e = osac_err(&url, "delete subnet g --wait --timeout 10s").await;
    assert_eq!(e, "subnet/g is DELETE_FAILED: fabric refused");

    osac_ok(
        &url,
        "create subnet --vn n --cidr 10.0.3.0/24 --name h --label stuck=yes",
    )
    .await;
    let e = osac_err(&url, "delete subnet h --wait --timeout 600ms").await;
    assert!(
        e.starts_with("timed out after 0.6s waiting for subnet/h to be deleted (last: DELETING"),
        "{e}"
    );
}
