//! Tenancy and authentication: isolation (NOT_FOUND, also inside references), roles, tokens,
//! names accepted wherever ids are.

use reqwest::Method;
use serde_json::json;

use crate::both_backends;
use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_are_isolated() {
    let s = TestServer::sqlite().await;
    let a = s.tenant("alpha").await;
    let b = s.tenant("beta").await;
    a.drop_defaults().await;
    b.drop_defaults().await;

    let bvn = b.ready_vn("bnet", "10.0.0.0/16").await;
    let bsub = b.ready_subnet("bsub", "bnet", "10.0.1.0/24").await;
    let bsg = b
        .create(
            "security_groups",
            json!({"metadata": {"name": "bsg"}, "spec": {"virtual_network": "bnet"}}),
        )
        .await;
    let beip = b.allocated_eip("beip", "").await;
    let bvn_id = id(&bvn);

    // A sees nothing of B.
    for col in [
        "virtual_networks",
        "subnets",
        "security_groups",
        "external_ips",
    ] {
        let l = a.list(col, &[]).await.ok();
        assert_eq!(
            (l["total"].as_i64(), l["size"].as_i64()),
            (Some(0), Some(0)),
            "{col}: {l}"
        );
    }
    for (col, obj, name) in [
        ("virtual_networks", &bvn, "bnet"),
        ("subnets", &bsub, "bsub"),
        ("security_groups", &bsg, "bsg"),
        ("external_ips", &beip, "beip"),
    ] {
        for key in [id(obj), name.to_string()] {
            let path = format!("{PUB}/{col}/{key}");
            a.get(&path)
                .await
                .err(404, "NOT_FOUND", &[&key, "does not exist"]);
            a.patch(&path, json!({"metadata": {"labels": {"owned": "yes"}}}))
                .await
                .err(404, "NOT_FOUND", &[&key]);
            a.delete(&path).await.err(404, "NOT_FOUND", &[&key]);
        }
    }
    // A filter naming B's object finds nothing either.
    let l = a
        .list(
            "subnets",
            &[(
                "filter",
                &format!("this.spec.virtual_network == \"{bvn_id}\""),
            )],
        )
        .await
        .ok();
    assert_eq!(l["total"], 0);

    // References into B are "does not exist", by id and by name.
    for key in [bvn_id.as_str(), "bnet"] {
        a.post(
            &format!("{PUB}/subnets"),
            json!({"spec": {"virtual_network": key, "ipv4_cidr": "10.0.2.0/24"}}),
        )
        .await
        .err(
            404,
            "NOT_FOUND",
            &["spec.virtual_network", key, "does not exist"],
        );
        a.post(
            &format!("{PUB}/security_groups"),
            json!({"spec": {"virtual_network": key}}),
        )
        .await
        .err(
            404,
            "NOT_FOUND",
            &["spec.virtual_network", "does not exist"],
        );
    }
    let avn = a.ready_vn("anet", "10.0.0.0/16").await;
    a.post(
        &format!("{PUB}/nat_gateways"),
        json!({"spec": {"virtual_network": "anet", "external_ip": id(&beip)}}),
    )
    .await
    .err(404, "NOT_FOUND", &["spec.external_ip", "does not exist"]);
    // Same names in another tenant are fine.
    let a_bnet = a.ready_vn("bnet", "10.0.0.0/16").await;
    assert_ne!(id(&a_bnet), bvn_id);
    assert_eq!(a.count("subnets").await, 0);
    assert_eq!(a.count("nat_gateways").await, 0);

    // B's objects are untouched.
    let again = b
        .get(&format!("{PUB}/virtual_networks/{bvn_id}"))
        .await
        .ok();
    assert_eq!(again, bvn);
    assert_eq!(
        b.get(&format!("{PUB}/subnets/bsub")).await.ok()["metadata"]["version"],
        bsub["metadata"]["version"]
    );
    assert_eq!(b.count("virtual_networks").await, 1);
    assert_eq!(a.count("virtual_networks").await, 2);

    // The tenant is taken from the token, never from the body.
    let vn = a
        .create("virtual_networks", json!({"metadata": {"name": "sneaky", "tenant": "beta"}, "spec": {"ipv4_cidr": "10.0.0.0/16"}}))
        .await;
    assert_eq!(vn["metadata"]["tenant"], "alpha");
    assert_eq!(b.count("virtual_networks").await, 1);
    let _ = avn;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_and_tokens() {
    let s = TestServer::sqlite().await;
    let admin = s.tenant("acme").await;
    let user = s.client_for("acme", "tenant-user").await;
    let vn = admin.ready_vn("net", "10.0.0.0/16").await;

    // tenant-user reads but never writes.
    assert_eq!(
        user.get(&format!("{PUB}/virtual_networks/net")).await.ok()["id"],
        vn["id"]
    );
    assert_eq!(user.count("virtual_networks").await, 1);
    user.post(
        &format!("{PUB}/virtual_networks"),
        json!({"spec": {"ipv4_cidr": "10.1.0.0/16"}}),
    )
    .await
    .err(403, "PERMISSION_DENIED", &["virtual_networks"]);
    user.patch(
        &format!("{PUB}/virtual_networks/net"),
        json!({"metadata": {"labels": {"a": "b"}}}),
    )
    .await
    .err(403, "PERMISSION_DENIED", &[]);
    user.delete(&format!("{PUB}/virtual_networks/net"))
        .await
        .err(403, "PERMISSION_DENIED", &[]);
    user.post(
        &format!("{PUB}/subnets"),
        json!({"spec": {"virtual_network": "net", "ipv4_cidr": "10.0.1.0/24"}}),
    )
    .await
    .err(403, "PERMISSION_DENIED", &[]);
    let after = admin.get(&format!("{PUB}/virtual_networks/net")).await.ok();
    assert_eq!(after, vn, "refused writes change nothing");
    assert_eq!(admin.count("virtual_networks").await, 1);
    assert_eq!(admin.count("subnets").await, 0);

    // Authentication failures are 401 with the JSON error body.
    let anon = s.anonymous();
    for (method, path, body, fragments) in [
        (
            Method::GET,
            format!("{PUB}/virtual_networks"),
            None,
            &["bearer token"][..],
        ),
        (
            Method::POST,
            format!("{PUB}/virtual_networks"),
            Some(json!({"spec": {"ipv4_cidr": "10.1.0.0/16"}})),
            &[],
        ),
        (Method::GET, format!("{PRIV}/network_classes"), None, &[]),
        (
            Method::POST,
            format!("{PRIV}/tokens"),
            Some(json!({"tenant": "acme", "role": "tenant-admin"})),
            &[],
        ),
    ] {
        anon.send(method, &path, body)
            .await
            .err(401, "UNAUTHENTICATED", fragments);
    }
    s.with_token("osac_not-a-real-token")
        .get(&format!("{PUB}/virtual_networks"))
        .await
        .err(401, "UNAUTHENTICATED", &["invalid token"]);
    let r = reqwest::Client::new()
        .get(format!("{}{PUB}/virtual_networks", s.url()))
        .header("authorization", "Basic YWRtaW46YWRtaW4=")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["code"], "UNAUTHENTICATED");
    assert!(
        body["message"].as_str().unwrap().contains("Bearer"),
        "{body}"
    );
    assert_eq!(admin.count("virtual_networks").await, 1);

    // Minted tokens survive a restart (they are kept in the store).
    let mut s = s;
    s.restart().await;
    assert_eq!(user.count("virtual_networks").await, 1);
    assert_eq!(
        admin.get(&format!("{PUB}/virtual_networks/net")).await.ok()["id"],
        vn["id"]
    );

    // A provider admin may act in a tenant's scope by naming the tenant.
    let p = s
        .admin
        .post(
            &format!("{PUB}/virtual_networks"),
            json!({"metadata": {"name": "ops"}, "spec": {"ipv4_cidr": "10.9.0.0/16"}}),
        )
        .await;
    p.err(400, "INVALID_ARGUMENT", &["metadata.tenant"]);
    s.admin
        .post(&format!("{PUB}/virtual_networks"), json!({"metadata": {"name": "ops", "tenant": "ghost"}, "spec": {"ipv4_cidr": "10.9.0.0/16"}}))
        .await
        .err(404, "NOT_FOUND", &["ghost"]);
    let ops = s
        .admin
        .post(&format!("{PUB}/virtual_networks"), json!({"metadata": {"name": "ops", "tenant": "acme"}, "spec": {"ipv4_cidr": "10.9.0.0/16"}}))
        .await
        .ok();
    assert_eq!(ops["metadata"]["tenant"], "acme");
    assert_eq!(admin.count("virtual_networks").await, 2);

    // Tenants: validated on update too; the name is the identity and never changes.
    for (body, fragments) in [
        (
            json!({"spec": {"domains": ["not a domain!"]}}),
            ["spec.domains[0]", "not a DNS domain"],
        ),
        (
            json!({"metadata": {"name": "acme2"}}),
            ["metadata.name", "identity"],
        ),
    ] {
        s.admin
            .patch(&format!("{PRIV}/tenants/acme"), body)
            .await
            .err(400, "INVALID_ARGUMENT", &fragments);
    }
    let tn = s
        .admin
        .patch(
            &format!("{PRIV}/tenants/acme"),
            json!({"spec": {"domains": ["acme.example.com"]}}),
        )
        .await
        .ok();
    assert_eq!(tn["spec"]["domains"], json!(["acme.example.com"]));
    assert_eq!(tn["metadata"]["name"], "acme");
    assert_eq!(admin.count("virtual_networks").await, 2);

    // Tenants: deletion refused while they have workloads; a deleted tenant's token creates
    // nothing.
    admin
        .create(
            "compute_instances",
            json!({"metadata": {"name": "vm"}, "spec": {"template": "small"}}),
        )
        .await;
    s.admin.delete(&format!("{PRIV}/tenants/acme")).await.err(
        412,
        "FAILED_PRECONDITION",
        &["Tenant 'acme'", "compute_instances", "'vm'"],
    );
    let gone = s.tenant("gone").await;
    s.admin.delete(&format!("{PRIV}/tenants/gone")).await.ok();
    s.admin.wait_gone(PRIV, "tenants", "gone").await;
    gone.post(
        &format!("{PUB}/virtual_networks"),
        json!({"spec": {"ipv4_cidr": "10.0.0.0/16"}}),
    )
    .await
    .err(401, "UNAUTHENTICATED", &["revoked"]);
    s.admin
        .post(
            &format!("{PRIV}/tenants"),
            json!({"metadata": {"name": "acme"}}),
        )
        .await
        .err(409, "ALREADY_EXISTS", &["acme"]);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_are_accepted_wherever_ids_are() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    let vn = t.ready_vn("net", "10.0.0.0/16").await;
    // Reference by name: stored as the id.
    let sn = t.create("subnets", json!({"metadata": {"name": "web"}, "spec": {"virtual_network": "net", "ipv4_cidr": "10.0.1.0/24"}})).await;
    assert_eq!(sn["spec"]["virtual_network"], vn["id"]);
    let sg = t
        .create(
            "security_groups",
            json!({"metadata": {"name": "sg"}, "spec": {"virtual_network": "net"}}),
        )
        .await;
    assert_eq!(sg["spec"]["virtual_network"], vn["id"]);
    let eip = t.allocated_eip("ip", "external-pool-1").await;
    assert_ne!(
        eip["spec"]["pool"], "external-pool-1",
        "pool stored by id: {eip}"
    );
    let nat = t.create("nat_gateways", json!({"metadata": {"name": "nat"}, "spec": {"virtual_network": "net", "external_ip": "ip"}})).await;
    assert_eq!(nat["spec"]["virtual_network"], vn["id"]);
    assert_eq!(nat["spec"]["external_ip"], eip["id"]);
    // get / update / delete by name.
    t.wait("subnets", "web", "SUBNET_STATE_READY").await;
    let got = t.get(&format!("{PUB}/subnets/web")).await.ok();
    assert_eq!(got["id"], sn["id"]);
    let upd = t
        .patch(
            &format!("{PUB}/subnets/web"),
            json!({"metadata": {"labels": {"tier": "web"}}}),
        )
        .await
        .ok();
    assert_eq!(upd["metadata"]["labels"]["tier"], "web");
    // Rename, then the new name works and the old one does not.
    let upd = t
        .patch(
            &format!("{PUB}/subnets/web"),
            json!({"metadata": {"name": "frontend"}}),
        )
        .await
        .ok();
    assert_eq!(upd["metadata"]["name"], "frontend");
    t.get(&format!("{PUB}/subnets/web"))
        .await
        .err(404, "NOT_FOUND", &["web"]);
    t.patch(
        &format!("{PUB}/subnets/frontend"),
        json!({"metadata": {"name": "Bad_Name"}}),
    )
    .await
    .err(400, "INVALID_ARGUMENT", &["metadata.name", "DNS label"]);
    t.delete(&format!("{PUB}/nat_gateways/nat")).await.ok();
    t.wait_gone(PUB, "nat_gateways", "nat").await;
    t.delete(&format!("{PUB}/subnets/frontend")).await.ok();
    t.wait_gone(PUB, "subnets", &id(&sn)).await;
    s.finish().await;
}

