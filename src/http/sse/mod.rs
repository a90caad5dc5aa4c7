//! SSE: the chat log served as the event streams of the systems agentwire
//! replaces (contract §4). Every dialect is an [`crate::wire::Encoder`] over the
//! same log; this module is the shared streaming core and the routes.
//!
//! A stream subscribes to its chat like a WebSocket connection does (a bounded
//! queue, replay first when rejoining), so it is resumable with
//! `Last-Event-ID` (every event's `id` resumes exactly after it:
//! `wire::EventId`). A client that
//! goes away does not cancel the run. Streams that belong to a run end after
//! its completion; the `chat` dialect stays open.

pub(super) mod stream;
pub(super) mod threads;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::post;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::api::{AgentChatRequest, AgentHostRequest, Cancelled, ErrorBody, EventsPage};
use super::auth::AuthUser;
use super::chats::{chat_id as parse_chat_id, parse_body};
use super::error::ApiError;
use super::state::AppState;
use crate::wire::{Dialect, Out};
use stream::{Turn, begin_turn, follow, last_event_id, respond};

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/agent/chat", post(agent_chat))
        .route("/api/chat/send", post(agent_host))
        .route("/v1/chats/{id}/events", axum::routing::get(rejoin))
        .route("/v1/chats/{id}/cancel", post(cancel))
        .route("/chat", post(threads::thread_create))
        .route("/chat/{id}/message", post(threads::thread_message))
        .route(
            "/chat/{id}/model",
            axum::routing::get(threads::thread_model).post(threads::thread_set_model),
        )
}

/// The chat a `conversation_id` names: the UUID itself, or for any other
/// string the caller's own chat derived from it (`session::conversation_chat`:
/// no other user can occupy it). `None`: a new chat.
///
/// # Returns
/// The chat id, and whether it was derived.
pub fn conversation_chat(user: &str, conversation_id: Option<&str>) -> (Uuid, bool) {
    match conversation_id {
        None => (Uuid::new_v4(), false),
        Some(id) => match Uuid::parse_str(id) {
            Ok(uuid) => (uuid, false),
            Err(_) => (crate::session::conversation_chat(user, id), true),
        },
    }
}

// ----- agent-chat (seed 000) ------------------------------------------------

