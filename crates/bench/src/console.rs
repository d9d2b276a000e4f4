//! The web console's first paint: headless Chromium (crate `osac-webdriver`) loads `/console`
//! signed in with a tenant's token, and the time from the start of the navigation until the
//! topology is drawn is read from the page's Performance API (the mark `osac-topology-drawn`
//! that the page sets once every collection of the tenant has been received and drawn).

use std::time::Duration;

use anyhow::{Context, Result};
use osac_webdriver::Browser;
use serde_json::json;

use crate::api::Api;
use crate::report::{Goal, Line};

/// Goal (docs/benchmarks.md): the topology drawn within a second of opening the console.
pub const GOAL_FIRST_PAINT_S: f64 = 1.0;
/// Page loads measured; the median is reported.
const RUNS: usize = 3;

/// Opens `/console` in a fresh headless Chromium signed in with `token` and answers the time
/// from the navigation's start until the topology is drawn.
pub async fn console_first_paint(base_url: &str, token: &str) -> Result<Duration> {
    let browser = Browser::start(1600, 1000)
        .await
        .context("starting headless Chromium")?;
    let measured = async {
        let url = format!("{}/console", base_url.trim_end_matches('/'));
        // The token goes where the sign-in form would put it; then a fresh load is timed.
        browser.goto(&url).await?;
        browser
            .execute(
                "sessionStorage.setItem('osac-console-token', arguments[0]); return true",
                vec![json!(token)],
            )
            .await?;
        browser.goto(&url).await?;
        let ms = browser
            .wait_for(
                "performance.getEntriesByName('osac-topology-drawn')[0]?.startTime",
                Duration::from_secs(120),
            )
            .await?;
        Ok::<_, osac_webdriver::WebDriverError>(Duration::from_secs_f64(
            ms.as_f64().unwrap_or_default() / 1000.0,
        ))
    }
    .await;
    let _ = browser.quit().await;
    Ok(measured?)
}

/// Measures the first paint of `api`'s tenant (holding `contents`, e.g. "1000 workloads") a
/// few times: the report line of the median against the goal.
pub async fn first_paint_line(api: &Api, contents: &str) -> Result<Line> {
    progress!("console: timing the first paint of a tenant with {contents}…");
    let mut runs = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        runs.push(console_first_paint(api.url(), api.token()).await?);
    }
    runs.sort();
    let median = runs[RUNS / 2].as_secs_f64();
    Ok(Line {
        id: "".into(),
        what: format!("  console first paint, {contents} (median of {RUNS})"),
        shown: format!("{:.0} ms", median * 1000.0),
        value: median,
        goal: Goal::AtMost(GOAL_FIRST_PAINT_S),
        goal_text: format!("≤ {GOAL_FIRST_PAINT_S:.0} s"),
        note: format!(
            "runs {}",
            runs.iter()
                .map(|d| format!("{:.0} ms", d.as_secs_f64() * 1000.0))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}
