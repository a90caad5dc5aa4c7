//! A chat's conversation as a tree over REST: read its branch points, edit
//! a user's message, answer one again, switch versions. Each write goes
//! through the same registry call as its WebSocket message (`chat.edit`,
//! `chat.regenerate`, `chat.switch`), so the checks, the log and the error
//! codes are the same; only the chat's owner may branch it (another user's
//! chat is 404, like a missing one).

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::api::{Accepted, ErrorBody};
use super::auth::AuthUser;
use super::chats::{chat_id, parse_body};
use super::error::ApiError;
use super::state::AppState;
use crate::session::{Caller, MessageRef};

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/chats/{id}/branches", get(branches))
        .route("/v1/chats/{id}/messages/{seq}/edit", post(edit))
        .route("/v1/chats/{id}/regenerate", post(regenerate))
        .route("/v1/chats/{id}/switch", post(switch))
        .route("/v1/chats/{id}/fork", post(fork))
        .route("/v1/chats/{id}/path", get(path))
}

/// A chat's tree: where the conversation goes on, and every point where it
/// has two versions or more.
#[derive(Debug, Serialize, ToSchema)]
pub struct BranchesView {
    pub chat_id: Uuid,
    /// The log's last seq.
    pub last_seq: u64,
    /// The end of the active path (0: before the first envelope).
    pub pointer: u64,
    pub points: Vec<PointView>,
}

/// A point where the conversation has versions (`‹ 2/3 ›`).
#[derive(Debug, Serialize, ToSchema)]
pub struct PointView {
    /// The envelope the versions follow (0: the chat's start).
    pub at: u64,
    /// Each version's first envelope, oldest first.
    pub versions: Vec<u64>,
    /// The version on the active path, if one is.
    pub active: Option<u64>,
}

/// `POST /v1/chats/{id}/messages/{seq}/edit`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EditMessage {
    /// The new text of the message.
    pub text: String,
    /// Makes a retried edit take effect once.
    #[serde(default)]
    pub client_msg_id: Option<String>,
    /// The files the new version attaches (absent: the edited message's);
    /// `text` may be empty when it attaches some.
    #[serde(default)]
    pub attachments: Option<Vec<super::api::FileRefBody>>,
}

/// `POST /v1/chats/{id}/regenerate`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Regenerate {
    /// The user's message whose answer to redo (default: the last one on
    /// the active path).
    #[serde(default)]
    pub seq: Option<u64>,
    /// A model or alias of the server's for this run only.
    #[serde(default)]
    pub model: Option<String>,
}

/// `POST /v1/chats/{id}/switch`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Switch {
    /// A version's first envelope (from `versions`), or any envelope in it.
    pub to: u64,
}

/// `POST /v1/chats/{id}/fork`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Fork {
    /// The `chat.run_complete` the copy ends with (default: the end of the
    /// active path).
    #[serde(default)]
    pub at: Option<u64>,
    /// The new chat's id (default: a new random UUID).
    #[serde(default)]
    pub chat_id: Option<Uuid>,
}

/// `POST /v1/chats/{id}/fork` → 201.
#[derive(Debug, Serialize, ToSchema)]
pub struct Forked {
    /// The new chat, as `GET /v1/chats/{id}` shows it.
    pub chat: super::views::ChatView,
    pub forked_from: ForkedFrom,
}

/// Where a fork was taken.
#[derive(Debug, Serialize, ToSchema)]
pub struct ForkedFrom {
    pub chat_id: Uuid,
    /// The source's envelope the copy ends with.
    pub seq: u64,
}

/// `GET /v1/chats/{id}/path` query.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct PathQuery {
    /// The envelope the path ends at (default: the active path's end).
    pub leaf: Option<u64>,
    /// Only envelopes of the path with a higher seq (default 0).
    pub after: Option<u64>,
    /// At most this many (1..=1000, default 100).
    pub limit: Option<u32>,
}

/// `GET /v1/chats/{id}/path`.
#[derive(Debug, Serialize, ToSchema)]
// The response's schema: `path` writes it around the stored JSON.
#[allow(dead_code)]
pub struct PathPage {
    pub chat_id: Uuid,
    /// The envelope the path ends at.
    pub leaf: u64,
    /// The path's envelopes, as on the WebSocket, in seq order.
    #[schema(value_type = Vec<Object>)]
    pub events: Vec<serde_json::Value>,
    /// Pass as `after` for the next page; `null` on the last one.
    pub next_after: Option<u64>,
}

