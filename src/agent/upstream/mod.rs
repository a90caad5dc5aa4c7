//! A speaker whose turn is an upstream AG-UI agent's run (`ag_ui:` in its
//! file): the chat's history goes up as a `RunAgentInput`, and the events
//! that come back are logged as a model turn's would be — text as
//! `chat.print`s closed by a `chat.text`, reasoning as `chat.reasoning`,
//! the agent's own tool calls and results as backend calls and responses.
//!
//! A run that ends on the client's tools (those a client brought, and in a
//! group `handoff_to`) has them made through the tool pipeline — shown to
//! the client, waited for — and their results go up as `tool` messages in
//! the next run. A run that ends on interrupts has each asked of the user
//! (an approval when it names a tool call, else an input request), and the
//! answers go up as the next run's `resume`. Each upstream run is one of
//! the speaker's `max_turns`.

use serde_json::{Value, json};

use super::prompt::definitions;
use super::speak::{Spoke, Voice, fail};

mod ask;

use crate::link::{Gone, ToolOutcome};
use crate::llm::{Message, ToolCall, Usage};
use crate::protocol::{ErrorCode, EventKind, RunEndReason};
use crate::tools::{CallEnv, execute};
use crate::upstream::{Event, Failure, Interrupt, RunInput, Upstream};
pub use ask::INTERRUPT_TOOL;
use ask::{again, answer, find_call, push_call};

/// What one upstream run left to do.
enum After {
    /// It answered: the speaker is done.
    Done(String),
    /// The client's tools it called (made, their results the next run's
    /// `tool` messages) and its interrupts (asked, the answers its `resume`).
    Waits(Vec<ToolCall>, Vec<Interrupt>),
    End(RunEndReason),
}

/// Runs `voice`'s turn on its upstream agent.
pub(super) async fn speak(
    up: &Upstream,
    voice: &Voice<'_>,
    env: &CallEnv<'_>,
    messages: &mut Vec<Message>,
    usage: &mut Usage,
) -> Result<Spoke, Gone> {
    let link = env.link;
    let offered = definitions(voice.tools, env.context_type);
    let mut state: Option<Value> = voice.state.cloned();
    let mut resume = Vec::new();
    let mut last_text = String::new();
    let mut first = 0;
    if let Some(resumed) = voice.resumed {
        first = resumed.turns;
        match again(voice, env, messages, &resumed.calls).await? {
            Ok(entries) => resume = entries,
            Err(end) => return Ok(Spoke::End(end)),
        }
    }
    for turn in first..voice.agent.max_turns {
        messages.extend(link.steered().await);
        let method = match (&voice.chosen, turn) {
            (None, _) => None,
            (Some((method, _)), 0) => Some((*method).to_owned()),
            (Some(_), _) => Some("continue".to_owned()),
        };
        let reason = voice
            .chosen
            .as_ref()
            .and_then(|c| c.1.clone())
            .filter(|_| turn == 0);
        link.emit(EventKind::SelectSpeaker {
            agent: voice.name.to_owned(),
            method,
            reason,
        })
        .await?;
        let input = RunInput {
            thread_id: voice.thread.to_string(),
            run_id: uuid::Uuid::new_v4().to_string(),
            messages,
            tools: &offered,
            state: state.as_ref(),
            context: env.context,
            resume: std::mem::take(&mut resume),
            history: up.history,
        };
        let body = input.to_json();
        // The upstream run's span (traces on): its context goes with the
        // request as `traceparent`.
        let span = up.span(voice.name);
        let run = match span.scope(up.run(&body, env.bearer)).await {
            Ok(events) => {
                let read = read(up, voice, env, events, messages, usage, &mut state);
                span.scope(read).await?
            }
            Err(failure) => Err(failure),
        };
        let after = match run {
            Ok(after) => after,
            Err(failure) => {
                span.fail(
                    || failure.code.as_str().to_owned(),
                    || failure.message.clone(),
                );
                return failed(link, failure).await;
            }
        };
        drop(span);
        match after {
            After::Done(text) => {
                if !text.is_empty() {
                    last_text = text;
                }
                return Ok(Spoke::Done {
                    text: last_text,
                    handoff: None,
                });
            }
            After::End(reason) => return Ok(Spoke::End(reason)),
            After::Waits(calls, interrupts) => {
                let mut handoff = None;
                for call in &calls {
                    match execute(call, voice.tools, env).await? {
                        ToolOutcome::End(reason) => return Ok(Spoke::End(reason)),
                        ToolOutcome::Result { content, is_error } => {
                            if !is_error {
                                handoff = crate::tools::Tool::handoff_target(call, voice.tools)
                                    .map(str::to_owned)
                                    .or(handoff);
                            }
                            messages.push(Message::ToolResult {
                                id: call.id.clone(),
                                name: call.name.clone(),
                                content,
                                is_error,
                            });
                        }
                    }
                }
                if handoff.is_some() {
                    return Ok(Spoke::Done {
                        text: last_text,
                        handoff,
                    });
                }
                for i in &interrupts {
                    match answer(env, i, messages).await? {
                        Ok(entry) => resume.push(entry),
                        Err(reason) => return Ok(Spoke::End(reason)),
                    }
                }
            }
        }
    }
    fail(
        link,
        ErrorCode::ToolExecutionError,
        format!(
            "{} ({} upstream runs)",
            super::speak::MAX_TURNS_ERROR,
            voice.agent.max_turns
        ),
        true,
    )
    .await?;
    Ok(Spoke::End(RunEndReason::MaxTurns))
}

