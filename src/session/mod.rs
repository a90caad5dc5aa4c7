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
mod conversation_id;
mod feed;
mod handle;
mod node;
mod quotas;
mod registry;
mod subscriber;
pub mod tree;
mod usage_quota;

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use conversation_id::{conversation_chat, is_conversation_chat, marked_chat};
pub use feed::{Feed, FeedRx};
pub use node::{Node, start as start_node};
pub use quotas::{Quotas, Slot, UserSlots};
pub use registry::{Branches, Caller, MessageRef, Registry};
pub use subscriber::{Closer, Outbound, OutboundRx, Replay, Subscriber};

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
    /// The largest client message (`max_message_bytes`): also the bound of a
    /// component state an `artifact_patch` may build.
    pub max_message_bytes: usize,
    /// Versions one point of a conversation may have.
    pub max_versions_per_point: usize,
    /// Versions one chat's edits and regenerates may make (its switches:
    /// ten times as many).
    pub max_branches_per_chat: usize,
    /// Per-user rate limits and quotas.
    pub quotas: Quotas,
    /// What one user's runs may use per day and month (`quota_user_*`).
    pub usage_quotas: crate::config::Quotas,
    /// The limits on files: per message, per file (a tool's too), per user.
    pub files: crate::config::FileLimits,
    /// Cancelled when the server shuts down.
    pub shutdown: CancellationToken,
    /// Every actor and run task is spawned on it, so shutdown can wait for them.
    pub tracker: TaskTracker,
    /// This node's membership of a cluster (PostgreSQL); `None` on SQLite.
    pub node: Option<std::sync::Arc<Node>>,
    /// Users' databases (seed 003), for the runs' `ask_database` tool.
    pub connections: Option<std::sync::Arc<crate::databases::Connections>>,
    /// A run cut off by a restart (or a dead node) is continued from the
    /// log rather than ended `interrupted` (`continue_runs_after_restart`).
    pub continue_runs: bool,
    /// Tests only: how long a continued run waits before it starts (it
    /// waits on its requests again only then).
    pub continue_delay: Duration,
    /// The model that titles chats (`title_model`).
    pub title_model: Option<String>,
    /// Chats are titled after their first run (`auto_titles`).
    pub auto_titles: bool,
    /// Users' feeds on this node.
    pub feed: std::sync::Arc<Feed>,
}

/// Why a request to a chat failed. Each maps to a contract error code.
/// Serializable, so an answer from the node owning a chat reaches the
/// client of another node unchanged.
#[derive(Debug, Clone, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[serde(tag = "error", content = "detail", rename_all = "snake_case")]
pub enum SessionError {
    /// No such chat, or not the caller's: the two are indistinguishable.
    #[error("no chat with that id belongs to you")]
    NotFound,
    #[error("no agent `{0}`")]
    UnknownAgent(String),
    #[error("no model `{0}`")]
    UnknownModel(String),
    /// No such workflow, or not one the caller may run.
    #[error("no workflow `{0}`")]
    UnknownWorkflow(String),
    /// Parameters the workflow's schema refuses, each fault named.
    #[error("invalid parameters: {0}")]
    InvalidParameters(String),
    #[error("the agent `{0}` of this chat is no longer configured")]
    AgentMissing(String),
    #[error("a run is in progress; wait for chat.run_complete or send chat.cancel")]
    RunInProgress,
    #[error("the chat is archived: its history stays readable, new turns are refused")]
    Archived,
    #[error("no pending request `{0}`")]
    RequestNotFound(String),
    /// A file a message attaches that is not one of the caller's files of
    /// this chat (`FILE_NOT_FOUND`).
    #[error("no file `{0}` of yours belongs to this chat; upload it to the chat first")]
    FileNotFound(uuid::Uuid),
    /// A seq named as a message to edit, answer again or switch to that is
    /// not one (`MESSAGE_NOT_FOUND`).
    #[error("{0}")]
    MessageNotFound(String),
    /// A branch past the chat's limits (`BRANCH_LIMIT_EXCEEDED`).
    #[error("{0}")]
    BranchLimit(String),
    /// An answer to a request that is pending, but of another kind: the
    /// message says which message and route answer it.
    #[error("{0}")]
    OtherKind(String),
    #[error("invalid patch: {0}")]
    InvalidPatch(String),
    /// A template conversation cannot go from its state to the one asked.
    #[error("{0}")]
    IllegalTransition(String),
    /// A result a widget refuses (an option it did not offer, a text too short…).
    #[error("invalid answer: {0}")]
    InvalidAnswer(String),
    #[error("too many subscriptions")]
    TooManySubscriptions,
    /// A text or value over the limits every route shares (`protocol::limits`).
    #[error("{0}")]
    TooLarge(String),
    /// A rate limit or quota was reached (`RATE_LIMIT_EXCEEDED`).
    #[error("rate limit: too many {what}; retry in {retry_after_ms} ms")]
    RateLimited { what: String, retry_after_ms: u64 },
    /// A new chat may not take an id of the kind the server derives from
    /// conversation ids ([`conversation_chat`]).
    #[error("chat ids of this kind are reserved for conversation ids; pick a random UUID")]
    ReservedId,
    #[error("the log could not be written: {0}")]
    #[serde(with = "store_error_text")]
    Persistence(#[from] StoreError),
    #[error("the server is shutting down")]
    ShuttingDown,
    /// The chat's owner changed while the request travelled; the node that
    /// took it from the client asks again.
    #[error("the chat moved to another node; retry")]
    Moved,
    /// The node running the chat took the request but stopped (or did not
    /// answer) before answering: whether it took effect is unknown.
    #[error("the node running this chat did not answer; check the chat's log and retry")]
    NodeLost,
    /// The chat's actor did not answer within the registry's deadline:
    /// whether the request took effect is unknown.
    #[error(
        "the chat did not answer in time; whether the request took effect is unknown: check the chat's log, then retry"
    )]
    NoAnswer,
}

