//! The run's link to its chat: every type through which a run (the loop in
//! `agent::runtime`, its tools, its template walk, one model turn) talks to
//! the chat that owns it, and through which the chat answers and stops it.
//!
//! Below `tools`, `templates` and `agent`, which all speak it, and above
//! `session`, whose actor answers it. Uses `llm`, `protocol`, and `store`
//! for the files a run reads and its tools produce ([`RunFiles`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::protocol::{Display, EventKind, RunEndReason};

mod files;
mod quota;

pub use files::{RunFiles, named};
pub use quota::{QuotaGate, Refusal};

/// What a run asks of its chat.
#[derive(Debug)]
pub enum RunMsg {
    /// Append this event to the log.
    Emit(EventKind),
    /// Append this event and answer once it is committed (`false`: it could
    /// not be): a tool's call is in the log before the tool runs, so a
    /// restart never finds a side effect the log does not know of.
    Log {
        kind: EventKind,
        respond: oneshot::Sender<bool>,
    },
    /// Emit `chat.input_request` and answer when the user does (or time runs out).
    AskInput {
        request_id: String,
        prompt: String,
        password: bool,
        /// The answers to pick from, when the request is a choice.
        options: Option<Vec<String>>,
        /// The input-request tool asking, logged with the request so a run
        /// continued after a restart knows whose call it was.
        tool_name: Option<String>,
        /// Already logged, this long ago, by the run a restart cut off: wait
        /// again, with what is left of the timeout, without logging it twice
        /// (set by the [`RunLink`] of a continued run).
        waited: Option<Duration>,
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
        /// As `AskInput`'s: shown already by the run a restart cut off.
        waited: Option<Duration>,
        respond: oneshot::Sender<ComponentOutcome>,
    },
    /// Model calls of the run used this much more (a model turn, a tool's
    /// or the group selector's own calls): of `speaker` (set by a group
    /// member's [`RunLink`]), else of the run's agent. The chat logs the
    /// run's total with its next envelope that can carry it, so a restart
    /// counts on from there.
    Used {
        speaker: Option<String>,
        usage: crate::llm::Usage,
    },
    /// Keep the answer key (JSON) of a template question in the store, never
    /// in the log; answered once it is stored.
    KeepAnswer {
        corr: String,
        answer: String,
        respond: oneshot::Sender<bool>,
    },
    /// Log the user's messages waiting to steer the run (as the user's
    /// `chat.text`s) and answer with their texts.
    TakeSteered {
        /// Each message's text and files.
        respond: oneshot::Sender<Vec<(String, Vec<crate::protocol::Attachment>)>>,
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
    /// A nested chat's path (`reviewer`, `reviewer/panel`): the names its
    /// speakers are logged under start with it.
    nest: Option<Arc<str>>,
    /// A run continued after a restart: the requests its cut-off self had
    /// logged and was waiting on (input `request_id`s, component `corr`s),
    /// with how long ago. Asked again, each is marked `waited` once.
    rewaits: Option<Arc<Mutex<HashMap<String, Duration>>>>,
    /// A continued run: the calls whose approval is in the log already.
    approved: Option<Arc<std::collections::HashSet<String>>>,
    /// Set by the chat when a user's message waits to steer the run.
    steer: Arc<std::sync::atomic::AtomicBool>,
    /// Where the run's tools keep the files they produce.
    files: Option<Arc<RunFiles>>,
    /// The run's usage quota, and what it has used.
    quota: Option<Arc<quota::Metered>>,
}

impl RunLink {
    /// A link and the receiver its chat reads.
    pub fn channel(capacity: usize) -> (Self, mpsc::Receiver<RunMsg>) {
        let (tx, rx) = mpsc::channel(capacity);
        let link = Self {
            tx,
            speaker: None,
            nest: None,
            rewaits: None,
            approved: None,
            steer: Arc::default(),
            files: None,
            quota: None,
        };
        (link, rx)
    }

    /// The flag the chat sets when a user's message waits to steer the run.
    pub fn steer_flag(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.steer.clone()
    }

    /// The user's messages sent to steer the run since it last asked, each
    /// logged already as the user's `chat.text`: the model sees them before
    /// its next turn. Costs an atomic read when there are none.
    pub async fn steered(&self) -> Vec<crate::llm::Message> {
        if !self.steer.swap(false, std::sync::atomic::Ordering::AcqRel) {
            return Vec::new();
        }
        let (respond, rx) = oneshot::channel();
        if self.tx.send(RunMsg::TakeSteered { respond }).await.is_err() {
            return Vec::new();
        }
        let mut said: Vec<crate::llm::Message> = rx
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|(text, attached)| crate::llm::Message::User {
                text,
                files: named(&attached),
            })
            .collect();
        // Their files, read as the history's were.
        if let Some(files) = &self.files {
            files.read(said.iter_mut().collect()).await;
        }
        said
    }

    /// The same channel, speaking as group member `name` (logged as
    /// [`named`](Self::named) says).
    pub fn speaking_as(&self, name: &str) -> Self {
        Self {
            tx: self.tx.clone(),
            speaker: Some(self.named(name).into()),
            nest: self.nest.clone(),
            rewaits: self.rewaits.clone(),
            approved: self.approved.clone(),
            steer: self.steer.clone(),
            files: self.files.clone(),
            quota: self.quota.clone(),
        }
    }

