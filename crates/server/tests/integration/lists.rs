//! Lists: paging, filters translated to SQL (both databases), order, bad input.

use serde_json::{Value, json};

use crate::both_backends;
use crate::common::*;

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            i["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

both_backends!(lists_filters_and_order);

async fn lists_filters_and_order(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    let t = s.tenant("acme").await;
    t.drop_defaults().await;
    let other = s.tenant("other").await;
    t.ready_vn("net", "10.0.0.0/16").await;
    other.ready_vn("net", "10.0.0.0/16").await;
    // 6 subnets: web-0..2 (tier=web), db-0..2 (tier=db), all READY; then db-2 is deleted with a
    // failing undo, so it stays DELETING.
    let mut ids = Vec::new();
    for (i, name) in ["web-0", "web-1", "web-2", "db-0", "db-1", "db-2"]
        .iter()
        .enumerate()
    {
        let tier = if name.starts_with("web") { "web" } else { "db" };
        let sn = t
            .create(
                "subnets",
                json!({"metadata": {"name": name, "labels": {"tier": tier, "idx": i.to_string()}}, "spec": {"virtual_network": "net", "ipv4_cidr": format!("10.0.{i}.0/24")}}),
            )
            .await;
        ids.push(id(&sn));
    }
    other.ready_subnet("web-x", "net", "10.0.9.0/24").await;
    for i in &ids {
        t.wait("subnets", i, "SUBNET_STATE_READY").await;
    }
    s.sim_fabric().inject_failure(
        osac_backends::Operation::DeleteSubnet,
        &ids[5],
        u32::MAX,
        osac_backends::FailureKind::Transient,
    );
    t.delete(&format!("{PUB}/subnets/db-2")).await.ok();
    t.wait("subnets", "db-2", "SUBNET_STATE_DELETING").await;

    // Paging: size of the page, total of the query, creation order by default.
    let all = t.list("subnets", &[]).await.ok();
    assert_eq!(
        (all["size"].as_i64(), all["total"].as_i64()),
        (Some(6), Some(6))
    );
    assert_eq!(
        names(&all),
        ["web-0", "web-1", "web-2", "db-0", "db-1", "db-2"]
    );
    let page = t
        .list("subnets", &[("offset", "1"), ("limit", "2")])
        .await
        .ok();
    assert_eq!(
        (page["size"].as_i64(), page["total"].as_i64()),
        (Some(2), Some(6))
    );
    assert_eq!(names(&page), ["web-1", "web-2"]);
    let past = t.list("subnets", &[("offset", "10")]).await.ok();
    assert_eq!(
        (past["size"].as_i64(), past["total"].as_i64()),
        (Some(0), Some(6))
    );
    assert_eq!(past["items"], json!([]));
    let big = t.list("subnets", &[("limit", "1000")]).await.ok();
    assert_eq!(big["size"], 6, "the largest page");
    let over = t.list("subnets", &[("limit", "1001")]).await;
    assert_eq!(
        over.status, 400,
        "a page over the bound is refused: {}",
        over.text
    );
    assert!(over.text.contains("limit: at most 1000"), "{}", over.text);

    let filtered = |f: &'static str| {
        let t = t.clone();
        async move { t.list("subnets", &[("filter", f)]).await }
    };
    // Labels.
    let l = filtered(r#"this.metadata.labels["tier"] == "web""#)
        .await
        .ok();
    assert_eq!(names(&l), ["web-0", "web-1", "web-2"]);
    assert_eq!(l["total"], 3);
    let l =
        filtered(r#"this.metadata.labels["tier"] == "web" && this.metadata.labels["idx"] != "1""#)
            .await
            .ok();
    assert_eq!(names(&l), ["web-0", "web-2"]);
    let l = filtered(r#"has(this.metadata.labels.tier)"#).await.ok();
    assert_eq!(l["total"], 6);
    let l = filtered(r#"this.metadata.labels["missing"] == "x""#)
        .await
        .ok();
    assert_eq!(l["total"], 0);
    // State by name and by number.
    let l = filtered(r#"this.status.state == "SUBNET_STATE_READY""#)
        .await
        .ok();
    assert_eq!(names(&l), ["web-0", "web-1", "web-2", "db-0", "db-1"]);
    let l = filtered("this.status.state == 2").await.ok();
    assert_eq!(l["total"], 5);
    let l = filtered(r#"this.status.state == "SUBNET_STATE_DELETING""#)
        .await
        .ok();
    assert_eq!(names(&l), ["db-2"]);
    let l = filtered("this.status.state == 4").await.ok();
    assert_eq!(names(&l), ["db-2"]);
    let l = filtered(r#"this.status.state != "SUBNET_STATE_READY""#)
        .await
        .ok();
    assert_eq!(names(&l), ["db-2"]);
    // Names, in, ||, !, spec fields, scoping (other tenant's web-x never shows).
    let l = filtered(r#"this.metadata.name.startsWith("web")"#)
        .await
        .ok();
    assert_eq!(names(&l), ["web-0", "web-1", "web-2"]);
    let l = filtered(r#"this.metadata.name in ["db-0", "web-1", "nope"]"#)
        .await
        .ok();
    assert_eq!(names(&l), ["web-1", "db-0"]);
    let l = filtered(r#"this.metadata.name == "web-0" || this.spec.ipv4_cidr == "10.0.4.0/24""#)
        .await
        .ok();
    assert_eq!(names(&l), ["web-0", "db-1"]);
    let l = filtered(r#"!(this.metadata.labels["tier"] == "web")"#)
        .await
        .ok();
    assert_eq!(names(&l), ["db-0", "db-1", "db-2"]);
    let vn_id = t.get(&format!("{PUB}/virtual_networks/net")).await.ok()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let l = t
        .list(
            "subnets",
            &[(
                "filter",
                &format!("this.spec.virtual_network == \"{vn_id}\""),
            )],
        )
        .await
        .ok();
    assert_eq!(l["total"], 6);
    let l = t
        .list(
            "subnets",
            &[
                ("filter", r#"this.metadata.labels["tier"] == "db""#),
                ("limit", "1"),
                ("offset", "1"),
            ],
        )
        .await
        .ok();
    assert_eq!(
        (names(&l), l["total"].as_i64()),
        (vec!["db-1".to_string()], Some(3))
    );

    // Order.
    let l = t
        .list("subnets", &[("order", "metadata.name desc")])
        .await
        .ok();
    assert_eq!(
        names(&l),
        ["web-2", "web-1", "web-0", "db-2", "db-1", "db-0"]
    );
    let l = t.list("subnets", &[("order", "metadata.name")]).await.ok();
    assert_eq!(
        names(&l),
        ["db-0", "db-1", "db-2", "web-0", "web-1", "web-2"]
    );
    let l = t
        .list(
            "subnets",
            &[
                ("order", "metadata.creation_timestamp desc"),
                ("limit", "2"),
            ],
        )
        .await
        .ok();
    assert_eq!(names(&l), ["db-2", "db-1"]);
    let l = t
        .list(
            "subnets",
            &[
                ("order", "spec.ipv4_cidr desc"),
                ("filter", r#"this.metadata.labels["tier"] == "web""#),
            ],
        )
        .await
        .ok();
    assert_eq!(names(&l), ["web-2", "web-1", "web-0"]);

    // Bad input: INVALID_ARGUMENT with the position of the error; nothing else happens.
    t.list("subnets", &[("filter", "this.metadata.name ==")])
        .await
        .err(400, "INVALID_ARGUMENT", &["filter", "position"]);
    // The kubectl-style label shorthand is not the filter language: the error says how to
    // write it.
    t.list("subnets", &[("filter", r#"labels["tier"]="web""#)])
        .await
        .err(
            400,
            "INVALID_ARGUMENT",
            &["filter", r#"this.metadata.labels["tier"] == "web""#],
        );
    let m = t
        .list(
            "subnets",
            &[("filter", r#"this.metadata.name == "a" &&& true"#)],
        )
        .await
        .err(400, "INVALID_ARGUMENT", &["position"]);
    assert!(
        m.contains("position 2"),
        "the error points into the text: {m}"
    );
    t.list("subnets", &[("filter", "drop table objects")])
        .await
        .err(400, "INVALID_ARGUMENT", &["position"]);
    t.list("subnets", &[("order", "metadata.name sideways")])
        .await
        .err(400, "INVALID_ARGUMENT", &["sideways"]);
    t.list("subnets", &[("order", "metadata.name; drop table objects")])
        .await
        .err(400, "INVALID_ARGUMENT", &["order", "position"]);
    let l = t
        .list(
            "subnets",
            &[("filter", r#"this.metadata.name == "x' OR 1=1 --""#)],
        )
        .await
        .ok();
    assert_eq!(l["total"], 0, "literals are bound, never spliced into SQL");
    t.list("subnets", &[("limit", "-1")])
        .await
        .err(400, "INVALID_ARGUMENT", &["limit"]);
    t.list("subnets", &[("offset", "x")])
        .await
        .err(400, "INVALID_ARGUMENT", &["offset", "'x'"]);

    // Provider lists over a tenant-visible collection: ExternalIPPools with a filter.
    let pools = s
        .admin
        .get(&format!(
            "{PRIV}/external_ip_pools?filter=this.spec.ip_family%20%3D%3D%20%22IP_FAMILY_IPV4%22"
        ))
        .await
        .ok();
    assert_eq!(pools["total"], 1);
    let pools = s
        .admin
        .get(&format!(
            "{PRIV}/external_ip_pools?filter=this.spec.ip_family%20%3D%3D%202"
        ))
        .await
        .ok();
    assert_eq!(pools["total"], 0);

    // Same answers after a restart (indexes and stored JSON, not memory).
    s.restart().await;
    let l = t
        .list(
            "subnets",
            &[
                ("filter", r#"this.metadata.labels["tier"] == "web""#),
                ("order", "metadata.name desc"),
            ],
        )
        .await
        .ok();
    assert_eq!(names(&l), ["web-2", "web-1", "web-0"]);
    s.finish().await;
}
