//! Tools: what an agent's model may call, and the one path every call takes.
//!
//! A tool is a [`Tool`]: a name, a description, a JSON Schema for its input,
//! the gates every kind shares (`requires_approval`, `inject`,
//! `context_types`) and a [`ToolKind`], the source that runs it. One file per
//! kind says how a call of that kind runs and whether it waits for a person:
//!
//! - `ui`: the client renders a component; waits for its
//!   `inline_component.result`.
//! - `ask_user`: a `chat.input_request`; waits for the user's answer.
//! - `builtin`: tools implemented inside the server (`progress`).
//! - `http`: an HTTP endpoint, the caller's bearer forwarded.
//! - `database`: `ask_database` (seed 003): the model's SQL, run read-only on
//!   the chat's database.
//! - `analyst`: `ask_analyst` (seed 003): a Vega-Lite spec of the last result.
//! - `handoff`: a group's `handoff_to` (seed 001): a member names who speaks
//!   next.
//! - `mcp`: the tools of the MCP servers an agent file names, as each lists
//!   them now (`crate::mcp` keeps the connections).
//! - `frontend`: tools a client brings with one run (AG-UI's `tools`): UI
//!   tool calls of component type `frontend_tool`, answered by the client.
//!
//! `pipeline` is what every call goes through, whatever its kind: the
//! offer check, context injection, schema validation, the approval gate, the
//! `chat.tool_call`/`chat.tool_response` pair in the log, the metric, and what
//! goes back to the model: a preview's fixed answer (`preview`), a summary
//! (`summary`), capped. A call is a future: a cancelled run
//! drops it, so a kind holds nothing that must be undone.
//!
//! `record` what every kind logs; `tool` the [`Tool`] and [`ToolKind`]
//! types, checked from the agent file and dispatched to their kind.
//!
//! Adding a kind is one file here and one registration: its field in
//! [`spec::ToolSpec`] and its variant in [`ToolKind`] (the compiler then
//! names the matches in `tool.rs` that must learn it: [`Tool::from_spec`],
//! the dispatch and the metric label).
//!
//! Inside, in dependency order: `spec`, `record`, `env`; the kinds; `tool`;
//! `pipeline`. `mod.rs` only re-exports.
//!
//! Uses `link` (the run's channel to its chat), `llm`, `protocol`, `mcp`
//! and `databases` (for `ask_database`, `ask_analyst`); knows
//! nothing of agents or sessions.

mod analyst;
mod ask_user;
mod builtin;
pub mod context;
mod database;
mod env;
mod files_out;
mod frontend;
mod handoff;
mod http;
mod mcp;
mod pipeline;
mod preview;
mod record;
pub mod spec;
mod summary;
mod tool;
mod ui;

pub use builtin::Builtin;
pub use context::{CONTEXT_TOOL, Context};
pub use env::{CallEnv, Database};
pub use frontend::{ClientTool, FRONTEND, MAX_CLIENT_TOOLS, with_client_tools};
pub use handoff::{
    HANDOFF_TOOL, SPEAKER_TOOL, TO_USER, TRANSFER_PREFIX, handed_over, is_handoff, reserved,
};
pub use http::HttpTool;
pub use mcp::McpSource;
pub use pipeline::{
    APPROVAL, APPROVAL_SUFFIX, Approval, ask_approval, ask_approval_of, cap, execute,
};
pub use preview::PREVIEW_SUFFIX;
pub(crate) use record::respond;
pub use tool::{Tool, ToolKind};
pub use ui::ComponentType;
