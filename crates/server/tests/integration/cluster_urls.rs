//! A cluster of a tenant with a DNS domain shows its API and console URLs under it, and the DNS
//! records those names need, pointing at its external addresses.

use serde_json::json;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_shows_urls_and_dns_records_under_its_tenants_domain() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    s.admin
        .patch(
            &format!("{PRIV}/tenants/acme"),
            json!({"spec": {"domains": ["example.com", "other.example"]}}),
        )
        .await
        .ok();
    t.ready_vn("net", "10.0.0.0/16").await;
    t.ready_subnet("a", "net", "10.0.1.0/24").await;
    let api_ip = t.allocated_eip("api-ip", "").await;
    let ingress_ip = t.allocated_eip("ingress-ip", "").await;
    t.create("clusters", cluster_body("c1", "a", json!([]), 1))
        .await;
    for (name, eip, endpoint) in [
        ("api", "api-ip", "EXTERNAL_IP_ATTACHMENT_ENDPOINT_API"),
        (
            "ingress",
            "ingress-ip",
            "EXTERNAL_IP_ATTACHMENT_ENDPOINT_INGRESS",
        ),
    ] {
        t.create(
            "external_ip_attachments",
            json!({"metadata": {"name": name}, "spec": {"external_ip": eip, "cluster": "c1",
                "target_endpoint": endpoint}}),
        )
        .await;
    }
    let (api, ingress) = (
        api_ip["status"]["address"].clone(),
        ingress_ip["status"]["address"].clone(),
    );
    let c = t
        .wait_until(
            &format!("{PUB}/clusters/c1"),
            "both external addresses",
            |o| {
                o["status"]["external_ip_address"] == api
                    && o["status"]["ingress_external_ip_address"] == ingress
            },
        )
        .await;
    let status = &c["status"];
    assert_eq!(status["api_url"], "https://api.c1.example.com:6443", "{c}");
    assert_eq!(
        status["console_url"], "https://console-openshift-console.apps.c1.example.com",
        "{c}"
    );
    assert_eq!(
        status["dns_records"],
        json!([
            {"name": "api.c1.example.com", "endpoint": "EXTERNAL_IP_ATTACHMENT_ENDPOINT_API",
             "address": api},
            {"name": "*.apps.c1.example.com", "endpoint": "EXTERNAL_IP_ATTACHMENT_ENDPOINT_INGRESS",
             "address": ingress},
        ]),
        "{c}"
    );
    s.finish().await;
}
