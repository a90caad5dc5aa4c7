//! One run of an agent: the agentic loop (seed 000 §3, seed 002).
//!
//! Each model turn starts with `chat.select_speaker`, streams the model's text
//! as `chat.print` and closes it with `chat.text`, then runs the tools the
//! model called (concurrently; results go back in the model's order) and
//! loops, up to the agent's `max_turns`. Every run ends with
//! `chat.usage_summary` then `chat.run_complete`.
//!
//! The run never touches the chat's state: it sends [`RunMsg`]s over a bounded
//! channel to whoever owns the chat (the session actor), which assigns `seq`,
//! persists, and answers input requests and UI tool calls. When that owner
//! goes away the run stops at its next message.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::build::Agent;
use super::definition::ToolCallFormat;
use super::turn::{TurnOutput, stream_turn};
use crate::link::{Gone, RunControl, RunLink, ToolOutcome};
use crate::llm::{ChatRequest, Message, ToolDefinition, Usage};
use crate::protocol::{ErrorCode, EventKind, RunEndReason};
use crate::templates::Speaker;
use crate::tools::{CallEnv, Database, execute};

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
    /// The conversation so far, the new user message last.
    pub history: Vec<Message>,
    /// The chat's `context` object (given to the model, and to tool `inject`).
    pub context: Option<Value>,
    /// Seed 000's `context_type`: only tools declared for it are offered.
    pub context_type: Option<String>,
    /// The bearer token of the connection that started the run, forwarded to
    /// HTTP tools verbatim. Never logged or stored.
    pub bearer: Option<String>,
    /// The chat's own model, overriding the agent's.
    pub provider: Option<Arc<dyn crate::llm::Provider>>,
}

impl RunSpec {
    /// What the run's tool calls may use of it.
    fn call_env<'a>(&'a self, link: &'a RunLink, usage: &'a Mutex<Usage>) -> CallEnv<'a> {
        CallEnv {
            link,
            http: &self.agent.http,
            context: self.context.as_ref(),
            context_type: self.context_type.as_deref(),
            bearer: self.bearer.as_deref(),
            max_result_chars: self.agent.max_tool_result_chars,
            usage,
            provider: self
                .provider
                .as_deref()
                .unwrap_or(self.agent.provider.as_ref()),
            database: self.connections.as_deref().map(|connections| Database {
                connections,
                user: &self.user,
                chat_id: self.chat_id,
            }),
        }
    }
}

/// Runs the agent until it finishes, fails, runs out of turns or time, or is
/// stopped.
#[tracing::instrument(skip_all, fields(agent = %spec.agent.id))]
pub async fn run(spec: RunSpec, link: RunLink, control: RunControl) {
    let mut usage = Usage::default();
    // What the tools' own model calls used (ask_database, ask_analyst).
    let tool_usage = Mutex::new(Usage::default());
    let reason = tokio::select! {
        biased;
        _ = control.token.cancelled() => control.reason(),
        r = tokio::time::timeout(spec.agent.run_timeout, body(&spec, &link, &mut usage, &tool_usage)) => match r {
            Ok(Ok(reason)) => reason,
            Ok(Err(Gone)) => return,
            Err(_) => RunEndReason::Timeout,
        },
    };
    let tools = tool_usage.into_inner().unwrap_or_else(|e| e.into_inner());
    usage.prompt_tokens += tools.prompt_tokens;
    usage.completion_tokens += tools.completion_tokens;
    let cost = spec.agent.price.map(|p| {
        let cost = (usage.prompt_tokens as f64 * p.prompt_per_million
            + usage.completion_tokens as f64 * p.completion_per_million)
            / 1_000_000.0;
        (cost * 1e9).round() / 1e9
    });
    let _ = link
        .emit(EventKind::UsageSummary {
            total_tokens: usage.prompt_tokens + usage.completion_tokens,
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            cost,
        })
        .await;
    let _ = link.emit(EventKind::RunComplete { reason }).await;
}

/// A template's walk, or the agentic loop.
async fn body(
    spec: &RunSpec,
    link: &RunLink,
    usage: &mut Usage,
    tool_usage: &Mutex<Usage>,
) -> Result<RunEndReason, Gone> {
    match &spec.agent.template {
        Some(template) => {
            let speaker = Speaker {
                id: &spec.agent.id,
                system_prompt: &spec.agent.system_prompt,
                provider: spec.agent.provider.as_ref(),
            };
            crate::templates::run(&speaker, template, link, usage).await
        }
        None => turns(spec, link, usage, tool_usage).await,
    }
}

