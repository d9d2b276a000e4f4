//! Per-tenant quotas: enforced atomically under concurrency on both databases, shown as
//! `status.usage`, counting auto-provisioned objects and security rules, and taking the
//! provider defaults from the server configuration.

use futures::future::join_all;
use osac_model::quota::{Quota, QuotaLimits};
use serde_json::{Value, json};

use crate::both_backends;
use crate::common::*;

both_backends!(concurrent_creates_never_exceed_a_quota);

/// The tenant `name` with `quotas` as its `spec.quotas`, and a tenant-admin client.
async fn tenant_with(s: &TestServer, name: &str, quotas: Value) -> Api {
    s.admin
        .post(
            &format!("{PRIV}/tenants"),
            json!({"metadata": {"name": name}, "spec": {"quotas": quotas}}),
        )
        .await
        .ok();
    s.client_for(name, "tenant-admin").await
}

/// `status.usage.<quota>` of a tenant as (used, limit).
async fn usage(s: &TestServer, tenant: &str, quota: &str) -> (u64, u64) {
    let t = s.admin.get(&format!("{PRIV}/tenants/{tenant}")).await.ok();
    let u = &t["status"]["usage"][quota];
    (
        u["used"]
            .as_u64()
            .unwrap_or_else(|| panic!("no used in {t}")),
        u["limit"]
            .as_u64()
            .unwrap_or_else(|| panic!("no limit in {t}")),
    )
}