/// A create body for a role suffix.
type Body = fn(&str) -> serde_json::Value;

/// Every tenant kind × create/update/delete × tenant-admin/tenant-user: a tenant-user runs
/// workloads and their external addresses (also through `auto_external_ip_attachment`) on the
/// networks a tenant admin prepared; networks, subnets, security groups and NAT gateways are
/// the admin's (403 naming the collection, nothing changed). Both read everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_users_run_workloads_on_networks_tenant_admins_prepare() {
    let s = TestServer::sqlite().await;
    let admin = s.tenant("acme").await;
    let user = s.client_for("acme", "tenant-user").await;
    admin
        .wait_for_state(PUB, "subnets", "default-ipv4", "SUBNET_STATE_READY")
        .await;
    admin.ready_vn("plain", "10.9.0.0/16").await;
    admin.allocated_eip("nat-ip", "").await;
    // (collection, whether a tenant-user may write it, create body for role suffix `r`)
    let kinds: Vec<(&str, bool, Body)> = vec![
        (
            "virtual_networks",
            false,
            |r| json!({"metadata": {"name": format!("vn-{r}")}, "spec": {"ipv4_cidr": "10.50.0.0/16"}}),
        ),
        ("subnets", false, |r| {
            let third = if r == "admin" { 60 } else { 61 };
            json!({"metadata": {"name": format!("sn-{r}")}, "spec": {"virtual_network": "default", "ipv4_cidr": format!("10.0.{third}.0/24")}})
        }),
        (
            "security_groups",
            false,
            |r| json!({"metadata": {"name": format!("sg-{r}")}, "spec": {"virtual_network": "default"}}),
        ),
        (
            "nat_gateways",
            false,
            |r| json!({"metadata": {"name": format!("nat-{r}")}, "spec": {"virtual_network": "plain", "external_ip": "nat-ip"}}),
        ),
        (
            "external_ips",
            true,
            |r| json!({"metadata": {"name": format!("eip-{r}")}}),
        ),
        (
            "compute_instances",
            true,
            |r| json!({"metadata": {"name": format!("vm-{r}")}, "spec": {"template": "small"}}),
        ),
        (
            "baremetal_instances",
            true,
            |r| json!({"metadata": {"name": format!("bm-{r}")}, "spec": {"host_type": "bm-standard"}}),
        ),
        (
            "clusters",
            true,
            |r| json!({"metadata": {"name": format!("c-{r}")}, "spec": {"template": "ocp", "node_sets": {"workers": {"host_type": "bm-standard", "size": 1}}}}),
        ),
        (
            "external_ip_attachments",
            true,
            |r| json!({"metadata": {"name": format!("att-{r}")}, "spec": {"external_ip": format!("eip-{r}"), "compute_instance": format!("vm-{r}")}}),
        ),
    ];
    let denied = |resp: Resp, collection: &str| {
        resp.err(403, "PERMISSION_DENIED", &["tenant-user", collection]);
    };
    // Create: the user first (a refused create must not block the admin's), then the admin.
    for (collection, user_may, body) in &kinds {
        let before = admin.count(collection).await;
        let resp = user
            .post(&format!("{PUB}/{collection}"), body("user"))
            .await;
        if *user_may {
            resp.ok();
            assert_eq!(admin.count(collection).await, before + 1, "{collection}");
        } else {
            denied(resp, collection);
            assert_eq!(
                admin.count(collection).await,
                before,
                "{collection}: nothing stored"
            );
        }
        admin
            .post(&format!("{PUB}/{collection}"), body("admin"))
            .await
            .ok();
    }
    let auto = user
        .create(
            "compute_instances",
            json!({"metadata": {"name": "auto"}, "spec": {"template": "small", "auto_external_ip_attachment": true}}),
        )
        .await;
    let owned_by_auto = format!(
        "this.metadata.labels[\"osac.openshift.io/auto-provisioned-for\"] == \"{}\"",
        id(&auto)
    );
    let made = user
        .list("external_ips", &[("filter", owned_by_auto.as_str())])
        .await
        .ok();
    assert_eq!(
        made["total"].as_u64(),
        Some(1),
        "the user's single call made its ExternalIP: {made}"
    );

    // Read: both see every collection of the tenant.
    for (collection, _, _) in &kinds {
        assert!(user.count(collection).await >= 1, "{collection}");
    }
    // Update: the user its own objects where it may, the admin's elsewhere; the admin its own.
    let name = |collection: &str, r: &str| {
        let stem = match collection {
            "virtual_networks" => "vn",
            "subnets" => "sn",
            "security_groups" => "sg",
            "nat_gateways" => "nat",
            "external_ips" => "eip",
            "compute_instances" => "vm",
            "baremetal_instances" => "bm",
            "clusters" => "c",
            _ => "att",
        };
        format!("{stem}-{r}")
    };
    let touch = json!({"metadata": {"labels": {"touched": "yes"}}});
    for (collection, user_may, _) in &kinds {
        let target = name(collection, if *user_may { "user" } else { "admin" });
        let path = format!("{PUB}/{collection}/{target}");
        let before = admin.get(&path).await.ok();
        let resp = user.patch(&path, touch.clone()).await;
        if *user_may {
            assert_eq!(resp.ok()["metadata"]["labels"]["touched"], "yes");
        } else {
            denied(resp, collection);
            assert_eq!(
                admin.get(&path).await.ok(),
                before,
                "{collection}: unchanged"
            );
        }
        let own = format!("{PUB}/{collection}/{}", name(collection, "admin"));
        assert_eq!(
            admin.patch(&own, touch.clone()).await.ok()["metadata"]["labels"]["touched"],
            "yes"
        );
    }
    // Delete, in reverse order (attachments before their addresses and targets).
    for (collection, user_may, _) in kinds.iter().rev() {
        if *user_may {
            let path = format!("{PUB}/{collection}/{}", name(collection, "user"));
            let gone = user.get(&path).await.ok();
            user.delete(&path).await.ok();
            user.wait_gone(PUB, collection, &id(&gone)).await;
        } else {
            let path = format!("{PUB}/{collection}/{}", name(collection, "admin"));
            denied(user.delete(&path).await, collection);
            assert!(
                admin.get(&path).await.ok()["metadata"]
                    .get("deletion_timestamp")
                    .is_none(),
                "{collection}: not being deleted"
            );
        }
    }
    for (collection, _, _) in kinds.iter().rev() {
        let path = format!("{PUB}/{collection}/{}", name(collection, "admin"));
        let gone = admin.get(&path).await.ok();
        admin.delete(&path).await.ok();
        admin.wait_gone(PUB, collection, &id(&gone)).await;
    }
    s.finish().await;
}

