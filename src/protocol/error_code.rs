//! The error codes a `chat.error` may carry (contract §2, seed 001's table).

use serde::{Deserialize, Serialize};

/// Every `error_code` the server sends. Seed 001's table plus `RUN_IN_PROGRESS`,
/// `UNAUTHORIZED`, the codes of HTTP routes that name what went wrong
/// there (`CONNECTION_NOT_FOUND`, `MASTER_KEY_MISMATCH`,
/// `REQUEST_KIND_MISMATCH`), and the tree's (`MESSAGE_NOT_FOUND`,
/// `BRANCH_LIMIT_EXCEEDED`).
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
    /// No database connection of that id is the caller's.
    ConnectionNotFound,
    /// A connection's password was sealed under another master key.
    MasterKeyMismatch,
    /// An answer sent to the route (or message) of another kind of request:
    /// an input answered as a component, or the other way round.
    RequestKindMismatch,
    /// A seq named as a message to edit, answer again or switch to that is
    /// not one in the chat.
    MessageNotFound,
    /// An edit, regenerate or switch past the chat's branch limits.
    BranchLimitExceeded,
    /// No file of that id is the caller's.
    FileNotFound,
    /// A run stopped (or not started) at a usage quota.
    QuotaExceeded,
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
            Self::ConnectionNotFound => "CONNECTION_NOT_FOUND",
            Self::MasterKeyMismatch => "MASTER_KEY_MISMATCH",
            Self::RequestKindMismatch => "REQUEST_KIND_MISMATCH",
            Self::MessageNotFound => "MESSAGE_NOT_FOUND",
            Self::BranchLimitExceeded => "BRANCH_LIMIT_EXCEEDED",
            Self::FileNotFound => "FILE_NOT_FOUND",
            Self::QuotaExceeded => "QUOTA_EXCEEDED",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
