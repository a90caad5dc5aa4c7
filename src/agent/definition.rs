//! Agent files: the YAML format of contract §5, parsed into typed structs.

use serde::Deserialize;

pub use super::script::{ArgKind, CallSpec, ErrorSpec, Rule, Script, StreamSpec};
use crate::tools::spec::ToolSpec;

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
    /// The agent's model; in a group, the default of its members and of
    /// its speaker selector (then optional if each names its own).
    #[serde(default)]
    pub model: Option<ModelSpec>,
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// Per seed 000 `context_type`, the prompt that replaces `system_prompt`
    /// for runs of that type (seed 000's `tablesRoleBlock`).
    #[serde(default)]
    pub context_prompts: std::collections::BTreeMap<String, String>,
    /// Model turns per run.
    #[serde(default = "default_max_turns")]
    pub max_turns: u32,
    #[serde(default)]
    pub agent_starts_first: bool,
    /// What a user's message sent during a run does when the message does
    /// not say (`reject`, `enqueue`, `interrupt`, `steer`).
    #[serde(default)]
    pub multitask_strategy: crate::protocol::MultitaskStrategy,
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
    /// Log the reasoning a model streams (`chat.reasoning`) for clients to
    /// show; `false` drops it.
    #[serde(default = "default_show_reasoning")]
    pub show_reasoning: bool,
    /// What all runs of this agent may use, every user's together.
    #[serde(default)]
    pub quota: Option<AgentQuota>,
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// MCP servers whose tools the agent may call (see `tools::mcp`): a
    /// list, or a map by name.
    #[serde(default, deserialize_with = "crate::tools::spec::mcp_servers")]
    pub mcp_servers: Vec<crate::tools::spec::McpServerSpec>,
    /// A conversation template (seed 004), see `templates`.
    #[serde(default)]
    pub template: Option<crate::templates::TemplateSpec>,
    /// A group chat (seed 001, AG2's group chat): members take turns.
    #[serde(default)]
    pub group: Option<GroupSpec>,
    /// An agent served over AG-UI by another framework: its runs are that
    /// server's (see `upstream`), instead of a model's.
    #[serde(default)]
    pub ag_ui: Option<crate::upstream::AgUiSpec>,
    /// `ag_ui:` agents: asking again a run a restart cut off is safe (also
    /// `ag_ui.idempotent`).
    #[serde(default)]
    pub idempotent: bool,
}

/// `group:`: the members of a group chat and how they take turns.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    pub members: Vec<MemberSpec>,
    #[serde(default)]
    pub speaker_selection: SelectionMethod,
    /// AG2's `max_round`: rounds per run, the run's opening message the
    /// first (so `max_rounds - 1` member turns); past it the run ends with
    /// `max_rounds`.
    #[serde(default = "default_max_rounds")]
    pub max_rounds: u32,
    /// AG2's `ContextVariables`: the group's shared state and its starting
    /// values; members read them in their prompts (`{name}`) and write
    /// them with the `update_context` tool.
    #[serde(default)]
    pub context_variables: Option<serde_json::Map<String, serde_json::Value>>,
    /// The member that opens every run (else the method picks).
    #[serde(default)]
    pub first: Option<String>,
    #[serde(default)]
    pub termination: TerminationSpec,
    #[serde(default)]
    pub handoffs: HandoffSpec,
    /// The model `auto` asks, and its prompt.
    #[serde(default)]
    pub selector: Option<SelectorSpec>,
    /// AG2's `allowed_or_disallowed_speaker_transitions`: for each member,
    /// who may (or may not) speak after it.
    #[serde(default)]
    pub allowed_or_disallowed_speaker_transitions:
        Option<std::collections::BTreeMap<String, Vec<String>>>,
    /// AG2's `speaker_transitions_type`: `allowed` or `disallowed`
    /// (required with the transitions).
    #[serde(default)]
    pub speaker_transitions_type: Option<TransitionsType>,
    /// AG2's `allow_repeat_speaker`: `true`, `false`, or the members that
    /// may speak twice in a row (not with the transitions).
    #[serde(default)]
    pub allow_repeat_speaker: Option<RepeatSpec>,
    /// AG2's `max_retries_for_selecting_speaker`: how often `auto` asks
    /// again when its selector names no single member.
    #[serde(default = "default_selector_retries")]
    pub max_retries_for_selecting_speaker: u32,
}