/// Seed 000's chat: an SSE stream of one turn (`message_start`, `content_chunk`,
/// `tool_call_start`, `tool_call_result`, `error`, `message_complete`).
#[utoipa::path(post, path = "/v1/agent/chat", tag = "sse", request_body = AgentChatRequest,
    responses((status = 200, content_type = "text/event-stream", description = "the agent-chat dialect"),
              (status = 400, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub(super) async fn agent_chat(
    State(state): State<AppState>,
    auth: AuthUser,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body: AgentChatRequest = parse_body(&body)?;
    if body.message.trim().is_empty() {
        return Err(ApiError::BadRequest("`message` must not be empty".into()));
    }
    let (chat_id, derived) = conversation_chat(&auth.user, body.conversation_id.as_deref());
    let agent = body.agent.as_deref().unwrap_or(&state.config.default_agent);
    let (rx, before) = begin_turn(
        &state,
        Turn {
            context_type: Some(&body.context_type),
            context: body.context.as_ref(),
            ..Turn::say(
                &auth.user,
                auth.token.as_deref(),
                (chat_id, derived),
                agent,
                body.message,
            )
        },
    )
    .await?;
    let framer = Dialect::AgentChat.framer(chat_id, before);
    Ok(respond(chat_id, Vec::new(), rx, framer))
}

// ----- agent-host (seed 004) ------------------------------------------------

/// Seed 004's chat: an SSE stream of one turn (`stream_started`,
/// `message_added`, `content_chunk`, `tool_call`, `tool_result`,
/// `message_complete`, `stream_complete`, `error`, `cancelled`).
#[utoipa::path(post, path = "/api/chat/send", tag = "sse", request_body = AgentHostRequest,
    responses((status = 200, content_type = "text/event-stream", description = "the agent-host dialect"),
              (status = 400, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub(super) async fn agent_host(
    State(state): State<AppState>,
    auth: AuthUser,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body: AgentHostRequest = parse_body(&body)?;
    if body.message.trim().is_empty() {
        return Err(ApiError::BadRequest("`message` must not be empty".into()));
    }
    let (chat_id, derived) = conversation_chat(&auth.user, body.conversation_id.as_deref());
    let agent = body.agent.as_deref().unwrap_or(&state.config.default_agent);
    let (rx, before) = begin_turn(
        &state,
        Turn {
            model: body.model_id.as_deref(),
            ..Turn::say(
                &auth.user,
                auth.token.as_deref(),
                (chat_id, derived),
                agent,
                body.message,
            )
        },
    )
    .await?;
    let started = Out {
        event: Some("stream_started"),
        data: json!({"request_id": Uuid::new_v4(), "conversation_id": chat_id}).to_string(),
    };
    let framer = Dialect::AgentHost.framer(chat_id, before);
    let mut prelude = Vec::new();
    framer.opening(vec![started], before, &mut prelude);
    Ok(respond(chat_id, prelude, rx, framer))
}

// ----- rejoin and cancel ------------------------------------------------------

#[derive(Deserialize, utoipa::IntoParams)]
pub(super) struct RejoinQuery {
    /// `chat` (default), `agent-chat`, `agent-host` or `threads`.
    #[serde(default)]
    dialect: Option<String>,
    /// Join after this seq (`Last-Event-ID`, an event's id, goes on after
    /// that event exactly; `after` names the turn it lands in first).
    #[serde(default)]
    after: Option<String>,
    /// Ask for a JSON page of at most this many envelopes.
    #[serde(default)]
    limit: Option<u32>,
}

/// Whether a request for `/events` wants a JSON page rather than a stream:
/// it names a `limit`, or accepts JSON and not `text/event-stream`.
fn wants_page(headers: &HeaderMap, limit: Option<u32>) -> bool {
    let accept = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    limit.is_some()
        || (accept.contains("application/json") && !accept.contains("text/event-stream"))
}

/// Replays a chat after `Last-Event-ID` (or `?after=`), then follows it live,
/// in any dialect; or, with `limit` or a JSON-only `Accept`, a JSON page.
#[utoipa::path(get, path = "/v1/chats/{id}/events", tag = "sse", params(("id" = Uuid, Path), RejoinQuery),
    responses((status = 200, body = EventsPage, description = "a JSON page, or the chosen dialect as text/event-stream"),
              (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn rejoin(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
    Query(query): Query<RejoinQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let chat_id = parse_chat_id(&id)?;
    let name = query.dialect.as_deref().unwrap_or("chat");
    let dialect = Dialect::parse(name).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "unknown dialect `{name}`: chat, agent-chat, agent-host or threads"
        ))
    })?;
    let seen = last_event_id(&headers)?;
    let after = match query.after.as_deref().map(str::trim) {
        None | Some("") => 0,
        Some(p) => p
            .parse::<u64>()
            .ok()
            .filter(|_| p.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| ApiError::BadRequest(format!("`{p}` is not a seq")))?,
    };
    if wants_page(&headers, query.limit) {
        // A page is envelopes: after the one the client's last event is of.
        let after = seen.map_or(after, |id| id.seq);
        let limit = query.limit.unwrap_or(100).clamp(1, 1000);
        let (page, more) = state.registry.page(chat_id, &user, after, limit).await?;
        // Every seq of the page or none: a skipped envelope is a gap the
        // client could never see.
        let events = page
            .iter()
            .map(|raw| serde_json::from_str::<Value>(raw))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ApiError::Internal(format!("unreadable envelope in the log: {e}")))?;
        // A page may end early on its byte budget (about 4 MiB): the next
        // one starts after its last envelope.
        let next_after = more
            .then(|| events.last().and_then(|e| e["seq"].as_u64()))
            .flatten();
        let page = EventsPage {
            chat_id,
            events,
            next_after,
        };
        return Ok(Json(page).into_response());
    }
    // The run the client's next event belongs to is read from its start,
    // so the dialect says what it would have said (a turn's number, who
    // speaks); what the client holds is left out. `chat` has no such
    // state: it reads from the client's envelope.
    let next = match seen {
        Some(id) if matches!(id.at, crate::wire::At::Opening(_)) => id.seq.saturating_add(1),
        Some(id) => id.seq,
        None => after.saturating_add(1),
    };
    let from = if dialect == Dialect::Chat {
        next.saturating_sub(1)
    } else {
        state
            .registry
            .run_start(chat_id, &user, next)
            .await?
            .saturating_sub(1)
    };
    let (_, rx) = follow(&state, &user, chat_id, from).await?;
    let framer = dialect.framer(chat_id, from);
    let framer = match seen {
        Some(id) => framer.holding(id),
        None => framer.joining(after),
    };
    Ok(respond(chat_id, Vec::new(), rx, framer))
}

/// Ends the chat's active run (no effect when none is active). `id` is the
/// chat, or a conversation id of the caller's (an AI SDK chat id, an AG-UI
/// `threadId`: the chat derived from it).
#[utoipa::path(post, path = "/v1/chats/{id}/cancel", tag = "rest",
    params(("id" = String, Path, description = "the chat's UUID, or the caller's conversation id")),
    responses((status = 200, body = Cancelled), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn cancel(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
) -> Result<Json<Cancelled>, ApiError> {
    if id.is_empty() {
        return Err(ApiError::BadRequest("no chat or conversation id".into()));
    }
    let (chat_id, _) = conversation_chat(&user, Some(&id));
    state.registry.cancel(chat_id, &user).await?;
    Ok(Json(Cancelled {
        chat_id,
        cancelled: true,
    }))
}
