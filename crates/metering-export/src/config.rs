//! What the export connects to and how it behaves while the broker is away.

use std::str::FromStr;
use std::time::Duration;

/// Where and how the outbox is published.
#[derive(Debug, Clone)]
pub struct ExportConfig {
    /// NATS server URL (`nats://host:4222`, `tls://…`; credentials may be in the URL).
    pub url: String,
    /// The JetStream stream the records are stored in; created when missing.
    pub stream: String,
    /// Subject prefix: records are published on `<prefix>.<event>` (see
    /// [`crate::subject_for`]); a created stream captures `<prefix>.>`.
    pub subject_prefix: String,
    /// The stream's duplicate window when the export creates it: a record published again
    /// within it (a crash between the broker's ack and the outbox delete) is dropped by
    /// the broker.
    pub duplicate_window: Duration,
    /// Records read from the outbox and published per round (bounds the memory used for a
    /// backlog of any size).
    pub batch: usize,
    /// How often an empty outbox is read again.
    pub poll_interval: Duration,
    /// First wait after a failed round; it doubles up to `backoff_max`.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// How long the broker may take to acknowledge one record.
    pub publish_timeout: Duration,
    /// Warn (once) when more records than this wait.
    pub warn_pending: i64,
    /// Warn (once) when the broker has been unreachable for this long.
    pub warn_unreachable: Duration,
}

impl ExportConfig {
    pub const DEFAULT_STREAM: &'static str = "OSAC_METERING";
    pub const DEFAULT_SUBJECT_PREFIX: &'static str = "osac.metering";

    /// The defaults for a broker at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            stream: Self::DEFAULT_STREAM.into(),
            subject_prefix: Self::DEFAULT_SUBJECT_PREFIX.into(),
            duplicate_window: Duration::from_secs(600),
            batch: 256,
            poll_interval: Duration::from_secs(1),
            backoff_min: Duration::from_millis(500),
            backoff_max: Duration::from_secs(10),
            publish_timeout: Duration::from_secs(5),
            warn_pending: 10_000,
            warn_unreachable: Duration::from_secs(60),
        }
    }

    /// Checks every field; the error names the field and the rule.
    pub fn validate(&self) -> Result<(), ConfigError> {
        async_nats::ServerAddr::from_str(&self.url).map_err(|e| ConfigError::Url(e.to_string()))?;
        if self.stream.is_empty()
            || self
                .stream
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || ".*>/\\".contains(c))
        {
            return Err(ConfigError::Stream(self.stream.clone()));
        }
        if !valid_subject(&self.subject_prefix) {
            return Err(ConfigError::SubjectPrefix(self.subject_prefix.clone()));
        }
        if self.duplicate_window.is_zero() {
            return Err(ConfigError::Positive("duplicate_window"));
        }
        if self.batch == 0 {
            return Err(ConfigError::Positive("batch"));
        }
        if self.poll_interval.is_zero() {
            return Err(ConfigError::Positive("poll_interval"));
        }
        if self.backoff_min.is_zero() || self.backoff_max < self.backoff_min {
            return Err(ConfigError::Backoff);
        }
        if self.publish_timeout.is_zero() {
            return Err(ConfigError::Positive("publish_timeout"));
        }
        Ok(())
    }
}

/// A subject of literal tokens: non-empty, separated by `.`, no wildcard, no whitespace.
fn valid_subject(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|t| {
            !t.is_empty()
                && t != "*"
                && t != ">"
                && !t
                    .chars()
                    .any(|c| c.is_whitespace() || c.is_control() || c == '*' || c == '>')
        })
}

/// A configuration the export refuses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("--metering-nats: not a NATS server URL: {0}")]
    Url(String),
    #[error(
        "--metering-nats-stream {0:?}: a stream name is non-empty without whitespace, '.', '*', '>', '/' or '\\'"
    )]
    Stream(String),
    #[error(
        "--metering-nats-subject {0:?}: a subject prefix is non-empty tokens separated by '.', without whitespace or the wildcards '*' and '>'"
    )]
    SubjectPrefix(String),
    #[error("metering export: {0} must be positive")]
    Positive(&'static str),
    #[error("metering export: backoff_min must be positive and at most backoff_max")]
    Backoff,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        ExportConfig::new("nats://127.0.0.1:4222")
            .validate()
            .expect("valid");
    }

    #[test]
    fn bad_fields_are_named() {
        let base = ExportConfig::new("nats://127.0.0.1:4222");
        for stream in ["", "a.b", "a b", "a*", "a>", "a/b"] {
            let c = ExportConfig {
                stream: stream.into(),
                ..base.clone()
            };
            let e = c.validate().expect_err(stream);
            assert!(e.to_string().contains("--metering-nats-stream"), "{e}");
        }
        for prefix in ["", ".", "a..b", "a.", "a.*", "a.>", "a b", "a*b"] {
            let c = ExportConfig {
                subject_prefix: prefix.into(),
                ..base.clone()
            };
            let e = c.validate().expect_err(prefix);
            assert!(e.to_string().contains("--metering-nats-subject"), "{e}");
        }
        let c = ExportConfig {
            url: "nats://host:notaport".into(),
            ..base.clone()
        };
        assert!(matches!(c.validate(), Err(ConfigError::Url(_))));
        let c = ExportConfig {
            batch: 0,
            ..base.clone()
        };
        assert_eq!(c.validate(), Err(ConfigError::Positive("batch")));
        let c = ExportConfig {
            backoff_max: Duration::from_millis(1),
            ..base
        };
        assert_eq!(c.validate(), Err(ConfigError::Backoff));
    }
}