/// 50 concurrent VirtualNetwork creates against a quota of 11, one of which the default
/// networking already uses: exactly 10 are created, 40 are RESOURCE_EXHAUSTED naming the quota,
/// its limit and its usage, and the store holds exactly 11.
async fn concurrent_creates_never_exceed_a_quota(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let t = tenant_with(&s, "acme", json!({"virtual_networks": 11})).await;
    assert_eq!(usage(&s, "acme", "virtual_networks").await, (1, 11));
    let results = join_all((0..50).map(|i| {
        let t = t.clone();
        let body = json!({"metadata": {"name": format!("vn-{i}")}, "spec": {"ipv4_cidr": format!("10.{i}.0.0/16")}});
        async move { t.post(&format!("{PUB}/virtual_networks"), body).await }
    }))
    .await;
    let mut created = Vec::new();
    let mut refused = 0;
    for r in &results {
        match r.status {
            200 => created.push(
                r.body["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            ),
            429 => {
                r.err(
                    429,
                    "RESOURCE_EXHAUSTED",
                    &[
                        "quota virtual_networks of tenant 'acme' exceeded",
                        "limit 11",
                        "in use 11",
                    ],
                );
                refused += 1;
            }
            other => panic!("unexpected {other}: {}", r.text),
        }
    }
    assert_eq!((created.len(), refused), (10, 40));
    assert_eq!(t.count_all("virtual_networks").await, 11);
    assert_eq!(usage(&s, "acme", "virtual_networks").await, (11, 11));
    // The refusals are events of the tenant, not pool exhaustion.
    let events = t
        .list(
            "events",
            &[("filter", "this.spec.reason == \"QuotaExceeded\"")],
        )
        .await
        .ok();
    assert!(events["total"].as_i64().unwrap_or(0) >= 1, "{events}");
    // Freeing one makes room for exactly one.
    let freed = &created[0];
    t.delete(&format!("{PUB}/virtual_networks/{freed}"))
        .await
        .ok();
    t.wait_gone(PUB, "virtual_networks", freed).await;
    t.post(
        &format!("{PUB}/virtual_networks"),
        json!({"metadata": {"name": "again"}, "spec": {"ipv4_cidr": "10.200.0.0/16"}}),
    )
    .await
    .ok();
    t.post(
        &format!("{PUB}/virtual_networks"),
        json!({"metadata": {"name": "over"}, "spec": {"ipv4_cidr": "10.201.0.0/16"}}),
    )
    .await
    .err(429, "RESOURCE_EXHAUSTED", &["virtual_networks", "limit 11"]);
    s.finish().await;
}

/// `status.usage` shows every quota with the default networking counted, and a limit the
/// tenant sets replaces the default; an update changes it; a bad quota is INVALID_ARGUMENT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_and_quota_updates() {
    let s = TestServer::sqlite().await;
    tenant_with(&s, "acme", json!({"subnets": 5})).await;
    for q in Quota::ALL {
        let (used, limit) = usage(&s, "acme", q.name()).await;
        let want_limit = if q == Quota::Subnets {
            5
        } else {
            u64::from(q.default_limit())
        };
        assert_eq!(limit, want_limit, "{}", q.name());
        let want_used = match q {
            Quota::VirtualNetworks | Quota::SecurityGroups | Quota::ExternalIps => 1,
            Quota::Subnets => 2,
            _ => used,
        };
        assert_eq!(used, want_used, "{}", q.name());
    }
    // The list shows usage too.
    let list = s.admin.get(&format!("{PRIV}/tenants")).await.ok();
    assert_eq!(list["items"][0]["status"]["usage"]["subnets"]["limit"], 5);
    s.admin
        .patch(
            &format!("{PRIV}/tenants/acme"),
            json!({"spec": {"quotas": {"subnets": 2, "clusters": 0}}}),
        )
        .await
        .ok();
    assert_eq!(usage(&s, "acme", "subnets").await, (2, 2));
    assert_eq!(usage(&s, "acme", "clusters").await, (0, 0));
    s.admin
        .patch(
            &format!("{PRIV}/tenants/acme"),
            json!({"spec": {"quotas": {"subnets": -1}}}),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.quotas.subnets"]);
    s.admin
        .patch(
            &format!("{PRIV}/tenants/acme"),
            json!({"spec": {"quotas": {"networks": 1}}}),
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["spec.quotas", "networks"]);
    // At the limit: a subnet create is refused and nothing is stored.
    let t = s.client_for("acme", "tenant-admin").await;
    t.post(
        &format!("{PUB}/subnets"),
        json!({"metadata": {"name": "x"}, "spec": {"virtual_network": "default", "ipv4_cidr": "10.0.200.0/24"}}),
    )
    .await
    .err(
        429,
        "RESOURCE_EXHAUSTED",
        &["quota subnets of tenant 'acme' exceeded: limit 2, in use 2"],
    );
    assert_eq!(t.count_all("subnets").await, 2);
    s.finish().await;
}

/// Security rules are counted over the tenant's groups, on create and on update; an update
/// that removes rules is always accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_group_rules_quota() {
    let s = TestServer::sqlite().await;
    tenant_with(&s, "acme", json!({})).await;
    let (base, _) = usage(&s, "acme", "security_group_rules").await;
    s.admin
        .patch(
            &format!("{PRIV}/tenants/acme"),
            json!({"spec": {"quotas": {"security_group_rules": base + 3}}}),
        )
        .await
        .ok();
    let t = s.client_for("acme", "tenant-admin").await;
    let rule = |port: u32| json!({"protocol": "PROTOCOL_TCP", "port_from": port, "port_to": port, "ipv4_cidr": "0.0.0.0/0"});
    t.post(
        &format!("{PUB}/security_groups"),
        json!({"metadata": {"name": "a"}, "spec": {"virtual_network": "default", "ingress": [rule(1), rule(2)]}}),
    )
    .await
    .ok();
    let msg = t
        .post(
            &format!("{PUB}/security_groups"),
            json!({"metadata": {"name": "b"}, "spec": {"virtual_network": "default", "ingress": [rule(3)], "egress": [rule(4)]}}),
        )
        .await
        .err(
            429,
            "RESOURCE_EXHAUSTED",
            &["quota security_group_rules", "this request brings 2 rules"],
        );
    assert!(
        msg.contains(&format!("limit {}, in use {}", base + 3, base + 2)),
        "{msg}"
    );
    assert_eq!(t.count("security_groups").await, 1);
    // Update: growing group `a` to 4 rules goes over, to 3 fits, back to 1 always fits.
    t.patch(
        &format!("{PUB}/security_groups/a"),
        json!({"spec": {"ingress": [rule(1), rule(2), rule(3), rule(4)]}}),
    )
    .await
    .err(429, "RESOURCE_EXHAUSTED", &["security_group_rules"]);
    t.patch(
        &format!("{PUB}/security_groups/a"),
        json!({"spec": {"ingress": [rule(1), rule(2), rule(3)]}}),
    )
    .await
    .ok();
    s.admin
        .patch(
            &format!("{PRIV}/tenants/acme"),
            json!({"spec": {"quotas": {"security_group_rules": 0}}}),
        )
        .await
        .ok();
    t.patch(
        &format!("{PUB}/security_groups/a"),
        json!({"spec": {"ingress": [rule(1)]}}),
    )
    .await
    .ok();
    // A group without rules needs no rule quota.
    t.post(
        &format!("{PUB}/security_groups"),
        json!({"metadata": {"name": "empty"}, "spec": {"virtual_network": "default"}}),
    )
    .await
    .ok();
    s.finish().await;
}

/// Auto-provisioned ExternalIPs count: a workload asking for one is refused when the tenant's
/// external_ips quota is used up (nothing stored), and onboarding fails when the default NAT
/// address does not fit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_provisioned_external_ips_count() {
    let s = TestServer::sqlite().await;
    let t = tenant_with(&s, "acme", json!({"external_ips": 1})).await;
    assert_eq!(usage(&s, "acme", "external_ips").await, (1, 1));
    let mut vm = vm_body(
        "web",
        json!([{"subnet": "default-ipv4", "security_groups": ["default"]}]),
    );
    vm["spec"]["auto_external_ip_attachment"] = json!(true);
    t.post(&format!("{PUB}/compute_instances"), vm).await.err(
        429,
        "RESOURCE_EXHAUSTED",
        &["quota external_ips", "limit 1"],
    );
    assert_eq!(t.count_all("compute_instances").await, 0);
    assert_eq!(t.count_all("external_ips").await, 1);
    // Onboarding makes a NAT address: a tenant allowed none cannot be created.
    s.admin
        .post(
            &format!("{PRIV}/tenants"),
            json!({"metadata": {"name": "tiny"}, "spec": {"quotas": {"external_ips": 0}}}),
        )
        .await
        .err(
            429,
            "RESOURCE_EXHAUSTED",
            &["quota external_ips of tenant 'tiny'"],
        );
    s.admin
        .get(&format!("{PRIV}/tenants/tiny"))
        .await
        .err(404, "NOT_FOUND", &[]);
    s.finish().await;
}

/// The server's default quotas apply to every tenant that sets none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_default_quotas() {
    let mut defaults = QuotaLimits::default();
    defaults
        .apply_overrides("test", "security_groups=2,clusters=unlimited")
        .expect("defaults");
    let s = TestServer::start_with_limits(
        Backend::Sqlite,
        osac_server::LimitsConfig {
            default_quotas: defaults,
            ..Default::default()
        },
    )
    .await
    .expect("sqlite");
    let t = s.tenant("acme").await;
    assert_eq!(usage(&s, "acme", "security_groups").await, (1, 2));
    assert_eq!(
        usage(&s, "acme", "clusters").await,
        (0, u64::from(u32::MAX))
    );
    t.post(
        &format!("{PUB}/security_groups"),
        json!({"metadata": {"name": "one"}, "spec": {"virtual_network": "default"}}),
    )
    .await
    .ok();
    t.post(
        &format!("{PUB}/security_groups"),
        json!({"metadata": {"name": "two"}, "spec": {"virtual_network": "default"}}),
    )
    .await
    .err(
        429,
        "RESOURCE_EXHAUSTED",
        &["security_groups", "limit 2", "in use 2"],
    );
    s.finish().await;
}
