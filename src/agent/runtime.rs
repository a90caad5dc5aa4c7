//! One run of an agent: the agentic loop.
//!
//! Each model turn starts with `chat.select_speaker`, streams the model's text
//! as `chat.print` and closes it with `chat.text`, then runs the tools the
//! model called and loops, up to the agent's `max_turns`. Every run ends with
//! `chat.usage_summary` then `chat.run_complete`.
//!
//! The run never touches the chat's state: it sends [`RunMsg`]s over a bounded
//! channel to whoever owns the chat (the session actor), which assigns `seq`,
//! persists, and answers input requests and UI tool calls. When that owner
//! goes away the run stops at its next message.

use std::sync::{Arc, OnceLock};

use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::provider::{ChatRequest, Message, ToolCall, ToolDefinition, Usage};
use super::{Agent, ComponentType, ToolKind};
use crate::protocol::{Display, ErrorCode, EventKind, RunEndReason};

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
        respond: oneshot::Sender<ComponentOutcome>,
    },
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
}

impl RunLink {
    /// A link and the receiver its chat reads.
    pub fn channel(capacity: usize) -> (Self, mpsc::Receiver<RunMsg>) {
        let (tx, rx) = mpsc::channel(capacity);
        (Self { tx }, rx)
    }

    async fn send(&self, msg: RunMsg) -> Result<(), Gone> {
        self.tx.send(msg).await.map_err(|_| Gone)
    }

    async fn emit(&self, kind: EventKind) -> Result<(), Gone> {
        self.send(RunMsg::Emit(kind)).await
    }
}

/// Stops a run from outside, saying why.
#[derive(Debug, Clone, Default)]
pub struct RunControl {
    token: CancellationToken,
    reason: Arc<OnceLock<RunEndReason>>,
}

impl RunControl {
    /// Asks the run to end with `reason` (the first reason given wins).
    pub fn cancel(&self, reason: RunEndReason) {
        let _ = self.reason.set(reason);
        self.token.cancel();
    }

    fn reason(&self) -> RunEndReason {
        self.reason
            .get()
            .copied()
            .unwrap_or(RunEndReason::Cancelled)
    }
}

/// What one run starts from.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub agent: Arc<Agent>,
    /// The conversation so far, the new user message last.
    pub history: Vec<Message>,
    /// The chat's `context` object as JSON text, appended to the system prompt.
    pub context: Option<String>,
}

/// Runs the agent until it finishes, fails, runs out of turns or is stopped.
#[tracing::instrument(skip_all, fields(agent = %spec.agent.id))]
pub async fn run(spec: RunSpec, link: RunLink, control: RunControl) {
    let mut usage = Usage::default();
    let reason = tokio::select! {
        biased;
        _ = control.token.cancelled() => control.reason(),
        r = turns(&spec, &link, &mut usage) => match r {
            Ok(reason) => reason,
            Err(Gone) => return,
        },
    };
    let _ = link
        .emit(EventKind::UsageSummary {
            total_tokens: usage.prompt_tokens + usage.completion_tokens,
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            cost: None,
        })
        .await;
    let _ = link.emit(EventKind::RunComplete { reason }).await;
}

/// The result of one tool call: back to the model, or the end of the run.
enum ToolOutcome {
    Result { content: String, is_error: bool },
    End(RunEndReason),
}