/// A store error crosses nodes as its text.
mod store_error_text {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::store::StoreError;

    pub fn serialize<S: Serializer>(e: &StoreError, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&e.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<StoreError, D::Error> {
        Ok(StoreError::Remote(String::deserialize(d)?.into()))
    }
}

impl SessionError {
    /// The contract error code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::NotFound => ErrorCode::ResumeFailed,
            Self::UnknownAgent(_)
            | Self::UnknownModel(_)
            | Self::UnknownWorkflow(_)
            | Self::Archived => ErrorCode::WorkflowNotFound,
            Self::AgentMissing(_) => ErrorCode::AgentInitializationFailed,
            Self::RunInProgress => ErrorCode::RunInProgress,
            Self::RequestNotFound(_) => ErrorCode::InputRequestNotFound,
            Self::MessageNotFound(_) => ErrorCode::MessageNotFound,
            Self::FileNotFound(_) => ErrorCode::FileNotFound,
            Self::BranchLimit(_) => ErrorCode::BranchLimitExceeded,
            Self::OtherKind(_) => ErrorCode::RequestKindMismatch,
            Self::InvalidPatch(_)
            | Self::InvalidAnswer(_)
            | Self::InvalidParameters(_)
            | Self::IllegalTransition(_)
            | Self::TooLarge(_)
            | Self::ReservedId => ErrorCode::SchemaValidationFailed,
            Self::TooManySubscriptions | Self::RateLimited { .. } => ErrorCode::RateLimitExceeded,
            Self::Persistence(_) => ErrorCode::PersistenceError,
            Self::ShuttingDown | Self::Moved | Self::NodeLost | Self::NoAnswer => {
                ErrorCode::TransportError
            }
        }
    }

    /// What a program needs besides the code: how long to wait, for a rate limit.
    pub fn details(&self) -> Option<serde_json::Value> {
        match self {
            Self::RateLimited { retry_after_ms, .. } => {
                Some(serde_json::json!({ "retry_after_ms": retry_after_ms }))
            }
            _ => None,
        }
    }

    /// Whether the same request may succeed later.
    pub fn recoverable(&self) -> bool {
        !matches!(
            self,
            Self::UnknownAgent(_)
                | Self::UnknownModel(_)
                | Self::UnknownWorkflow(_)
                | Self::AgentMissing(_)
                | Self::Archived
        )
    }
}

#[cfg(test)]
mod tests;