    /// The same channel inside the nested chat `path` (whole, as
    /// [`named`](Self::named) gives it): its speakers are logged under it.
    pub fn nested(&self, path: &str) -> Self {
        let mut link = self.clone();
        link.nest = Some(path.into());
        link.speaker = None;
        link
    }

    /// The name speaker `name` is logged under: itself, or inside a nested
    /// chat `path/name`.
    pub fn named(&self, name: &str) -> String {
        match &self.nest {
            Some(path) => format!("{path}{}{name}", crate::protocol::NESTED),
            None => name.to_owned(),
        }
    }

    /// The link of a run held to a usage quota (if any): `gate` is asked
    /// before each model turn.
    #[must_use]
    pub fn metered(mut self, gate: Option<Arc<dyn QuotaGate>>) -> Self {
        self.quota = gate.map(|gate| Arc::new(quota::Metered::new(gate)));
        self
    }

    /// What a continued run had used before the restart (per speaker), for
    /// its quota: the ledger learns of it only when the run ends.
    pub fn used_before(&self, used: &std::collections::BTreeMap<String, crate::llm::Usage>) {
        if let Some(quota) = &self.quota {
            quota.continued();
            for (speaker, usage) in used {
                quota.add(speaker, *usage);
            }
        }
    }

    /// Why the run may not make another model call, if a quota says so.
    pub async fn over_quota(&self) -> Option<Refusal> {
        self.quota.as_ref()?.refusal().await
    }

    /// The link of a run that reads and keeps its chat's files in `files`.
    #[must_use]
    pub fn keeping_files(mut self, files: RunFiles) -> Self {
        self.files = Some(Arc::new(files));
        self
    }

    /// Where the run reads and keeps its chat's files (none in tests of
    /// the loop alone).
    pub fn files(&self) -> Option<&RunFiles> {
        self.files.as_deref()
    }

    /// The link of a continued run: these requests (by id, with how long
    /// they have waited) are in the log already and waited on again.
    #[must_use]
    pub fn rewaiting(mut self, waited: HashMap<String, Duration>) -> Self {
        self.rewaits = (!waited.is_empty()).then(|| Arc::new(Mutex::new(waited)));
        self
    }

    /// The link of a continued run: these calls (by id) were approved
    /// before the restart; their gate is not asked again.
    #[must_use]
    pub fn approving(mut self, approved: std::collections::HashSet<String>) -> Self {
        self.approved = (!approved.is_empty()).then(|| Arc::new(approved));
        self
    }

    /// The request waited on again whose id starts with `prefix` (a
    /// request whose id the run makes up, asked again with the same id).
    pub fn rewaited(&self, prefix: &str) -> Option<String> {
        let rewaits = self.rewaits.as_ref()?;
        let rewaits = rewaits.lock().unwrap_or_else(|e| e.into_inner());
        rewaits.keys().find(|id| id.starts_with(prefix)).cloned()
    }

    /// Whether call `id` was approved before a restart.
    pub fn approved(&self, id: &str) -> bool {
        self.approved.as_ref().is_some_and(|a| a.contains(id))
    }

    /// Appends `kind` and waits until it is committed.
    ///
    /// # Errors
    /// `Gone` if the chat went away or could not log it.
    pub(crate) async fn log(&self, kind: EventKind) -> Result<(), Gone> {
        let (respond, logged) = oneshot::channel();
        self.send(RunMsg::Log { kind, respond }).await?;
        match logged.await {
            Ok(true) => Ok(()),
            _ => Err(Gone),
        }
    }

    pub(crate) async fn send(&self, mut msg: RunMsg) -> Result<(), Gone> {
        if let Some(rewaits) = &self.rewaits {
            let mut rewaits = rewaits.lock().unwrap_or_else(|e| e.into_inner());
            match &mut msg {
                RunMsg::AskInput {
                    request_id: id,
                    waited,
                    ..
                }
                | RunMsg::ShowComponent {
                    corr: id, waited, ..
                } => *waited = rewaits.remove(id.as_str()),
                _ => {}
            }
        }
        if let Some(speaker) = &self.speaker {
            match &mut msg {
                RunMsg::Emit(
                    EventKind::ToolCall { agent, .. } | EventKind::ToolResponse { agent, .. },
                )
                | RunMsg::Log {
                    kind: EventKind::ToolCall { agent, .. } | EventKind::ToolResponse { agent, .. },
                    ..
                }
                | RunMsg::ShowComponent { agent, .. }
                | RunMsg::Used { speaker: agent, .. } => {
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

    /// Reports what model calls used since `before` (`now` is the total
    /// they add to), as `speaker`'s (`None`: the link's own speaker, or the
    /// run's agent); nothing if they used nothing.
    ///
    /// # Errors
    /// `Gone` if the chat went away.
    pub async fn used(
        &self,
        speaker: Option<&str>,
        before: crate::llm::Usage,
        now: crate::llm::Usage,
    ) -> Result<(), Gone> {
        let usage = crate::llm::Usage {
            prompt_tokens: now.prompt_tokens.saturating_sub(before.prompt_tokens),
            completion_tokens: now
                .completion_tokens
                .saturating_sub(before.completion_tokens),
        };
        if usage == crate::llm::Usage::default() {
            return Ok(());
        }
        if let Some(quota) = &self.quota {
            let name = speaker.or(self.speaker.as_deref()).unwrap_or_default();
            quota.add(name, usage);
        }
        let speaker = speaker.map(str::to_owned);
        self.send(RunMsg::Used { speaker, usage }).await
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
