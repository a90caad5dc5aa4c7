//! The Vercel AI SDK's HTTP chat transport (`ai` 7's `DefaultChatTransport`):
//! `POST /v1/ai-sdk/chat` answers with the UI message stream of the chat's run
//! (`wire::AiSdk`), `GET /v1/ai-sdk/chat/{id}/stream` replays the run in
//! flight from its start (the transport's resume; 204 when none is).
//!
//! A request whose last message is the user's starts a turn. One whose last
//! message is the assistant's carries answers: an approval given
//! (`approval-responded`) or a tool part the client completed
//! (`output-available`/`output-error`) for a request the run waits on goes to
//! the run, and the response goes on in the log from where the previous one
//! stopped (the `agentwire.seq` the stream put in the message's metadata).

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::api::ErrorBody;
use super::auth::AuthUser;
use super::chats::parse_body;
use super::error::ApiError;
use super::sse::conversation_chat;
use super::sse::stream::{
    Feed, Item, Turn, begin_turn, event_stream, follow, last_event_id, respond_items,
};
use super::state::AppState;
use crate::session::SessionError;
use crate::wire::{AiSdk, At, EventId, Framer, Out, Shows, answer_text, text_parts};

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/ai-sdk/chat", post(chat))
        .route("/v1/ai-sdk/chat/{id}/stream", get(resume))
}

/// What `DefaultChatTransport` posts.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct AiSdkRequest {
    /// The chat: a UUID, or the client's own id (the caller's chat derived
    /// from it).
    pub id: String,
    /// The conversation as the client holds it; only its last message is
    /// read.
    #[schema(value_type = Vec<Object>)]
    pub messages: Vec<Value>,
    /// `submit-message`, or `regenerate-message`: a new answer (the old one
    /// stays in the log as another version).
    #[serde(default)]
    pub trigger: Option<String>,
    /// With `regenerate-message`: the assistant message to answer again
    /// (`<chat>:<seq>`, as this server names them); absent or another id,
    /// the last answer. With `submit-message`: the user's message edited
    /// (the last of `messages`).
    #[serde(default, rename = "messageId")]
    pub message_id: Option<String>,
    /// The agent of a new chat (the configured default otherwise).
    #[serde(default)]
    pub agent: Option<String>,
}