/// The longest `model` name (as in `protocol/inbound/chat.regenerate.json`).
const MAX_MODEL: usize = 128;

/// The chat's branch points.
#[utoipa::path(get, path = "/v1/chats/{id}/branches", tag = "rest", params(("id" = Uuid, Path)),
    responses((status = 200, body = BranchesView), (status = 404, body = ErrorBody)))]
pub(super) async fn branches(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
) -> Result<Json<BranchesView>, ApiError> {
    let b = state.registry.branches(chat_id(&id)?, &user).await?;
    Ok(Json(BranchesView {
        chat_id: b.chat_id,
        last_seq: b.last_seq,
        pointer: b.pointer,
        points: b
            .points
            .into_iter()
            .map(|p| PointView {
                at: p.at,
                versions: p.versions,
                active: p.active,
            })
            .collect(),
    }))
}

fn accepted(chat_id: Uuid) -> Response {
    let body = Accepted {
        chat_id,
        accepted: true,
    };
    (StatusCode::ACCEPTED, Json(body)).into_response()
}

/// Edits the user's message `seq` (one that started a run): a `chat.branch`
/// and the new text are logged, and a run on the history before it starts.
#[utoipa::path(post, path = "/v1/chats/{id}/messages/{seq}/edit", tag = "rest",
    params(("id" = Uuid, Path), ("seq" = u64, Path)), request_body = EditMessage,
    responses((status = 202, body = Accepted), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody, description = "no such chat of yours, or MESSAGE_NOT_FOUND: `seq` is not a user's message that started a run"),
              (status = 409, body = ErrorBody, description = "RUN_IN_PROGRESS, BRANCH_LIMIT_EXCEEDED, or a template conversation (SCHEMA_VALIDATION_FAILED)"),
              (status = 413, body = ErrorBody)))]
pub(super) async fn edit(
    State(state): State<AppState>,
    auth: AuthUser,
    Path((id, seq)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let id = chat_id(&id)?;
    let seq = seq_of(&seq)?;
    let body: EditMessage = parse_body(&body)?;
    let files = body.attachments.as_deref().map(super::api::file_refs);
    if body.text.trim().is_empty() && files.as_ref().is_none_or(Vec::is_empty) {
        return Err(ApiError::BadRequest(
            "`text` must not be empty unless the message attaches files".into(),
        ));
    }
    if body
        .client_msg_id
        .as_ref()
        .is_some_and(|m| m.is_empty() || m.len() > 128)
    {
        return Err(ApiError::BadRequest(
            "`client_msg_id` must be 1 to 128 bytes".into(),
        ));
    }
    let caller = Caller {
        attachments: files.as_deref(),
        ..Caller::bearing(&auth.user, auth.token.as_deref())
    };
    state
        .registry
        .edit(
            id,
            caller,
            MessageRef::Seq(seq),
            body.text,
            body.client_msg_id,
        )
        .await?;
    Ok(accepted(id))
}

/// Answers a user's message again: a `chat.branch` to it is logged and a
/// new run starts; the old answer stays as another version.
#[utoipa::path(post, path = "/v1/chats/{id}/regenerate", tag = "rest",
    params(("id" = Uuid, Path)), request_body = Regenerate,
    responses((status = 202, body = Accepted), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody, description = "no such chat of yours, or MESSAGE_NOT_FOUND"),
              (status = 409, body = ErrorBody, description = "RUN_IN_PROGRESS, BRANCH_LIMIT_EXCEEDED, or a template conversation"),
              (status = 422, body = ErrorBody, description = "no such model")))]
pub(super) async fn regenerate(
    State(state): State<AppState>,
    auth: AuthUser,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let id = chat_id(&id)?;
    let body: Regenerate = if body.is_empty() {
        Regenerate::default()
    } else {
        parse_body(&body)?
    };
    if body.seq == Some(0) {
        return Err(ApiError::BadRequest("`seq` must be 1 or more".into()));
    }
    if body
        .model
        .as_ref()
        .is_some_and(|m| m.is_empty() || m.len() > MAX_MODEL)
    {
        return Err(ApiError::BadRequest(format!(
            "`model` must be 1 to {MAX_MODEL} bytes"
        )));
    }
    let caller = Caller::bearing(&auth.user, auth.token.as_deref());
    state
        .registry
        .regenerate(id, caller, body.seq, body.model.as_deref())
        .await?;
    Ok(accepted(id))
}

