//! Asking the reachability explainer (the public REST endpoint, with the asking tenant's
//! token), several questions at once.

use std::sync::Arc;

use serde_json::Value;

use super::build::Built;
use super::questions::{self, Question};
use crate::harness::Dp;

/// The explainer's route on the public API.
pub const EXPLAIN_PATH: &str = "/api/fulfillment/v1/reachability:explain";
/// Questions asked at once.
const CONCURRENCY: usize = 8;

/// The explainer's answer to one question: the verdict, or why there is none.
#[derive(Debug, Clone)]
pub struct Explained {
    pub reachable: Result<bool, String>,
    /// The whole response (or error body), for reports.
    pub body: Value,
}

pub async fn explain_all(dp: &Dp, built: &Arc<Built>, qs: &[Question]) -> Vec<Explained> {
    let url = format!("{}{EXPLAIN_PATH}", dp.server().await.url());
    let client = reqwest::Client::new();
    let limit = Arc::new(tokio::sync::Semaphore::new(CONCURRENCY));
    let mut tasks = Vec::with_capacity(qs.len());
    for q in qs {
        let (client, url, limit) = (client.clone(), url.clone(), limit.clone());
        let token = built.tenants[q.tenant].token.clone();
        let body = questions::request(built, q);
        tasks.push(tokio::spawn(async move {
            let _permit = limit.acquire_owned().await;
            ask(&client, &url, &token, &body).await
        }));
    }
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await.unwrap_or_else(|e| Explained {
            reachable: Err(format!("task failed: {e}")),
            body: Value::Null,
        }));
    }
    out
}

async fn ask(client: &reqwest::Client, url: &str, token: &str, body: &Value) -> Explained {
    let resp = match client.post(url).bearer_auth(token).json(body).send().await {
        Ok(r) => r,
        Err(e) => {
            return Explained {
                reachable: Err(format!("request failed: {e}")),
                body: Value::Null,
            };
        }
    };
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    let json: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if !status.is_success() {
        return Explained {
            reachable: Err(format!("HTTP {status}")),
            body: json,
        };
    }
    let reachable = match json["verdict"].as_str() {
        Some("REACHABILITY_VERDICT_REACHABLE") => Ok(true),
        Some("REACHABILITY_VERDICT_BLOCKED") => Ok(false),
        other => Err(format!("no verdict ({other:?})")),
    };
    Explained {
        reachable,
        body: json,
    }
}
