//! AG-UI 1.0 (`@ag-ui/client`'s `HttpAgent`): `POST /v1/ag-ui` takes a
//! `RunAgentInput` and streams the chat's run as AG-UI events (`wire::AgUi`);
//! `GET /v1/ag-ui/{threadId}/stream` rejoins the run in flight, beyond the
//! spec: from its start (`RUN_STARTED`, a `MESSAGES_SNAPSHOT` of the thread
//! before it, then its events), or after `Last-Event-ID` (every event's `id`
//! resumes exactly after it: `wire::EventId`).
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
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use super::api::ErrorBody;
use super::auth::AuthUser;
use super::chats::parse_body;
use super::error::ApiError;
use super::sse::conversation_chat;
use super::sse::stream::{Feed, Turn, begin_turn, follow, last_event_id, respond, respond_items};
use super::state::AppState;
use crate::session::SessionError;
use crate::wire::{AgUi, At, EventId, Framer, Out, Shows, answer_text, as_text, text_parts};

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
    super::inline_files::within_limits(&state, &body)?;
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
    let started = Out {
        event: None,
        data: encoder.started(),
    };
    let going_on = !(input.resume.is_empty() && results.is_empty());
    let (feed, answered, after, from) = if !going_on {
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
        let files = super::inline_files::ag_ui(&last["content"]);
        if text.trim().is_empty() && files.is_empty() {
            return Err(ApiError::BadRequest(
                "the user's message has no text and no file".into(),
            ));
        }
        let files = super::inline_files::attach(&state, user, chat_id, &files).await?;
        let agent = input.forwarded_props["agent"]
            .as_str()
            .unwrap_or(&state.config.default_agent);
        let context = run_context(&input);
        let (feed, before) = match rewound(&state, user, chat_id, &input.messages).await? {
            // The input goes back on the active path: the message there is
            // edited (a branch), as `chat.edit` does.
            Some(nth) => {
                let caller = crate::session::Caller {
                    context: context.as_ref(),
                    client_tools: &input.tools,
                    attachments: Some(&files),
                    ..crate::session::Caller::bearing(user, auth.token.as_deref())
                };
                super::sse::stream::begin_edit(&state, caller, chat_id, nth, text).await?
            }
            None => {
                let turn = Turn {
                    context: context.as_ref(),
                    client_tools: &input.tools,
                    attachments: Some(&files),
                    ..Turn::say(user, auth.token.as_deref(), (chat_id, derived), agent, text)
                };
                begin_turn(&state, turn).await?
            }
        };
        (feed, Vec::new(), before, before)
    } else {
        match answer(&state, user, chat_id, &input.resume, results).await? {
            Answered::Going(feed, answered, after, from) => (feed, answered, after, from),
            // Nothing of it was waited on, and the run is over.
            Answered::Over(after) => {
                let over = Out {
                    event: None,
                    data: AgUi::new(input.thread_id, input.run_id, after).over(),
                };
                let framer = Framer::new(
                    Box::new(AgUi::new(String::new(), String::new(), 0)),
                    Shows::Response,
                    after,
                );
                let mut items = Vec::new();
                framer.opening(vec![started, over], after, &mut items);
                return Ok(respond_items(chat_id, futures_util::stream::iter(items)));
            }
        }
    };
    // Going on after `after`: the run is read from its start (`from`), so
    // what it still waits on is known, without sending what the client has.
    let mut framer = Framer::new(Box::new(encoder), Shows::Response, from).expecting(answered);
    if going_on {
        framer = framer.holding(EventId::after(after));
    }
    let mut prelude = Vec::new();
    framer.opening(vec![started], after, &mut prelude);
    Ok(respond(chat_id, prelude, feed, framer))
}

/// Whether a run input's `messages` go back on the thread's active path:
/// the user's messages before its last are the first `k` of the path's
/// (same texts, in order, at least one) and the path has more. Then its
/// last message edits the path's `k`-th (0-based) and the thread forks
/// there. An input that holds only its new message, or a history that is
/// not the path's, is an ordinary turn.
async fn rewound(
    state: &AppState,
    user: &str,
    chat_id: uuid::Uuid,
    messages: &[Value],
) -> Result<Option<usize>, ApiError> {
    let sent: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| text_parts(&m["content"]))
        .collect();
    let k = sent.len().saturating_sub(1);
    if k == 0 {
        return Ok(None);
    }
    // Most inputs hold the whole path and a new message: one read of the
    // path's user texts (input answers among them) rules a rewind out.
    let path = match state.registry.history(chat_id, user, u64::MAX).await {
        Ok(path) => path,
        Err(crate::session::SessionError::NotFound) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let user_texts = path
        .iter()
        .filter(|e| matches!(&e.kind, crate::protocol::EventKind::Text { agent, .. } if agent == "user"))
        .count();
    if k >= user_texts {
        return Ok(None);
    }
    let said = state.registry.run_messages(chat_id, user).await?;
    let prefix = said.len() > k && sent[..k].iter().zip(&said).all(|(a, b)| a == b);
    Ok(prefix.then_some(k))
}

