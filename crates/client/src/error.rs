//! The errors of the client: what the server refused (with its `{"code","message"}`), and what
//! kept a request from getting an answer at all.

use reqwest::StatusCode;
use serde_json::Value;

use crate::tls::TlsSetupError;

/// A failed API call. `Display` is what a user of the `osac` CLI sees after `error: `.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error status.
    #[error("{message} ({code})")]
    Api {
        status: u16,
        code: String,
        message: String,
    },
    /// Nothing listens at the URL (or the name does not resolve).
    #[error("cannot reach osac at {url}: is `osac server --dev` running?")]
    Unreachable { url: String },
    /// The TLS handshake failed (e.g. the server's certificate is not trusted).
    #[error(
        "TLS handshake with osac at {url} failed: {detail} (an https server signed by a private CA needs --ca-file, or `osac login --ca-file`)"
    )]
    Handshake { url: String, detail: String },
    /// The server did not answer in time.
    #[error("timed out waiting for osac at {url}")]
    Timeout { url: String },
    /// Any other transport problem.
    #[error("talking to osac at {url}: {detail}")]
    Transport { url: String, detail: String },
    /// The TLS settings (CA file) cannot be used.
    #[error("{0}")]
    Tls(#[from] TlsSetupError),
    /// The server answered something that is not the API's JSON.
    #[error("unexpected response from osac at {url}: {detail}")]
    BadResponse { url: String, detail: String },
}

impl ClientError {
    /// The gRPC code name of an API error.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether the object does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some("NOT_FOUND")
    }

    /// Whether retrying the same call later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self.code(), Some("UNAVAILABLE")) || matches!(self, ClientError::Timeout { .. })
    }

    /// The error of a request to the server at `url` that got no answer: a refused or
    /// unresolvable connection, a failed TLS handshake, a timeout, or another transport fault.
    pub fn transport(url: &str, e: &reqwest::Error) -> ClientError {
        let url = url.to_string();
        let detail = chain(e);
        let tls = ["certificate", "handshake", "tls", "alert"]
            .iter()
            .any(|w| detail.to_ascii_lowercase().contains(w));
        if e.is_connect() && tls {
            ClientError::Handshake { url, detail }
        } else if e.is_connect() {
            ClientError::Unreachable { url }
        } else if e.is_timeout() {
            ClientError::Timeout { url }
        } else {
            ClientError::Transport { url, detail }
        }
    }
}

/// The error message with its causes: reqwest's own message is terse.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        src = c.source();
    }
    s
}

/// Builds the error of a non-2xx answer: the `{"code","message"}` body when there is one,
/// otherwise the HTTP status (with the request, to make a wrong route obvious).
pub fn api_error(status: StatusCode, body: &str, request: &str) -> ClientError {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let field = |k: &str| parsed.as_ref().and_then(|v| v.get(k));
    let code = match field("code") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::Number(n)) => n.as_u64().map(grpc_name).unwrap_or("UNKNOWN").to_string(),
        _ => http_code_name(status),
    };
    let message = match field("message")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
    {
        Some(m) => m.to_string(),
        None => {
            let reason = status.canonical_reason().unwrap_or("error").to_string();
            let text = body.trim();
            if text.is_empty() || parsed.is_some() || text.len() > 300 {
                format!("{request}: HTTP {} {reason}", status.as_u16())
            } else {
                format!("{request}: HTTP {} {reason}: {text}", status.as_u16())
            }
        }
    };
    ClientError::Api {
        status: status.as_u16(),
        code,
        message,
    }
}

fn http_code_name(status: StatusCode) -> String {
    match status.as_u16() {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        405 => "UNIMPLEMENTED",
        409 => "ALREADY_EXISTS",
        412 => "FAILED_PRECONDITION",
        429 => "RESOURCE_EXHAUSTED",
        501 => "UNIMPLEMENTED",
        502..=504 => "UNAVAILABLE",
        500..=599 => "INTERNAL",
        _ => return format!("HTTP_{}", status.as_u16()),
    }
    .to_string()
}

fn grpc_name(n: u64) -> &'static str {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    usize::try_from(n)
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or("UNKNOWN")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error_body(code: &str, message: &str) -> String {
        json!({"code": code, "message": message, "details": []}).to_string()
    }

    #[test]
    fn error_from_body() {
        let e = api_error(
            StatusCode::PRECONDITION_FAILED,
            &error_body("FAILED_PRECONDITION", "subnet 'a' is in use"),
            "DELETE /x",
        );
        assert_eq!(e.to_string(), "subnet 'a' is in use (FAILED_PRECONDITION)");
        assert_eq!(e.code(), Some("FAILED_PRECONDITION"));
    }

    #[test]
    fn error_without_body() {
        let e = api_error(StatusCode::NOT_FOUND, "", "GET /api/private/v1/managers");
        assert_eq!(
            e.to_string(),
            "GET /api/private/v1/managers: HTTP 404 Not Found (NOT_FOUND)"
        );
        assert!(e.is_not_found());
        let e = api_error(
            StatusCode::BAD_REQUEST,
            r#"{"code":5,"message":"gone"}"#,
            "GET /",
        );
        assert_eq!(e.to_string(), "gone (NOT_FOUND)");
        let e = api_error(StatusCode::BAD_GATEWAY, "upstream down", "GET /");
        assert_eq!(
            e.to_string(),
            "GET /: HTTP 502 Bad Gateway: upstream down (UNAVAILABLE)"
        );
        assert!(e.is_transient());
    }
}