/// A chat's run as one assistant message of the UI message stream.
#[utoipa::path(post, path = "/v1/ai-sdk/chat", tag = "ai-sdk", request_body = AiSdkRequest,
    responses((status = 200, content_type = "text/event-stream", description = "the AI SDK's UI message stream"),
              (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(super) async fn chat(
    State(state): State<AppState>,
    auth: AuthUser,
    body: Bytes,
) -> Result<Response, ApiError> {
    super::inline_files::within_limits(&state, &body)?;
    let body: AiSdkRequest = parse_body(&body)?;
    let prepared = send(&state, &auth.user, auth.token.as_deref(), body).await?;
    Ok(prepared.respond())
}

/// A response about to stream: the chat, where its run begins (the
/// message's id), and what the stream reads.
pub(super) struct Prepared {
    chat_id: Uuid,
    run_start: u64,
    feed: Feed,
    framer: Framer,
    /// The envelope the response's opening (`start`) follows; `None`: a
    /// rejoin, which sends none.
    opening: Option<u64>,
    /// Nothing to stream (a request that answers nothing, the log where the
    /// last response stopped): `start`, then the end at this seq — `stop`,
    /// or `tool-calls` while the run still waits.
    idle: Option<(u64, bool)>,
}

impl Prepared {
    /// The `start` chunk, with the run's message id.
    fn start(&self) -> Out {
        Out {
            event: None,
            data: AiSdk::start(&format!("{}:{}", self.chat_id, self.run_start)),
        }
    }

    /// The chunks: `start`, then the log's.
    pub(super) fn items(self) -> impl futures_util::Stream<Item = Item> + Send {
        use futures_util::StreamExt;
        let mut opening = Vec::new();
        if let Some((at, waits)) = self.idle {
            let mut outs = vec![self.start()];
            AiSdk::new(at).close_now(waits, &mut outs);
            self.framer.opening(outs, at, &mut opening);
            return futures_util::stream::iter(opening).left_stream();
        }
        if let Some(after) = self.opening {
            self.framer.opening(vec![self.start()], after, &mut opening);
        }
        event_stream(self.chat_id, opening, self.feed, self.framer).right_stream()
    }

    /// As the HTTP transport's SSE response.
    fn respond(self) -> Response {
        let chat_id = self.chat_id;
        let mut response = respond_items(chat_id, self.items());
        response.headers_mut().insert(
            "x-vercel-ai-ui-message-stream",
            HeaderValue::from_static("v1"),
        );
        response
    }
}

/// A `send`: a new turn, or the answers the last (assistant) message carries.
pub(super) async fn send(
    state: &AppState,
    user: &str,
    bearer: Option<&str>,
    body: AiSdkRequest,
) -> Result<Prepared, ApiError> {
    if body.trigger.as_deref() == Some("regenerate-message") {
        return regenerate(state, user, bearer, &body).await;
    }
    let last = body
        .messages
        .last()
        .ok_or_else(|| ApiError::BadRequest("`messages` must not be empty".into()))?;
    let (chat_id, derived) = conversation_chat(user, Some(&body.id));
    match last["role"].as_str() {
        Some("user") => {
            let text = text_parts(&last["parts"]);
            let files = super::inline_files::ai_sdk(&last["parts"]);
            if text.trim().is_empty() && files.is_empty() {
                return Err(ApiError::BadRequest(
                    "the last message has no text part and no file part".into(),
                ));
            }
            let files = super::inline_files::attach(state, user, chat_id, &files).await?;
            if body.message_id.is_some() {
                // The message as edited holds its files (those it kept come
                // back as their `/v1/files/{id}` URLs).
                let caller = crate::session::Caller {
                    attachments: Some(&files),
                    ..crate::session::Caller::bearing(user, bearer)
                };
                return edit(state, caller, chat_id, &body, text).await;
            }
            let agent = body.agent.as_deref().unwrap_or(&state.config.default_agent);
            let turn = Turn {
                attachments: Some(&files),
                ..Turn::say(user, bearer, (chat_id, derived), agent, text)
            };
            let (feed, before) = begin_turn(state, turn).await?;
            // The run the user's words begin (it may be over already).
            let run_start = state.registry.run_start(chat_id, user, before + 1).await?;
            let encoder = encoder(state, chat_id, user).await?;
            Ok(Prepared {
                chat_id,
                run_start,
                feed,
                framer: Framer::new(encoder, Shows::Response, before),
                opening: Some(before),
                idle: None,
            })
        }
        Some("assistant") => answer(state, user, chat_id, last).await,
        _ => Err(ApiError::BadRequest(
            "the last message's `role` must be `user` or `assistant`".into(),
        )),
    }
}

/// `regenerate()`: the answer the client dropped is written again, on a
/// branch of its own (`chat.branch`), and streams as a new assistant
/// message named after the branch.
async fn regenerate(
    state: &AppState,
    user: &str,
    bearer: Option<&str>,
    body: &AiSdkRequest,
) -> Result<Prepared, ApiError> {
    let (chat_id, _) = conversation_chat(user, Some(&body.id));
    let registry = &state.registry;
    let caller = crate::session::Caller::bearing(user, bearer);
    // `regenerate({messageId})` of a user's message (its id is the client's):
    // a new answer to it, named by its place among the user's messages.
    let users = body.messages.iter().filter(|m| m["role"] == "user").count();
    if body.message_id.is_some() && body.messages.last().is_some_and(|m| m["role"] == "user") {
        let target = Some(crate::session::MessageRef::Nth(users - 1));
        let asked = registry.regenerate_ref(chat_id, caller, target, None);
        return branching(state, user, chat_id, asked).await;
    }
    // One of this server's assistant ids: the run it names.
    let run = body
        .message_id
        .as_deref()
        .and_then(|id| id.split_once(':'))
        .filter(|(chat, _)| *chat == chat_id.to_string())
        .and_then(|(_, seq)| seq.parse::<u64>().ok());
    let asked = registry.regenerate_run(chat_id, caller, run);
    branching(state, user, chat_id, asked).await
}

/// `sendMessage({text, messageId})`: the user's message the client edited
/// (the last of `messages`, which the client cut there) is named by its place
/// among the user's messages, as it mirrors the active path; the
/// conversation goes on from the new text on a branch of its own.
async fn edit(
    state: &AppState,
    caller: crate::session::Caller<'_>,
    chat_id: Uuid,
    body: &AiSdkRequest,
    text: String,
) -> Result<Prepared, ApiError> {
    let nth = body.messages.iter().filter(|m| m["role"] == "user").count() - 1;
    let at = crate::session::MessageRef::Nth(nth);
    let edit = state.registry.edit(chat_id, caller, at, text, None);
    branching(state, caller.user, chat_id, edit).await
}

/// Follows the chat, runs `op` (a branch: its run starts after the log's
/// last seq now), and streams that run as a new assistant message.
async fn branching(
    state: &AppState,
    user: &str,
    chat_id: Uuid,
    op: impl std::future::Future<Output = Result<(), SessionError>>,
) -> Result<Prepared, ApiError> {
    let registry = &state.registry;
    let (sub, feed) = super::sse::stream::subscriber(state, user)?;
    let before = registry.last_seq(chat_id).await?;
    let started = async {
        registry.follow(chat_id, user, sub.clone()).await?;
        op.await
    }
    .await;
    if let Err(e) = started {
        registry.unsubscribe(chat_id, sub.conn_id).await;
        return Err(e.into());
    }
    let run_start = registry.run_start(chat_id, user, before + 1).await?;
    Ok(Prepared {
        chat_id,
        run_start,
        feed,
        framer: Framer::new(
            encoder(state, chat_id, user).await?,
            Shows::Response,
            before,
        ),
        opening: Some(before),
        idle: None,
    })
}

/// The answers an assistant message carries go to the run; the response
/// goes on from where the previous one stopped (the run read from its start
/// without sending what the client has, so what it still waits on is known).
async fn answer(
    state: &AppState,
    user: &str,
    chat_id: Uuid,
    message: &Value,
) -> Result<Prepared, ApiError> {
    let registry = &state.registry;
    // Where the previous response stopped: the message's metadata says; a
    // message kept without it (an app that stores messages its own way)
    // answers what the run waits on now, and a run that waits logs nothing
    // meanwhile, so it stopped at the log's end.
    let after = match message["metadata"]["agentwire"]["seq"].as_u64() {
        Some(seq) => seq,
        None => registry.chat(chat_id, user).await?.1,
    };
    let start = registry
        .run_start(chat_id, user, after.saturating_add(1))
        .await?;
    let (sub, feed) = follow(state, user, chat_id, start.saturating_sub(1)).await?;
    let parts = message["parts"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut answered = Vec::new();
    for part in parts {
        let meta = &part["toolMetadata"];
        let input = meta["input_request"] == true;
        // Only what waits for a person: the server's own tool parts are not
        // sent back (nor charged as answers).
        let (id, result) = match part["state"].as_str() {
            Some("approval-responded") => {
                let Some(id) = part["approval"]["id"].as_str() else {
                    continue;
                };
                let mut data = json!({"approved": part["approval"]["approved"] == true});
                if let Some(reason) = part["approval"]["reason"].as_str() {
                    data["reason"] = reason.into();
                }
                (
                    id,
                    registry
                        .component_result(chat_id, user, id.to_owned(), data)
                        .await,
                )
            }
            Some(state @ ("output-available" | "output-error"))
                if input || meta["component_type"].is_string() =>
            {
                let Some(id) = part["toolCallId"].as_str() else {
                    continue;
                };
                let result = if input {
                    let text = match state {
                        "output-error" => part["errorText"].as_str().unwrap_or_default().to_owned(),
                        _ => answer_text(&part["output"]),
                    };
                    registry
                        .submit_input(chat_id, user, id.to_owned(), text)
                        .await
                } else {
                    let data = match state {
                        "output-error" => json!({"error": part["errorText"]}),
                        _ => part["output"].clone(),
                    };
                    registry
                        .component_result(chat_id, user, id.to_owned(), data)
                        .await
                };
                (id, result)
            }
            _ => continue,
        };
        match result {
            Ok(()) => answered.push(id.to_owned()),
            // Answered before: in the log already.
            Err(SessionError::RequestNotFound(_)) => {}
            Err(e) => {
                registry.unsubscribe(chat_id, sub.conn_id).await;
                return Err(e.into());
            }
        }
    }
    // Nothing answered and nothing logged since the last response stopped
    // (a client that sends again, after the run ended or while it waits
    // for something else): the response is over at once, not a wait.
    let (_, running) = registry.last_run(chat_id, user).await?;
    let idle = answered.is_empty() && registry.last_seq(chat_id).await? <= after;
    if idle {
        registry.unsubscribe(chat_id, sub.conn_id).await;
    }
    // The run read from its start (so what it still waits on is known),
    // what the client holds — up to where its last response stopped — not
    // sent again.
    let framer = Framer::new(
        encoder(state, chat_id, user).await?,
        Shows::Response,
        start.saturating_sub(1),
    )
    .holding(EventId::after(after))
    .expecting(answered);
    Ok(Prepared {
        chat_id,
        run_start: start,
        feed,
        framer,
        opening: Some(after),
        idle: idle.then_some((after, running)),
    })
}

/// The transport's resume: the run in flight replayed from its start, then
/// live; 204 when the chat's last run is over. With `Last-Event-ID` (an
/// event's id), what follows that event exactly, the run over or not.
#[utoipa::path(get, path = "/v1/ai-sdk/chat/{id}/stream", tag = "ai-sdk", params(("id" = String, Path)),
    responses((status = 200, content_type = "text/event-stream", description = "the run in flight, from its start"),
              (status = 204, description = "no run in flight (or no such chat yet), or an opening's id with nothing logged after it"),
              (status = 400, body = ErrorBody)))]
pub(super) async fn resume(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let seen = last_event_id(&headers)?;
    let prepared = match seen {
        Some(seen) => rejoin(&state, &user, &id, seen).await?,
        None => reconnect(&state, &user, &id).await?,
    };
    Ok(match prepared {
        Some(prepared) => prepared.respond(),
        None => StatusCode::NO_CONTENT.into_response(),
    })
}

/// A `resume`: the run in flight from its start, or `None` when the chat's
/// last run is over.
pub(super) async fn reconnect(
    state: &AppState,
    user: &str,
    id: &str,
) -> Result<Option<Prepared>, ApiError> {
    let (chat_id, _) = conversation_chat(user, Some(id));
    // A chat not created yet has nothing in flight (`useChat` resumes on mount).
    let (run_start, running) = match state.registry.last_run(chat_id, user).await {
        Ok(last) => last,
        Err(SessionError::NotFound) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if !running {
        return Ok(None);
    }
    let from = run_start.saturating_sub(1);
    let (_, feed) = follow(state, user, chat_id, from).await?;
    Ok(Some(Prepared {
        chat_id,
        run_start,
        feed,
        framer: Framer::new(encoder(state, chat_id, user).await?, Shows::Run, from),
        opening: Some(from),
        idle: None,
    }))
}

/// A rejoin after the event `seen`: what its stream would have sent next
/// (the run read again from its start), or `None` when the log holds
/// nothing after it and no run is in flight.
async fn rejoin(
    state: &AppState,
    user: &str,
    id: &str,
    seen: EventId,
) -> Result<Option<Prepared>, ApiError> {
    let (chat_id, _) = conversation_chat(user, Some(id));
    let (_, running) = match state.registry.last_run(chat_id, user).await {
        Ok(last) => last,
        Err(SessionError::NotFound) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let next = match seen.at {
        At::Opening(_) => seen.seq.saturating_add(1),
        At::Made(_) => seen.seq,
    };
    // Nothing logged after an opening, and nothing will be.
    if !running && state.registry.last_seq(chat_id).await? < next {
        return Ok(None);
    }
    let run_start = state.registry.run_start(chat_id, user, next).await?;
    let from = run_start.saturating_sub(1);
    let (_, feed) = follow(state, user, chat_id, from).await?;
    let shows = if seen.whole {
        Shows::Run
    } else {
        Shows::Response
    };
    Ok(Some(Prepared {
        chat_id,
        run_start,
        feed,
        framer: Framer::new(encoder(state, chat_id, user).await?, shows, from).holding(seen),
        opening: None,
        idle: None,
    }))
}

/// The chat's encoder: the tools its agent file declares are named parts
/// (`tool-<name>`), any other dynamic.
async fn encoder(
    state: &AppState,
    chat_id: Uuid,
    user: &str,
) -> Result<Box<dyn crate::wire::Encoder>, ApiError> {
    let (chat, _) = state.registry.chat(chat_id, user).await?;
    let declared = state
        .registry
        .agents()
        .get(&chat.agent)
        .map(|a| a.declared_tools())
        .unwrap_or_default();
    Ok(Box::new(AiSdk::new(0).declaring(declared)))
}
