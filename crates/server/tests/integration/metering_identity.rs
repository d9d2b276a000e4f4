//! Usage belongs to a tenant's identity, not its name. Tenant `acme` accrues usage (a READY
//! VirtualNetwork, an ExternalIP used by a NAT gateway, bytes through the gateway), is deleted
//! and created again: the new `acme` reads none of the old one's usage over a period covering
//! both lives, while the provider reads the old usage by the old tenant's id.
//!
//! Rule under attack: the usage query selects intervals and bandwidth rows by the tenant's id
//! (`tenant_id = $3` in `meter_intervals_between` and `traffic_usage`, the caller's tenant
//! resolved to its current id in `usage::resolve`). With the selection by the tenant's name
//! instead, this test fails at "the new acme reads the old acme's usage".

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use osac_backends::{NatPathKind, RoleManager};
use serde_json::{Value, json};

use crate::both_backends;
use crate::common::*;

both_backends!(a_new_tenant_of_an_old_name_reads_none_of_its_usage);

fn rfc(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// One bandwidth sweep of the dev sim fabric, as the controllers' periodic one does.
pub async fn sweep(s: &TestServer) {
    let Some(RoleManager::Fabric(m)) = s.server().registry.get("sim-fabric") else {
        panic!("the dev registry has the sim fabric");
    };
    osac_controller::traffic::sweep(s.store().as_ref(), m.as_ref(), &mut HashMap::new())
        .await
        .expect("sweep");
}

/// The objects of a usage answer grouped by `object`, and its byte totals.
fn objects_and_bytes(answer: &Value) -> (HashSet<String>, i64, i64) {
    let mut objects = HashSet::new();
    let (mut ingress, mut egress) = (0, 0);
    for g in answer["groups"].as_array().expect("groups") {
        if let Some(o) = g["dimensions"]["object"].as_str() {
            objects.insert(o.to_string());
        }
        let n = |f: &str| {
            g[f].as_str()
                .and_then(|v| v.parse::<i64>().ok())
                .expect("int64")
        };
        ingress += n("ingress_bytes");
        egress += n("egress_bytes");
    }
    (objects, ingress, egress)
}

async fn a_new_tenant_of_an_old_name_reads_none_of_its_usage(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    // Bytes are kept per minute, selected by the minute's start: the period starts before
    // the minute the traffic is read in.
    let start = Utc::now() - chrono::Duration::minutes(2);
    let old = s.tenant("acme").await;
    let old_id = id(&s.admin.get(&format!("{PRIV}/tenants/acme")).await.ok());
    let vn = old.ready_vn("old-net", "10.50.0.0/16").await;
    let eip = old.allocated_eip("old-ip", "").await;
    let gw = old
        .create(
            "nat_gateways",
            json!({"metadata": {"name": "old-gw"},
                   "spec": {"virtual_network": id(&vn), "external_ip": id(&eip)}}),
        )
        .await;
    old.wait("nat_gateways", &id(&gw), "NAT_GATEWAY_STATE_READY")
        .await;
    assert!(
        s.sim_fabric()
            .inject_traffic(NatPathKind::NatGateway, &id(&gw), 4000, 400),
        "the gateway's path exists in the sim fabric"
    );
    sweep(&s).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let made: HashSet<String> = [&vn, &eip, &gw].iter().map(|o| id(o)).collect();
    let q =
        |to: DateTime<Utc>| format!("/usage?from={}&to={}&group_by=object", rfc(start), rfc(to));
    let mine = old.get(&format!("{PUB}{}", q(Utc::now()))).await.ok();
    // Everything the old acme accrued: what it made and its default networking.
    let (old_objects, ingress, _) = objects_and_bytes(&mine);
    assert!(
        made.is_subset(&old_objects),
        "the old acme reads its usage: {mine}"
    );
    assert_eq!(ingress, 4000, "{mine}");

    s.admin.delete(&format!("{PRIV}/tenants/acme")).await.ok();
    s.admin.wait_gone(PRIV, "tenants", "acme").await;
    let new = s.tenant("acme").await;
    let new_id = id(&s.admin.get(&format!("{PRIV}/tenants/acme")).await.ok());
    assert_ne!(new_id, old_id, "a new tenant");
    // Let the new tenant's default networking accrue too.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let end = Utc::now();

    // The new acme, over both lives, with and without naming itself.
    for path in [
        format!("{PUB}{}", q(end)),
        format!("{PUB}{}&tenant=acme", q(end)),
        format!("{PUB}{}&meter=bandwidth", q(end)),
    ] {
        let theirs = new.get(&path).await.ok();
        let (seen, ingress, egress) = objects_and_bytes(&theirs);
        let leaked: Vec<&String> = seen.intersection(&old_objects).collect();
        assert!(
            leaked.is_empty() && ingress == 0 && egress == 0,
            "the new acme reads the old acme's usage ({path}): {theirs}"
        );
        assert!(
            !theirs.to_string().contains(&old_id),
            "the new acme reads the old acme's id: {theirs}"
        );
    }
    // Another tenant's id is refused on the tenant surface.
    new.get(&format!("{PUB}{}&tenant={old_id}", q(end)))
        .await
        .err(403, "PERMISSION_DENIED", &["tenant"]);

    // The provider: the name is the tenant of that name now; the old tenant by its id.
    let by_name = s
        .admin
        .get(&format!("{PRIV}{}&tenant=acme", q(end)))
        .await
        .ok();
    let (seen, ingress, _) = objects_and_bytes(&by_name);
    assert!(seen.is_disjoint(&old_objects) && ingress == 0, "{by_name}");
    let by_old_id = s
        .admin
        .get(&format!("{PRIV}{}&tenant={old_id}", q(end)))
        .await
        .ok();
    let (seen, ingress, egress) = objects_and_bytes(&by_old_id);
    assert!(
        old_objects.is_subset(&seen),
        "the old tenant's usage by its id: {by_old_id}"
    );
    assert_eq!((ingress, egress), (4000, 400), "{by_old_id}");
    let tenants = s
        .admin
        .get(&format!(
            "{PRIV}/usage?from={}&to={}&group_by=tenant_id&tenant={old_id}",
            rfc(start),
            rfc(end)
        ))
        .await
        .ok();
    assert!(
        tenants["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .all(|g| g["dimensions"]["tenant_id"] == json!(old_id)),
        "{tenants}"
    );
    // A name of no tenant answers empty usage, as a list filter matching nothing does.
    let nobody = s
        .admin
        .get(&format!("{PRIV}{}&tenant=nobody", q(end)))
        .await
        .ok();
    assert_eq!(nobody["groups"], json!([]), "{nobody}");
    s.finish().await;
}
