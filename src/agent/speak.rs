//! One speaker's turn: the agentic loop (seed 000 §3, seed 002) of one agent
//! or group member. Each model turn starts with `chat.select_speaker`,
//! streams the model's text as `chat.print` and closes it with `chat.text`,
//! then runs the tools the model called (concurrently; results go back in
//! the model's order) and loops, up to the agent's `max_turns`, until the
//! model answers without a tool call (or hands the conversation on).
//!
//! Also what every run shape shares: [`RunSpec`], the system prompt, the
//! prompt budget, and how a run error is logged.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::build::Agent;
use super::definition::{Price, ToolCallFormat};
use super::prompt::{definitions, fit_budget};
use super::turn::{TurnOutput, model_call};
use crate::link::{Gone, RunLink, Said, ToolOutcome};
use crate::llm::{ChatRequest, Message, Provider, Usage};
use crate::protocol::{ErrorCode, EventKind, RunEndReason};
use crate::tools::{CallEnv, Database, Tool, execute};

/// What one run starts from. (No `Debug`: it holds the caller's token.)
#[derive(Clone)]
pub struct RunSpec {
    pub chat_id: uuid::Uuid,
    /// The chat's owner (whose database connections the run may use).
    pub user: String,
    /// Users' databases, for `ask_database`.
    pub connections: Option<Arc<crate::databases::Connections>>,
    /// The chat's database for the system prompt (its schema, the last
    /// result), when one is connected.
    pub database: Option<String>,
    pub agent: Arc<Agent>,
    /// The conversation so far (who said what), the new user message last.
    pub history: Vec<Said>,
    /// The chat's `context` object (given to the model, and to tool `inject`).
    pub context: Option<Value>,
    /// Seed 000's `context_type`: only tools declared for it are offered.
    pub context_type: Option<String>,
    /// The bearer token of the connection that started the run, forwarded to
    /// HTTP tools verbatim. Never logged or stored.
    pub bearer: Option<String>,
    /// The chat's own model, overriding the agent's.
    pub provider: Option<Arc<dyn crate::llm::Provider>>,
    /// That model's name and price (its `[[models]]` entry).
    pub model: Option<(String, Option<Price>)>,
    /// A workflow the user invoked: the run is its invocation.
    pub workflow: Option<crate::workflows::Invocation>,
    /// A run a restart cut off, going on from the log.
    pub resumed: Option<Resumed>,
    /// Tools the client brought with this run, offered after the agent's.
    pub client_tools: Vec<crate::tools::ClientTool>,
    /// The state each agent served over AG-UI last shared in the chat (its
    /// `chat.agent_state`s), by speaker.
    pub agent_state: std::collections::HashMap<String, Value>,
    /// The `traceparent` of the request that started the run (traces on).
    pub traceparent: Option<String>,
}

/// What a run that a restart cut off had done, read from the log: it goes on
/// from there (issue 19).
#[derive(Debug, Clone, Default)]
pub struct Resumed {
    /// Model turns it had taken (out of `max_turns`).
    pub turns: u32,
    /// Time it had run (out of `run_timeout`).
    pub elapsed: std::time::Duration,
    /// Calls that had no result, made again first: of idempotent tools (run
    /// again), or waiting for a person (waited on again).
    pub calls: Vec<crate::llm::ToolCall>,
    /// The requests of those calls already logged (input `request_id`s,
    /// component `corr`s), with how long they have waited.
    pub waited: std::collections::HashMap<String, std::time::Duration>,
    /// The calls whose approval the log has: not asked again.
    pub approved: std::collections::HashSet<String>,
    /// A group run: where its members' turns stood.
    pub group: Option<GroupResumed>,
    /// A template's walk: where it stood.
    pub template: Option<crate::templates::Place>,
    /// What it had used, per speaker (the log's last `run_usage`): its
    /// `chat.usage_summary` counts on from there.
    pub usage: BTreeMap<String, Usage>,
}

