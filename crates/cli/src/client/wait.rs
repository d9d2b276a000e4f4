//! `--wait`: poll an object until it is ready, failed or gone, showing its state.
//!
//! On a terminal the state is shown on one updating line with the elapsed time; otherwise one
//! line is printed per state (or message) change. Objects with conditions (the workloads) show
//! the condition they wait on: `baremetalinstance/s1: PROVISIONING — InventoryAssigned:
//! waiting for a free host`.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::bail;
use osac_client::Api;
use serde_json::Value;

use super::kind::{Kind, Scope, is_ready, short_state};
use super::workload::progress_text;

/// How often the object is read.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// What to wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Goal {
    /// READY / ALLOCATED / RUNNING; FAILED or DELETE_FAILED is an error.
    Ready,
    /// NOT_FOUND; DELETE_FAILED is an error.
    Gone,
}

/// The outcome of one observation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Done,
    Failed,
    Pending,
}

/// Decides what a state (without prefix) means for the goal.
pub fn judge(kind: Kind, goal: Goal, state: &str) -> Verdict {
    match goal {
        Goal::Ready if is_ready(kind, state) => Verdict::Done,
        Goal::Ready if matches!(state, "FAILED" | "DELETE_FAILED") => Verdict::Failed,
        Goal::Gone if state == "DELETE_FAILED" => Verdict::Failed,
        _ => Verdict::Pending,
    }
}

struct Progress {
    label: String,
    stderr: bool,
    tty: bool,
    start: Instant,
    last: Option<String>,
    frame: usize,
}

impl Progress {
    fn new(label: String, stderr: bool) -> Progress {
        let tty = if stderr {
            std::io::stderr().is_terminal()
        } else {
            std::io::stdout().is_terminal()
        };
        Progress {
            label,
            stderr,
            tty,
            start: Instant::now(),
            last: None,
            frame: 0,
        }
    }

    fn write(&self, s: &str) {
        // Progress is best effort: a closed output must not abort the wait.
        if self.stderr {
            let mut out = std::io::stderr().lock();
            let _ = out.write_all(s.as_bytes()).and_then(|()| out.flush());
        } else {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(s.as_bytes()).and_then(|()| out.flush());
        }
    }

    /// Shows `now` (the state and what it waits on, from [`progress_text`]).
    fn update(&mut self, now: String) {
        if self.tty {
            const SPIN: [char; 4] = ['|', '/', '-', '\\'];
            self.frame = (self.frame + 1) % SPIN.len();
            let line = format!(
                "\r\x1b[2K{} {}: {now} ({:.1}s)",
                SPIN[self.frame],
                self.label,
                self.start.elapsed().as_secs_f64()
            );
            self.write(&line);
        } else if self.last.as_deref() != Some(now.as_str()) {
            self.write(&format!("{}: {now}\n", self.label));
        }
        self.last = Some(now);
    }

    /// Ends the display with a final line.
    fn finish(&mut self, text: &str) {
        if self.tty {
            let line = format!(
                "\r\x1b[2K{}: {text} ({:.1}s)\n",
                self.label,
                self.start.elapsed().as_secs_f64()
            );
            self.write(&line);
        } else if self.last.as_deref() != Some(text) {
            self.write(&format!("{}: {text}\n", self.label));
        }
    }

    /// Ends the updating line without a verdict (an error follows on stderr).
    fn abandon(&mut self) {
        if self.tty && self.last.is_some() {
            self.write("\n");
        }
    }
}

/// How a `--wait` ended without success, for the exit code ([`super::exit_code`]).
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// The timeout passed first.
    #[error("{0}")]
    TimedOut(String),
    /// The object went FAILED (or DELETE_FAILED).
    #[error("{0}")]
    Failed(String),
}

/// Waits for the object `id` of `kind`; `label` (`kind/name`) names it in output, which goes
/// to stdout, or to stderr when `progress_to_stderr` (stdout then carries `-o json|yaml`).
/// Returns the last object read (`None` when gone, or when the kind has no state).
#[allow(clippy::too_many_arguments)]
pub async fn wait(
    api: &Api,
    scope: Scope,
    kind: Kind,
    id: &str,
    label: &str,
    goal: Goal,
    timeout: Duration,
    progress_to_stderr: bool,
) -> anyhow::Result<Option<Value>> {
    if goal == Goal::Ready && !kind.has_state() {
        return Ok(None);
    }
    let mut progress = Progress::new(label.to_string(), progress_to_stderr);
    let deadline = Instant::now() + timeout;
    let mut last_seen: String;
    loop {
        match api.get(scope, kind.collection(), id).await {
            Ok(obj) => {
                let status = obj.get("status");
                let state = status
                    .and_then(|s| s.get("state"))
                    .and_then(Value::as_str)
                    .map(short_state)
                    .unwrap_or("UNSPECIFIED")
                    .to_string();
                let now = progress_text(&state, status);
                progress.update(now.clone());
                match judge(kind, goal, &state) {
                    Verdict::Done => {
                        progress.finish(&state);
                        return Ok(Some(obj));
                    }
                    Verdict::Failed => {
                        progress.abandon();
                        return Err(WaitError::Failed(format!(
                            "{label} is {}",
                            failure_text(&state, status)
                        ))
                        .into());
                    }
                    Verdict::Pending => {}
                }
                last_seen = now;
            }
            Err(e) if e.is_not_found() => {
                if goal == Goal::Gone {
                    progress.finish("deleted");
                    return Ok(None);
                }
                progress.abandon();
                bail!("{label} was deleted while waiting for it to become ready");
            }
            Err(e) if e.is_transient() => last_seen = e.to_string(),
            Err(e) => {
                progress.abandon();
                return Err(e.into());
            }
        }
        if Instant::now() >= deadline {
            progress.abandon();
            let what = match goal {
                Goal::Ready => "to become ready",
                Goal::Gone => "to be deleted",
            };
            return Err(WaitError::TimedOut(format!(
                "timed out after {}s waiting for {label} {what} (last: {last_seen})",
                timeout.as_secs_f64()
            ))
            .into());
        }
        tokio::time::sleep(POLL_INTERVAL.min(deadline.saturating_duration_since(Instant::now())))
            .await;
    }
}

/// Why an object failed: `FAILED: <status.message>`, else the failing condition
/// (`FAILED — ProvisioningComplete: boot timed out`).
fn failure_text(state: &str, status: Option<&Value>) -> String {
    let message = status
        .and_then(|s| s.get("message"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if message.is_empty() {
        progress_text(state, status)
    } else {
        format!("{state}: {message}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert_eq!(judge(Kind::Subnet, Goal::Ready, "READY"), Verdict::Done);
        assert_eq!(
            judge(Kind::ExternalIp, Goal::Ready, "ALLOCATED"),
            Verdict::Done
        );
        assert_eq!(
            judge(Kind::Subnet, Goal::Ready, "PENDING"),
            Verdict::Pending
        );
        assert_eq!(judge(Kind::Subnet, Goal::Ready, "FAILED"), Verdict::Failed);
        assert_eq!(
            judge(Kind::Subnet, Goal::Gone, "DELETING"),
            Verdict::Pending
        );
        assert_eq!(
            judge(Kind::Subnet, Goal::Gone, "DELETE_FAILED"),
            Verdict::Failed
        );
        assert_eq!(judge(Kind::Subnet, Goal::Gone, "READY"), Verdict::Pending);
    }
}