/// Most consecutive unparsable JSON tool calls sent back to the model.
const MAX_JSON_RETRIES: u32 = 3;

async fn turns(
    spec: &RunSpec,
    link: &RunLink,
    usage: &mut Usage,
    tool_usage: &Mutex<Usage>,
) -> Result<RunEndReason, Gone> {
    let agent = &spec.agent;
    let json_mode = agent.tool_call_format == ToolCallFormat::Json;
    let mut messages = spec.history.clone();
    let env = spec.call_env(link, tool_usage);
    let definitions = definitions(agent, spec.context_type.as_deref());
    let system_prompt = system_prompt(
        agent,
        spec.context.as_ref(),
        spec.context_type.as_deref(),
        json_mode,
        &definitions,
    );
    let system_prompt = match &spec.database {
        Some(db) => format!("{system_prompt}{db}"),
        None => system_prompt,
    };
    let tools = if json_mode { Vec::new() } else { definitions };
    let mut bad_json = 0;

    for _ in 0..agent.max_turns {
        link.emit(EventKind::SelectSpeaker {
            agent: agent.id.clone(),
        })
        .await?;
        let request = ChatRequest {
            system_prompt: system_prompt.clone(),
            messages: fit_budget(&messages, agent.prompt_budget_tokens, &system_prompt),
            tools: tools.clone(),
            max_tokens: 4096,
        };
        let provider = spec.provider.as_ref().unwrap_or(&agent.provider);
        let turn = match provider.stream_chat(request).await {
            Ok(stream) => stream_turn(agent, link, stream, usage, json_mode).await?,
            Err(e) => return fail(link, e.code, e.message, e.recoverable).await,
        };
        let TurnOutput {
            text,
            calls,
            failure,
            json_call,
        } = turn;
        if let Some(e) = failure {
            return fail(link, e.code, e.message, e.recoverable).await;
        }
        if json_mode {
            match json_call {
                None => return Ok(RunEndReason::Completed),
                Some(Err((raw, why))) => {
                    bad_json += 1;
                    if bad_json > MAX_JSON_RETRIES {
                        return fail(
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
                    messages.push(Message::User {
                        text: format!(
                            "Your tool call could not be parsed: {why}. Reply with ONLY one JSON object: \
                             {{\"tool\": \"tool_name\", \"parameters\": {{...}}, \"terminate\": false}}"
                        ),
                    });
                    continue;
                }
                Some(Ok((raw, call, terminate))) => {
                    bad_json = 0;
                    messages.push(Message::Assistant {
                        text: raw,
                        tool_calls: Vec::new(),
                    });
                    let outcome = execute(&call, &agent.tools, &env).await?;
                    let (content, is_error) = match outcome {
                        ToolOutcome::End(reason) => return Ok(reason),
                        ToolOutcome::Result { content, is_error } => (content, is_error),
                    };
                    if terminate {
                        return Ok(RunEndReason::Completed);
                    }
                    let label = if is_error { "Error from" } else { "Result of" };
                    messages.push(Message::User {
                        text: format!("{label} {}:\n{}", call.name, content),
                    });
                    continue;
                }
            }
        }
        if calls.is_empty() {
            return Ok(RunEndReason::Completed);
        }
        messages.push(Message::Assistant {
            text,
            tool_calls: calls.clone(),
        });
        // The calls of one turn run concurrently; results keep the model's order.
        let outcomes = futures_util::future::join_all(
            calls.iter().map(|call| execute(call, &agent.tools, &env)),
        )
        .await;
        let mut end = None;
        for (call, outcome) in calls.iter().zip(outcomes) {
            match outcome? {
                ToolOutcome::Result { content, is_error } => messages.push(Message::ToolResult {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    content,
                    is_error,
                }),
                ToolOutcome::End(reason) => end = end.or(Some(reason)),
            }
        }
        if let Some(reason) = end {
            return Ok(reason);
        }
    }
    fail(
        link,
        ErrorCode::ToolExecutionError,
        format!(
            "Maximum tool-call rounds exceeded ({} model turns)",
            agent.max_turns
        ),
        true,
    )
    .await?;
    Ok(RunEndReason::MaxTurns)
}

/// The system prompt: the agent's (or its `context_prompts` entry for the
/// run's `context_type`), the chat context, and in `json` mode the
/// tool list with seed 002's format instruction.
fn system_prompt(
    agent: &Agent,
    context: Option<&Value>,
    context_type: Option<&str>,
    json_mode: bool,
    tools: &[ToolDefinition],
) -> String {
    let mut prompt = context_type
        .and_then(|ct| agent.context_prompts.get(ct))
        .unwrap_or(&agent.system_prompt)
        .clone();
    if let Some(ctx) = context {
        prompt.push_str(&context_block(ctx, context_type));
    }
    if json_mode && !tools.is_empty() {
        prompt.push_str("\n\nYou can use these tools:\n");
        for t in tools {
            prompt.push_str(&format!(
                "- {}: {} Parameters (JSON Schema): {}\n",
                t.name, t.description, t.input_schema
            ));
        }
        prompt.push_str(concat!(
            "\nWhen you need to use a tool, output ONLY a JSON object in this exact format:\n",
            "{\n  \"tool\": \"tool_name\",\n  \"parameters\": { \"param1\": \"value1\" },\n  \"terminate\": false\n}\n",
            "Set \"terminate\" to false if you need to continue working after the tool result.\n",
            "Set \"terminate\" to true if this is your final action or you want to return a response to the user.\n",
            "Otherwise answer in plain text.",
        ));
    }
    prompt
}

/// The system prompt with its tool block, as seed 002's enhanced prompt: the
/// tool definitions and the JSON call format, whatever the agent's own format.
pub fn enhanced_system_prompt(agent: &Agent) -> String {
    system_prompt(agent, None, None, true, &definitions(agent, None))
}

/// The tools a run with this `context_type` offers the model.
fn definitions(agent: &Agent, context_type: Option<&str>) -> Vec<ToolDefinition> {
    agent
        .tools
        .iter()
        .filter(|t| t.offered_for(context_type))
        .map(|t| ToolDefinition {
            name: t.name.clone(),
            description: t.description.clone(),
            input_schema: t.input_schema.clone(),
        })
        .collect()
}

/// Seed 000 §6's context block: a preamble, every `*_id` field pulled out for
/// easy reference, then the compact context JSON.
pub(super) fn context_block(context: &Value, context_type: Option<&str>) -> String {
    let mut block = match context_type {
        Some(ct) => format!("\n\nCurrent context (`{ct}`) of the user's screen:\n"),
        None => "\n\nCurrent context of the user's screen:\n".to_owned(),
    };
    for (key, value) in context.as_object().into_iter().flatten() {
        if let (Some(name), Some(id)) = (key.strip_suffix("_id"), value.as_str()) {
            block.push_str(&format!(
                "**Current {} ID: `{id}`**\n",
                name.replace('_', " ")
            ));
        }
    }
    block.push_str(&format!("```json\n{context}\n```"));
    block
}

/// A rough token estimate: four characters a token, plus a little per message.
fn estimate(text: &str) -> u64 {
    text.chars().count() as u64 / 4 + 4
}

fn message_cost(m: &Message) -> u64 {
    match m {
        Message::User { text } => estimate(text),
        Message::Assistant { text, tool_calls } => {
            estimate(text)
                + tool_calls
                    .iter()
                    .map(|c| estimate(&c.input.to_string()))
                    .sum::<u64>()
        }
        Message::ToolResult { content, .. } => estimate(content),
    }
}

/// The history cut to the prompt budget: oldest messages go first, the last
/// one always stays, and the kept part starts at a user message (so no tool
/// result is sent without its call).
pub(super) fn fit_budget(messages: &[Message], budget: u64, system_prompt: &str) -> Vec<Message> {
    let mut total = estimate(system_prompt) + messages.iter().map(message_cost).sum::<u64>();
    let mut start = 0;
    while total > budget && start + 1 < messages.len() {
        total -= message_cost(&messages[start]);
        start += 1;
    }
    while start + 1 < messages.len() && !matches!(messages[start], Message::User { .. }) {
        start += 1;
    }
    messages[start..].to_vec()
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

#[cfg(test)]
#[path = "runtime_tests.rs"]
mod tests;
