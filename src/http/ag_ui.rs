//! AG-UI 1.0 (`@ag-ui/client`'s `HttpAgent`): `POST /v1/ag-ui` takes a
//! `RunAgentInput` and streams the chat's run as AG-UI events (`wire::AgUi`);
//! `GET /v1/ag-ui/{threadId}/stream` rejoins the run in flight, beyond the
//! spec: from its start (`RUN_STARTED`, a `MESSAGES_SNAPSHOT` of the thread
//! before it, then its events), or after `Last-Event-ID` (every event's `id`
//! is its envelope's seq).
//!
//! `threadId` is the chat (a UUID, or any id of the caller's: their own
//! chat derived from it). A run input whose `resume[]` answers the
//! interrupts of the previous response, or whose last messages are `tool`
//! messages (the results of frontend tools the previous response called),
//! goes on from where it stopped; otherwise its last message, the user's,
//! starts a turn. A turn's `tools` are offered to the model next to the
//! agent's own (frontend tools), and its `context` entries and `state` are
//! the run's context (what the model is told of the user's screen).

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};

use super::api::ErrorBody;
use super::auth::AuthUser;
use super::chats::parse_body;
use super::error::ApiError;
use super::sse::conversation_chat;
use super::sse::stream::{
    Feed, Item, Turn, begin_turn, event_stream, follow, respond, respond_items,
};
use super::state::AppState;
use crate::session::SessionError;
use crate::wire::{AgUi, Quiet, answer_text, as_text, text_parts};

#[path = "ag_ui_input.rs"]
mod input;

use input::{MAX_RESULTS, ToolResult, frontend_results, held, run_context, tool_results};

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/ag-ui", post(run))
        .route("/v1/ag-ui/{thread}/stream", get(rejoin))
}

/// AG-UI's `RunAgentInput` (what agentwire reads of it).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunAgentInput {
    pub thread_id: String,
    pub run_id: String,
    /// The thread as the client holds it; only the last message is read.
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub messages: Vec<Value>,
    /// Answers to the previous run's interrupts.
    #[serde(default)]
    pub resume: Vec<ResumeEntry>,
    /// Frontend tools: offered to the model for this run, run by the client.
    #[serde(default)]
    pub tools: Vec<crate::tools::ClientTool>,
    /// What the client tells the agent: `{description, value}` entries.
    #[serde(default)]
    pub context: Vec<ContextEntry>,
    /// The client's shared state.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub state: Value,
    /// `{agent}`: a new chat's agent.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub forwarded_props: Value,
}

/// One entry of AG-UI's `context`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct ContextEntry {
    pub description: String,
    #[schema(value_type = Object)]
    pub value: Value,
}

/// One answer to an interrupt.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResumeEntry {
    pub interrupt_id: String,
    /// `resolved` or `cancelled`.
    pub status: String,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub payload: Value,
}

