//! Outbound messages: the chat-scoped envelope and the few connection-level
//! frames (`pong`, per-connection `chat.error`, `chat.resume_boundary`).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::ErrorCode;

/// How a UI tool's component is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Display {
    /// In the message flow, below the agent's message.
    #[default]
    Inline,
    /// In a side panel; the client may patch it with `artifact_patch`.
    Artifact,
}

/// The states of a template conversation (seed 004 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConversationState {
    Pending,
    Active,
    AwaitingWidget,
    AwaitingUser,
    Paused,
    Completed,
    Terminated,
    Archived,
}

impl ConversationState {
    /// Its wire and stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Active => "active",
            Self::AwaitingWidget => "awaiting_widget",
            Self::AwaitingUser => "awaiting_user",
            Self::Paused => "paused",
            Self::Completed => "completed",
            Self::Terminated => "terminated",
            Self::Archived => "archived",
        }
    }

    /// The state named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(s.to_owned())).ok()
    }

    /// Whether seed 004 §4 allows going from `self` to `to`. **Choice**:
    /// pausing is allowed while a widget or an input waits too, and a cancel
    /// (or a run ending on an error) terminates from any state but the ends.
    pub fn allows(self, to: Self) -> bool {
        use ConversationState::*;
        matches!(
            (self, to),
            (Pending, Active)
                | (
                    Active,
                    AwaitingWidget | AwaitingUser | Paused | Completed | Terminated
                )
                | (AwaitingWidget | AwaitingUser, Active | Paused | Terminated)
                | (Paused, Active | AwaitingWidget | AwaitingUser | Terminated)
                | (Pending, Terminated)
                | (Completed | Terminated, Archived)
        )
    }
}

/// Why a run ended (`chat.run_complete.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunEndReason {
    Completed,
    Cancelled,
    MaxTurns,
    /// A group's `max_rounds` were taken (AG2's ordinary stop).
    MaxRounds,
    Timeout,
    Error,
    Interrupted,
}

impl RunEndReason {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Cancelled => "cancelled",
            Self::MaxTurns => "max_turns",
            Self::MaxRounds => "max_rounds",
            Self::Timeout => "timeout",
            Self::Error => "error",
            Self::Interrupted => "interrupted",
        }
    }
}

/// One member's share of a group run's usage (`chat.usage_summary.by_agent`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct AgentUsage {
    pub total_tokens: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

/// What a user's message sent during a run does (`multitask_strategy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MultitaskStrategy {
    /// Refused: `RUN_IN_PROGRESS`.
    #[default]
    Reject,
    /// Runs after the current run (and those queued before it), in order.
    Enqueue,
    /// The current run is cancelled (its words so far kept) and a run for
    /// this message starts.
    Interrupt,
    /// Given to the running agent before its next model turn.
    Steer,
}

/// What made a `chat.branch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BranchReason {
    /// An edit of a user's message: the edited text follows.
    Edit,
    /// A new answer to a user's message: the new run follows.
    Regenerate,
    /// A switch to another version.
    Switch,
}

/// Who gave a chat its title (`chat.title`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TitleSource {
    /// Made by a model from the first exchange.
    Model,
    /// The first words of the first exchange (no model, or it failed).
    Words,
    /// The user renamed the chat.
    User,
    /// The chat's template names it.
    Template,
    /// The workflow the chat began with names it.
    Workflow,
}

/// The tokens a title took (`chat.title` made by a model).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TitleUsage {
    pub total_tokens: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// The body of a chat-scoped envelope: its `type` and its own fields.