/// Where a group run a restart cut off stood. `Resumed::turns` are then the
/// model turns of `member`'s own turn.
#[derive(Debug, Clone, Default)]
pub struct GroupResumed {
    /// The member speaking last.
    pub member: String,
    /// Member turns begun (out of `max_rounds`), its own included.
    pub rounds: u32,
    /// Its turn had ended: the next speaker is chosen after it.
    pub done: bool,
    /// Whom it handed the conversation to (a member, or `user`).
    pub handoff: Option<String>,
}

impl RunSpec {
    /// The run's own model, as usage names and prices it
    /// ([`Agent::own_model`]).
    fn own_model(&self) -> (String, Option<Price>) {
        let switched = self
            .model
            .as_ref()
            .map(|(name, price)| (name.as_str(), *price));
        self.agent.own_model(switched)
    }

    /// The price of the run's own speaker.
    pub(super) fn own_price(&self) -> Option<Price> {
        self.own_model().1
    }

    /// The run's own model, as usage names it.
    pub(super) fn model_name(&self) -> String {
        self.own_model().0
    }

    /// What the tool calls of `agent` (the run's agent or a group member,
    /// speaking through `link` on `provider`) may use of the run.
    pub(super) fn call_env<'a>(
        &'a self,
        link: &'a RunLink,
        usage: &'a Mutex<Usage>,
        agent: &'a Agent,
        provider: &'a dyn Provider,
    ) -> CallEnv<'a> {
        CallEnv {
            link,
            http: &agent.http,
            context: self.context.as_ref(),
            context_type: self.context_type.as_deref(),
            bearer: self.bearer.as_deref(),
            max_result_chars: agent.max_tool_result_chars,
            usage,
            provider,
            database: self.connections.as_deref().map(|connections| Database {
                connections,
                user: &self.user,
                chat_id: self.chat_id,
            }),
        }
    }
}

/// Who speaks in a turn loop, and as whom.
pub(super) struct Voice<'a> {
    /// Its name on the wire (`agent` of its prints, texts, select_speakers).
    pub name: &'a str,
    /// Its limits and format (and, for a plain run, its tools).
    pub agent: &'a Agent,
    /// The tools it may call (a group adds `handoff_to`).
    pub tools: &'a [Tool],
    pub provider: &'a dyn Provider,
    pub system_prompt: String,
    /// Group runs: how the speaker was chosen, for its first
    /// `chat.select_speaker` (the next ones say `continue`).
    pub chosen: Option<(&'static str, Option<String>)>,
    /// A run a restart cut off: the turns it took, the calls to run again.
    pub resumed: Option<&'a Resumed>,
    /// The chat (an upstream agent's AG-UI thread).
    pub thread: uuid::Uuid,
    /// The state it last shared (an upstream agent's).
    pub state: Option<&'a Value>,
}

/// How a speaker's turn ended.
pub(super) enum Spoke {
    /// The run ends.
    End(RunEndReason),
    /// The speaker is done: the text of its last model turn, and whom it
    /// handed the conversation to, if it did.
    Done {
        text: String,
        handoff: Option<String>,
    },
}

/// How the error a run logs when its model turns run out begins.
pub const MAX_TURNS_ERROR: &str = "Maximum tool-call rounds exceeded";

/// Most consecutive unparsable JSON tool calls sent back to the model.
const MAX_JSON_RETRIES: u32 = 3;