/// What answering a run input's interrupts and tool results came to.
enum Answered {
    /// The stream's queue (from the run's start), the requests answered now,
    /// the seq the previous response stopped at, and the seq the queue
    /// starts after (the run's start).
    Going(Feed, Vec<String>, u64, u64),
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
    let (_, last) = registry.chat(chat_id, user).await?;
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
            // A cancel logs no answer to wait for: the run's end comes.
            Ok(()) => {
                routed = true;
                if resolved {
                    answered.push(corr);
                }
            }
            // Answered before: in the log already.
            Err(SessionError::RequestNotFound(_)) => {}
            Err(e) => {
                registry.unsubscribe(chat_id, sub.conn_id).await;
                return Err(e.into());
            }
        }
    }
    // Nothing it answers was waiting and nothing was logged since the last
    // response stopped (a run input sent again): over at once, not a wait.
    if !routed && last <= after {
        registry.unsubscribe(chat_id, sub.conn_id).await;
        return Ok(Answered::Over(after));
    }
    Ok(Answered::Going(
        feed,
        answered,
        after,
        start.saturating_sub(1),
    ))
}

/// What a rejoin may say of the client's run.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
pub(super) struct RejoinQuery {
    /// The `runId` the events name (the client's run; `run-<seq of the
    /// run's start>` by default).
    #[serde(default)]
    run_id: Option<String>,
}

/// Rejoins the thread's run in flight (204 when none): from its start, or
/// after `Last-Event-ID` (an event's id) exactly what its stream would have
/// sent next, the run over or not.
#[utoipa::path(get, path = "/v1/ag-ui/{thread}/stream", tag = "ag-ui", params(("thread" = String, Path), RejoinQuery),
    responses((status = 200, content_type = "text/event-stream", description = "the run in flight as AG-UI events"),
              (status = 204, description = "no run in flight, or an opening's id with nothing logged after it"),
              (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn rejoin(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(thread): Path<String>,
    Query(query): Query<RejoinQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (chat_id, _) = conversation_chat(&user, Some(&thread));
    let seen = last_event_id(&headers)?;
    let (last_start, running) = state.registry.last_run(chat_id, &user).await?;
    // The run the client's next event belongs to, read from its start.
    let next = match seen {
        Some(id) if matches!(id.at, At::Opening(_)) => id.seq.saturating_add(1),
        Some(id) => id.seq,
        None => last_start,
    };
    // Nothing in flight, and nothing of a finished run missed.
    if !running && (seen.is_none() || state.registry.last_seq(chat_id).await? < next) {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let run_start = state.registry.run_start(chat_id, &user, next).await?;
    let from = run_start.saturating_sub(1);
    let (_, feed) = follow(&state, &user, chat_id, from).await?;
    let run = query
        .run_id
        .filter(|r| !r.is_empty() && r.len() <= 256)
        .unwrap_or_else(|| format!("run-{run_start}"));
    let encoder = AgUi::new(thread, run, 0);
    let shows = match seen {
        Some(id) if !id.whole => Shows::Response,
        _ => Shows::Run,
    };
    let started = encoder.started();
    let mut framer = Framer::new(Box::new(encoder), shows, from);
    if let Some(id) = seen {
        framer = framer.holding(id);
    }
    // From the run's start (or inside that opening): RUN_STARTED, then the
    // thread up to the run's own first envelope (its user's words).
    let mut prelude = Vec::new();
    if seen.is_none_or(|id| matches!(id.at, At::Opening(rest) if rest > 0)) {
        let history = state.registry.history(chat_id, &user, u64::MAX).await?;
        let messages: Vec<Value> = before_run(&history, run_start)
            .filter_map(message)
            .collect();
        let opening = vec![
            Out {
                event: None,
                data: started,
            },
            Out {
                event: None,
                data: json!({"type": "MESSAGES_SNAPSHOT", "messages": messages}).to_string(),
            },
        ];
        framer.opening(opening, from, &mut prelude);
    }
    Ok(respond(chat_id, prelude, feed, framer))
}

/// The thread before the run that starts at `start`, with the run's own
/// user's words (a title may sit between the last run's end and them).
fn before_run(
    history: &[crate::protocol::Envelope],
    start: u64,
) -> impl Iterator<Item = &crate::protocol::Envelope> {
    use crate::protocol::EventKind;
    let user = |e: &crate::protocol::Envelope| matches!(&e.kind, EventKind::Text { agent, .. } if agent == "user");
    let answered = history
        .iter()
        .find(|e| e.seq >= start && !user(e) && !matches!(e.kind, EventKind::Branch { .. }))
        .map_or(u64::MAX, |e| e.seq);
    history
        .iter()
        .filter(move |e| e.seq < start || (e.seq < answered && user(e)))
}

/// An envelope of the transcript as an AG-UI message.
pub(super) fn message(env: &crate::protocol::Envelope) -> Option<Value> {
    use crate::protocol::EventKind;
    let id = format!("msg-{}", env.seq);
    Some(match &env.kind {
        EventKind::Text { agent, content } if agent == "user" && env.attachments.is_empty() => {
            json!({"id": id, "role": "user", "content": content})
        }
        EventKind::Text { agent, content } if agent == "user" => {
            json!({"id": id, "role": "user", "content": super::inline_files::ag_ui_content(env, content)})
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
