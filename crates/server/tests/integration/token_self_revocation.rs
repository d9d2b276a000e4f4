//! A caller cannot revoke the token it is using unless it says so (REST `?force=true`, gRPC
//! `force`), and the last provider-admin token is never revoked, force or not.

use osac_proto::admin::v1 as admin;
use serde_json::{Value, json};
use tonic::Code;

use crate::common::*;
use crate::grpc::{Bearer, channel};

/// Mints a provider-admin token: (id, secret).
async fn mint_admin(s: &TestServer, subject: &str) -> (String, String) {
    let minted = s
        .admin
        .post(
            &format!("{PRIV}/tokens"),
            json!({"role": "provider-admin", "subject": subject}),
        )
        .await
        .ok();
    (
        minted["id"].as_str().expect("id").to_string(),
        minted["token"].as_str().expect("token").to_string(),
    )
}

/// The id of the test server's own admin token.
async fn own_admin_id(s: &TestServer) -> String {
    let list = s.admin.get(&format!("{PRIV}/tokens")).await.ok();
    let ids: Vec<&Value> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|t| t["role"] == "provider-admin")
        .collect();
    assert_eq!(ids.len(), 1, "one provider-admin token at start: {list}");
    ids[0]["id"].as_str().expect("id").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_token_needs_force_and_the_last_admin_token_stays() {
    let s = TestServer::sqlite().await;
    let first = own_admin_id(&s).await;
    let (second, second_secret) = mint_admin(&s, "automation").await;
    let automation = s.with_token(&second_secret);

    // Revoking the token in use without force: refused, and it still works.
    automation
        .delete(&format!("{PRIV}/tokens/{second}"))
        .await
        .err(
            412,
            "FAILED_PRECONDITION",
            &["the token this request is using", "force=true"],
        );
    automation.get(&format!("{PRIV}/tokens")).await.ok();
    // A malformed force is a clear error.
    automation
        .delete(&format!("{PRIV}/tokens/{second}?force=yes"))
        .await
        .err(400, "INVALID_ARGUMENT", &["force", "true or false"]);

    // gRPC: the same rule, and the force field.
    let mut tokens = admin::tokens_client::TokensClient::with_interceptor(
        channel(&s).await,
        Bearer(Some(second_secret.clone())),
    );
    let refused = tokens
        .delete(admin::DeleteTokenRequest {
            id: second.clone(),
            force: false,
        })
        .await
        .expect_err("own token without force");
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(refused.message().contains("force"), "{}", refused.message());

    // Revoking another provider-admin token is fine while one stays: automation revokes the
    // first admin token.
    automation
        .delete(&format!("{PRIV}/tokens/{first}"))
        .await
        .ok();
    s.admin
        .get(&format!("{PRIV}/tokens"))
        .await
        .err(401, "UNAUTHENTICATED", &[]);

    // Now automation holds the last provider-admin token: never revoked, even with force,
    // on either transport.
    automation
        .delete(&format!("{PRIV}/tokens/{second}?force=true"))
        .await
        .err(
            412,
            "FAILED_PRECONDITION",
            &["last provider-admin token", "mint another"],
        );
    let refused = tokens
        .delete(admin::DeleteTokenRequest {
            id: second.clone(),
            force: true,
        })
        .await
        .expect_err("last admin token with force");
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    automation.get(&format!("{PRIV}/tokens")).await.ok();

    // With another admin token, force revokes the one in use; it stops working at once.
    let (_, third_secret) = {
        let minted = automation
            .post(
                &format!("{PRIV}/tokens"),
                json!({"role": "provider-admin", "subject": "ops"}),
            )
            .await
            .ok();
        (
            minted["id"].as_str().expect("id").to_string(),
            minted["token"].as_str().expect("token").to_string(),
        )
    };
    automation
        .delete(&format!("{PRIV}/tokens/{second}?force=true"))
        .await
        .ok();
    automation
        .get(&format!("{PRIV}/tokens"))
        .await
        .err(401, "UNAUTHENTICATED", &[]);
    s.with_token(&third_secret)
        .get(&format!("{PRIV}/tokens"))
        .await
        .ok();
    s.finish().await;
}
