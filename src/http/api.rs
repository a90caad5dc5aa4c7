//! The shapes of the HTTP API's JSON bodies. Every handler answers with these
//! types, and `/openapi.json` is generated from them (`utoipa`), so the
//! description cannot drift from the code.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

/// `GET /healthz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok` once the store answers.
    pub status: String,
}

/// The one error shape of every route.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// A contract error code, e.g. `SCHEMA_VALIDATION_FAILED`.
    pub code: String,
    pub message: String,
}

/// An agent, as a tile (seed 004).
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentInfo {
    pub id: String,
    pub name: String,
    pub description: String,
    pub agent_starts_first: bool,
    /// A group chat's members, in order (absent for other agents).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<MemberInfo>>,
    /// Its MCP servers, each with where it stands (`starting`, `ready`,
    /// `down`) and how many tools it lists (absent for an agent with none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<Vec<crate::mcp::Status>>,
}

/// A member of a group chat: its name on the wire (`agent` fields) and
/// what it is for.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemberInfo {
    pub name: String,
    pub description: String,
}

/// `GET /v1/agents`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentList {
    pub agents: Vec<AgentInfo>,
}

/// `POST /v1/chats`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateChat {
    pub agent: String,
    #[serde(default)]
    pub chat_id: Option<Uuid>,
    /// The first user turn.
    #[serde(default)]
    pub message: Option<String>,
    /// UI state kept with the chat and given to the agent.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub context: Option<Map<String, Value>>,
    /// Files the first message attaches, uploaded to `chat_id` before
    /// (`POST /v1/chats/{id}/files`): a first message of files alone needs
    /// no `message`.
    #[serde(default)]
    pub attachments: Vec<FileRefBody>,
}

/// A file a message attaches: one the caller uploaded to the same chat.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FileRefBody {
    pub file_id: Uuid,
}

/// The files of a request body, as the session takes them.
pub(super) fn file_refs(refs: &[FileRefBody]) -> Vec<crate::protocol::FileRef> {
    refs.iter()
        .map(|r| crate::protocol::FileRef { file_id: r.file_id })
        .collect()
}

/// `POST /v1/chats/{id}/messages`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendMessage {
    pub text: String,
    #[serde(default)]
    pub client_msg_id: Option<String>,
    /// What the message does if a run is in flight: `reject`
    /// (`RUN_IN_PROGRESS`), `enqueue`, `interrupt` or `steer` (absent: the
    /// agent's choice).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub multitask_strategy: Option<crate::protocol::MultitaskStrategy>,
    /// Files the message attaches (at most `max_files_per_message`), each
    /// uploaded to this chat: logged on the user's `chat.text`, sent to
    /// the model in its vendor's own form. `text` may then be empty.
    #[serde(default)]
    pub attachments: Vec<FileRefBody>,
}

/// `POST /v1/chats/{id}/messages` → 202.
#[derive(Debug, Serialize, ToSchema)]
pub struct Accepted {
    pub chat_id: Uuid,
    pub accepted: bool,
}

/// `POST /v1/chats/{id}/inputs/{request_id}`: the answer to a
/// `chat.input_request` (as `user.input.submit`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InputAnswer {
    pub text: String,
}

/// `POST /v1/chats/{id}/components/{corr}`: the result of a UI tool call (as
/// `inline_component.result`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ComponentAnswer {
    pub data: Value,
}

/// `POST /v1/chats/{id}/approvals/{tool_call_id}`: grant or refuse one call.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalAnswer {
    pub approved: bool,
    /// Told to the model with a refusal.
    #[serde(default)]
    pub reason: Option<String>,
}

/// `POST /v1/chats/{id}/approvals`: several calls at once (seed 002's "approve
/// all"), each decided on its own.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalBatch {
    pub decisions: Vec<ApprovalDecision>,
}

/// One decision of an [`ApprovalBatch`].
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalDecision {
    pub tool_call_id: String,
    pub approved: bool,
    #[serde(default)]
    pub reason: Option<String>,
}

/// An answer taken (the run goes on; follow it on any stream).
#[derive(Debug, Serialize, ToSchema)]
pub struct Answered {
    pub chat_id: Uuid,
    /// The `corr` (for an input request, the `request_id`) answered.
    pub corr: String,
    pub accepted: bool,
}

/// `POST /v1/chats/{id}/approvals` → 200: each decision's outcome, in order.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApprovalResults {
    pub chat_id: Uuid,
    pub results: Vec<ApprovalResult>,
}

/// The outcome of one decision.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApprovalResult {
    pub tool_call_id: String,
    pub accepted: bool,
    /// Why it was not (`INPUT_REQUEST_NOT_FOUND`: no such open approval).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

/// `POST /v1/chats/{id}/cancel`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Cancelled {
    pub chat_id: Uuid,
    pub cancelled: bool,
}

/// A JSON page of a chat's log.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventsPage {
    pub chat_id: Uuid,
    /// Envelopes as on the WebSocket (see `protocol/outbound/`).
    #[schema(value_type = Vec<Object>)]
    pub events: Vec<Value>,
    /// Pass as `after` for the next page; `null` on the last one.
    pub next_after: Option<u64>,
}

/// A configured model.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelInfo {
    pub name: String,
    pub provider: String,
    pub aliases: Vec<String>,
    /// Its key is set and its server answers.
    pub available: bool,
}

/// `GET /v1/chats/{id}/model`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatModels {
    pub chat_id: Uuid,
    pub model: Option<String>,
    pub models: Vec<ModelInfo>,
}

/// `POST /v1/chats/{id}/model` and `POST /chat/{thread_id}/model`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetModel {
    /// A model name or alias.
    pub name: String,
}