async fn failed(link: &crate::link::RunLink, f: Failure) -> Result<Spoke, Gone> {
    fail(link, f.code, f.message, f.recoverable)
        .await
        .map(Spoke::End)
}

/// Reads one upstream run to its end, logging what it says and does.
async fn read(
    up: &Upstream,
    voice: &Voice<'_>,
    env: &CallEnv<'_>,
    mut events: crate::upstream::Events<'_>,
    messages: &mut Vec<Message>,
    usage: &mut Usage,
    state: &mut Option<Value>,
) -> Result<Result<After, Failure>, Gone> {
    let link = env.link;
    let speaker = voice.name;
    // The text messages being streamed (by id), and the run's last one.
    let mut texts: std::collections::HashMap<String, String> = Default::default();
    let mut last = String::new();
    // Calls being streamed: id → (name, arguments).
    let mut open: std::collections::HashMap<String, (String, String)> = Default::default();
    // The client's calls this run made, for the client to answer.
    let mut client_calls: Vec<ToolCall> = Vec::new();
    // Interrupts announced before the end (LangGraph's `on_interrupt`).
    let mut announced: Vec<Interrupt> = Vec::new();
    // A tool call or result came since the last text: the next text is a
    // new turn of the speaker's (as a model's after its tools).
    let mut after_tools = false;
    // No message or call grows past what one event may carry.
    let max = up.max_event_bytes();
    let too_long = |what: &str| up.malformed(format_args!("{what} over {max} bytes"));
    let is_client = |name: &str| voice.tools.iter().any(|t| t.name == name);
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(e) => e,
            Err(f) => return Ok(Err(f)),
        };
        match event {
            Event::TextStart { id } => {
                if std::mem::take(&mut after_tools) {
                    link.emit(EventKind::SelectSpeaker {
                        agent: speaker.to_owned(),
                        method: voice.chosen.as_ref().map(|_| "continue".to_owned()),
                        reason: None,
                    })
                    .await?;
                }
                texts.insert(id, String::new());
            }
            Event::TextContent { id, delta } if !delta.is_empty() => {
                let text = texts.entry(id).or_default();
                if text.len() + delta.len() > max {
                    return Ok(Err(too_long("a text message")));
                }
                text.push_str(&delta);
                link.emit(EventKind::Print {
                    agent: speaker.to_owned(),
                    content: delta,
                    corr: None,
                })
                .await?;
            }
            Event::TextEnd { id } if texts.get(&id).is_some_and(|t| !t.is_empty()) => {
                last = texts.remove(&id).unwrap_or_default();
                link.emit(EventKind::Text {
                    agent: speaker.to_owned(),
                    content: last.clone(),
                })
                .await?;
                messages.push(Message::Assistant {
                    text: last.clone(),
                    tool_calls: Vec::new(),
                });
            }
            Event::ReasoningContent { delta, .. } | Event::ReasoningChunk { delta }
                if voice.agent.show_reasoning && !delta.is_empty() =>
            {
                link.emit(EventKind::Reasoning {
                    agent: speaker.to_owned(),
                    content: delta,
                })
                .await?;
            }
            Event::ToolStart { id, name } => {
                open.insert(id, (name, String::new()));
            }
            Event::ToolArgs { id, delta } => {
                if let Some((_, args)) = open.get_mut(&id) {
                    if args.len() + delta.len() > max {
                        return Ok(Err(too_long("a tool call's arguments")));
                    }
                    args.push_str(&delta);
                }
            }
            Event::ToolEnd { id } => {
                let Some((name, args)) = open.remove(&id) else {
                    continue;
                };
                let input = if args.trim().is_empty() {
                    json!({})
                } else {
                    match serde_json::from_str(&args) {
                        Ok(v) => v,
                        Err(e) => {
                            return Ok(Err(up.malformed(format_args!(
                                "the arguments of tool call `{id}` are not JSON: {e}"
                            ))));
                        }
                    }
                };
                let call = ToolCall { id, name, input };
                push_call(messages, call.clone());
                after_tools = true;
                if is_client(&call.name) {
                    client_calls.push(call);
                } else {
                    // The upstream agent's own tool: logged as it runs there.
                    link.emit(EventKind::ToolCall {
                        tool_name: call.name.clone(),
                        component_type: None,
                        awaiting_response: false,
                        payload: call.input.clone(),
                        corr: call.id.clone(),
                        display: crate::protocol::Display::Inline,
                        agent: None,
                    })
                    .await?;
                }
            }
            Event::ToolResult { id, content } => {
                // A call of this run, or of one before (an approved call's
                // result comes in the run its approval resumes).
                let Some(call) = find_call(messages, &id).cloned() else {
                    tracing::debug!(%id, "a tool result for a call the agent did not make");
                    continue;
                };
                after_tools = true;
                client_calls.retain(|c| c.id != id);
                let (logged, text) = match content {
                    Value::String(s) => (
                        serde_json::from_str(&s).unwrap_or_else(|_| Value::String(s.clone())),
                        s,
                    ),
                    other => (other.clone(), other.to_string()),
                };
                link.emit(EventKind::ToolResponse {
                    tool_name: call.name.clone(),
                    content: logged,
                    success: true,
                    corr: id.clone(),
                    agent: None,
                })
                .await?;
                messages.push(Message::ToolResult {
                    id,
                    name: call.name.clone(),
                    content: text,
                    is_error: false,
                });
            }
            Event::Interrupted(i) => announced.push(i),
            Event::StateSnapshot(snapshot) => {
                *state = Some(snapshot.clone());
                link.emit(EventKind::AgentState {
                    agent: speaker.to_owned(),
                    snapshot: Some(snapshot),
                    delta: None,
                })
                .await?;
            }
            Event::StateDelta(delta) => {
                let mut now = state.take().unwrap_or_else(|| json!({}));
                let applied = serde_json::from_value::<json_patch::Patch>(delta.clone())
                    .map_err(|e| e.to_string())
                    .and_then(|p| json_patch::patch(&mut now, &p).map_err(|e| e.to_string()));
                if let Err(e) = applied {
                    return Ok(Err(up.malformed(format_args!(
                        "a STATE_DELTA that does not apply: {e}"
                    ))));
                }
                *state = Some(now);
                link.emit(EventKind::AgentState {
                    agent: speaker.to_owned(),
                    snapshot: None,
                    delta: Some(delta),
                })
                .await?;
            }
            Event::RunError { message, code } => {
                let code = code.map(|c| format!(" ({c})")).unwrap_or_default();
                return Ok(Err(up.run_error(format_args!("RUN_ERROR: {message}{code}"))));
            }
            Event::RunFinished(mut done) => {
                // The outcome's list, when it has one, names the same.
                if done.interrupts.is_empty() {
                    done.interrupts = std::mem::take(&mut announced);
                }
                if let Some(u) = done.usage {
                    let before = *usage;
                    usage.prompt_tokens = usage.prompt_tokens.saturating_add(u.prompt_tokens);
                    usage.completion_tokens =
                        usage.completion_tokens.saturating_add(u.completion_tokens);
                    link.used(None, before, *usage).await?;
                }
                return Ok(Ok(if done.cancelled {
                    After::End(RunEndReason::Cancelled)
                } else if !done.interrupts.is_empty() || !client_calls.is_empty() {
                    After::Waits(client_calls, done.interrupts)
                } else {
                    After::Done(last)
                }));
            }
            other => tracing::trace!(kind = other.kind(), "an upstream event not logged"),
        }
    }
    // `Events` ends only after RUN_FINISHED or RUN_ERROR, both returned.
    Ok(Err(up.malformed("the stream ended before RUN_FINISHED")))
}