both_backends!(workload_references_into_another_tenant_are_not_found);
/// A workload's subnet and security groups may be read from the server's record cache: a
/// tenant naming another tenant's (cached, READY, in use) subnet or group by id or by name
/// still gets NOT_FOUND, and nothing is created.
async fn workload_references_into_another_tenant_are_not_found(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let a = s.tenant("a").await;
    let b = s.tenant("b").await;
    b.ready_vn("bnet", "10.0.0.0/16").await;
    let bsub = id(&b.ready_subnet("bsub", "bnet", "10.0.1.0/24").await);
    let bsg = id(&b.ready_sg("bsg", "bnet").await);
    // B's workload makes its controllers and its create read B's subnet and group.
    b.running_vm("bvm", "bsub").await;
    a.ready_vn("anet", "10.0.0.0/16").await;
    let asub = id(&a.ready_subnet("asub", "anet", "10.0.1.0/24").await);
    let field = "spec.compute_network_attachments[0]";
    for key in [bsub.as_str(), "bsub"] {
        a.post(
            &format!("{PUB}/compute_instances"),
            vm_body("intruder", json!([{"subnet": key}])),
        )
        .await
        .err(
            404,
            "NOT_FOUND",
            &[&format!("{field}.subnet"), key, "does not exist"],
        );
    }
    for key in [bsg.as_str(), "bsg"] {
        a.post(
            &format!("{PUB}/compute_instances"),
            vm_body(
                "intruder",
                json!([{"subnet": asub, "security_groups": [key]}]),
            ),
        )
        .await
        .err(
            404,
            "NOT_FOUND",
            &[
                &format!("{field}.security_groups[0]"),
                key,
                "does not exist",
            ],
        );
    }
    assert_eq!(a.count("compute_instances").await, 0);
    s.finish().await;
}
