//! GET and LIST replies carried through from the stored JSON text: a hostile tenant reads
//! nothing of another tenant's objects — not by id, not by name, and in no list page, with or
//! without filters, orders and paging.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::both_backends;
use crate::common::*;

/// Tenant collections the victim has objects in (its onboarding defaults and a labelled
/// network).
const COLLECTIONS: [&str; 5] = [
    "virtual_networks",
    "subnets",
    "security_groups",
    "external_ips",
    "nat_gateways",
];

async fn hostile_tenant_reads_nothing_of_another(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let victim = s.tenant("victim").await;
    let mallory = s.tenant("mallory").await;
    let mallory_user = s.client_for("mallory", "tenant-user").await;
    let labelled = |name: &str, cidr: &str| json!({"metadata": {"name": name, "labels": {"team": "red"}}, "spec": {"ipv4_cidr": cidr}});
    let victim_net = victim
        .create("virtual_networks", labelled("vnet", "10.50.0.0/16"))
        .await;
    let mallory_net = mallory
        .create("virtual_networks", labelled("mnet", "10.60.0.0/16"))
        .await;

    // The victim's objects, as the victim (and the provider) reads them.
    let mut victim_objects: Vec<(String, String, String)> = Vec::new();
    for col in COLLECTIONS {
        for obj in items(&victim.list(col, &[("limit", "1000")]).await.ok()) {
            assert_eq!(obj["metadata"]["tenant"], "victim", "{obj}");
            let name = obj["metadata"]["name"].as_str().unwrap_or_default();
            s.admin.get(&format!("{PUB}/{col}/{}", id(&obj))).await.ok();
            victim_objects.push((col.to_string(), id(&obj), name.to_string()));
        }
    }
    assert!(
        victim_objects.len() >= 6,
        "the victim has objects in every collection: {victim_objects:?}"
    );
    let victim_ids: BTreeSet<&str> = victim_objects.iter().map(|(_, i, _)| i.as_str()).collect();

    for client in [&mallory, &mallory_user] {
        // By id: NOT_FOUND, like an id that does not exist.
        for (col, obj_id, name) in &victim_objects {
            client.get(&format!("{PUB}/{col}/{obj_id}")).await.err(
                404,
                "NOT_FOUND",
                &[obj_id, "does not exist"],
            );
            // By name: NOT_FOUND, or mallory's own object of that name (the defaults).
            let r = client.get(&format!("{PUB}/{col}/{name}")).await;
            if r.status == 200 {
                assert_eq!(
                    r.body["metadata"]["tenant"], "mallory",
                    "{col}/{name}: {}",
                    r.text
                );
                assert!(!victim_ids.contains(id(&r.body).as_str()), "{col}/{name}");
            } else {
                r.err(404, "NOT_FOUND", &[name]);
            }
        }

        // In no list: plain, filtered (on labels, on the victim's ids and names), ordered,
        // and page by page.
        for col in COLLECTIONS {
            let mut queries: Vec<Vec<(String, String)>> = vec![
                vec![],
                vec![(
                    "filter".into(),
                    "this.metadata.labels.team == \"red\"".into(),
                )],
                vec![("order".into(), "this.metadata.name desc".into())],
                vec![("filter".into(), NOT_DEFAULT.into())],
            ];
            for (c, obj_id, name) in &victim_objects {
                if c == col {
                    queries.push(vec![("filter".into(), format!("this.id == \"{obj_id}\""))]);
                    queries.push(vec![(
                        "filter".into(),
                        format!("this.metadata.name == \"{name}\""),
                    )]);
                }
            }
            let total = client.list(col, &[]).await.ok()["total"]
                .as_i64()
                .expect("total");
            for offset in 0..=total {
                queries.push(vec![
                    ("offset".into(), offset.to_string()),
                    ("limit".into(), "1".into()),
                ]);
            }
            for q in &queries {
                let params: Vec<(&str, &str)> =
                    q.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                let page = client.list(col, &params).await.ok();
                for obj in items(&page) {
                    assert_eq!(obj["metadata"]["tenant"], "mallory", "{col} {q:?}: {obj}");
                    assert!(
                        !victim_ids.contains(id(&obj).as_str()),
                        "{col} {q:?}: {obj}"
                    );
                }
                assert!(page["total"].as_i64() <= Some(total), "{col} {q:?}: {page}");
            }
        }

        // Mallory's own labelled network is found: the filters above did filter.
        let red = client
            .list(
                "virtual_networks",
                &[("filter", "this.metadata.labels.team == \"red\"")],
            )
            .await
            .ok();
        let red: Vec<String> = items(&red).iter().map(id).collect();
        assert_eq!(red, vec![id(&mallory_net)]);
        client
            .get(&format!("{PUB}/virtual_networks/vnet"))
            .await
            .err(404, "NOT_FOUND", &["vnet"]);
    }
    // The victim still reads its network, by id and by name.
    for key in [id(&victim_net), "vnet".to_string()] {
        let got = victim
            .get(&format!("{PUB}/virtual_networks/{key}"))
            .await
            .ok();
        assert_eq!(id(&got), id(&victim_net));
    }
    s.finish().await;
}

fn items(page: &Value) -> Vec<Value> {
    page["items"].as_array().cloned().unwrap_or_default()
}

both_backends!(hostile_tenant_reads_nothing_of_another);