fn default_selector_retries() -> u32 {
    2
}

/// Whether a group's transitions list who may follow, or who may not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransitionsType {
    Allowed,
    Disallowed,
}

/// `allow_repeat_speaker`: for every member, or for those named.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum RepeatSpec {
    All(bool),
    Members(Vec<String>),
}

fn default_max_rounds() -> u32 {
    10
}

/// One member: inline (`name` and its own prompt, model, tools) or another
/// agent file (`agent: <id>`, taken as it is).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberSpec {
    /// Another agent file's id.
    #[serde(default)]
    pub agent: Option<String>,
    /// The member's name on the wire (`agent` fields); a referenced agent's
    /// id by default.
    #[serde(default)]
    pub name: Option<String>,
    /// What the member is for: `auto` selection reads it.
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// The group's `model` when absent.
    #[serde(default)]
    pub model: Option<ModelSpec>,
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// Model turns in one member turn (its tool loop); the group's `max_turns` by default.
    #[serde(default)]
    pub max_turns: Option<u32>,
    #[serde(default)]
    pub tool_call_format: Option<ToolCallFormat>,
    /// AG2's `register_nested_chats`: the member's turn is these chats, in
    /// order, each with another agent file (a plain agent or a group); the
    /// last one's summary is its reply.
    #[serde(default)]
    pub nested: Vec<NestedSpec>,
}

/// One nested chat: `agent` answers `message`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NestedSpec {
    /// The agent file (a plain agent or a group) that takes the chat.
    pub agent: String,
    /// What the member says to open it: `{message}` is the group's last
    /// message, `{carryover}` the earlier chats' summaries (AG2 appends
    /// them when the template does not place them). `{message}` by default.
    #[serde(default)]
    pub message: Option<String>,
    /// AG2's `summary_method`: what the chat gives back.
    #[serde(default)]
    pub summary: SummaryMethod,
}

/// How a nested chat is summed up (AG2's `summary_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SummaryMethod {
    /// The chat's last message.
    #[default]
    LastMsg,
    /// The member's model sums the chat up, with AG2's prompt.
    ReflectionWithLlm,
}

/// AG2's speaker selection methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SelectionMethod {
    /// The members in their order, round and round.
    #[default]
    RoundRobin,
    /// Any member but the last speaker, drawn from a generator seeded per
    /// chat and run.
    Random,
    /// The selector model reads the members' descriptions and the transcript.
    Auto,
    /// The user picks, answering a `chat.input_request` with options.
    Manual,
}

impl SelectionMethod {
    /// Its wire name (`chat.select_speaker.method`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RoundRobin => "round_robin",
            Self::Random => "random",
            Self::Auto => "auto",
            Self::Manual => "manual",
        }
    }
}

/// When a group run ends before `max_rounds`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct TerminationSpec {
    /// A member's turn whose text contains this ends the run (AG2's
    /// `is_termination_msg`, e.g. `TERMINATE`).
    #[serde(default)]
    pub marker: Option<String>,
    /// A regular expression a member's last text matches to end the run
    /// (AG2's `is_termination_msg` as a pattern, e.g. `TERMINATE\s*$` for
    /// a marker at the end only).
    #[serde(default)]
    pub pattern: Option<String>,
}

