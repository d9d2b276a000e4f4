//! The console acts, in headless Chromium: a tenant admin creates a subnet from a form (an
//! overlapping CIDR first, whose refusal shows the API's own message), sees it appear live and
//! disappear when deleted, edits a security group's rules and a workload's security groups
//! (read back through the API), searches and sorts a table, does a
//! create with the keyboard alone, sees its quotas, and the page has no horizontal overflow at
//! 800 px; a tenant-user is offered no admin-only action.

use osac_webdriver::{Browser, keys};
use serde_json::{Value, json};

use crate::common::*;
use crate::console::{SHOWN, browser, screenshot};

async fn js(b: &Browser, script: &str) -> Value {
    b.execute(script, vec![]).await.expect(script)
}

async fn sign_in(b: &Browser, url: &str, token: &str) {
    b.goto(&format!("{url}/console")).await.expect("open");
    b.execute("sessionStorage.clear(); return true", vec![])
        .await
        .expect("clear");
    b.goto(&format!("{url}/console")).await.expect("open");
    b.wait_for("!document.getElementById('login').hidden", SHOWN)
        .await
        .expect("the sign-in form");
    b.type_into("#token", token).await.expect("type the token");
    b.click("#login-submit").await.expect("sign in");
    b.wait_for("document.body.dataset.topology === 'drawn'", SHOWN)
        .await
        .expect("the topology is drawn");
}

/// Opens the objects view on the table of `collection`.
async fn table(b: &Browser, collection: &str) {
    b.click("#view-objects").await.expect("objects view");
    b.click(&format!("#kind-{collection}"))
        .await
        .expect("kind tab");
    b.wait_for(
        &format!("document.getElementById('kind-{collection}').classList.contains('active')"),
        SHOWN,
    )
    .await
    .expect("the table is shown");
}

