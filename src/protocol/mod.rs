//! The wire: every message that crosses `/v1/ws`, as Rust types.
//!
//! Owns the inbound frames ([`ClientFrame`]) with their JSON-Schema validation,
//! the outbound envelope ([`Envelope`], [`EventKind`]), and the error codes of the
//! contract ([`ErrorCode`]). It is serde and `jsonschema` only: no tokio, axum or
//! sqlx here, so every other module can depend on it.

mod attachment;
mod error_code;
mod frames;
mod inbound;
pub mod limits;
mod outbound;
mod speakers;
mod validate;

pub use attachment::{Attachment, FileRef, MAX_ATTACHMENTS};
pub use error_code::ErrorCode;
pub use frames::{connection_error, pong, resume_boundary};
pub use inbound::{ClientFrame, InboundError, parse_client_frame};
pub use outbound::{
    AgentUsage, BranchReason, ConversationState, Display, Envelope, EventKind, MultitaskStrategy,
    RunEndReason, TitleSource, TitleUsage, mark_replay, now_ts,
};
pub use speakers::{NESTED, SYSTEM_SPEAKER, is_nested};
