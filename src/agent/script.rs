//! The `scripted` provider's rules, as an agent file writes them (its
//! `model.script`): a model without weights (`scripted` answers by them).

use serde::Deserialize;
use serde_json::Value;

use crate::protocol::ErrorCode;

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
    /// Stream this reasoning (templated), a word a chunk, before the rest
    /// of the turn (as a thinking model does).
    #[serde(default)]
    pub think: Option<String>,
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
