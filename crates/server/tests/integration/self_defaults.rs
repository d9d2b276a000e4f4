//! A tenant without default networking (onboarded before it existed) makes its own objects its
//! defaults: a tenant-admin labels its VirtualNetwork, Subnet and SecurityGroup
//! `osac.openshift.io/default: "true"` — at most one per kind (and IP family for subnets), the
//! value "true" only, other reserved keys still refused — and workloads created without
//! attachments then use them.

use serde_json::{Value, json};

use crate::both_backends;
use crate::common::*;

const DEFAULT: &str = "osac.openshift.io/default";

fn labelled(name: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {DEFAULT: "true"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_admin_labels_its_own_defaults_and_workloads_use_them() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    t.drop_defaults().await;
    let vm = |name: &str| json!({"metadata": {"name": name}, "spec": {"template": "small"}});
    t.post(&format!("{PUB}/compute_instances"), vm("early"))
        .await
        .err(412, "FAILED_PRECONDITION", &["No default networking"]);

    // The network is labelled after creation, the subnet at creation.
    let vn = t.ready_vn("mine", "10.5.0.0/16").await;
    t.patch(
        &format!("{PUB}/virtual_networks/mine"),
        json!({"metadata": {"labels": {DEFAULT: "true"}}}),
    )
    .await
    .ok();
    let mut body = labelled("mine-v4");
    body["spec"] = json!({"virtual_network": id(&vn), "ipv4_cidr": "10.5.1.0/24"});
    let subnet = t.create("subnets", body).await;
    assert_eq!(subnet["metadata"]["labels"][DEFAULT], "true", "{subnet}");
    let sg = t.ready_sg("mine-sg", "mine").await;

    // A second default of a kind (and IPv4 family) is refused, naming the existing one.
    let mut second = labelled("other-v4");
    second["spec"] = json!({"virtual_network": "mine", "ipv4_cidr": "10.5.2.0/24"});
    t.post(&format!("{PUB}/subnets"), second).await.err(
        412,
        "FAILED_PRECONDITION",
        &[DEFAULT, "Subnet 'mine-v4' is already the default IPv4"],
    );
    let other_vn = t.ready_vn("other", "10.6.0.0/16").await;
    t.patch(
        &format!("{PUB}/virtual_networks/{}", id(&other_vn)),
        json!({"metadata": {"labels": {DEFAULT: "true"}}}),
    )
    .await
    .err(
        412,
        "FAILED_PRECONDITION",
        &["VirtualNetwork 'mine' is already the default"],
    );
    // The value is "true"; other reserved keys stay the server's; other kinds may not.
    t.patch(
        &format!("{PUB}/security_groups/mine-sg"),
        json!({"metadata": {"labels": {DEFAULT: "yes"}}}),
    )
    .await
    .err(
        400,
        "INVALID_ARGUMENT",
        &[DEFAULT, "the only value is \"true\""],
    );
    t.patch(
        &format!("{PUB}/security_groups/mine-sg"),
        json!({"metadata": {"labels": {"osac.openshift.io/orphaned": "true"}}}),
    )
    .await
    .err(400, "INVALID_ARGUMENT", &["reserved for the server"]);
    let mut eip = labelled("my-ip");
    eip["spec"] = json!({});
    t.post(&format!("{PUB}/external_ips"), eip).await.err(
        400,
        "INVALID_ARGUMENT",
        &["reserved for the server"],
    );
    // A tenant-user may not.
    let user = s.client_for("acme", "tenant-user").await;
    let r = user
        .patch(
            &format!("{PUB}/security_groups/mine-sg"),
            json!({"metadata": {"labels": {DEFAULT: "true"}}}),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    t.patch(
        &format!("{PUB}/security_groups/mine-sg"),
        json!({"metadata": {"labels": {DEFAULT: "true"}}}),
    )
    .await
    .ok();

    // A workload without attachments now gets the tenant's own defaults.
    let made = t.create("compute_instances", vm("later")).await;
    let att = &made["spec"]["compute_network_attachments"][0];
    assert_eq!(att["subnet"], subnet["id"], "{made}");
    assert_eq!(att["security_groups"], json!([sg["id"]]), "{made}");
    s.finish().await;
}

both_backends!(concurrent_labelling_makes_one_default);
async fn concurrent_labelling_makes_one_default(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let t = s.tenant("acme").await;
    t.drop_defaults().await;
    t.ready_vn("net", "10.0.0.0/16").await;
    let group = |name: &str| {
        let mut b = labelled(name);
        b["spec"] = json!({"virtual_network": "net"});
        b
    };
    let path = format!("{PUB}/security_groups");
    // Eight writers at once: exactly one wins, however they interleave.
    let posts = (0..8).map(|i| {
        let (t, path, body) = (&t, &path, group(&format!("g{i}")));
        async move { t.post(path, body).await }
    });
    let answers = futures::future::join_all(posts).await;
    let mut statuses: Vec<u16> = answers.iter().map(|r| r.status).collect();
    statuses.sort();
    let texts: Vec<&str> = answers.iter().map(|r| r.text.as_str()).collect();
    assert_eq!(
        statuses,
        [200, 412, 412, 412, 412, 412, 412, 412],
        "{texts:?}"
    );
    let defaults = t
        .list(
            "security_groups",
            &[(
                "filter",
                &format!("this.metadata.labels[\"{DEFAULT}\"] == \"true\""),
            )],
        )
        .await
        .ok();
    assert_eq!(defaults["total"], 1, "{defaults}");
    s.finish().await;
}
