//! AG-UI 1.0 (`@ag-ui/client`'s `HttpAgent`): `POST /v1/ag-ui` takes a
//! `RunAgentInput` and streams the chat's run as AG-UI events (`wire::AgUi`);
//! `GET /v1/ag-ui/{threadId}/stream` rejoins the run in flight, beyond the
//! spec: from its start (`RUN_STARTED`, a `MESSAGES_SNAPSHOT` of the thread
//! before it, then its events), or after `Last-Event-ID` (every event's `id`
//! is its envelope's seq).
//!
//! `threadId` is the chat (a UUID, or any id of the caller's: their own
//! chat derived from it). A run input whose `resume[]` answers the
//! interrupts of the previous response goes on from where it stopped (the
//! seq in each interrupt's id); otherwise its last message, the user's,
//! starts a turn.

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
    Feed, Item, Turn, begin_turn, event_stream, respond, respond_items, subscriber,
};
use super::state::AppState;
use crate::session::SessionError;
use crate::wire::{AgUi, Quiet, answer_text, as_text, text_parts};

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
    /// `{agent}`: a new chat's agent.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub forwarded_props: Value,
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
    let user = auth.user.as_str();
    let (chat_id, derived) = conversation_chat(user, Some(&input.thread_id));
    let (feed, answered, after) = if input.resume.is_empty() {
        let last = input
            .messages
            .last()
            .filter(|m| m["role"] == "user")
            .ok_or_else(|| {
                ApiError::BadRequest(
                    "nothing to run: the last message must be the user's, or `resume` must \
                     answer the interrupts"
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
        let (feed, _) = begin_turn(
            &state,
            Turn::say(user, auth.token.as_deref(), (chat_id, derived), agent, text),
        )
        .await?;
        (feed, Vec::new(), 0)
    } else {
        answer(&state, user, chat_id, &input.resume).await?
    };
    // Going on after `after`: the run is read from its start without sending
    // what the client has, so what it still waits on is known.
    let encoder = AgUi::new(input.thread_id, input.run_id, 0).answering(answered);
    let started = Item::data(encoder.started());
    let encoder = Quiet {
        inner: encoder,
        through: after,
    };
    Ok(respond(chat_id, vec![started], feed, Box::new(encoder)))
}

/// Routes each answer to the request its interrupt names (an answer given
/// before counts as given: a retried run input changes nothing twice); the
/// stream goes on after the seq the interrupts were issued at.
///
/// # Returns
/// The stream's queue (from the run's start), the corrs answered, and that seq.
async fn answer(
    state: &AppState,
    user: &str,
    chat_id: uuid::Uuid,
    resume: &[ResumeEntry],
) -> Result<(Feed, Vec<String>, u64), ApiError> {
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
    let start = registry
        .run_start(chat_id, user, after.saturating_add(1))
        .await?;
    let (sub, feed) = subscriber(state, user)?;
    registry
        .resume(chat_id, user, start.saturating_sub(1), sub.clone())
        .await?;
    let mut answered = Vec::new();
    for (kind, corr, entry) in answers {
        let resolved = entry.status == "resolved";
        let result = match kind {
            "approval" => {
                let approved = resolved && entry.payload["approved"].as_bool().unwrap_or(true);
                let mut data = json!({"approved": approved});
                if let Some(reason) = entry.payload["reason"].as_str() {
                    data["reason"] = reason.into();
                }
                registry
                    .component_result(chat_id, user, corr.clone(), data)
                    .await
            }
            _ if !resolved => registry.cancel(chat_id, user).await,
            "input" => {
                let text = answer_text(&entry.payload);
                registry
                    .submit_input(chat_id, user, corr.clone(), text)
                    .await
            }
            _ => {
                registry
                    .component_result(chat_id, user, corr.clone(), entry.payload.clone())
                    .await
            }
        };
        match result {
            Ok(()) | Err(SessionError::RequestNotFound(_)) => answered.push(corr),
            Err(e) => {
                registry.unsubscribe(chat_id, sub.conn_id).await;
                return Err(e.into());
            }
        }
    }
    Ok((feed, answered, after))
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
    let (sub, feed) = subscriber(&state, &user)?;
    state
        .registry
        .resume(chat_id, &user, run_start.saturating_sub(1), sub)
        .await?;
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
