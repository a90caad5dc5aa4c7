//! The run's link to its chat: every type through which a run (the loop in
//! `agent::runtime`, its tools, its template walk, one model turn) talks to
//! the chat that owns it, and through which the chat answers and stops it.
//!
//! Below `tools`, `templates` and `agent`, which all speak it, and above
//! `session`, whose actor answers it. Uses `llm` and `protocol` only.

use std::sync::{Arc, OnceLock};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::protocol::{Display, EventKind, RunEndReason};

/// What a run asks of its chat.
#[derive(Debug)]
pub enum RunMsg {
    /// Append this event to the log.
    Emit(EventKind),
    /// Emit `chat.input_request` and answer when the user does (or time runs out).
    AskInput {
        request_id: String,
        prompt: String,
        password: bool,
        /// The answers to pick from, when the request is a choice.
        options: Option<Vec<String>>,
        respond: oneshot::Sender<InputOutcome>,
    },
    /// Emit a `chat.tool_call` awaiting a response and answer with the client's
    /// `inline_component.result` (or a timeout).
    ShowComponent {
        tool_name: String,
        component_type: String,
        payload: Value,
        corr: String,
        display: Display,
        /// Checks a result before it is taken: a refused result is answered
        /// `SCHEMA_VALIDATION_FAILED`, logs nothing, and the call stays open.
        check: Option<AnswerCheck>,
        /// The group member that shows it (set by its [`RunLink`]).
        agent: Option<String>,
        respond: oneshot::Sender<ComponentOutcome>,
    },
    /// Keep the answer key (JSON) of a template question in the store, never
    /// in the log; answered once it is stored.
    KeepAnswer {
        corr: String,
        answer: String,
        respond: oneshot::Sender<bool>,
    },
}

/// A check of an `inline_component.result`'s `data`.
#[derive(Clone)]
pub struct AnswerCheck(std::sync::Arc<CheckFn>);

type CheckFn = dyn Fn(&Value) -> Result<(), String> + Send + Sync;

impl AnswerCheck {
    pub fn new(f: impl Fn(&Value) -> Result<(), String> + Send + Sync + 'static) -> Self {
        Self(std::sync::Arc::new(f))
    }

    /// Why `data` is refused, if it is.
    ///
    /// # Errors
    /// The refusal, for the client.
    pub fn verify(&self, data: &Value) -> Result<(), String> {
        (self.0)(data)
    }
}

impl std::fmt::Debug for AnswerCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnswerCheck")
    }
}

/// The end of an input request.
#[derive(Debug, PartialEq)]
pub enum InputOutcome {
    Answered(String),
    TimedOut,
}

/// The end of a UI tool call.
#[derive(Debug, PartialEq)]
pub enum ComponentOutcome {
    Returned(Value),
    TimedOut,
}

/// The chat went away; the run stops.
#[derive(Debug)]
pub struct Gone;

/// The run's side of its channel to the chat.
#[derive(Debug, Clone)]
pub struct RunLink {
    tx: mpsc::Sender<RunMsg>,
    /// The group member speaking through this link: stamped on the tool
    /// calls and responses it logs, so every tool, whatever its kind, says
    /// whose call it is without knowing about groups.
    speaker: Option<Arc<str>>,
}

impl RunLink {
    /// A link and the receiver its chat reads.
    pub fn channel(capacity: usize) -> (Self, mpsc::Receiver<RunMsg>) {
        let (tx, rx) = mpsc::channel(capacity);
        (Self { tx, speaker: None }, rx)
    }

    /// The same channel, speaking as group member `name`.
    pub fn speaking_as(&self, name: &str) -> Self {
        Self {
            tx: self.tx.clone(),
            speaker: Some(name.into()),
        }
    }

    pub(crate) async fn send(&self, mut msg: RunMsg) -> Result<(), Gone> {
        if let Some(speaker) = &self.speaker {
            match &mut msg {
                RunMsg::Emit(
                    EventKind::ToolCall { agent, .. } | EventKind::ToolResponse { agent, .. },
                )
                | RunMsg::ShowComponent { agent, .. } => {
                    agent.get_or_insert_with(|| speaker.to_string());
                }
                _ => {}
            }
        }
        self.tx.send(msg).await.map_err(|_| Gone)
    }

    pub(crate) async fn emit(&self, kind: EventKind) -> Result<(), Gone> {
        self.send(RunMsg::Emit(kind)).await
    }
}

/// Stops a run from outside, saying why.
#[derive(Debug, Clone, Default)]
pub struct RunControl {
    pub(crate) token: CancellationToken,
    reason: Arc<OnceLock<RunEndReason>>,
}

impl RunControl {
    /// Asks the run to end with `reason` (the first reason given wins).
    pub fn cancel(&self, reason: RunEndReason) {
        let _ = self.reason.set(reason);
        self.token.cancel();
    }

    pub(crate) fn reason(&self) -> RunEndReason {
        self.reason
            .get()
            .copied()
            .unwrap_or(RunEndReason::Cancelled)
    }
}

/// One message of the conversation a run starts from, with who said it:
/// `None` the user, else the agent (or group member) named in the log.
#[derive(Debug, Clone, PartialEq)]
pub struct Said {
    pub by: Option<String>,
    pub message: crate::llm::Message,
}

/// The result of one tool call: back to the model, or the end of the run.
pub enum ToolOutcome {
    Result { content: String, is_error: bool },
    End(RunEndReason),
}