///
/// Serialized with the fields at top level (contract §1: no `data` wrapper).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum EventKind {
    /// A finished turn. The user's own messages carry `agent: "user"`.
    #[serde(rename = "chat.text")]
    Text { agent: String, content: String },
    /// A streamed fragment of the turn that a later `chat.text` completes.
    #[serde(rename = "chat.print")]
    Print {
        agent: String,
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        corr: Option<String>,
    },
    /// A streamed fragment of the model's reasoning (its "thinking"), when
    /// the provider streams it and the agent shows it; the turn's
    /// `chat.print`s and `chat.text` follow. Never part of the history a
    /// model is sent.
    #[serde(rename = "chat.reasoning")]
    Reasoning { agent: String, content: String },
    /// A model turn of the agent loop begins.
    #[serde(rename = "chat.select_speaker")]
    SelectSpeaker {
        agent: String,
        /// Group runs only: how this member was chosen (`round_robin`,
        /// `random`, `auto`, `manual`, `handoff`, `after`, `first`), or
        /// `continue` for a member's next model turn after its tool results.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        method: Option<String>,
        /// Group runs only: why, in words (a selector's answer that named no
        /// member, a random pick's seed and draw).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The run waits for the user to type something.
    #[serde(rename = "chat.input_request")]
    InputRequest {
        request_id: String,
        prompt: String,
        corr: String,
        password: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_seconds: Option<u64>,
        /// The answers to pick from, when the request is a choice (a group's
        /// `manual` speaker selection): the chat refuses any other answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        options: Option<Vec<String>>,
        /// The input-request tool that asks (absent for a group's speaker
        /// choice): what a run continued after a restart waits on again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_name: Option<String>,
    },
    /// The answer to an input request was accepted.
    #[serde(rename = "chat.input_ack")]
    InputAck { request_id: String, corr: String },
    /// Nobody answered an input request in time.
    #[serde(rename = "chat.input_timeout")]
    InputTimeout {
        request_id: String,
        timeout_seconds: u64,
        corr: String,
    },
    /// A tool call: a UI component (`component_type`) or a backend tool (`null`).
    #[serde(rename = "chat.tool_call")]
    ToolCall {
        tool_name: String,
        component_type: Option<String>,
        awaiting_response: bool,
        payload: Value,
        corr: String,
        display: Display,
        /// Group runs only: the member that made the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
    },
    /// The result of a tool call.
    #[serde(rename = "chat.tool_response")]
    ToolResponse {
        tool_name: String,
        content: Value,
        success: bool,
        corr: String,
        /// Group runs only: the member whose call this answers.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
    },
    /// A template conversation changed state (seed 004 §4).
    #[serde(rename = "chat.state")]
    State {
        state: ConversationState,
        /// The state it left (`null` for the first).
        previous: Option<ConversationState>,
    },
    /// Where a template conversation stands (seed 004 §2.5): sent as each
    /// item begins, and once more, with `current_item == total_items`, at
    /// the end.
    #[serde(rename = "chat.progress")]
    Progress {
        /// The 0-based index of the item being shown.
        current_item: u32,
        total_items: u32,
        item_id: String,
        item_title: String,
        /// Whether the chat input is usable during the item.
        enable_chat_input: bool,
    },
    /// The state an agent served over AG-UI shares with its UI: a whole
    /// `snapshot`, or a `delta` (RFC 6902) to the state before.
    #[serde(rename = "chat.agent_state")]
    AgentState {
        agent: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        snapshot: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delta: Option<Value>,
    },
    /// Progress of a long-running tool.
    #[serde(rename = "chat.tool_progress")]
    ToolProgress {
        tool_name: String,
        progress_percent: f64,
        status_message: String,
        corr: String,
    },
    /// Token usage of the run.
    #[serde(rename = "chat.usage_summary")]
    UsageSummary {
        total_tokens: u64,
        prompt_tokens: u64,
        completion_tokens: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost: Option<f64>,
        /// Group runs only: the same counts per member (and the selector's
        /// calls under the group's own id).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by_agent: Option<std::collections::BTreeMap<String, AgentUsage>>,
        /// The run's own model (the chat's switched one, else its agent's):
        /// what `GET /v1/usage` counts it under.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// A model turn cut off by a restart is dropped (its prints from
    /// `from_seq`, the turn's `chat.select_speaker`, on); the run goes on and
    /// the turn is asked again.
    #[serde(rename = "chat.turn_discarded")]
    TurnDiscarded {
        agent: String,
        from_seq: u64,
        /// `restart`: the process (or node) running the chat stopped mid-turn.
        reason: String,
    },
    /// The run ended.
    #[serde(rename = "chat.run_complete")]
    RunComplete { reason: RunEndReason },
    /// A user's message sent during a run, kept until it is its turn
    /// (`mode`): it is logged again as the user's `chat.text` (marked
    /// `queued` with this seq) when a run takes it.
    #[serde(rename = "chat.queued")]
    Queued {
        agent: String,
        content: String,
        mode: MultitaskStrategy,
    },
    /// The conversation goes on from the earlier envelope `at` (0: the
    /// chat's start): the next envelope follows it (`session::tree`).
    #[serde(rename = "chat.branch")]
    Branch {
        at: u64,
        reason: BranchReason,
        /// A regenerate with another model: the model it asked for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// The chat's title, new or changed: the list shows the last one.
    #[serde(rename = "chat.title")]
    Title {
        title: String,
        source: TitleSource,
        /// A model's title: the tokens it took (counted with the chat's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<TitleUsage>,
    },
    /// An error of the run (persisted) or of one connection's message (not).
    #[serde(rename = "chat.error")]
    Error {
        message: String,
        error_code: ErrorCode,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        details: Option<Value>,
        recoverable: bool,
    },
}

impl EventKind {
    /// The wire `type` of this event.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Text { .. } => "chat.text",
            Self::Print { .. } => "chat.print",
            Self::Reasoning { .. } => "chat.reasoning",
            Self::SelectSpeaker { .. } => "chat.select_speaker",
            Self::InputRequest { .. } => "chat.input_request",
            Self::InputAck { .. } => "chat.input_ack",
            Self::InputTimeout { .. } => "chat.input_timeout",
            Self::ToolCall { .. } => "chat.tool_call",
            Self::ToolResponse { .. } => "chat.tool_response",
            Self::ToolProgress { .. } => "chat.tool_progress",
            Self::AgentState { .. } => "chat.agent_state",
            Self::Progress { .. } => "chat.progress",
            Self::State { .. } => "chat.state",
            Self::UsageSummary { .. } => "chat.usage_summary",
            Self::TurnDiscarded { .. } => "chat.turn_discarded",
            Self::RunComplete { .. } => "chat.run_complete",
            Self::Branch { .. } => "chat.branch",
            Self::Queued { .. } => "chat.queued",
            Self::Title { .. } => "chat.title",
            Self::Error { .. } => "chat.error",
        }
    }

    /// Whether a run's usage so far may ride on this event
    /// ([`Envelope::run_usage`]): what closes a model turn (its text, its
    /// calls), a tool's result, the next turn's start.
    pub fn carries_run_usage(&self) -> bool {
        matches!(
            self,
            Self::Text { .. }
                | Self::SelectSpeaker { .. }
                | Self::InputRequest { .. }
                | Self::ToolCall { .. }
                | Self::ToolResponse { .. }
        )
    }

    /// The `corr` this event answers or opens, if any.
    pub fn corr(&self) -> Option<&str> {
        match self {
            Self::Print { corr, .. } => corr.as_deref(),
            Self::InputRequest { corr, .. }
            | Self::InputAck { corr, .. }
            | Self::InputTimeout { corr, .. }
            | Self::ToolCall { corr, .. }
            | Self::ToolResponse { corr, .. }
            | Self::ToolProgress { corr, .. } => Some(corr),
            _ => None,
        }
    }
}