/// Handoffs, which override the selection method.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct HandoffSpec {
    /// Offer every member the `handoff_to(agent)` tool (`user` ends the run).
    #[serde(default)]
    pub tool: bool,
    /// After member `a` speaks without a handoff, member `b`, or `user`
    /// (the run ends; the user's answer goes back to `a`, unless `first`
    /// opens every run), `stay` (`a`
    /// again), `terminate` (the run ends), `select` (the method picks).
    #[serde(default)]
    pub after: std::collections::BTreeMap<String, String>,
    /// AG2's after-work target of the group: the same choices, for every
    /// member without its own `after`.
    #[serde(default)]
    pub after_work: Option<String>,
    /// AG2's `OnCondition`s, by member: a condition in words the member's
    /// model may choose, offered as a tool (`transfer_to_<target>_<n>`).
    #[serde(default)]
    pub conditions: std::collections::BTreeMap<String, Vec<ConditionSpec>>,
    /// AG2's `OnContextCondition`s, by member: an expression over the
    /// context variables, checked before the member's model is asked.
    #[serde(default)]
    pub context_conditions: std::collections::BTreeMap<String, Vec<ContextConditionSpec>>,
}

/// One `OnCondition`: hand to `to` when the member's model judges that
/// `condition` (words) holds.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConditionSpec {
    /// A member, `user`, `stay`, `terminate` or `select`.
    pub to: String,
    /// When to hand over, in words: the tool's description.
    pub condition: String,
    /// An expression over the context variables (`${verified}`): the tool
    /// is offered only while it holds.
    #[serde(default)]
    pub available: Option<String>,
}

/// One `OnContextCondition`: hand to `to` when `expression` holds.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextConditionSpec {
    /// A member, `user`, `stay`, `terminate` or `select`.
    pub to: String,
    /// AG2's `ContextExpression` (`${attempts} >= 3`).
    pub expression: String,
    /// Another expression: the condition counts only while it holds.
    #[serde(default)]
    pub available: Option<String>,
}

/// `auto` selection's model and prompt.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SelectorSpec {
    /// The group's `model` when absent.
    #[serde(default)]
    pub model: Option<ModelSpec>,
    /// The system prompt; `{roles}` becomes the members with their
    /// descriptions, `{agentlist}` their names.
    #[serde(default)]
    pub prompt: Option<String>,
}

fn default_show_reasoning() -> bool {
    true
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

/// An agent file's `quota:`: tokens or cost per UTC day and month, for all
/// its runs together.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentQuota {
    #[serde(default)]
    pub tokens_per_day: Option<u64>,
    #[serde(default)]
    pub tokens_per_month: Option<u64>,
    #[serde(default)]
    pub cost_per_day: Option<f64>,
    #[serde(default)]
    pub cost_per_month: Option<f64>,
    /// Runs of the agent in flight at once, on every node together.
    #[serde(default)]
    pub concurrent_runs: Option<u32>,
}

impl AgentQuota {
    /// Checked: 0 is no limit; a cost is a finite number of 0 or more.
    pub(super) fn quotas(self) -> Result<crate::config::Quotas, String> {
        let cost = |field: &str, v: Option<f64>| match v {
            Some(c) if !c.is_finite() || c < 0.0 => {
                Err(format!("quota.{field}: must be a number of 0 or more"))
            }
            Some(0.0) => Ok(None),
            c => Ok(c),
        };
        Ok(crate::config::Quotas {
            tokens_per_day: self.tokens_per_day.filter(|&n| n > 0),
            tokens_per_month: self.tokens_per_month.filter(|&n| n > 0),
            cost_per_day: cost("cost_per_day", self.cost_per_day)?,
            cost_per_month: cost("cost_per_month", self.cost_per_month)?,
            concurrent_runs: self.concurrent_runs.filter(|&n| n > 0),
        })
    }
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
    /// The kinds of file the model reads besides text (`image`, `pdf`)
    /// [default: the vendor's usual].
    #[serde(default)]
    pub inputs: Option<Vec<String>>,
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
