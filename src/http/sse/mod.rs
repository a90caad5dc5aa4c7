//! SSE: the chat log served as the event streams of the systems agentwire
//! replaces (contract §4). Every dialect is an [`crate::wire::Encoder`] over the
//! same log; this module is the shared streaming core and the routes.
//!
//! A stream subscribes to its chat like a WebSocket connection does (a bounded
//! queue, replay first when rejoining), so it is resumable with
//! `Last-Event-ID` (every event's `id` is its envelope's `seq`). A client that
//! goes away does not cancel the run. Streams that belong to a run end after
//! its completion; the `chat` dialect stays open.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::post;
use futures_util::Stream;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::api::{
    AgentChatRequest, AgentHostRequest, Cancelled, ErrorBody, EventsPage, SetModel, ThreadCreate,
    ThreadCreated, ThreadMessage, ThreadModelSet, ThreadModels,
};
use super::auth::AuthUser;
use super::chats::{chat_id as parse_chat_id, model_infos, parse_body};
use super::error::ApiError;
use super::state::AppState;
use crate::protocol::{Envelope, ErrorCode, EventKind};
use crate::session::{Caller, Outbound, OutboundRx, Replay, SessionError, Subscriber};
use crate::wire::{Dialect, Encoder, Out};

/// Comment lines keep idle streams (and proxies) alive this often.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/agent/chat", post(agent_chat))
        .route("/api/chat/send", post(agent_host))
        .route("/v1/chats/{id}/events", axum::routing::get(rejoin))
        .route("/v1/chats/{id}/cancel", post(cancel))
        .route("/chat", post(thread_create))
        .route("/chat/{id}/message", post(thread_message))
        .route(
            "/chat/{id}/model",
            axum::routing::get(thread_model).post(thread_set_model),
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

/// A new subscriber with its own bounded queue.
/// A new stream of `user`'s: a subscriber with its own bounded queue, and
/// the stream's slot in the user's quota (`max_streams_per_user`).
fn subscriber(state: &AppState, user: &str) -> Result<(Subscriber, Feed), ApiError> {
    let slot = state.streams.take(user)?;
    let (sub, rx) = Subscriber::channel(
        state.next_conn_id.fetch_add(1, Ordering::Relaxed),
        state.config.outbound_queue,
        state.config.outbound_queue_bytes,
    );
    Ok((sub, Feed { rx, _slot: slot }))
}

/// What a stream reads, and its slot in the user's quota while it lives.
struct Feed {
    rx: OutboundRx,
    _slot: crate::session::Slot,
}

/// What a POST that starts a turn carries.
struct Turn<'a> {
    user: &'a str,
    bearer: Option<&'a str>,
    chat_id: Uuid,
    /// `chat_id` was derived from the caller's conversation id.
    derived: bool,
    agent: &'a str,
    message: String,
    context_type: Option<&'a str>,
    context: Option<&'a Map<String, Value>>,
    model: Option<&'a str>,
}

/// Follows (or creates) the chat, sets its model if asked, and sends the
/// user's message: the stream then carries exactly that run.
///
/// # Returns
/// The subscription's queue and the chat's last seq before the turn.
async fn begin_turn(state: &AppState, turn: Turn<'_>) -> Result<(Feed, u64), ApiError> {
    let registry = &state.registry;
    let (sub, rx) = subscriber(state, turn.user)?;
    let caller = Caller {
        user: turn.user,
        bearer: turn.bearer,
        context_type: turn.context_type,
        context: turn.context,
    };
    let before = registry.last_seq(turn.chat_id).await?;
    match registry.follow(turn.chat_id, turn.user, sub.clone()).await {
        Ok(()) => {}
        Err(SessionError::NotFound) if turn.derived => {
            registry
                .start_conversation(turn.chat_id, caller, turn.agent, None, Some(sub.clone()))
                .await?;
        }
        Err(SessionError::NotFound) => {
            registry
                .start(turn.chat_id, caller, turn.agent, None, Some(sub.clone()))
                .await?;
        }
        Err(e) => return Err(e.into()),
    }
    let sent = async {
        if let Some(model) = turn.model {
            registry.set_model(turn.chat_id, turn.user, model).await?;
        }
        registry
            .user_message(turn.chat_id, caller, turn.message, None)
            .await
    }
    .await;
    if let Err(e) = sent {
        registry.unsubscribe(turn.chat_id, sub.conn_id).await;
        return Err(e.into());
    }
    Ok((rx, before))
}

/// The SSE response: contract §4's headers and keep-alive comments.
fn respond(chat_id: Uuid, prelude: Vec<Event>, rx: Feed, encoder: Box<dyn Encoder>) -> Response {
    let stream = event_stream(chat_id, prelude, rx, encoder);
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response();
    let headers = response.headers_mut();
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(&chat_id.to_string()) {
        headers.insert("x-conversation-id", v);
    }
    response
}

