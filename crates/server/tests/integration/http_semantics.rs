//! HTTP as generic clients expect it: a method a path does not take is a 405 with `Allow` and
//! the error body, a missing credential a 401 with a bearer challenge, and `?watch=` a strict
//! boolean.

use reqwest::Method;

use crate::common::*;

#[tokio::test]
async fn refusals_speak_http_405_401_and_strict_booleans() {
    let s = TestServer::sqlite().await;
    let http = reqwest::Client::new();
    let url = |path: &str| format!("{}{path}", s.url());

    // A collection takes GET and POST only.
    let r = http
        .request(Method::DELETE, url(&format!("{PUB}/subnets")))
        .bearer_auth(s.admin.token.clone().unwrap_or_default())
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 405);
    let allow = r
        .headers()
        .get("allow")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(
        allow.contains("GET") && allow.contains("POST"),
        "Allow: {allow}"
    );
    let body: serde_json::Value = r.json().await.expect("a JSON error body");
    assert_eq!(body["code"], "METHOD_NOT_ALLOWED", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("DELETE is not allowed on this path"),
        "{body}"
    );

    // No credential: 401 with the challenge of a bearer-token API.
    let r = http
        .get(url(&format!("{PUB}/subnets")))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 401);
    assert_eq!(
        r.headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some(osac_api::error::BEARER_CHALLENGE)
    );

    // `watch` is true or false, nothing else.
    for bad in ["yes", "-1", "null", "TRUE"] {
        s.admin.list("subnets", &[("watch", bad)]).await.err(
            400,
            "INVALID_ARGUMENT",
            &["watch: expected true or false"],
        );
    }
    let listed = s.admin.list("subnets", &[("watch", "false")]).await.ok();
    assert!(listed["items"].is_array(), "{listed}");
    s.finish().await;
}

/// Per surface, the methods a collection takes are the ones its proto service exposes there:
/// a tenant's write to a collection it may only read is a 405 naming what it may do, while the
/// provider's surface takes the same write.
#[tokio::test]
async fn read_only_collections_answer_405_per_surface() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    let http = reqwest::Client::new();
    let token = t.token.clone().unwrap_or_default();
    for collection in [
        "network_classes",
        "external_ip_pools",
        "host_types",
        "events",
    ] {
        for (method, path) in [
            (Method::POST, format!("{PUB}/{collection}")),
            (Method::PATCH, format!("{PUB}/{collection}/some-id")),
            (Method::DELETE, format!("{PUB}/{collection}/some-id")),
            (Method::PUT, format!("{PUB}/{collection}/some-id")),
        ] {
            let r = http
                .request(method.clone(), format!("{}{path}", s.url()))
                .bearer_auth(&token)
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .expect("send");
            assert_eq!(r.status(), 405, "{method} {path}");
            let allow = r
                .headers()
                .get("allow")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            assert_eq!(allow, "GET,HEAD", "{method} {path}");
            let body: serde_json::Value = r.json().await.expect("a JSON error body");
            assert_eq!(body["code"], "METHOD_NOT_ALLOWED", "{body}");
        }
    }
    // The provider's surface writes them.
    let r = s
        .admin
        .send_raw(
            Method::POST,
            &format!("{PRIV}/network_classes"),
            Some(b"{}".to_vec()),
        )
        .await;
    assert_ne!(r.status, 405, "{}", r.text);
    s.finish().await;
}
