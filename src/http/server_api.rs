//! The server API: what a backend does with a service key (never as a
//! user). With `publish`: start a chat for a user (an agent's first turn,
//! from an event of the backend's) and post into a user's chat as the
//! agent or as the system (a message, a widget, files it uploaded to the
//! chat). With `read`: a user's chats. Everything is logged and delivered
//! live like any envelope.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use super::api::{ErrorBody, FileRefBody, file_refs};
use super::auth::ServiceCaller;
use super::chats::{chat_id, parse_body};
use super::error::ApiError;
use super::files::{FileView, file_view};
use super::state::AppState;
use super::views::{ChatList, ChatView, chat_view};
use crate::auth::Scope;
use crate::protocol::{Display, EventKind, SYSTEM_SPEAKER, limits};
use crate::session::Caller;

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/server/chats", post(start_chat))
        .route("/v1/server/chats/{id}/posts", post(post_into))
        // The body is streamed by the handler, within an upload's limits.
        .route(
            "/v1/server/chats/{id}/files",
            post(upload).layer(DefaultBodyLimit::disable()),
        )
        .route("/v1/server/users/{user}/chats", get(user_chats))
}

/// `POST /v1/server/chats`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerStartChat {
    /// The user the chat is for (its owner).
    pub user: String,
    /// An agent or a template.
    pub agent: String,
    #[serde(default)]
    pub chat_id: Option<Uuid>,
    /// The first turn, as the user's words (an event the backend reports:
    /// "the export finished"); none, and an agent that speaks first begins
    /// on its own.
    #[serde(default)]
    pub message: Option<String>,
    /// UI state kept with the chat and given to the agent.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub context: Option<Map<String, Value>>,
}

/// Who a post speaks as.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PostAs {
    /// The chat's agent (or the member `agent` names).
    #[default]
    Agent,
    /// The application itself (`agent: "system"`).
    System,
}

/// A component a post shows.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PostWidget {
    /// The client's component to render (letters, digits, `_`, `-`, `.`).
    pub component_type: String,
    /// Its data.
    #[schema(value_type = Object)]
    pub payload: Value,
    /// `inline` (in the flow) or `artifact` (a side panel the user may
    /// patch).
    #[serde(default)]
    #[schema(value_type = String)]
    pub display: Display,
    /// The tool name logged with it [default: `show_<component_type>`].
    #[serde(default)]
    pub tool_name: Option<String>,
}

/// `POST /v1/server/chats/{id}/posts`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerPost {
    /// The chat's owner (a post into another user's chat is a 404).
    pub user: String,
    #[serde(default, rename = "as")]
    pub as_: PostAs,
    /// With `as: agent`: the speaker, an agent id [default: the chat's].
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub widget: Option<PostWidget>,
    /// Files uploaded to this chat for the user
    /// (`POST /v1/server/chats/{id}/files`), each shown as a file handed
    /// back (`share_file`'s result: `{type: "file", file_id, name,
    /// media_type, size}`), after the text and the widget.
    #[serde(default)]
    pub attachments: Vec<FileRefBody>,
}

/// What a post logged.
#[derive(Debug, Serialize, ToSchema)]
pub struct Posted {
    pub chat_id: Uuid,
    /// The chat's last seq after the post.
    pub last_seq: u64,
    /// The widget's `corr`, to find its `chat.tool_call`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corr: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub(super) struct ServerUploadQuery {
    /// The chat's owner, whose file it becomes.
    user: String,
    /// The file's name, as the user sees it [default: `file`].
    #[serde(default)]
    name: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub(super) struct UserChatsQuery {
    /// At most this many [default: 20, at most 100].
    limit: Option<u32>,
}

/// A user id as a path or a body names it: as a token's `sub` may be.
pub(super) fn user_id(user: &str) -> Result<&str, ApiError> {
    if user.is_empty() || user.len() > 256 || limits::has_control_chars(user) {
        return Err(ApiError::BadRequest(
            "`user`: 1 to 256 bytes, no control characters".into(),
        ));
    }
    Ok(user)
}

fn name_like(field: &str, value: &str) -> Result<(), ApiError> {
    let ok = !value.is_empty()
        && value.len() <= 64
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    match ok {
        true => Ok(()),
        false => Err(ApiError::BadRequest(format!(
            "`{field}`: 1 to 64 letters, digits, `_`, `-` or `.`"
        ))),
    }
}

/// Starts a chat for a user, as `POST /v1/chats` would for them.
#[utoipa::path(post, path = "/v1/server/chats", tag = "server", request_body = ServerStartChat,
    security(("service_key" = ["publish"])),
    responses((status = 201, body = ChatView), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 409, body = ErrorBody), (status = 422, body = ErrorBody),
              (status = 429, body = ErrorBody)))]
