//! The web console (`/console`) in a real browser: headless Chromium driven through
//! chromedriver (crate `osac-webdriver`). Skipped with a reason when Chromium is not installed,
//! except under `CI=true`, where it must run. With `OSAC_CONSOLE_SCREENSHOTS=<dir>` the test
//! writes screenshots of the main views there (docs/console/ holds the committed ones).

use std::path::PathBuf;
use std::time::Duration;

use osac_webdriver::Browser;
use serde_json::{Value, json};

use crate::common::*;

/// How long the page may take to show something.
pub(crate) const SHOWN: Duration = Duration::from_secs(20);

/// A name a hostile tenant gives its objects' annotations (names must be DNS labels).
const HOSTILE: &str = r#"<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>"#;

/// The browser, or None when Chromium is not installed here (under CI it must be).
pub(crate) async fn browser() -> Option<Browser> {
    if let Err(reason) = osac_webdriver::binaries() {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("the console browser test must run under CI but cannot: {reason}");
        }
        eprintln!("skipping the console browser test: {reason}");
        return None;
    }
    Some(
        Browser::start(1600, 1000)
            .await
            .expect("start headless Chromium"),
    )
}

pub(crate) async fn screenshot(b: &Browser, name: &str) {
    let Some(dir) = std::env::var_os("OSAC_CONSOLE_SCREENSHOTS").map(PathBuf::from) else {
        return;
    };
    std::fs::create_dir_all(&dir).expect("screenshot directory");
    b.screenshot(&dir.join(name)).await.expect("screenshot");
}

/// A JavaScript expression: the `data-state` of the drawn object named `name`, or null.
fn drawn_state(name: &str) -> String {
    format!(
        "(() => {{ const n = document.querySelector('#topology [data-name=\"{name}\"]'); \
         return n && n.getAttribute('data-state'); }})()"
    )
}

async fn drawn_ids(b: &Browser) -> Vec<String> {
    let v = b
        .execute(
            "return [...document.querySelectorAll('#topology [data-id]')].map(e => e.getAttribute('data-id'))",
            vec![],
        )
        .await
        .expect("ids");
    serde_json::from_value(v).expect("list of ids")
}

/// Every id of a tenant's objects of the picture's collections.
async fn tenant_ids(t: &Api) -> Vec<String> {
    let mut ids = Vec::new();
    for c in [
        "virtual_networks",
        "subnets",
        "security_groups",
        "external_ips",
        "compute_instances",
        "baremetal_instances",
        "external_ip_attachments",
        "nat_gateways",
    ] {
        let page = t.list(c, &[]).await.ok();
        ids.extend(page["items"].as_array().unwrap().iter().map(id));
    }
    ids
}

fn hostile_annotations() -> Value {
    json!({"note": HOSTILE})
}