/// `POST /v1/chats/{id}/model`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelSet {
    pub chat_id: Uuid,
    pub model: String,
}

/// `POST /chat` (seed 003).
#[derive(Debug, Serialize, ToSchema)]
pub struct ThreadCreated {
    pub thread_id: Uuid,
}

/// `POST /chat` body (optional).
#[derive(Debug, Deserialize, Default, ToSchema)]
pub struct ThreadCreate {
    #[serde(default)]
    pub agent: Option<String>,
}

/// `POST /chat/{thread_id}/message`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ThreadMessage {
    pub message: String,
}

/// `GET /chat/{thread_id}/model` (seed 003).
#[derive(Debug, Serialize, ToSchema)]
pub struct ThreadModels {
    pub thread_id: Uuid,
    pub model: Option<String>,
    /// Model name → available.
    pub models: BTreeMap<String, bool>,
}

/// `POST /chat/{thread_id}/model`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ThreadModelSet {
    pub thread_id: Uuid,
    pub model: String,
}

/// `POST /v1/agent/chat` (seed 000).
#[derive(Debug, Deserialize, ToSchema)]
pub struct AgentChatRequest {
    pub message: String,
    /// Selects the agent's tools (`context_types`).
    pub context_type: String,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub context: Option<Map<String, Value>>,
    /// A chat id, or any string naming a stable chat of the caller's.
    #[serde(default)]
    pub conversation_id: Option<String>,
    /// The agent of a new conversation [default: the configured default].
    #[serde(default)]
    pub agent: Option<String>,
}

/// `POST /api/chat/send` (seed 004).
#[derive(Debug, Deserialize, ToSchema)]
pub struct AgentHostRequest {
    pub message: String,
    #[serde(default)]
    pub conversation_id: Option<String>,
    /// Switches the chat's model first.
    #[serde(default)]
    pub model_id: Option<String>,
    #[serde(default)]
    pub agent: Option<String>,
}

/// An OpenAI model entry.
#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiModel {
    pub id: String,
    pub object: String,
    pub created: u64,
    pub owned_by: String,
}

/// `GET /v1/models`.
#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiModelList {
    pub object: String,
    pub data: Vec<OpenAiModel>,
}

/// `GET /v1/system-prompts/{agent}/enhanced`.
#[derive(Debug, Serialize, ToSchema)]
pub struct EnhancedPrompt {
    pub agent: String,
    /// The agent's own system prompt.
    pub base: String,
    /// With the tool definitions and the JSON tool-call format.
    pub enhanced: String,
    pub tools: Vec<String>,
}

/// `POST /v1/connections` and `PUT /v1/connections/{id}`: a database
/// connection (seed 003). `password`: on `PUT`, absent keeps the one kept,
/// `null` removes it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectionBody {
    pub name: String,
    /// `postgres` or `sqlite`.
    pub driver: String,
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub database: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
    /// SQLite: a file in the server's `connection_files_dir`.
    #[serde(default)]
    pub path: Option<String>,
    /// PostgreSQL: bind even a role that can do more than read (a
    /// superuser, a member of `pg_write_server_files`,
    /// `pg_execute_server_program`, `pg_signal_backend` or
    /// `pg_read_server_files`); the server logs a warning.
    #[serde(default)]
    pub allow_privileged_role: bool,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub password: Option<Option<String>>,
}

/// A field that is present, even as `null`.
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A database connection: never its password.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConnectionView {
    pub id: Uuid,
    pub name: String,
    pub driver: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Present (`true`) only when set.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_privileged_role: bool,
    pub has_password: bool,
    pub created_at: String,
    pub updated_at: String,
}

/// `GET /v1/connections`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConnectionList {
    pub connections: Vec<ConnectionView>,
}

/// `POST /v1/chats/{id}/connection`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BindConnection {
    pub connection_id: Uuid,
}

/// Seed 003's `GET /chat/{thread_id}/state`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatStateView {
    pub thread_id: Uuid,
    /// The chat's model (`null`: the agent's own).
    pub model_name: Option<String>,
    /// The markdown snapshot of the connected database.
    pub db_schema: Option<String>,
    pub connection: Option<ConnectionRef>,
    /// The last SQL result, `{columns, rows, truncated?}`.
    pub sql_result: Option<Value>,
}

/// Seed 003's `connection`: `{user_id, connection_id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConnectionRef {
    pub user_id: String,
    pub connection_id: Uuid,
}

/// A workflow (seed 002): what a UI lists, and its form.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkflowInfo {
    pub id: String,
    pub title: String,
    pub description: String,
    /// The UI's grouping.
    pub category: String,
    /// What it does: `http`, `prompt` or `steps`.
    pub kind: String,
    /// The user approves each run first.
    pub requires_approval: bool,
    /// The JSON Schema of its parameters (`type: object`).
    #[schema(value_type = Object)]
    pub parameters: Value,
}

/// `GET /v1/workflows`.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkflowList {
    pub workflows: Vec<WorkflowInfo>,
}

/// A category and how many workflows it holds.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkflowCategory {
    pub name: String,
    pub count: usize,
}

/// `GET /v1/workflows/categories`.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkflowCategories {
    pub categories: Vec<WorkflowCategory>,
}

/// `POST /v1/chats/{id}/workflows/{workflow_id}`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowInvocation {
    /// The form's values, checked against the workflow's schema [default: {}].
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<Map<String, Value>>,
}

/// A workflow invoked: the `corr` of its `chat.tool_call` in the log.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkflowInvoked {
    pub chat_id: Uuid,
    pub workflow_id: String,
    pub corr: String,
}