pub(super) async fn start_chat(
    State(state): State<AppState>,
    key: ServiceCaller,
    body: Bytes,
) -> Result<Response, ApiError> {
    key.must(Scope::Publish)?;
    let body: ServerStartChat = parse_body(&body)?;
    let user = user_id(&body.user)?;
    if body.message.as_deref().is_some_and(|m| m.trim().is_empty()) {
        return Err(ApiError::BadRequest("`message` must not be empty".into()));
    }
    let id = body.chat_id.unwrap_or_else(Uuid::new_v4);
    if state.registry.chat(id, user).await.is_ok() {
        return Err(ApiError::Conflict(format!("chat {id} exists already")));
    }
    let caller = Caller {
        context: body.context.as_ref(),
        ..Caller::user(user)
    };
    state
        .registry
        .start(id, caller, &body.agent, body.message, None)
        .await?;
    tracing::info!(key = %key.0.name, chat = %id, "a service key started a chat");
    let (chat, last_seq) = state.registry.chat(id, user).await?;
    Ok((StatusCode::CREATED, Json(chat_view(&chat, Some(last_seq)))).into_response())
}

/// Posts into a user's chat between runs: a message, a widget or both, as
/// the agent or as the system. While a run is going: 409
/// `RUN_IN_PROGRESS` (try again when it ends).
#[utoipa::path(post, path = "/v1/server/chats/{id}/posts", tag = "server",
    params(("id" = Uuid, Path)), request_body = ServerPost,
    security(("service_key" = ["publish"])),
    responses((status = 201, body = Posted), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
              (status = 429, body = ErrorBody)))]
pub(super) async fn post_into(
    State(state): State<AppState>,
    key: ServiceCaller,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    key.must(Scope::Publish)?;
    let id = chat_id(&id)?;
    let body: ServerPost = parse_body(&body)?;
    let user = user_id(&body.user)?;
    let (chat, _) = state.registry.chat(id, user).await?;
    let speaker = match (body.as_, body.agent) {
        (PostAs::System, None) => SYSTEM_SPEAKER.to_owned(),
        (PostAs::System, Some(_)) => {
            return Err(ApiError::BadRequest(
                "`agent` names the speaker of `as: agent` only".into(),
            ));
        }
        (PostAs::Agent, None) => chat.agent.clone(),
        (PostAs::Agent, Some(agent)) => {
            if state.registry.agents().get(&agent).is_none() {
                return Err(ApiError::BadRequest(format!(
                    "no agent has the id `{agent}`"
                )));
            }
            agent
        }
    };
    let mut events = Vec::new();
    if let Some(text) = body.text {
        if text.trim().is_empty() {
            return Err(ApiError::BadRequest("`text` must not be empty".into()));
        }
        if text.len() > limits::MAX_TEXT_BYTES {
            let max = limits::MAX_TEXT_BYTES;
            let e = crate::session::SessionError::TooLarge(format!("`text` is over {max} bytes"));
            return Err(e.into());
        }
        // As an agent's turn is logged: its words (a line at a time), then
        // the whole text (a dialect that streams words shows the post too).
        events.extend(text.split_inclusive('\n').map(|line| EventKind::Print {
            agent: speaker.clone(),
            content: line.to_owned(),
            corr: None,
        }));
        events.push(EventKind::Text {
            agent: speaker.clone(),
            content: text,
        });
    }
    let mut corr = None;
    if let Some(widget) = body.widget {
        name_like("widget.component_type", &widget.component_type)?;
        let tool_name = match widget.tool_name {
            Some(name) => {
                name_like("widget.tool_name", &name)?;
                name
            }
            None => format!("show_{}", widget.component_type),
        };
        let c = format!("post-{}", Uuid::new_v4().simple());
        events.push(EventKind::ToolCall {
            tool_name: tool_name.clone(),
            component_type: Some(widget.component_type),
            awaiting_response: false,
            payload: widget.payload,
            corr: c.clone(),
            display: widget.display,
            agent: None,
        });
        // Shown, not waited on: its result is logged with it, so the
        // model's history holds a whole call.
        events.push(EventKind::ToolResponse {
            tool_name,
            content: Value::String("shown to the user".into()),
            success: true,
            corr: c.clone(),
            agent: None,
        });
        corr = Some(c);
    }
    if !body.attachments.is_empty() {
        let refs = file_refs(&body.attachments);
        let caller = Caller {
            attachments: Some(&refs),
            ..Caller::user(user)
        };
        for file in state
            .registry
            .attachments(id, caller)
            .await?
            .unwrap_or_default()
        {
            let c = format!("post-{}", Uuid::new_v4().simple());
            let tool_name = "share_file".to_owned();
            events.push(EventKind::ToolCall {
                tool_name: tool_name.clone(),
                component_type: None,
                awaiting_response: false,
                payload: serde_json::json!({"file_id": file.file_id, "name": file.name}),
                corr: c.clone(),
                display: Display::Inline,
                agent: None,
            });
            // As `save_file` hands a file back.
            let mut content =
                serde_json::to_value(&file).map_err(|e| ApiError::Internal(e.to_string()))?;
            content["type"] = Value::String("file".into());
            events.push(EventKind::ToolResponse {
                tool_name,
                content,
                success: true,
                corr: c,
                agent: None,
            });
        }
    }
    if events.is_empty() {
        return Err(ApiError::BadRequest(
            "post a `text`, a `widget`, `attachments` or more".into(),
        ));
    }
    state.registry.post(id, user, speaker, events).await?;
    let (_, last_seq) = state.registry.chat(id, user).await?;
    let posted = Posted {
        chat_id: id,
        last_seq,
        corr,
    };
    Ok((StatusCode::CREATED, Json(posted)).into_response())
}