/// Runs one speaker's turn: model turns and tool calls until it answers
/// without a call. What it says is appended to `messages` (its view of the
/// conversation).
pub(super) async fn speak(
    voice: &Voice<'_>,
    env: &CallEnv<'_>,
    messages: &mut Vec<Message>,
    usage: &mut Usage,
) -> Result<Spoke, Gone> {
    let agent = voice.agent;
    let link = env.link;
    let json_mode = agent.tool_call_format == ToolCallFormat::Json;
    let tools = if json_mode {
        Vec::new()
    } else {
        definitions(voice.tools, env.context_type)
    };
    let mut bad_json = 0;
    let mut last_text = String::new();
    let mut first = 0;
    if let Some(resumed) = voice.resumed {
        first = resumed.turns;
        if !resumed.calls.is_empty()
            && let Some(end) = rerun(voice, env, messages, &resumed.calls).await?
        {
            return Ok(end);
        }
    }

    for turn in first..agent.max_turns {
        // A usage quota used up stops the run before its next model call.
        if let Some(refusal) = link.over_quota().await {
            return refuse(link, refusal).await.map(Spoke::End);
        }
        // What the user said meanwhile to steer the run, before this turn.
        messages.extend(link.steered().await);
        let (method, reason) = match (&voice.chosen, turn) {
            (None, _) => (None, None),
            (Some((method, reason)), 0) => (Some((*method).to_owned()), reason.clone()),
            (Some(_), _) => (Some("continue".to_owned()), None),
        };
        link.emit(EventKind::SelectSpeaker {
            agent: voice.name.to_owned(),
            method,
            reason,
        })
        .await?;
        let request = ChatRequest {
            system_prompt: voice.system_prompt.clone(),
            messages: fit_budget(messages, agent.prompt_budget_tokens, &voice.system_prompt),
            tools: tools.clone(),
            max_tokens: 4096,
        };
        let modes = (json_mode, agent.show_reasoning);
        let turn = match model_call(voice.provider, request, voice.name, link, usage, modes).await?
        {
            Ok(turn) => turn,
            Err(e) => return end(link, e.code, e.message, e.recoverable).await,
        };
        let TurnOutput {
            text,
            calls,
            failure,
            json_call,
            ..
        } = turn;
        if let Some(e) = failure {
            return end(link, e.code, e.message, e.recoverable).await;
        }
        if !text.is_empty() {
            last_text = text.clone();
        }
        if json_mode {
            match json_call {
                None => {
                    if !text.is_empty() {
                        messages.push(Message::Assistant {
                            text,
                            tool_calls: Vec::new(),
                        });
                    }
                    return Ok(done(last_text, None));
                }
                Some(Err((raw, why))) => {
                    bad_json += 1;
                    if bad_json > MAX_JSON_RETRIES {
                        return end(
                            link,
                            ErrorCode::ToolExecutionError,
                            format!("the model's tool call could not be parsed {bad_json} times in a row: {why}"),
                            true,
                        )
                        .await;
                    }
                    messages.push(Message::Assistant {
                        text: raw,
                        tool_calls: Vec::new(),
                    });
                    messages.push(Message::user(format!(
                            "Your tool call could not be parsed: {why}. Reply with ONLY one JSON object: \
                             {{\"tool\": \"tool_name\", \"parameters\": {{...}}, \"terminate\": false}}"
                        )));
                    continue;
                }
                Some(Ok((raw, call, terminate))) => {
                    bad_json = 0;
                    messages.push(Message::Assistant {
                        text: raw,
                        tool_calls: Vec::new(),
                    });
                    let outcome = execute(&call, voice.tools, env).await?;
                    let (content, is_error) = match outcome {
                        ToolOutcome::End(reason) => return Ok(Spoke::End(reason)),
                        ToolOutcome::Result { content, is_error } => (content, is_error),
                    };
                    let label = if is_error { "Error from" } else { "Result of" };
                    messages.push(Message::user(format!(
                        "{label} {}:\n{}",
                        call.name, content
                    )));
                    let handoff = Tool::handoff_target(&call, voice.tools).filter(|_| !is_error);
                    if terminate || handoff.is_some() {
                        return Ok(done(last_text, handoff));
                    }
                    continue;
                }
            }
        }
        if calls.is_empty() {
            if !text.is_empty() {
                messages.push(Message::Assistant {
                    text,
                    tool_calls: Vec::new(),
                });
            }
            return Ok(done(last_text, None));
        }
        messages.push(Message::Assistant {
            text,
            tool_calls: calls.clone(),
        });
        // The calls of one turn run concurrently; results keep the model's order.
        let outcomes = futures_util::future::join_all(
            calls.iter().map(|call| execute(call, voice.tools, env)),
        )
        .await;
        let mut end = None;
        let mut handoff = None;
        for (call, outcome) in calls.iter().zip(outcomes) {
            match outcome? {
                ToolOutcome::Result { content, is_error } => {
                    if !is_error {
                        handoff = Tool::handoff_target(call, voice.tools).or(handoff);
                    }
                    messages.push(Message::ToolResult {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        content,
                        is_error,
                    })
                }
                ToolOutcome::End(reason) => end = end.or(Some(reason)),
            }
        }
        if let Some(reason) = end {
            return Ok(Spoke::End(reason));
        }
        if handoff.is_some() {
            return Ok(done(last_text, handoff));
        }
    }
    fail(
        link,
        ErrorCode::ToolExecutionError,
        format!("{MAX_TURNS_ERROR} ({} model turns)", agent.max_turns),
        true,
    )
    .await?;
    Ok(Spoke::End(RunEndReason::MaxTurns))
}

