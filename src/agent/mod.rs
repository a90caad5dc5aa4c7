//! Agents: agent files, the run loop and the model turn.
//!
//! Owns agent files ([`definition`], checked by [`build`] into an [`Agent`]),
//! the [`AgentRegistry`], the providers an agent can name, the `scripted`
//! provider, group chats (`group`), and [`runtime`], which drives one run and
//! talks to its chat only through a [`crate::link::RunLink`]. Its tools come
//! from [`crate::tools`], a template's walk from [`crate::templates`]. Knows
//! nothing of sessions, stores or transports.
//!
//! Inside, in dependency order: `definition`; `providers`, `scripted`;
//! `models`, `build`; `turn`, `speak` (one speaker's tool loop); `group`,
//! `workflow` (a user-invoked workflow's run); `registry`; `runtime`. No file imports one after it, and `mod.rs` only
//! re-exports.

mod build;
pub mod definition;
mod group;
mod models;
mod prompt;
mod providers;
mod registry;
pub mod runtime;
mod script;
mod scripted;
mod speak;
mod speaker;
mod tally;
mod turn;
mod upstream;
mod workflow;

pub use crate::llm::Provider;
pub use crate::tools::APPROVAL;
pub use build::{Agent, MCP_SETTLE};
pub use group::{SPEAKER_REQUEST, SPEAKER_TOOL};
pub use models::{ModelEntry, ModelRegistry};
pub use providers::build_provider;
pub use registry::{AgentFileError, AgentRegistry};
pub use scripted::ScriptedProvider;
pub use speak::MAX_TURNS_ERROR;
pub use upstream::INTERRUPT_TOOL;
