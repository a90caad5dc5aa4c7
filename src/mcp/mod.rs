//! MCP servers as tool sources: the client side of the Model Context
//! Protocol, over `rmcp` (the official Rust SDK).
//!
//! An [`McpServer`] is one server an agent file names: a child process
//! spoken to over stdio (with a cleared environment but for a few variables
//! and its own `env`), or a Streamable HTTP endpoint. A supervisor task
//! connects it, lists its tools (again on `notifications/tools/list_changed`),
//! and when it dies or cannot be reached, marks it down and connects again
//! with backoff; a server that fails touches only its own tools. A call
//! ([`McpServer::call`]) carries a timeout (reset by the server's progress),
//! reports progress, and sends `notifications/cancelled` when it is dropped
//! before its answer (a run cancelled mid-call).
//!
//! What a tool *is* to a model (names, gates, the log) is `tools::mcp`'s;
//! this module only connects, lists and calls. Uses nothing of the crate.

mod call;
mod connect;
mod env;
mod handler;
mod http;
mod server;
mod tap;

pub use call::{CallError, Called};
pub use connect::{McpTool, Source};
pub use env::{INHERITED, expand, read_env_file};
pub use handler::Progress;
pub use server::{MAX_INSTRUCTIONS, McpServer, State, Status};