/// Runs the agent: a turn, or the answers to the previous run's interrupts.
#[utoipa::path(post, path = "/v1/ag-ui", tag = "ag-ui", request_body = RunAgentInput,
    responses((status = 200, content_type = "text/event-stream", description = "AG-UI events"),
              (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(super) async fn run(
    State(state): State<AppState>,
    auth: AuthUser,
    body: Bytes,
) -> Result<Response, ApiError> {
    let input: RunAgentInput = parse_body(&body)?;
    if input.tools.len() > crate::tools::MAX_CLIENT_TOOLS {
        return Err(ApiError::BadRequest(format!(
            "at most {} tools per run",
            crate::tools::MAX_CLIENT_TOOLS
        )));
    }
    for tool in &input.tools {
        tool.checked().map_err(ApiError::BadRequest)?;
    }
    let user = auth.user.as_str();
    let (chat_id, derived) = conversation_chat(user, Some(&input.thread_id));
    let results = tool_results(&input.messages);
    if results.len() > MAX_RESULTS {
        return Err(ApiError::BadRequest(format!(
            "at most {MAX_RESULTS} trailing `tool` messages"
        )));
    }
    let results = if results.is_empty() {
        results
    } else {
        frontend_results(&state, user, chat_id, results).await?
    };
    // What the client holds is not sent to it again.
    let (calls, known) = held(&input.messages);
    let encoder = AgUi::new(input.thread_id.clone(), input.run_id.clone(), 0).knowing(calls, known);
    let started = Item::data(encoder.started());
    let (feed, answered, after) = if input.resume.is_empty() && results.is_empty() {
        let last = input
            .messages
            .last()
            .filter(|m| m["role"] == "user")
            .ok_or_else(|| {
                ApiError::BadRequest(
                    "nothing to run: the last message must be the user's or a tool's, or \
                     `resume` must answer the interrupts"
                        .into(),
                )
            })?;
        let text = text_parts(&last["content"]);
        if text.trim().is_empty() {
            return Err(ApiError::BadRequest(
                "the user's message has no text".into(),
            ));
        }
        let agent = input.forwarded_props["agent"]
            .as_str()
            .unwrap_or(&state.config.default_agent);
        let context = run_context(&input);
        let turn = Turn {
            context: context.as_ref(),
            client_tools: &input.tools,
            ..Turn::say(user, auth.token.as_deref(), (chat_id, derived), agent, text)
        };
        let (feed, _) = begin_turn(&state, turn).await?;
        (feed, Vec::new(), 0)
    } else {
        match answer(&state, user, chat_id, &input.resume, results).await? {
            Answered::Going(feed, answered, after) => (feed, answered, after),
            // Nothing of it was waited on, and the run is over.
            Answered::Over(after) => {
                let over = AgUi::new(input.thread_id, input.run_id, after).over();
                let items = [started, Item::data(over)];
                return Ok(respond_items(chat_id, futures_util::stream::iter(items)));
            }
        }
    };
    // Going on after `after`: the run is read from its start without sending
    // what the client has, so what it still waits on is known.
    let encoder = Quiet {
        inner: encoder.answering(answered),
        through: after,
    };
    Ok(respond(chat_id, vec![started], feed, Box::new(encoder)))
}

/// What answering a run input's interrupts and tool results came to.
enum Answered {
    /// The stream's queue (from the run's start), the requests answered (or
    /// answered before), and the seq the previous response stopped at.
    Going(Feed, Vec<String>, u64),
    /// Nothing was waiting and the run is over (a run input sent again):
    /// the response ends at once, at this seq.
    Over(u64),
}

/// Routes each answer to the request its interrupt names, and each tool
/// result to its frontend tool's call (an answer given before counts as
/// given: a retried run input changes nothing twice); the stream goes on
/// after the seq the previous response stopped at (the interrupts' seq), or
/// the answered calls' (what the response sent after them and the client
/// holds — calls, results — is not sent again).
async fn answer(
    state: &AppState,
    user: &str,
    chat_id: uuid::Uuid,
    resume: &[ResumeEntry],
    results: Vec<ToolResult>,
) -> Result<Answered, ApiError> {
    let mut after = 0;
    let mut answers = Vec::new();
    // Every entry is read before any is applied.
    for entry in resume {
        let (kind, rest) = entry.interrupt_id.split_once(':').unwrap_or_default();
        let (corr, seq) = AgUi::interrupt(rest).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "`{}` is not an interrupt of agentwire's",
                entry.interrupt_id
            ))
        })?;
        if !matches!(entry.status.as_str(), "resolved" | "cancelled") {
            return Err(ApiError::BadRequest(format!(
                "`{}`: status is `resolved` or `cancelled`",
                entry.interrupt_id
            )));
        }
        after = after.max(seq);
        answers.push((kind, corr.to_owned(), entry));
    }
    let registry = &state.registry;
    let (_, running) = registry.last_run(chat_id, user).await?;
    let last = registry.last_seq(chat_id).await?;
    after = results.iter().fold(after, |a, (_, _, seq)| a.max(*seq));
    let start = registry
        .run_start(chat_id, user, after.saturating_add(1))
        .await?;
    let (sub, feed) = follow(state, user, chat_id, start.saturating_sub(1)).await?;
    let mut answered = Vec::new();
    let mut routed = false;
    // In order: the tool results, then the interrupts' answers.
    let steps = results
        .into_iter()
        .map(|(corr, data, _)| ("tool", corr, None, data))
        .chain(
            answers
                .into_iter()
                .map(|(kind, corr, entry)| (kind, corr, Some(entry), Value::Null)),
        );
    for (kind, corr, entry, data) in steps {
        let resolved = entry.is_none_or(|e| e.status == "resolved");
        let payload = entry.map_or(&data, |e| &e.payload);
        let result = match kind {
            "approval" => {
                let approved = resolved && payload["approved"].as_bool().unwrap_or(true);
                let mut data = json!({"approved": approved});
                if let Some(reason) = payload["reason"].as_str() {
                    data["reason"] = reason.into();
                }
                registry
                    .component_result(chat_id, user, corr.clone(), data)
                    .await
            }
            _ if !resolved => registry.cancel(chat_id, user).await,
            "input" => {
                let text = answer_text(payload);
                registry
                    .submit_input(chat_id, user, corr.clone(), text)
                    .await
            }
            _ => {
                registry
                    .component_result(chat_id, user, corr.clone(), payload.clone())
                    .await
            }
        };
        match result {
            Ok(()) => {
                routed = true;
                answered.push(corr);
            }
            Err(SessionError::RequestNotFound(_)) => answered.push(corr),
            Err(e) => {
                registry.unsubscribe(chat_id, sub.conn_id).await;
                return Err(e.into());
            }
        }
    }
    // Nothing was waiting and nothing is in flight (a run input sent again
    // after the run ended): over at once, not a wait for a run.
    if !routed && !running && last <= after {
        registry.unsubscribe(chat_id, sub.conn_id).await;
        return Ok(Answered::Over(after));
    }
    Ok(Answered::Going(feed, answered, after))
}