fn row(name: &str) -> String {
    format!("document.querySelector('#obj-grid tr[data-name=\"{name}\"]')")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_creates_edits_and_deletes_with_the_apis_messages() {
    let Some(b) = browser().await else {
        return;
    };
    let s = TestServer::sqlite().await;
    let alpha = s.tenant("alpha").await;
    let taken = alpha.get(&format!("{PUB}/subnets/default-ipv4")).await.ok();
    let taken = taken["spec"]["ipv4_cidr"]
        .as_str()
        .expect("cidr")
        .to_string();
    alpha
        .create(
            "security_groups",
            json!({"metadata": {"name": "web"}, "spec": {"virtual_network": "default",
                "ingress": [{"protocol": "PROTOCOL_TCP", "port_from": 443, "port_to": 443, "ipv4_cidr": "0.0.0.0/0"}]}}),
        )
        .await;
    sign_in(&b, &s.url(), alpha.token.as_deref().unwrap()).await;

    // The NAT gateway in the network's header covers none of the header's text.
    let covered = js(
        &b,
        "const nat = document.querySelector('#topology g.nat').getBoundingClientRect(); \
         return [...document.querySelectorAll('#topology .vn > text')].some(t => { \
           const r = t.getBoundingClientRect(); \
           return r.left < nat.right && r.right > nat.left && r.top < nat.bottom && r.bottom > nat.top; })",
    )
    .await;
    assert_eq!(covered, false, "the NAT box covers the network's header");

    // Quotas: the tenant's own usage, as the API counts it.
    b.click("#view-objects").await.expect("objects view");
    let used = b
        .wait_for(
            "document.querySelector('#quota-table tr[data-quota=\"subnets\"] td.num')?.textContent",
            SHOWN,
        )
        .await
        .expect("the quota panel");
    assert_eq!(used, json!(alpha.count_all("subnets").await.to_string()));
    let usage = b
        .wait_for(
            "document.getElementById('usage-missing')?.textContent || document.getElementById('usage-table') && 'table'",
            SHOWN,
        )
        .await
        .expect("the usage panel says what it has");
    assert!(usage.as_str().is_some(), "{usage}");

    // An overlapping CIDR: the form shows the API's own message, verbatim.
    table(&b, "subnets").await;
    b.click("#obj-create").await.expect("create");
    b.wait_for("document.getElementById('form-dialog').open", SHOWN)
        .await
        .expect("the form opens");
    b.type_into("#form [name=name]", "extra").await.unwrap();
    b.type_into("#form [name=ipv4_cidr]", &taken).await.unwrap();
    b.click("#form-submit").await.expect("submit");
    let shown = b
        .wait_for("document.getElementById('form-error').textContent", SHOWN)
        .await
        .expect("the refusal is shown");
    let vn = alpha
        .get(&format!("{PUB}/virtual_networks/default"))
        .await
        .ok();
    let refused = alpha
        .post(
            &format!("{PUB}/subnets"),
            json!({"metadata": {"name": "extra"}, "spec": {"virtual_network": id(&vn), "ipv4_cidr": taken}}),
        )
        .await;
    assert!(refused.status >= 400, "{}", refused.text);
    assert_eq!(
        shown, refused.body["message"],
        "the API's message, verbatim"
    );
    screenshot(&b, "form-error.png").await;

    // A free CIDR: created, it appears live in the table and the picture.
    // Inside the default network (10.0.0.0/16, as the reachability test's 10.0.2.0/24).
    let free = "10.0.77.0/24";
    b.execute(
        "const i = document.querySelector('#form [name=ipv4_cidr]'); i.value = arguments[0]; return true",
        vec![json!(free)],
    )
    .await
    .unwrap();
    b.click("#form-submit").await.expect("submit");
    b.wait_for(
        &format!(
            "!document.getElementById('form-dialog').open && {}",
            row("extra")
        ),
        SHOWN,
    )
    .await
    .expect("the new subnet appears in the table");
    b.wait_for(
        "document.querySelector('#topology [data-name=\"extra\"]')",
        SHOWN,
    )
    .await
    .expect("and in the picture");
    let title = js(
        &b,
        &format!("return {}.querySelector('button.name').title", row("extra")),
    )
    .await;
    let created = alpha.get(&format!("{PUB}/subnets/extra")).await.ok();
    assert_eq!(title, json!(id(&created)), "the id on hover");

    // Delete: confirmed, it disappears.
    b.click("#obj-grid tr[data-name=\"extra\"] [data-action=delete]")
        .await
        .expect("delete");
    b.wait_for("document.getElementById('form-dialog').open", SHOWN)
        .await
        .expect("the confirmation");
    b.click("#form-submit").await.expect("confirm");
    b.wait_for(&format!("!{}", row("extra")), SHOWN)
        .await
        .expect("the subnet disappears from the table");
    b.wait_for(
        "!document.querySelector('#topology [data-name=\"extra\"]')",
        SHOWN,
    )
    .await
    .expect("and from the picture");

    // Edit a security group's rules: add tcp/22 from 10.0.0.0/8; the API has it.
    table(&b, "security_groups").await;
    b.click("#obj-grid tr[data-name=\"web\"] [data-action=edit]")
        .await
        .expect("edit");
    b.wait_for(
        "document.querySelectorAll('#form [data-rules=ingress] .rule').length === 1",
        SHOWN,
    )
    .await
    .expect("the rules editor with the current rule");
    b.click("#add-ingress").await.expect("add a rule");
    b.execute(
        "const r = [...document.querySelectorAll('#form [data-rules=ingress] .rule')].pop(); \
         r.querySelector('[name=port_from]').value = '22'; r.querySelector('[name=port_to]').value = '22'; \
         r.querySelector('[name=cidr]').value = '10.0.0.0/8'; return true",
        vec![],
    )
    .await
    .unwrap();
    screenshot(&b, "edit-rules.png").await;
    b.click("#form-submit").await.expect("save");
    b.wait_for("!document.getElementById('form-dialog').open", SHOWN)
        .await
        .expect("saved");
    let sg = alpha.get(&format!("{PUB}/security_groups/web")).await.ok();
    let ingress = sg["spec"]["ingress"].as_array().expect("rules").clone();
    assert_eq!(ingress.len(), 2, "{sg}");
    assert!(
        ingress
            .iter()
            .any(|r| r["port_from"] == 22 && r["ipv4_cidr"] == "10.0.0.0/8"),
        "{sg}"
    );

    // Search and sort the security groups.
    b.type_into("#obj-search", "we").await.expect("search");
    let found = b
        .wait_for(
            "[...document.querySelectorAll('#obj-grid tbody tr')].map(r => r.dataset.name).join()",
            SHOWN,
        )
        .await
        .expect("the search result");
    assert_eq!(found, "web");
    js(&b, "const s = document.getElementById('obj-search'); s.value = ''; s.dispatchEvent(new Event('input')); return true").await;
    b.click("#obj-grid th button[data-sort=name]")
        .await
        .expect("sort");
    let order = b
        .wait_for(
            "document.querySelector('#obj-grid th[aria-sort=descending]') &&              [...document.querySelectorAll('#obj-grid tbody tr')].map(r => r.dataset.name).join()",
            SHOWN,
        )
        .await
        .expect("sorted by name, descending");
    assert_eq!(order, "web,default");

    // Edit the security groups of a workload's attachment: add web to vm-1's.
    alpha
        .create(
            "compute_instances",
            vm_body(
                "vm-1",
                json!([{"subnet": "default-ipv4", "security_groups": ["default"]}]),
            ),
        )
        .await;
    table(&b, "compute_instances").await;
    b.wait_for(&row("vm-1"), SHOWN)
        .await
        .expect("vm-1 is listed");
    b.click("#obj-grid tr[data-name=\"vm-1\"] [data-action=edit]")
        .await
        .expect("edit vm-1");
    b.wait_for(
        "document.querySelector('#form input[name=\"sg-0\"]')",
        SHOWN,
    )
    .await
    .expect("the attachment's security groups");
    b.execute(
        "const web = [...document.querySelectorAll('#form input[name=\"sg-0\"]')]            .find(c => c.parentElement.textContent === 'web');          web.click(); return true",
        vec![],
    )
    .await
    .unwrap();
    b.click("#form-submit").await.expect("save");
    b.wait_for("!document.getElementById('form-dialog').open", SHOWN)
        .await
        .expect("saved");
    let vm = alpha
        .get(&format!("{PUB}/compute_instances/vm-1"))
        .await
        .ok();
    let web = alpha.get(&format!("{PUB}/security_groups/web")).await.ok();
    let groups = vm["spec"]["compute_network_attachments"][0]["security_groups"].clone();
    assert_eq!(groups.as_array().map(Vec::len), Some(2), "{vm}");
    assert!(
        groups.as_array().unwrap().contains(&json!(id(&web))),
        "{vm}"
    );

    keyboard_only(&b, &alpha).await;
    narrow_window(&b).await;

    // A tenant-user: no create or delete for networks, subnets, security groups, NAT gateways.
    let user = s.client_for("alpha", "tenant-user").await;
    b.resize(1600, 1000).await.expect("resize");
    sign_in(&b, &s.url(), user.token.as_deref().unwrap()).await;
    for collection in [
        "virtual_networks",
        "subnets",
        "security_groups",
        "nat_gateways",
    ] {
        table(&b, collection).await;
        let offered = js(
            &b,
            "return {create: !document.getElementById('obj-create').hidden, \
             actions: document.querySelectorAll('#obj-grid [data-action]').length}",
        )
        .await;
        assert_eq!(
            offered,
            json!({"create": false, "actions": 0}),
            "{collection}"
        );
    }
    // It creates workloads and external IPs.
    for (collection, name) in [
        ("compute_instances", "user-vm"),
        ("external_ips", "user-eip"),
    ] {
        table(&b, collection).await;
        b.click("#obj-create").await.expect("create is offered");
        b.wait_for("document.getElementById('form-dialog').open", SHOWN)
            .await
            .expect("the form opens");
        b.type_into("#form [name=name]", name).await.unwrap();
        b.click("#form-submit").await.expect("submit");
        b.wait_for(&row(name), SHOWN)
            .await
            .unwrap_or_else(|e| panic!("{name} is created from the form: {e}"));
        user.get(&format!("{PUB}/{collection}/{name}")).await.ok();
    }

    b.quit().await.expect("quit the browser");
    s.finish().await;
}

/// Keys only: Tab to an object of the picture and Enter shows its details; a VirtualNetwork
/// created with Tab to "Create", Enter, type, Tab, type, Enter; Escape closes a form.
async fn keyboard_only(b: &Browser, alpha: &Api) {
    // The picture's objects are reachable by Tab; Enter shows the focused one's details.
    b.click("#view-network").await.expect("network view");
    js(b, "document.activeElement.blur(); return true").await;
    let mut focused = Value::Null;
    for _ in 0..20 {
        b.press(keys::TAB).await.expect("tab");
        focused = js(
            b,
            "return document.activeElement.closest('#topology [data-id]')?.dataset.name || null",
        )
        .await;
        if !focused.is_null() {
            break;
        }
    }
    assert!(focused.is_string(), "Tab reaches the picture's objects");
    b.press(keys::ENTER).await.expect("enter");
    b.wait_for(
        &format!("document.getElementById('details-name')?.textContent === {focused}"),
        SHOWN,
    )
    .await
    .expect("Enter shows the focused object's details");

    table(b, "virtual_networks").await;
    js(
        b,
        "document.activeElement.blur(); window.scrollTo(0, 0); return true",
    )
    .await;
    let mut reached = false;
    for _ in 0..80 {
        b.press(keys::TAB).await.expect("tab");
        if js(b, "return document.activeElement.id").await == "obj-create" {
            reached = true;
            break;
        }
    }
    assert!(reached, "Tab reaches the create button");
    b.press(keys::ENTER).await.expect("enter");
    b.wait_for(
        "document.getElementById('form-dialog').open && document.activeElement.name === 'name'",
        SHOWN,
    )
    .await
    .expect("the form opens with the focus on its first field");
    b.press("kbd-net").await.unwrap();
    b.press(keys::TAB).await.unwrap();
    b.press("10.50.0.0/16").await.unwrap();
    b.press(keys::ENTER).await.unwrap();
    b.wait_for(&row("kbd-net"), SHOWN)
        .await
        .expect("created from the keyboard");
    alpha
        .get(&format!("{PUB}/virtual_networks/kbd-net"))
        .await
        .ok();
    // The focus is back on "Create": Enter opens the form again, Escape closes it.
    b.wait_for("document.activeElement.id === 'obj-create'", SHOWN)
        .await
        .expect("the focus returns");
    b.press(keys::ENTER).await.unwrap();
    b.wait_for("document.getElementById('form-dialog').open", SHOWN)
        .await
        .expect("opens again");
    b.press(keys::ESCAPE).await.unwrap();
    b.wait_for("!document.getElementById('form-dialog').open", SHOWN)
        .await
        .expect("Escape closes the form");
    let outline = js(
        b,
        "return getComputedStyle(document.activeElement).outlineStyle",
    )
    .await;
    assert_ne!(outline, "none", "the focus is visible");
}

/// At 800 px the main content does not overflow sideways, in either view.
async fn narrow_window(b: &Browser) {
    b.resize(800, 900).await.expect("resize");
    for view in ["network", "objects"] {
        b.click(&format!("#view-{view}")).await.expect("view");
        let sizes = b
            .wait_for(
                "window.innerWidth <= 800 && {page: [document.documentElement.scrollWidth, document.documentElement.clientWidth], \
                 main: [document.getElementById('main').scrollWidth, document.getElementById('main').clientWidth]}",
                SHOWN,
            )
            .await
            .expect("the narrow window");
        for part in ["page", "main"] {
            let (scroll, client) = (sizes[part][0].as_u64(), sizes[part][1].as_u64());
            assert!(
                scroll <= client,
                "{view}: {part} overflows sideways: {sizes}"
            );
        }
        screenshot(b, &format!("narrow-{view}.png")).await;
    }
}

/// The quota route answers the caller's own tenant, whatever tenant a tenant token names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_quota_is_the_callers_own() {
    let s = TestServer::sqlite().await;
    let alpha = s.tenant("alpha").await;
    let bravo = s.tenant("bravo").await;
    bravo.ready_subnet("more", "default", "10.0.9.0/24").await;
    s.anonymous()
        .get("/console/api/quota")
        .await
        .err(401, "UNAUTHENTICATED", &[]);
    let own = alpha.get("/console/api/quota").await.ok();
    assert_eq!(own["tenant"], "alpha");
    assert_eq!(
        own["usage"]["subnets"]["used"],
        json!(alpha.count_all("subnets").await),
        "{own}"
    );
    // Naming another tenant changes nothing for a tenant token.
    let asked = alpha.get("/console/api/quota?tenant=bravo").await.ok();
    assert_eq!(asked["tenant"], "alpha", "{asked}");
    assert_eq!(asked["usage"], own["usage"]);
    // The provider names the tenant.
    s.admin
        .get("/console/api/quota")
        .await
        .err(400, "INVALID_ARGUMENT", &["tenant"]);
    let theirs = s.admin.get("/console/api/quota?tenant=bravo").await.ok();
    assert_eq!(theirs["tenant"], "bravo");
    assert_eq!(
        theirs["usage"]["subnets"]["used"],
        json!(bravo.count_all("subnets").await),
        "{theirs}"
    );
    s.finish().await;
}
