//! Filters on a reference field accept the referenced object's name as well as its id; a name
//! means the object of that name the caller can see, never another tenant's.

use crate::common::*;

/// The names of the subnets a filter lists for `api` (the tenant's default network's aside).
async fn subnet_names(api: &Api, filter: &str) -> Vec<String> {
    let filter = format!("({filter}) && {NOT_DEFAULT}");
    let page = api.list("subnets", &[("filter", &filter)]).await.ok();
    let mut names: Vec<String> = page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|s| {
            s["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_filters_take_names_in_the_callers_tenant() {
    let s = TestServer::sqlite().await;
    let acme = s.tenant("acme").await;
    let beta = s.tenant("beta").await;
    let gen_net = acme.ready_vn("gen-net", "10.0.0.0/16").await;
    acme.ready_vn("other-net", "10.1.0.0/16").await;
    acme.create("subnets", subnet_body("gen-sub", "gen-net", "10.0.1.0/24"))
        .await;
    acme.create(
        "subnets",
        subnet_body("other-sub", "other-net", "10.1.1.0/24"),
    )
    .await;
    // Another tenant uses the same network name.
    beta.ready_vn("gen-net", "10.0.0.0/16").await;
    beta.create("subnets", subnet_body("beta-sub", "gen-net", "10.0.1.0/24"))
        .await;

    let by_name = r#"this.spec.virtual_network == "gen-net""#;
    assert_eq!(subnet_names(&acme, by_name).await, ["gen-sub"]);
    assert_eq!(subnet_names(&beta, by_name).await, ["beta-sub"]);
    // The id still matches, and names work in `!=` and `in`.
    let by_id = format!(
        r#"this.spec.virtual_network == "{}""#,
        gen_net["id"].as_str().expect("id")
    );
    assert_eq!(subnet_names(&acme, &by_id).await, ["gen-sub"]);
    assert_eq!(
        subnet_names(&acme, r#"this.spec.virtual_network != "gen-net""#).await,
        ["other-sub"]
    );
    assert_eq!(
        subnet_names(
            &acme,
            r#"this.spec.virtual_network in ["gen-net", "other-net"] && this.metadata.name != "x""#
        )
        .await,
        ["gen-sub", "other-sub"]
    );
    // A name nothing has matches nothing; a name only another tenant has matches nothing.
    assert!(
        subnet_names(&acme, r#"this.spec.virtual_network == "no-net""#)
            .await
            .is_empty()
    );
    beta.ready_vn("beta-only", "10.2.0.0/16").await;
    assert!(
        subnet_names(&acme, r#"this.spec.virtual_network == "beta-only""#)
            .await
            .is_empty()
    );

    // A provider admin sees every tenant: a name two tenants use is ambiguous.
    let r = s
        .admin
        .get(&format!(
            "{PUB}/subnets?filter={}",
            urlencode(r#"this.spec.virtual_network == "gen-net""#)
        ))
        .await;
    r.err(
        400,
        "INVALID_ARGUMENT",
        &[
            "spec.virtual_network",
            "gen-net",
            "several tenants",
            "use the id",
        ],
    );
    s.finish().await;
}

fn urlencode(s: &str) -> String {
    reqwest::Url::parse_with_params("http://x/", [("f", s)])
        .expect("url")
        .query()
        .unwrap_or_default()
        .trim_start_matches("f=")
        .to_string()
}