/// Rejoins the thread's run in flight (204 when none).
#[utoipa::path(get, path = "/v1/ag-ui/{thread}/stream", tag = "ag-ui", params(("thread" = String, Path)),
    responses((status = 200, content_type = "text/event-stream", description = "the run in flight as AG-UI events"),
              (status = 204, description = "no run in flight"), (status = 404, body = ErrorBody)))]
pub(super) async fn rejoin(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(thread): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (chat_id, _) = conversation_chat(&user, Some(&thread));
    let (run_start, running) = state.registry.last_run(chat_id, &user).await?;
    let seen = match headers.get("last-event-id").and_then(|v| v.to_str().ok()) {
        None | Some("") => None,
        Some(id) => Some(
            id.trim()
                .parse::<u64>()
                .map_err(|_| ApiError::BadRequest(format!("`{id}` is not a seq")))?,
        ),
    };
    // Nothing in flight, and nothing of a finished run missed.
    if !running && seen.is_none_or(|s| s.saturating_add(1) >= run_start) {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    // The run the first event the client lacks belongs to, from its start.
    let run_start = match seen {
        Some(s) => {
            state
                .registry
                .run_start(chat_id, &user, s.saturating_add(1))
                .await?
        }
        None => run_start,
    };
    let (_, feed) = follow(&state, &user, chat_id, run_start.saturating_sub(1)).await?;
    let encoder = AgUi::new(thread, format!("run-{run_start}"), 0);
    let mut prelude = Vec::new();
    if seen.is_none() {
        prelude.push(Item::data(encoder.started()));
        // The thread up to the run's own first envelope (its user's words).
        let history = state
            .registry
            .history(chat_id, &user, run_start + 1)
            .await?;
        let messages: Vec<Value> = history.iter().filter_map(message).collect();
        prelude.push(Item::data(
            json!({"type": "MESSAGES_SNAPSHOT", "messages": messages}).to_string(),
        ));
    }
    let items = event_stream(chat_id, prelude, feed, Box::new(encoder));
    // After `Last-Event-ID`: what the client had is not sent again (the
    // encoder still reads it, so what it opened is closed in order).
    let seen = seen.unwrap_or(0);
    let items = items.filter(move |i| std::future::ready(i.id.is_none_or(|id| id > seen)));
    Ok(respond_items(chat_id, items))
}

/// An envelope of the transcript as an AG-UI message.
fn message(env: &crate::protocol::Envelope) -> Option<Value> {
    use crate::protocol::EventKind;
    let id = format!("msg-{}", env.seq);
    Some(match &env.kind {
        EventKind::Text { agent, content } if agent == "user" => {
            json!({"id": id, "role": "user", "content": content})
        }
        EventKind::Text { content, .. } => {
            json!({"id": id, "role": "assistant", "content": content})
        }
        EventKind::ToolCall {
            tool_name,
            payload,
            corr,
            ..
        } => json!({"id": id, "role": "assistant", "toolCalls": [{"id": corr, "type": "function",
                     "function": {"name": tool_name, "arguments": payload.to_string()}}]}),
        EventKind::ToolResponse { content, corr, .. } => {
            json!({"id": id, "role": "tool", "toolCallId": corr, "content": as_text(content)})
        }
        _ => return None,
    })
}
