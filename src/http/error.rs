//! Errors of the HTTP routes: one JSON shape, `{"error": {"code", "message"}}`,
//! and a status per cause. Internal causes are logged and answered generically.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};

use super::api::{ErrorBody, ErrorDetail};
use crate::protocol::ErrorCode;
use crate::session::SessionError;

/// The one error shape of every HTTP route: `{"error": {"code", "message"}}`.
pub fn error_body(code: ErrorCode, message: &str) -> ErrorBody {
    ErrorBody {
        error: ErrorDetail {
            code: code.as_str().to_owned(),
            message: message.to_owned(),
        },
    }
}

/// A failed REST request.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request itself is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// The request conflicts with what exists.
    #[error("{0}")]
    Conflict(String),
    /// A database connection that does not exist, or is not the caller's:
    /// 404 `CONNECTION_NOT_FOUND`.
    #[error("{0}")]
    ConnectionNotFound(String),
    /// Something else the request names that does not exist (or is not
    /// the caller's): 404 `SCHEMA_VALIDATION_FAILED`.
    #[error("{0}")]
    NotFound(String),
    /// A file that does not exist, or is not the caller's: 404
    /// `FILE_NOT_FOUND`.
    #[error("{0}")]
    FileNotFound(String),
    /// A password sealed under another master key: 409 `MASTER_KEY_MISMATCH`.
    #[error("{0}")]
    MasterKey(String),
    /// A credential that may not do this (a service key without the
    /// scope): 403 `UNAUTHORIZED`.
    #[error("{0}")]
    Forbidden(String),
    /// The client did not send its body in time: 408.
    #[error("{0}")]
    Timeout(String),
    /// A server we forward to could not be used.
    #[error("{0}")]
    Upstream(String),
    /// The server's own fault (an unreadable log entry): logged, answered
    /// generically with 500.
    #[error("{0}")]
    Internal(String),
    #[error(transparent)]
    Session(#[from] SessionError),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code, message) = match &self {
            Self::BadRequest(m) => (
                StatusCode::BAD_REQUEST,
                ErrorCode::SchemaValidationFailed,
                m.clone(),
            ),
            Self::Conflict(m) => (
                StatusCode::CONFLICT,
                ErrorCode::SchemaValidationFailed,
                m.clone(),
            ),
            Self::ConnectionNotFound(m) => (
                StatusCode::NOT_FOUND,
                ErrorCode::ConnectionNotFound,
                m.clone(),
            ),
            Self::NotFound(m) => (
                StatusCode::NOT_FOUND,
                ErrorCode::SchemaValidationFailed,
                m.clone(),
            ),
            Self::FileNotFound(m) => (StatusCode::NOT_FOUND, ErrorCode::FileNotFound, m.clone()),
            Self::MasterKey(m) => (
                StatusCode::CONFLICT,
                ErrorCode::MasterKeyMismatch,
                m.clone(),
            ),
            Self::Forbidden(m) => (StatusCode::FORBIDDEN, ErrorCode::Unauthorized, m.clone()),
            Self::Timeout(m) => (
                StatusCode::REQUEST_TIMEOUT,
                ErrorCode::SchemaValidationFailed,
                m.clone(),
            ),
            Self::Upstream(m) => (
                StatusCode::BAD_GATEWAY,
                ErrorCode::TransportError,
                m.clone(),
            ),
            Self::Internal(m) => {
                tracing::error!(error = %m, "request failed");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    ErrorCode::PersistenceError,
                    "the chat's log cannot be read".to_owned(),
                )
            }
            Self::Session(e) => {
                let status = match e {
                    SessionError::NotFound
                    | SessionError::MessageNotFound(_)
                    | SessionError::FileNotFound(_)
                    | SessionError::RequestNotFound(_)
                    | SessionError::UnknownWorkflow(_) => StatusCode::NOT_FOUND,
                    SessionError::RunInProgress
                    | SessionError::BranchLimit(_)
                    | SessionError::OtherKind(_)
                    | SessionError::Archived
                    | SessionError::IllegalTransition(_) => StatusCode::CONFLICT,
                    SessionError::TooManySubscriptions => StatusCode::TOO_MANY_REQUESTS,
                    SessionError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
                    SessionError::RateLimited { retry_after_ms, .. } => {
                        return rate_limited(&e.to_string(), *retry_after_ms);
                    }
                    SessionError::Persistence(_)
                    | SessionError::ShuttingDown
                    | SessionError::Moved
                    | SessionError::NodeLost
                    | SessionError::NoAnswer => StatusCode::SERVICE_UNAVAILABLE,
                    // Well-formed, but naming what does not exist.
                    SessionError::UnknownAgent(_) | SessionError::UnknownModel(_) => {
                        StatusCode::UNPROCESSABLE_ENTITY
                    }
                    _ => StatusCode::BAD_REQUEST,
                };
                let message = if status == StatusCode::SERVICE_UNAVAILABLE {
                    tracing::error!(error = %e, "request failed");
                    "the server cannot answer now; try again".to_owned()
                } else {
                    e.to_string()
                };
                (status, e.code(), message)
            }
        };
        crate::metrics::error_sent(code.as_str());
        (status, Json(error_body(code, &message))).into_response()
    }
}

/// 429 with `Retry-After` (whole seconds, rounded up) and the error body.
pub fn rate_limited(message: &str, retry_after_ms: u64) -> Response {
    let code = ErrorCode::RateLimitExceeded;
    crate::metrics::error_sent(code.as_str());
    let seconds = retry_after_ms.div_ceil(1000).max(1);
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(axum::http::header::RETRY_AFTER, seconds.to_string())],
        Json(error_body(code, message)),
    )
        .into_response()
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        Self::Session(SessionError::Persistence(e))
    }
}
