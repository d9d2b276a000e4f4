//! API errors: a gRPC code and a message that names the field and the rule. Mapped to tonic
//! statuses and to HTTP responses with the `{"code","message","details"}` body at the edge.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use osac_model::Invalid;
use osac_store::StoreError;

/// gRPC status codes used by the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    InvalidArgument,
    Unauthenticated,
    PermissionDenied,
    NotFound,
    AlreadyExists,
    Aborted,
    FailedPrecondition,
    ResourceExhausted,
    Unavailable,
    Internal,
}

impl Code {
    /// The canonical gRPC name, used in REST error bodies.
    pub const fn name(self) -> &'static str {
        match self {
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::Unauthenticated => "UNAUTHENTICATED",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::Aborted => "ABORTED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::Unavailable => "UNAVAILABLE",
            Code::Internal => "INTERNAL",
        }
    }

    /// HTTP status for REST (FAILED_PRECONDITION ⇒ 412, see docs/api.md).
    pub const fn http(self) -> StatusCode {
        match self {
            Code::InvalidArgument => StatusCode::BAD_REQUEST,
            Code::Unauthenticated => StatusCode::UNAUTHORIZED,
            Code::PermissionDenied => StatusCode::FORBIDDEN,
            Code::NotFound => StatusCode::NOT_FOUND,
            Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
            Code::FailedPrecondition => StatusCode::PRECONDITION_FAILED,
            Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
            Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Code::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    const fn grpc(self) -> tonic::Code {
        match self {
            Code::InvalidArgument => tonic::Code::InvalidArgument,
            Code::Unauthenticated => tonic::Code::Unauthenticated,
            Code::PermissionDenied => tonic::Code::PermissionDenied,
            Code::NotFound => tonic::Code::NotFound,
            Code::AlreadyExists => tonic::Code::AlreadyExists,
            Code::Aborted => tonic::Code::Aborted,
            Code::FailedPrecondition => tonic::Code::FailedPrecondition,
            Code::ResourceExhausted => tonic::Code::ResourceExhausted,
            Code::Unavailable => tonic::Code::Unavailable,
            Code::Internal => tonic::Code::Internal,
        }
    }
}

/// An API error.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub code: Code,
    pub message: String,
}

/// Result of API operations.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    /// Builds an error.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
    /// INVALID_ARGUMENT.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Code::InvalidArgument, message)
    }
    /// NOT_FOUND.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Code::NotFound, message)
    }
    /// FAILED_PRECONDITION.
    pub fn precondition(message: impl Into<String>) -> Self {
        Self::new(Code::FailedPrecondition, message)
    }
    /// The same error with `what` (e.g. the object being created) in front of its message.
    pub fn context(self, what: impl std::fmt::Display) -> Self {
        Self {
            code: self.code,
            message: format!("{what}: {}", self.message),
        }
    }
    /// PERMISSION_DENIED.
    pub fn denied(message: impl Into<String>) -> Self {
        Self::new(Code::PermissionDenied, message)
    }
}

impl From<Invalid> for ApiError {
    fn from(e: Invalid) -> Self {
        ApiError::invalid(e.to_string())
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match &e {
            StoreError::NotFound(id) => {
                ApiError::not_found(format!("object '{id}' does not exist"))
            }
            StoreError::AlreadyExists(what) => {
                ApiError::new(Code::AlreadyExists, format!("already exists: {what}"))
            }
            StoreError::Conflict { .. } => ApiError::new(Code::Aborted, e.to_string()),
            StoreError::Filter(f) => ApiError::invalid(format!("filter: {f}")),
            StoreError::Database(source) => {
                tracing::error!(error = %source, "database error");
                ApiError::new(Code::Unavailable, "database unavailable; retry the request")
            }
            StoreError::Fenced(_) => ApiError::new(Code::Unavailable, e.to_string()),
            StoreError::InUse(m) => {
                tracing::error!(message = %m, "database in use");
                ApiError::new(Code::Unavailable, "database unavailable; retry the request")
            }
            StoreError::Unavailable(m) => {
                tracing::error!(message = %m, "shared commit failed");
                ApiError::new(Code::Unavailable, "database unavailable; retry the request")
            }
            StoreError::TurnExpired(limit) => {
                tracing::warn!(limit = ?limit, "write transaction outlived its turn");
                ApiError::new(Code::Unavailable, "database busy; retry the request")
            }
            StoreError::Corrupt(m) => {
                tracing::error!(message = %m, "corrupt stored data");
                ApiError::new(Code::Internal, "internal error reading stored data")
            }
        }
    }
}

impl From<ApiError> for tonic::Status {
    fn from(e: ApiError) -> Self {
        tonic::Status::new(e.code.grpc(), e.message)
    }
}

impl ApiError {
    /// The REST error body `{"code","message","details"}`.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({"code": self.code.name(), "message": self.message, "details": []})
    }
}

/// The challenge of a 401 (RFC 6750): the API takes bearer tokens.
pub const BEARER_CHALLENGE: &str = "Bearer realm=\"osac\"";

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.code.http(), axum::Json(self.body())).into_response();
        if self.code == Code::Unauthenticated {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static(BEARER_CHALLENGE),
            );
        }
        response
    }
}