/// The data-0 MACs of the dev `baremetal` hosts, whichever the instance gets.
fn baremetal_macs() -> Vec<String> {
    osac_server::dev::dev_hosts()
        .into_iter()
        .filter(|(_, h)| h["spec"]["pool"] == "baremetal")
        .map(|(_, h)| {
            h["spec"]["interfaces"][0]["mac_address"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_shows_the_tenants_own_network_live_and_explains_reachability() {
    let Some(b) = browser().await else {
        return;
    };
    let s = TestServer::sqlite().await;
    // Tenant alpha: its default networking plus a second subnet, a security group and VMs, one
    // with an external IP; one VM carries a hostile annotation.
    let alpha = s.tenant("alpha").await;
    alpha.ready_subnet("db", "default", "10.0.2.0/24").await;
    alpha
        .create(
            "security_groups",
            json!({"metadata": {"name": "web"}, "spec": {"virtual_network": "default",
                "ingress": [{"protocol": "PROTOCOL_TCP", "port_from": 443, "port_to": 443, "ipv4_cidr": "0.0.0.0/0"}]}}),
        )
        .await;
    let mut web = vm_body(
        "web-1",
        json!([{"subnet": "default-ipv4", "security_groups": ["web"]}]),
    );
    web["metadata"]["annotations"] = hostile_annotations();
    web["spec"]["auto_external_ip_attachment"] = json!(true);
    alpha.create("compute_instances", web).await;
    alpha
        .create(
            "compute_instances",
            vm_body(
                "db-1",
                json!([{"subnet": "db", "security_groups": ["default"]}]),
            ),
        )
        .await;
    for vm in ["web-1", "db-1"] {
        alpha
            .wait("compute_instances", vm, "COMPUTE_INSTANCE_STATE_RUNNING")
            .await;
    }
    // Tenant bravo: hostile annotations everywhere it can put them.
    let bravo = s.tenant("bravo").await;
    let mut secret = vm_body("bravo-secret", json!([{"subnet": "default-ipv4"}]));
    secret["metadata"]["annotations"] = hostile_annotations();
    bravo.create("compute_instances", secret).await;
    let bravo_ids = tenant_ids(&bravo).await;
    assert!(bravo_ids.len() > 3, "{bravo_ids:?}");

    // Sign in with alpha's token.
    b.goto(&format!("{}/console", s.url())).await.expect("open");
    b.wait_for("!document.getElementById('login').hidden", SHOWN)
        .await
        .expect("the sign-in form");
    b.type_into("#token", alpha.token.as_deref().unwrap())
        .await
        .expect("type the token");
    b.click("#login-submit").await.expect("sign in");
    b.wait_for("document.body.dataset.topology === 'drawn'", SHOWN)
        .await
        .expect("the topology is drawn");
    b.wait_for(&format!("{} === 'RUNNING'", drawn_state("web-1")), SHOWN)
        .await
        .expect("web-1 is drawn RUNNING");
    b.wait_for(
        "document.querySelector('#topology .link.attachment[data-state=\"READY\"]')",
        SHOWN,
    )
    .await
    .expect("the external IP attachment is drawn READY");
    let who = b
        .execute("return document.getElementById('who').textContent", vec![])
        .await
        .unwrap();
    assert!(who.as_str().unwrap().contains("alpha"), "{who}");

    // Alpha's objects are drawn; none of bravo's.
    let drawn = drawn_ids(&b).await;
    for own in tenant_ids(&alpha).await {
        assert!(
            drawn.contains(&own),
            "alpha's {own} is not drawn: {drawn:?}"
        );
    }
    for other in &bravo_ids {
        assert!(!drawn.contains(other), "bravo's {other} is drawn");
    }
    let text = b
        .execute("return document.body.textContent", vec![])
        .await
        .unwrap();
    assert!(!text.as_str().unwrap().contains("bravo"), "{text}");
    screenshot(&b, "topology.png").await;

    // The details panel: spec, status, events; the hostile annotation shown as text.
    b.click("#topology .card[data-name=\"web-1\"]")
        .await
        .expect("click web-1");
    b.wait_for(
        "document.getElementById('details-name')?.textContent === 'web-1' && document.getElementById('details-events')",
        SHOWN,
    )
    .await
    .expect("the details of web-1 with its events");
    let details = b
        .execute(
            "return {meta: document.getElementById('details-meta').textContent, \
             events: document.getElementById('details-events').textContent, \
             state: document.getElementById('details-state').textContent, \
             imgs: document.querySelectorAll('img').length, \
             scripts: document.querySelectorAll('body script').length, \
             pwned: window.__pwned === undefined ? null : window.__pwned}",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(details["state"], "RUNNING", "{details}");
    assert!(
        details["meta"]
            .as_str()
            .unwrap()
            .contains(&serde_json::to_string(HOSTILE).unwrap()[1..20]),
        "the annotation is shown as text: {details}"
    );
    assert!(
        details["events"].as_str().unwrap().contains("Running"),
        "{details}"
    );
    assert_eq!(details["imgs"], 0, "no markup from tenant data: {details}");
    assert_eq!(details["scripts"], 0, "{details}");
    assert_eq!(details["pwned"], Value::Null, "tenant data ran as code");
    screenshot(&b, "details.png").await;

    // Live: a bare-metal instance created now appears PROVISIONING (its DHCP lease is held)
    // and turns RUNNING when the lease comes, without a reload.
    b.execute("window.__sameDocument = 42; return true", vec![])
        .await
        .unwrap();
    let sim = s.sim_fabric();
    let macs = baremetal_macs();
    for mac in &macs {
        sim.hold_lease(mac, u32::MAX);
    }
    alpha
        .create(
            "baremetal_instances",
            bm_body(
                "bm-1",
                json!([{"subnet": "default-ipv4", "security_groups": ["web"]}]),
            ),
        )
        .await;
    b.wait_for(
        &format!("{} === 'PROVISIONING'", drawn_state("bm-1")),
        SHOWN,
    )
    .await
    .expect("bm-1 appears PROVISIONING");
    let amber = b
        .execute(
            "return document.querySelector('#topology [data-name=\"bm-1\"]').classList.contains('st-wait')",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(amber, true, "a provisioning workload is drawn amber");
    for mac in &macs {
        sim.hold_lease(mac, 0);
    }
    b.wait_for(&format!("{} === 'RUNNING'", drawn_state("bm-1")), SHOWN)
        .await
        .expect("bm-1 turns RUNNING live");
    let same = b
        .execute("return window.__sameDocument", vec![])
        .await
        .unwrap();
    assert_eq!(same, 42, "the page was not reloaded");

    explains_reachability(&b).await;
    provider_picks_a_tenant(&s, &b, &bravo_ids).await;

    b.quit().await.expect("quit the browser");
    s.finish().await;
}

/// The provider signs in: its objects in tables, a tenant picker, the picked tenant's network.
async fn provider_picks_a_tenant(s: &TestServer, b: &Browser, bravo_ids: &[String]) {
    b.click("#logout").await.expect("sign out");
    b.wait_for("!document.getElementById('login').hidden", SHOWN)
        .await
        .expect("the sign-in form again");
    let admin_token = s.admin.token.clone().unwrap();
    b.type_into("#token", &admin_token).await.expect("type");
    b.click("#login-submit").await.expect("sign in");
    b.wait_for(
        "[...document.querySelectorAll('#tenant-picker option')].map(o => o.value).join() === ',alpha,bravo'",
        SHOWN,
    )
    .await
    .expect("the tenant picker lists the tenants");
    b.execute(
        "const p = document.getElementById('tenant-picker'); p.value = 'bravo'; \
         p.dispatchEvent(new Event('change')); return true",
        vec![],
    )
    .await
    .unwrap();
    b.wait_for(
        &format!("{} === 'RUNNING'", drawn_state("bravo-secret")),
        SHOWN,
    )
    .await
    .expect("the provider sees bravo's network");
    let drawn = drawn_ids(b).await;
    for own in bravo_ids {
        assert!(drawn.contains(own), "bravo's {own} is not drawn");
    }
    let alpha_drawn = b
        .execute(
            "return document.querySelectorAll('#topology [data-name=\"web-1\"]').length",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(alpha_drawn, 0, "only the picked tenant is drawn");
    let pwned = b
        .execute("return window.__pwned === undefined", vec![])
        .await
        .unwrap();
    assert_eq!(pwned, true, "bravo's hostile annotation did not run");
    b.click("#view-provider").await.expect("provider objects");
    let tables = b
        .wait_for(
            "document.getElementById('provider-pools')?.textContent.includes('external-pool-1') && \
             document.getElementById('provider-hosts')?.textContent.includes('baremetal-0') && \
             document.getElementById('provider-classes').textContent",
            SHOWN,
        )
        .await
        .expect("the provider's pools, hosts and classes");
    assert!(tables.as_str().unwrap().contains("default"), "{tables}");
    screenshot(b, "provider.png").await;
}

/// "Can A reach B?": the verdict, the deciding element and the hops, drawn on the picture.
async fn explains_reachability(b: &Browser) {
    let web = b
        .execute(
            "return document.querySelector('#topology [data-name=\"web-1\"]').getAttribute('data-id')",
            vec![],
        )
        .await
        .unwrap();
    let web = web.as_str().unwrap();
    b.execute(
        "const f = document.getElementById('reach-from'); f.value = 'internet'; \
         f.dispatchEvent(new Event('change')); \
         const t = document.getElementById('reach-to'); t.value = arguments[0]; \
         t.dispatchEvent(new Event('change')); \
         document.getElementById('reach-proto').value = 'PROTOCOL_TCP'; \
         document.getElementById('reach-port').value = '443'; return true",
        vec![json!(format!("compute_instance:{web}"))],
    )
    .await
    .unwrap();
    b.click("#reach-submit").await.expect("explain");
    let verdict = b
        .wait_for(
            "document.getElementById('reach-verdict')?.dataset.verdict || document.getElementById('reach-error')?.textContent",
            SHOWN,
        )
        .await
        .expect("an answer");
    assert_eq!(
        verdict, "reachable",
        "internet → web-1 tcp/443 through its external IP"
    );
    let shown = b
        .execute(
            "return {hops: document.querySelectorAll('#reach-hops li').length, \
             path: document.querySelectorAll('#topology .layer-path polyline.reachable').length, \
             marked: document.querySelectorAll('#topology .hop').length, \
             web: document.querySelector('#topology [data-name=\"web-1\"]').classList.contains('hop')}",
            vec![],
        )
        .await
        .unwrap();
    assert!(shown["hops"].as_u64().unwrap() >= 2, "{shown}");
    // Hops name only the addresses they know, and no path stop covers the "Internet" label.
    let hops = b
        .execute(
            "return document.getElementById('reach-hops').textContent",
            vec![],
        )
        .await
        .unwrap();
    assert!(!hops.as_str().unwrap().contains('?'), "{hops}");
    let covered = b
        .execute(
            "const t = document.querySelector('#topology .internet text').getBoundingClientRect();              return [...document.querySelectorAll('#topology .path-stop')].some(c => {                const r = c.getBoundingClientRect();                return r.left < t.right && r.right > t.left && r.top < t.bottom && r.bottom > t.top; })",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(covered, false, "a path stop covers the Internet label");
    assert_eq!(shown["path"], 1, "the path is drawn: {shown}");
    assert_eq!(
        shown["web"], true,
        "the destination is on the path: {shown}"
    );
    screenshot(b, "reachability.png").await;

    // db-1 → web-1 on 443: allowed by web's rule; on 22 blocked, with the deciding group.
    b.execute(
        "const f = document.getElementById('reach-from'); \
         f.value = [...f.options].find(o => o.textContent === 'db-1').value; \
         f.dispatchEvent(new Event('change')); \
         document.getElementById('reach-port').value = '22'; return true",
        vec![],
    )
    .await
    .unwrap();
    b.click("#reach-submit").await.expect("explain");
    b.wait_for(
        "document.getElementById('reach-verdict')?.dataset.verdict === 'blocked'",
        SHOWN,
    )
    .await
    .expect("db-1 → web-1 tcp/22 is blocked");
    let deciding = b
        .execute(
            "return document.getElementById('reach-deciding').textContent",
            vec![],
        )
        .await
        .unwrap();
    assert!(!deciding.as_str().unwrap().is_empty(), "{deciding}");
}

/// Reads a console event stream until every collection in `collections` has sent SYNCED;
/// answers the events before that, `(collection, type, object id)`.
async fn first_batch(
    resp: reqwest::Response,
    collections: &[&str],
) -> Vec<(String, String, String)> {
    let mut resp = resp;
    let mut buffer = String::new();
    let mut events = Vec::new();
    let mut synced: Vec<String> = Vec::new();
    while synced.len() < collections.len() {
        let chunk = tokio::time::timeout(SHOWN, resp.chunk())
            .await
            .expect("the stream goes on")
            .expect("chunk")
            .expect("the stream does not end");
        buffer.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            for line in block.lines() {
                let Some(data) = line.strip_prefix("data:") else {
                    continue;
                };
                let v: Value = serde_json::from_str(data.trim()).expect("JSON event");
                let collection = v["collection"].as_str().unwrap().to_string();
                let kind = v["type"].as_str().unwrap().to_string();
                if kind == "SYNCED" {
                    assert!(!synced.contains(&collection), "one SYNCED per collection");
                    synced.push(collection);
                } else {
                    assert!(!synced.contains(&collection), "first batch before SYNCED");
                    events.push((collection, kind, id(&v["object"])));
                }
            }
        }
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_page_is_served_with_a_strict_policy_and_one_stream_per_tenant() {
    let s = TestServer::sqlite().await;
    let http = reqwest::Client::new();
    let page = http
        .get(format!("{}/console", s.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("default-src 'none'"),
        "{csp}"
    );
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = page.text().await.unwrap();
    assert!(html.contains(r#"<script type="module" src="/console/app.js">"#));
    assert!(!html.contains("<script>"), "no inline script");
    for (file, kind) in [("app.js", "text/javascript"), ("console.css", "text/css")] {
        let r = http
            .get(format!("{}/console/{file}", s.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{file}");
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with(kind),
            "{file}"
        );
    }
    let missing = http
        .get(format!("{}/console/nothing.js", s.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    // No page source writes HTML from data.
    for file in [
        "app.js",
        "api.js",
        "dom.js",
        "live.js",
        "model.js",
        "topology.js",
        "details.js",
        "reach.js",
        "provider.js",
        "objects.js",
        "forms.js",
    ] {
        let src = http
            .get(format!("{}/console/{file}", s.url()))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!src.contains(sink), "{file} uses {sink}");
        }
    }

    // The session and the combined watch need a token and are scoped by it.
    s.anonymous()
        .get("/console/api/session")
        .await
        .err(401, "UNAUTHENTICATED", &[]);
    let alpha = s.tenant("alpha").await;
    let bravo = s.tenant("bravo").await;
    bravo.create_vm("b-vm", "default-ipv4").await;
    let me = alpha.get("/console/api/session").await.ok();
    assert_eq!(me["role"], "tenant-admin");
    assert_eq!(me["tenant"], "alpha");
    alpha
        .get("/console/api/watch?collections=subnets,nope")
        .await
        .err(400, "INVALID_ARGUMENT", &["collections", "'nope'"]);
    alpha
        .get("/console/api/watch?collections=hosts&surface=private")
        .await
        .err(403, "PERMISSION_DENIED", &[]);
    let collections = ["virtual_networks", "subnets", "compute_instances"];
    let stream = http
        .get(format!(
            "{}/console/api/watch?collections={}",
            s.url(),
            collections.join(",")
        ))
        .bearer_auth(alpha.token.as_deref().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    assert!(
        stream.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let events = first_batch(stream, &collections).await;
    let alpha_ids = tenant_ids(&alpha).await;
    let bravo_ids = tenant_ids(&bravo).await;
    for (collection, kind, object) in &events {
        assert_eq!(kind, "ADDED", "{collection} {object}");
        assert!(
            alpha_ids.contains(object),
            "{collection} {object} is not alpha's"
        );
        assert!(
            !bravo_ids.contains(object),
            "bravo's {object} in alpha's stream"
        );
    }
    for c in collections {
        let listed = alpha.list(c, &[]).await.ok()["items"]
            .as_array()
            .unwrap()
            .len();
        let sent = events.iter().filter(|(col, _, _)| col == c).count();
        assert_eq!(sent, listed, "the first batch of {c} is what a list shows");
    }
    s.finish().await;
}
