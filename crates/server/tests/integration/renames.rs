//! Names can change; relationships never do. A reference given by name is stored as the id it
//! resolved to, so renaming an object moves nothing that points to it, the old name is free at
//! once, and a tenant (whose name is its identity) cannot be renamed.

use serde_json::json;

use crate::both_backends;
use crate::common::*;

both_backends!(a_rename_keeps_every_reference_and_frees_the_old_name);

async fn a_rename_keeps_every_reference_and_frees_the_old_name(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let t = s.tenant("acme").await;
    let vn = t.ready_vn("net", "10.0.0.0/16").await;
    let subnet = t
        .create(
            "subnets",
            json!({"metadata": {"name": "s1"}, "spec": {"virtual_network": "net", "ipv4_cidr": "10.0.1.0/24"}}),
        )
        .await;
    assert_eq!(subnet["spec"]["virtual_network"], vn["id"]);

    let renamed = t
        .patch(
            &format!("{PUB}/virtual_networks/{}", id(&vn)),
            json!({"metadata": {"name": "net-renamed"}}),
        )
        .await
        .ok();
    assert_eq!(renamed["metadata"]["name"], "net-renamed");
    assert_eq!(renamed["id"], vn["id"]);

    // The subnet still points at the same network, found under its new name.
    let again = t.get(&format!("{PUB}/subnets/{}", id(&subnet))).await.ok();
    assert_eq!(again["spec"]["virtual_network"], vn["id"]);
    let by_new_name = t
        .get(&format!("{PUB}/virtual_networks/net-renamed"))
        .await
        .ok();
    assert_eq!(by_new_name["id"], vn["id"]);

    // The old name is free: a new network takes it, and a new reference by that name goes to
    // the new network, never to the renamed one.
    let other = t.ready_vn("net", "10.1.0.0/16").await;
    assert_ne!(other["id"], vn["id"]);
    let s2 = t
        .create(
            "subnets",
            json!({"metadata": {"name": "s2"}, "spec": {"virtual_network": "net", "ipv4_cidr": "10.1.1.0/24"}}),
        )
        .await;
    assert_eq!(s2["spec"]["virtual_network"], other["id"]);

    // A tenant's name is its identity.
    let tenant = s.admin.get(&format!("{PRIV}/tenants/acme")).await.ok();
    let refused = s
        .admin
        .patch(
            &format!("{PRIV}/tenants/{}", id(&tenant)),
            json!({"metadata": {"name": "acme-2"}}),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.text.contains("cannot change"), "{}", refused.text);
}
