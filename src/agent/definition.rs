//! Agent files: the YAML format of contract §5, parsed into typed structs.

use serde::Deserialize;
use serde_json::Value;

use crate::protocol::{Display, ErrorCode};

/// One agent file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentFile {
    /// The id clients pass as `agent`.
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    pub model: ModelSpec,
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// Model turns per run.
    #[serde(default = "default_max_turns")]
    pub max_turns: u32,
    #[serde(default)]
    pub agent_starts_first: bool,
    /// A run taking longer ends with reason `timeout`.
    #[serde(default = "default_run_timeout")]
    pub run_timeout_seconds: u64,
    /// The history sent to the model is cut to this estimate (oldest first).
    #[serde(default = "default_prompt_budget")]
    pub prompt_budget_tokens: u64,
    /// Tool results longer than this reach the model cut, with a marker.
    #[serde(default = "default_max_tool_result_chars")]
    pub max_tool_result_chars: usize,
    /// `native` (the provider's tool calling) or `json` (seed 002's text format).
    #[serde(default)]
    pub tool_call_format: ToolCallFormat,
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// A conversation template (seed 004), see `agent::template`.
    #[serde(default)]
    pub template: Option<super::template::TemplateSpec>,
}

fn default_max_turns() -> u32 {
    20
}

fn default_run_timeout() -> u64 {
    600
}

fn default_prompt_budget() -> u64 {
    100_000
}

fn default_max_tool_result_chars() -> usize {
    20_000
}

/// How the model calls tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ToolCallFormat {
    /// The provider's own tool calling.
    #[default]
    Native,
    /// `{"tool": …, "parameters": …, "terminate": …}` in the reply text.
    Json,
}

/// What a model costs, per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub prompt_per_million: f64,
    pub completion_per_million: f64,
}

/// Which model serves the agent.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    pub provider: ProviderKind,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Rules of the `scripted` provider.
    #[serde(default)]
    pub script: Option<Script>,
    /// Makes `chat.usage_summary` carry a `cost`.
    #[serde(default)]
    pub price: Option<Price>,
}

/// The providers an agent file may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Openai,
    Anthropic,
    Gemini,
    Ollama,
    Scripted,
}

/// A tool the agent may call. Exactly one of `ui`, `input_request`, `builtin`
/// and `http` says what it is.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// JSON Schema of the input; `{type: object}` when absent.
    #[serde(default)]
    pub input_schema: Option<Value>,
    /// The client renders a component and answers with `inline_component.result`.
    #[serde(default)]
    pub ui: Option<UiSpec>,
    /// The user types an answer (`chat.input_request`).
    #[serde(default)]
    pub input_request: Option<InputRequestSpec>,
    /// A tool implemented inside the server, by name.
    #[serde(default)]
    pub builtin: Option<String>,
    /// An HTTP endpoint.
    #[serde(default)]
    pub http: Option<HttpSpec>,
    /// Ask the user before running (seed 002's approval gate).
    #[serde(default)]
    pub requires_approval: bool,
    /// The `context_type`s (seed 000) this tool is offered for; empty: all.
    #[serde(default)]
    pub context_types: Vec<String>,
    /// Arguments filled from the chat's context when the model leaves them
    /// out or gives them in the wrong form: `{workflow_id: context.workflow_id}`.
    #[serde(default)]
    pub inject: std::collections::BTreeMap<String, String>,
}

/// An HTTP tool: the input is the JSON body (the query string for GET and
/// DELETE), the caller's bearer token is forwarded.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSpec {
    #[serde(default = "default_method")]
    pub method: String,
    pub url: String,
    #[serde(default = "default_http_timeout")]
    pub timeout_seconds: u64,
    /// Bytes of the response read at most; the rest is cut.
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: usize,
    /// Extra headers sent with every call.
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
}

fn default_method() -> String {
    "POST".into()
}

fn default_http_timeout() -> u64 {
    30
}

fn default_max_response_bytes() -> usize {
    1 << 20
}

/// A UI tool.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UiSpec {
    /// A fixed component type…
    #[serde(default)]
    pub component_type: Option<String>,
    /// …or the name of the input field that carries it.
    #[serde(default)]
    pub component_type_from: Option<String>,
    #[serde(default)]
    pub display: Display,
}

/// An input-request tool.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputRequestSpec {
    /// The input field that holds the prompt (default `prompt`).
    #[serde(default = "default_prompt_field")]
    pub prompt_field: String,
    /// Whether the answer is a secret (never stored or logged).
    #[serde(default)]
    pub password: bool,
}

fn default_prompt_field() -> String {
    "prompt".into()
}

/// The `scripted` provider's rules: a model without weights.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Said when the agent starts first (no user message yet).
    #[serde(default)]
    pub greeting: Option<String>,
    /// Tried in order against the user's message; the first that matches answers.
    pub rules: Vec<Rule>,
}

/// What follows a rule's `prefix`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ArgKind {
    /// Any non-empty text.
    #[default]
    Text,
    /// A whole number from 1 to the rule's `max`.
    Count,
}

/// One rule. With neither `prefix` nor `exact` it matches every message.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(default)]
    pub prefix: Option<String>,
    #[serde(default)]
    pub exact: Option<String>,
    #[serde(default)]
    pub arg: ArgKind,
    /// Largest `count` argument accepted.
    #[serde(default = "default_max_count")]
    pub max: u64,
    /// Stream this text (templated), a word a chunk.
    #[serde(default)]
    pub reply: Option<String>,
    /// Stream `arg` numbered words (`w1 w2 …`), one chunk each.
    #[serde(default)]
    pub stream: Option<StreamSpec>,
    /// Call a tool with this input (templated).
    #[serde(default)]
    pub call: Option<CallSpec>,
    /// Fail the turn with this error.
    #[serde(default)]
    pub error: Option<ErrorSpec>,
    /// After `call`: the reply once the tool's result is back (templated).
    #[serde(default)]
    pub then: Option<String>,
}

fn default_max_count() -> u64 {
    100_000
}

/// A numbered-word stream.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamSpec {
    /// Pause between words.
    #[serde(default)]
    pub delay_ms: u64,
}

/// A scripted tool call.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallSpec {
    pub tool: String,
    #[serde(default)]
    pub input: Value,
}

/// A scripted failure.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorSpec {
    pub code: ErrorCode,
    pub message: String,
    #[serde(default)]
    pub recoverable: bool,
}