/// A continued run's calls that a restart cut off: put back on the model's
/// turn (the log's history leaves out a call with no result) and made again
/// through the same pipeline — an idempotent tool runs again; a request to
/// a person, already in the log, is waited on again (the run's link marks
/// it). Returns how the speaker's turn ends, if one of them ends it.
async fn rerun(
    voice: &Voice<'_>,
    env: &CallEnv<'_>,
    messages: &mut Vec<Message>,
    calls: &[crate::llm::ToolCall],
) -> Result<Option<Spoke>, Gone> {
    // The model's turn that made them: its text, if it said something, is
    // the history's last message; else it said nothing.
    match messages.last_mut() {
        Some(Message::Assistant { tool_calls, .. }) => tool_calls.extend_from_slice(calls),
        _ => messages.push(Message::Assistant {
            text: String::new(),
            tool_calls: calls.to_vec(),
        }),
    }
    let outcomes =
        futures_util::future::join_all(calls.iter().map(|call| execute(call, voice.tools, env)))
            .await;
    for (call, outcome) in calls.iter().zip(outcomes) {
        match outcome? {
            ToolOutcome::Result { content, is_error } => messages.push(Message::ToolResult {
                id: call.id.clone(),
                name: call.name.clone(),
                content,
                is_error,
            }),
            ToolOutcome::End(reason) => return Ok(Some(Spoke::End(reason))),
        }
    }
    Ok(None)
}

fn done(text: String, handoff: Option<&str>) -> Spoke {
    Spoke::Done {
        text,
        handoff: handoff.map(str::to_owned),
    }
}

/// Logs a run error and ends the speaker's turn (and the run) with `error`.
async fn end(
    link: &RunLink,
    code: ErrorCode,
    message: String,
    recoverable: bool,
) -> Result<Spoke, Gone> {
    fail(link, code, message, recoverable).await.map(Spoke::End)
}

/// Ends the run at a usage quota: `QUOTA_EXCEEDED`, then `error`.
pub(super) async fn refuse(
    link: &RunLink,
    refusal: crate::link::Refusal,
) -> Result<RunEndReason, Gone> {
    link.emit(EventKind::Error {
        message: refusal.message,
        error_code: ErrorCode::QuotaExceeded,
        details: Some(refusal.details),
        recoverable: false,
    })
    .await?;
    Ok(RunEndReason::Error)
}

/// Emits a run error; the run ends with `error`.
pub(super) async fn fail(
    link: &RunLink,
    code: ErrorCode,
    message: String,
    recoverable: bool,
) -> Result<RunEndReason, Gone> {
    link.emit(EventKind::Error {
        message,
        error_code: code,
        details: None,
        recoverable,
    })
    .await?;
    Ok(RunEndReason::Error)
}