/// A chat-scoped outbound envelope: `type`, `chat_id`, `seq`, `ts` and the
/// event's own fields, all at top level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    #[serde(flatten)]
    pub kind: EventKind,
    pub chat_id: Uuid,
    pub seq: u64,
    /// RFC 3339, UTC, milliseconds.
    pub ts: String,
    /// On the user's `chat.text` that starts a run: the `context_type` it
    /// was sent with, so a run continued after a restart is offered the
    /// same prompt and tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_type: Option<String>,
    /// What the run has used so far, per speaker (as
    /// `chat.usage_summary.by_agent`), on the first envelope it logs after
    /// that grew ([`EventKind::carries_run_usage`]): a run continued after a
    /// restart counts on from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_usage: Option<std::collections::BTreeMap<String, AgentUsage>>,
    /// On the user's `chat.text` of a message sent during a run: the seq of
    /// its `chat.queued`, now taken by a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued: Option<u64>,
    /// `true` on a user's `chat.text` that starts a run (not an answer to
    /// an input request, not a steer): what an edit or a regenerate names.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub starts_run: bool,
    /// `true` on an agent's `chat.text` that a cancelled, interrupted or
    /// timed-out run cut off: what it had said until then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// On a user's `chat.text` (and its `chat.queued`): the files it attaches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<super::Attachment>,
}

impl Envelope {
    /// An envelope of `kind` with none of the run's marks.
    pub fn new(kind: EventKind, chat_id: Uuid, seq: u64, ts: String) -> Self {
        Self {
            kind,
            chat_id,
            seq,
            ts,
            context_type: None,
            run_usage: None,
            queued: None,
            starts_run: false,
            partial: false,
            attachments: Vec::new(),
        }
    }

    /// The JSON text of this envelope, as stored and as sent live.
    pub fn to_json(&self) -> String {
        // Serializing a tree of strings, numbers and `Value`s cannot fail.
        serde_json::to_string(self).expect("envelope serializes")
    }
}

/// The current time in the envelope format: RFC 3339, UTC, milliseconds.
pub fn now_ts() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Turns a stored envelope's JSON into its replayed form by adding
/// `"replay":true`. The stored text is always a non-empty JSON object written by
/// [`Envelope::to_json`], so this is a cheap string splice, not a re-parse.
pub fn mark_replay(stored: &str) -> String {
    let body = stored.trim_end();
    let body = body.strip_suffix('}').unwrap_or(body);
    let mut out = String::with_capacity(body.len() + 16);
    out.push_str(body);
    out.push_str(",\"replay\":true}");
    out
}