/// Makes the version holding `to` the active one: the chat goes on where
/// the user last was in it (nothing is logged if it is there already).
#[utoipa::path(post, path = "/v1/chats/{id}/switch", tag = "rest",
    params(("id" = Uuid, Path)), request_body = Switch,
    responses((status = 200, body = BranchesView, description = "the tree after the switch"),
              (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody, description = "no such chat of yours, or MESSAGE_NOT_FOUND"),
              (status = 409, body = ErrorBody, description = "RUN_IN_PROGRESS, BRANCH_LIMIT_EXCEEDED, or a template conversation")))]
pub(super) async fn switch(
    State(state): State<AppState>,
    auth: AuthUser,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<BranchesView>, ApiError> {
    let chat = chat_id(&id)?;
    let Switch { to } = parse_body(&body)?;
    if to == 0 {
        return Err(ApiError::BadRequest("`to` must be 1 or more".into()));
    }
    state.registry.switch(chat, &auth.user, to).await?;
    branches(State(state), auth, Path(id)).await
}

/// A new chat of the caller's that holds the path of this one up to the end
/// of an answer (its turns, tool calls and results; not the streamed words,
/// which the texts hold): the conversation goes on there on its own.
#[utoipa::path(post, path = "/v1/chats/{id}/fork", tag = "rest",
    params(("id" = Uuid, Path)), request_body = Fork,
    responses((status = 201, body = Forked), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody, description = "no such chat of yours, or MESSAGE_NOT_FOUND: `at` ends no answer"),
              (status = 409, body = ErrorBody, description = "the new id is taken, or BRANCH_LIMIT_EXCEEDED: the path is longer than a fork copies")))]
pub(super) async fn fork(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let id = chat_id(&id)?;
    let body: Fork = if body.is_empty() {
        Fork::default()
    } else {
        parse_body(&body)?
    };
    let into = body.chat_id.unwrap_or_else(Uuid::new_v4);
    let (chat, last, seq) = state.registry.fork(id, &user, body.at, into).await?;
    let forked = Forked {
        chat: super::views::chat_view(&chat, Some(last)),
        forked_from: ForkedFrom { chat_id: id, seq },
    };
    Ok((StatusCode::CREATED, Json(forked)).into_response())
}

/// One branch of the conversation read whole: the envelopes of the path to
/// `leaf` (default: the active one), paged like `GET /v1/chats/{id}/events`.
#[utoipa::path(get, path = "/v1/chats/{id}/path", tag = "rest",
    params(("id" = Uuid, Path), PathQuery),
    responses((status = 200, body = PathPage),
              (status = 404, body = ErrorBody, description = "no such chat of yours, or MESSAGE_NOT_FOUND: `leaf` is not an envelope of the conversation")))]
pub(super) async fn path(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
    axum::extract::Query(q): axum::extract::Query<PathQuery>,
) -> Result<Response, ApiError> {
    let id = chat_id(&id)?;
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let (leaf, events, next_after) = state
        .registry
        .path_page(id, &user, q.leaf, q.after.unwrap_or(0), limit)
        .await?;
    // A `PathPage`, written around the envelopes' JSON as stored (each an
    // object `Envelope::to_json` wrote): a long path is not parsed and
    // serialized again.
    let mut body = String::with_capacity(events.iter().map(|e| e.len() + 1).sum::<usize>() + 128);
    body.push_str(&format!(r#"{{"chat_id":"{id}","leaf":{leaf},"events":["#));
    for (i, e) in events.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(e);
    }
    body.push_str(r#"],"next_after":"#);
    body.push_str(&next_after.map_or_else(|| "null".to_owned(), |n| n.to_string()));
    body.push('}');
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

fn seq_of(seq: &str) -> Result<u64, ApiError> {
    seq.parse::<u64>()
        .ok()
        .filter(|&s| s > 0)
        .ok_or_else(|| ApiError::BadRequest(format!("`{seq}` is not a seq (1 or more)")))
}
