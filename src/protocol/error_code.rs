//! The error codes a `chat.error` may carry (contract §2, seed 001's table).

use serde::{Deserialize, Serialize};

/// Every `error_code` the server sends. Seed 001's table plus `RUN_IN_PROGRESS`
/// and `UNAUTHORIZED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    SchemaValidationFailed,
    InputRequestNotFound,
    ToolExecutionError,
    UiToolTimeout,
    ResumeFailed,
    PersistenceError,
    WorkflowNotFound,
    AgentInitializationFailed,
    TransportError,
    RateLimitExceeded,
    RunInProgress,
    Unauthorized,
}

impl ErrorCode {
    /// The code as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SchemaValidationFailed => "SCHEMA_VALIDATION_FAILED",
            Self::InputRequestNotFound => "INPUT_REQUEST_NOT_FOUND",
            Self::ToolExecutionError => "TOOL_EXECUTION_ERROR",
            Self::UiToolTimeout => "UI_TOOL_TIMEOUT",
            Self::ResumeFailed => "RESUME_FAILED",
            Self::PersistenceError => "PERSISTENCE_ERROR",
            Self::WorkflowNotFound => "WORKFLOW_NOT_FOUND",
            Self::AgentInitializationFailed => "AGENT_INITIALIZATION_FAILED",
            Self::TransportError => "TRANSPORT_ERROR",
            Self::RateLimitExceeded => "RATE_LIMIT_EXCEEDED",
            Self::RunInProgress => "RUN_IN_PROGRESS",
            Self::Unauthorized => "UNAUTHORIZED",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