struct StreamState {
    chat_id: Uuid,
    pending: VecDeque<Event>,
    rx: OutboundRx,
    _slot: crate::session::Slot,
    encoder: Box<dyn Encoder>,
    replay: Option<Replay>,
    /// The last envelope handled was a `chat.run_complete`.
    after_complete: bool,
    done: bool,
    _open: crate::metrics::ConnectionGauge,
}

impl StreamState {
    fn handle(&mut self, raw: &str) {
        let env = match serde_json::from_str::<Envelope>(raw) {
            Ok(env) => env,
            Err(e) => return self.fail(raw, &e),
        };
        self.after_complete = matches!(env.kind, EventKind::RunComplete { .. });
        let mut outs = Vec::new();
        self.encoder.encode(&env, raw, &mut outs);
        self.push(&outs, Some(env.seq));
    }

    /// An envelope that cannot be read ends the stream loudly: the dialect's
    /// error event, with no `id` (a rejoin asks for the same seq again), and
    /// nothing after it. Skipping it would leave a gap the client cannot see.
    fn fail(&mut self, raw: &str, e: &serde_json::Error) {
        let seq = serde_json::from_str::<Value>(raw)
            .ok()
            .and_then(|v| v["seq"].as_u64());
        tracing::error!(error = %e, ?seq, "unreadable envelope in the log; ending the stream");
        crate::metrics::error_sent(ErrorCode::PersistenceError.as_str());
        let env = Envelope {
            kind: EventKind::Error {
                message: "an envelope of this chat cannot be read; the stream ends here".into(),
                error_code: ErrorCode::PersistenceError,
                details: seq.map(|seq| serde_json::json!({ "seq": seq })),
                recoverable: false,
            },
            chat_id: self.chat_id,
            seq: 0,
            ts: crate::protocol::now_ts(),
        };
        let mut outs = Vec::new();
        self.encoder.encode(&env, &env.to_json(), &mut outs);
        self.push(&outs, None);
        self.done = true;
        self.replay = None;
    }

    fn push(&mut self, outs: &[Out], id: Option<u64>) {
        for o in outs {
            // Fields go out in call order, and line-by-line clients (seed 004's
            // stream-handler.js) read `event:` before `data:`.
            let mut event = Event::default();
            if let Some(name) = o.event {
                event = event.event(name);
            }
            if let Some(id) = id {
                event = event.id(id.to_string());
            }
            self.pending.push_back(event.data(&o.data));
        }
    }

    fn run_over(&self) -> bool {
        self.encoder.ends_with_run() && self.after_complete
    }
}

/// Replay (if any), then live events, each encoded by the dialect.
fn event_stream(
    chat_id: Uuid,
    prelude: Vec<Event>,
    feed: Feed,
    encoder: Box<dyn Encoder>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let state = StreamState {
        chat_id,
        pending: prelude.into(),
        rx: feed.rx,
        _slot: feed._slot,
        encoder,
        replay: None,
        after_complete: false,
        done: false,
        _open: crate::metrics::ConnectionGauge::open("sse"),
    };
    futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(event) = st.pending.pop_front() {
                return Some((Ok(event), st));
            }
            if st.done {
                return None;
            }
            if let Some(replay) = &mut st.replay {
                match replay.next_page().await {
                    Ok(Some(page)) => {
                        // Nothing after an envelope that could not be read.
                        for raw in &page {
                            if st.done {
                                break;
                            }
                            st.handle(raw);
                        }
                    }
                    Ok(None) => {
                        st.replay = None;
                        // Caught up on a finished run: the stream is complete.
                        st.done |= st.run_over();
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "replay failed");
                        st.done = true;
                    }
                }
                continue;
            }
            match st.rx.recv().await {
                Some(Outbound::Event(raw)) => {
                    st.handle(&raw);
                    st.done |= st.run_over();
                }
                Some(Outbound::Replay(replay)) => st.replay = Some(replay),
                // A per-connection error, or no more events (the chat closed
                // this subscriber as too slow): end; the client rejoins.
                Some(Outbound::Frame(_)) | None => st.done = true,
            }
        }
    })
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
    let (rx, _) = begin_turn(
        &state,
        Turn {
            user: &auth.user,
            bearer: auth.token.as_deref(),
            chat_id,
            derived,
            agent,
            message: body.message,
            context_type: Some(&body.context_type),
            context: body.context.as_ref(),
            model: None,
        },
    )
    .await?;
    let encoder = Dialect::AgentChat.encoder(Some(chat_id.to_string()));
    Ok(respond(chat_id, Vec::new(), rx, encoder))
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
            user: &auth.user,
            bearer: auth.token.as_deref(),
            chat_id,
            derived,
            agent,
            message: body.message,
            context_type: None,
            context: None,
            model: body.model_id.as_deref(),
        },
    )
    .await?;
    let started = Event::default()
        .event("stream_started")
        .id(before.to_string())
        .data(json!({"request_id": Uuid::new_v4(), "conversation_id": chat_id}).to_string());
    let encoder = Dialect::AgentHost.encoder(None);
    Ok(respond(chat_id, vec![started], rx, encoder))
}

