//! Chats in memory: one actor task per active chat.
//!
//! Owns the single writer of each chat's log ([`actor`]): it alone assigns
//! `seq`, appends through the group-committing [`LogWriter`](crate::store::LogWriter),
//! fans out to subscribed connections, holds pending input requests and UI
//! tool calls with their timeouts, and runs the agent as a child task.
//! [`Registry`] starts actors on demand and forgets idle ones.
//!
//! Uses `protocol`, `store` and `agent`. Never axum: transports reach a chat
//! only through [`Registry`] and read what it sends them ([`Outbound`]).

mod actor;
mod handle;
mod registry;
mod subscriber;

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use registry::{Caller, Registry};
pub use subscriber::{Closer, Outbound, Replay, Subscriber};

use crate::agent::AgentRegistry;
use crate::protocol::ErrorCode;
use crate::store::{LogWriter, Store, StoreError};

/// What every chat actor shares.
pub struct SessionContext {
    pub store: std::sync::Arc<dyn Store>,
    pub writer: LogWriter,
    pub agents: AgentRegistry,
    /// How long an input request waits for its answer.
    pub input_timeout: Duration,
    /// How long a UI tool call waits for the client's result.
    pub ui_timeout: Duration,
    /// How long a chat with no subscribers, run or pending request stays in memory.
    pub idle: Duration,
    /// Cancelled when the server shuts down.
    pub shutdown: CancellationToken,
    /// Every actor and run task is spawned on it, so shutdown can wait for them.
    pub tracker: TaskTracker,
}

/// Why a request to a chat failed. Each maps to a contract error code.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SessionError {
    /// No such chat, or not the caller's: the two are indistinguishable.
    #[error("no chat with that id belongs to you")]
    NotFound,
    #[error("no agent `{0}`")]
    UnknownAgent(String),
    #[error("no model `{0}`")]
    UnknownModel(String),
    #[error("the agent `{0}` of this chat is no longer configured")]
    AgentMissing(String),
    #[error("a run is in progress; wait for chat.run_complete or send chat.cancel")]
    RunInProgress,
    #[error("the chat is archived: its history stays readable, new turns are refused")]
    Archived,
    #[error("no pending request `{0}`")]
    RequestNotFound(String),
    #[error("invalid patch: {0}")]
    InvalidPatch(String),
    #[error("too many subscriptions")]
    TooManySubscriptions,
    #[error("the log could not be written: {0}")]
    Persistence(#[from] StoreError),
    #[error("the server is shutting down")]
    ShuttingDown,
}

impl SessionError {
    /// The contract error code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::NotFound => ErrorCode::ResumeFailed,
            Self::UnknownAgent(_) | Self::UnknownModel(_) | Self::Archived => {
                ErrorCode::WorkflowNotFound
            }
            Self::AgentMissing(_) => ErrorCode::AgentInitializationFailed,
            Self::RunInProgress => ErrorCode::RunInProgress,
            Self::RequestNotFound(_) => ErrorCode::InputRequestNotFound,
            Self::InvalidPatch(_) => ErrorCode::SchemaValidationFailed,
            Self::TooManySubscriptions => ErrorCode::RateLimitExceeded,
            Self::Persistence(_) => ErrorCode::PersistenceError,
            Self::ShuttingDown => ErrorCode::TransportError,
        }
    }

    /// Whether the same request may succeed later.
    pub fn recoverable(&self) -> bool {
        !matches!(
            self,
            Self::UnknownAgent(_) | Self::UnknownModel(_) | Self::AgentMissing(_) | Self::Archived
        )
    }
}

#[cfg(test)]
mod tests;
