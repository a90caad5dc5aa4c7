//! The wires: pure encoders from the chat log's envelopes to each wire's
//! frames, with no I/O, each unit-tested without a server. The handlers in
//! `http` are thin on top: they read the log (live and replayed), run it
//! through an encoder, and write frames.
//!
//! - native (`/v1/ws`, REST pages): the envelopes' JSON as stored; nothing
//!   to encode.
//! - SSE dialects (`sse`, one file each): `chat` (the native protocol over
//!   SSE), `agent_chat` (seed 000), `agent_host` (seed 004), `threads`
//!   (seed 003).
//! - `template_ws`: seed 004's `/api/chat/ws`.
//!
//! A new wire is one file here and a thin handler in `http`; a new SSE
//! dialect is one file here and its [`Dialect`] variant (`dialect.rs`).
//!
//! `hitl` is what every dialect says about a step waiting for a person.
//! `framer` turns any encoder's output into a stream's events with their
//! ids (`event_id`), rejoins included.
//!
//! Uses `protocol`, and the names `tools` and `templates` give their calls.

mod ag_ui;
mod agent_chat;
mod agent_host;
mod ai_sdk;
mod chat;
mod dialect;
mod event_id;
mod framer;
mod hitl;
mod sse;
pub mod template_ws;
mod threads;
mod ui_messages;

pub use ag_ui::AgUi;
pub use ai_sdk::AiSdk;
pub use dialect::Dialect;
pub use event_id::{At, EventId};
pub use framer::{Event, Framer, Shows};
pub use sse::{Encoder, Out, answer_text, as_text, text_parts};
pub use ui_messages::{RunOnPath, runs, ui_messages};

#[cfg(test)]
mod test_log;
#[cfg(test)]
#[path = "sse_tests.rs"]
mod tests;