// ----- rejoin and cancel ------------------------------------------------------

#[derive(Deserialize, utoipa::IntoParams)]
pub(super) struct RejoinQuery {
    /// `chat` (default), `agent-chat`, `agent-host` or `threads`.
    #[serde(default)]
    dialect: Option<String>,
    /// Replay after this seq (as `Last-Event-ID`).
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
    let position = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or(query.after);
    let after = match position.as_deref().map(str::trim) {
        None | Some("") => 0,
        Some(p) => p
            .parse::<u64>()
            .map_err(|_| ApiError::BadRequest(format!("`{p}` is not a seq")))?,
    };
    if wants_page(&headers, query.limit) {
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
    let (sub, rx) = subscriber(&state, &user)?;
    state.registry.resume(chat_id, &user, after, sub).await?;
    Ok(respond(chat_id, Vec::new(), rx, dialect.encoder(None)))
}

/// Ends the chat's active run (no effect when none is active).
#[utoipa::path(post, path = "/v1/chats/{id}/cancel", tag = "rest", params(("id" = Uuid, Path)),
    responses((status = 200, body = Cancelled), (status = 404, body = ErrorBody)))]
pub(super) async fn cancel(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
) -> Result<Json<Cancelled>, ApiError> {
    let chat_id = parse_chat_id(&id)?;
    state.registry.cancel(chat_id, &user).await?;
    Ok(Json(Cancelled {
        chat_id,
        cancelled: true,
    }))
}

// ----- threads (seed 003) -----------------------------------------------------

/// Seed 003: a new thread (a chat of the default agent, or `agent`).
#[utoipa::path(post, path = "/chat", tag = "threads", request_body(content = Option<ThreadCreate>),
    responses((status = 200, body = ThreadCreated), (status = 400, body = ErrorBody)))]
pub(super) async fn thread_create(
    State(state): State<AppState>,
    auth: AuthUser,
    body: Bytes,
) -> Result<Json<ThreadCreated>, ApiError> {
    let body: ThreadCreate = if body.is_empty() {
        ThreadCreate::default()
    } else {
        parse_body(&body)?
    };
    let agent = body.agent.as_deref().unwrap_or(&state.config.default_agent);
    let chat_id = Uuid::new_v4();
    state
        .registry
        .start(chat_id, Caller::user(&auth.user), agent, None, None)
        .await?;
    Ok(Json(ThreadCreated { thread_id: chat_id }))
}

/// Seed 003: one turn as data-only SSE (`chunk`, `tool_result`, `end`, `error`).
#[utoipa::path(post, path = "/chat/{thread_id}/message", tag = "threads", params(("thread_id" = Uuid, Path)),
    request_body = ThreadMessage,
    responses((status = 200, content_type = "text/event-stream", description = "the threads dialect"),
              (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn thread_message(
    State(state): State<AppState>,
    auth: AuthUser,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let chat_id = parse_chat_id(&id)?;
    let body: ThreadMessage = parse_body(&body)?;
    if body.message.trim().is_empty() {
        return Err(ApiError::BadRequest("`message` must not be empty".into()));
    }
    let (rx, _) = begin_turn(
        &state,
        Turn {
            user: &auth.user,
            bearer: auth.token.as_deref(),
            chat_id,
            derived: false,
            agent: &state.config.default_agent,
            message: body.message,
            context_type: None,
            context: None,
            model: None,
        },
    )
    .await?;
    Ok(respond(
        chat_id,
        Vec::new(),
        rx,
        Dialect::Threads.encoder(None),
    ))
}

/// Seed 003: the thread's model and every configured model's availability.
#[utoipa::path(get, path = "/chat/{thread_id}/model", tag = "threads", params(("thread_id" = Uuid, Path)),
    responses((status = 200, body = ThreadModels), (status = 404, body = ErrorBody)))]
pub(super) async fn thread_model(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
) -> Result<Json<ThreadModels>, ApiError> {
    let thread_id = parse_chat_id(&id)?;
    let model = state.registry.chat_model(thread_id, &user).await?;
    let models = model_infos(&state)
        .await
        .into_iter()
        .map(|m| (m.name, m.available))
        .collect();
    Ok(Json(ThreadModels {
        thread_id,
        model,
        models,
    }))
}

/// Seed 003: switches the thread's model (a name or an alias).
#[utoipa::path(post, path = "/chat/{thread_id}/model", tag = "threads", params(("thread_id" = Uuid, Path)),
    request_body = SetModel,
    responses((status = 200, body = ThreadModelSet), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 422, body = ErrorBody)))]
pub(super) async fn thread_set_model(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<ThreadModelSet>, ApiError> {
    let thread_id = parse_chat_id(&id)?;
    let SetModel { name } = parse_body(&body)?;
    let model = state.registry.set_model(thread_id, &user, &name).await?;
    Ok(Json(ThreadModelSet { thread_id, model }))
}