async fn turns(spec: &RunSpec, link: &RunLink, usage: &mut Usage) -> Result<RunEndReason, Gone> {
    let agent = &spec.agent;
    let mut messages = spec.history.clone();
    let tools: Vec<ToolDefinition> = agent
        .tools
        .iter()
        .map(|t| ToolDefinition {
            name: t.name.clone(),
            description: t.description.clone(),
            input_schema: t.input_schema.clone(),
        })
        .collect();
    let system_prompt = match &spec.context {
        Some(ctx) => format!("{}\n\nContext: {ctx}", agent.system_prompt),
        None => agent.system_prompt.clone(),
    };

    for _ in 0..agent.max_turns {
        link.emit(EventKind::SelectSpeaker {
            agent: agent.id.clone(),
        })
        .await?;
        let request = ChatRequest {
            system_prompt: system_prompt.clone(),
            messages: messages.clone(),
            tools: tools.clone(),
            max_tokens: 4096,
        };
        let mut stream = match agent.provider.stream_chat(request).await {
            Ok(stream) => stream,
            Err(e) => return fail(link, e.code, e.message, e.recoverable).await,
        };
        let mut text = String::new();
        let mut calls: Vec<(String, String, String)> = Vec::new();
        let mut failure = None;
        while let Some(event) = stream.next().await {
            use super::provider::StreamEvent as E;
            match event {
                E::MessageStart => {}
                E::ContentDelta(delta) if delta.is_empty() => {}
                E::ContentDelta(delta) => {
                    text.push_str(&delta);
                    link.emit(EventKind::Print {
                        agent: agent.id.clone(),
                        content: delta,
                        corr: None,
                    })
                    .await?;
                }
                E::ThinkingDelta(t) => tracing::trace!(thinking = %t),
                E::ToolUseStart { id, name } => calls.push((id, name, String::new())),
                E::ToolInputDelta(json) => {
                    if let Some(call) = calls.last_mut() {
                        call.2.push_str(&json);
                    }
                }
                E::MessageComplete { usage: u, .. } => {
                    usage.prompt_tokens += u.prompt_tokens;
                    usage.completion_tokens += u.completion_tokens;
                }
                E::Error(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        if !text.is_empty() {
            link.emit(EventKind::Text {
                agent: agent.id.clone(),
                content: text.clone(),
            })
            .await?;
        }
        if let Some(e) = failure {
            return fail(link, e.code, e.message, e.recoverable).await;
        }
        if calls.is_empty() {
            return Ok(RunEndReason::Completed);
        }
        let calls: Vec<ToolCall> = calls
            .into_iter()
            .map(|(id, name, json)| ToolCall {
                id,
                name,
                // A model that streams broken JSON gets it back as a tool error
                // below: the input is kept as the raw text.
                input: if json.trim().is_empty() {
                    Value::Object(Default::default())
                } else {
                    serde_json::from_str(&json).unwrap_or(Value::String(json))
                },
            })
            .collect();
        messages.push(Message::Assistant {
            text,
            tool_calls: calls.clone(),
        });
        for call in &calls {
            match execute(agent, link, call).await? {
                ToolOutcome::Result { content, is_error } => messages.push(Message::ToolResult {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    content,
                    is_error,
                }),
                ToolOutcome::End(reason) => return Ok(reason),
            }
        }
    }
    fail(
        link,
        ErrorCode::ToolExecutionError,
        format!(
            "the agent reached its limit of {} model turns",
            agent.max_turns
        ),
        true,
    )
    .await?;
    Ok(RunEndReason::MaxTurns)
}

/// Emits a run error; the run ends with `error`.
async fn fail(
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

/// Logs a backend tool call and its (failed) response in one go.
async fn refuse(link: &RunLink, call: &ToolCall, why: String) -> Result<ToolOutcome, Gone> {
    link.emit(backend_call(call)).await?;
    link.emit(EventKind::ToolResponse {
        tool_name: call.name.clone(),
        content: Value::String(why.clone()),
        success: false,
        corr: call.id.clone(),
    })
    .await?;
    Ok(ToolOutcome::Result {
        content: why,
        is_error: true,
    })
}

fn backend_call(call: &ToolCall) -> EventKind {
    EventKind::ToolCall {
        tool_name: call.name.clone(),
        component_type: None,
        awaiting_response: false,
        payload: call.input.clone(),
        corr: call.id.clone(),
        display: Display::Inline,
    }
}

async fn execute(agent: &Agent, link: &RunLink, call: &ToolCall) -> Result<ToolOutcome, Gone> {
    let Some(tool) = agent.tool(&call.name) else {
        return refuse(link, call, format!("there is no tool `{}`", call.name)).await;
    };
    let errors: Vec<String> = tool
        .validator
        .iter_errors(&call.input)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    if !errors.is_empty() {
        return refuse(link, call, format!("invalid input: {}", errors.join("; "))).await;
    }
    match &tool.kind {
        ToolKind::Ui {
            component_type,
            display,
        } => {
            let component_type = match component_type {
                ComponentType::Fixed(c) => c.clone(),
                ComponentType::FromInput(field) => match call.input[field].as_str() {
                    Some(c) if !c.is_empty() => c.to_owned(),
                    _ => {
                        return refuse(
                            link,
                            call,
                            format!("input field `{field}` must name the component"),
                        )
                        .await;
                    }
                },
            };
            let (respond, answer) = oneshot::channel();
            link.send(RunMsg::ShowComponent {
                tool_name: call.name.clone(),
                component_type,
                payload: call.input.clone(),
                corr: call.id.clone(),
                display: *display,
                respond,
            })
            .await?;
            match answer.await.map_err(|_| Gone)? {
                ComponentOutcome::Returned(data) => {
                    link.emit(EventKind::ToolResponse {
                        tool_name: call.name.clone(),
                        content: data.clone(),
                        success: true,
                        corr: call.id.clone(),
                    })
                    .await?;
                    Ok(ToolOutcome::Result {
                        content: data.to_string(),
                        is_error: false,
                    })
                }
                ComponentOutcome::TimedOut => Ok(ToolOutcome::End(RunEndReason::Timeout)),
            }
        }
        ToolKind::InputRequest {
            prompt_field,
            password,
        } => {
            let (respond, answer) = oneshot::channel();
            link.send(RunMsg::AskInput {
                request_id: call.id.clone(),
                prompt: call.input[prompt_field]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                password: *password,
                respond,
            })
            .await?;
            match answer.await.map_err(|_| Gone)? {
                InputOutcome::Answered(text) => Ok(ToolOutcome::Result {
                    content: text,
                    is_error: false,
                }),
                InputOutcome::TimedOut => Ok(ToolOutcome::End(RunEndReason::Timeout)),
            }
        }
        ToolKind::Builtin(builtin) => {
            link.emit(backend_call(call)).await?;
            let result = builtin
                .call(&call.input, |percent, status_message| {
                    let link = link.clone();
                    let progress = EventKind::ToolProgress {
                        tool_name: call.name.clone(),
                        progress_percent: percent,
                        status_message,
                        corr: call.id.clone(),
                    };
                    async move { link.emit(progress).await.is_ok() }
                })
                .await;
            let (content, is_error) = match result {
                Ok(content) => (content, false),
                Err(content) => (content, true),
            };
            link.emit(EventKind::ToolResponse {
                tool_name: call.name.clone(),
                content: Value::String(content.clone()),
                success: !is_error,
                corr: call.id.clone(),
            })
            .await?;
            Ok(ToolOutcome::Result { content, is_error })
        }
    }
}