/// Uploads a file into a user's chat for a post to show: the raw body is
/// the file (or a multipart form's file part), through the limits of a
/// user's upload, counted against the user's quota and rate.
#[utoipa::path(post, path = "/v1/server/chats/{id}/files", tag = "server",
    params(("id" = Uuid, Path), ServerUploadQuery),
    request_body(description = "The file's bytes, with its Content-Type; or a multipart form \
        whose first part with a filename is the file",
        content((Vec<u8> = "application/octet-stream"), (Vec<u8> = "multipart/form-data"))),
    security(("service_key" = ["publish"])),
    responses((status = 201, body = FileView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 408, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody)))]
pub(super) async fn upload(
    State(state): State<AppState>,
    key: ServiceCaller,
    Path(id): Path<String>,
    Query(q): Query<ServerUploadQuery>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    key.must(Scope::Publish)?;
    let id = chat_id(&id)?;
    let user = user_id(&q.user)?;
    // Into a chat the user has (a user's own upload may go to one not
    // started yet; a backend's has nothing to start).
    state.registry.chat(id, user).await?;
    let file = super::files::take(&state, user, id, q.name, &headers, body).await?;
    Ok((StatusCode::CREATED, Json(file_view(&file))).into_response())
}

/// A user's chats, latest activity first (pinned first, as they see them).
#[utoipa::path(get, path = "/v1/server/users/{user}/chats", tag = "server",
    params(("user" = String, Path), UserChatsQuery),
    security(("service_key" = ["read"])),
    responses((status = 200, body = ChatList), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 429, body = ErrorBody)))]
pub(super) async fn user_chats(
    State(state): State<AppState>,
    key: ServiceCaller,
    Path(user): Path<String>,
    Query(q): Query<UserChatsQuery>,
) -> Result<Response, ApiError> {
    key.must(Scope::Read)?;
    let user = user_id(&user)?;
    let limit = q.limit.unwrap_or(20).clamp(1, 100);
    let chats = state.registry.list(user, false, None, limit).await?;
    let list = ChatList {
        chats: chats.iter().map(|c| chat_view(c, None)).collect(),
        next_cursor: None,
    };
    Ok(Json(list).into_response())
}
